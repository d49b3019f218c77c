"""Bad input, every command: exit code 2, one line naming the file (and line), no traceback, nothing written.

The commands are a table (:data:`COMMANDS`): a name, the kind of input file it takes and how to put the
bad file in its command line. A new command joins the test with one row; the bad files (:data:`BAD`) are
made for each input kind. A command whose input is a data file (a table, a database) rather than JSONL
gets the kinds that make sense for a data file; a folder is a valid data input (a dataset folder), so it
is not in its list.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.types import Task, Trajectory

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "examples" / "data"
NO_MODEL = "openai:m@http://127.0.0.1:9/v1"  # never reached: the input is refused first
BIG = 100 * 1024 * 1024


@dataclass(frozen=True)
class Command:
    """One command under test: ``argv(bad_path, out_dir)``, taking an input of ``kind``."""

    name: str
    kind: str  # "tasks" | "trajectories" | "predictions" | "data" | "code"
    argv: Callable[..., list[str]]  # (bad_path, out_dir), then the `needs` path when there is one
    needs: str | None = None  # real benchmark data under ../shared/data (skip when absent)


#: Every command that reads a file, with the argument the bad file goes into. Add a row per new command.
COMMANDS: list[Command] = [
    Command("rollout", "tasks", lambda p, o: ["rollout", str(p), "--model", NO_MODEL, "--out", str(o)]),
    Command("warmup solve", "tasks", lambda p, o: ["warmup", "solve", str(p), "--out", str(o / "t.jsonl")]),
    Command("warmup audit", "tasks", lambda p, o: ["warmup", "audit", str(p)]),
    Command("export verl", "tasks", lambda p, o: ["export", "verl", "--tasks", str(p), "--out", str(o)]),
    Command(
        "export trl", "trajectories", lambda p, o: ["export", "trl", "--data", str(p), "--out", str(o / "x")]
    ),
    Command(
        "export llamafactory",
        "trajectories",
        lambda p, o: ["export", "llamafactory", "--data", str(p), "--out", str(o)],
    ),
    Command(
        "train sft",
        "trajectories",
        lambda p, o: ["train", "sft", "--data", str(p), "--model", "hf:/nonexistent", "--out", str(o)],
    ),
    Command(
        "score",
        "predictions",
        lambda p, o, data: ["score", "dabench", "--data", str(data), "--predictions", str(p)],
        needs="dabench",
    ),
    Command(
        "ask", "data", lambda p, o: ["ask", str(p), "How many rows?", "--model", NO_MODEL, "--out", str(o)]
    ),
    Command("exec --data", "data", lambda p, o: ["exec", str(DATA.parent / "turn1.py"), "--data", str(p)]),
    Command("exec TURN", "code", lambda p, o: ["exec", str(p)]),
    Command("corpus show", "data", lambda p, o: ["corpus", "show", str(p)]),
    Command(
        "warmup build",
        "data",
        lambda p, o: ["warmup", "build", str(p), "--n", "2", "--out", str(o / "t.jsonl")],
    ),
]


def _task_line(i: int) -> bytes:
    return Task(id=f"t{i}", question="How many rows?").model_dump_json().encode() + b"\n"


def _trajectory_line(i: int) -> bytes:
    return (
        Trajectory(task_id=f"t{i}", stop_reason="answer", final_answer="1").model_dump_json().encode() + b"\n"
    )


def _valid_line(kind: str, i: int) -> bytes:
    if kind == "tasks":
        return _task_line(i)
    if kind == "predictions":
        return json.dumps({"id": str(i), "answer": "@x[1]"}).encode() + b"\n"
    return _trajectory_line(i)


def _wrong_line(kind: str, i: int) -> bytes:
    if kind == "predictions":  # a task or a trajectory can carry an answer; a corpus record cannot
        return json.dumps({"path": f"f{i}.csv", "kind": "csv", "accepted": True}).encode() + b"\n"
    return _trajectory_line(i) if kind == "tasks" else _task_line(i)


def _binary() -> bytes:
    rng = random.Random(0)
    return bytes(rng.randrange(256) for _ in range(4096))


def _make(bad: str, kind: str, tmp: Path) -> tuple[Path, int | None]:
    """The bad file of kind ``bad`` for an input of ``kind``, and the line the error must name (if any)."""
    suffix = {"data": ".csv", "code": ".py"}.get(kind, ".jsonl")
    path = tmp / f"bad-{bad}{suffix}"
    line = None
    if bad == "missing":
        pass
    elif bad == "directory":
        path.mkdir()
    elif bad == "empty":
        path.write_bytes(b"")
    elif bad == "truncated":  # a record cut mid-write: the last line
        path.write_bytes(_valid_line(kind, 0) + _valid_line(kind, 1)[:25])
        line = 2
    elif bad == "wrong_record":
        path.write_bytes(_valid_line(kind, 0) + _wrong_line(kind, 1))
        line = 2
    elif bad == "binary":
        path.write_bytes(_binary())
    elif bad == "non_utf8":
        if kind in ("data", "code"):
            path.write_bytes(
                b"name,city\nJos\xe9,M\xe1laga\n" * 30 if kind == "data" else b"print('caf\xe9')\n"
            )
        else:
            path.write_bytes(_valid_line(kind, 0) + b'{"id": "caf\xe9", "question": "q\xff"}\n')
            line = 2
    elif bad == "huge_line":  # 100 MB without a newline: sparse, so instant to make and free on disk
        with path.open("wb") as fh:
            fh.truncate(BIG)
        line = 1 if kind not in ("data", "code") else None
    else:  # pragma: no cover
        raise AssertionError(bad)
    return path, line


JSONL_BAD = ["missing", "directory", "empty", "truncated", "wrong_record", "binary", "non_utf8", "huge_line"]
#: A data file may legitimately be a folder (a dataset) and has no records; non-UTF-8 text is a valid CSV in
#: another encoding (the readers sniff it), so those kinds are not errors for data inputs.
DATA_BAD = ["missing", "empty", "binary", "huge_line"]
CODE_BAD = ["missing", "directory", "empty", "binary", "non_utf8", "huge_line"]
BAD = {
    "tasks": JSONL_BAD,
    "trajectories": JSONL_BAD,
    "predictions": JSONL_BAD,
    "data": DATA_BAD,
    "code": CODE_BAD,
}

CASES = [pytest.param(c, bad, id=f"{c.name}-{bad}") for c in COMMANDS for bad in BAD[c.kind]]


@pytest.mark.parametrize(("command", "bad"), CASES)
def test_bad_input_is_refused_cleanly(
    command: Command, bad: str, tmp_path: Path, shared_data: Callable[..., Path]
) -> None:
    needs = [] if command.needs is None else [shared_data(*Path(command.needs).parts)]
    inputs = tmp_path / "in"
    inputs.mkdir()
    path, line = _make(bad, command.kind, inputs)
    before = sorted(p.name for p in inputs.iterdir())
    out = tmp_path / "out"
    res = CliRunner().invoke(app, command.argv(path, out, *needs), env={"COLUMNS": "1000", "NO_COLOR": "1"})
    text = res.output
    assert res.exit_code == 2, f"exit {res.exit_code}:\n{text[-2000:]}\n{res.exception!r}"
    assert isinstance(res.exception, SystemExit), f"uncaught {res.exception!r}"
    assert "Traceback" not in text
    naming = [ln for ln in text.splitlines() if path.name in ln]
    assert len(naming) == 1, f"expected one line naming {path.name}:\n{text}"
    if line is not None:
        assert f"{path.name}:{line}" in naming[0], naming[0]
    if bad == "wrong_record" and command.kind in ("tasks", "trajectories"):
        assert "this looks like" in naming[0], naming[0]  # says what the file holds instead
    assert not out.exists(), f"wrote {sorted(str(p) for p in out.rglob('*'))}"
    assert sorted(p.name for p in inputs.iterdir()) == before  # nothing written beside the input either

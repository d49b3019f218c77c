"""The parity fixture, ``datadojo eval``'s rewards and the row files, for the environment-adapter engine tests.

The verifiers and OpenEnv tests play the parity tasks (:mod:`datadojo.testing.parity`: CSV, SQLite, a
DABench task scored by DABench's rule, an EnvLunch task with counterfactual copies; each with a right, a
wrong-entity, a malformed and a code-then-answer reply) through the framework, against the loopback model
server, and compare every reward with ``datadojo eval``'s for the same replies (run here too) and with the
papers' values by hand (``ParityFixture.expected_total``). Their rows go to ``$DATADOJO_PARITY_DIR/<consumer>.json`` for the parity table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datadojo.testing.parity import ParityFixture, parity_row, write_parity_fixture, write_rows

ROOT = Path(__file__).resolve().parents[2]
MAX_TURNS = 4  # as the main suite's parity rows (tests/env/test_parity.py): `eval -T 4`


@dataclass(frozen=True)
class ParitySet:
    """The fixture, split the way ``datadojo eval`` reads it: a task file (CSV, SQLite and EnvLunch tasks,
    beside the EnvLunch copies) and the DABench layout (``eval dabench``)."""

    fixture: ParityFixture
    task_file: Path  # what the adapters serve: CSV, SQLite and EnvLunch tasks
    eval_file: Path  # what `datadojo eval tasks` reads: the same less EnvLunch (eval refuses those)

    def ids(self, *kinds: str) -> list[str]:
        return [t.id for t in self.fixture.tasks if self.fixture.kind[t.id] in kinds]

    def expected(self, task_id: str) -> float:
        """The hand-computed reward (DataMind §4, EnvLunch Eq. 4; :data:`~datadojo.testing.parity.HAND_TOTALS`)."""
        return self.fixture.expected_total(task_id)


def parity_set(root: Path) -> ParitySet:
    fixture = write_parity_fixture(root)
    own = [t for t in fixture.tasks if fixture.kind[t.id] != "dabench-mean"]
    plain = [t for t in own if fixture.kind[t.id] != "envlunch-sql"]
    # beside the EnvLunch copies, as the fixture's own file
    task_file = fixture.tasks_path.with_name("adapter_tasks.jsonl")
    task_file.write_text("".join(t.model_dump_json() + "\n" for t in own), encoding="utf-8")
    eval_file = fixture.tasks_path.with_name("eval_tasks.jsonl")
    eval_file.write_text("".join(t.model_dump_json() + "\n" for t in plain), encoding="utf-8")
    return ParitySet(fixture, task_file, eval_file)


def subprocess_env() -> dict[str, str]:
    """This checkout's DataDojo first on the path, a key for the loopback server."""
    path = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "OPENAI_API_KEY": "loopback", "PYTHONPATH": path}


def datadojo_eval_rows(
    bench: str, data: Path, base_url: str, out: Path, *extra: str
) -> dict[str, dict[str, Any]]:
    """``datadojo eval BENCH --data DATA`` with the loopback model: a parity row per ``task/trial``, with the
    row's ``stop_reason``."""
    cmd = [sys.executable, "-m", "datadojo", "eval", bench, "--data", str(data), "--model",
           f"openai:parity@{base_url}", "-n", "1", "-T", str(MAX_TURNS), "--no-report", "--out", str(out), *extra]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=subprocess_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [
        json.loads(line) for line in (out / "scores.jsonl").read_text(encoding="utf-8").splitlines() if line
    ]
    return {
        f"{r['id']}/{r['trial']}": {
            **parity_row(r["rewards"]["total"], r["rewards"]),
            "stop_reason": r["stop_reason"],
        }
        for r in rows
    }


def check_rows(
    theirs: dict[str, dict[str, Any]], ours: dict[str, dict[str, Any]], ps: ParitySet, consumer: str
) -> None:
    """Every fixture task has a row; each equals eval's (total and parts, 1e-9) and the value by hand."""
    expected_keys = {f"{t.id}/0" for t in ps.fixture.tasks}
    assert set(theirs) == expected_keys, sorted(set(theirs) ^ expected_keys)
    for key, row in theirs.items():
        tid = key.rsplit("/", 1)[0]
        assert abs(row["total"] - ps.expected(tid)) <= 1e-9, (consumer, key, row, ps.expected(tid))
        if key in ours:
            assert abs(row["total"] - ours[key]["total"]) <= 1e-9, (consumer, key, row, ours[key])
            assert row["parts"].keys() == ours[key]["parts"].keys(), (consumer, key, row, ours[key])
            for name, value in ours[key]["parts"].items():
                assert abs(row["parts"][name] - value) <= 1e-9, (consumer, key, name, row, ours[key])
    envlunch = {f"{t}/0" for t in ps.ids("envlunch-sql")}
    assert set(ours) == expected_keys - envlunch, sorted(set(ours) ^ (expected_keys - envlunch))


def write_consumer_rows(consumer: str, rows: dict[str, dict[str, Any]], tmp: Path) -> Path:
    """``<consumer>.json`` in ``$DATADOJO_PARITY_DIR`` (the engine job's table) or under ``tmp``."""
    folder = Path(os.environ.get("DATADOJO_PARITY_DIR") or tmp / "parity")
    return write_rows(folder, consumer, rows)


#: A right, well-formed answer: the stop string cuts its ``</answer>`` (16 approximate tokens left) and a reply
#: budget of 15 then cuts the newline after ``43``: the server reports ``finish_reason="length"``, so the turn
#: is invalid (the environment must not re-close it as it re-closes a tag cut by a stop string, which would
#: make it the right answer, reward 1). Asked again, the model writes the same; after ``max_invalid_turns``
#: (3) such turns the episode ends ``invalid``.
CUT_REPLY = "<think>Sum.</think>\n<answer>\n43\n</answer>"
CUT_MAX_TOKENS = 15


def cut_task_file(ps: ParitySet) -> Path:
    """One task (the CSV total, answer 43) for the token-limit case."""
    (task,) = [t for t in ps.fixture.tasks if t.id == "csv-total.right"]
    path = ps.fixture.tasks_path.with_name("cut_tasks.jsonl")
    path.write_text(task.model_dump_json() + "\n", encoding="utf-8")
    return path


def cut_script(request: dict[str, Any]) -> str:
    """Every request gets :data:`CUT_REPLY` (the server cuts it at the request's reply budget, which must be
    the one the episode advertises)."""
    budget = request.get("max_tokens") or request.get("max_completion_tokens")  # verifiers sends the latter
    assert budget == CUT_MAX_TOKENS, request
    return CUT_REPLY

"""Kill-then-resume: SIGKILL a `datadojo synth sailor` process mid-run, rerun, and find every file whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from datadojo.jsonl import iter_jsonl, read_tasks
from datadojo.synth.sailor.pipeline import OUTPUT_FILES, clean_unfinished
from datadojo.testing.sailor_teacher import FakeSailor
from datadojo.testing.server import Hang, ScriptedLLMServer

SRC = Path(__file__).resolve().parents[3] / "src"
ARGS = ["--only", "L0-map", "--only", "L1-fields", "--max-nodes", "3", "--max-depth", "2", "--min-depth", "1",
        "--trajectories-per-seed", "1", "--k-max", "2", "--no-logprobs", "--concurrency", "1"]  # fmt: skip


def _cli(folder: Path, out: Path, url: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "datadojo.cli.app", "synth", "sailor", str(folder), "--model", f"openai:fake@{url}",
           "--out", str(out), *ARGS]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(SRC), "OPENAI_API_KEY": "x", "NO_COLOR": "1"}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


class HangOnSecondSeed(FakeSailor):
    """Answers the first unit (L0-map); every request of the second seed hangs until the process dies."""

    def __init__(self) -> None:
        super().__init__()
        self.hanging = threading.Event()

    def __call__(self, req):
        text = json.dumps(req["messages"])
        if "Explain the fields of the main data files" in text:
            self.hanging.set()
            return Hang(120.0)
        return super().__call__(req)


def _all_lines(out: Path) -> dict[str, list[dict]]:
    return {name: [r for _, r in iter_jsonl(out / name, skip_partial_tail=False)]
            for name in (*OUTPUT_FILES, "units.jsonl") if (out / name).exists()}  # fmt: skip


def test_sigkill_mid_run_then_resume(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    fake = HangOnSecondSeed()
    with ScriptedLLMServer(fake) as srv:
        proc = _cli(dataset, out, srv.base_url)
        try:
            assert fake.hanging.wait(120), "the second unit never started"
            units = [r for _, r in iter_jsonl(out / "units.jsonl")]
            assert [u["seed_id"] for u in units] == [
                "L0-map"
            ]  # the first unit is committed, the second in flight
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    # What a kill in the middle of a unit's writes leaves: lines of an unfinished unit and a torn last line.
    with (out / "tree.jsonl").open("a") as fh:
        fh.write(json.dumps({"type": "node", "id": "ghost-L9/0", "unit": "ghost-L9"}) + "\n")
        fh.write('{"type": "select", "node": "ghost-L9/0", "n_par')
    with (out / "qa.jsonl").open("a") as fh:
        fh.write('{"id": "sci-torn", "question": "half a li')

    with ScriptedLLMServer(FakeSailor()) as srv:
        proc = _cli(dataset, out, srv.base_url)
        output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    assert "1 unit(s) explored, 1 already done" in " ".join(output.split())
    lines = _all_lines(out)  # strict: a torn line anywhere raises
    units = [u["unit"] for u in lines["units.jsonl"]]
    assert len(units) == len(set(units)) == 2
    node_ids = [r["id"] for r in lines["tree.jsonl"] if r["type"] == "node"]
    assert len(node_ids) == len(set(node_ids)) and not any(i.startswith("ghost") for i in node_ids)
    assert {r["unit"] for r in lines["tree.jsonl"] if r["type"] == "node"} == set(units)
    for name in ("qa.jsonl", "meta.jsonl"):
        ids = [t.id for t in read_tasks(out / name)]
        assert len(ids) == len(set(ids))
    assert {t.extra["seed_id"] for t in read_tasks(out / "meta.jsonl")} == {"L0-map", "L1-fields"}
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["units"] == 2 and summary["per_level"]["L1"]["units"] == 1


def test_clean_unfinished_keeps_finished_units_only(tmp_path: Path) -> None:
    (tmp_path / "tree.jsonl").write_text(
        '{"type": "node", "id": "a/0", "unit": "a"}\n{"type": "select", "node": "b/0", "chosen": "b/1"}\n'
        '{"type": "node", "id": "b/0", "unit": "b"}\n{"type": "no'
    )
    (tmp_path / "qc.jsonl").write_text('{"unit": "a", "kept": true}\n')
    (tmp_path / ".tree.jsonl.123.tmp").write_text("stale")
    removed = clean_unfinished(tmp_path, {"a"})
    assert removed == {"tree.jsonl": 2}
    assert (tmp_path / "tree.jsonl").read_text() == '{"type": "node", "id": "a/0", "unit": "a"}\n'
    assert (tmp_path / "qc.jsonl").read_text() == '{"unit": "a", "kept": true}\n'
    assert not (tmp_path / ".tree.jsonl.123.tmp").exists()

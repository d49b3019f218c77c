"""Kill a DataMind stage mid-run (SIGKILL), rerun it: every trajectory once, no torn line, no temp file."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from datadojo.jsonl import iter_jsonl, read_tasks
from datadojo.llm import load_backend
from datadojo.synth.datamind import DataMindConfig, DataMindRun, stage_queries, stage_sample
from datadojo.testing.datamind_teacher import fake_sandboxes, teacher
from datadojo.testing.server import Reply, ScriptedLLMServer

REPO = Path(__file__).resolve().parents[3]
CFG = DataMindConfig(chains_per_file=0, concurrency=2, near_duplicate=0.95)

# The stage as a user's process runs it; the sandbox is the tests' fake (execution is not under test).
CHILD = """
import asyncio, sys
from datadojo.testing.datamind_teacher import fake_sandboxes
from datadojo.llm import load_backend
from datadojo.synth.datamind import DataMindConfig, DataMindRun, stage_sample
async def main():
    t = load_backend("openai:teacher@" + sys.argv[1])
    run = DataMindRun([], sys.argv[2], DataMindConfig(chains_per_file=0, concurrency=2, near_duplicate=0.95))
    await stage_sample(run, t)
asyncio.run(main())
"""


def test_sample_stage_killed_mid_run_then_resumed(tmp_path, csv_file):
    out = tmp_path / "out"
    slow = threading.Event()
    answered = {"n": 0}

    def script(req):
        entry = teacher(req)
        if slow.is_set() and not req["messages"][0]["content"].startswith("You write"):
            answered["n"] += 1
            if answered["n"] > 8:  # after a few turns every reply stalls: the kill lands mid-stage
                return Reply(entry, delay=10.0)
        return entry

    with ScriptedLLMServer(script) as srv:

        async def prepare() -> int:
            t = load_backend(f"openai:teacher@{srv.base_url}")
            await stage_queries(DataMindRun([csv_file.parent], out, CFG), t)
            await t.aclose()
            return sum(1 for _ in read_tasks(out / "queries.jsonl", resolve_paths=False))

        n_queries = asyncio.run(prepare())
        slow.set()
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, srv.base_url, str(out)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        traj_file = out / "trajectories.jsonl"
        deadline = (
            time.monotonic() + 120
        )  # only a guard against a hung child; the verdict never depends on it
        while time.monotonic() < deadline and child.poll() is None:
            if traj_file.exists() and traj_file.read_bytes().count(b"\n") >= 2:
                break
            time.sleep(0.05)
        assert child.poll() is None, child.stdout.read().decode()[-2000:]
        child.send_signal(signal.SIGKILL)
        child.wait()
        written = traj_file.read_bytes().count(b"\n")
        assert 2 <= written < 3 * n_queries  # killed mid-stage
        with traj_file.open("a") as fh:  # what a kill during a write leaves behind
            fh.write('{"task_id": "dm-torn", "sample": 0, "turns": [{"raw": "<think>')
        slow.clear()

        async def resume() -> None:
            t = load_backend(f"openai:teacher@{srv.base_url}")
            await stage_sample(DataMindRun([], out, CFG), t, sandboxes=fake_sandboxes)
            await t.aclose()

        asyncio.run(resume())
        before = len(srv.requests)
        asyncio.run(resume())  # finished: no request
        assert len(srv.requests) == before

    records = [rec for _, rec in iter_jsonl(traj_file, skip_partial_tail=False)]  # no torn line left
    keys = [(r["task_id"], r["sample"]) for r in records]
    assert len(keys) == len(set(keys)) == 3 * n_queries
    assert "dm-torn" not in {k for k, _ in keys}
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


def test_an_interrupted_sample_stage_keeps_its_requests_in_usage(tmp_path, csv_file):
    """Ctrl-C during sampling, then a resumed run: usage.jsonl counts the requests of both runs.

    Before: the stage wrote its usage record only when it finished, so the interrupted run's requests were
    lost and ``synth datamind run`` reported 97 LLM requests for a job that had sent about 499. Expected by
    hand: every request of a finished episode is one turn of a trajectory in trajectories.jsonl, so the
    ledger's requests equal the turns of the file (each (task, sample) written once). The interrupt is a
    real SIGINT to this process, sent when the 4th trajectory is written (a count, not a time).
    """
    import signal

    from datadojo.runs import read_usage_totals

    out = tmp_path / "out"
    with ScriptedLLMServer(teacher) as srv:

        async def queries() -> None:
            t = load_backend(f"openai:teacher@{srv.base_url}")
            await stage_queries(DataMindRun([csv_file.parent], out, CFG), t)
            await t.aclose()

        asyncio.run(queries())

        def interrupt_at_4(stage: str, done: int, total: int) -> None:
            if stage == "sample" and done == 4:
                os.kill(os.getpid(), signal.SIGINT)

        async def sample(progress=None) -> None:
            t = load_backend(f"openai:teacher@{srv.base_url}")
            try:
                await stage_sample(DataMindRun([], out, CFG, progress=progress), t, sandboxes=fake_sandboxes)
            finally:
                await t.aclose()

        try:
            asyncio.run(sample(interrupt_at_4))
        except KeyboardInterrupt:
            pass
        else:
            raise AssertionError("the stage was not interrupted")
        turns_then = sum(len(r["turns"]) for _, r in iter_jsonl(out / "trajectories.jsonl"))
        counted_then = read_usage_totals(out / "usage.jsonl")["sample"]["roles"]["teacher"]["requests"]
        assert counted_then == turns_then > 0  # before: no record of the interrupted run at all

        asyncio.run(sample())
    records = [r for _, r in iter_jsonl(out / "trajectories.jsonl", skip_partial_tail=False)]
    totals = read_usage_totals(out / "usage.jsonl")["sample"]
    assert totals["roles"]["teacher"]["requests"] == sum(len(r["turns"]) for r in records)
    assert totals["invocations"] == 2

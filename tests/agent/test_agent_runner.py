"""Concurrent, resumable rollouts: every (task, sample) exactly once, across failures and kills."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from datadojo.agent import AgentConfig, finished_keys, run_rollouts
from datadojo.jsonl import append_jsonl, read_trajectories
from datadojo.llm import load_backend
from datadojo.testing.server import Hang, ScriptedLLMServer, Status
from datadojo.types import DataFile, Task

REPO = Path(__file__).resolve().parents[2]
CSV = REPO / "examples" / "data" / "sales.csv"


def _tasks(n: int) -> list[Task]:
    return [Task(id=f"task-{i}", question=f"q{i}", files=[DataFile.from_path(CSV)]) for i in range(n)]


def _reply(req: dict) -> str:
    done = sum(1 for m in req["messages"] if m["role"] == "assistant")
    if done == 0:
        return "<think>look</think><code>print(len(open('sales.csv').read().splitlines()))</code>"
    return "<think>ok</think><answer>241</answer>"


class _FakeSandbox:
    def __init__(self) -> None:
        self.calls = 0

    async def run(self, code: str, *, language: str = "python", db: str | None = None):
        from datadojo.sandbox.result import ExecResult

        self.calls += 1
        return ExecResult(
            output="241\n",
            status="ok",
            error=False,
            timed_out=False,
            killed=False,
            truncated=False,
            isolation="test",
            duration_s=0.0,
            installed=[],
        )


@contextlib.asynccontextmanager
async def _fake_factory(task: Task):
    yield _FakeSandbox()


async def test_every_task_and_sample_once_with_real_sandboxes(tmp_path):
    out = tmp_path / "traj.jsonl"
    with ScriptedLLMServer(_reply) as server:
        backend = load_backend(f"openai:fake@{server.base_url}")
        summary = await run_rollouts(_tasks(5), backend, out, n_samples=2, concurrency=3)
        await backend.aclose()
    trajs = list(read_trajectories(out))
    assert sorted(t.key for t in trajs) == sorted((f"task-{i}", s) for i in range(5) for s in range(2))
    assert all(t.stop_reason == "answer" and t.final_answer == "241" for t in trajs)
    assert all(t.turns[0].observation.text.strip() == "241" for t in trajs)
    assert summary.finished == 10 and summary.turns == 20 and summary.stop_reasons["answer"] == 10


async def test_rerun_skips_finished_pairs(tmp_path):
    out = tmp_path / "traj.jsonl"
    with ScriptedLLMServer(_reply) as server:
        backend = load_backend(f"openai:fake@{server.base_url}")
        await run_rollouts(_tasks(3), backend, out, n_samples=1, concurrency=2, sandboxes=_fake_factory)
        n_requests = len(server.requests)
        summary = await run_rollouts(
            _tasks(4), backend, out, n_samples=1, concurrency=2, sandboxes=_fake_factory
        )
        await backend.aclose()
        assert len(server.requests) == n_requests + 2  # only task-3 ran (2 turns)
    assert summary.skipped == 3 and summary.finished == 1
    assert len(finished_keys(out)) == 4


async def test_a_failing_sandbox_or_llm_ends_one_trajectory_not_the_run(tmp_path):
    out = tmp_path / "traj.jsonl"

    @contextlib.asynccontextmanager
    async def flaky(task: Task):
        if task.id == "task-1":
            raise OSError("no space left for the workspace")
        yield _FakeSandbox()

    def reply(req: dict):
        if req["messages"][1]["content"] == "q2":
            return Status(500)
        return _reply(req)

    with ScriptedLLMServer(reply) as server:
        backend = load_backend(f"openai:fake@{server.base_url}?max_retries=0")
        summary = await run_rollouts(_tasks(4), backend, out, concurrency=4, sandboxes=flaky)
        await backend.aclose()
    by_id = {t.task_id: t for t in read_trajectories(out)}
    assert by_id["task-1"].stop_reason == "env_error" and "no space" in by_id["task-1"].error
    assert by_id["task-2"].stop_reason == "llm_error"
    assert by_id["task-0"].stop_reason == "answer" and by_id["task-3"].stop_reason == "answer"
    assert summary.errors == 2


async def test_concurrency_bound_is_respected(tmp_path):
    with ScriptedLLMServer(_reply, latency_s=0.05) as server:
        backend = load_backend(f"openai:fake@{server.base_url}")
        await run_rollouts(_tasks(12), backend, tmp_path / "t.jsonl", concurrency=4, sandboxes=_fake_factory)
        await backend.aclose()
        assert 2 <= server.max_in_flight <= 4


def test_resume_after_kill(tmp_path):
    """SIGKILL the CLI mid-run (leaving, at worst, a torn last line), rerun, and get every pair exactly once."""
    tasks_file = tmp_path / "tasks.jsonl"
    append_jsonl(tasks_file, _tasks(12))
    out_dir = tmp_path / "run"
    traj = out_dir / "trajectories.jsonl"
    # Past the 10th request the server stops answering until the kill, so the run cannot finish before it
    # on any machine: the kill always lands mid-run (no race between this loop and the rollout).
    blocked = {"on": True}

    def script(req: dict) -> object:
        if blocked["on"] and len(server.requests) > 10:
            return Hang(600)
        return _reply(req)

    with ScriptedLLMServer(script) as server:
        cmd = [
            sys.executable,
            "-m",
            "datadojo.cli.app",
            "rollout",
            str(tasks_file),
            "--model",
            f"openai:fake@{server.base_url}",
            "-n",
            "2",
            "--out",
            str(out_dir),
            "--concurrency",
            "2",
            "--isolation",
            "none",
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if traj.exists() and len(traj.read_bytes().splitlines()) >= 3:
                break
            if proc.poll() is not None:
                pytest.fail(f"rollout exited early: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        blocked["on"] = False
        # simulate the worst case: a record torn mid-write
        with traj.open("ab") as fh:
            fh.write(b'{"task_id": "task-11", "sample": 1, "tu')
        done_before = finished_keys(traj)
        assert 3 <= len(done_before) < 24
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        assert res.returncode == 0, res.stderr[-3000:]
    keys = [t.key for t in read_trajectories(traj)]
    assert len(keys) == len(set(keys)) == 24
    assert "Rollout summary" in res.stderr


def test_rollout_cli_rejects_a_bad_task_file(tmp_path):
    bad = tmp_path / "tasks.jsonl"
    bad.write_text('{"id": "a", "question": "q"}\n{"id": "b"}\n')
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "datadojo.cli.app",
            "rollout",
            str(bad),
            "--model",
            "openai:x@http://127.0.0.1:9/v1",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        # typer's error box wraps at the terminal width: at 80 columns a long tmp path split "tasks.jsonl:" from
        # its line number (pytest-1076 did, pytest-999 did not)
        env={**os.environ, "COLUMNS": "400"},
    )
    assert res.returncode != 0
    assert "tasks.jsonl:2" in res.stderr and "question" in res.stderr


def test_agent_config_rejects_nonsense():
    with pytest.raises(ValueError, match="max_turns"):
        AgentConfig(max_turns=0)


def test_drop_retryable_keeps_records_outside_the_samples_this_run_makes(tmp_path) -> None:
    from datadojo.agent.runner import drop_retryable
    from datadojo.jsonl import append_jsonl, read_trajectories
    from datadojo.types import Trajectory

    out = tmp_path / "trajectories.jsonl"
    for sample, reason in ((0, "llm_error"), (1, "answer"), (3, "llm_error"), (4, "env_error")):
        append_jsonl(out, [Trajectory(task_id="t", sample=sample, stop_reason=reason)])
    # a later round (samples 3..5) retries its own failures only; round 0's llm_error record stays
    assert drop_retryable(out, ("llm_error", "env_error"), range(3, 6)) == 2
    assert [(t.sample, t.stop_reason) for t in read_trajectories(out)] == [(0, "llm_error"), (1, "answer")]
    assert drop_retryable(out, ("llm_error",)) == 1  # no range: every sample
    assert [t.sample for t in read_trajectories(out)] == [1]
    assert drop_retryable(out, ()) == 0

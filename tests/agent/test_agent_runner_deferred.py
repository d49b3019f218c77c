"""Rollouts open each episode's sandbox beside its first model request, not before it (issue 40, item 9:
the `rollout` command end to end), and still return every session and record a failed one as before."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading
from pathlib import Path

from datadojo.agent import run_rollouts
from datadojo.jsonl import read_trajectories
from datadojo.llm import load_backend
from datadojo.sandbox.result import ExecResult
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import DataFile, Task

REPO = Path(__file__).resolve().parents[2]
CSV = REPO / "examples" / "data" / "sales.csv"
# Only a guard against a hang on a regression: the fixed code never waits on it.
DEADLOCK_GUARD_S = 30


def _tasks(n: int) -> list[Task]:
    return [Task(id=f"task-{i}", question=f"q{i}", files=[DataFile.from_path(CSV)]) for i in range(n)]


def _code_then_answer(req: dict) -> str:
    done = sum(1 for m in req["messages"] if m["role"] == "assistant")
    if done == 0:
        return "<think>count</think><code>print(241)</code>"
    return "<think>ok</think><answer>241</answer>"


class _Sandbox:
    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> ExecResult:
        return ExecResult(
            output="241\n", status="ok", error=False, timed_out=False, killed=False, truncated=False,
            isolation="test", duration_s=0.0, installed=[],
        )  # fmt: skip


async def test_first_request_goes_out_before_the_sandbox_is_open(tmp_path):
    """A sandbox that opens only once the model server has seen a request: before, every episode waited for
    its sandbox first and none ever asked the model (each ended ``env_error`` when the guard gave up)."""
    asked = threading.Event()

    def reply(req: dict) -> str:
        asked.set()
        return _code_then_answer(req)

    opened: list[str] = []

    @contextlib.asynccontextmanager
    async def slow_sandboxes(task: Task):
        if not await asyncio.to_thread(asked.wait, DEADLOCK_GUARD_S):
            raise RuntimeError("no model request was sent while the sandbox was being made")
        opened.append(task.id)
        yield _Sandbox()

    with ScriptedLLMServer(reply) as server:
        backend = load_backend(f"openai:fake@{server.base_url}")
        summary = await run_rollouts(
            _tasks(4), backend, tmp_path / "t.jsonl", concurrency=4, sandboxes=slow_sandboxes
        )
        await backend.aclose()
    trajs = list(read_trajectories(tmp_path / "t.jsonl"))
    assert [t.stop_reason for t in trajs] == ["answer"] * 4, [t.error for t in trajs]
    assert all(t.turns[0].observation.text.strip() == "241" for t in trajs)
    assert sorted(opened) == [f"task-{i}" for i in range(4)] and summary.turns == 8


async def test_every_session_is_returned_also_when_the_episode_needs_none(tmp_path):
    """An episode that answers at once never runs code: its session is still opened and then returned
    (never left half made in the pool), exactly once."""
    events: list[tuple[str, str]] = []

    @contextlib.asynccontextmanager
    async def sandboxes(task: Task):
        events.append(("enter", task.id))
        try:
            yield _Sandbox()
        finally:
            events.append(("exit", task.id))

    with ScriptedLLMServer(lambda req: "<think>easy</think><answer>7</answer>") as server:
        backend = load_backend(f"openai:fake@{server.base_url}")
        await run_rollouts(_tasks(3), backend, tmp_path / "t.jsonl", concurrency=3, sandboxes=sandboxes)
        await backend.aclose()
    assert sorted(events) == sorted([(k, f"task-{i}") for i in range(3) for k in ("enter", "exit")])
    assert all(t.stop_reason == "answer" for t in read_trajectories(tmp_path / "t.jsonl"))


async def test_a_sandbox_that_cannot_be_made_is_the_same_env_error_record(tmp_path):
    """The failure surfaces after the first reply now; the trajectory is still the ``env_error`` record
    with no turns and the sandbox's own message, as when the failure came first."""

    @contextlib.asynccontextmanager
    async def broken(task: Task):
        raise OSError("bwrap: No permissions to create new namespace")
        yield  # pragma: no cover

    with ScriptedLLMServer(_code_then_answer) as server:
        backend = load_backend(f"openai:fake@{server.base_url}")
        summary = await run_rollouts(
            _tasks(2), backend, tmp_path / "t.jsonl", concurrency=2, sandboxes=broken
        )
        await backend.aclose()
    trajs = list(read_trajectories(tmp_path / "t.jsonl"))
    assert [t.stop_reason for t in trajs] == ["env_error", "env_error"]
    assert all(t.turns == [] for t in trajs)
    assert all(t.error == "OSError: bwrap: No permissions to create new namespace" for t in trajs)
    assert summary.stop_reasons == {"env_error": 2}


def test_the_rollout_path_does_not_import_the_benchmarks():
    """The rollout command's library path (agent, env, rewards) imports no benchmark registry, pandas or
    numpy at start-up: that was half a second of every `datadojo rollout` before its first request."""
    code = (
        "import sys, datadojo.agent, datadojo.cli.agent\n"
        "print(sorted(m for m in ('datadojo.bench.registry', 'pandas', 'numpy') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"

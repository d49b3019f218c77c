"""Faults inside a run: the sandbox worker killed mid-cell, the model server killed and restarted, a full disk.

Each fault is injected at a point the test observes (a file the cell wrote, the n-th request the server
received, a tmpfs of a fixed size), never after a sleep, so the verdicts do not depend on timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from datadojo.agent import AgentConfig, run_rollouts
from datadojo.jsonl import append_jsonl, read_trajectories
from datadojo.llm import load_backend
from datadojo.sandbox import Sandbox, SandboxConfig, SandboxPool
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import DataFile, Task
from helpers.procs import leftover_descendants, live_descendants

REPO = Path(__file__).resolve().parents[2]
SALES = REPO / "examples" / "data" / "sales.csv"

pytestmark = pytest.mark.timeout(300)


async def _until(predicate, what: str, polls: int = 1200) -> None:
    """Poll until ``predicate()``; the bound (a minute) only ends a broken test, it decides nothing."""
    for _ in range(polls):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


def _answer_after_one_cell(code: str):
    def reply(req: dict) -> str:
        if not any(m["role"] == "assistant" for m in req["messages"]):
            return f"<think>run</think><code>\n{code}\n</code>"
        return "<think>done</think><answer>ok</answer>"

    return reply


# ------------------------------------------------------------------------------- sandbox worker killed
async def test_sandbox_worker_killed_mid_cell(tmp_path: Path) -> None:
    tasks = [Task(id=f"t{i}", question=f"q{i}", files=[DataFile.from_path(SALES)]) for i in range(4)]
    victim_code = "open('started', 'w').write('1')\nimport time\ntime.sleep(600)"

    def reply(req: dict) -> str:
        first = not any(m["role"] == "assistant" for m in req["messages"])
        is_victim = "q0" in req["messages"][-1]["content"] if first else False
        if first:
            code = victim_code if is_victim else "print(len(open('sales.csv').read().splitlines()))"
            return f"<think>run</think><code>\n{code}\n</code>"
        return "<think>done</think><answer>ok</answer>"

    before = live_descendants(os.getpid())
    pool = SandboxPool(SandboxConfig(preload=()), size=2)
    victim: dict[str, Sandbox] = {}

    @contextlib.asynccontextmanager
    async def sandboxes(task: Task) -> AsyncIterator[Sandbox]:
        async with pool.session(task.files) as sb:
            if task.id == "t0":
                victim["sb"] = sb
            yield sb

    async def kill_worker_mid_cell() -> int:
        await _until(lambda: "sb" in victim and (victim["sb"].workspace / "started").exists(), "the cell")
        pid = victim["sb"]._worker.proc.pid  # type: ignore[union-attr]
        os.kill(pid, signal.SIGKILL)  # the worker, from outside, while its cell sleeps
        return pid

    out = tmp_path / "trajectories.jsonl"
    with ScriptedLLMServer(reply) as server:
        backend = load_backend(f"openai:fake@{server.base_url}")
        summary, killed = await asyncio.gather(
            run_rollouts(tasks, backend, out, concurrency=2, sandboxes=sandboxes), kill_worker_mid_cell()
        )
        await backend.aclose()
    by_id = {t.task_id: t for t in read_trajectories(out)}
    assert by_id["t0"].stop_reason == "env_error" and "worker died" in (by_id["t0"].error or "")
    assert all(by_id[f"t{i}"].stop_reason == "answer" for i in (1, 2, 3))  # the run went on
    assert summary.finished == 4
    # the pool replaced the broken sandbox: it is not among the warm ones, and a new session works
    assert victim["sb"] not in pool._ready
    async with pool.session() as sb:
        assert (await sb.run("print('fresh')")).output == "fresh\n"
    await pool.close()
    assert not os.path.exists(f"/proc/{killed}/stat") or killed not in live_descendants(os.getpid())
    assert not await leftover_descendants(before)  # no process left behind


# ---------------------------------------------------------------------------- model server killed
async def test_model_server_killed_then_restarted(tmp_path: Path) -> None:
    tasks = [Task(id=f"t{i}", question=f"q{i}") for i in range(6)]
    out = tmp_path / "trajectories.jsonl"
    served = threading.Event()

    def dying(req: dict) -> str:
        if len(first.requests) >= 3:
            served.set()  # the 3rd request: from here on the server is gone
            threading.Thread(target=first.stop, daemon=True).start()
            return "<think>late</think><answer>42</answer>"
        return "<think>sure</think><answer>42</answer>"

    first = ScriptedLLMServer(dying)
    first.start()
    port = first.port
    backend = load_backend(f"openai:fake@http://127.0.0.1:{port}/v1", max_retries=2, backoff_base=0.01)
    cfg = AgentConfig(max_turns=2)
    summary = await run_rollouts(tasks, backend, out, concurrency=1, config=cfg, sandboxes=_no_sandbox)
    first.stop()
    await backend.aclose()
    trajs = list(read_trajectories(out))
    stops = {t.task_id: t.stop_reason for t in trajs}
    lost = [k for k, v in stops.items() if v == "llm_error"]
    assert served.is_set() and lost, stops  # what could not wait ended llm_error ...
    assert all(
        "giving up after 3 attempt(s)" in (t.error or "") for t in trajs if t.stop_reason == "llm_error"
    )
    assert backend.usage.retries >= 2 * len(lost)  # ... after its retries
    assert summary.finished == 6

    # the server comes back on the same address; the same run again completes exactly the lost episodes
    with ScriptedLLMServer(lambda req: "<think>back</think><answer>42</answer>", port=port) as second:
        backend = load_backend(f"openai:fake@{second.base_url}", max_retries=2, backoff_base=0.01)
        again = await run_rollouts(tasks, backend, out, concurrency=1, config=cfg, sandboxes=_no_sandbox)
        await backend.aclose()
    assert again.retried == len(lost) and again.finished == len(lost)
    final = list(read_trajectories(out))
    assert sorted(t.task_id for t in final) == sorted(t.id for t in tasks)  # each exactly once
    assert all(t.stop_reason == "answer" for t in final)


@contextlib.asynccontextmanager
async def _no_sandbox(task: Task) -> AsyncIterator[None]:
    yield None  # these episodes answer at once: no code runs


# ------------------------------------------------------------------------------------------ disk full
@pytest.fixture
def small_disk(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_output_disk_full_then_resume(tmp_path: Path, small_disk: Path) -> None:
    from typer.testing import CliRunner

    from datadojo.cli.app import app

    tasks_file = tmp_path / "tasks.jsonl"
    # 40 trajectories of ~4 KB: they fit in the 256 KiB disk, but not beside a 160 KiB ballast file
    append_jsonl(tasks_file, [Task(id=f"t{i}", question=f"q{i} " + "x" * 2000) for i in range(40)])
    ballast = small_disk / "ballast.bin"
    ballast.write_bytes(b"\0" * (160 * 1024))
    out = small_disk / "run"
    with ScriptedLLMServer(lambda req: "<think>ok</think><answer>42</answer>") as server:
        argv = [
            *("rollout", str(tasks_file), "--model", f"openai:fake@{server.base_url}"),
            *("--out", str(out), "--concurrency", "2", "--isolation", "none"),
        ]
        runner = CliRunner()
        res = runner.invoke(app, argv, env={"COLUMNS": "300", "NO_COLOR": "1"})
        assert res.exit_code != 0
        assert isinstance(res.exception, SystemExit), f"uncaught: {res.exception!r}"
        assert "No space left on device" in res.output and "trajectories.jsonl" in res.output
        assert "Traceback" not in res.output
        lines = (out / "trajectories.jsonl").read_bytes().splitlines(keepends=True)
        kept = [json.loads(line) for line in lines if line.endswith(b"\n")]  # every complete line parses
        assert 0 < len(kept) < 40
        ballast.unlink()  # free the space, run the same command again
        res = runner.invoke(app, argv, env={"COLUMNS": "300", "NO_COLOR": "1"})
        assert res.exit_code == 0, res.output
    final = list(read_trajectories(out / "trajectories.jsonl"))
    assert sorted(t.task_id for t in final) == sorted(f"t{i}" for i in range(40))

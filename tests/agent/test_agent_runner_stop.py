"""A model server that goes away mid-run: the rollout stops after N episodes in a row failed on it.

Before: a rollout of 100 tasks against a dead server spent every task's retries (103 s, 515 retry lines)
before it could exit 3. Now it stops after ``stop_after_llm_errors`` (default 5) consecutive ``llm_error``
episodes with :class:`RolloutStopped` (exit 3), keeps what finished, and the next run resumes.

The server is killed at a request the test counts (the n-th), and every request from then on is dropped
whether or not the shutdown has completed, so the verdicts do not depend on timing.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.agent import AgentConfig, run_rollouts
from datadojo.agent.runner import STOP_AFTER_LLM_ERRORS, RolloutStopped, RolloutSummary
from datadojo.cli.app import app
from datadojo.errors import ExitCode
from datadojo.jsonl import read_trajectories
from datadojo.llm import load_backend
from datadojo.testing.server import Drop, Reply, ScriptedLLMServer, Status
from datadojo.types import Task

pytestmark = pytest.mark.timeout(300)

ANSWER = "<think>sure</think><answer>42</answer>"


@contextlib.asynccontextmanager
async def _no_sandbox(task: Task) -> AsyncIterator[None]:
    yield None  # these episodes answer at once: no code runs


def _dies_at(n: int) -> ScriptedLLMServer:
    """A server that answers requests 1..n-1, then is killed at request n (which, like every later one
    that still reaches it while it shuts down, gets its connection dropped)."""
    box: dict[str, ScriptedLLMServer] = {}
    killed = threading.Event()

    def reply(req: dict) -> str | Drop:
        if killed.is_set() or len(box["srv"].requests) >= n:
            if not killed.is_set():
                killed.set()
                threading.Thread(target=box["srv"].stop, daemon=True).start()
            return Drop()
        return ANSWER

    box["srv"] = ScriptedLLMServer(reply, strict=False)
    return box["srv"]


def _tasks(n: int) -> list[Task]:
    return [Task(id=f"t{i}", question=f"q{i}") for i in range(n)]


async def test_a_server_killed_mid_run_stops_the_rollout_after_n_failures(tmp_path: Path) -> None:
    out = tmp_path / "trajectories.jsonl"
    srv = _dies_at(4).start()
    backend = load_backend(f"openai:fake@{srv.base_url}", max_retries=0)
    summary = RolloutSummary(path="")
    with pytest.raises(RolloutStopped) as info:
        await run_rollouts(_tasks(100), backend, out, concurrency=1, config=AgentConfig(max_turns=1),
                           sandboxes=_no_sandbox, summary=summary)  # fmt: skip
    srv.stop()
    await backend.aclose()
    trajs = list(read_trajectories(out))
    assert [t.stop_reason for t in trajs] == ["answer"] * 3 + ["llm_error"] * STOP_AFTER_LLM_ERRORS
    assert info.value.exit_code == ExitCode.MODEL_SERVER
    assert info.value.summary is summary and summary.finished == 8 and summary.stopped
    assert f"{STOP_AFTER_LLM_ERRORS} episodes in a row failed on the model server" in str(info.value)
    assert "\n" not in str(info.value)

    # the server is back: the same run resumes, runs the 5 failed episodes again and the 92 never started
    with ScriptedLLMServer(lambda req: ANSWER) as back:
        backend = load_backend(f"openai:fake@{back.base_url}", max_retries=0)
        again = await run_rollouts(_tasks(100), backend, out, concurrency=1, config=AgentConfig(max_turns=1),
                                   sandboxes=_no_sandbox)  # fmt: skip
        await backend.aclose()
    assert again.retried == 5 and again.skipped == 3 and again.finished == 97 and again.stopped is None
    assert sorted(t.task_id for t in read_trajectories(out)) == sorted(t.id for t in _tasks(100))


async def test_failures_that_are_not_in_a_row_do_not_stop_it_and_zero_never_stops(tmp_path: Path) -> None:
    def flaky(req: dict) -> str | Status:  # fail, fail, answer, fail, fail, answer, ...
        return ANSWER if len(srv.requests) % 3 == 0 else Status(500)

    with ScriptedLLMServer(flaky, strict=False) as srv:
        backend = load_backend(f"openai:fake@{srv.base_url}", max_retries=0)
        cfg = AgentConfig(max_turns=1)
        summary = await run_rollouts(_tasks(12), backend, tmp_path / "a.jsonl", concurrency=1, config=cfg,
                                     sandboxes=_no_sandbox, stop_after_llm_errors=3)  # fmt: skip
        assert summary.finished == 12 and summary.stop_reasons["llm_error"] == 8 and summary.stopped is None
        srv.reset_stats()
        with pytest.raises(RolloutStopped):  # two in a row is enough when the setting says 2
            await run_rollouts(_tasks(12), backend, tmp_path / "b.jsonl", concurrency=1, config=cfg,
                               sandboxes=_no_sandbox, stop_after_llm_errors=2)  # fmt: skip
        assert len(list(read_trajectories(tmp_path / "b.jsonl"))) == 2
        await backend.aclose()
        url = srv.base_url

    backend = load_backend(f"openai:fake@{url}", max_retries=0)  # now nothing listens there
    summary = await run_rollouts(_tasks(7), backend, tmp_path / "c.jsonl", concurrency=2, config=cfg,
                                 sandboxes=_no_sandbox, stop_after_llm_errors=0)  # fmt: skip
    await backend.aclose()
    assert summary.finished == 7 and summary.stop_reasons["llm_error"] == 7


def test_cli_rollout_against_a_server_killed_mid_run_exits_3_in_one_line(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in _tasks(100)))
    out = tmp_path / "run"
    srv = _dies_at(4).start()  # request 1 is the first episode's (the reachability check is GET /models)
    model = f"openai:fake@{srv.base_url}?max_retries=1&backoff_base=0.001"
    res = CliRunner().invoke(app, ["rollout", str(tasks), "--model", model, "--out", str(out), "-j", "1",
                                   "--max-turns", "1"], env={"COLUMNS": "200"})  # fmt: skip
    srv.stop()
    assert res.exit_code == ExitCode.MODEL_SERVER, res.output
    assert "Traceback" not in res.output
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "5 episodes in a row failed on the model server" in errors[0], res.stderr
    assert "rerun the same command" in errors[0].lower()
    record = json.loads((out / "summary.json").read_text())
    assert record["finished"] == 8 and record["stop_reasons"] == {"answer": 3, "llm_error": 5}
    assert record["stopped"] and not record["interrupted"]
    # at most one retry line per failed request (max_retries=1), not one per task of the 100
    assert sum("retry" in line for line in res.stderr.splitlines()) <= STOP_AFTER_LLM_ERRORS


def test_cli_rollout_interrupted_writes_a_summary_of_what_finished(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT) at the 4th request: summary.json says what finished, one line, exit 130.

    Before: the command printed its line and exited 130 without a summary.json (a first run) or with the
    previous run's. The signal is sent from the server when the 4th request arrives (a count, not a time).
    """
    import os
    import signal
    import subprocess
    import sys

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(t.model_dump_json() + "\n" for t in _tasks(20)))
    out = tmp_path / "run"
    child: dict[str, subprocess.Popen] = {}
    sent = threading.Event()

    def reply(req: dict) -> str | Reply:
        if len(srv.requests) >= 4 and not sent.is_set():
            sent.set()
            os.kill(child["p"].pid, signal.SIGINT)
            return Reply(ANSWER, delay=60.0)  # never delivered: the run is interrupted while it waits
        return ANSWER

    src = Path(__file__).resolve().parents[2] / "src"
    with ScriptedLLMServer(reply, strict=False) as srv:
        child["p"] = subprocess.Popen(
            [sys.executable, "-m", "datadojo", "rollout", str(tasks), "--model", f"openai:fake@{srv.base_url}",
             "--out", str(out), "-j", "1", "--max-turns", "1"],
            env={**os.environ, "PYTHONPATH": str(src), "COLUMNS": "200"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        _, stderr = child["p"].communicate(timeout=240)
    assert sent.is_set()
    assert child["p"].returncode == ExitCode.INTERRUPTED, stderr
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.startswith("interrupted:")]
    assert len(lines) == 1 and "rerun the same command to resume" in lines[0], stderr
    record = json.loads((out / "summary.json").read_text())
    written = list(read_trajectories(out / "trajectories.jsonl"))
    assert record["interrupted"] is True and record["finished"] == len(written) == 3
    assert record["stop_reasons"] == {"answer": 3} and record["model"].startswith("openai:fake@")
    assert "3 trajectories finished" in lines[0]

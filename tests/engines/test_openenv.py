"""OpenEnv (pinned openenv-core): ``datadojo env serve`` played by openenv-core's own client.

The server is the real command (``python -m datadojo env serve TASKS --port P``, openenv-core's app under
uvicorn); the client is openenv-core's ``GenericEnvClient`` over its WebSocket session, driving the model
like a trainer would: the reset's opening messages and stop strings go to the loopback model server, each
reply goes to ``step``, each observation back into the conversation. The reward of the last step must be the
reward ``datadojo eval`` gives the same replies, per task, to 1e-9 (and 1 / 0 for the evident cases); the
state endpoint reports the same episode.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from _env_adapters import (
    CUT_MAX_TOKENS,
    MAX_TURNS,
    check_rows,
    cut_script,
    cut_task_file,
    datadojo_eval_rows,
    parity_set,
    subprocess_env,
    write_consumer_rows,
)
from openai import OpenAI
from openenv import GenericEnvClient

from datadojo.testing.parity import chat_script, parity_row
from datadojo.testing.server import ScriptedLLMServer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(tasks: str, port: int, *extra: str) -> subprocess.Popen[bytes]:
    """``datadojo env serve`` in a subprocess, once it answers /health."""
    cmd = [sys.executable, "-m", "datadojo", "env", "serve", tasks, "--port", str(port), "-T", str(MAX_TURNS)]
    proc = subprocess.Popen([*cmd, *extra], env=subprocess_env())
    for _ in range(1200):  # up to about two minutes for the import and start-up, checked 10 times a second
        if proc.poll() is not None:
            raise AssertionError(f"datadojo env serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("datadojo env serve did not answer /health")


async def _play(port: int, model: OpenAI, task_id: str) -> tuple[Any, dict[str, Any]]:
    """One episode as a trainer plays it; the last step's result and the server's state after it."""
    async with GenericEnvClient(base_url=f"http://127.0.0.1:{port}") as env:
        result = await env.reset(task_id=task_id)
        obs = result.observation
        assert obs["task_id"] == task_id and obs["messages"][0]["role"] == "system"
        messages = list(obs["messages"])
        while not result.done:
            completion = model.chat.completions.create(
                model="scripted", messages=messages, stop=obs["stop"], max_tokens=obs["max_tokens"]
            )
            choice = completion.choices[0]
            reply = choice.message.content or ""
            action = {"reply": reply, "finish_reason": choice.finish_reason,
                      "stop_sequence": getattr(choice, "stop_reason", None)}  # fmt: skip
            result = await env.step(action)
            messages += [
                {"role": "assistant", "content": reply},
                {"role": "user", "content": result.observation["text"]},
            ]
        return result, await env.state()


def test_openenv_client_gets_datadojo_eval_rewards(tmp_path: Path) -> None:
    ps = parity_set(tmp_path / "fixture")
    ports = {"tasks": _free_port(), "dabench": _free_port()}
    servers = [
        _serve(str(ps.task_file), ports["tasks"]),
        _serve("dabench", ports["dabench"], "--data", str(ps.fixture.dabench_dir)),
    ]
    try:
        with ScriptedLLMServer(chat_script(ps.fixture)) as llm:
            model = OpenAI(base_url=llm.base_url, api_key="loopback")
            played = {
                tid: asyncio.run(
                    _play(ports["dabench" if tid.startswith("dabench") else "tasks"], model, tid)
                )
                for tid in (t.id for t in ps.fixture.tasks)
            }
            ours = datadojo_eval_rows("tasks", ps.eval_file, llm.base_url, tmp_path / "eval-tasks")
            ours |= datadojo_eval_rows(
                "dabench", ps.fixture.dabench_dir, llm.base_url, tmp_path / "eval-dabench"
            )
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=60)
    theirs = {}
    for tid, (result, state) in played.items():
        obs = result.observation
        assert result.done and obs["stop_reason"] in ("answer", "invalid", "max_turns"), (tid, obs)
        assert state["task_id"] == tid and state["done"] and state["reward"] == result.reward, (tid, state)
        theirs[f"{tid}/0"] = parity_row(result.reward, obs["reward_parts"])
    check_rows(theirs, ours, ps, "openenv")
    write_consumer_rows("openenv", theirs, tmp_path)


def test_openenv_step_without_reset_and_unknown_task_are_clear_errors(tmp_path: Path) -> None:
    ps = parity_set(tmp_path / "fixture")
    port = _free_port()
    server = _serve(str(ps.task_file), port)

    async def attempt(**reset: Any) -> str:
        async with GenericEnvClient(base_url=f"http://127.0.0.1:{port}") as env:
            try:
                if reset:
                    await env.reset(**reset)
                await env.step({"reply": "<answer>1</answer>"})
            except Exception as exc:  # openenv-core raises the server's error message
                return str(exc)
            return ""

    try:
        assert "reset first" in asyncio.run(attempt())
        assert "no task 'nope'" in asyncio.run(attempt(task_id="nope"))
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_a_reply_cut_by_the_token_limit_is_an_invalid_turn_as_in_eval(tmp_path: Path) -> None:
    """The client passes the server's finish_reason on: a reply cut at the advertised max_tokens before its
    closing tag is an invalid turn (reward as eval's), not an answer re-closed as a stop-cut one (reward 1)."""
    ps = parity_set(tmp_path / "fixture")
    tasks = cut_task_file(ps)
    port = _free_port()
    server = _serve(str(tasks), port, "--max-tokens", str(CUT_MAX_TOKENS))
    try:
        with ScriptedLLMServer(cut_script) as llm:
            model = OpenAI(base_url=llm.base_url, api_key="loopback")
            result, state = asyncio.run(_play(port, model, "csv-total.right"))
            ours = datadojo_eval_rows(
                "tasks", tasks, llm.base_url, tmp_path / "eval", "--max-tokens", str(CUT_MAX_TOKENS)
            )
            budgets = {r.json.get("max_tokens") for r in llm.requests}
    finally:
        server.terminate()
        server.wait(timeout=60)
    (row,) = ours.values()
    assert budgets == {CUT_MAX_TOKENS}
    assert row["stop_reason"] == result.observation["stop_reason"] == "invalid" and state["step_count"] == 3
    assert abs(result.reward - row["total"]) <= 1e-9 and result.reward < 1.0, (result.reward, row)
    assert {k: v for k, v in result.observation["reward_parts"].items() if k in row["parts"]} == row["parts"]

"""Shared by the rollout and scale benchmarks: the scripted model in its own process, and a CPU yardstick.

The loopback server runs in a separate (spawned) process so that the driver's CPU time — what
``time.process_time`` reports — is the harness alone: client, agent loop, parsing, bookkeeping. On a real
deployment the model server is on other machines, so this is the cost that limits one driver core.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from typing import Any

TURNS = 5


def reply(request: dict[str, Any]) -> str:
    """Four turns that run one small cell each, then an answer (DataMind's tags)."""
    done = sum(1 for m in request["messages"] if m["role"] == "assistant")
    if done < TURNS - 1:
        return f"<think>step {done}</think>\n<code>\nx = {done} * 2\nprint(x)\n</code>"
    return "<think>done</think>\n<answer>6</answer>"


def _serve(latency: float, conn: Any) -> None:
    from datadojo.testing.server import ScriptedLLMServer

    with ScriptedLLMServer(reply, latency_s=latency) as server:
        conn.send(server.base_url)
        conn.recv()  # until the parent says stop (or dies: recv raises EOFError)


class LoopbackProcess:
    """``with LoopbackProcess(latency) as base_url:`` — the scripted server in a child process."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        ctx = multiprocessing.get_context("spawn")
        self._parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(latency, child), daemon=True)
        self._child = child

    def __enter__(self) -> str:
        self._proc.start()
        return str(self._parent.recv())

    def __exit__(self, *exc: object) -> None:
        try:
            self._parent.send("stop")
        except (BrokenPipeError, OSError):
            pass
        self._proc.join(timeout=10)
        if self._proc.is_alive():
            self._proc.kill()


def yardstick_ms(repeats: int = 3) -> float:
    """CPU milliseconds of a fixed piece of pure-Python work (JSON round trips of a chat request).

    Printed beside every figure and used as the baseline of the CPU ratios: on a shared, loaded machine
    absolute times drift, but the ratio of two measurements taken minutes apart in one process holds.
    """
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "x" * 2000}] * 6,
        "temperature": 0.7,
        "stop": ["</code>", "</answer>"],
    }
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        for _ in range(200):
            json.loads(json.dumps(body))
        best = min(best, (time.process_time() - t0) * 1000 / 200)
    return best

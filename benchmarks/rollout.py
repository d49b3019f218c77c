"""Rollout throughput: 256 tasks × 5 turns against the loopback server at a fixed 50 ms per completion.

    python benchmarks/rollout.py [--tasks 256] [--concurrency 64] [--latency 0.05] [--mode chunked]

Each episode has up to 5 turns: four turns that run one small code cell each, then an answer. Every
completion takes exactly ``--latency`` seconds at the server, so the *ideal* run — no harness cost at all —
is set by latency and concurrency alone:

    ideal turns/s = concurrency / latency,   ideal time = ceil(tasks / concurrency) · turns · latency

What is printed, all measured in this one run:

* the full stack (real ``openai`` client → loopback HTTP server, tag parsing, a real sandbox pool running
  every cell, JSONL appends): achieved trajectories/s and turns/s, and the fraction of ideal;
* the same with a no-op code runner, which isolates the harness (client, server, parsing, bookkeeping)
  from sandbox execution;
* harness overhead per turn: (time a turn takes inside the run) − latency, where the time a turn takes is
  elapsed · concurrency / turns (the slot-time each turn occupied).

The server, the client and the sandboxes all share this machine's cores, so at high concurrency the
figures include the server's own CPU cost (on a real deployment the model server is elsewhere).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import sys
import tempfile
import time
from pathlib import Path

from datadojo.agent import AgentConfig, run_rollouts
from datadojo.llm import load_backend
from datadojo.llm.testing import ScriptedLLMServer
from datadojo.sandbox import SandboxConfig, SandboxPool
from datadojo.sandbox.result import ExecResult
from datadojo.types import DataFile, Task

TURNS = 5
REPO = Path(__file__).resolve().parents[1]


def reply(request: dict) -> str:
    done = sum(1 for m in request["messages"] if m["role"] == "assistant")
    if done < TURNS - 1:
        return f"<think>step {done}</think>\n<code>\nx = {done} * 2\nprint(x)\n</code>"
    return "<think>done</think>\n<answer>6</answer>"


class NullRunner:
    """A code runner that answers instantly: measures the harness without sandbox execution."""

    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> ExecResult:
        return ExecResult(
            output="0\n",
            status="ok",
            error=False,
            timed_out=False,
            killed=False,
            truncated=False,
            isolation="none",
            duration_s=0.0,
            installed=[],
        )


@contextlib.asynccontextmanager
async def null_factory(task: Task):
    yield NullRunner()


async def one_run(tasks: list[Task], concurrency: int, latency: float, sandboxes, label: str) -> dict:
    with ScriptedLLMServer(reply, latency_s=latency) as server, tempfile.TemporaryDirectory() as tmp:
        backend = load_backend(f"openai:bench@{server.base_url}?max_concurrency={concurrency}")
        cfg = AgentConfig(max_turns=TURNS)
        t0 = time.perf_counter()
        summary = await run_rollouts(
            tasks, backend, Path(tmp) / "t.jsonl", config=cfg, concurrency=concurrency, sandboxes=sandboxes
        )
        elapsed = time.perf_counter() - t0
        await backend.aclose()
    assert summary.stop_reasons.get("answer", 0) == len(tasks), summary.to_dict()
    turns = summary.turns
    ideal_time = math.ceil(len(tasks) / concurrency) * TURNS * latency
    slot_per_turn = elapsed * concurrency / turns
    return {
        "label": label,
        "elapsed_s": elapsed,
        "traj_s": len(tasks) / elapsed,
        "turns_s": turns / elapsed,
        "ideal_traj_s": len(tasks) / ideal_time,
        "ideal_turns_s": turns / ideal_time,
        "fraction_of_ideal": ideal_time / elapsed,
        "overhead_ms_per_turn": (slot_per_turn - latency) * 1000,
    }


def show(r: dict) -> None:
    print(f"  {r['label']}")
    print(f"    elapsed            {r['elapsed_s']:.2f} s")
    print(f"    trajectories/s     {r['traj_s']:.1f}   (ideal {r['ideal_traj_s']:.1f})")
    print(f"    turns/s            {r['turns_s']:.1f}   (ideal {r['ideal_turns_s']:.1f})")
    print(f"    fraction of ideal  {r['fraction_of_ideal'] * 100:.1f} %")
    print(f"    overhead per turn  {r['overhead_ms_per_turn']:.2f} ms")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--sweep", default="1,8,16,32", help="extra harness-only concurrencies to measure")
    ap.add_argument("--mode", default="chunked", choices=["chunked", "persistent"])
    ap.add_argument("--isolation", default="auto", choices=["auto", "bwrap", "none"])
    args = ap.parse_args()

    csv = REPO / "examples" / "data" / "sales.csv"
    tasks = [
        Task(id=f"bench-{i}", question="What is x?", files=[DataFile.from_path(csv)])
        for i in range(args.tasks)
    ]
    print(
        f"rollout benchmark: {args.tasks} tasks x {TURNS} turns, latency {args.latency * 1000:.0f} ms, "
        f"concurrency {args.concurrency}, cores {os.cpu_count()}, python {sys.version.split()[0]}"
    )

    # Untimed warm-up: first-call costs (importing pandas for the file profile in the prompt, the HTTP
    # client's set-up) are paid once per process, not per turn.
    await one_run(tasks[:2], 1, args.latency, null_factory, "warm-up")

    results = []
    for c in [int(x) for x in args.sweep.split(",") if x] + [args.concurrency]:
        n = min(len(tasks), max(4 * c, 32))
        results.append(
            await one_run(
                tasks[:n],
                c,
                args.latency,
                null_factory,
                f"harness only (no-op code runner), concurrency {c}, {n} tasks",
            )
        )

    config = SandboxConfig(mode=args.mode, isolation=args.isolation)
    pool = SandboxPool(config, size=args.concurrency)
    t0 = time.perf_counter()
    await pool.start()
    warm_s = time.perf_counter() - t0
    try:
        results.append(
            await one_run(
                tasks,
                args.concurrency,
                args.latency,
                lambda task: pool.session(task.files),
                f"full stack: real sandbox pool ({args.mode}), concurrency {args.concurrency}",
            )
        )
    finally:
        await pool.close()

    print()
    for r in results:
        show(r)
    print(f"\n  sandbox pool warm-up ({args.concurrency} workers, before timing): {warm_s:.2f} s")
    print("\nTargets (issue 3): >= 80 % of ideal at concurrency 64; <= 5 ms harness overhead per turn.")


if __name__ == "__main__":
    asyncio.run(main())

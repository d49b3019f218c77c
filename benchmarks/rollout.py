"""Rollout throughput: what one driver core sustains, with the scripted model in a separate process.

    python benchmarks/rollout.py [--tasks 256] [--concurrency 128] [--latency 1.0] [--skip-full]

Every episode has 5 turns (four small code cells, then an answer); every completion takes exactly the
given latency at the server, which runs in its own process (``benchmarks/_loopback.py``), so this
process's CPU time is the harness alone. Printed, all measured in this one run:

1. **harness CPU per turn** (target <= 1.5 ms): this process's CPU seconds / turns, with a no-op code
   runner (sandbox excluded) and no server latency, at concurrency 32 — for the client's aiohttp transport
   (the default when installed) and for its httpx transport, as ratios to a fixed pure-Python yardstick
   measured in the same run (the machine is shared: ratios hold where absolute times drift);
2. **per-turn overhead at concurrency 1** (target <= 5 ms): wall time per turn minus the latency, with
   the no-op runner and with a real persistent sandbox;
3. **full stack** at ``--latency`` x ``--concurrency`` with a real sandbox pool, persistent mode
   (target >= 80 % of ideal) and chunked mode beside it; ideal turns/s = concurrency / latency. The pool's
   warm-up (all workers started before timing) is printed separately, with its CPU cost per sandbox.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _loopback import TURNS, LoopbackProcess, yardstick_ms

from datadojo.agent import AgentConfig, run_rollouts
from datadojo.llm import load_backend
from datadojo.sandbox import SandboxConfig, SandboxPool
from datadojo.sandbox.result import ExecResult
from datadojo.types import DataFile, Task

REPO = Path(__file__).resolve().parents[1]


class NullRunner:
    """A code runner that answers at once: the harness without sandbox execution."""

    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> ExecResult:
        return ExecResult(
            output="0\n", status="ok", error=False, timed_out=False, killed=False, truncated=False,
            isolation="none", duration_s=0.0, installed=[],
        )  # fmt: skip


@contextlib.asynccontextmanager
async def null_factory(task: Task) -> Any:
    yield NullRunner()


def make_tasks(n: int) -> list[Task]:
    csv = DataFile.from_path(REPO / "examples" / "data" / "sales.csv")
    return [Task(id=f"bench-{i}", question="What is x?", files=[csv]) for i in range(n)]


def model(url: str, concurrency: int, http_client: str | None) -> str:
    opts = f"max_concurrency={concurrency}" + (f"&http_client={http_client}" if http_client else "")
    return f"openai:bench@{url}?{opts}"


async def rollout(tasks: list[Task], spec: str, concurrency: int, sandboxes: Any) -> tuple[Any, float, float]:
    backend = load_backend(spec)
    with tempfile.TemporaryDirectory() as tmp:
        cpu0, t0 = time.process_time(), time.perf_counter()
        summary = await run_rollouts(
            tasks, backend, Path(tmp) / "t.jsonl", config=AgentConfig(max_turns=TURNS),
            concurrency=concurrency, sandboxes=sandboxes,
        )  # fmt: skip
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    await backend.aclose()
    assert summary.stop_reasons.get("answer", 0) == len(tasks), summary.to_dict()
    return summary, cpu, wall


def supports_http_client() -> bool:
    import inspect

    from datadojo.llm.openai_backend import OpenAIBackend

    return "http_client" in inspect.signature(OpenAIBackend.__init__).parameters


async def harness_cpu(url: str, tasks: list[Task], http_client: str | None, c: int = 32) -> float:
    await rollout(tasks[:8], model(url, c, http_client), c, null_factory)  # untimed: first-call costs
    best = float("inf")
    for _ in range(2):
        summary, cpu, _ = await rollout(tasks, model(url, c, http_client), c, null_factory)
        best = min(best, cpu * 1000 / summary.turns)
    return best


async def overhead_c1(url: str, latency: float, tasks: list[Task], sandboxes: Any) -> float:
    summary, _, wall = await rollout(tasks, model(url, 1, None), 1, sandboxes)
    return (wall / summary.turns - latency) * 1000


async def full_stack(url: str, tasks: list[Task], c: int, latency: float, mode: str, isolation: str) -> dict:
    pool = SandboxPool(SandboxConfig(mode=mode, isolation=isolation), size=c)  # type: ignore[arg-type]
    cpu0, t0 = time.process_time(), time.perf_counter()
    await pool.start()
    warm_s, warm_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    try:
        summary, _, wall = await rollout(tasks, model(url, c, None), c, lambda task: pool.session(task.files))
    finally:
        await pool.close()
    ideal = math.ceil(len(tasks) / c) * TURNS * latency
    return {"mode": mode, "wall": wall, "turns_s": summary.turns / wall, "ideal_turns_s": summary.turns / ideal,
            "fraction": ideal / wall, "warm_s": warm_s, "warm_driver_cpu": warm_cpu}  # fmt: skip


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--isolation", default="auto", choices=["auto", "bwrap", "none"])
    ap.add_argument("--skip-full", action="store_true", help="only the harness figures (1 and 2)")
    args = ap.parse_args()
    tasks = make_tasks(args.tasks)
    y0 = yardstick_ms()
    print(f"rollout benchmark: {TURNS} turns per episode, cores {os.cpu_count()}, load {os.getloadavg()[0]:.1f}, "
          f"python {sys.version.split()[0]}; yardstick {y0:.3f} ms CPU")  # fmt: skip

    print("\n1. harness CPU per turn (no-op runner, no latency, concurrency 32, server in another process)")
    with LoopbackProcess(0.0) as url:
        fast = await harness_cpu(url, tasks[:128], None)
        slow = await harness_cpu(url, tasks[:128], "httpx") if supports_http_client() else None
    y1 = yardstick_ms()
    y = (y0 + y1) / 2
    print(f"   default transport: {fast:.2f} ms/turn = {fast / y:.1f} x yardstick")
    if slow is not None:
        print(
            f"   httpx transport:   {slow:.2f} ms/turn = {slow / y:.1f} x yardstick  (default/httpx {fast / slow:.2f})"
        )
    print(f"   yardstick {y0:.3f} -> {y1:.3f} ms during the measurement  (target: <= 1.5 ms/turn)")

    print("\n2. per-turn overhead at concurrency 1 (latency 50 ms)")
    with LoopbackProcess(0.05) as url:
        null = await overhead_c1(url, 0.05, tasks[:12], null_factory)
        async with SandboxPool(SandboxConfig(mode="persistent", isolation=args.isolation), size=1) as pool:  # type: ignore[arg-type]
            await pool.start()
            real = await overhead_c1(url, 0.05, tasks[:12], lambda task: pool.session(task.files))
    print(
        f"   no-op runner: {null:.2f} ms/turn;  real persistent sandbox: {real:.2f} ms/turn  (target: <= 5 ms)"
    )

    if args.skip_full:
        return
    c, lat = args.concurrency, args.latency
    print(f"\n3. full stack: {len(tasks)} tasks, latency {lat:g} s, concurrency {c}, real sandbox pool")
    with LoopbackProcess(lat) as url:
        for mode in ("persistent", "chunked"):
            r = await full_stack(url, tasks, c, lat, mode, args.isolation)
            print(f"   {mode:10s}: {r['turns_s']:.1f} turns/s of ideal {r['ideal_turns_s']:.1f} = "
                  f"{r['fraction'] * 100:.0f} % (wall {r['wall']:.1f} s);  pool warm-up {r['warm_s']:.1f} s for "
                  f"{c} sandboxes ({r['warm_s'] / c * 1000:.0f} ms each, driver CPU {r['warm_driver_cpu']:.1f} s)")  # fmt: skip
    print(f"   (target: persistent >= 80 % of ideal; yardstick now {yardstick_ms():.3f} ms)")


if __name__ == "__main__":
    asyncio.run(main())

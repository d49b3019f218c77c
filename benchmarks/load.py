"""Load: 1,000 trajectories at concurrency 64, 10% of their cells faulty or hostile, against a loopback model.

    python benchmarks/load.py [--tasks 1000] [--concurrency 64] [--hostile 0.1] [--no-baseline]

Each episode is two turns: one code cell, then the answer. A seeded 10% of the tasks get a hostile cell
instead of a harmless one, drawn in turn from: an infinite loop, a memory bomb, an output flood, deep
recursion, a fork loop and a busy thread spawner. What must hold, and is checked and printed:

* every (task, sample) is recorded exactly once, with the stop reason it should have: ``answer`` (the
  model sees the failed cell's observation and answers), the hostile cell's observation status in its
  expected set (``timeout``, ``killed``, ``error``, ``rejected``; ``env_error`` where the cell takes its
  worker down, which then ends that trajectory), every harmless cell ``ok``;
* no process is left behind once the run is over (processes below this one, before vs after);
* memory stays bounded: the peak resident memory of the whole run (this process plus every sandbox
  process, sampled every 0.25 s) and this process's own peak.

Figures printed: wall time, trajectories/s, peak RSS (whole run and harness), stray processes; and the
ratio of wall time to a clean run (no hostile cells) of the same size measured first in the same
invocation (``--no-baseline`` skips it). Cells run under short limits (CPU 2 s, wall 5 s, 512 MB) so that
hostile cells are stopped quickly; those are the limits the figures are for.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import resource
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from datadojo.agent import AgentConfig, run_rollouts
from datadojo.jsonl import read_trajectories
from datadojo.llm import load_backend
from datadojo.sandbox import Limits, SandboxConfig, SandboxPool
from datadojo.sandbox.worker import live_descendants
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import Task

LIMITS = Limits(cpu_s=2.0, wall_s=5.0, memory_mb=512, max_procs=32, max_output_bytes=200_000)
HARMLESS = "print(sum(range(1000)))"
#: name → (cell, acceptable observation statuses)
HOSTILE: dict[str, tuple[str, set[str]]] = {
    "infinite_loop": ("while True:\n    pass", {"timeout", "killed"}),
    "memory_bomb": ("x = bytearray(8 * 1024 ** 3)\nprint(len(x))", {"error", "killed"}),
    "output_flood": ("while True:\n    print('x' * 1000)", {"timeout", "killed", "error", "ok"}),
    "deep_recursion": (
        "import sys\nsys.setrecursionlimit(10 ** 7)\ndef f(n):\n    return f(n + 1)\nf(0)",
        {"error", "killed", "timeout"},
    ),
    "fork_loop": (
        "import os\nwhile True:\n    os.fork()",
        {"rejected", "error", "killed", "timeout", "env_error"},
    ),
    "thread_spawner": (
        "import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()",
        {"error", "killed", "timeout"},
    ),
}


@dataclass
class Outcome:
    wall_s: float
    peak_rss_mb: float
    harness_rss_mb: float
    stray: int
    stop_reasons: Counter[str]
    wrong: list[str]
    recorded: int


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def plan(n: int, hostile: float, seed: int = 0) -> dict[str, str | None]:
    """Task id → the hostile cell's name, or ``None`` for a harmless cell (seeded, ``hostile`` share)."""
    rng = random.Random(seed)
    ids = [f"load-{i:05d}" for i in range(n)]
    bad = sorted(rng.sample(ids, round(n * hostile)))
    names = sorted(HOSTILE)
    kinds: dict[str, str | None] = dict.fromkeys(ids)
    kinds.update({t: names[i % len(names)] for i, t in enumerate(bad)})  # every kind, in turn
    return kinds


async def run(n: int, concurrency: int, hostile: float, work: Path) -> Outcome:
    kinds = plan(n, hostile)
    tasks = [Task(id=t, question=f"task {t}") for t in kinds]

    def reply(req: dict) -> str:
        if any(m["role"] == "assistant" for m in req["messages"]):
            return "<think>done</think><answer>499500</answer>"
        task_id = req["messages"][-1]["content"].split("task ", 1)[1].split()[0]
        kind = kinds.get(task_id)
        cell = HARMLESS if kind is None else HOSTILE[kind][0]
        return f"<think>run</think><code>\n{cell}\n</code>"

    before = live_descendants(os.getpid())
    out = work / f"trajectories-{hostile:g}.jsonl"
    peak = 0

    async def sample_memory() -> None:
        nonlocal peak
        while True:
            total = _rss_kb(os.getpid()) + sum(_rss_kb(p) for p in live_descendants(os.getpid()))
            peak = max(peak, total)
            await asyncio.sleep(0.25)

    pool = SandboxPool(SandboxConfig(preload=(), limits=LIMITS), size=concurrency)
    sampler = asyncio.create_task(sample_memory())
    t0 = time.perf_counter()
    with ScriptedLLMServer(reply) as server:
        backend = load_backend(f"openai:fake@{server.base_url}?max_concurrency={concurrency}")
        try:
            await run_rollouts(
                tasks,
                backend,
                out,
                config=AgentConfig(max_turns=3),
                concurrency=concurrency,
                sandboxes=lambda task: pool.session(task.files),
            )
        finally:
            await pool.close()
            await backend.aclose()
    wall = time.perf_counter() - t0
    sampler.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sampler
    for _ in range(200):  # processes may take a moment to be reaped: wait, bounded
        if live_descendants(os.getpid()) <= before:
            break
        await asyncio.sleep(0.05)
    stray = len(live_descendants(os.getpid()) - before)

    wrong: list[str] = []
    seen: Counter[tuple[str, int]] = Counter()
    stops: Counter[str] = Counter()
    for traj in read_trajectories(out):
        seen[traj.key] += 1
        stops[traj.stop_reason] += 1
        kind = kinds.get(traj.task_id)
        status = traj.turns[0].observation.status if traj.turns and traj.turns[0].observation else None
        allowed = {"ok"} if kind is None else HOSTILE[kind][1]
        want_stop = "env_error" if status == "env_error" else "answer"
        if status not in allowed or traj.stop_reason != want_stop:
            wrong.append(f"{traj.task_id} ({kind or 'harmless'}): cell {status}, stop {traj.stop_reason}")
    missing = [t for t in kinds if (t, 0) not in seen]
    wrong += [f"{t}: not recorded" for t in missing]
    wrong += [f"{k}: recorded {c} times" for k, c in seen.items() if c > 1]
    return Outcome(
        wall_s=wall,
        peak_rss_mb=peak / 1024,
        harness_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        stray=stray,
        stop_reasons=stops,
        wrong=wrong,
        recorded=sum(seen.values()),
    )


def _show(name: str, o: Outcome, n: int) -> None:
    print(
        f"{name:>9}: {o.recorded}/{n} trajectories in {o.wall_s:.1f} s ({o.recorded / o.wall_s:.1f} traj/s); "
        f"peak RSS {o.peak_rss_mb:.0f} MB (whole run), harness {o.harness_rss_mb:.0f} MB; "
        f"stray processes {o.stray}; stop reasons {dict(o.stop_reasons)}"
    )
    for line in o.wrong[:10]:
        print(f"           WRONG {line}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=1000, help="Trajectories (one sample per task).")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--hostile", type=float, default=0.1, help="Share of tasks whose cell is hostile.")
    ap.add_argument("--no-baseline", action="store_true", help="Skip the clean run of the same size.")
    args = ap.parse_args()
    print(
        f"load: {args.tasks} trajectories, concurrency {args.concurrency}, {args.hostile:.0%} hostile cells, "
        f"{os.cpu_count()} CPUs; cell limits cpu {LIMITS.cpu_s:g} s, wall {LIMITS.wall_s:g} s, "
        f"{LIMITS.memory_mb} MB"
    )
    with tempfile.TemporaryDirectory(prefix="datadojo-load-") as tmp:
        base = None
        if not args.no_baseline:
            base = asyncio.run(run(args.tasks, args.concurrency, 0.0, Path(tmp)))
            _show("clean", base, args.tasks)
        load = asyncio.run(run(args.tasks, args.concurrency, args.hostile, Path(tmp)))
        _show("hostile", load, args.tasks)
    if base is not None:
        print(f"wall time with hostile cells / clean: {load.wall_s / base.wall_s:.2f}x")
    ok = not load.wrong and load.stray == 0 and (base is None or (not base.wrong and base.stray == 0))
    print("all trajectories recorded with the right stop reason, no stray process" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

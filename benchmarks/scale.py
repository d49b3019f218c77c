"""Local vs Ray on this machine: the same rollout, and what each added node would bring.

    python benchmarks/scale.py [--tasks 500] [--concurrency 16] [--latency 0.05] [--mode persistent]
    python benchmarks/scale.py --synth datamind [--tasks 100] ...   # a DataMind sampling round instead

``--synth datamind``: ``--tasks`` queries written to two DataMind run folders, then one sampling round
(``stage_sample``, N = 1 trajectory per query, the same loopback teacher) in each: in this process and on a
local Ray (the round's episodes on the node, ``trajectories.jsonl`` written here). Printed: both walls, their
ratio with Ray's start-up apart, and whether both files hold the same (task, sample, round) keys.

The same ``--tasks`` episodes (5 turns each, the scripted model in a separate process at ``--latency`` per
completion, a real sandbox pool of ``--concurrency``) run twice into two output files: in this process
(``--executor local``) and on a local Ray with one node (``--executor ray``: an actor owning the sandbox
pool and its own model client; results come back to this process, which writes them). Printed:

* wall times and their ratio (target: Ray <= 1.3 x local on one node), with Ray's start-up apart, for
  ``--repeats`` pairs (default 3) in alternating order (local first, then Ray first, ...), Ray up only for
  its own run; the verdict takes the median pair's ratio, so a slow minute on a shared machine that falls
  on one side of one pair does not decide it;
* whether the two files hold the same (task, sample) keys;
* the projection per added node: a node's turns/s is bounded by its cores divided by the CPU one turn
  costs there, measured here as the local run's CPU seconds per turn as ``os.times`` sees them (this
  process and the children it reaped; sandbox processes started under bubblewrap are mostly not among
  them, so this is the harness share and the projection an upper bound); the driver's own CPU per turn
  under Ray (it only receives and writes results) bounds how many nodes one driver can feed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _loopback import TURNS, LoopbackProcess, yardstick_ms

from datadojo.agent import AgentConfig, run_rollouts
from datadojo.sandbox import SandboxConfig
from datadojo.types import DataFile, Task

REPO = Path(__file__).resolve().parents[1]


def tree_cpu() -> float:
    """CPU seconds of this process and its waited-for children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def keys(path: Path) -> set[tuple[str, int]]:
    out = set()
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        out.add((rec["task_id"], rec["sample"]))
    return out


async def one(
    tasks: list[Task], spec: str, out: Path, c: int, sandbox: SandboxConfig, executor: object
) -> tuple:
    cpu0, drv0, t0 = tree_cpu(), time.process_time(), time.perf_counter()
    summary = await run_rollouts(
        tasks, spec, out, config=AgentConfig(max_turns=TURNS), concurrency=c, sandbox_config=sandbox,
        executor=executor,  # type: ignore[arg-type]
    )  # fmt: skip
    return summary, time.perf_counter() - t0, tree_cpu() - cpu0, time.process_time() - drv0


async def on_ray(
    tasks: list[Task], spec: str, out: Path, c: int, sandbox: SandboxConfig, cores: int
) -> tuple:
    """One run on a local Ray started for it alone (its daemons would slow a local run beside it)."""
    import ray

    from datadojo.executor.ray_executor import RayExecutor

    t0 = time.perf_counter()
    ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
    start = time.perf_counter() - t0
    try:
        summary, wall, _, drv = await one(tasks, spec, out, c, sandbox, RayExecutor(in_flight_per_worker=c))
    finally:
        ray.shutdown()
    return summary, wall, drv, start


async def datamind_round(
    n: int, spec: str, folder: Path, c: int, sandbox: SandboxConfig, executor: object
) -> tuple[float, set[tuple[str, int, int]]]:
    """One DataMind sampling round of ``n`` queries into ``folder``; its wall time and written keys."""
    from datadojo.jsonl import write_jsonl_atomic
    from datadojo.synth.datamind import DataMindConfig, DataMindRun, stage_sample

    csv = DataFile.from_path(REPO / "examples" / "data" / "sales.csv")
    folder.mkdir(parents=True)
    queries = [
        Task(id=f"dm-{i}", question=f"What is the total of x in group {i}?", files=[csv],
             category="Aggregation", difficulty=1)
        for i in range(n)
    ]  # fmt: skip
    write_jsonl_atomic(folder / "queries.jsonl", queries)
    cfg = DataMindConfig(n_samples=1, concurrency=c, max_turns=TURNS)
    run = DataMindRun([], folder, cfg, executor=executor, sandbox_config=sandbox)  # type: ignore[arg-type]
    t0 = time.perf_counter()
    await stage_sample(run, spec)
    wall = time.perf_counter() - t0
    got = set()
    for line in (folder / "trajectories.jsonl").read_text().splitlines():
        rec = json.loads(line)
        got.add((rec["task_id"], rec["sample"], rec["extra"]["round"]))
    return wall, got


async def synth_main(args: argparse.Namespace, sandbox: SandboxConfig, cores: int) -> None:
    import ray

    from datadojo.executor.ray_executor import RayExecutor

    print(f"scale benchmark, DataMind sampling round: {args.tasks} queries x 1 sample x {TURNS} turns, latency "
          f"{args.latency * 1000:.0f} ms, concurrency {args.concurrency}, {args.mode} sandboxes, cores {cores}, "
          f"load {os.getloadavg()[0]:.1f}, yardstick {yardstick_ms():.3f} ms")  # fmt: skip
    with LoopbackProcess(args.latency) as url, tempfile.TemporaryDirectory() as tmp:
        spec = f"openai:bench@{url}?max_concurrency={args.concurrency}"
        local_s, local_keys = await datamind_round(
            args.tasks, spec, Path(tmp) / "local", args.concurrency, sandbox, None
        )
        t0 = time.perf_counter()
        ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
        ray_start = time.perf_counter() - t0
        try:
            ray_s, ray_keys = await datamind_round(
                args.tasks, spec, Path(tmp) / "ray", args.concurrency, sandbox,
                RayExecutor(in_flight_per_worker=args.concurrency),
            )  # fmt: skip
        finally:
            ray.shutdown()
    same = local_keys == ray_keys and len(local_keys) == args.tasks
    ratio = ray_s / local_s
    print(f"  local: {local_s:.1f} s ({args.tasks * TURNS / local_s:.1f} turns/s)")
    print(
        f"  ray:   {ray_s:.1f} s ({args.tasks * TURNS / ray_s:.1f} turns/s), plus {ray_start:.1f} s to start Ray"
    )
    print(f"verdict: DataMind round on Ray, one node, vs local: {ratio:.2f} x wall (Ray start-up "
          f"{ray_start:.1f} s apart); same (task, sample, round) keys: {same}")  # fmt: skip


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--mode", default="persistent", choices=["persistent", "chunked"])
    ap.add_argument("--synth", default="none", choices=["none", "datamind"], help="a DataMind sampling round")
    ap.add_argument("--repeats", type=int, default=3, help="local/Ray pairs, alternating order; the verdict "
                    "takes the median pair's ratio")  # fmt: skip
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    if args.synth == "datamind":
        await synth_main(args, SandboxConfig(mode=args.mode), os.cpu_count() or 1)  # type: ignore[arg-type]
        return
    csv = DataFile.from_path(REPO / "examples" / "data" / "sales.csv")
    tasks = [Task(id=f"scale-{i}", question="What is x?", files=[csv]) for i in range(args.tasks)]
    sandbox = SandboxConfig(mode=args.mode)  # type: ignore[arg-type]
    cores = os.cpu_count() or 1
    print(f"scale benchmark: {args.tasks} tasks x {TURNS} turns, latency {args.latency * 1000:.0f} ms, concurrency "
          f"{args.concurrency}, {args.mode} sandboxes, cores {cores}, load {os.getloadavg()[0]:.1f}, "
          f"yardstick {yardstick_ms():.3f} ms")  # fmt: skip
    walls: list[tuple[float, float, float]] = []  # (local s, ray s, ray start-up s), one per repeat
    with LoopbackProcess(args.latency) as url, tempfile.TemporaryDirectory() as tmp:
        spec = f"openai:bench@{url}?max_concurrency={args.concurrency}"
        same = True
        for rep in range(args.repeats):
            # Alternate the order (local first, then Ray first, ...): on a shared machine a slow minute
            # falls on one side of one pair, and the median pair's ratio does not take it.
            local_out, ray_out = Path(tmp) / f"local-{rep}.jsonl", Path(tmp) / f"ray-{rep}.jsonl"
            ray_first = rep % 2 == 1
            if ray_first:
                remote, ray_s, ray_drv, ray_start = await on_ray(
                    tasks, spec, ray_out, args.concurrency, sandbox, cores
                )
            local, local_s, local_cpu, local_drv = await one(
                tasks, spec, local_out, args.concurrency, sandbox, None
            )
            if not ray_first:
                remote, ray_s, ray_drv, ray_start = await on_ray(
                    tasks, spec, ray_out, args.concurrency, sandbox, cores
                )
            same = same and keys(local_out) == keys(ray_out)
            walls.append((local_s, ray_s, ray_start))
            print(f"  repeat {rep + 1} ({'local first' if rep % 2 == 0 else 'Ray first'}): local {local_s:.1f} s, "
                  f"ray {ray_s:.1f} s (+{ray_start:.1f} s start-up) -> {ray_s / local_s:.2f} x")  # fmt: skip
    ratios = sorted(r / loc for loc, r, _ in walls)
    ratio = ratios[len(ratios) // 2]
    local_s, ray_s, ray_start = next(w for w in walls if w[1] / w[0] == ratio)
    print(f"  local: {local_s:.1f} s ({local.turns / local_s:.1f} turns/s)   [the median repeat]")
    print(f"  ray:   {ray_s:.1f} s ({remote.turns / ray_s:.1f} turns/s), plus {ray_start:.1f} s to start Ray")
    print(f"  ratio ray / local: {ratio:.2f} (median of {len(ratios)}: {', '.join(f'{r:.2f}' for r in ratios)}; "
          f"target <= 1.3);  same (task, sample) keys: {same}")  # fmt: skip
    for n in remote.nodes:
        print(f"    node {n['node']}: {n['done']} done by {n['workers']} worker(s), busy {n['busy_s']:.0f} s")
    turn_cpu = local_cpu / local.turns
    per_node = cores / turn_cpu
    driver_turn = ray_drv / remote.turns
    print(f"  CPU per turn (last local run, as os.times sees it: the harness, sandboxes mostly not counted): "
          f"{turn_cpu * 1000:.1f} ms -> one {cores}-core node like this one sustains at most {per_node:.0f} turns/s")  # fmt: skip
    print(f"  driver CPU per turn under Ray (receive + write): {driver_turn * 1000:.2f} ms -> one driver core "
          f"feeds about {1 / driver_turn / per_node:.0f} such nodes;  projection: +{per_node:.0f} turns/s per "
          f"added {cores}-core node (local driver CPU per turn was {local_drv / local.turns * 1000:.2f} ms)")  # fmt: skip
    ok = ratio <= 1.3 and same
    print(f"verdict: Ray on one node <= 1.3 x local wall for {args.tasks} tasks (median of {len(ratios)} alternating "
          f"repeats, Ray start-up {ray_start:.1f} s apart): {ratio:.2f} x, same keys {same} -> "
          f"{'met' if ok else 'NOT met'}")  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())

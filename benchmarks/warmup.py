"""EnvLunch warm-up build throughput: 1,600 tasks (SQL and pandas mixed) from the Spider databases.

    python benchmarks/warmup.py [--n 1600] [--workers 2] [--seed 0] [--solve 200] [--keep DIR]

Builds the task set exactly as ``datadojo warmup build`` does — online synthesis, verification of every
retained trajectory in all K counterfactual copies (K = 2 for SQL, 3 for pandas), every environment and
copy written to disk, the JSONL written — over the Spider databases in ``../shared/data/spider/database``,
leaving out the Spider development databases by name (EnvLunch §4 keeps evaluation environments out of the
warm-up). Prints, measured in this one run:

* load time, build time, tasks/s, and the time for 1,600 tasks next to the paper's figure (EnvLunch §1:
  "20 minutes on CPU to construct 1600 warm-up tasks");
* tasks per backend and level, draws and rejection reasons;
* the constant-printing audit over all tasks (pass rate with the copies on and off);
* with ``--solve N``: the reference solver on the first N tasks, scored through the normal reward path
  (in-process: the solver's programs are ours), solve rate per backend and level.

The machine is shared, so the figures include whatever else runs on it; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from datadojo.jsonl import read_tasks
from datadojo.synth.envlunch.audit import run_audit
from datadojo.synth.envlunch.build import BuildConfig, build_tasks, load_environments
from datadojo.synth.envlunch.executor import InProcessExecutor
from datadojo.synth.envlunch.reward import score_trajectories
from datadojo.synth.envlunch.solver import SolverConfig, solve, solver_trajectory
from datadojo.synth.envlunch.tasks import task_info

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "spider"
PAPER_SECONDS = 20 * 60  # EnvLunch §1: 20 minutes on CPU for 1,600 tasks
PAPER_TASKS = 1600


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1600)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--solve", type=int, default=0, help="run the reference solver on the first N tasks")
    ap.add_argument("--solve-time", type=float, default=2.0, help="solver seconds per task")
    ap.add_argument("--keep", type=Path, default=None, help="write the tasks here instead of a temp folder")
    args = ap.parse_args()
    if not (DATA / "database").is_dir():
        raise SystemExit(f"Spider databases absent: {DATA / 'database'}")
    dev = sorted({r["db_id"] for r in json.loads((DATA / "dev.json").read_text())})
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)")

    t0 = time.perf_counter()
    envs = load_environments([DATA / "database"], exclude=dev)
    load_s = time.perf_counter() - t0
    tmp = Path(tempfile.mkdtemp(prefix="envlunch-bench-")) if args.keep is None else args.keep
    out = tmp / "tasks.jsonl"
    report = build_tasks(envs, out, BuildConfig(n=args.n, seed=args.seed, workers=args.workers))
    total = load_s + report.seconds
    n = len(report.tasks)
    rate = n / total
    print(f"environments: {len(envs)} Spider databases (dev databases excluded: {len(dev)})")
    print(
        f"load {load_s:.1f} s + build {report.seconds:.1f} s = {total:.1f} s for {n} tasks ({rate:.1f} tasks/s), "
        f"{args.workers} workers"
    )
    t1600 = PAPER_TASKS / rate
    print(
        f"time for 1,600 tasks: {t1600:.1f} s  vs  paper {PAPER_SECONDS} s  ({PAPER_SECONDS / t1600:.0f}x faster); "
        f"target < 60 s: {'met' if t1600 < 60 else 'NOT met'}"
    )
    levels = Counter((t.extra["backend"], t.extra["level"]) for t in report.tasks)
    for b in ("sql", "pandas"):
        row = ", ".join(f"L{lv} {levels[(b, lv)]}" for lv in (1, 2, 3, 4))
        print(f"  {b:6s}: {sum(v for (bb, _), v in levels.items() if bb == b):4d} tasks ({row})")
    print(f"draws {report.draws}; rejections: {dict(report.rejections.most_common())}")
    size = sum(f.stat().st_size for f in report.copies.rglob("*") if f.is_file()) / 2**20  # type: ignore[union-attr]
    print(f"copies on disk: {size:.0f} MiB")

    infos = [task_info(t, out) for t in read_tasks(out)]
    t2 = time.perf_counter()
    audit = run_audit(infos, InProcessExecutor())
    print(
        f"audit ({audit.n} tasks, {time.perf_counter() - t2:.1f} s): constant answer passes "
        f"{audit.pass_with_copies:.3f} with copies, {audit.pass_without_copies:.3f} without"
    )

    if args.solve:
        sub = infos[: args.solve]
        t3 = time.perf_counter()
        results = solve(sub, SolverConfig(time_limit_s=args.solve_time))
        trajs = [solver_trajectory(i, r) for i, r in zip(sub, results, strict=True)]
        records = score_trajectories({i.task.id: i for i in sub}, trajs, InProcessExecutor())
        print(
            f"reference solver on {len(sub)} tasks ({time.perf_counter() - t3:.1f} s, {args.solve_time} s budget):"
        )
        groups: dict[tuple[str, int], list[tuple[bool, bool]]] = defaultdict(list)
        for info, res, rec in zip(sub, results, records, strict=True):
            groups[(info.backend, info.level)].append((res.program is not None, rec.solved))
        for (b, lv), vals in sorted(groups.items()):
            found = sum(f for f, _ in vals)
            solved = sum(s for _, s in vals)
            print(
                f"  {b:6s} L{lv}: {len(vals):4d} tasks, matches o* on E {found / len(vals):.2f}, "
                f"solved in all copies {solved / len(vals):.2f}"
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.keep is None:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()

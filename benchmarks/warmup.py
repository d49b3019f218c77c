"""EnvLunch warm-up build throughput: 1,600 tasks (SQL and pandas mixed) from the Spider databases, or
tasks from held-out-sized BIRD-like databases generated here.

    python benchmarks/warmup.py [--n 1600] [--workers 2] [--seed 0] [--solve 200] [--keep DIR]
    python benchmarks/warmup.py --bird 2 [--n 60] [--gen-dir DIR]

``--bird N`` generates N BIRD-like SQLite databases of 60+ MB each (``benchmarks/_bird_like.py``: two
dimension and two fact tables with foreign keys, dates, categories, measures and text; nothing downloaded;
kept in ``--gen-dir`` for the next run) and builds ``--n`` tasks on them; the target there is >= 25 tasks/s,
counted on load + build (loading a 60 MB file is part of the cost), printed as a ratio to the paper's 1,600
tasks / 20 min = 1.33 tasks/s. Tables over ``--sample-rows`` (default ``BuildConfig.sample_rows``, 2,000;
0: whole tables) are sampled when loaded; the sample is printed. With ``--workers 1`` the SQLite
connections the build opens are counted: the per-copy SQL check shares one connection per copy
(``EnvContext.sql``: one in-memory database per copy, opened once per environment), so the count is
(1 + K) per environment plus the loading and copy-writing ones, whatever the number of checks.

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
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from datadojo.jsonl import read_tasks
from datadojo.reward.envlunch import score_trajectories, task_info
from datadojo.reward.programs import InProcessExecutor
from datadojo.synth.envlunch.audit import run_audit
from datadojo.synth.envlunch.build import BuildConfig, build_tasks, load_environments
from datadojo.synth.envlunch.solver import SolverConfig, solve, solver_trajectory

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "spider"
PAPER_SECONDS = 20 * 60  # EnvLunch §1: 20 minutes on CPU for 1,600 tasks
PAPER_TASKS = 1600
PAPER_RATE = PAPER_TASKS / PAPER_SECONDS  # 1.33 tasks/s
BIRD_TARGET = 25.0  # tasks/s on held-out-sized databases (issue 24)


def bird_main(args: argparse.Namespace) -> None:
    """Build on generated BIRD-like databases; print tasks/s, the ratio to the paper, the verdict."""
    import sqlite3

    from _bird_like import make_retail_db

    gen = args.gen_dir or Path(tempfile.gettempdir()) / "datadojo-bird-like"
    gen.mkdir(parents=True, exist_ok=True)
    paths = []
    t0 = time.perf_counter()
    for i in range(args.bird):
        p = gen / f"retail_{i}.sqlite"
        if not p.exists() or p.stat().st_size < 60 * 2**20:
            make_retail_db(p, seed=i, scale=1.05)
        paths.append(p)
    gen_s = time.perf_counter() - t0
    sizes = [p.stat().st_size / 2**20 for p in paths]
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores)")
    print(f"{len(paths)} BIRD-like databases in {gen}: {', '.join(f'{s:.0f} MB' for s in sizes)} "
          f"(generated/checked in {gen_s:.1f} s)")  # fmt: skip
    opened = [0]
    real_connect = sqlite3.connect

    def counting_connect(*a, **k):  # type: ignore[no-untyped-def]
        opened[0] += 1
        return real_connect(*a, **k)

    sqlite3.connect = counting_connect  # type: ignore[assignment]
    config = BuildConfig(n=args.n, seed=args.seed, workers=args.workers, sample_rows=args.sample_rows)
    t0 = time.perf_counter()
    envs = load_environments(paths, sample_rows=config.sample_rows, seed=config.seed)
    load_s = time.perf_counter() - t0
    tmp = Path(tempfile.mkdtemp(prefix="envlunch-bird-")) if args.keep is None else args.keep
    try:
        report = build_tasks(envs, tmp / "tasks.jsonl", config)
    finally:
        sqlite3.connect = real_connect  # type: ignore[assignment]
        if args.keep is None:
            shutil.rmtree(tmp, ignore_errors=True)
    n = len(report.tasks)
    total = load_s + report.seconds
    rate = n / total
    print(report.sample_text() or f"built on whole tables (--sample-rows {config.sample_rows})")
    print(f"load {load_s:.2f} s + build {report.seconds:.2f} s = {total:.2f} s for {n} tasks = {rate:.2f} tasks/s "
          f"(build alone {n / report.seconds:.2f} tasks/s; {args.workers} workers; draws {report.draws}; "
          f"rejections {dict(report.rejections.most_common(6))})")  # fmt: skip
    print(report.questions_text())
    sql_checks = report.draws * 2
    if args.workers == 1:
        print(f"SQLite connections opened by the build: {opened[0]} for {len(envs)} environments and up to "
              f"{sql_checks} per-copy SQL checks (one connection per copy, reused by every check)")  # fmt: skip
    print(f"ratio to the paper's {PAPER_RATE:.2f} tasks/s: {rate / PAPER_RATE:.2f} x")
    if args.workers == 1:
        shared = opened[0] < sql_checks
        print(f"verdict: the per-copy SQL check shares one connection per copy: {opened[0]} connections for up "
              f"to {sql_checks} checks -> {'met' if shared else 'NOT met'}")  # fmt: skip
    print(f"verdict: >= {BIRD_TARGET:g} tasks/s on 60+ MB databases (load + build): {rate:.2f} tasks/s -> "
          f"{'met' if rate >= BIRD_TARGET else 'NOT met'}")  # fmt: skip
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1600)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--solve", type=int, default=0, help="run the reference solver on the first N tasks")
    ap.add_argument("--solve-time", type=float, default=2.0, help="solver seconds per task")
    ap.add_argument("--keep", type=Path, default=None, help="write the tasks here instead of a temp folder")
    ap.add_argument("--bird", type=int, default=0, help="build on N generated BIRD-like 60+ MB databases")
    ap.add_argument("--gen-dir", type=Path, default=None, help="where the generated databases are kept")
    ap.add_argument(
        "--sample-rows",
        type=int,
        default=BuildConfig.model_fields["sample_rows"].default,
        help="BuildConfig.sample_rows (0: whole tables, as in the paper)",
    )
    args = ap.parse_args()
    if args.bird:
        bird_main(args)
        return
    if not (DATA / "database").is_dir():
        raise SystemExit(f"Spider databases absent: {DATA / 'database'}")
    dev = sorted({r["db_id"] for r in json.loads((DATA / "dev.json").read_text())})
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)")

    t0 = time.perf_counter()
    config = BuildConfig(n=args.n, seed=args.seed, workers=args.workers, sample_rows=args.sample_rows)
    envs = load_environments(
        [DATA / "database"], exclude=dev, sample_rows=config.sample_rows, seed=config.seed
    )
    load_s = time.perf_counter() - t0
    tmp = Path(tempfile.mkdtemp(prefix="envlunch-bench-")) if args.keep is None else args.keep
    out = tmp / "tasks.jsonl"
    report = build_tasks(envs, out, config)
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
        f"time for 1,600 tasks: {t1600:.1f} s  vs  paper {PAPER_SECONDS} s  ({PAPER_SECONDS / t1600:.0f}x faster; "
        f"ratio to the paper's {PAPER_RATE:.2f} tasks/s: {rate / PAPER_RATE:.1f} x)"
    )
    print(f"verdict: 1,600 Spider tasks in < 60 s: {t1600:.1f} s -> {'met' if t1600 < 60 else 'NOT met'}")
    levels = Counter((t.extra["backend"], t.extra["level"]) for t in report.tasks)
    for b in ("sql", "pandas"):
        row = ", ".join(f"L{lv} {levels[(b, lv)]}" for lv in (1, 2, 3, 4))
        print(f"  {b:6s}: {sum(v for (bb, _), v in levels.items() if bb == b):4d} tasks ({row})")
    print(f"draws {report.draws}; rejections: {dict(report.rejections.most_common())}")
    print(report.questions_text())
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

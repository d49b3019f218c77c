"""``datadojo warmup``: EnvLunch warm-up tasks — build, reference-solve, score, audit, §6 probe.

Thin layer over :mod:`datadojo.synth.envlunch`: parse arguments, show progress and summary tables.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from datadojo.cli._executor import EXECUTOR_HELP, RAY_ADDRESS_HELP, cli_executor, node_table, on_executor
from datadojo.cli._options import SettingsGroup, settings_options
from datadojo.cli._ui import progress_bar
from datadojo.synth.envlunch.config import SOLVE_SAMPLE, BuildConfig, SolverConfig

__all__ = ["register"]

warmup_app = typer.Typer(
    name="warmup",
    help=(
        "EnvLunch warm-up (arXiv 2610.33817): verifiable agent tasks made from databases and tables with no "
        "annotation. A random executable trajectory is composed and run; the agent gets the environment and "
        "the final observation o*, and is rewarded for a program that reproduces it in hidden "
        "counterfactual copies of the environment."
    ),
    no_args_is_help=True,
)
console = Console()


def _table(title: str, header: list[str], rows: Iterable[list[Any]], *, left: int = 1) -> Table:
    t = Table(title=title, title_justify="left")
    for i, h in enumerate(header):
        t.add_column(h, justify="left" if i < left else "right")
    for r in rows:
        t.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in r))
    return t


_TASKS_HELP = "Task file made by `warmup build` (its copies in <stem>.copies/ beside it)."


def _load_infos(tasks_path: Path, limit: int | None = None) -> list[Any]:
    from datadojo.cli.inputs import load_tasks
    from datadojo.reward.envlunch import task_info

    if not tasks_path.exists():
        raise typer.BadParameter(f"{tasks_path}: no such task file")
    infos = []
    for task in load_tasks(tasks_path):
        try:
            infos.append(task_info(task, tasks_path))
        except ValueError as exc:
            raise typer.BadParameter(f"{tasks_path}: {exc}") from exc
        if limit is not None and len(infos) >= limit:
            break
    return infos


def _task_of(infos: dict[str, Any], traj: Any, i: int) -> Any:
    info = infos.get(traj.task_id)
    if info is None:
        raise ValueError(f"trajectory {i} (task_id={traj.task_id!r}): no such EnvLunch task in the task file")
    return info.task


def _executor(in_process: bool, concurrency: int) -> Any:
    from datadojo.reward.programs import InProcessExecutor, SandboxExecutor

    return InProcessExecutor() if in_process else SandboxExecutor(concurrency=concurrency)


@warmup_app.command("build")
@settings_options(
    SettingsGroup(
        BuildConfig,
        flags={"n": ("--n",), "workers": ("--workers", "-w")},
        # the machine's cores, not the library's single process; the solver's share of a sample, reported
        defaults={"workers": 2, "solve_sample": SOLVE_SAMPLE},
    )
)
def build(
    config: BuildConfig,
    sources: list[Path] = typer.Argument(..., help="SQLite databases, table files, or folders holding them."),
    out: Path = typer.Option(
        Path("tasks.jsonl"), "--out", "-o", help="Task file; copies go to <stem>.copies/."
    ),
    exclude: list[str] = typer.Option([], "--exclude", help="Environment names (file stems) to leave out."),
    executor: str = typer.Option("local", "--executor", help=EXECUTOR_HELP),
    ray_address: str | None = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
) -> None:
    """Synthesize warm-up tasks (SQL and pandas) with counterfactual copies, and summarize them.

    With `--executor ray` the jobs run on the cluster's nodes (one worker per CPU; --workers is then
    unused); sources and the output folder must be at the same paths on every node. Same seed, same tasks.
    """
    from datadojo.synth.envlunch.build import build_tasks, load_environments
    from datadojo.synth.envlunch.environment import EnvError

    n = config.n
    start = time.perf_counter()
    try:
        envs = load_environments(
            sources,
            exclude=exclude,
            on_error=lambda m: console.print(f"[yellow]skipped:[/] {m}", soft_wrap=True),
            sample_rows=config.sample_rows,
            seed=config.seed,
        )
    except (ValueError, EnvError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    if not envs:
        raise typer.BadParameter("no readable environment among the sources")
    load_s = time.perf_counter() - start
    console.print(f"{len(envs)} environments loaded in {load_s:.1f} s")
    remote = cli_executor(executor, ray_address, 2)
    with on_executor(remote, console), progress_bar(console) as prog:
        bar = prog.add_task("synthesizing", total=n)
        try:
            report = build_tasks(
                envs,
                out,
                config,
                progress=lambda done, _: prog.update(bar, completed=done),
                executor=remote,
            )
        except EnvError as exc:
            raise typer.BadParameter(str(exc)) from exc
    _show_build(report, load_s)
    if remote is not None:
        console.print(node_table([s.to_dict() for s in remote.node_stats()], "Per node (ray)"))


def _show_build(report: Any, load_s: float = 0.0) -> None:
    tasks = report.tasks
    by_level: dict[tuple[str, int], int] = defaultdict(int)
    for t in tasks:
        by_level[(t.extra["backend"], t.extra["level"])] += 1
    levels = sorted({lv for _, lv in by_level})
    rows = [
        [
            b,
            *[by_level.get((b, lv), 0) for lv in levels],
            sum(v for (bb, _), v in by_level.items() if bb == b),
        ]
        for b in ("sql", "pandas")
    ]
    console.print(
        _table("Tasks by backend and level", ["backend", *[f"L{lv}" for lv in levels], "total"], rows)
    )
    ops = report.by(
        lambda t: (t.extra["backend"], t.extra["operator"] if t.extra["backend"] == "sql" else t.category)
    )
    console.print(
        _table(
            "Tasks by operator",
            ["backend", "operator / terminal", "tasks"],
            [[b, o, c] for (b, o), c in sorted(ops.items())],
            left=2,
        )
    )
    rej = ", ".join(f"{k} {v}" for k, v in report.rejections.most_common())
    console.print(f"draws {report.draws}; rejected: {rej or 'none'}")
    console.print(report.questions_text(), soft_wrap=True)
    total = load_s + report.seconds
    rate = len(tasks) / total if total else 0.0
    console.print(
        f"[bold]{len(tasks)} tasks[/] from {report.envs_used}/{report.n_envs} environments in {total:.1f} s "
        f"(load {load_s:.1f} s + build {report.seconds:.1f} s; {rate:.1f} tasks/s) → {report.out} "
        f"(copies: {report.copies})"
    )
    sampled = report.sample_text()
    if sampled:
        console.print(f"{sampled} (--sample-rows 0: whole tables)", soft_wrap=True)
    if report.missing:
        console.print(
            f"[yellow]{report.missing} tasks could not be made (environments too small or too few)[/]"
        )
    if report.solver is not None:
        console.print(report.solver.text(), soft_wrap=True)
        console.print(
            "(--solve-sample N, --solve-candidates C: its sample and budget; --solve-sample 0: none)"
        )
    else:
        console.print("reference solver: not run (--solve-sample 0)")


@warmup_app.command("solve")
@settings_options(
    SettingsGroup(
        SolverConfig,
        flags={"time_limit_s": ("--time-limit",)},
        convert={"time_limit_s": lambda v: v or None},
    )
)
def solve(
    config: SolverConfig,
    tasks_path: Path = typer.Argument(..., metavar="TASKS.jsonl", help="Task file made by `warmup build`."),
    out: Path = typer.Option(
        Path("trajectories.jsonl"), "--out", "-o", help="Trajectory JSONL (overwritten)."
    ),
    limit: int | None = typer.Option(None, "--limit", help="Only the first N tasks."),
) -> None:
    """Run the reference query-by-output solver; write its trajectories (score them with `warmup score`)."""
    from datadojo.jsonl import write_jsonl_atomic
    from datadojo.synth.envlunch.solver import solve as run_solve
    from datadojo.synth.envlunch.solver import solver_trajectory

    infos = _load_infos(tasks_path, limit)
    trajs = []
    with progress_bar(console) as prog:
        bar = prog.add_task("solving", total=len(infos))
        for info in infos:
            res = run_solve([info], config)[0]
            trajs.append(solver_trajectory(info, res))
            prog.advance(bar)
    write_jsonl_atomic(out, trajs)
    found = sum(t.final_answer is not None for t in trajs)
    console.print(f"found a program for {found}/{len(trajs)} tasks on E (copies not checked yet) → {out}")


@warmup_app.command("score")
def score(
    tasks_path: Path = typer.Argument(..., metavar="TASKS.jsonl", help=_TASKS_HELP),
    trajectories: Path = typer.Argument(
        ..., metavar="TRAJECTORIES.jsonl", help="Trajectories to reward (from `warmup solve`, `rollout`)."
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write the trajectories with rewards here."),
    in_process: bool = typer.Option(
        False,
        "--in-process",
        help="Run programs here, not in the sandbox "
        "(only for programs you trust, e.g. the reference solver's).",
    ),
    concurrency: int = typer.Option(2, "--concurrency", "-j", help="Sandboxes at once."),
    report: Path | None = typer.Option(
        None,
        "--report",
        help="Also write a run folder here with report.html / report.md (scores, trajectories).",
    ),
) -> None:
    """Reward trajectories (EnvLunch Eq. 4): run each submitted program in every counterfactual copy."""
    from datadojo.jsonl import JsonlError, read_trajectories, write_jsonl_atomic
    from datadojo.reward.registry import RewardSpec, envlunch_records

    infos = {i.task.id: i for i in _load_infos(tasks_path)}
    try:
        trajs = list(read_trajectories(trajectories))
    except (JsonlError, OSError) as exc:
        raise typer.BadParameter(str(exc)) from exc
    with console.status(f"scoring {len(trajs)} trajectories"):
        try:
            pairs = [(_task_of(infos, traj, i), traj) for i, traj in enumerate(trajs)]
            spec = RewardSpec(name="envlunch", tasks_path=str(tasks_path))
            records = envlunch_records(pairs, spec, executor=_executor(in_process, concurrency))
        except ValueError as exc:
            raise typer.BadParameter(f"{trajectories}: {exc}") from exc
    if out is not None:
        for traj, rec in zip(trajs, records, strict=True):
            traj.rewards["envlunch"] = rec.reward
            traj.extra["envlunch"] = rec.to_dict()
        write_jsonl_atomic(out, trajs)
    _show_scores(records)
    if report is not None:
        from datadojo.synth.envlunch.report import write_warmup_report

        html, _md = write_warmup_report(report, tasks_path, trajs, records)
        console.print(f"report: {html}")


def _show_scores(records: list[Any]) -> None:
    from datadojo.synth.envlunch.report import headline, headline_rows

    groups: dict[tuple[str, int], list[Any]] = defaultdict(list)
    for r in records:
        groups[(r.backend, r.level)].append(r)
    cols = ["backend", "level", "n", "pass@1 (solved in all copies)", "mean credit (min_k m)", "mean R"]
    rows = []
    for (b, lv), rs in sorted(groups.items()):
        h = headline(rs)
        rows.append([b, lv, len(rs), h.pass_at_1, h.mean_credit, h.mean_reward])
    console.print(_table("EnvLunch rewards", cols, rows))
    if records:  # the same figures, labels and rounding as the report page's summary
        for label, text in headline_rows(headline(records)):
            console.print(f"{label}: {text}")


@warmup_app.command("audit")
def audit(
    tasks_path: Path = typer.Argument(..., metavar="TASKS.jsonl", help=_TASKS_HELP),
    limit: int | None = typer.Option(None, "--limit", help="Only the first N tasks."),
    sandbox: bool = typer.Option(False, "--sandbox", help="Run the constant programs in the sandbox too."),
) -> None:
    """Hack-resistance audit: score the answer that prints o* as constants, with copies on and off."""
    from datadojo.synth.envlunch.audit import run_audit

    infos = _load_infos(tasks_path, limit)
    with console.status(f"auditing {len(infos)} tasks"):
        report = run_audit(infos, _executor(not sandbox, 2))
    rows = [[b, n, w, wo] for b, (n, w, wo) in report.by_backend().items()]
    rows.append(["all", report.n, report.pass_with_copies, report.pass_without_copies])
    console.print(
        _table(
            "Constant-printing answer: pass rate (min_k m = 1)",
            ["backend", "tasks", "with copies", "without copies"],
            rows,
        )
    )
    leaks = report.leaks()
    if leaks:
        console.print(
            f"[red]{len(leaks)} tasks pay the constant answer despite the copies:[/] {', '.join(leaks[:10])}"
        )
        raise typer.Exit(1)
    console.print("[green]no retained task rewards the constant answer[/]")


@warmup_app.command("probe-tasks")
def probe_tasks(
    out: Path = typer.Option(
        Path("probe.jsonl"), "--out", "-o", help="Task file; tables go to <stem>.probe/."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the probe tables and tasks."),
    per_domain: int = typer.Option(25, "--per-domain", help="Tasks per domain (6 domains; §6 uses 25)."),
) -> None:
    """Write the §6 controlled environment: 6 domains × 25 tasks over 64 hidden encodings."""
    from datadojo.synth.envlunch.probe import make_probe_tasks

    tasks = make_probe_tasks(out, seed=seed, per_domain=per_domain)
    console.print(f"{len(tasks)} probe tasks → {out}")


@warmup_app.command("probe")
def probe(
    tasks_path: Path = typer.Argument(
        ..., metavar="PROBE.jsonl", help="Probe task file made by `warmup probe-tasks`."
    ),
    trajectories: Path = typer.Argument(
        ..., metavar="TRAJECTORIES.jsonl", help="Trajectories of an agent on those tasks (from `rollout`)."
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write per-trajectory curves (JSONL)."),
    in_process: bool = typer.Option(False, "--in-process", help="Replay here instead of in the sandbox."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed for the 95% intervals."),
) -> None:
    """Remaining uncertainty log2(#consistent worlds) after each action (§6), mean and 95% interval."""
    from datadojo.jsonl import read_tasks, read_trajectories, write_jsonl_atomic
    from datadojo.synth.envlunch.probe import uncertainty_curves

    tasks = {t.id: t for t in read_tasks(tasks_path)}
    trajs = list(read_trajectories(trajectories))
    curves = []
    with progress_bar(console) as prog:
        bar = prog.add_task("replaying in 64 worlds", total=len(trajs))
        for traj in trajs:
            try:
                curves.extend(uncertainty_curves(tasks, [traj], in_process=in_process))
            except ValueError as exc:
                raise typer.BadParameter(f"{trajectories}: {exc}") from exc
            prog.advance(bar)
    if out is not None:
        write_jsonl_atomic(out, [c.to_dict() for c in curves])
    longest = max((len(c.bits) for c in curves), default=0)
    rows = []
    for i in range(longest):
        # a trajectory that stopped keeps its last uncertainty (6 bits if it took no action)
        vals = [c.bits[i] if i < len(c.bits) else (c.bits[-1] if c.bits else 6.0) for c in curves]
        lo, hi = _bootstrap(vals, seed)
        rows.append([i + 1, len(vals), statistics.fmean(vals), lo, hi])
    console.print(
        _table(
            "Remaining uncertainty (bits) after each action",
            ["action", "n", "mean", "95% lo", "95% hi"],
            rows,
        )
    )
    console.print(
        f"{sum(c.unmatched for c in curves)} actions could not be replayed exactly (they filter nothing)"
    )


def _bootstrap(values: list[float], seed: int, n: int = 1000) -> tuple[float, float]:
    """95% percentile interval of the mean by bootstrap resampling over trajectories (§6)."""
    if not values:
        return (math.nan, math.nan)
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(values, k=len(values))) for _ in range(n))
    return means[int(0.025 * n)], means[int(0.975 * n) - 1]


def register(app: typer.Typer) -> None:
    """Add the ``warmup`` command group to the ``datadojo`` app."""
    app.add_typer(warmup_app, name="warmup")

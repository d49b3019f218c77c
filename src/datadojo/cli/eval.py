"""``datadojo eval``, ``datadojo report`` and ``datadojo bench``: evaluate agents on benchmarks, report, download."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn
from rich.table import Table

from datadojo.agent import RolloutSummary
from datadojo.bench import benchmark_names, get_benchmark
from datadojo.cli._executor import EXECUTOR_HELP, RAY_ADDRESS_HELP, cli_executor, node_table
from datadojo.cli._options import SettingsGroup, model_option, settings_options
from datadojo.cli._ui import (
    error_exit,
    exit_if_server_down,
    interrupted,
    progress_bar,
    warn_if_cells_can_stat,
)
from datadojo.config import config_help
from datadojo.eval.audit_report import audit_category_rows, audit_headline_rows
from datadojo.eval.harness import EvalConfig
from datadojo.eval.report import behaviour_rows, decision_rows, official_value, tasks_shown
from datadojo.llm.base import SamplingParams
from datadojo.runs.html import natural_key
from datadojo.sandbox.config import SandboxConfig
from datadojo.types import Task, Trajectory

__all__ = ["register"]


def _parse_pairs(values: list[str], hint: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=hint)
        out[key.strip()] = value.strip()
    return out


def _loader_options(values: list[str]) -> dict[str, Any]:
    """``-o key=value`` pairs as loader keyword arguments (``true``/``false`` and integers converted)."""
    out: dict[str, Any] = {}
    for key, value in _parse_pairs(values, "--option").items():
        low = value.lower()
        parsed: Any = value
        if low in ("true", "false"):
            parsed = low == "true"
        elif low.lstrip("-").isdigit():
            parsed = int(low)
        out[key.replace("-", "_")] = parsed
    return out


def _pct(v: Any) -> str:
    return "n/a" if v is None else f"{float(v):.2%}"


def _summary_table(summary: dict[str, Any]) -> Table:
    m = summary["metrics"]
    n = summary["n_trials"]
    table = Table(title=f"{summary['benchmark']} · {summary.get('model')}", show_header=True)
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("tasks × trials", f"{tasks_shown(summary).removesuffix(' tasks')} × {n}")
    table.add_row("scoring rule", (summary.get("rule") or {}).get("name", "not recorded"))
    for _key, label, value in decision_rows(summary):
        table.add_row(label, value)
    table.add_row("pass@1 (mean over trials)", _pct(m.get("pass@1")))
    for k in summary.get("ks", []):
        if k != 1 and f"pass@{k}" in m:
            table.add_row(f"pass@{k} (unbiased)", _pct(m[f"pass@{k}"]))
    table.add_row(f"any of {n}", _pct(m.get("any_of_n")))
    for key, value in (summary.get("official") or {}).items():
        if key.startswith("concept:"):
            continue
        table.add_row(f"official: {key}", official_value(key, value))
    table.add_row("success rate (answered in budget)", _pct(m.get("success_rate")))
    if m.get("avg_turns") is not None:
        table.add_row("avg turns", f"{m['avg_turns']:.2f}")
    if m.get("avg_tokens") is not None:
        table.add_row("avg tokens", f"{m['avg_tokens']:.0f}")
    rewards = summary.get("rewards") or {}
    if rewards.get("mean_total") is not None:
        table.add_row("mean DataMind reward", f"{rewards['mean_total']:.3f}")
    for _key, label, value in audit_headline_rows(summary):
        table.add_row(label, value)
    for label, value in behaviour_rows(summary):
        table.add_row(label, value)
    for reason, count in (summary.get("stop_reasons") or {}).items():
        table.add_row(f"  stop: {reason}", str(count))
    if summary.get("missing_trials"):
        table.add_row("[red]trials missing[/red]", str(summary["missing_trials"]))
    return table


def _category_table(summary: dict[str, Any], limit: int = 25) -> Table | None:
    per = summary["metrics"].get("per_category") or {}
    if len(per) < 2:
        return None
    table = Table(title="by category", show_header=True)
    for col, kw in (("category", {}), ("tasks", {"justify": "right"}), ("pass@1", {"justify": "right"}),
                    ("any of n", {"justify": "right"})):  # fmt: skip
        table.add_column(col, **kw)
    audit = dict(audit_category_rows(summary))
    if audit:  # the data-blind audit's figures beside the raw ones
        for col in ("blind pass@1", "data-dependent"):
            table.add_column(col, justify="right")
    items = sorted(per.items(), key=lambda kv: (-kv[1]["n_tasks"], natural_key(kv[0])))
    for cat, s in items[:limit]:
        blind = [_pct(audit[cat]["blind"]), _pct(audit[cat]["data_dependent"])] if cat in audit else []
        table.add_row(escape(cat), str(s["n_tasks"]), _pct(s.get("pass@1")), _pct(s.get("any_of_n")),
                      *(blind or ["n/a", "n/a"] if audit else []))  # fmt: skip
    if len(items) > limit:
        table.add_row(f"… {len(items) - limit} more", "", "", "", *(["", ""] if audit else []))
    return table


def _sandbox_override(
    base: Any, mode: str | None, isolation: str | None, timeout: float | None, fork_server: bool | None = None
) -> Any:
    """The benchmark's sandbox with the user's mode, isolation, per-call timeout and fork server
    (``None``: keep)."""
    changes: dict[str, Any] = {}
    if fork_server is not None:
        changes["fork_server"] = fork_server
    if mode is not None:
        changes["mode"] = mode
    if isolation is not None:
        changes["isolation"] = isolation
    if timeout is not None:
        changes["limits"] = base.limits.replace(wall_s=timeout, cpu_s=timeout)
    return base.replace(**changes)


_EVAL_FIELDS = ("agent", "n_trials", "limit", "concurrency", "max_turns", "dialect", "reserve_final_turn", "seed",
                "judge_structured", "report", "audit")  # fmt: skip


@settings_options(
    SettingsGroup(
        EvalConfig,
        param="settings",
        fields=_EVAL_FIELDS,
        partial=True,  # bench, data, out come from the command line
        flags={
            "n_trials": ("-n", "--trials"),
            "concurrency": ("--concurrency", "-j"),
            "max_turns": ("--max-turns", "-T"),
            "report": ("--report/--no-report",),
        },
    )
)
def eval_command(
    settings: dict,
    bench: str = typer.Argument(
        ...,
        help=f"Benchmark: {', '.join(benchmark_names())}; or a task file (.jsonl), run as `tasks --data FILE`.",
    ),
    data: Path | None = typer.Option(
        None, "--data", help="The benchmark's files in their official layout (default: its download cache)."
    ),
    model: str | None = model_option("--model", "-m", role="The agent's model (for --agent model)."),
    judge: str | None = model_option(
        "--judge", role=config_help(EvalConfig, "judge", default=False), envvar="DATADOJO_JUDGE"
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Run folder: trajectories, scores, summary, report."),
    temperature: float | None = typer.Option(
        None,
        "--temperature",
        help="Sampling temperature (default: the benchmark's; DataMind 0.7, scidata 0.6).",
    ),
    top_p: float | None = typer.Option(
        None, "--top-p", help="Nucleus sampling (default: the benchmark's, 0.95)."
    ),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="Cap on tokens per reply."),
    option: list[str] = typer.Option(
        [], "--option", help="Loader option KEY=VALUE, e.g. `--option split=dev`."
    ),
    split: str | None = typer.Option(
        None,
        "--split",
        help="The split to evaluate (the loader option `split`), e.g. `--split test` for DABstep's hidden "
        "questions, whose answers go to OUT/dabstep_submission.jsonl for the leaderboard.",
    ),
    mode: str | None = typer.Option(
        None,
        "--mode",
        help=f"{config_help(SandboxConfig, 'mode', default=False)} Default: the benchmark's (scidata persistent).",
    ),
    isolation: str | None = typer.Option(None, "--isolation", help=config_help(SandboxConfig, "isolation")),
    fork_server: bool | None = typer.Option(
        None, "--fork-server/--no-fork-server", help=config_help(SandboxConfig, "fork_server")
    ),
    timeout: float | None = typer.Option(
        None,
        "--timeout",
        help="Wall-clock and CPU seconds per code call (default: the benchmark's sandbox; 60, scidata 120).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print summary.json on stdout instead of the tables."),
    executor: str = typer.Option("local", "--executor", help=EXECUTOR_HELP),
    ray_address: str | None = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
) -> None:
    """Evaluate an agent on BENCH: n trials per task, scored with the benchmark's official rule; resumable.

    Writes OUT/trajectories.jsonl (appended as trials finish), OUT/scores.jsonl (one row per trial),
    OUT/summary.json (pass@1, pass@k, any-of-n, success rate, turns, tokens, per category, behavioural
    metrics) and OUT/report.html + OUT/report.md. Rerunning the same command resumes an interrupted run.

    Example: datadojo bench download spider, then datadojo eval spider --agent oracle -n 1 --out runs/spider-oracle
    (no --data: the downloaded copy; --data DIR for a copy of your own)

    SciDataSailor-Bench (Meta judged by an LLM, QA scored by tolerant matching with units; --data is a task
    file or a folder with qa.jsonl / meta.jsonl, `--option track=qa` keeps one track, `--option
    qa_scoring=rule|judge|rule+judge` chooses how QA is scored, `--option qa_rel_tol=0.01` its tolerance):
    datadojo eval scidata --data examples/scidata_tasks.jsonl --model SPEC --judge SPEC -T 12 -n 1 --out runs/sd
    """
    bench, data = _task_file_as_bench(bench, data)
    try:
        benchmark = get_benchmark(bench)
    except KeyError as exc:
        raise typer.BadParameter(str(exc.args[0]), param_hint="BENCH") from exc
    agent = settings.get("agent", "model")
    sampling = {**_dict(settings.get("sampling")), **{k: v for k, v in
                (("temperature", temperature), ("top_p", top_p), ("max_tokens", max_tokens)) if v is not None}}  # fmt: skip
    d = benchmark.defaults
    try:
        cfg = EvalConfig(**{
            **settings, "bench": benchmark.name, "data": data or _downloaded(benchmark), "out": out,
            "model": model if agent == "model" else None, "judge": judge,
            "sampling": SamplingParams(**{"temperature": d.temperature, "top_p": d.top_p, **sampling}),
            "loader_options": {**settings.get("loader_options", {}), **_loader_options(option),
                               **({"split": split} if split is not None else {})},
            "sandbox": _sandbox(benchmark, settings.get("sandbox"), mode, isolation, timeout, fork_server),
        })  # fmt: skip
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    warn_if_cells_can_stat([cfg.data], (cfg.sandbox or benchmark.sandbox_config()).isolation)
    remote = cli_executor(executor, ray_address, cfg.concurrency)
    result = _run_eval(cfg, benchmark.name, remote)
    if as_json:
        sys.stdout.write(json.dumps(result.summary, ensure_ascii=False, default=str) + "\n")
    else:
        _print_eval_result(result, remote)
    if result.rollout is not None:
        exit_if_server_down(result.rollout, model or "the model")


def _task_file_as_bench(bench: str, data: Path | None) -> tuple[str, Path | None]:
    """``datadojo eval tasks.jsonl`` is ``datadojo eval tasks --data tasks.jsonl``: a user's own task file
    named where a benchmark would be (a registered name always wins)."""
    if bench in benchmark_names() or not bench.endswith(".jsonl") or not Path(bench).is_file():
        return bench, data
    if data is not None:
        raise typer.BadParameter(
            f"{bench} is a task file; give it as BENCH or as --data, not both", param_hint="BENCH"
        )
    return "tasks", Path(bench)


def _dict(value: Any) -> dict[str, Any]:
    """A settings-file table (or a SamplingParams read from one) as a plain dict."""
    if value is None:
        return {}
    return dict(value) if isinstance(value, dict) else dict(vars(value))


def _downloaded(benchmark: Any) -> Path:
    """The benchmark's download cache, when no --data is given; a usage error if it is not complete."""
    from datadojo.bench.download import MANIFEST, cache_dir

    cached = cache_dir(benchmark.name)
    manifest = cached / MANIFEST
    if benchmark.source is None and not manifest.exists():
        why = f" ({benchmark.no_source})" if benchmark.no_source else ""
        raise typer.BadParameter(
            f"no --data given and {benchmark.name} has no download source{why}", param_hint="--data"
        )
    if not manifest.exists() or not json.loads(manifest.read_text(encoding="utf-8")).get("complete"):
        raise typer.BadParameter(
            f"no --data given and {cached} holds no complete download; pass --data PATH or run "
            f"`datadojo bench download {benchmark.name}`",
            param_hint="--data",
        )
    return cached


def _sandbox(
    benchmark: Any,
    table: Any,
    mode: str | None,
    isolation: str | None,
    timeout: float | None,
    fork_server: bool | None = None,
) -> Any:
    """The benchmark's sandbox with the --config file's [sandbox] table and the flags over it (``None``:
    the benchmark's, untouched)."""
    if not table and mode is None and isolation is None and timeout is None and fork_server is None:
        return None
    base = benchmark.sandbox_config()
    if table:
        base = base.replace(**_dict(table))
    return _sandbox_override(base, mode, isolation, timeout, fork_server)


def _run_eval(cfg: EvalConfig, name: str, remote: Any) -> Any:
    """:func:`~datadojo.eval.harness.run_eval` with progress bars; Ctrl-C and file errors end the command."""
    from datadojo.eval.harness import run_eval

    console = Console(stderr=True)

    async def main() -> Any:
        with progress_bar(console, "[bold]{task.description}", TextColumn("{task.fields[rate]}")) as progress:
            bar = progress.add_task(name, total=None, rate="")

            passes: list[int] = []

            def on_tasks(tasks: list[Task]) -> None:
                passes.append(len(tasks))  # a second pass is the data-blind audit's blind run
                label = name + (" · blind (data withheld)" if len(passes) > 1 else "")
                progress.update(bar, total=len(tasks) * cfg.n_trials, completed=0, description=label)

            def on_trajectory(traj: Trajectory, s: RolloutSummary) -> None:
                progress.update(
                    bar,
                    completed=s.finished + s.skipped,
                    rate=f"{s.trajectories_per_s:.2f} traj/s · errors {s.errors}",
                )

            judge_bar: list[Any] = []

            def on_verdict(done: int, total: int) -> None:
                if not judge_bar:
                    judge_bar.append(progress.add_task("judge", total=total, rate="judging"))
                progress.update(judge_bar[0], completed=done)

            try:
                result = await run_eval(
                    cfg,
                    on_trajectory=on_trajectory,
                    on_tasks=on_tasks,
                    on_verdict=on_verdict,
                    executor=remote,
                )
            finally:
                if remote is not None:
                    await remote.aclose()
            if result.rollout is not None:
                progress.update(bar, completed=result.rollout.finished + result.rollout.skipped)
            return result

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        raise interrupted("trajectories written so far are kept") from None
    except OSError as exc:  # a file that cannot be read or written (bad settings and records: DataDojoError)
        raise error_exit(exc) from exc


def _print_eval_result(result: Any, remote: Any) -> None:
    out_console = Console()
    out_console.print(_summary_table(result.summary))
    if remote is not None and result.rollout is not None:
        out_console.print(node_table(result.rollout.nodes, f"Per node ({result.rollout.executor})"))
    cats = _category_table(result.summary)
    if cats is not None:
        out_console.print(cats)
    for key, path in result.paths.items():
        out_console.print(f"{key}: {path}")


def report_command(
    run_dir: Path = typer.Argument(..., metavar="DIR", help="A `datadojo eval` output folder."),
    max_trajectories: int = typer.Option(
        1000, "--max-trajectories", help="Trajectories shown in the viewer."
    ),
) -> None:
    """(Re)build DIR/report.html and DIR/report.md from a run folder's summary, scores and trajectories."""
    from datadojo.eval.report import write_report

    try:
        html_path, md_path = write_report(run_dir, max_trajectories=max_trajectories)
    except FileNotFoundError as exc:
        raise error_exit(exc) from exc
    typer.echo(f"report: {html_path}\nsummary: {md_path}")


bench_app = typer.Typer(
    help="Benchmarks: list them, download their files, export their tasks for RL.", no_args_is_help=True
)


@bench_app.command("list")
def bench_list() -> None:
    """List the benchmarks, their download sources and whether they are in the cache."""
    from datadojo.bench.download import describe_sources
    from datadojo.bench.registry import get_source, source_names

    table = Table(title="benchmarks", show_header=True)
    for col in ("name", "metric", "turns", "tool", "download source", "cached"):
        table.add_column(col)
    sources = {row["name"]: row for row in describe_sources([get_source(s) for s in source_names()])}
    for name in benchmark_names():
        b = get_benchmark(name)
        src = sources.get(name)
        table.add_row(
            name,
            b.metric,
            str(b.defaults.max_turns),
            b.defaults.language,
            src["homepage"] if src else "—",
            ("yes: " + src["cache"]) if src and src["downloaded"] else "no",
        )
    Console().print(table)


@bench_app.command("download")
def bench_download(
    name: str = typer.Argument(..., help="Benchmark to download."),
    url: str | None = typer.Option(
        None,
        "--url",
        help="Mirror base URL holding the files under their names (or $DATADOJO_BENCH_URL_<NAME>).",
    ),
    cache_dir: Path | None = typer.Option(
        None,
        "--cache-dir",
        help="Folder to fill (default: ~/.cache/datadojo/bench/NAME or $DATADOJO_BENCH_CACHE).",
    ),
    sha256: list[str] = typer.Option([], "--sha256", help="Pin a digest: FILE=HEX (repeatable)."),
    force: bool = typer.Option(False, "--force", help="Download again files already in the cache."),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds without data before a request fails."),
) -> None:
    """Download NAME from its official public source (or a mirror) into the cache, verifying SHA-256 digests."""
    from datadojo.bench.download import download_benchmark

    console = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:,} B"),
                  console=console, transient=True) as progress:  # fmt: skip
        bars: dict[str, Any] = {}

        def hook(file: str, done: int, total: int | None) -> None:
            if file not in bars:
                bars[file] = progress.add_task(file, total=total)
            progress.update(bars[file], completed=done)

        try:
            result = download_benchmark(
                name,
                url=url,
                cache_root=cache_dir,
                sha256=_parse_pairs(sha256, "--sha256"),
                force=force,
                timeout_s=timeout,
                progress=hook,
            )
        except KeyError as exc:
            raise typer.BadParameter(str(exc.args[0]), param_hint="NAME") from exc
        except OSError as exc:
            raise error_exit(exc) from exc
    table = Table(title=f"{result.benchmark}: {len(result.files)} file(s)", show_header=True)
    for col in ("file", "status", "bytes", "sha256", "pinned"):
        table.add_column(col)
    for f in result.files:
        table.add_row(
            f.name, f.status, f"{f.size:,}", f.sha256[:16] + "…", "yes" if f.pinned else "first use"
        )
    Console().print(table)
    typer.echo(f"data: {result.path}  (pass it as --data, or omit --data: `datadojo eval` looks here)")


@bench_app.command("export")
def bench_export(
    name: str = typer.Argument(..., help="Benchmark whose tasks to export."),
    data: Path | None = typer.Option(
        None, "--data", help="The benchmark's files in their official layout (default: its download cache)."
    ),
    out: Path = typer.Option(
        ..., "--out", "-o", help="The task file to write, or a folder for rl_tasks.jsonl."
    ),
    option: list[str] = typer.Option(
        [], "--option", help="Loader option KEY=VALUE, e.g. `--option split=dev`."
    ),
    split: str | None = typer.Option(
        None, "--split", help="The split to export (the loader option `split`)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print what was written as JSON."),
) -> None:
    """Write NAME's tasks with public answers as an RL task file (rl_tasks.jsonl) for `datadojo train rl`.

    Each task keeps the benchmark's name as its source, so the reward scores answers with the benchmark's
    own rule; tasks whose answers are withheld (DABstep's test split) are left out and counted.

    Example: datadojo bench download dabstep, then datadojo bench export dabstep --split dev --out runs/rl
    """
    from datadojo.bench.base import BenchmarkError
    from datadojo.bench.export import export_rl_tasks

    try:
        benchmark = get_benchmark(name)
    except KeyError as exc:
        raise typer.BadParameter(str(exc.args[0]), param_hint="NAME") from exc
    options = {**_loader_options(option), **({"split": split} if split is not None else {})}
    try:
        result = export_rl_tasks(benchmark, data or _downloaded(benchmark), out, options=options)
    except TypeError as exc:  # an option this loader does not take
        raise typer.BadParameter(str(exc), param_hint="--option") from exc
    except (BenchmarkError, ValueError, OSError) as exc:
        raise error_exit(exc) from exc
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict()) + "\n")
        return
    typer.echo(f"{result.path}: {result.written} task(s) with public answers")
    if result.skipped:
        shown = ", ".join(result.skipped[:5]) + (" …" if len(result.skipped) > 5 else "")
        typer.echo(f"left out {len(result.skipped)} task(s) whose answers are withheld: {shown}")
    if result.needs_judge:
        shown = ", ".join(result.needs_judge[:5]) + (" …" if len(result.needs_judge) > 5 else "")
        typer.echo(
            f"left out {len(result.needs_judge)} task(s) only an LLM judge can score (the reward has none): "
            f"{shown}; see the benchmark's loader options (KramaBench: --option paraphrase=rule)"
        )


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
    app.command("report")(report_command)
    app.add_typer(bench_app, name="bench")

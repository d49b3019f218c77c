"""``datadojo recipe run|plan CONFIG``: a paper end to end from one TOML file (docs/recipes.md).

Thin over :mod:`datadojo.recipes`: the command reads the file, applies ``--out`` / ``--sweep`` /
``--executor``, shows the plan (what is cached, what runs and why), runs it with a progress bar per stage,
and ends with a table of every stage and the report's paths.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from datadojo.cli._executor import EXECUTOR_HELP, RAY_ADDRESS_HELP, cli_executor
from datadojo.cli._ui import error_exit, progress_bar
from datadojo.errors import ExitCode

__all__ = ["recipe_app", "register"]

recipe_app = typer.Typer(
    help="Run a paper's recipe end to end from one TOML config: corpus → synthesis → curation → train sft → "
    "RL tasks → train rl → eval of base/SFT/RL → report. Stages are cached by the content of their inputs, "
    "their settings and their code, so a rerun after an edit redoes only what the edit reaches, and a "
    "killed run resumes. Examples: examples/recipes/*.toml.",
    no_args_is_help=True,
)

SWEEP_HELP = (
    "KEY=V1,V2: run the recipe once per value of a dotted setting (repeat for a grid), e.g. "
    "stages.curation.strategy=con-select,non-con or stages.rl.gamma_mode=cosine,linear; stages whose inputs "
    "are the same in several variants run once; the report plots the variants (a \\[study] section in the "
    "recipe names the method and baseline arms and the seeds per point: docs/recipes.md)."
)
STATUS_STYLE = {"cached": "green", "run": "yellow", "rerun": "yellow", "shared": "cyan"}


def _plan_table(items: list[Any], title: str) -> Table:
    table = Table(title=title)
    for col in ("variant", "stage", "status", "why", "key"):
        table.add_column(col)
    for i in items:
        style = STATUS_STYLE.get(i.status, "")
        why = "; ".join(i.why) + ("; fans out on --executor" if i.executor else "")
        table.add_row(i.variant, i.stage, f"[{style}]{i.status}[/{style}]", why, i.key[:12])
    return table


def _load(config: Path, out: Path | None, executor: str | None) -> Any:
    from datadojo.recipes import load_recipe

    return load_recipe(config, out=str(out.resolve()) if out else None, executor=executor)


def _go(
    config: Path,
    out: Path | None,
    sweep: list[str],
    executor: str | None,
    ray_address: str | None,
    dry: bool,
    allow_empty: bool = False,
) -> None:
    from datadojo.recipes import parse_sweeps
    from datadojo.testing.loopback import serve_loopback

    cfg = _load(config, out, executor)
    sweeps = parse_sweeps(sweep)
    # the small examples' scripted teachers (`loopback:NAME`), served for the length of the command
    with serve_loopback(cfg) as served:
        _plan_or_run(config, served, sweeps, ray_address, dry, allow_empty)


def _plan_or_run(
    config: Path,
    cfg: Any,
    sweeps: dict[str, list[Any]],
    ray_address: str | None,
    dry: bool,
    allow_empty: bool,
) -> None:
    from datadojo.recipes import RecipeProblems, run

    console = Console(stderr=True)
    if dry:
        result = run(cfg, sweeps=sweeps, dry_run=True)
        Console().print(_plan_table(result.items, f"plan of {config} ({cfg.recipe}) in {result.out}"))
        n = sum(i.status in ("run", "rerun") for i in result.items)
        typer.echo(f"{n} stage runs to do, {sum(i.status == 'cached' for i in result.items)} cached")
        if result.problems:  # every one at once, under the plan; `recipe run` refuses with the same list
            raise error_exit(RecipeProblems(result.problems, str(config)))
        return
    address = ray_address or cfg.ray_address
    remote = cli_executor(cfg.executor, address, 64) if cfg.executor != "local" or address else None
    bars = progress_bar(console, "{task.description}", transient=False)
    tasks: dict[str, Any] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage in tasks:
            bars.update(tasks[stage], completed=done, total=max(total, 1))

    def on_stage(item: Any, event: str) -> None:
        label = f"{item.variant} · {item.stage}"
        if event == "cached":
            console.print(f"[green]cached[/green] {label}")
        elif event == "start":
            tasks[item.stage] = bars.add_task(label, total=None)
        elif event == "done" and item.stage in tasks:
            bars.update(tasks[item.stage], completed=1, total=1)
            bars.remove_task(tasks.pop(item.stage))
            console.print(f"[yellow]ran[/yellow]    {label}")
        elif event == "failed" and item.stage in tasks:  # a replicate of a seeded study: the others go on
            bars.remove_task(tasks.pop(item.stage))
            console.print(f"[red]failed[/red] {label}")
        elif event == "empty":
            console.print(f"[red]empty[/red]  {label}: did nothing useful (see the report)")

    try:
        with bars:
            result = run(
                cfg,
                sweeps=sweeps,
                progress=progress,
                on_stage=on_stage,
                executor=remote,
                allow_empty=allow_empty,
            )
    except RecipeProblems as exc:  # refused before the first stage: the list names the file
        raise error_exit(RecipeProblems(exc.problems, str(config))) from None
    except KeyboardInterrupt:
        typer.echo(
            "interrupted: finished stages are committed; rerun the same command to resume the rest", err=True
        )
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except OSError as exc:  # a file the OS refuses (bad settings and records raise a DataDojoError)
        raise error_exit(exc) from exc
    finally:
        if remote is not None:
            asyncio.run(remote.aclose())  # stops the Ray this command started
    table = Table(title=f"{cfg.recipe} recipe in {result.out}")
    for col in ("variant", "stage", "status", "seconds"):
        table.add_column(col)
    for i in result.items:
        table.add_row(i.variant, i.stage, i.status, f"{result.elapsed.get((i.variant, i.stage), 0.0):.1f}")
    Console().print(table)
    for kind, path in result.report.items():
        typer.echo(f"report ({kind}): {path}")


_CONFIG = typer.Argument(
    ..., exists=True, dir_okay=False, help="the recipe's TOML file (examples/recipes/*.toml)"
)
_OUT = typer.Option(None, "--out", "-o", help="run folder (default: the file's `out`)")
_SWEEP = typer.Option([], "--sweep", help=SWEEP_HELP)
_EXECUTOR = typer.Option(None, "--executor", help=EXECUTOR_HELP + " Default: the file's `executor` (local).")
_RAY = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP)


@recipe_app.command("run")
def run_cmd(
    config: Path = _CONFIG,
    out: Path | None = _OUT,
    sweep: list[str] = _SWEEP,
    executor: str | None = _EXECUTOR,
    ray_address: str | None = _RAY,
    dry_run: bool = typer.Option(False, "--dry-run", help="print the plan and what would rerun; run nothing"),
    allow_empty: bool = typer.Option(
        False,
        "--allow-empty",
        help="go on after a stage that did nothing useful (0 updates, nothing kept, most trials at "
        "context_limit…) instead of stopping; the report still shows it in red (per stage: `allow_empty` "
        "in the recipe file)",
    ),
) -> None:
    """Check the whole file (refusing with every problem at once, exit 2; 3 for a model server that does not
    answer), then run every stage not cached, then the report (OUT/report.html, OUT/report.md). A stage that
    did nothing useful stops the run with its cause (exit 2) unless allowed."""
    _go(config, out, sweep, executor, ray_address, dry_run, allow_empty)


@recipe_app.command("plan")
def plan_cmd(
    config: Path = _CONFIG,
    out: Path | None = _OUT,
    sweep: list[str] = _SWEEP,
    executor: str | None = _EXECUTOR,
) -> None:
    """Print the plan: each stage's key, cached or to run, and why (same as `recipe run --dry-run`), then every
    problem found before the first stage — sections and keys, values, benchmarks, missing paths, context
    windows, unreachable model servers — all at once (exit 2; 3 when only servers are down)."""
    _go(config, out, sweep, executor, None, True)


def register(app: typer.Typer) -> None:
    """Add the ``recipe`` command group to the ``datadojo`` app."""
    app.add_typer(recipe_app, name="recipe")

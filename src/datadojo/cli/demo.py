"""``datadojo demo``: the whole pipeline on the bundled example data, no model, no network (thin over
:mod:`datadojo.demo`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.progress import TaskID
from rich.table import Table

from datadojo.cli._ui import config_option, error_exit, progress_bar
from datadojo.config import config_default, config_help
from datadojo.demo.pipeline import DemoConfig

__all__ = ["register"]


def demo_command(
    out: Path = config_option(DemoConfig, "out", "--out", "-o"),
    examples: Path | None = typer.Option(
        config_default(DemoConfig, "examples"), "--examples", help=config_help(DemoConfig, "examples")
    ),
    tasks: int = config_option(DemoConfig, "n_tasks", "--tasks", min=1),
    candidates: int = config_option(DemoConfig, "solver_candidates", "--candidates", min=1),
    seed: int = config_option(DemoConfig, "seed", "--seed"),
    workers: int = config_option(DemoConfig, "workers", "--workers", "-w", min=1),
    concurrency: int = config_option(DemoConfig, "concurrency", "--concurrency", "-j", min=1),
) -> None:
    """See DataDojo work end to end on the bundled example data, with no model and no network.

    Runs the real pipeline, stage by stage (about a minute on 2 cores):

    1. find the example data (examples/make_examples.py writes it when absent)
    2. profile the example files: the text the agent's prompt shows
    3. build EnvLunch warm-up tasks with hidden counterfactual copies
    4. solve them with the reference solver
    5. run every solver program in the sandbox, in every copy, and reward it
    6. run the oracle agent (gold SQL through the agent loop and sandbox) on shop-sql
    7. write OUT/report.html, linking all of it

    Example: datadojo demo --out runs/demo
    """
    from datadojo.demo import STAGES, DemoError, run_demo

    console = Console()
    titles = dict(STAGES)
    try:
        config = DemoConfig(
            out=out, examples=examples, n_tasks=tasks, solver_candidates=candidates, seed=seed,
            workers=workers, concurrency=concurrency,
        )  # fmt: skip
    except DemoError as exc:
        raise typer.BadParameter(str(exc)) from exc
    console.print(f"[bold]DataDojo demo[/] → {out}  (no model, no network)")
    with progress_bar(console, "{task.description}") as progress:
        bars: dict[str, TaskID] = {}
        order = [name for name, _ in STAGES]

        def on_progress(stage: str, done: int, total: int) -> None:
            if stage not in bars:
                label = f"[{order.index(stage) + 1}/{len(order)}] {titles[stage]}"
                bars[stage] = progress.add_task(label, total=total or None)
            progress.update(bars[stage], completed=done, total=total or None)

        try:
            result = run_demo(config, progress=on_progress)
        except DemoError as exc:
            progress.stop()
            raise error_exit(exc) from exc
        except KeyboardInterrupt:
            progress.stop()
            typer.echo(f"interrupted: rerun the command to start the demo again in {out}", err=True)
            raise typer.Exit(130) from None
    table = Table(title="What the demo did", title_justify="left")
    table.add_column("stage")
    table.add_column("result")
    table.add_column("seconds", justify="right")
    for s in result.stages:
        table.add_row(s.name, s.headline, f"{s.seconds:.1f}")
    table.add_row("[bold]total[/]", "(pipeline, after start-up)", f"[bold]{result.seconds:.1f}[/]")
    console.print(table)
    console.print(f"[bold]report:[/] {result.report}")
    console.print(
        "\n[bold]Next[/]: serve a model behind an OpenAI-compatible endpoint (vLLM, SGLang, Ollama, "
        "llama.cpp, a hosted API), then replace MODEL@http://localhost:8000/v1 with its name and URL:"
    )
    for cmd in result.next_commands:
        console.print(f"  [dim]# {cmd['what']}[/]")
        console.print(f"  {cmd['command']}", soft_wrap=True, highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)

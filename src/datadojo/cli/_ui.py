"""What every command shows the same way: its progress bar, its tables of counts, its config flags.

One definition of each, so a user reads every command's progress and summary alike, and a change of
look is made once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from datadojo.config import config_default, config_help
from datadojo.errors import ExitCode

__all__ = ["config_option", "count_table", "error_exit", "interrupted", "progress_bar"]


def progress_bar(
    console: Console, label: str = "[bold]{task.description}", *extra: ProgressColumn, **options: Any
) -> Progress:
    """A progress bar: ``label`` (rich markup, may use ``{task.description}``), the bar, done/total, time.

    ``extra`` columns follow the elapsed time (a rate, say); ``options`` go to :class:`rich.progress.Progress`
    (``disable``, ``transient``).
    """
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        *extra,
        console=console,
        **options,
    )


def count_table(
    counts: Mapping[str, int],
    what: str,
    unit: str,
    *,
    title: str | None = None,
    total: tuple[str, int] | None = None,
) -> Table:
    """A table of ``counts``: one row per key (column ``what``) with its count (column ``unit``).

    ``total`` = ``(label, n)`` adds a last row in bold (the total is given, not summed: a caller's total
    may count what no row lists).
    """
    table = Table(title=title)
    table.add_column(what)
    table.add_column(unit, justify="right")
    for key, n in counts.items():
        table.add_row(key, str(n))
    if total is not None:
        table.add_row(f"[bold]{total[0]}", f"[bold]{total[1]}")
    return table


def config_option(
    model: type[BaseModel], name: str, *param_decls: str, extra: str = "", **options: Any
) -> Any:
    """A typer option for the configuration field ``name`` of ``model``: the field's default and its help
    (description and allowed values, :func:`datadojo.config.config_help`), so neither is written twice.

    ``extra`` is appended to the help for what only the flag has (how it spells "no bound", an
    environment variable); ``options`` go to :func:`typer.Option` (``min``, ``metavar``…).
    """
    text = config_help(model, name, default=False)
    return typer.Option(config_default(model, name), *param_decls, help=f"{text} {extra}".strip(), **options)


#: Exit status of a run in which every episode failed on the model server (nothing was learnt about the agent).
EXIT_SERVER_DOWN = 3


def exit_if_server_down(summary: Any, model: str) -> None:
    """End the command with :data:`EXIT_SERVER_DOWN` when every episode this run made stopped on ``llm_error``.

    A run against an unreachable or failing model server otherwise ends like a run of a very bad agent
    (exit 0, accuracy 0), and a script or scheduler cannot tell the two apart. Partial failures keep exit 0:
    their episodes are counted in the summary and run again by the next run of the same command (the runner
    drops ``llm_error`` records before it runs a sample again). ``summary`` is a
    :class:`~datadojo.agent.runner.RolloutSummary`; the records written stay where they are.
    """
    failed = summary.stop_reasons.get("llm_error", 0)
    if summary.finished and failed == summary.finished:
        typer.echo(
            f"error: all {failed} episode(s) of this run failed on the model server ({model}): is it up and "
            "serving that model? The records are kept; rerun the same command to run them again.",
            err=True,
        )
        raise typer.Exit(EXIT_SERVER_DOWN)


def interrupted(kept: str) -> typer.Exit:
    """Print the one line of a Ctrl-C (``interrupted: …; rerun to resume``) and return the exit (130) to raise.

    ``kept`` says what the run keeps (``"finished units are kept in runs/x"``): every long-running command
    resumes, and a silent exit 130 leaves the user wondering whether the work so far is lost.
    """
    typer.echo(f"interrupted: {kept}; rerun the same command to resume", err=True)
    return typer.Exit(int(ExitCode.INTERRUPTED))


def error_exit(exc: BaseException) -> typer.Exit:
    """Print ``exc`` as the one ``error: …`` line on stderr and return the exit to raise.

    The form of every error a command reports on purpose: the root handler in ``cli/app.py`` uses it for a
    :class:`~datadojo.errors.DataDojoError` (the status is its ``exit_code``), commands for the ``OSError``
    of a file they read or write (status 2).
    """
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(int(getattr(exc, "exit_code", ExitCode.BAD_INPUT)))


def warn_if_cells_can_stat(paths: list[Any], isolation: str) -> str | None:
    """Print (and return) one line when a cell at the isolation level this run will use could ``stat()``
    one of ``paths`` (a task set with its answers): Landlock has no right for ``stat()``, so only the
    host's folder permissions hide it (docs/sandbox.md, issue 38). Nothing under bubblewrap."""
    from pathlib import Path

    from datadojo.sandbox.exposure import exposure_line
    from datadojo.sandbox.isolation import IsolationUnavailable, resolve_isolation

    try:
        level = resolve_isolation(isolation)
    except (IsolationUnavailable, ValueError):
        return None  # the run itself says why, in its own words
    line = exposure_line([Path(p) for p in paths], level)
    if line:
        Console(stderr=True).print(f"[yellow]{line}[/yellow]")
    return line

"""The ``--executor`` / ``--ray-address`` options shared by every command that can run on Ray."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from datadojo.executor import EXECUTORS, Executor, ExecutorError, make_executor

__all__ = ["EXECUTOR_HELP", "RAY_ADDRESS_HELP", "cli_executor", "node_table", "on_executor"]

EXECUTOR_HELP = (
    f"Where the work runs: {' or '.join(EXECUTORS)}. 'ray' spreads it over a Ray cluster (one worker per node; "
    "outputs are still written here only). Needs `pip install 'datadojo\\[ray]'`; see docs/scaling.md."
)
RAY_ADDRESS_HELP = (
    "Ray cluster to join (HOST:6379, ray://HOST:10001, or 'auto'); default: join the Ray started on this "
    "machine with `ray start`, else start a local one."
)


def cli_executor(name: str, address: str | None, in_flight: int) -> Executor | None:
    """The executor for the flags, or ``None`` for ``local`` (the command's in-process path)."""
    if name not in EXECUTORS:
        raise typer.BadParameter(
            f"expected one of {', '.join(EXECUTORS)}, got {name!r}", param_hint="--executor"
        )
    if name == "local" and not address:
        return None
    try:
        return make_executor(name, address=address, in_flight=in_flight)
    except (ExecutorError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--executor") from exc


def node_table(nodes: Sequence[dict[str, Any]], title: str = "Per node") -> Table:
    """Per-node figures of an executor run (``NodeStats.to_dict`` rows) as a table."""
    table = Table(title=title)
    table.add_column("node")
    table.add_column("workers", justify="right")
    table.add_column("done", justify="right")
    table.add_column("busy s", justify="right")
    table.add_column("retried", justify="right")
    table.add_column("workers lost", justify="right")
    for n in nodes:
        table.add_row(
            n["node"], str(n["workers"]), str(n["done"]), f"{n['busy_s']:.1f}", str(n["retried"]),
            str(n["lost_workers"]),
        )  # fmt: skip
    return table


@contextlib.contextmanager
def on_executor(remote: Executor | None, console: Console) -> Iterator[None]:
    """For synchronous commands: an executor failure ends the command with its message (exit 1), and the
    executor is closed (Ray stopped if the command started it) however the block ends."""
    try:
        yield
    except ExecutorError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    finally:
        if remote is not None:
            asyncio.run(remote.aclose())

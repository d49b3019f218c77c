"""The ``datadojo`` command: a typer app assembled from one module per command group.

Each module in :data:`COMMAND_MODULES` exposes ``register(app)``, which adds its commands or sub-app.
Keeping registration in the modules keeps this file free of per-command knowledge.
"""

from __future__ import annotations

import importlib

import typer

from datadojo import __version__

COMMAND_MODULES: tuple[str, ...] = (
    "agent",
    "corpus",
    "demo",
    "eval",
    "exec",
    "score",
    "synth",
    "train",
    "warmup",
)

app = typer.Typer(
    name="datadojo",
    help=(
        "DataDojo: build, train and evaluate data-analytic LLM agents.\n\n"
        "Agents answer questions about data files (CSV, Excel, SQLite, Parquet, dataset folders) by writing "
        "and running code over many turns in an isolated sandbox. Run `datadojo COMMAND --help` for details."
    ),
    no_args_is_help=True,
    rich_markup_mode="rich",
    pretty_exceptions_show_locals=False,
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"datadojo {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """DataDojo command-line interface."""


for _name in COMMAND_MODULES:
    importlib.import_module(f"datadojo.cli.{_name}").register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()

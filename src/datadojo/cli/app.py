"""The ``datadojo`` command: a typer app assembled from one module per command group.

Each module in :data:`COMMAND_MODULES` exposes ``register(app)``, which adds its commands or sub-app.
Keeping registration in the modules keeps this file free of per-command knowledge.

Errors are handled here, once: a :class:`~datadojo.errors.DataDojoError` escaping any command is printed
as one ``error: ...`` line on stderr with exit status 2; any other exception is a bug and keeps its
traceback. The catch sits in the root group's ``invoke`` so that ``datadojo``, ``python -m`` and typer's
``CliRunner`` in the tests all behave the same.
"""

from __future__ import annotations

import importlib

import click
import typer
from typer.core import TyperGroup

from datadojo import __version__
from datadojo.cli._ui import error_exit
from datadojo.errors import DataDojoError

COMMAND_MODULES: tuple[str, ...] = (
    "agent",
    "corpus",
    "demo",
    "eval",
    "exec",
    "recipe",
    "score",
    "synth",
    "train",
    "warmup",
)


class _RootGroup(TyperGroup):
    """The root command group: turns a :class:`DataDojoError` from any subcommand into one line, exit 2."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except DataDojoError as exc:
            raise error_exit(exc) from exc


app = typer.Typer(
    name="datadojo",
    cls=_RootGroup,
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

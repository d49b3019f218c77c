"""The ``datadojo`` command: a typer app assembled from one module per command group.

Each module in :data:`COMMAND_MODULES` exposes ``register(app)``, which adds its commands or sub-app.
Keeping registration in the modules keeps this file free of per-command knowledge.

The modules are imported when their command runs, not before: :data:`COMMANDS` names the command(s) each
module adds with the one-line help ``datadojo --help`` lists, so the top-level help shows every command
without importing pandas, the OpenAI client or the sandbox (under a second instead of several;
``tests/cli/test_cli_app.py`` checks the table against the commands themselves). A module listed in
:data:`COMMAND_MODULES` but not in :data:`COMMANDS` is registered at import, as before.

Errors are handled here, once: a :class:`~datadojo.errors.DataDojoError` escaping any command is printed
as one ``error: ...`` line on stderr with exit status 2; any other exception is a bug and keeps its
traceback. Only typer is used, not click: typer >= 0.25 carries its own copy of click and no longer installs it.
The catch sits in the root group's ``invoke`` so that ``datadojo``, ``python -m`` and typer's
``CliRunner`` in the tests all behave the same.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from datadojo.errors import DataDojoError
from datadojo.version import __version__

COMMAND_MODULES: tuple[str, ...] = (
    "agent",
    "corpus",
    "demo",
    "env",
    "eval",
    "exec",
    "recipe",
    "score",
    "synth",
    "train",
    "warmup",
)

#: command → (module that registers it, the one line ``datadojo --help`` shows for it), in help order.
COMMANDS: dict[str, tuple[str, str]] = {
    "ask": ("agent", "Ask a question about data files; watch the agent think, run code and answer."),
    "rollout": ("agent", "Run the agent on every task of a JSONL file, n samples each, concurrently; resumable."),
    "demo": ("demo", "See DataDojo work end to end on the bundled example data, with no model and no network."),
    "eval": ("eval", "Evaluate an agent on BENCH: n trials per task, scored with the benchmark's official rule; resumable."),
    "report": ("eval", "(Re)build DIR/report.html and DIR/report.md from a run folder's summary, scores and trajectories."),
    "env": ("env", "DataDojo's environment for other frameworks: serve it over OpenEnv's reset / step / state API."),
    "exec": ("exec", "Run code files as consecutive turns of one trajectory in a fresh sandbox and print the observations."),
    "score": ("score", "Score PREDICTIONS against BENCH with a named scoring rule; print per-item results and totals."),
    "corpus": ("corpus", "Load, filter and profile data files and dataset folders (DataMind §3.1 file collection)."),
    "bench": ("eval", "Benchmarks: list them, download their files, export them as RL tasks."),
    "synth": ("synth", "Synthesize training and benchmark data with a teacher model: DataMind and SciDataSailor."),
    "train": ("train", "Train agents: SFT with environment masking, RL with the mixed SFT + DAPO objective or GRPO."),
    "export": ("train", "Export trajectories / tasks for LLaMA-Factory, TRL or verl."),
    "recipe": ("recipe", "Run a paper's recipe end to end from one TOML config: corpus → synthesis → curation → train sft → RL tasks → train rl → eval → report."),
    "warmup": ("warmup", "EnvLunch warm-up (arXiv 2610.33817): verifiable agent tasks made from databases and tables."),
}  # fmt: skip

#: The click commands of each module imported so far (one import and one build per process).
_BUILT: dict[str, dict[str, Any]] = {}


def module_commands(module: str) -> dict[str, Any]:
    """The click commands ``datadojo.cli.<module>`` registers, built on a scratch app of the same settings."""
    if module not in _BUILT:
        scratch = typer.Typer(rich_markup_mode="rich")
        scratch.callback()(lambda: None)  # a group, even for a module that adds one command
        importlib.import_module(f"datadojo.cli.{module}").register(scratch)
        group = typer.main.get_command(scratch)
        _BUILT[module] = dict(group.commands)
    return _BUILT[module]


class _RootGroup(TyperGroup):
    """The root command group: loads a command's module when it is used (module docstring), and turns a
    :class:`DataDojoError` from any subcommand into one line, exit 2."""

    _listing = False

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return list(dict.fromkeys([*COMMANDS, *super().list_commands(ctx)]))

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:
        if cmd_name in self.commands or cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        module, line = COMMANDS[cmd_name]
        if self._listing and module not in _BUILT:  # the top-level help: its line, without the import
            return TyperCommand(cmd_name, help=line, short_help=line)
        return module_commands(module).get(cmd_name)

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DataDojoError as exc:
            from datadojo.cli._ui import error_exit

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


_LAZY_MODULES = {module for module, _ in COMMANDS.values()}
for _name in COMMAND_MODULES:
    if _name not in _LAZY_MODULES:
        importlib.import_module(f"datadojo.cli.{_name}").register(app)


def main() -> None:
    app()


def exit_now(exc: SystemExit) -> None:
    """End the process with ``exc``'s status once the command is done, skipping the interpreter's teardown
    (``python -m datadojo`` does this after :func:`main`; a caller of :func:`main` gets its ``SystemExit``).

    Why: freeing every module a command imported (the OpenAI client's thousand typed models, pydantic,
    rich) took 0.4-0.9 s after the work was done and the files written, a fixed cost on every command.
    What a normal exit guarantees is kept: the ``atexit`` handlers run (logging's flush, multiprocessing's
    clean-up), stdout and stderr are flushed, and when any other thread is still alive this returns and
    the interpreter exits as usual (it waits for them).
    """
    import atexit
    import os
    import sys
    import threading

    if threading.active_count() > 1:
        return
    code = exc.code
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)  # what SystemExit("message") prints
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            code = code or 120  # what the interpreter returns when the final flush fails
    os._exit(code or 0)


if __name__ == "__main__":
    main()

"""``datadojo exec``: run code files as consecutive turns of one trajectory in a fresh sandbox.

The quickest way to see what an agent would observe: ``datadojo exec a.py b.py --data sales.csv`` runs
``a.py`` then ``b.py`` in one workspace holding ``sales.csv`` and prints each observation. A ``.sql`` turn
runs as one SQL statement against the task's SQLite file (or ``--db NAME``). With ``--json`` each turn is
one JSON object per line (observation, status, error, timed_out, killed, isolation, ...), for scripts.

Exit status: 0 when every turn ran (errors in the code are observations, not failures), 2 for bad input,
3 when the sandbox itself failed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import typer

from datadojo.cli._ui import config_option
from datadojo.cli.inputs import check_data_file, read_text_input
from datadojo.config import config_default, config_help
from datadojo.sandbox.config import Limits, SandboxConfig

__all__ = ["register"]

_LANGUAGES = {".py": "python", ".sql": "sql"}


def _read_turns(files: list[Path]) -> list[tuple[Path, str, str]]:
    turns = []
    for i, path in enumerate(files, start=1):
        language = _LANGUAGES.get(path.suffix.lower())
        if language is None:
            raise typer.BadParameter(
                f"turn {i}: {path} is neither a .py nor a .sql file (data files go after --data, one per --data)",
                param_hint="TURNS",
            )
        if not path.exists():
            raise typer.BadParameter(f"turn {i}: {path} does not exist", param_hint="TURNS")
        text = read_text_input(path, f"turn {i} ({language} code)", "TURNS")
        turns.append((path, language, text))
    return turns


async def _run(
    turns: list[tuple[Path, str, str]], data: list[Path], config: Any, db: str | None
) -> list[tuple[Path, Any]]:
    from datadojo.sandbox import Sandbox

    results = []
    async with await Sandbox.create(data, config) as sandbox:
        for path, language, text in turns:
            results.append((path, await sandbox.run(text, language=language, db=db)))
    return results


def exec_command(
    turns: list[Path] = typer.Argument(
        ..., help="Code files, run in order as the turns of one trajectory (.py or .sql)."
    ),
    data: list[Path] = typer.Option(
        [], "--data", "-d", help="A data file or dataset folder for the workspace (repeat)."
    ),
    mode: str = config_option(SandboxConfig, "mode", "--mode"),
    isolation: str = config_option(SandboxConfig, "isolation", "--isolation"),
    db: str | None = typer.Option(None, "--db", help="SQLite file (visible name) for .sql turns."),
    timeout: float = typer.Option(
        config_default(Limits, "wall_s"),
        "--timeout",
        help=f"{config_help(Limits, 'wall_s', default=False)} CPU seconds: the smaller of this and "
        f"{config_default(Limits, 'cpu_s'):g}.",
    ),
    max_chars: int = config_option(Limits, "max_observation_chars", "--max-chars"),
    no_policy: bool = typer.Option(
        False, "--no-policy", help="Skip the static policy check (isolation still applies)."
    ),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per turn instead of text."),
) -> None:
    """Run TURN files as consecutive turns of one trajectory in a fresh sandbox; print each observation."""
    from datadojo.sandbox import PolicyConfig, SandboxError
    from datadojo.sandbox.isolation import IsolationUnavailable

    if mode not in ("chunked", "persistent"):
        raise typer.BadParameter(f"must be 'chunked' or 'persistent', not {mode!r}", param_hint="--mode")
    if isolation not in ("auto", "bwrap", "landlock", "none"):
        raise typer.BadParameter(
            f"must be 'auto', 'bwrap', 'landlock' or 'none', not {isolation!r}", param_hint="--isolation"
        )
    for path in data:
        if not path.exists():
            raise typer.BadParameter(f"data file {path} does not exist", param_hint="--data")
        check_data_file(path, "--data")
    parsed = _read_turns(turns)
    if no_policy:
        from datadojo.sandbox.isolation import resolve_isolation

        try:
            reduced = resolve_isolation(isolation) == "reduced"
        except IsolationUnavailable:
            reduced = False  # reported below, when the sandbox starts
        if reduced:
            typer.echo(
                "warning: --no-policy at reduced isolation (neither bubblewrap nor Landlock): nothing but resource limits stands between this "
                "code and your files",
                err=True,
            )
    try:
        limits = Limits(wall_s=timeout, cpu_s=min(timeout, Limits().cpu_s), max_observation_chars=max_chars)
        config = SandboxConfig(
            limits=limits, mode=mode, isolation=isolation, policy=PolicyConfig(enabled=not no_policy)
        )  # type: ignore[arg-type]
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    try:
        results = asyncio.run(_run(parsed, data, config, db))
    except (ValueError, FileNotFoundError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--data") from exc
    except (SandboxError, IsolationUnavailable) as exc:
        typer.echo(f"sandbox error: {exc}", err=True)
        raise typer.Exit(3) from exc
    failed = False
    for i, (path, result) in enumerate(results, start=1):
        failed = failed or result.status == "env_error"
        if as_json:
            record = {"turn": i, "file": str(path), **result.to_dict()}
            typer.echo(json.dumps(record, ensure_ascii=False))
        else:
            typer.echo(f"── turn {i}: {path.name} · {result.status} · {result.duration_s * 1000:.0f} ms ──")
            typer.echo(result.output.rstrip("\n") if result.output.strip() else "(no output)")
    if not as_json and results:
        typer.echo(f"── isolation: {results[0][1].isolation}, mode: {mode} ──")
    if failed:
        raise typer.Exit(3)


def register(app: typer.Typer) -> None:
    app.command(
        "exec",
        help="Run code files as consecutive turns of one trajectory in a fresh sandbox and print the observations.",
    )(exec_command)

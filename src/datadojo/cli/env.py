"""``datadojo env``: DataDojo's environment served to other frameworks (OpenEnv).

Thin layer over :mod:`datadojo.integrations.openenv`: parse arguments, load the tasks as ``datadojo eval``
would, start the server.
"""

from __future__ import annotations

from pathlib import Path

import typer

from datadojo.config import choices
from datadojo.sandbox.config import SandboxConfig

__all__ = ["register"]

env_app = typer.Typer(
    name="env",
    help="DataDojo's environment for other frameworks: serve it over OpenEnv's reset / step / state API.",
    no_args_is_help=True,
)


@env_app.command("serve")
def serve_command(
    tasks: str = typer.Argument(..., help="A task file (JSONL) or a benchmark name, as for `datadojo eval`."),
    data: Path | None = typer.Option(
        None, "--data", help="The benchmark's files (default: its download cache)."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8000, "--port", help="Port to listen on."),
    isolation: str | None = typer.Option(
        None,
        "--isolation",
        help=f"Sandbox confinement level: {', '.join(choices(SandboxConfig, 'isolation'))}.",
    ),
    max_turns: int | None = typer.Option(
        None, "--max-turns", "-T", help="Turn budget (default: the benchmark's)."
    ),
    dialect: str | None = typer.Option(None, "--dialect", help="Tag protocol (default: the benchmark's)."),
    max_tokens: int | None = typer.Option(
        None, "--max-tokens", help="Cap on tokens per reply, advertised to the client with each observation."
    ),
    reward: str | None = typer.Option(
        None, "--reward", help="A registered reward's name (default: the one the registry chooses per task)."
    ),
    judge: str | None = typer.Option(None, "--judge", help="Model spec of the judge, for --reward judge."),
    limit: int | None = typer.Option(None, "--limit", help="Only the first N tasks."),
    option: list[str] = typer.Option([], "--option", help="Benchmark loader option KEY=VALUE (repeatable)."),
    pool_size: int = typer.Option(8, "--pool-size", help="Sandboxes kept warm for the sessions."),
    max_sessions: int = typer.Option(64, "--max-sessions", help="Episodes (WebSocket sessions) at once."),
) -> None:
    """Serve TASKS as an OpenEnv environment (openenv-core's server: /ws sessions, /reset, /step, /state).

    Each client session plays one episode at a time: reset (task_id, sample, seed) gives the opening
    messages, stop strings and reply budget; step({"reply": TEXT, "finish_reason": "stop"|"length"}) gives
    the next observation and, on the last step, the reward `datadojo eval` gives the same replies.

    Example: datadojo env serve tasks.jsonl --port 8000, then
    GenericEnvClient(base_url="http://127.0.0.1:8000") from openenv-core.
    """
    from datadojo.cli.eval import _loader_options  # the same KEY=VALUE reading as `datadojo eval --option`
    from datadojo.integrations.openenv import serve_openenv
    from datadojo.integrations.source import load_env_source

    options = _loader_options(option)
    source = load_env_source(
        tasks, data=data, limit=limit, options=options, max_turns=max_turns, dialect=dialect, max_tokens=max_tokens,
        isolation=isolation, reward=reward, judge=judge,
    )  # fmt: skip
    typer.echo(
        f"serving {len(source.tasks)} {source.benchmark} task(s) on http://{host}:{port} (OpenEnv)", err=True
    )
    serve_openenv(source, host=host, port=port, pool_size=pool_size, max_sessions=max_sessions)


def register(app: typer.Typer) -> None:
    """Add the ``env`` command group to the ``datadojo`` app."""
    app.add_typer(env_app, name="env")

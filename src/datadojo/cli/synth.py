"""``datadojo synth``: LLM-driven synthesis pipelines (DataMind queries and trajectories, SciDataSailor MCTS).

Each pipeline lives in its own module (``datadojo.cli.synth_<name>``) exposing ``register(synth_app)``; this
module only assembles the ``synth`` group, so the pipelines stay independent of each other.
"""

from __future__ import annotations

import importlib

import typer

__all__ = ["SYNTH_MODULES", "register", "synth_app"]

#: Modules that add a sub-command group to ``datadojo synth``.
SYNTH_MODULES: tuple[str, ...] = ("synth_datamind", "synth_sailor")

synth_app = typer.Typer(
    name="synth",
    help=(
        "Synthesize training and benchmark data with a teacher model: DataMind (taxonomy queries, easy→hard "
        "composition, self-consistent trajectories) and SciDataSailor (MCTS exploration of dataset folders). "
        "EnvLunch warm-up tasks, which need no model, are under `datadojo warmup`."
    ),
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the ``synth`` command group to the ``datadojo`` app."""
    for name in SYNTH_MODULES:
        importlib.import_module(f"datadojo.cli.{name}").register(synth_app)
    if SYNTH_MODULES:
        app.add_typer(synth_app, name="synth")

"""What ``datadojo demo`` runs (:class:`DemoConfig`): a module of its own because both the stage graph
(:mod:`datadojo.demo.stages`) and the runner (:mod:`datadojo.demo.pipeline`) read it."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field, model_validator

from datadojo.config import Settings
from datadojo.demo.examples import DemoError

__all__ = ["DemoConfig"]


class DemoConfig(Settings):
    """What the demo runs. ``n_tasks`` warm-up tasks (EnvLunch §4 uses 1,600; a demo needs a handful),
    ``solver_candidates`` compositions per task for the reference solver (a count, so results do not depend
    on machine speed), ``workers`` processes for the task build, ``concurrency`` sandboxes at once."""

    out: str | Path = Field(
        Path("runs/demo"),
        description="folder for everything the demo writes (a previous demo there is replaced)",
    )
    examples: str | Path | None = Field(
        None,
        description="the examples folder of a DataDojo checkout (default: ./examples, else the installed "
        "checkout's, else OUT/examples written by the packaged generator)",
    )
    n_tasks: int = Field(12, description="EnvLunch warm-up tasks to build and solve")
    solver_candidates: int = Field(120, description="reference-solver budget: compositions tried per task")
    seed: int = Field(0, description="everything is reproducible from the seed")
    workers: int = Field(2, description="processes for the task build")
    concurrency: int = Field(2, description="sandboxes at once")

    #: What the recipe engine reads (:class:`datadojo.recipes.engine.EngineConfig`): the run folder's kind,
    #: and no [study]; every stage of the demo may end with nothing done (the demo reports its figures).
    recipe: ClassVar[str] = "demo"
    study: ClassVar[None] = None

    def path(self, value: str | Path) -> Path:
        """``value`` as a path (relative ones against the working directory, as the command's options)."""
        return Path(value)

    def allows_empty(self, stage: str) -> bool:
        return True

    @model_validator(mode="after")
    def _check(self) -> DemoConfig:
        for name in ("n_tasks", "solver_candidates", "workers", "concurrency"):
            if getattr(self, name) < 1:
                raise DemoError(f"{name} must be >= 1, got {getattr(self, name)}")
        return self

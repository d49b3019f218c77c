"""Recipes: each paper end to end from one TOML config (``datadojo recipe run|plan CONFIG``; docs/recipes.md).

A recipe is a stage graph (:mod:`.engine`) over the library's own APIs: corpus → synthesis → curation →
SFT → RL tasks → RL → eval of each checkpoint → report. Stage outputs are cached by
:class:`datadojo.runs.StageCache` under a key of their inputs' content, settings and code version, so a
rerun after an edit reruns exactly the stages below it, and a killed run resumes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from datadojo.recipes.config import RECIPES, RecipeConfig, load_recipe
from datadojo.recipes.engine import (
    PlanItem,
    RecipeError,
    RecipeResult,
    Stage,
    parse_sweeps,
    run_recipe,
    variants,
)
from datadojo.runs import ProgressHook

__all__ = [
    "RECIPES",
    "PlanItem",
    "RecipeConfig",
    "RecipeError",
    "RecipeResult",
    "Stage",
    "load_recipe",
    "parse_sweeps",
    "recipe_stages",
    "run",
    "variants",
]


def recipe_stages(name: str) -> tuple[Stage, ...]:
    """The stage graph of recipe ``name``."""
    if name not in RECIPES:
        raise RecipeError(f"unknown recipe {name!r}; one of {', '.join(RECIPES)}")
    return importlib.import_module(f"datadojo.recipes.{name}").STAGES


def run(
    config: RecipeConfig,
    *,
    sweeps: Mapping[str, Sequence[Any]] | None = None,
    dry_run: bool = False,
    progress: ProgressHook | None = None,
    on_stage: Callable[[PlanItem, str], None] | None = None,
    executor: Any = None,
) -> RecipeResult:
    """Plan and run ``config``'s recipe (over every sweep combination); writes the report unless ``dry_run``."""
    from datadojo.recipes.report import write_report

    def finish(result: RecipeResult, vs: list[Any]) -> dict[str, Path]:
        return write_report(result, vs, config.recipe)

    return run_recipe(
        recipe_stages(config.recipe),
        config,
        sweeps=sweeps,
        dry_run=dry_run,
        progress=progress,
        on_stage=on_stage,
        executor=executor,
        finish=finish,
    )

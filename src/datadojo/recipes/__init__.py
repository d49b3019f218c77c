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

from datadojo.recipes.config import RECIPES, RecipeConfig
from datadojo.recipes.config import load_recipe as _load_file
from datadojo.recipes.engine import (
    EmptyStage,
    PlanItem,
    RecipeError,
    RecipeResult,
    Stage,
    parse_sweeps,
    run_recipe,
    variants,
)
from datadojo.recipes.problems import Problem, RecipeProblems
from datadojo.runs import ProgressHook

__all__ = [
    "RECIPES",
    "EmptyStage",
    "PlanItem",
    "Problem",
    "RecipeConfig",
    "RecipeError",
    "RecipeProblems",
    "RecipeResult",
    "Stage",
    "check_recipe",
    "load_recipe",
    "parse_sweeps",
    "recipe_sections",
    "recipe_stages",
    "run",
    "variants",
]


def load_recipe(path: str | Path, **overrides: Any) -> RecipeConfig:
    """Read a recipe file (:func:`datadojo.recipes.config.load_recipe`); when it does not validate, every
    problem of it at once: the top-level ones and those of each ``[stages.X]`` section (its name, its keys
    at every level), each naming the file and the closest valid name."""
    try:
        return _load_file(path, **overrides)
    except RecipeProblems as exc:
        data = exc.data if isinstance(exc.data, dict) else {}
        name, stages = data.get("recipe"), data.get("stages")
        if name not in RECIPES or not isinstance(stages, dict):
            raise
        from datadojo.recipes.checks import section_key_problems

        more = section_key_problems(name, stages, recipe_sections(name))
        raise RecipeProblems([*exc.problems, *more], exc.source, data) from None


def recipe_stages(name: str) -> tuple[Stage, ...]:
    """The stage graph of recipe ``name``."""
    if name not in RECIPES:
        raise RecipeError(f"unknown recipe {name!r}; one of {', '.join(RECIPES)}")
    return importlib.import_module(f"datadojo.recipes.{name}").STAGES


def recipe_sections(name: str) -> tuple[Any, ...]:
    """The types of recipe ``name``'s ``[stages.X]`` sections (:class:`datadojo.recipes.checks.Section`)."""
    if name not in RECIPES:
        raise RecipeError(f"unknown recipe {name!r}; one of {', '.join(RECIPES)}")
    return importlib.import_module(f"datadojo.recipes.{name}").SECTIONS


def check_recipe(config: RecipeConfig) -> list[Problem]:
    """Every problem of one configuration found without running anything (servers aside): sections and keys,
    values, paths, benchmarks, context windows, training lengths (:mod:`datadojo.recipes.checks`)."""
    from datadojo.recipes.checks import config_problems
    from datadojo.recipes.problems import closest
    from datadojo.recipes.stages import student_generations

    problems = config_problems(config, recipe_sections(config.recipe), student_generations(config))
    names = [s.name for s in recipe_stages(config.recipe)]
    for name in config.allow_empty if isinstance(config.allow_empty, list) else []:
        if name not in names:
            hint = closest(name, names)
            problems.append(Problem("allow_empty", f"no stage {name!r}{hint} (stages: {', '.join(names)})"))
    return problems


def run(
    config: RecipeConfig,
    *,
    sweeps: Mapping[str, Sequence[Any]] | None = None,
    dry_run: bool = False,
    progress: ProgressHook | None = None,
    on_stage: Callable[[PlanItem, str], None] | None = None,
    executor: Any = None,
    allow_empty: bool = False,
    probe_servers: bool = True,
) -> RecipeResult:
    """Check, plan and run ``config``'s recipe (over every sweep combination); writes the report unless
    ``dry_run``. ``probe_servers``: probe the served models the stages to run call (exit 3 when one is down).
    ``models.student = "toy"`` is DataDojo's toy checkpoint, written into the run folder on the first call
    (:mod:`datadojo.recipes.toy_student`)."""
    from datadojo.recipes.checks import server_problems
    from datadojo.recipes.report import write_report
    from datadojo.recipes.toy_student import with_toy_student

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
        check=check_recipe,
        probe=server_problems if probe_servers else None,
        allow_empty=allow_empty,
        prepare=with_toy_student,
    )

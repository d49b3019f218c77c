"""One TOML file per recipe run: inputs, models, stage settings, benchmarks (docs/recipes.md).

The file's sections map onto the library's own configuration classes, so a recipe has no settings of its
own to drift from the pipelines': ``[stages.synthesis]`` holds :class:`~datadojo.synth.datamind.DataMindConfig`
keys for the DataMind recipe, ``[stages.sft]`` :class:`~datadojo.train.config.SFTConfig` keys, and so on.
Each stage validates its section before anything runs (``recipe plan`` reports a misspelt key naming the
section). Relative paths are read against the config file's folder.
"""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from datadojo.config import ConfigError, Settings
from datadojo.recipes.problems import RecipeProblems, model_problems

__all__ = [
    "RECIPES",
    "SEED_SETTINGS",
    "BenchmarkSpec",
    "ModelsConfig",
    "RecipeConfig",
    "StudyConfig",
    "load_recipe",
    "model_identity",
    "parse_value",
]

RECIPES = ("datamind", "envlunch", "sailor")

#: Where a study's seed goes by default: the settings of the stages a replicate repeats. EnvLunch §4: "Each
#: downstream fine-tuning setting is repeated with three independent random seeds" (the warm-up runs once
#: and serves every replicate), so only the downstream GRPO run is reseeded (its data order and rollout
#: sampling); its eval reruns per seed because its checkpoint differs. DataMind and SciDataSailor repeat
#: their training: SFT and RL.
SEED_SETTINGS: dict[str, tuple[str, ...]] = {
    "datamind": ("stages.sft.seed", "stages.rl.seed"),
    "envlunch": ("stages.downstream.seed",),
    "sailor": ("stages.sft.seed", "stages.rl.seed"),
}


class ModelsConfig(Settings):
    """Who writes, who judges, who learns (model specs as everywhere: ``openai:M@URL`` or a local path)."""

    teacher: str | None = Field(None, description="model spec of the teacher that synthesizes data")
    judge: str | None = Field(None, description="model spec of the judge (default: the teacher)")
    student: str = Field(
        ..., description="local checkpoint folder of the model trained (the base checkpoint)"
    )


class BenchmarkSpec(Settings):
    """One benchmark every checkpoint is evaluated on (:class:`~datadojo.eval.harness.EvalConfig` keys)."""

    bench: str = Field(..., description="benchmark name (`datadojo eval --help` lists them)")
    data: str = Field(..., description="the benchmark's data file or folder")
    name: str | None = Field(None, description="column title in the report (default: bench)")
    limit: int | None = Field(None, description="only the first N tasks")
    n_trials: int = Field(3, description="trials per task (DataMind §5.1: 3)")
    max_turns: int | None = Field(None, description="turn budget (default: the benchmark's)")
    max_tokens: int | None = Field(None, description="tokens per model turn (default: the backend's)")
    options: dict[str, Any] = Field(default_factory=dict, description="the benchmark loader's options")

    @property
    def title(self) -> str:
        return self.name or self.bench


class StudyConfig(Settings):
    """A two-arm study over a sweep (EnvLunch Fig. 1): which swept setting tells the arms apart, which of its
    values is the method and which the baseline, and how many seeds run per point.

    Naming the arms makes the figure independent of the order of the ``--sweep`` values: the sign of the
    curve-level gain and the matching budget follow the names, not which value came first.
    """

    arm: str = Field(..., description="dotted setting whose values are the arms (stages.rl.enabled)")
    method: Any = Field(..., description="the value of `arm` in the method arm (EnvLunch: true, warm-up on)")
    baseline: Any = Field(..., description="the value of `arm` in the baseline arm (false: warm-up off)")
    seeds: int | list[int] | None = Field(
        None,
        description="runs per point: N (seeds 0..N-1) or a list of seeds; unset: one run, the stages' own seeds",
    )
    seed_settings: list[str] | None = Field(
        None,
        description="dotted settings each run's seed is written to (default: SEED_SETTINGS of the recipe)",
    )

    @field_validator("seeds", mode="before")
    @classmethod
    def _check_seeds(cls, seeds: int | list[int] | None) -> int | list[int] | None:
        if isinstance(seeds, bool):
            raise ValueError(f"[study] seeds: expected a number of runs or a list of seeds, got {seeds!r}")
        if isinstance(seeds, int) and seeds < 1:
            raise ValueError(f"[study] seeds: expected a number of runs ≥ 1, got {seeds}")
        if isinstance(seeds, list) and (not seeds or len(set(seeds)) != len(seeds)):
            raise ValueError(f"[study] seeds: expected a non-empty list of distinct seeds, got {seeds}")
        return seeds

    @property
    def seed_list(self) -> list[int] | None:
        """The seeds each point runs with (``None``: one run with the recipe's own seeds)."""
        if self.seeds is None:
            return None
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)


class RecipeConfig(Settings):
    """A recipe run (module docstring)."""

    recipe: Literal["datamind", "envlunch", "sailor"] = Field(
        ..., description="which paper's recipe: datamind, envlunch or sailor"
    )
    out: str = Field("runs/recipe", description="folder of the run: stage caches, the report")
    inputs: list[str] = Field(
        ..., description="data files / folders (datamind, envlunch) or dataset folders (sailor)"
    )
    models: ModelsConfig = Field(..., description="model specs of the run's roles (teacher, judge, policy)")
    stages: dict[str, dict[str, Any]] = Field(default_factory=dict, description="settings per stage")
    benchmarks: list[BenchmarkSpec] = Field(
        default_factory=list, description="benchmarks evaluated at the end ([[benchmarks]] tables)"
    )
    study: StudyConfig | None = Field(
        None, description="the two arms a sweep compares and the seeds per point ([study], EnvLunch Fig. 1)"
    )
    executor: Literal["local", "ray"] = Field("local", description="where stages that can fan out run")
    ray_address: str | None = Field(
        None, description="Ray cluster address for executor ray (None: start or join a local one)"
    )
    base_dir: str = Field(".", description="folder relative paths are read against (the config file's)")
    allow_empty: bool | list[str] = Field(
        False,
        description="stages allowed to do nothing useful (0 updates, nothing kept, most trials at "
        "context_limit…) without stopping the recipe: true for all, or a list of stage names",
    )

    def allows_empty(self, stage: str) -> bool:
        """Whether stage ``stage`` may end with nothing useful done (:attr:`allow_empty`)."""
        return self.allow_empty is True or (isinstance(self.allow_empty, list) and stage in self.allow_empty)

    def path(self, value: str) -> Path:
        """``value`` as a path: relative ones against :attr:`base_dir`."""
        p = Path(value).expanduser()
        return p if p.is_absolute() else (Path(self.base_dir) / p).resolve()

    def stage(self, name: str) -> dict[str, Any]:
        """The settings section of stage ``name`` (empty when the file has none)."""
        return copy.deepcopy(self.stages.get(name, {}))

    def seed_settings(self) -> tuple[str, ...]:
        """The dotted settings a study's seed is written to (``[study] seed_settings`` or the recipe's)."""
        if self.study is not None and self.study.seed_settings is not None:
            return tuple(self.study.seed_settings)
        return SEED_SETTINGS[self.recipe]

    def with_setting(self, key: str, value: Any) -> RecipeConfig:
        """A copy with one dotted setting replaced (``stages.curation.strategy``, ``models.student``)."""
        data = self.model_dump(mode="python")
        parts = key.split(".")
        node: Any = data
        for part in parts[:-1]:
            if isinstance(node, list):
                node = node[int(part)]
                continue
            if not isinstance(node, dict):
                raise ConfigError(f"--sweep {key}: {part!r} is not a section")
            node = node.setdefault(part, {})
        if isinstance(node, list):
            node[int(parts[-1])] = value
        else:
            node[parts[-1]] = value
        return RecipeConfig.model_validate(data)


def model_identity(spec: str | None) -> str | None:
    """What a stage key records of a served model: the spec without its ``@BASE_URL`` (the same model moved
    to another host or port makes the same data; a different model name or option does not)."""
    if spec is None or not spec.startswith("openai:"):
        return spec
    head, _, rest = spec.partition("@")
    opts = rest.partition("?")[2]
    return head + (f"?{opts}" if opts else "")


def parse_value(text: str) -> Any:
    """A sweep value as TOML reads it (``0.5`` a float, ``true`` a bool, ``[1,2]`` a list), else the text."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def load_recipe(path: str | Path, **overrides: Any) -> RecipeConfig:
    """Read a recipe file; errors name the file (and the field, from pydantic)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: recipe file not found") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    data.setdefault("base_dir", str(path.resolve().parent))
    data.update({k: v for k, v in overrides.items() if v is not None})
    problems = model_problems(RecipeConfig, data)
    if problems is None:
        return RecipeConfig.model_validate(data)
    # the [stages] table is checked by its sections' types (datadojo.recipes.load_recipe adds them)
    raise RecipeProblems([p for p in problems if p.where.split(".")[0] != "stages"], str(path), data)

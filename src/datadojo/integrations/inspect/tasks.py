"""inspect_ai tasks over DataDojo task files and benchmarks, and their registration with inspect.

``inspect_task(tasks, ...)`` is the Python entry; :func:`register` makes inspect's command line find
``datadojo/tasks`` (a DataDojo tasks JSONL, as ``datadojo synth`` writes) and ``datadojo/benchmark`` (a
registered benchmark over its data, with the benchmark's agent defaults and sandbox, as ``datadojo eval``
runs it). Task parameters are inspect's ``-T key=value``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from datadojo.errors import require_extra
from datadojo.integrations.inspect.agent import datadojo_scorer, datadojo_solver
from datadojo.integrations.inspect.samples import sample_fields
from datadojo.integrations.inspect.sandbox import SANDBOX_NAME, sandbox_environment_class
from datadojo.reward.registry import RewardSpec
from datadojo.sandbox.config import SandboxConfig
from datadojo.types import Task

__all__ = ["inspect_task", "register"]


def _require() -> None:
    require_extra("inspect", "the inspect_ai integration", "inspect_ai")


def inspect_task(
    tasks: Sequence[Task],
    *,
    config: Any = None,
    reward: RewardSpec | str | None = None,
    sandbox: SandboxConfig | None = None,
    name: str | None = None,
) -> Any:
    """An ``inspect_ai.Task`` running ``tasks`` as DataDojo episodes, scored by the reward registry.

    ``config``: the :class:`~datadojo.env.EnvConfig` (dialect, turn budget, sampling); ``reward``: a
    registry name or :class:`~datadojo.reward.registry.RewardSpec` (``None``: chosen per task, as
    ``datadojo eval`` and training do); ``sandbox``: the DataDojo sandbox's settings; ``name``: the
    dataset's name (the task's is inspect's: ``datadojo/tasks`` when it comes from the registry).
    """
    _require()
    from inspect_ai import Task as InspectTask
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.util import SandboxEnvironmentSpec

    from datadojo.env import EnvConfig

    tasks = list(tasks)
    if not tasks:
        raise ValueError("an inspect task needs at least one DataDojo task")
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"task ids must be unique within an inspect task (samples are keyed by id): {dup}")
    sandbox_environment_class()
    env_config = config if config is not None else EnvConfig()
    samples = [Sample(**sample_fields(t)) for t in tasks]
    return InspectTask(
        dataset=MemoryDataset(samples, name=name),
        solver=datadojo_solver(env_config, reward),
        scorer=datadojo_scorer(reward),
        sandbox=SandboxEnvironmentSpec(SANDBOX_NAME, sandbox or SandboxConfig()),
    )


def _env_overrides(config: Any, dialect: str | None, max_turns: int | None, max_tokens: int | None) -> Any:
    updates: dict[str, Any] = {}
    if dialect is not None:
        updates["dialect"] = dialect
    if max_turns is not None:
        updates["max_turns"] = int(max_turns)
    if max_tokens is not None:
        updates["sampling"] = config.sampling.model_copy(update={"max_tokens": int(max_tokens)})
    return type(config).model_validate({**config.model_dump(), **updates}) if updates else config


def tasks_file_task(
    path: str,
    dialect: str | None = None,
    max_turns: int | None = None,
    max_tokens: int | None = None,
    reward: str | None = None,
    isolation: str | None = None,
    limit: int | None = None,
) -> Any:
    """A DataDojo tasks JSONL as an inspect task (``datadojo/tasks``).

    The reward is the registry's (``reward``: a name, else chosen per task), with the file as the spec's
    ``tasks_path`` (EnvLunch's counterfactual copies lie beside it); a task the reward cannot score (no
    reference answer, a missing copy) is refused here, before any episode runs.
    """
    from datadojo.env import EnvConfig
    from datadojo.jsonl import read_tasks
    from datadojo.reward.registry import reward_problems

    tasks = list(read_tasks(path))
    if limit is not None:
        tasks = tasks[: int(limit)]
    spec = RewardSpec(name=reward, tasks_path=str(Path(path).resolve()))
    problems = reward_problems(tasks, spec)
    if problems:
        raise ValueError(f"{path}: {len(problems)} task(s) cannot be rewarded:\n" + "\n".join(problems))
    config = _env_overrides(EnvConfig(), dialect, max_turns, max_tokens)
    sandbox = SandboxConfig(isolation=isolation) if isolation else SandboxConfig()
    return inspect_task(tasks, config=config, reward=spec, sandbox=sandbox, name=Path(path).stem)


def benchmark_task(
    name: str,
    data: str,
    dialect: str | None = None,
    max_turns: int | None = None,
    max_tokens: int | None = None,
    reward: str | None = None,
    limit: int | None = None,
    **options: Any,
) -> Any:
    """A registered benchmark over ``data`` as an inspect task (``datadojo/benchmark``), with the
    benchmark's agent defaults and sandbox as ``datadojo eval`` uses them; ``options`` go to its loader."""
    from datadojo.bench import get_benchmark
    from datadojo.eval.harness import benchmark_env_config, load_eval_tasks
    from datadojo.integrations.source import serving_problems

    bench = get_benchmark(name)
    tasks = load_eval_tasks(bench, data, limit=None if limit is None else int(limit), options=options)
    config = _env_overrides(benchmark_env_config(bench), dialect, max_turns, max_tokens)
    # as `datadojo eval` builds it: the benchmark decides the answer part; a task file's EnvLunch copies
    spec = RewardSpec(name=reward, benchmark=bench, tasks_path=str(data) if Path(data).is_file() else None)
    problems = serving_problems(bench, tasks, spec)
    if problems:  # refused before any sample runs, as `vf-eval datadojo` and `env serve` refuse them
        raise ValueError(f"{data}: {len(problems)} task(s) cannot be rewarded: " + "; ".join(problems[:5]))
    return inspect_task(tasks, config=config, reward=spec, sandbox=bench.sandbox_config(), name=bench.name)


@functools.cache
def register() -> None:
    """Register the sandbox, and the ``tasks`` and ``benchmark`` tasks, with inspect (once per process)."""
    _require()
    from inspect_ai import task

    sandbox_environment_class()

    @task(name="tasks")
    def tasks(
        path: str,
        dialect: str | None = None,
        max_turns: int | None = None,
        max_tokens: int | None = None,
        reward: str | None = None,
        isolation: str | None = None,
        limit: int | None = None,
    ) -> Any:
        return tasks_file_task(path, dialect, max_turns, max_tokens, reward, isolation, limit)

    @task(name="benchmark")
    def benchmark(
        name: str,
        data: str,
        dialect: str | None = None,
        max_turns: int | None = None,
        max_tokens: int | None = None,
        reward: str | None = None,
        limit: int | None = None,
        split: str | None = None,
    ) -> Any:
        options = {} if split is None else {"split": split}
        return benchmark_task(name, data, dialect, max_turns, max_tokens, reward, limit, **options)

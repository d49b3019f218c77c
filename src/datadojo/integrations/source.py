"""What an adapter serves: the tasks, their settings and sandbox, as ``datadojo eval`` chooses them.

Every framework adapter (verifiers, OpenEnv) takes a ``TASKS`` argument like ``datadojo eval``'s: a
benchmark name (its files from ``data`` or the download cache, read by the benchmark's loader as ``eval``
reads them) or a DataDojo task file (read as ``rollout`` and ``train rl`` read one, so EnvLunch tasks are
served too). The settings are the benchmark's defaults (the ``tasks`` benchmark's for a task file) read
through :meth:`EvalConfig.agent_config` and :meth:`Benchmark.sandbox_config` — the very calls ``datadojo
eval`` makes — so an episode played through a framework is the episode ``datadojo eval`` would play, and
its reward is the same: the registry's (:func:`episode_reward`), with the spec ``eval`` builds (a
benchmark's rule for the answer part; a task file's EnvLunch copies resolved beside it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datadojo.bench import benchmark_names, get_benchmark
from datadojo.bench.base import Benchmark
from datadojo.bench.judged import JudgedBenchmark
from datadojo.env import EnvConfig, Episode
from datadojo.errors import DataDojoError
from datadojo.eval.harness import EvalConfig, load_eval_tasks
from datadojo.jsonl import read_tasks
from datadojo.llm.base import SamplingParams
from datadojo.reward.registry import (
    RewardResult,
    RewardSpec,
    choose_reward_name,
    reward_problems,
    score_pairs,
    spec_for_cli,
)
from datadojo.sandbox.config import SandboxConfig
from datadojo.types import Task, Trajectory

__all__ = [
    "AdapterError",
    "EnvSource",
    "episode_reward",
    "load_env_source",
    "serving_problems",
    "trajectory_reward",
]


class AdapterError(DataDojoError, ValueError):
    """A framework adapter was given tasks or settings it cannot serve."""


@dataclass(frozen=True)
class EnvSource:
    """The tasks an adapter serves, by id, with the settings every episode runs under."""

    benchmark: str
    tasks: dict[str, Task]
    config: EnvConfig
    sandbox: SandboxConfig
    reward: RewardSpec

    def task(self, task_id: str) -> Task:
        """The task ``task_id``; a clear error naming the known ids when there is none."""
        try:
            return self.tasks[task_id]
        except KeyError:
            known = ", ".join(list(self.tasks)[:10]) + (" ..." if len(self.tasks) > 10 else "")
            raise AdapterError(f"no task {task_id!r} in {self.benchmark} (tasks: {known})") from None


def _downloaded(name: str) -> Path:
    from datadojo.bench.download import MANIFEST, cache_dir

    cached = cache_dir(name)
    manifest = cached / MANIFEST
    if not manifest.exists() or not json.loads(manifest.read_text(encoding="utf-8")).get("complete"):
        raise AdapterError(
            f"{name}: no data given and {cached} holds no complete download; pass data=PATH or run "
            f"`datadojo bench download {name}`"
        )
    return cached


def load_env_source(
    tasks: str | Path,
    *,
    data: str | Path | None = None,
    limit: int | None = None,
    options: dict[str, Any] | None = None,
    max_turns: int | None = None,
    dialect: str | None = None,
    max_tokens: int | None = None,
    isolation: str | None = None,
    reward: str | None = None,
    judge: str | None = None,
    work_dir: str | Path | None = None,
) -> EnvSource:
    """The tasks of ``tasks`` (a benchmark name or a task file) with ``datadojo eval``'s settings for them.

    ``max_turns`` / ``dialect`` / ``max_tokens`` (the per-reply budget every episode advertises) override the
    benchmark's defaults as ``eval -T`` / ``--dialect`` / ``--max-tokens`` do;
    ``isolation`` overrides the sandbox's confinement level as ``eval --isolation`` does; ``reward`` names a
    registered reward (None or ``auto``: the registry chooses per task) and ``judge`` its judge's model spec,
    as ``--reward`` / ``--judge`` do elsewhere. Task ids must be unique: a framework addresses a task by id.
    """
    name = str(tasks)
    if name in benchmark_names():
        bench_name, bench_data = name, Path(data) if data is not None else _downloaded(name)
    elif Path(name).is_file():
        if data is not None:
            raise AdapterError(f"{name} is a task file: give data= only with a benchmark name")
        bench_name, bench_data = "tasks", Path(name)
    else:
        raise AdapterError(
            f"{name!r} is neither a benchmark ({', '.join(benchmark_names())}) nor an existing task file"
        )
    benchmark = get_benchmark(bench_name)
    d = benchmark.defaults
    sampling = (
        None
        if max_tokens is None
        else SamplingParams(temperature=d.temperature, top_p=d.top_p, max_tokens=max_tokens)
    )
    # Read for its agent_config only: the framework's own model plays the episodes (no model spec here).
    settings = EvalConfig(
        bench=bench_name,
        model="external",
        data=bench_data,
        out=Path(work_dir) if work_dir is not None else Path.cwd(),
        max_turns=max_turns,
        dialect=dialect,
        sampling=sampling,
        limit=limit,
        loader_options=dict(options or {}),
    )
    spec = spec_for_cli(reward, judge=judge, tasks_path=bench_data if bench_data.is_file() else None)
    if bench_name == "tasks":
        # A task file as `rollout` and `train rl` read it: any task the registry can reward (EnvLunch
        # tasks too, which `eval tasks` refuses), each answer part by its own source's rule.
        loaded = list(read_tasks(bench_data))[:limit]
    else:
        loaded = load_eval_tasks(
            benchmark, bench_data, limit=limit, options=settings.loader_options, work_dir=work_dir
        )
        spec = spec.replace(benchmark=benchmark)  # as `datadojo eval` scores: by this benchmark's rule
    problems = serving_problems(benchmark, loaded, spec)
    if problems:
        raise AdapterError(
            f"{bench_data}: {len(problems)} task(s) cannot be rewarded: " + "; ".join(problems[:5])
        )
    by_id: dict[str, Task] = {}
    for task in loaded:
        if task.id in by_id:
            raise AdapterError(f"{bench_name}: task id {task.id!r} appears twice in {bench_data}")
        by_id[task.id] = task
    if not by_id:
        raise AdapterError(f"{bench_name}: no tasks in {bench_data}")
    sandbox = benchmark.sandbox_config()
    if isolation is not None:
        sandbox = sandbox.replace(isolation=isolation)
    return EnvSource(bench_name, by_id, settings.agent_config(benchmark), sandbox, spec)


def serving_problems(benchmark: Benchmark, tasks: Sequence[Task], spec: RewardSpec) -> list[str]:
    """What would stop an environment's reward from scoring each of ``benchmark``'s tasks, one line per task,
    found before any episode runs: the registry's :func:`reward_problems` (no reference answer, …), and a
    task only an LLM judge can score (KramaBench's ``string_approximate``) under a reward with no judge —
    ``datadojo eval`` judges those in a batch after the episodes; an environment's reward has no verdict to
    give, so the benchmark's scorer would fail at the end of each such episode."""
    problems = reward_problems(tasks, spec)
    if not isinstance(benchmark, JudgedBenchmark):
        return problems
    return problems + [
        f"{task.id}: scored by an LLM judge and the reward has none (pass judge=SPEC / --judge SPEC, or a loader "
        "option that scores it by rule: kramabench's paraphrase=rule)"
        for task in tasks
        if benchmark.wants_verdict(task) and choose_reward_name(task, spec) != "judge"
    ]


async def episode_reward(source: EnvSource, episode: Episode) -> RewardResult:
    """The reward of a finished episode: the registry's (``score_pairs``, which chooses it per task)."""
    return await trajectory_reward(source, episode.task, episode.trajectory())


async def trajectory_reward(source: EnvSource, task: Task, trajectory: Trajectory) -> RewardResult:
    """The registry's reward of ``trajectory`` for ``task`` under the source's spec."""
    (result,) = await score_pairs([(task, trajectory)], source.reward)
    return result

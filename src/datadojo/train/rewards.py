"""Reward functions for online RL: a trajectory's scalar reward and whether it counts as correct.

The RL trainer needs two numbers per rollout: the reward R_i that group-normalized advantages are made of,
and whether the rollout is *correct* — DAPO's dynamic-sampling filter keeps a group only when
0 < #correct < G, where "correct" is DataMind's is_equivalent(y, y*_i) (§4), i.e. r_answer = 1, not R > 0.
A :data:`RewardFn` maps a batch of ``(task, trajectory)`` pairs to :class:`RewardResult` s (batched, because
EnvLunch scoring runs programs in sandboxes and is cheaper in bulk).

* :func:`datamind_reward_fn` — DataMind §4's composite R (format, answer, length) from
  :class:`datadojo.reward.DataMindReward`; the answer checker is the task benchmark's official scorer or
  the tolerant matcher, or an LLM judge when one is given.
* :func:`envlunch_reward_fn` — EnvLunch §3 Eq. 4 from :mod:`datadojo.synth.envlunch.reward` (agreement
  over counterfactual copies × brevity bonus); correct = all copies agree exactly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datadojo.config import ConfigError
from datadojo.errors import UnknownNameError
from datadojo.types import Task, Trajectory

__all__ = [
    "REWARD_NAMES",
    "RewardFn",
    "RewardResult",
    "datamind_reward_fn",
    "envlunch_reward_fn",
    "make_reward_fn",
    "rl_reward_fn",
]

REWARD_NAMES: tuple[str, ...] = ("datamind", "envlunch")


@dataclass(frozen=True)
class RewardResult:
    """One rollout's reward ``total``, its ``correct`` flag (dynamic sampling) and named ``parts``."""

    total: float
    correct: bool
    parts: dict[str, float] = field(default_factory=dict)


RewardFn = Callable[[Sequence[tuple[Task, Trajectory]]], list[RewardResult]]


def datamind_reward_fn(reward: Any = None) -> RewardFn:
    """DataMind's R (§4) for each pair; ``reward`` is a :class:`~datadojo.reward.DataMindReward` (default one).

    With a judge configured on ``reward`` the pairs are judged concurrently (its ``ascore``); otherwise the
    synchronous checker scores them.
    """
    from datadojo.reward import DataMindReward

    scorer = reward or DataMindReward()

    def score(pairs: Sequence[tuple[Task, Trajectory]]) -> list[RewardResult]:
        if scorer.judge is not None:

            async def all_() -> list[Any]:
                return list(await asyncio.gather(*(scorer.ascore(tr, t) for t, tr in pairs)))

            breakdowns = asyncio.run(all_())
        else:
            breakdowns = [scorer.score(tr, t) for t, tr in pairs]
        return [RewardResult(b.total, b.answer == 1.0, b.as_rewards()) for b in breakdowns]

    return score


def envlunch_reward_fn(tasks_path: str | Path, executor: Any = None) -> RewardFn:
    """EnvLunch's Eq. 4 reward for each pair, running submitted programs with ``executor``.

    ``tasks_path`` is the EnvLunch task file (its counterfactual copies are resolved against its folder);
    ``executor`` defaults to :class:`datadojo.synth.envlunch.executor.SandboxExecutor` — agent programs are
    untrusted and run isolated.
    """
    from datadojo.synth.envlunch.executor import SandboxExecutor
    from datadojo.synth.envlunch.reward import score_trajectories
    from datadojo.synth.envlunch.tasks import task_info

    runner = executor or SandboxExecutor()
    infos: dict[str, Any] = {}

    def score(pairs: Sequence[tuple[Task, Trajectory]]) -> list[RewardResult]:
        for task, _ in pairs:
            if task.id not in infos:
                infos[task.id] = task_info(task, tasks_path)
        records = score_trajectories(infos, [tr for _, tr in pairs], runner)
        return [
            RewardResult(r.reward, r.solved, {"m_min": min(r.m) if r.m else 0.0, "t": float(r.t)})
            for r in records
        ]

    return score


def make_reward_fn(name: str, *, tasks_path: str | Path | None = None) -> RewardFn:
    """A reward function by name (``datamind`` or ``envlunch``), as the CLI selects it."""
    if name == "datamind":
        return datamind_reward_fn()
    if name == "envlunch":
        if tasks_path is None:
            raise ConfigError(
                "the envlunch reward needs the task file (its counterfactual copies live next to it)"
            )
        return envlunch_reward_fn(tasks_path)
    raise UnknownNameError(f"unknown reward {name!r}; use one of {', '.join(REWARD_NAMES)}")


def rl_reward_fn(
    name: str, *, judge: str | None = None, tasks_path: str | Path | None = None, cache_dir: str | Path = "."
) -> RewardFn:
    """The reward ``train rl`` uses: DataMind's with an LLM judge (``judge`` a model spec; its verdicts cached
    in ``cache_dir/judge_cache.jsonl``) when one is given, else :func:`make_reward_fn` by ``name``."""
    if judge:
        from datadojo.llm import load_backend
        from datadojo.reward import DataMindReward, LLMJudge

        judge_obj = LLMJudge(load_backend(judge), cache=Path(cache_dir) / "judge_cache.jsonl")
        return datamind_reward_fn(DataMindReward(judge=judge_obj))
    return make_reward_fn(name, tasks_path=tasks_path)

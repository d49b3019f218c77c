"""The RL trainer's reward function: the reward registry over a step's rollouts.

The RL trainer needs two numbers per rollout: the reward R_i that group-normalized advantages are made of,
and whether the rollout is *correct* — DAPO's dynamic-sampling filter keeps a group only when
0 < #correct < G, where "correct" is DataMind's is_equivalent(y, y*_i) (§4), i.e. r_answer = 1, not R > 0.
A :data:`RewardFn` maps a batch of ``(task, trajectory)`` pairs to
:class:`~datadojo.reward.registry.RewardResult` s (batched, because EnvLunch scoring runs programs in
sandboxes and is cheaper in bulk). Which reward, and how it is computed, is the registry's alone
(:mod:`datadojo.reward.registry`): this module only adapts it to the trainer's synchronous call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from datadojo.reward.registry import RewardResult, RewardSpec, score_pairs_sync
from datadojo.types import Task, Trajectory

__all__ = ["RewardFn", "registry_reward_fn"]

RewardFn = Callable[[Sequence[tuple[Task, Trajectory]]], list[RewardResult]]


def registry_reward_fn(spec: RewardSpec | None = None) -> RewardFn:
    """The trainer's :data:`RewardFn`: :func:`~datadojo.reward.registry.score_pairs_sync` under ``spec``
    (``None``: the registry chooses per task — EnvLunch tasks envlunch, the others datamind)."""

    def score(pairs: Sequence[tuple[Task, Trajectory]]) -> list[RewardResult]:
        return score_pairs_sync(pairs, spec)

    return score

"""The types every reward shares: a result with named, weighted parts, the spec that configures a reward, and
the protocol a registered reward follows (:mod:`datadojo.reward.registry` explains the design)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import Field

from datadojo.config import Settings
from datadojo.reward.datamind import L_MAX, L_MIN
from datadojo.types import Task, Trajectory

__all__ = ["Reward", "RewardResult", "RewardSpec", "WeightedPart", "weighted_result"]


@dataclass(frozen=True)
class RewardResult:
    """One trajectory's reward: ``total``, whether it counts as ``correct`` (DAPO's dynamic sampling keeps a
    group when 0 < #correct < G, DataMind §4), the weighted ``parts`` (their sum is ``total``), the
    ``details`` the parts came from, and the ``reward`` that scored it."""

    total: float
    correct: bool
    parts: dict[str, float] = field(default_factory=dict)
    details: dict[str, float] = field(default_factory=dict)
    reward: str = ""

    def as_rewards(self) -> dict[str, float]:
        """The flat numbers logged per episode (:attr:`Trajectory.rewards`, eval's rows, rollout records):
        ``total``, each part under its name and each detail under its name."""
        return {"total": self.total, **self.parts, **self.details}


@dataclass(frozen=True)
class WeightedPart:
    """One named part of a reward: its unweighted ``value`` and its ``weight``."""

    name: str
    weight: float
    value: float

    @property
    def contribution(self) -> float:
        return self.weight * self.value


def weighted_result(
    reward: str,
    parts: Sequence[WeightedPart],
    *,
    correct: bool,
    details: dict[str, float] | None = None,
) -> RewardResult:
    """The result whose total is the sum of the parts' contributions, added in the given order."""
    total = 0.0
    contributions: dict[str, float] = {}
    for p in parts:
        if p.name in contributions:
            raise ValueError(f"reward {reward}: part {p.name!r} given twice")
        if not math.isfinite(p.value):
            raise ValueError(f"reward {reward}: part {p.name!r} has no finite value ({p.value!r})")
        contributions[p.name] = p.contribution
        total += p.contribution
    return RewardResult(total, correct, contributions, dict(details or {}), reward)


class RewardSpec(Settings):
    """Which reward, and how its parts are weighted and decided (module docstring).

    Every field has the default the papers use; ``weights`` overrides a part's weight by name (a name no
    part of the chosen reward has is an error when that reward is built).
    """

    name: str | None = Field(
        None,
        description="registered reward name; None = chosen per task (EnvLunch task: envlunch, else datamind)",
    )
    judge: str | None = Field(
        None, description="model spec of an LLM judge deciding the answer part (reward 'judge')"
    )
    rule_first: bool = Field(
        False, description="with a judge: the rule decides what it is certain about, the judge the rest"
    )
    weights: dict[str, float] = Field(
        default_factory=dict, description="part name -> weight, overriding the reward's default weight"
    )
    l_min: int = Field(
        L_MIN, ge=0, description="DataMind §4: answers up to l_min tokens get the full length reward"
    )
    l_max: int = Field(L_MAX, gt=0, description="DataMind §4: the length reward reaches 0.5 at l_max tokens")
    tokenizer: str | None = Field(
        None, description="local tokenizer path to count answer tokens (default: DataDojo's approximation)"
    )
    tasks_path: str | None = Field(
        None, description="the EnvLunch task file (its counterfactual copies are resolved against its folder)"
    )
    executor: Literal["sandbox", "in_process"] = Field(
        "sandbox",
        description="where EnvLunch runs submitted programs: the sandbox (untrusted code), or in this "
        "process (only programs you wrote yourself: tests, the solver)",
    )
    concurrency: int = Field(2, ge=1, description="EnvLunch submissions run in sandboxes at once")
    cache_dir: str | None = Field(None, description="folder of the judge's verdict cache (judge_cache.jsonl)")
    benchmark: Any = Field(
        None,
        exclude=True,
        description="a Benchmark object deciding the answer part of every task (eval passes the one it "
        "scores with: its rule, its judge verdicts); None = the benchmark the task's source names",
    )

    def weight(self, part: str, default: float) -> float:
        return float(self.weights.get(part, default))


class Reward(Protocol):
    """A registered reward: scores a batch of pairs (batched: EnvLunch runs programs, judges are asked
    concurrently)."""

    name: str

    async def score(self, pairs: Sequence[tuple[Task, Trajectory]]) -> list[RewardResult]: ...

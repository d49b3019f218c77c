r"""The SFT/RL mixing coefficient γ over training steps (DataMind §4, "Dynamic SFT+RL Objective and γ Scheduling").

DataMind initializes γ at 0.9 and anneals it to 0.05 with cosine decay: early on the SFT term keeps the
policy from drifting while its own rollouts are still poor; late, a small γ lets RL explore beyond the
expert trajectories (§5.4: a large fixed γ collapses entropy, a small fixed γ drifts and collapses).

.. math:: \gamma(s) = \gamma_{end} + (\gamma_{start}-\gamma_{end})\cdot\tfrac12\big(1+\cos(\pi\,p)\big),\quad
          p = \min\!\big(1, \max(0, s - w)/\max(1, N - 1 - w)\big)

for step ``s`` (0-based), ``N`` = ``total_steps`` and ``w`` = ``warmup_steps``: γ is ``γ_start`` at step ``w``
and reaches ``γ_end`` exactly at the last step ``N − 1`` of an ``N``-step run. The paper does not define a
warm-up for γ; ours *holds* γ at its peak for the first ``w`` steps (e.g. while the cold-start policy's first
rollouts come in). A ramp up from 0, as learning-rate warm-ups do, would start training at γ = 0 — pure RL,
the failure mode of §5.4's Figure 6 — so it is deliberately not offered. After ``N`` steps γ stays at
``γ_end``. ``mode="fixed"`` gives a constant γ (the ablations of Figures 6–7), ``mode="linear"`` a linear
decay for comparison.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["GAMMA_END", "GAMMA_START", "GammaSchedule"]

#: DataMind §4: the peak and valley of the cosine-annealed γ.
GAMMA_START = 0.9
GAMMA_END = 0.05

GammaMode = Literal["cosine", "linear", "fixed"]


@dataclass(frozen=True)
class GammaSchedule:
    """γ as a function of the optimizer step (module docstring).

    ``start``/``end`` default to the paper's 0.9 → 0.05; ``total_steps`` is the length of the run the decay
    spans, γ reaching ``end`` at step ``total_steps − 1`` (required for ``cosine`` and ``linear``);
    ``value`` is γ in ``fixed`` mode.
    """

    mode: GammaMode = "cosine"
    start: float = GAMMA_START
    end: float = GAMMA_END
    total_steps: int | None = None
    warmup_steps: int = 0
    value: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("cosine", "linear", "fixed"):
            raise ValueError(f"gamma schedule mode must be cosine, linear or fixed, got {self.mode!r}")
        for name in ("start", "end"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"gamma {name} must be in [0, 1], got {v}")
        if self.mode == "fixed":
            if self.value is None or not 0.0 <= self.value <= 1.0:
                raise ValueError(f"fixed gamma needs value in [0, 1], got {self.value!r}")
            return
        if self.total_steps is None or self.total_steps < 1:
            raise ValueError(f"a {self.mode} gamma schedule needs total_steps >= 1, got {self.total_steps!r}")
        if not 0 <= self.warmup_steps < self.total_steps:
            raise ValueError(
                f"warmup_steps must be in [0, total_steps={self.total_steps}), got {self.warmup_steps}"
            )

    def __call__(self, step: int) -> float:
        """γ at optimizer step ``step`` (0-based)."""
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        if self.mode == "fixed":
            assert self.value is not None
            return float(self.value)
        assert self.total_steps is not None
        span = max(1, self.total_steps - 1 - self.warmup_steps)
        progress = min(1.0, max(0, step - self.warmup_steps) / span)
        if self.mode == "linear":
            return self.start + (self.end - self.start) * progress
        return self.end + (self.start - self.end) * 0.5 * (1.0 + math.cos(math.pi * progress))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def fixed(cls, value: float) -> GammaSchedule:
        """A constant γ (``value`` = 0 is pure RL, 1 pure SFT)."""
        return cls(mode="fixed", value=value)

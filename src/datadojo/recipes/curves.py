"""EnvLunch's two statistics of a label-efficiency curve pair (EnvLunch §4, used in Table 1 and Table 2).

A curve maps a label budget ``n`` (number of annotated downstream examples; 0 = no downstream
fine-tuning) to an accuracy. For the method's curve (warm-up on) and the baseline's (warm-up off):

* **curve-level gain** — "the mean accuracy difference between EnvLunch and the baseline across all
  training-data budgets" (§4). The training budgets are the positive ones (the paper's budgets range over
  16–2048, 8–64, …; 0 is "evaluation without downstream fine-tuning", Fig. 1), so ``n = 0`` is left out
  unless ``include_zero``. Only budgets on both curves count.
* **matching budget** — "the smallest baseline budget needed to match or exceed EnvLunch's accuracy,
  expressed as a multiple of the corresponding EnvLunch budget"; §5 reads it at "the accuracy achieved by
  the EnvLunch model at its smallest training budget". So the target is the method's accuracy at its
  smallest positive budget ``n₀``, and the value is ``min{n > 0 : baseline(n) ≥ target} / n₀``;
  "never (>k×)" when no evaluated baseline budget reaches it, ``k = max baseline budget / n₀``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["MatchingBudget", "curve_gain", "matching_budget"]

Curve = Mapping[float, float]


def curve_gain(method: Curve, baseline: Curve, *, include_zero: bool = False) -> float | None:
    """Mean of ``method(n) − baseline(n)`` over the budgets both curves have (``n > 0`` unless
    ``include_zero``); ``None`` when they share none."""
    budgets = [n for n in method if n in baseline and (include_zero or n > 0)]
    if not budgets:
        return None
    return sum(method[n] - baseline[n] for n in budgets) / len(budgets)


@dataclass(frozen=True)
class MatchingBudget:
    """``multiple`` (``None``: never reached), the method's smallest budget and its accuracy (the target),
    the baseline budget that matched it, and ``never_above`` (largest baseline budget / ``n₀``)."""

    multiple: float | None
    smallest: float
    target: float
    matched_at: float | None
    never_above: float

    def __str__(self) -> str:
        if self.multiple is None:
            return f"never (>{self.never_above:g}×)"
        return f"{self.multiple:g}×"


def matching_budget(method: Curve, baseline: Curve) -> MatchingBudget | None:
    """EnvLunch's matching budget (module docstring); ``None`` when either curve has no positive budget."""
    mine = sorted(n for n in method if n > 0)
    theirs = sorted(n for n in baseline if n > 0)
    if not mine or not theirs:
        return None
    n0 = mine[0]
    target = method[n0]
    hit = next((n for n in theirs if baseline[n] >= target), None)
    return MatchingBudget(
        multiple=None if hit is None else hit / n0,
        smallest=n0,
        target=target,
        matched_at=hit,
        never_above=theirs[-1] / n0,
    )

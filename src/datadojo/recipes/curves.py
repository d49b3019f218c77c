"""EnvLunch's two statistics for the curves a recipe sweep measured (EnvLunch §4; Table 1 and Table 2).

The statistics themselves are :mod:`datadojo.eval.label_efficiency` (curve-level gain Δ and matching
budget, with their definitions); this module adapts a sweep's curves to them. A sweep's curve maps a label
budget ``n`` to an accuracy and may hold ``n = 0`` ("evaluation without downstream fine-tuning", Fig. 1),
which is drawn but is not a training budget: the paper's budgets range over 16–2048, 8–64, …, so both
statistics are computed over the positive budgets, and the gain over those both curves have.
"""

from __future__ import annotations

from collections.abc import Mapping

from datadojo.eval.label_efficiency import Curve, MatchingBudget, curve_level_gain
from datadojo.eval.label_efficiency import matching_budget as _matching_budget

__all__ = ["curve_gain", "matching_budget"]

Points = Mapping[float, float]


def _curve(points: Points, budgets: list[float]) -> Curve:
    return Curve.from_mapping({n: points[n] for n in budgets})


def curve_gain(method: Points, baseline: Points) -> float | None:
    """Δ over the positive budgets both curves have; ``None`` when they share none."""
    shared = sorted(n for n in method if n > 0 and n in baseline)
    if not shared:
        return None
    return curve_level_gain(_curve(method, shared), _curve(baseline, shared)).mean


def matching_budget(method: Points, baseline: Points) -> MatchingBudget | None:
    """The matching budget over each curve's positive budgets; ``None`` when either has none."""
    mine = sorted(n for n in method if n > 0)
    theirs = sorted(n for n in baseline if n > 0)
    if not mine or not theirs:
        return None
    return _matching_budget(_curve(method, mine), _curve(baseline, theirs))

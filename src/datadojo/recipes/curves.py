"""EnvLunch's two statistics for the curves a recipe sweep measured (EnvLunch §4; Fig. 1, Table 1 and Table 2).

The statistics themselves are :mod:`datadojo.eval.label_efficiency` (curve-level gain Δ and matching
budget, with their definitions); this module adapts a sweep's curves to them. A sweep's curve maps a label
budget ``n`` to an accuracy and may hold ``n = 0`` ("evaluation without downstream fine-tuning", Fig. 1),
which is drawn but is not a training budget: the paper's budgets range over 16–2048, 8–64, …, so both
statistics are computed over the positive budgets, and the gain over those both curves have.

With several seeds per point (Fig. 1: "Lines show the mean over three runs, and shaded bands span the
corresponding min–max"), a point is a :class:`SeedBand`; the curve is the mean over the seeds that have a
score, and the gain and matching budget are computed on those means (:func:`compare`). Δ's spread over runs
(Table 1: "Δ is computed by pairing runs") is given only where it is defined: every shared budget of both
arms scored under the same seeds, run r of the method paired with run r of the baseline (same seed, §4:
"The two models on a curve ... share the seed").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from datadojo.eval.label_efficiency import Curve, MatchingBudget, curve_level_gain
from datadojo.eval.label_efficiency import matching_budget as _matching_budget

__all__ = ["Comparison", "SeedBand", "compare", "curve_gain", "matching_budget", "seed_bands"]

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


@dataclass(frozen=True)
class SeedBand:
    """One point of a curve over seeds: each seed's score, their mean and min–max (Fig. 1's line and band)."""

    scores: Mapping[int, float]

    def __post_init__(self) -> None:
        if not self.scores:
            raise ValueError("a point needs at least one seed's score")

    @property
    def n(self) -> int:
        return len(self.scores)

    @property
    def mean(self) -> float:
        return sum(self.scores.values()) / len(self.scores)

    @property
    def lo(self) -> float:
        return min(self.scores.values())

    @property
    def hi(self) -> float:
        return max(self.scores.values())


def seed_bands(scores: Mapping[float, Mapping[int, float | None]]) -> dict[float, SeedBand]:
    """``{budget: {seed: score or None}}`` → ``{budget: SeedBand}`` in budget order; a seed without a score
    (a failed run, a benchmark it did not report) is left out, and a budget with none is no point."""
    out = {}
    for x in sorted(scores):
        known = {s: float(v) for s, v in scores[x].items() if v is not None}
        if known:
            out[x] = SeedBand(known)
    return out


@dataclass(frozen=True)
class Comparison:
    """The method arm against the baseline arm: Δ on the mean curves (``None`` without a shared positive
    budget), its sample standard deviation over paired runs (``None`` unless defined: module docstring),
    the number of pairs, and the matching budget on the mean curves."""

    gain: float | None
    gain_std: float | None
    paired_runs: int
    match: MatchingBudget | None


def compare(method: Mapping[float, SeedBand], baseline: Mapping[float, SeedBand]) -> Comparison:
    """Curve-level gain and matching budget of ``method`` over ``baseline``, on the means (module docstring)."""
    m = {x: b.mean for x, b in method.items()}
    b = {x: band.mean for x, band in baseline.items()}
    gain = curve_gain(m, b)
    shared = sorted(x for x in m if x > 0 and x in b)
    seeds = {frozenset(method[x].scores) for x in shared} | {frozenset(baseline[x].scores) for x in shared}
    std, pairs = None, 0
    if shared and len(seeds) == 1:
        order = sorted(next(iter(seeds)))
        runs = [
            Curve(tuple(shared), tuple(tuple(arm[x].scores[s] for x in shared) for s in order))
            for arm in (method, baseline)
        ]
        paired = curve_level_gain(runs[0], runs[1])
        std, pairs = paired.std, paired.paired_runs
    return Comparison(gain, std, pairs, matching_budget(m, b))

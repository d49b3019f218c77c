"""Label efficiency of a warm-up (EnvLunch §4, "Evaluation metrics"): curve-level gain and matching budget.

EnvLunch fine-tunes a baseline and a warmed-up ("treatment") model on growing numbers of labelled examples
and compares the two accuracy-vs-budget curves with two statistics:

* the **curve-level gain** Δ: "the mean accuracy difference between EnvLunch and the baseline across all
  training-data budgets" (the primary comparison). With several runs per curve, Δ is computed per pair of
  runs (run r of one curve with run r of the other, "Δ is computed by pairing runs", Table 1) and reported
  as the mean and the sample standard deviation over pairs.
* the **matching budget**: "the smallest baseline budget needed to match or exceed EnvLunch's accuracy,
  expressed as a multiple of the corresponding EnvLunch budget". The target is the treatment's mean
  accuracy at its *smallest* budget (§5.1: "to match the accuracy achieved by the EnvLunch model at its
  smallest training budget"); only evaluated baseline budgets are considered (no interpolation). When no
  baseline budget reaches the target, the result reads "never (>k×)" with k the largest evaluated baseline
  budget over the treatment's smallest budget.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "Curve",
    "Gain",
    "LabelEfficiency",
    "MatchingBudget",
    "curve_level_gain",
    "label_efficiency",
    "matching_budget",
]


@dataclass(frozen=True)
class Curve:
    """Accuracy at each training budget; ``runs[r][i]`` is run r's accuracy at ``budgets[i]``."""

    budgets: tuple[float, ...]
    runs: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        if not self.budgets:
            raise ValueError("a curve needs at least one budget")
        if any(not (b > 0 and math.isfinite(b)) for b in self.budgets):
            raise ValueError(f"budgets must be positive numbers, got {self.budgets}")
        if list(self.budgets) != sorted(set(self.budgets)):
            raise ValueError(f"budgets must be distinct and increasing, got {self.budgets}")
        if not self.runs:
            raise ValueError("a curve needs at least one run")
        for r, run in enumerate(self.runs):
            if len(run) != len(self.budgets):
                raise ValueError(f"run {r} has {len(run)} accuracies for {len(self.budgets)} budgets")
            if any(not math.isfinite(a) for a in run):
                raise ValueError(f"run {r} has a non-finite accuracy: {run}")

    @classmethod
    def from_mapping(cls, points: Mapping[float, float | Sequence[float]]) -> Curve:
        """A curve from ``{budget: accuracy}`` or ``{budget: [accuracy of run 0, run 1, …]}``."""
        budgets = sorted(points)
        cols = [list(v) if isinstance(v, Sequence) else [float(v)] for v in (points[b] for b in budgets)]
        n_runs = {len(c) for c in cols}
        if len(n_runs) != 1:
            raise ValueError(f"every budget needs the same number of runs, got {sorted(n_runs)}")
        runs = tuple(tuple(float(c[r]) for c in cols) for r in range(n_runs.pop()))
        return cls(tuple(float(b) for b in budgets), runs)

    @property
    def mean(self) -> tuple[float, ...]:
        """Mean accuracy over runs at each budget."""
        return tuple(sum(run[i] for run in self.runs) / len(self.runs) for i in range(len(self.budgets)))


@dataclass(frozen=True)
class Gain:
    """Curve-level gain: ``mean`` Δ, its ``std`` over paired runs (``None`` with one pair or unpaired)."""

    mean: float
    std: float | None
    per_budget: tuple[float, ...]
    paired_runs: int


def curve_level_gain(treatment: Curve, baseline: Curve) -> Gain:
    """Δ = mean over budgets of treatment − baseline accuracy (module docstring); budgets must agree."""
    if treatment.budgets != baseline.budgets:
        missing = sorted(set(treatment.budgets) ^ set(baseline.budgets))
        raise ValueError(f"the curves are evaluated at different budgets (not on both: {missing})")
    per_budget = tuple(t - b for t, b in zip(treatment.mean, baseline.mean, strict=True))
    if len(treatment.runs) == len(baseline.runs):
        deltas = [
            sum(t - b for t, b in zip(tr, br, strict=True)) / len(tr)
            for tr, br in zip(treatment.runs, baseline.runs, strict=True)
        ]
        mean = sum(deltas) / len(deltas)
        std = math.sqrt(sum((d - mean) ** 2 for d in deltas) / (len(deltas) - 1)) if len(deltas) > 1 else None
        return Gain(mean, std, per_budget, len(deltas))
    return Gain(sum(per_budget) / len(per_budget), None, per_budget, 0)


@dataclass(frozen=True)
class MatchingBudget:
    """Matching budget: ``multiple`` × the treatment's smallest budget, or ``None`` ("never (>k×)")."""

    target: float
    treatment_budget: float
    baseline_budget: float | None
    multiple: float | None
    max_multiple: float

    @property
    def label(self) -> str:
        """As EnvLunch writes it: ``16×`` or ``never (>32×)``."""
        if self.multiple is None:
            return f"never (>{self.max_multiple:g}×)"
        return f"{self.multiple:g}×"

    def __str__(self) -> str:
        return self.label


def matching_budget(treatment: Curve, baseline: Curve, *, eps: float = 1e-12) -> MatchingBudget:
    """The smallest baseline budget whose mean accuracy reaches the treatment's at its smallest budget."""
    t0 = treatment.budgets[0]
    target = treatment.mean[0]
    max_multiple = baseline.budgets[-1] / t0
    for b, acc in zip(baseline.budgets, baseline.mean, strict=True):
        if acc >= target - eps:
            return MatchingBudget(target, t0, b, b / t0, max_multiple)
    return MatchingBudget(target, t0, None, None, max_multiple)


@dataclass(frozen=True)
class LabelEfficiency:
    """Both statistics of one pair of curves."""

    gain: Gain
    matching: MatchingBudget

    def to_dict(self) -> dict[str, object]:
        return {
            "gain": self.gain.mean,
            "gain_std": self.gain.std,
            "gain_per_budget": list(self.gain.per_budget),
            "paired_runs": self.gain.paired_runs,
            "target": self.matching.target,
            "matching_budget": self.matching.baseline_budget,
            "matching_multiple": self.matching.multiple,
            "match": self.matching.label,
        }


def label_efficiency(treatment: Curve, baseline: Curve) -> LabelEfficiency:
    """Curve-level gain and matching budget of ``treatment`` over ``baseline``."""
    return LabelEfficiency(curve_level_gain(treatment, baseline), matching_budget(treatment, baseline))

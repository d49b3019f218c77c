"""Evaluation statistics: pass@k and friends, behavioural metrics, label efficiency.

* :mod:`~datadojo.eval.metrics`: pass@1 over trials, unbiased pass@k, any-of-n, success rate, turns, tokens;
* :mod:`~datadojo.eval.behaviour`: SciDataSailor Table 4 metrics from trajectories;
* :mod:`~datadojo.eval.label_efficiency`: EnvLunch §4 curve-level gain and matching budget.
"""

from datadojo.eval.behaviour import BehaviourMetrics, behaviour_by, behaviour_metrics, code_stats
from datadojo.eval.label_efficiency import (
    Curve,
    LabelEfficiency,
    curve_level_gain,
    label_efficiency,
    matching_budget,
)
from datadojo.eval.metrics import EvalSummary, TrialRecord, any_of_n, mean_pass_at_k, pass_at_k, summarize

__all__ = [
    "BehaviourMetrics",
    "Curve",
    "EvalSummary",
    "LabelEfficiency",
    "TrialRecord",
    "any_of_n",
    "behaviour_by",
    "behaviour_metrics",
    "code_stats",
    "curve_level_gain",
    "label_efficiency",
    "matching_budget",
    "mean_pass_at_k",
    "pass_at_k",
    "summarize",
]

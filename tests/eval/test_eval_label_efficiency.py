"""EnvLunch §4 label-efficiency statistics on worked examples."""

from __future__ import annotations

import math

import pytest

from datadojo.eval.label_efficiency import Curve, curve_level_gain, label_efficiency, matching_budget


def test_gain_and_matching_budget_worked_example() -> None:
    treat = Curve.from_mapping({16: 0.50, 32: 0.55, 64: 0.60, 128: 0.62, 256: 0.63})
    base = Curve.from_mapping({16: 0.30, 32: 0.40, 64: 0.45, 128: 0.49, 256: 0.52})
    gain = curve_level_gain(treat, base)
    assert gain.mean == pytest.approx((0.20 + 0.15 + 0.15 + 0.13 + 0.11) / 5)
    m = matching_budget(treat, base)
    assert m.target == 0.50 and m.baseline_budget == 256 and m.multiple == 16 and m.label == "16×"


def test_never_reached() -> None:
    treat = Curve.from_mapping({8: 0.7, 16: 0.72})
    base = Curve.from_mapping({8: 0.3, 16: 0.35, 32: 0.40, 64: 0.45, 256: 0.6})
    m = matching_budget(treat, base)
    assert m.multiple is None and m.baseline_budget is None and m.label == "never (>32×)"


def test_matching_uses_equality_and_can_be_below_one() -> None:
    treat = Curve.from_mapping({32: 0.40, 64: 0.5})
    base = Curve.from_mapping({16: 0.40, 32: 0.45})
    m = matching_budget(treat, base)
    assert m.multiple == 0.5 and m.label == "0.5×"  # "match or exceed": equal accuracy counts


def test_paired_runs_give_mean_and_std() -> None:
    treat = Curve.from_mapping({16: [0.5, 0.6, 0.7], 32: [0.6, 0.7, 0.8]})
    base = Curve.from_mapping({16: [0.4, 0.4, 0.4], 32: [0.6, 0.6, 0.6]})
    gain = curve_level_gain(treat, base)
    deltas = [(0.1 + 0.0) / 2, (0.2 + 0.1) / 2, (0.3 + 0.2) / 2]
    mean = sum(deltas) / 3
    assert gain.mean == pytest.approx(mean) and gain.paired_runs == 3
    assert gain.std == pytest.approx(math.sqrt(sum((d - mean) ** 2 for d in deltas) / 2))
    le = label_efficiency(treat, base).to_dict()
    # target: the treatment's mean at 16 examples (0.6), reached by the baseline's mean at 32
    assert le["target"] == pytest.approx(0.6) and le["match"] == "2×" and le["gain"] == pytest.approx(mean)


def test_unpaired_runs_have_no_std() -> None:
    treat = Curve.from_mapping({16: [0.5, 0.7], 32: [0.6, 0.8]})
    base = Curve.from_mapping({16: 0.4, 32: 0.5})
    gain = curve_level_gain(treat, base)
    assert gain.std is None and gain.paired_runs == 0 and gain.mean == pytest.approx((0.2 + 0.2) / 2)


def test_validation() -> None:
    with pytest.raises(ValueError, match="different budgets"):
        curve_level_gain(Curve.from_mapping({1: 0.1, 2: 0.2}), Curve.from_mapping({1: 0.1, 4: 0.2}))
    with pytest.raises(ValueError, match="positive"):
        Curve.from_mapping({0: 0.1})
    with pytest.raises(ValueError, match="same number of runs"):
        Curve.from_mapping({1: [0.1, 0.2], 2: [0.3]})
    with pytest.raises(ValueError, match="increasing"):
        Curve(budgets=(2.0, 1.0), runs=((0.1, 0.2),))

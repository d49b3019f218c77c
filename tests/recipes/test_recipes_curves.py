"""EnvLunch §4's curve-level gain and matching budget on worked examples computed by hand."""

from __future__ import annotations

import pytest

from datadojo.recipes.curves import curve_gain, matching_budget

METHOD = {0: 0.30, 8: 0.50, 16: 0.56, 32: 0.60}
BASELINE = {0: 0.30, 8: 0.35, 16: 0.42, 32: 0.52}


def test_curve_level_gain_is_the_mean_difference_over_the_training_budgets() -> None:
    # budgets 8, 16, 32: (0.15 + 0.14 + 0.08) / 3 = 0.37 / 3
    assert curve_gain(METHOD, BASELINE) == pytest.approx(0.37 / 3)
    assert curve_gain({8: 0.5}, {16: 0.4}) is None  # no shared budget


def test_matching_budget_is_a_multiple_of_the_smallest_method_budget() -> None:
    # target: the method's accuracy at its smallest budget 8 (0.50); the baseline first reaches it at 32 → 4×
    m = matching_budget(METHOD, BASELINE)
    assert (
        m is not None and m.multiple == 4 and m.target == 0.50 and m.baseline_budget == 32 and str(m) == "4×"
    )
    # never reached within the evaluated range: "never (>4×)"
    never = matching_budget(METHOD, {8: 0.35, 16: 0.42, 32: 0.45})
    assert never is not None and never.multiple is None and str(never) == "never (>4×)"
    # equal accuracy matches ("match or exceed"); the 0 budget never counts as a match
    assert str(matching_budget(METHOD, {0: 0.9, 8: 0.50})) == "1×"
    assert matching_budget({0: 0.3}, BASELINE) is None

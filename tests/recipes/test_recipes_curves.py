"""EnvLunch §4's curve-level gain and matching budget on worked examples computed by hand."""

from __future__ import annotations

import pytest

from datadojo.recipes.curves import compare, curve_gain, matching_budget, seed_bands

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


# Three seeds per point (EnvLunch Fig. 1: "the mean over three runs", bands "span the corresponding min–max"):
#   budget   method (seeds 0, 1, 2)   mean    baseline (seeds 0, 1, 2)   mean
#   8        .40 .50 .60             .50     .30 .35 .40                .35
#   16       .50 .56 .62             .56     .40 .42 .44                .42
#   32       .58 .60 .62             .60     .50 .52 .54                .52
# Δ on the means (.15 + .14 + .08) / 3 = .37 / 3; paired by seed the runs' Δ are .28/3, .37/3, .46/3, whose
# sample std is .03; the matching budget's target is the method's MEAN at 8 (.50), first reached by the
# baseline's mean at 32 → 4× (seed 0 alone would give a target of .40, reached at 16: 2×).
SEEDED_M = {8: {0: 0.40, 1: 0.50, 2: 0.60}, 16: {0: 0.50, 1: 0.56, 2: 0.62}, 32: {0: 0.58, 1: 0.60, 2: 0.62}}
SEEDED_B = {8: {0: 0.30, 1: 0.35, 2: 0.40}, 16: {0: 0.40, 1: 0.42, 2: 0.44}, 32: {0: 0.50, 1: 0.52, 2: 0.54}}


def test_a_point_over_seeds_is_their_mean_with_the_min_max_band() -> None:
    bands = seed_bands({16: {0: 0.50, 1: 0.56, 2: 0.62}, 8: {0: 0.40, 1: None, 2: 0.60}, 4: {0: None}})
    assert list(bands) == [8, 16]  # budget order; a budget no seed scored is no point
    assert (bands[16].mean, bands[16].lo, bands[16].hi, bands[16].n) == pytest.approx((0.56, 0.50, 0.62, 3))
    assert (bands[8].mean, bands[8].n, sorted(bands[8].scores)) == (pytest.approx(0.50), 2, [0, 2])


def test_gain_and_matching_budget_are_computed_on_the_means_over_seeds() -> None:
    cmp = compare(seed_bands(SEEDED_M), seed_bands(SEEDED_B))
    assert cmp.gain == pytest.approx(0.37 / 3)
    assert cmp.gain_std == pytest.approx(0.03) and cmp.paired_runs == 3
    assert cmp.match is not None and cmp.match.target == pytest.approx(0.50) and str(cmp.match) == "4×"
    # the other way round: Δ changes sign; the target is the baseline's mean .35 at 8, which the method
    # passes at once → 1×
    rev = compare(seed_bands(SEEDED_B), seed_bands(SEEDED_M))
    assert rev.gain == pytest.approx(-0.37 / 3) and str(rev.match) == "1×"
    # a seed missing at one budget: the means use the seeds there are, and there is no paired std
    short = {**SEEDED_M, 16: {0: 0.50, 1: 0.56}}
    cmp = compare(seed_bands(short), seed_bands(SEEDED_B))
    assert cmp.gain == pytest.approx((0.15 + (0.53 - 0.42) + 0.08) / 3)
    assert cmp.gain_std is None and cmp.paired_runs == 0

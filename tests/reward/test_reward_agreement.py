"""Judge agreement: confusion matrix, κ, item and group Pearson, ROUGE-L alongside (DataMind Fig. 5, G.4)."""

from __future__ import annotations

import math

import pytest

from datadojo.reward.agreement import agreement_report, cohen_kappa, pearson


def test_pearson_worked_values() -> None:
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # x = [1,2,3,4], y = [1,3,2,4]: sxy = 4, sxx = syy = 5 → r = 0.8
    assert pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert pearson([1, 1, 1], [1, 2, 3]) is None and pearson([1], [2]) is None
    with pytest.raises(ValueError, match="differ in length"):
        pearson([1, 2], [1])


def test_confusion_agreement_and_kappa() -> None:
    a = [1, 1, 1, 0, 0, 1, 0, 1]
    b = [1, 1, 0, 0, 1, 1, 0, 1]
    rep = agreement_report(a, b)
    assert rep.confusion == {"1/1": 4, "1/0": 1, "0/1": 1, "0/0": 2}
    assert rep.agreement == pytest.approx(6 / 8)
    # po = .75, pa = pb = 5/8, pe = 25/64 + 9/64 = 34/64 → κ = (.75 - 34/64) / (1 - 34/64) = 14/30
    assert rep.cohen_kappa == pytest.approx(14 / 30)
    assert rep.pearson_items == pytest.approx(pearson(a, b))
    assert cohen_kappa([1, 1], [1, 1]) is None


def test_group_level_view_with_rouge() -> None:
    groups = ["m1"] * 4 + ["m2"] * 4 + ["m3"] * 4
    a = [1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0]
    b = [1, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0]
    refs = ["the north region"] * 12
    preds = ["the north region"] * 4 + ["north"] * 4 + ["south"] * 4
    rep = agreement_report(a, b, groups=groups, predictions=preds, references=refs)
    assert [(g.group, g.accuracy_a, g.accuracy_b) for g in rep.groups] == [
        ("m1", 1.0, 0.75),
        ("m2", 0.5, 0.5),
        ("m3", 0.25, 0.0),
    ]
    assert rep.groups[0].rouge_l == 1.0 and rep.groups[2].rouge_l == 0.0
    # "north" vs "the north region": LCS 1, P = 1, R = 1/3, F1 = 2·(1/3)/(4/3) = 0.5
    assert rep.groups[1].rouge_l == pytest.approx(0.5)
    assert rep.rouge_l_mean == pytest.approx((4 * 1.0 + 4 * 0.5 + 4 * 0.0) / 12)
    assert rep.pearson_groups == pytest.approx(pearson([1.0, 0.5, 0.25], [0.75, 0.5, 0.0]))
    assert rep.pearson_a_vs_rouge is not None and rep.pearson_a_vs_rouge > 0.9
    md = rep.to_markdown("gpt", "qwen")
    assert "| gpt \\ qwen | 1 | 0 |" in md and "| m3 | 4 | 25.0% | 0.0% |" in md


def test_validation() -> None:
    with pytest.raises(ValueError, match="0 or 1"):
        agreement_report([1, 2], [1, 0])
    with pytest.raises(ValueError, match="has 1 items"):
        agreement_report([1, 0], [1])
    with pytest.raises(ValueError, match="both predictions and references"):
        agreement_report([1], [1], predictions=["a"])
    with pytest.raises(ValueError, match="no items"):
        agreement_report([], [])


def test_pearson_edge_cases_by_hand() -> None:
    # two points always lie on a line: r = ±1 (DataMind's figure can have as few as two systems)
    assert pearson([1, 2], [3, 5]) == pytest.approx(1.0) and pearson([1, 2], [5, 3]) == pytest.approx(-1.0)
    assert pearson([1, 2, 3], [2, 2, 2]) is None  # constant y as well as constant x
    # x̄ = ȳ = 1.75: sxy = 4.75, sxx = 8.75, syy = 2.75
    assert pearson([0, 1, 2, 4], [1, 1, 2, 3]) == pytest.approx(4.75 / math.sqrt(8.75 * 2.75))


def test_pearson_never_leaves_minus_one_to_one() -> None:
    # rounding puts the raw quotient at 1.0000000000000002 for y = 7x on these x: reported as exactly ±1
    x = [0.1, 0.2, 0.3]
    y = [7 * v for v in x]
    assert pearson(x, y) == 1.0
    assert pearson(x, [-v for v in y]) == -1.0


def test_cohen_kappa_small_cases_by_hand() -> None:
    assert cohen_kappa([], []) is None
    # one item, raters disagree: po = 0, pa = 1, pb = 0, pe = 0 → κ = 0
    assert cohen_kappa([1], [0]) == 0.0
    # perfect disagreement on a balanced pair: po = 0, pe = ½ → κ = −1
    assert cohen_kappa([1, 0], [0, 1]) == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        cohen_kappa([1, 0], [1])


def test_groups_without_texts_have_no_rouge_view() -> None:
    rep = agreement_report([1, 0, 1, 1], [1, 0, 0, 1], groups=["m1", "m1", "m2", "m2"])
    assert [g.rouge_l for g in rep.groups] == [None, None] and rep.rouge_l_mean is None
    assert rep.pearson_a_vs_rouge is None
    # accuracies by group: judge A 0.5 and 1.0, judge B 0.5 and 0.5 (constant: no correlation)
    assert [(g.accuracy_a, g.accuracy_b) for g in rep.groups] == [(0.5, 0.5), (1.0, 0.5)]
    assert rep.pearson_groups is None

"""The tolerant matcher: hand-checked cases for every rule, plus properties of the number rule."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datadojo.reward import MatchConfig, match_answer, match_task
from datadojo.types import Task


@pytest.mark.parametrize(
    ("pred", "gold"),
    [
        ("45.3", 45.3),
        ("46.6", 45.3),  # +2.9%: inside DataMind's 3%
        ("The mean is 45.3", "45.3"),  # a sentence: its last number
        ("45%", 0.45),  # percent read as a fraction …
        ("45%", 45),  # … and as percentage points
        ("0.45", "45%"),
        ("$1,200", 1200),
        ("1.2 million", 1_200_000),
        ("12.5 kg", "12.5"),
        ("−3", -3),  # unicode minus
        ("nan", math.nan),
        ("Answer: 12", 12),
        (r"\boxed{12}", "12"),
        ("Paris.", "paris"),
        ("The United Kingdom", "united kingdom"),
        ("Yes, the mean is higher", "True"),
        ("no", False),
        ("[1, 2, 3]", [3, 2, 1]),
        ("1,200, 3,400", [3400, 1200]),  # thousands separators are not list separators
        ("a; b and c", ["c", "b", "a"]),
        ("- x\n- y", ["y", "x"]),
        ('{"mean": 2.0, "city": "Oslo"}', {"mean": 2, "city": "oslo"}),
        ("@mean[2.01] @city[Oslo]", {"mean": 2, "city": "Oslo"}),
        ("mean: 2\ncity = Oslo", {"Mean": 2, "City": "Oslo"}),
        ("| a | b |\n|---|---|\n| 1 | x |\n| 3 | y |", [{"a": 3, "b": "y"}, {"a": 1, "b": "x"}]),
        ("a,b,extra\n1,2,9\n3,4,9", {"columns": ["b", "a"], "data": [[2, 1], [4, 3]]}),
    ],
)
def test_matches(pred: object, gold: object) -> None:
    res = match_answer(pred, gold)
    assert res.correct, res.reason


@pytest.mark.parametrize(
    ("pred", "gold", "why"),
    [
        ("46.7", 45.3, "3%"),  # +3.1%
        ("43.9", 45.3, "3%"),
        ("45", 0.45, "3%"),  # a bare number is not read as a percentage
        ("45.3 or 50", 45.3, "3%"),  # the last number decides, not any number
        ("Lyon", "Paris", "normalization"),
        ("maybe", True, "neither yes nor no"),
        ("[1, 2]", [1, 2, 3], "2 item(s) predicted"),
        ("[1, 2, 4]", [1, 2, 3], "not found"),
        ("", 1, "empty"),
        (None, "x", "empty"),
        ("@mean[2]", {"mean": 2, "city": "Oslo"}, "city: missing"),
        ("a\n1\n2", [{"a": 1}, {"a": 3}], "no equal predicted column"),
        ("no number here", 3, "no number"),
    ],
)
def test_mismatches(pred: object, gold: object, why: str) -> None:
    res = match_answer(pred, gold)
    assert not res.correct
    assert why in res.reason


def test_ordered_lists_and_kinds() -> None:
    assert match_answer("[3, 2, 1]", [1, 2, 3]).correct
    assert not match_answer("[3, 2, 1]", [1, 2, 3], kind="ordered_list").correct
    assert not match_answer("[3, 2, 1]", [1, 2, 3], config=MatchConfig(ordered_lists=True)).correct
    # "numeric" is an alias; text kind forces string comparison of numbers
    assert match_answer("10.2", "10", kind="numeric").correct
    assert not match_answer("10.2", "10", kind="text").correct


def test_exact_integers_option() -> None:
    assert match_answer("2050", "2019").correct  # 1.5% off: the papers' 3% rule accepts it
    assert not match_answer("2050", "2019", config=MatchConfig(exact_integers=True)).correct
    assert match_answer("2019", "2019", config=MatchConfig(exact_integers=True)).correct


def test_zero_reference_uses_the_absolute_tolerance() -> None:
    assert match_answer("0.0000001", 0).correct
    assert not match_answer("0.01", 0).correct


def test_missing_reference_is_an_error_naming_the_task() -> None:
    with pytest.raises(ValueError, match="'t9'"):
        match_task(Task(id="t9", question="q"), "1")
    with pytest.raises(ValueError, match="no reference"):
        match_answer("1", None)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="rel_tol"):
        MatchConfig(rel_tol=1.5)


finite = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False).filter(lambda x: abs(x) > 1e-3)


@given(finite)
def test_a_number_matches_itself_however_written(x: float) -> None:
    for text in (repr(x), f"{x:,.6f}", f"The result is {x:.6f}."):
        assert match_answer(text, x).correct, text


@given(finite, st.floats(min_value=0.0, max_value=0.029))
def test_within_three_percent_matches(x: float, rel: float) -> None:
    assert match_answer(repr(x * (1 + rel)), x).correct


@given(finite, st.floats(min_value=0.031, max_value=10.0))
def test_beyond_three_percent_does_not(x: float, rel: float) -> None:
    assert not match_answer(repr(x * (1 + rel)), x).correct

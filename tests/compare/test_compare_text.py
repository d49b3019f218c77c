"""Normalization, ROUGE-L and number parsing shared by the scorers."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datadojo.compare.text import (
    find_numbers,
    lcs_length,
    normalize_text,
    parse_number,
    rouge_l,
    rouge_tokens,
)


def test_normalize_text_is_squad_normalization() -> None:
    assert normalize_text("The  Cat, sat.") == "cat sat"
    assert normalize_text("An apple a day") == "apple day"
    assert normalize_text("51.44%") == "5144"  # punctuation (and the decimal point) goes


def test_rouge_l_worked_example() -> None:
    # LCS of "the cat sat on the mat" / "the cat is on the mat" = the cat on the mat (5 tokens)
    p, r = 5 / 6, 5 / 6
    assert rouge_l("the cat sat on the mat", "the cat is on the mat") == pytest.approx(2 * p * r / (p + r))
    assert rouge_l("a b c", "a b c") == 1.0
    assert rouge_l("", "a") == 0.0 and rouge_l("x y", "a b") == 0.0


def test_rouge_tokens_follow_rouge_score() -> None:
    assert rouge_tokens("Hello, World! 3.5x") == ["hello", "world", "3", "5x"]


@given(st.lists(st.sampled_from("abc"), max_size=12), st.lists(st.sampled_from("abc"), max_size=12))
def test_lcs_is_symmetric_and_bounded(a: list[str], b: list[str]) -> None:
    n = lcs_length(a, b)
    assert n == lcs_length(b, a) <= min(len(a), len(b))


@pytest.mark.parametrize(
    ("text", "value", "percent"),
    [
        ("45%", 0.45, True),
        ("45 percent", 0.45, True),
        ("1,234.5", 1234.5, False),
        ("$1,200", 1200.0, False),
        ("-0.03", -0.03, False),
        ("1.2 million", 1.2e6, False),
        ("5k", 5000.0, False),
        ("12.5 kg", 12.5, False),
        ("1e-3", 0.001, False),
    ],
)
def test_parse_number(text: str, value: float, percent: bool) -> None:
    n = parse_number(text)
    assert n is not None and n.value == pytest.approx(value) and n.percent is percent


@pytest.mark.parametrize("text", ["2 or 3", "abc", "1,2", "(12)", "", "12m3"])
def test_not_numbers(text: str) -> None:
    assert parse_number(text) is None


def test_special_values_and_decimals() -> None:
    assert math.isnan(parse_number("NaN").value)  # type: ignore[union-attr]
    assert parse_number("inf").value == math.inf  # type: ignore[union-attr]
    assert parse_number("51.440").decimals == 3  # type: ignore[union-attr]


def test_find_numbers_skips_identifiers() -> None:
    found = [n.value for n in find_numbers("Q3 sales rose 12% to $1,200 in 2019 (2nd best)")]
    assert found == pytest.approx([0.12, 1200.0, 2019.0])

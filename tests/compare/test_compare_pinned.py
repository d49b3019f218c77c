"""Pinning tests for the comparison core: each case's verdict comes from a benchmark's official rule or a
hand computation, and each would flip under a small change of a comparison or constant that the mutation
check (``scripts/mutation_check.py --module compare``) found no other test noticing.

Oracles used here, none of them the function under test:

* DataMind's table rule is ``math.isclose(a, b, abs_tol=1e-2)`` (``eval_bird.py``, default ``rel_tol``
  1e-9), so :func:`math.isclose` itself is the oracle for single cells; missing cells (NaN after
  ``read_csv``) equal only missing cells;
* Spider's execution match is test-suite-sql-eval's ``result_eq``: a quick per-row check, then *some*
  permutation of the predicted columns must give the gold rows; :func:`_result_eq` below is that loop over
  ``itertools.permutations``, written out independently of the pruned search in ``denotations_equal``.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from typing import Any

import pytest

from datadojo.compare.matchers import MatchConfig, _split_items, match_answer
from datadojo.compare.tables import compare_tables, denotations_equal, values_equal
from datadojo.compare.units import parse_unit

# --- DataMind's cell rule: math.isclose(a, b, abs_tol=1e-2) ---------------------------------------------


def test_a_missing_cell_equals_only_a_missing_cell() -> None:
    """NULL against 0 (or against text) is a wrong answer: ``math.isclose(nan, 0)`` is False in the
    reference, while two missing cells are equal."""
    assert values_equal(None, None)
    assert not values_equal(None, 0) and not values_equal(0, None)
    assert not values_equal(None, "") and not values_equal(0.0, None)
    assert not compare_tables([(None,)], [(0,)]).match


def test_infinities_equal_only_the_same_infinity() -> None:
    """``math.isclose`` is True only for the same infinity; a finite value never equals one (with an
    infinite reference, ``rel_tol·|b|`` is itself infinite, so the tolerance formula alone would accept)."""
    inf = math.inf
    for a, b in [(inf, inf), (-inf, -inf), (5.0, inf), (inf, 5.0), (inf, -inf), (1e308, inf)]:
        assert values_equal(a, b) is math.isclose(a, b, abs_tol=1e-2), (a, b)
    assert values_equal(inf, inf) and not values_equal(5.0, inf) and not values_equal(inf, -inf)


def test_the_tolerance_boundary_is_inclusive() -> None:
    """``math.isclose`` accepts ``|a − b| <= tol``. The differences below are exact in binary floating
    point (0.01 − 0 is the double 0.01 itself; 1.5 − 1.0 = 0.5), so the boundary case is not blurred by
    rounding."""
    assert math.isclose(0.01, 0.0, abs_tol=1e-2) and values_equal(0.01, 0.0)
    assert math.isclose(1.5, 1.0, abs_tol=0.5) and values_equal(1.5, 1.0, abs_tol=0.5)
    assert not values_equal(1.5, 1.0, abs_tol=0.25)


def test_the_relative_tolerance_is_math_isclose_default_one_billionth() -> None:
    """For large values the reference's default ``rel_tol=1e-9`` is wider than ``abs_tol``: around 1e8 it
    allows 0.1 (by hand: 1e-9 × 1e8), so 1e8 + 0.09 is equal and 1e8 + 0.15 is not (a doubled
    ``rel_tol`` would allow 0.2 and accept it)."""
    big = 1e8
    assert math.isclose(big + 0.09, big, abs_tol=1e-2) and values_equal(big + 0.09, big)
    assert not math.isclose(big + 0.15, big, abs_tol=1e-2)
    assert not values_equal(big + 0.15, big)
    assert not compare_tables([(big + 0.15,)], [(big,)]).match
    assert compare_tables([(big + 0.09,)], [(big,)]).match


def test_every_missing_gold_column_is_counted_and_the_first_five_named() -> None:
    gold = {"columns": list("abcdefg"), "data": [[1, 2, 3, 4, 5, 6, 7]]}
    res = compare_tables([(0,)], gold)
    assert not res.match and res.unmatched_gold_columns == tuple("abcdefg")
    assert res.reason.startswith("7 of 7 gold column(s)")
    assert "'e'" in res.reason and "'f'" not in res.reason  # one line, not every name


# --- Spider's execution match (test-suite-sql-eval result_eq) --------------------------------------------


def _quick(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [tuple(sorted(r, key=lambda v: str(v) + str(type(v)))) for r in rows]


def _result_eq(gold: list[tuple[Any, ...]], pred: list[tuple[Any, ...]], order_matters: bool) -> bool:
    """test-suite-sql-eval's ``result_eq``, unpruned: the quick check, then every column permutation."""
    if not gold and not pred:
        return True
    if len(gold) != len(pred) or len(gold[0]) != len(pred[0]):
        return False
    gq, pq = _quick(gold), _quick(pred)
    if (gq != pq) if order_matters else (set(gq) != set(pq)):
        return False
    for perm in itertools.permutations(range(len(gold[0]))):
        permuted = [tuple(r[j] for j in perm) for r in pred]
        if (permuted == gold) if order_matters else (Counter(permuted) == Counter(gold)):
            return True
    return False


# Each case passes the quick check (the same cells per row), so only the column search decides.
DENOTATION_CASES = [
    # needs backtracking: gold column 2 must go to predicted column 3, not to the first candidate 2
    ([(1, 1, 2), (2, 2, 1)], [(1, 2, 1), (2, 1, 2)], False, True),
    # every gold column holds {2, 3}, but only predicted column 2 does: one predicted column cannot stand
    # for three gold columns
    ([(2, 2, 3), (3, 3, 2)], [(3, 3, 2), (3, 2, 2)], False, False),
    # gold's constant columns repeat predicted columns 2 and 4, but predicted column 1 = (1, 2) matches no
    # gold column; mapping two gold columns onto one predicted column would accept
    ([(1, 1, 2, 2), (1, 1, 2, 2)], [(1, 1, 2, 2), (2, 1, 1, 2)], True, False),
    ([(1, 1, 2, 2), (1, 1, 2, 2)], [(1, 1, 2, 2), (2, 1, 1, 2)], False, False),
    # the same rows with a permutation that works, ordered and not
    ([("a", 1, "x"), ("b", 2, "y")], [(2, "y", "b"), (1, "x", "a")], False, True),
    ([("a", 1, "x"), ("b", 2, "y")], [(1, "x", "a"), (2, "y", "b")], True, True),
    ([("a", 1, "x"), ("b", 2, "y")], [(2, "y", "b"), (1, "x", "a")], True, False),
]


@pytest.mark.parametrize(("gold", "pred", "order_matters", "verdict"), DENOTATION_CASES)
def test_the_column_search_accepts_exactly_when_a_permutation_exists(
    gold: list[tuple[Any, ...]], pred: list[tuple[Any, ...]], order_matters: bool, verdict: bool
) -> None:
    assert _quick(gold) == _quick(pred) or set(_quick(gold)) == set(_quick(pred))
    assert _result_eq(gold, pred, order_matters) is verdict  # the hand verdict is the reference's
    assert denotations_equal(gold, pred, order_matters=order_matters) is verdict


def test_rows_without_columns_are_equal() -> None:
    """``result_eq`` on rows of width 0: the quick check passes and the one (empty) permutation makes the
    rows equal, so the reference accepts; so must the search, which has nothing to assign."""
    assert _result_eq([()], [()], False)
    assert denotations_equal([()], [()], order_matters=False)
    assert denotations_equal([(), ()], [(), ()], order_matters=True)


# --- the matchers --------------------------------------------------------------------------------------


def test_a_boolean_is_not_a_number() -> None:
    """``True`` would be 1 in Python; as an answer to "how many?" it is not a count."""
    res = match_answer(True, 1)
    assert not res.correct and res.decided


@pytest.mark.parametrize(
    ("pred", "gold", "correct"),
    [
        ("nan", math.nan, True),
        ("inf", math.inf, True),
        ("-inf", -math.inf, True),
        ("-inf", math.inf, False),
        ("nan", math.inf, False),  # NaN is not infinity
        ("inf", math.nan, False),
        ("1e308", math.inf, False),  # huge is not infinite
        ("5", math.nan, False),
        ("no idea", math.nan, False),  # no number at all is not NaN
        ("no idea", math.inf, False),
    ],
)
def test_non_finite_references_match_only_themselves(pred: str, gold: float, correct: bool) -> None:
    res = match_answer(pred, gold)
    assert res.correct is correct and res.decided


def test_exact_integers_apply_to_integer_references_only() -> None:
    """With ``exact_integers`` a count must be exact (101 for 100 is wrong, although within 3 %), while
    a reference with decimals keeps the 3 % tolerance (|2.51 − 2.5| / 2.5 = 0.4 %)."""
    exact = MatchConfig(exact_integers=True)
    assert match_answer("100", 100, config=exact).correct
    assert not match_answer("101", 100, config=exact).correct
    assert not match_answer("100.4", 100, config=exact).correct
    assert match_answer("101", 100).correct  # the default: 1 % is within 3 %
    assert match_answer("2.51", 2.5, config=exact).correct
    assert match_answer("4.9%", "5%", config=exact).correct  # a percentage is not a count


def test_a_plain_yes_is_a_decided_yes() -> None:
    for pred, gold, correct in [("Yes", True, True), ("no", True, False), ("True", True, True)]:
        res = match_answer(pred, gold)
        assert res.correct is correct and res.decided, pred


@pytest.mark.parametrize(
    ("pred", "gold", "correct"),
    [
        ("Based on 101 rows, the answer is no", False, True),
        ("Based on 101 rows, the answer is no", True, False),
        ("After checking, the answer is: yes", True, True),
        ("Having checked for yes and no, the result is 'no'.", False, True),
    ],
)
def test_a_stated_answer_inside_a_sentence_is_decided(pred: str, gold: bool, correct: bool) -> None:
    """ "the answer is no" at the end states the answer: decided, not the guess made from a polarity word
    somewhere in the sentence."""
    res = match_answer(pred, gold)
    assert res.correct is correct and res.decided, pred


def test_neither_yes_nor_no() -> None:
    """One word that is neither ("maybe") is a decided wrong answer; a sentence that says neither ("it is
    normally distributed" may still mean yes) is left to the judge; a non-text value is decided wrong."""
    one_word = match_answer("maybe", True)
    assert not one_word.correct and one_word.decided
    sentence = match_answer("normally distributed", True)
    assert not sentence.correct and not sentence.decided
    for pred in ([1, 2], 2.5):
        res = match_answer(pred, True)
        assert not res.correct and res.decided, pred


def test_a_list_reference_written_as_text_is_split() -> None:
    res = match_answer("Bananas, Apples", "Apples, Bananas", kind="list")
    assert res.correct and res.decided
    assert not match_answer("Bananas, Kiwis", "Apples, Bananas", kind="list").correct


def test_a_mixed_list_compares_item_by_item() -> None:
    """A reference with a number and a name is not a list of numbers: the name must be there too."""
    res = match_answer("3, apples", [3, "apples"])
    assert res.correct and res.decided
    assert not match_answer("3, 4", [3, "apples"]).correct


def test_ordered_lists() -> None:
    ok = match_answer("Apples, Bananas, Cherries", ["Apples", "Bananas", "Cherries"], kind="ordered_list")
    assert ok.correct and ok.decided
    swapped = match_answer("2, 1", [1, 2], kind="ordered_list")
    assert not swapped.correct and swapped.decided
    assert match_answer("2, 1", [1, 2]).correct  # unordered: the same set
    guessed = match_answer(["yes", "probably no"], [True, False], kind="ordered_list")
    assert guessed.correct and not guessed.decided  # "probably no" is a guess: the verdict is too


def test_unordered_list_decidedness() -> None:
    sure = match_answer(["yes", "5"], [True, 5])
    assert sure.correct and sure.decided
    guessed = match_answer(["yes", "probably no"], [True, False])
    assert guessed.correct and not guessed.decided
    wrong = match_answer("1, 5", [1, 2])  # 5 is decidedly not 2
    assert not wrong.correct and wrong.decided
    unsure = match_answer(["yes", "probably yes"], [True, False])  # a guess is among the pairs
    assert not unsure.correct and not unsure.decided


@pytest.mark.parametrize(
    ("text", "expected", "items"),
    [
        ("[Apples, Bananas]", None, ["Apples", "Bananas"]),
        ("(Apples, Bananas)", None, ["Apples", "Bananas"]),
        ("[]", None, []),
        ("()", None, []),
        ("Apples, Bananas, and Cherries", None, ["Apples", "Bananas", "Cherries"]),  # Oxford comma
        ("Apples, Bananas and Cherries", 3, ["Apples", "Bananas", "Cherries"]),
        ("Apples, Salt and Pepper", 2, ["Apples", "Salt and Pepper"]),  # two items expected: one name
        ("Apples, Salt and Pepper", None, ["Apples", "Salt and Pepper"]),
    ],
)
def test_split_items(text: str, expected: int | None, items: list[str]) -> None:
    assert _split_items(text, expected) == items


def test_a_record_is_decided_only_when_every_field_is() -> None:
    sure = match_answer({"city": "Paris", "n": 3}, {"city": "Paris", "n": 3})
    assert sure.correct and sure.decided
    guessed = match_answer({"city": "Paris", "n": "Mostly yes"}, {"city": "Paris", "n": True})
    assert guessed.correct and not guessed.decided
    guessed_first = match_answer({"n": "Mostly yes", "city": "Paris"}, {"n": True, "city": "Paris"})
    assert guessed_first.correct and not guessed_first.decided


def test_a_record_reason_counts_every_wrong_field_and_names_three() -> None:
    res = match_answer({"a": 9, "b": 9, "c": 9, "d": 9}, {"a": 1, "b": 2, "c": 3, "d": 4})
    assert not res.correct and res.decided
    assert res.reason.startswith("4 of 4 field(s) wrong")
    assert "c: 9" in res.reason and "d: 9" not in res.reason


def test_the_two_letter_si_prefix_deca() -> None:
    """ "da" (deca, 10¹) is the one two-letter SI prefix and must be read before "d" (deci): a decametre is
    10 m and a decagram 10 g = 0.01 kg (by hand), not an unknown unit."""
    dam, dag = parse_unit("dam"), parse_unit("dag")
    assert dam is not None and dam.dim == parse_unit("m").dim and dam.factor == pytest.approx(10.0)
    assert dag is not None and dag.dim == parse_unit("kg").dim and dag.factor == pytest.approx(0.01)


def test_only_a_plural_s_is_dropped_from_a_unit_word() -> None:
    """ "hours", "weeks", "secs" are plurals of units (3600 s, 7 × 24 × 3600 = 604800 s, 1 s by hand); "sect"
    and "yearn" are English words that would read as "sec" and "year" if any last letter were dropped."""
    for word, seconds in [("hours", 3600.0), ("weeks", 604800.0), ("secs", 1.0)]:
        unit = parse_unit(word)
        assert unit is not None and unit.dim == parse_unit("s").dim, word
        assert unit.factor == pytest.approx(seconds), word
    assert parse_unit("sect") is None and parse_unit("yearn") is None

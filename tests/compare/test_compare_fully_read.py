"""Issue 39: a rule decides only what it fully read.

Each "Found" case of the issue was confidently wrong on the code before (decided, so a configured judge
never saw it); the expected verdicts are the careful grader's (DataMind App. I.4: semantic equivalence
and completeness; SciDataSailor App. B.2.3: a wrong entity scores 0).
"""

from __future__ import annotations

import pytest

from datadojo.compare.content import check_content, check_items, list_items, mask_dates
from datadojo.compare.core import compare_answers, find_numbers, worded_signs
from datadojo.compare.matchers import match_answer, match_task
from datadojo.synth.datamind.consistency import rule_check
from datadojo.types import Task

FOUND = [
    # (prediction, reference, correct, decided): wrong entity beside the right number
    ("France, with 1,200 customers", "Germany: 1200", False, False),
    ("Male passengers had a higher survival rate: 0.74", "female: 0.74", False, True),
    # opposite direction, the only number (a year) matching
    ("Sales increased in 2020.", "Sales decreased in 2020.", False, True),
    # the same date in another format
    ("2021-03-15", "March 15, 2021", True, True),
    # a sign written in words
    ("Revenue fell by 5.3%.", "-5.3%", True, True),
    # a list after a preamble
    ("The top 3 products are Apples, Bananas, and Cherries.", "Apples, Bananas, Cherries", True, True),
]


@pytest.mark.parametrize(("prediction", "reference", "correct", "decided"), FOUND, ids=[f[0] for f in FOUND])
def test_the_cases_the_issue_found(prediction: str, reference: str, correct: bool, decided: bool) -> None:
    m = match_answer(prediction, reference)
    assert (m.correct, m.decided) == (correct, decided), m.reason


@pytest.mark.parametrize(
    "prediction", ["The mean is 4.5", "approximately 4.5 units", "The answer is 4.5.", "4.50", "Mean: 4.5"]
)
def test_harmless_words_around_a_number_stay_decided(prediction: str) -> None:
    m = match_answer(prediction, "4.5")
    assert (m.correct, m.decided) == (True, True), m.reason


def test_the_question_accounts_for_the_words_it_repeats() -> None:
    assert match_answer("1200", "Germany: 1200").decided is False
    asked = match_answer("1200", "Germany: 1200", question="How many customers does Germany have?")
    assert (asked.correct, asked.decided) == (True, True)
    task = Task(id="t", question="How many customers does Germany have?", answer="Germany: 1200")
    assert match_task(task, "1200").decided  # match_task passes the task's question
    assert rule_check(["Germany: 1200", "Germany: 1200"], question=task.question).consistent is True


def test_a_question_that_asks_for_an_order_makes_lists_ordered() -> None:
    q = "Rank the three stores by revenue, from highest to lowest."
    assert match_answer(["b", "a", "c"], ["a", "b", "c"]).correct
    assert not match_answer(["b", "a", "c"], ["a", "b", "c"], question=q).correct
    ordered = match_answer("Cherries, Apples, Bananas", "Apples, Bananas, Cherries", question=q)
    assert (ordered.correct, ordered.decided) == (False, True)


def test_a_longer_list_is_wrong() -> None:
    """The surviving mutant of issue 39 item 5: a list with one item more than the reference."""
    for pred, gold in [
        (["a", "b", "c", "d"], ["a", "b", "c"]),
        ("[1, 2, 3, 4]", [1, 2, 3]),
        ("Apples, Bananas, Cherries, Dates", "Apples, Bananas, Cherries"),
        ("3, 5, 7", "3, 5"),
    ]:
        m = match_answer(pred, gold)
        assert (m.correct, m.decided) == (False, True), (pred, m.reason)
    # the reference's items with nothing after them stay right
    assert match_answer("Apples, Bananas, Cherries.", "Apples, Bananas, Cherries").correct


def test_a_missing_list_item_is_wrong() -> None:
    m = match_answer("Apples and Bananas", "Apples, Bananas, Cherries")
    assert (m.correct, m.decided) == (False, True)


def test_dates_are_read_in_common_formats() -> None:
    for text in ["2021-03-15", "March 15, 2021", "15 March 2021", "15th of March 2021", "Mar 15 2021",
                 "03/15/2021", "15/03/2021", "Monday, March 15, 2021", "2021/03/15"]:  # fmt: skip
        masked, dates = mask_dates(text)
        assert [d.readings for d in dates] == [frozenset({(2021, 3, 15)})], text
        assert not masked.strip() and not find_numbers(masked), text
    _, [ambiguous] = mask_dates("04/03/2021")
    assert ambiguous.readings == {(2021, 4, 3), (2021, 3, 4)}
    assert mask_dates("2021-13-45")[1] == []  # not a date


def test_a_wrong_weekday_or_another_date_is_not_a_match() -> None:
    wrong_day = compare_answers("Tuesday, March 15, 2021", "2021-03-15")  # 2021-03-15 was a Monday
    assert not wrong_day.decided
    assert compare_answers("2021-03-16", "2021-03-15").decided is True
    assert compare_answers("2021-03-16", "2021-03-15").correct is False


def test_signed_changes_in_words_are_signed_numbers() -> None:
    for text in ["fell by 5.3%", "dropped 5.3%", "down 5.3%", "a decrease of 5.3%", "declined by about 5.3%"]:
        nums, worded = worded_signs(text, find_numbers(text))
        assert nums[0].value == -5.3 and worded[0][0] == -1, text
    nums, _ = worded_signs("rose by 5.3%", find_numbers("rose by 5.3%"))
    assert nums[0].value == 5.3
    assert not match_answer("Revenue rose by 5.3%", "-5.3%").correct
    # against an unsigned reference the direction is the question's to settle
    assert match_answer("Revenue fell by 5.3%", "5.3%").decided is False
    fall = "By how much did revenue fall?"
    assert (match_answer("Revenue fell by 5.3%", "5.3%", question=fall).decided) is True
    rose = match_answer("Revenue rose by 5.3%", "5.3%", question=fall)
    assert (rose.correct, rose.decided) == (False, True)


def test_direction_words_of_the_same_pole_account_and_negations_undecide() -> None:
    same = compare_answers("Sales rose in 2020", "Sales increased in 2020")
    assert (same.correct, same.decided) == (True, True)
    negated = compare_answers("Sales did not decrease in 2020", "Sales decreased in 2020")
    assert negated.decided is False
    c = check_content("Sales did not decrease", "Sales decreased")
    assert c.contradiction is None and c.extra_negation


def test_labels_any_kind() -> None:
    assert compare_answers("Product B sold 340 units", "Product A: 340").decided is True
    assert compare_answers("Product B sold 340 units", "Product A: 340").correct is False
    assert check_content("Women survived more", "female survivors").unaccounted == ("survivor",)


def test_list_items_and_sentences() -> None:
    assert list_items("Apples, Bananas, Cherries") == [["apple"], ["banana"], ["cherry"]]
    assert list_items("temperature and salinity") == [["temperature"], ["salinity"]]
    sentence = "The files are organized by station and year, with one CSV per station-year"
    assert len(list_items(sentence)) == 1
    assert (
        check_items("Apples, Bananas or Cherries", list_items("Apples, Bananas, Cherries")).decided is False
    )


def test_a_label_with_another_number_is_not_decided_correct() -> None:
    swapped = compare_answers("The median is 3.2 and the mean is 3.0", "mean 3.2, median 3.0")
    assert (swapped.correct, swapped.decided) == (False, False)
    assert compare_answers("mean: 3.2; median: 3.0", "mean 3.2, median 3.0").decided is True


def test_what_only_a_judge_can_tell_is_left_undecided() -> None:
    """Synonyms, abbreviations and numbers in words: a rule that says "wrong" here is confidently wrong."""
    for pred, ref in [("USA", "United States"), ("Store 12", "Store_12"), ("no missing values", "0"),
                      ("twelve", "12"), ("France and Germany", "France")]:  # fmt: skip
        m = match_answer(pred, ref)
        assert not m.decided, (pred, m.reason)
    assert match_answer("I could not compute it", "12").decided is True  # no number at all: wrong


def test_a_second_name_of_the_reference_kind_is_not_decided_correct() -> None:
    for pred, ref in [("Store_7 and Store_12 tie with 830", "Store_12: 830"),
                      ("Product A and Product B both sold 340", "Product A: 340")]:  # fmt: skip
        m = compare_answers(pred, ref)
        assert (m.correct, m.decided) == (True, False), m.reason
    assert compare_answers("Store_12 leads with 830", "Store_12: 830").decided is True
    both = match_answer("Yes and no", "yes")
    assert (both.correct, both.decided) == (False, False)


def test_the_converse_of_a_comparison_is_not_a_contradiction() -> None:
    ref = "Women had a survival rate 3.9 times higher than men"
    converse = compare_answers("Men had a survival rate 3.9 times lower than women", ref)
    assert not converse.decided or converse.correct, converse.reason  # never decided wrong
    opposite = compare_answers(
        "Women had a lower survival rate: 3.9", "Women had a higher survival rate: 3.9"
    )
    assert (opposite.correct, opposite.decided) == (False, True)

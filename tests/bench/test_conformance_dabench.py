"""DABench conformance with InfiAgent's ``eval_closed_form.py``.

Expected verdicts were worked out by reading the official script, not by running DataDojo:
``extract_format`` takes every ``@(\\w+)\\[(.*?)\\]`` (``dict(zip(...))``: the last repeat of a name wins);
``is_equal(response, label)`` is ``response == label`` or ``abs(float(response) - float(label)) < 1e-6``
(any exception: False); ``evaluate_responses`` skips a label whose response is missing or falsy (empty),
so such questions leave every denominator (``accuracy by question`` = correct / len(results)).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from datadojo.bench import get_benchmark
from datadojo.bench.dabench import OFFICIAL_DENOMINATOR
from datadojo.types import Task


def _task(labels: dict[str, str], tid: str = "1") -> Task:
    return Task(id=tid, question="q", answer=labels, answer_kind="dabench", extra={"concepts": ["Summary"]})


# (response, label of @a, verdict of is_equal on the extracted value)
CASES = [
    ("@a[1]", "1", True),
    ("@a[1.0]", "1", True),  # both floats
    ("@a[1.0000001]", "1", True),  # 1e-7 < 1e-6
    ("@a[1.00001]", "1", False),
    ("@a[ 1 ]", "1", True),  # float() strips spaces
    ("@a[1,000]", "1000", False),  # float('1,000') raises: string comparison
    ("@a[abc]", "ABC", False),  # case-sensitive strings
    ("@a[nan]", "nan", True),  # equal strings (NaN != NaN as floats)
    ("@a[1] and later @a[2]", "2", True),  # the last repeat wins
    ("@a[1][2]", "1", True),  # non-greedy: the first bracket
    ("@b[1]", "1", False),  # the name is missing: None
    ("a[1]", "1", False),  # no @
    ("@a [1]", "1", False),  # no space allowed between name and bracket
    ("@a[1e-7]", "0", True),
]


@pytest.mark.parametrize(("response", "label", "verdict"), CASES)
def test_sub_answer_verdicts(response: str, label: str, verdict: bool) -> None:
    s = get_benchmark("dabench").score(_task({"a": label}), response)
    assert s.parts["sub"]["a"] is verdict and s.correct is verdict


def test_official_denominator_leaves_out_missing_and_empty_responses() -> None:
    bench = get_benchmark("dabench")
    tasks = [_task({"a": "1", "b": "2"}, str(i)) for i in range(5)]
    answers = ["@a[1] @b[2]", "@a[1] @b[3]", "", None, " "]  # right, half right, empty, missing, blank
    items = [(t, bench.score(t, a)) for t, a in zip(tasks, answers, strict=True)]
    totals = bench.totals(items)
    assert totals["accuracy"] == pytest.approx(1 / 5)
    # the official script keeps only the three truthy responses (a blank ' ' is truthy, and wrong)
    assert totals["accuracy" + OFFICIAL_DENOMINATOR] == pytest.approx(1 / 3)
    assert totals["accuracy_by_sub_question" + OFFICIAL_DENOMINATOR] == pytest.approx(3 / 6)
    assert totals["accuracy_proportional_by_sub_question" + OFFICIAL_DENOMINATOR] == pytest.approx(1.5 / 3)
    assert totals["accuracy_proportional_by_sub_question"] == pytest.approx(1.5 / 5)
    assert totals["answered"] == pytest.approx(3 / 5)
    assert "empty answer" in items[2][1].reason


def test_real_labels_score_100_percent_under_both_denominators(shared_data: Callable[..., Path]) -> None:
    data = shared_data("dabench", "da-dev-labels.jsonl").parent
    from datadojo.bench.dabench import gold_response

    bench = get_benchmark("dabench")
    tasks = [t for t in bench.load(data, require_files=False) if t.answer]
    items = [(t, bench.score(t, gold_response(t))) for t in tasks]
    totals = bench.totals(items)
    assert totals["accuracy"] == totals["accuracy" + OFFICIAL_DENOMINATOR] == 1.0

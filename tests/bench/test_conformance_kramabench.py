"""KramaBench conformance with mitdbg/Kramabench ``benchmark/metrics.py``, ``evaluator.py`` and ``evaluate.py``.

Expected values were worked out by hand from the official code's rules, not by running DataDojo:

* ``Success``: ``try_convert_to_number`` drops a trailing ``%`` and turns any numeric string into a float;
  two numbers are equal when identical or, if either is a float, when ``rel < 1e-6 or abs_diff < 1e-6 or
  abs_diff < max(|p|, |t|) * 1e-4`` (a zero target: ``|p| < 1e-6``); two unequal ints are wrong; two
  strings compare stripped and lower-cased; a number against a text target raises (→ 0).
* ``RAEScore``: ``str_to_float`` (``"12%"`` → 0.12), ``1 / (1 + |p - t| / |t|)``, any exception → 0.
* ``F1``: each target item matches the first predicted item equal to it (strings ``strip().lower()``,
  numbers ``rel < 1e-6``); recall = matched targets / len(target), precision = distinct matched predicted
  / len(predicted); a text prediction is tried as JSON, then a Python literal, then comma-split.
* ``F1Approximate``: numbers match at ``rel_err <= 0.01``.
* ``_evaluate_result_for_task``: every metric is scored against ``[answer] + accepted_answers``, the
  best kept; ``aggregate_results``: Total score = sum over headline metrics of mean × support / support.
"""

from __future__ import annotations

import json

import pytest

from datadojo.bench import get_benchmark
from datadojo.bench.kramabench import f1, f1_approximate, parse_answer, rae_score, success
from datadojo.types import Task

SUCCESS = [
    ("8577.5298", 8577.5298, 1.0),
    (8577.6, 8577.5298, 1.0),  # diff 0.0702 < 8577.6e-4: the 1e-4 magnitude rule, not rel < 1e-6
    (8578.5, 8577.5298, 0.0),  # diff 0.9702 > 0.85785
    (100.0099, 100.0, 1.0),  # 0.0099 < 0.01000099
    (100.0101, 100.0, 0.0),  # 0.0101 > 0.01000101
    (1000001, 1000000, 0.0),  # two ints: exact only
    ("1000001", 1000000, 1.0),  # a numeric string is a float: 1 < 100.0001
    (7, 7.00001, 1.0),
    ("45%", 45, 1.0),  # the % is dropped, not divided
    ("45%", 0.45, 0.0),
    (0.0000001, 0, 1.0),  # zero target: |p| < 1e-6
    (0.000002, 0.0, 0.0),
    (" Lisbon ", "lisbon", 1.0),
    ("Lisbon.", "Lisbon", 0.0),
    (5, "five", 0.0),  # a number against a text target
    (None, 5, 0.0),
]


@pytest.mark.parametrize(("pred", "target", "want"), SUCCESS)
def test_success(pred, target, want) -> None:
    assert success(pred, target) == want


RAE = [
    ("90", 100, 1 / 1.1),
    ("90%", 1, 1 / 1.1),  # str_to_float divides a % by 100
    (50, -100, 1 / 2.5),
    (100, 0, 0.0),  # zero target: division error → 0
    ("abc", 5, 0.0),
    ([5], 5, 0.0),
    (5, 5, 1.0),
]


@pytest.mark.parametrize(("pred", "target", "want"), RAE)
def test_rae_score(pred, target, want) -> None:
    assert rae_score(pred, target) == pytest.approx(want)


F1 = [
    (["a", "b"], ["A", "b", "c"], 0.8),  # recall 2/3, precision 1
    (["c", "b", "a"], ["a", "b", "c"], 1.0),  # order does not matter
    (["a", "a"], ["a"], 2 / 3),  # a repeated prediction costs precision (1/2)
    (["a"], ["a", "a"], 1.0),  # a repeated target matches the same item twice
    (["a", "a", "b"], ["a", "a", "b"], 0.8),  # even the gold itself: both "a" targets take item 0, p = 2/3
    (2007, 2007, 0.0),  # a list_exact gold that is no list (environment-hard-19-8): len() fails → 0
    ("Bucks Creek, Pleasant Street", ["bucks creek", "pleasant street"], 1.0),  # comma split
    ("['x', 'y']", ["x", "y"], 1.0),  # a Python literal
    ('["x", 3]', ["x", 3], 1.0),  # JSON
    ([1.0000001], [1], 1.0),
    ([1.00001], [1], 0.0),
    (["12%"], [0.12], 1.0),
    ([], [], 1.0),
    (["a"], [], 0.0),
    ("abc", "ABC ", 1.0),  # two strings compare whole
    (5, ["5"], 0.0),  # not a list: an error → 0
]


@pytest.mark.parametrize(("pred", "target", "want"), F1)
def test_f1(pred, target, want) -> None:
    assert f1(pred, target) == pytest.approx(want)


F1_APPROX = [
    ([101], [100], 1.0),  # rel 0.01: the boundary counts
    ([101.01], [100], 0.0),
    ([100.5, 200], [100, 300], 0.5),
    ("[99.5, 300]", [100, 300], 1.0),
    (["Paris"], ["paris"], 1.0),  # strings: DataDojo compares (the official code asks an LLM)
]


@pytest.mark.parametrize(("pred", "target", "want"), F1_APPROX)
def test_f1_approximate(pred, target, want) -> None:
    assert f1_approximate(pred, target) == pytest.approx(want)


def _task(answer, answer_type: str, accepted=None, tid: str = "legal-easy-1", domain: str = "legal") -> Task:
    return Task(
        id=tid,
        question="q",
        answer={"answer": answer, "accepted": accepted or []},
        answer_kind=answer_type,
        source="kramabench",
        category=domain,
        extra={"domain": domain, "paraphrase": "rule"},
    )


@pytest.mark.parametrize(
    ("prediction", "answer", "answer_type", "want"),
    [
        ('{"answer": "1000001"}', 1000000, "numeric_exact", 1.0),  # the official response field, as text
        ('{"answer": 1000001}', 1000000, "numeric_exact", 0.0),  # as an int
        ('```json\n["a", "b"]\n```', ["a", "b", "c"], "list_exact", 0.8),
        ("90", 100, "numeric_approximate", 1 / 1.1),
        ("[101]", [100], "list_approximate", 1.0),
        ("Lisbon", "lisbon", "string_exact", 1.0),
    ],
)
def test_item_scores_read_the_answer_as_the_harness_does(prediction, answer, answer_type, want) -> None:
    s = get_benchmark("kramabench").score(_task(answer, answer_type), prediction)
    assert s.score == pytest.approx(want)
    assert s.correct is (want == 1.0)


def test_accepted_answers_keep_the_best_score() -> None:
    bench = get_benchmark("kramabench")
    task = _task(100, "numeric_approximate", accepted=[80])
    assert bench.score(task, "80").score == 1.0  # the alternate gold matches exactly
    assert bench.score(task, "90").score == pytest.approx(1 / 1.1)  # max(1/1.1, 1/1.125)


def test_parse_answer() -> None:
    assert parse_answer('{"answer": [1, 2], "explanation": "x"}') == [1, 2]
    assert parse_answer("Lisbon") == "Lisbon"
    assert parse_answer("  12.5 ") == 12.5
    assert parse_answer('{"city": "x"}') == {"city": "x"}  # no answer field: the object itself


def test_total_score_is_the_mean_headline_metric_over_all_tasks() -> None:
    bench = get_benchmark("kramabench")
    tasks = [
        _task(5, "numeric_exact", tid="legal-easy-1"),
        _task(100, "numeric_approximate", tid="legal-hard-2"),
        _task(["a", "b"], "list_exact", tid="wildfire-easy-1", domain="wildfire"),
        _task(3, "numeric_exact", tid="wildfire-hard-2", domain="wildfire"),
    ]
    preds = ["5", "90", '["a"]', None]  # 1, 1/1.1, F1 2/3, missing
    items = [(t, bench.score(t, p)) for t, p in zip(tasks, preds, strict=True)]
    totals = bench.totals(items)
    assert totals["accuracy"] == pytest.approx((1 + 1 / 1.1 + 2 / 3 + 0) / 4)
    assert totals["exact"] == pytest.approx(1 / 4)
    assert totals["domain:legal"] == pytest.approx((1 + 1 / 1.1) / 2)
    assert totals["domain:wildfire"] == pytest.approx((2 / 3) / 2)
    assert totals["answer_type:numeric_exact"] == pytest.approx(0.5)


def test_string_approximate_needs_a_judge_unless_rule_is_chosen() -> None:
    from datadojo.bench.base import BenchmarkError

    bench = get_benchmark("kramabench")
    judged = _task("the median rose", "string_approximate").model_copy(
        update={"extra": {"domain": "legal", "paraphrase": "judge"}}
    )
    assert bench.wants_verdict(judged)
    with pytest.raises(BenchmarkError, match="paraphrase=rule"):
        bench.score(judged, "it went up")
    ruled = _task("the median rose", "string_approximate")
    assert not bench.wants_verdict(ruled)
    assert bench.score(ruled, "The median rose").correct
    assert not bench.score(ruled, "it went up").correct  # a paraphrase only a judge would accept


def test_gold_answer_round_trips() -> None:
    from datadojo.bench.kramabench import gold_response

    bench = get_benchmark("kramabench")
    for answer, kind in [(8577.5298, "numeric_exact"), (["x", 2], "list_exact"), ("Yes", "string_exact")]:
        task = _task(answer, kind)
        assert json.loads(gold_response(task)) == {"answer": answer}
        assert bench.score(task, gold_response(task)).correct

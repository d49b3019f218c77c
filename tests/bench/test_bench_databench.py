"""DataBench: the official per-type comparison (upstream's own test cases) and real-data conformance."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from datadojo.bench import BenchmarkError, get_benchmark
from datadojo.bench.databench import databench_compare
from datadojo.types import Task

# The cases of databench_eval's tests/test_eval.py (jorses/databench_eval), which the official
# Evaluator.default_compare passes.
UPSTREAM_CASES: list[tuple[Any, Any, str, bool]] = [
    (True, "True", "boolean", True),
    ("[True]", "True", "boolean", True),
    (" True ", "True", "boolean", True),
    ("true", "yes", "boolean", True),
    ("False", "no", "boolean", True),
    ("True", "no", "boolean", False),
    (None, "True", "boolean", False),
    (" Barack Obama ", "Barack Obama", "category", True),
    ("T-rex", "T-rex", "category", True),
    ("", "", "category", True),
    (" ", "", "category", True),
    ("Different", "Strings", "category", False),
    (None, "String", "category", False),
    ("2016-12-22 00:00:00+00:00", "2016-12-22", "category", True),
    ("2016-12-22T00:00:00Z", "2016-12-22", "category", True),
    ("22/12/2016", "2016-12-22", "category", True),
    ("Dec 22, 2016", "2016-12-22", "category", True),
    ("2016-12-22", "2016-12-23", "category", False),
    ("Invalid Date", "2016-12-22", "category", False),
    ("2016-13-45", "2016-12-22", "category", False),
    ("123.45", 123.45, "number", True),
    ("$123.45", "123.45", "number", True),
    ("-123.45", "-123.45", "number", True),
    ("1.234", "1.23", "number", True),
    ("$1,234.56", "1234.56", "number", True),
    ("invalid", "123.45", "number", False),
    (None, "123.45", "number", False),
    ("['a', 'b', 'c']", "['c', 'b', 'a']", "list[category]", True),
    ("a,b,c", "c,b,a", "list[category]", True),
    ("[a, b, c]", "[c, b, a]", "list[category]", True),
    ("['a', 'b']", "['a', 'b', 'c']", "list[category]", False),
    ("invalid", "['a', 'b']", "list[category]", False),
    (None, "['a', 'b']", "list[category]", False),
    ("['2023-01-01', '2023-01-02']", "['2023-01-02', '2023-01-01']", "list[category]", True),
    (
        "['2023-01-01T00:00:00Z', '2023-01-02 00:00:00+00:00']",
        "['2023-01-02', '2023-01-01']",
        "list[category]",
        True,
    ),
    ("['2023-01-01']", "['2023-01-02']", "list[category]", False),
    (None, None, "category", True),
    (123, "123", "category", True),
    (123.45, "123.45", "number", True),
    ("[]", "[]", "list[category]", True),
]


@pytest.mark.parametrize(("value", "truth", "semantic", "expected"), UPSTREAM_CASES)
def test_upstream_cases(value: Any, truth: Any, semantic: str, expected: bool) -> None:
    assert databench_compare(value, truth, semantic) is expected


@pytest.mark.parametrize(
    ("value", "truth", "semantic", "expected"),
    [
        ("36.929", "36.92", "number", True),  # truncation, not rounding
        ("36.93", "36.92", "number", False),
        ("nan", "nan", "number", True),  # two missing values are equal …
        ("nan", "3", "number", False),  # … one is not
        ("[4, 3]", "[3, 4]", "list[number]", True),
        ("[4, 3, 3]", "[3, 4, 4]", "list[number]", True),  # same length, same set (official rule)
        ("[4, 3]", "[3, 4, 5]", "list[number]", False),
        ("[1.005, 2]", "[1.0, 2]", "list[number]", True),
        ("y", "True", "boolean", True),
        ("maybe", "True", "boolean", False),
    ],
)
def test_hand_checked_edges(value: Any, truth: Any, semantic: str, expected: bool) -> None:
    assert databench_compare(value, truth, semantic) is expected


def test_unknown_type() -> None:
    with pytest.raises(ValueError, match="unknown DataBench answer type"):
        databench_compare("a", "a", "text")


@pytest.fixture(scope="module")
def questions(shared_data: Callable[..., Path]) -> Path:
    return shared_data("databench", "questions.jsonl").parent


@pytest.mark.parametrize("lite", [False, True])
def test_gold_answers_score_100_percent(questions: Path, lite: bool) -> None:
    bench = get_benchmark("databench")
    tasks = list(bench.load(questions, require_files=False, lite=lite))
    raw = [json.loads(x) for x in (questions / "questions.jsonl").read_text().splitlines() if x.strip()]
    assert len(tasks) == len(raw)
    assert [t.answer for t in tasks] == [r["answer_lite" if lite else "answer"] for r in raw]
    assert all(bench.score(t, str(t.answer)).correct for t in tasks)


def test_perturbed_answers_fail(questions: Path) -> None:
    bench = get_benchmark("databench")
    tasks = list(bench.load(questions, require_files=False))
    flip = {"True": "False", "False": "True"}
    for t in tasks:
        kind = t.extra["type"]
        if kind == "boolean":
            wrong = flip[t.answer]
        elif kind == "number":
            wrong = str(float(t.answer) + 1)
        elif kind.startswith("list"):
            wrong = t.answer.rstrip("]") + ", 999999]" if t.answer != "[]" else "[1]"
        else:
            wrong = t.answer + " zzz"
        assert not bench.score(t, wrong).correct, (t.id, wrong)


def test_ids_are_stable_per_dataset_and_tables_are_checked(questions: Path) -> None:
    tasks = list(get_benchmark("databench").load(questions, require_files=False))
    first = tasks[0]
    assert first.id == f"{first.extra['dataset']}/0" and first.files[0].kind == "parquet"
    present = [t for t in tasks if Path(t.files[0].path).exists()]
    assert present, "some DataBench tables should be present"
    missing = [t for t in tasks if not Path(t.files[0].path).exists()]
    if missing:  # the shared copy holds a subset of the tables
        with pytest.raises(BenchmarkError, match="not found"):
            list(get_benchmark("databench").load(questions))


def test_missing_prediction_and_bad_records(tmp_path: Path) -> None:
    bench = get_benchmark("databench")
    t = Task(id="d/0", question="q", answer="True", extra={"type": "boolean"})
    assert bench.score(t, None).reason == "no prediction"
    (tmp_path / "questions.jsonl").write_text(
        '{"question": "q", "dataset": "d", "answer": "1", "type": "weird"}\n'
    )
    with pytest.raises(BenchmarkError, match=r"questions.jsonl:1: unknown answer type"):
        list(bench.load(tmp_path, require_files=False))

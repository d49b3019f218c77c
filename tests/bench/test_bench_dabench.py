"""DABench: the official @name[value] rule on real items, its accuracies, and hand-checked edge cases."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from datadojo.bench import BenchmarkError, get_benchmark
from datadojo.bench.dabench import extract_answers, gold_response, is_equal
from datadojo.types import Task


@pytest.fixture(scope="module")
def data(shared_data: Callable[..., Path]) -> Path:
    return shared_data("dabench", "da-dev-questions.jsonl").parent


@pytest.fixture(scope="module")
def tasks(data: Path) -> list[Task]:
    return list(get_benchmark("dabench").load(data))


def test_loads_the_official_layout(data: Path, tasks: list[Task]) -> None:
    labels = [json.loads(x) for x in (data / "da-dev-labels.jsonl").read_text().splitlines() if x.strip()]
    assert len(tasks) == len(labels)
    t = tasks[0]
    assert t.id == str(labels[0]["id"]) and t.answer == dict(labels[0]["common_answers"])
    assert t.files[0].kind == "csv" and Path(t.files[0].path).exists()
    assert "Constraints:" in t.question and "Format: @" in t.question
    assert t.source == "dabench" and t.difficulty in ("easy", "medium", "hard") and t.extra["concepts"]


def test_gold_answers_score_100_percent(tasks: list[Task]) -> None:
    bench = get_benchmark("dabench")
    items = [(t, bench.score(t, gold_response(t))) for t in tasks]
    assert all(s.correct for _, s in items), [s.reason for _, s in items if not s.correct][:3]
    totals = bench.totals(items)
    assert totals["accuracy"] == totals["accuracy_by_sub_question"] == 1.0


def test_perturbed_answers_fail(tasks: list[Task]) -> None:
    bench = get_benchmark("dabench")
    multi = next(t for t in tasks if len(t.answer) >= 2)
    names = list(multi.answer)
    wrong = " ".join(f"@{k}[{v}]" if k != names[-1] else f"@{k}[{v}x]" for k, v in multi.answer.items())
    s = bench.score(multi, wrong)
    assert (
        not s.correct
        and s.parts["sub"][names[-1]] is False
        and sum(s.parts["sub"].values()) == len(names) - 1
    )
    items = [(multi, s)]
    totals = bench.totals(items)
    assert totals["accuracy"] == 0.0
    assert totals["accuracy_proportional_by_sub_question"] == pytest.approx((len(names) - 1) / len(names))


def test_missing_and_empty_predictions(tasks: list[Task]) -> None:
    bench = get_benchmark("dabench")
    assert bench.score(tasks[0], None).reason == "no prediction"
    assert not bench.score(tasks[0], "").correct
    assert not bench.score(tasks[0], "The mean is 570.68").correct  # no @name[value]: nothing extracted


def test_three_official_accuracies_differ_as_documented() -> None:
    bench = get_benchmark("dabench")
    t1 = Task(
        id="1", question="q", answer={"a": "1", "b": "2"}, answer_kind="dabench", extra={"concepts": ["X"]}
    )
    t2 = Task(id="2", question="q", answer={"c": "3"}, answer_kind="dabench", extra={"concepts": ["X", "Y"]})
    items = [(t1, bench.score(t1, "@a[1] @b[0]")), (t2, bench.score(t2, "@c[3]"))]
    totals = bench.totals(items)
    assert totals["accuracy"] == 0.5  # by question: only t2
    assert totals["accuracy_proportional_by_sub_question"] == pytest.approx((0.5 + 1) / 2)
    assert totals["accuracy_by_sub_question"] == pytest.approx(2 / 3)
    assert totals["concept:X"] == 0.5 and totals["concept:Y"] == 1.0


@pytest.mark.parametrize(
    ("response", "label", "ok"),
    [
        ("570.68", "570.68", True),
        ("570.680", "570.68", True),  # floats equal
        ("570.6800004", "570.68", True),  # |diff| < 1e-6
        ("570.681", "570.68", False),  # rounding is not forgiven
        ("5.7068e2", "570.68", True),
        ("no", "no", True),
        ("No", "no", False),  # strings are compared exactly
        ("no ", "no", False),
        ("nan", "nan", True),  # equal strings, although NaN != NaN as floats
        (None, "1", False),
        ("", "", True),
    ],
)
def test_is_equal(response: str | None, label: str, ok: bool) -> None:
    assert is_equal(response, label) is ok


def test_extraction_rules() -> None:
    assert extract_answers("@a[1] text @b[x y] @a[2]") == {"a": "2", "b": "x y"}  # last repeat wins
    assert extract_answers("@a[[1, 2]]") == {"a": "[1, 2"}  # the official non-greedy regex
    assert extract_answers("@a-b[1] @ c[2]") == {}


def test_loader_errors_name_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "da-dev-questions.jsonl").write_text(
        '{"id": 1, "question": "q", "file_name": "x.csv"}\nnot json\n'
    )
    with pytest.raises(BenchmarkError, match=r"da-dev-questions.jsonl:2"):
        list(get_benchmark("dabench").load(tmp_path, require_files=False))
    (tmp_path / "da-dev-questions.jsonl").write_text('{"id": 1, "question": "q", "file_name": "x.csv"}\n')
    with pytest.raises(BenchmarkError, match=r"x.csv not found"):
        list(get_benchmark("dabench").load(tmp_path))
    (tmp_path / "da-dev-labels.jsonl").write_text('{"id": 1, "common_answers": "oops"}\n')
    with pytest.raises(BenchmarkError, match=r"da-dev-labels.jsonl:1"):
        list(get_benchmark("dabench").load(tmp_path, require_files=False))


def test_unlabelled_task_cannot_be_scored(tmp_path: Path) -> None:
    (tmp_path / "da-dev-questions.jsonl").write_text('{"id": 7, "question": "q", "file_name": "x.csv"}\n')
    (task,) = get_benchmark("dabench").load(tmp_path, require_files=False)
    assert task.answer is None
    with pytest.raises(ValueError, match="no labels"):
        get_benchmark("dabench").score(task, "@a[1]")

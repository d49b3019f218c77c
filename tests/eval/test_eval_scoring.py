"""Predictions files ({id, answer} and trajectories), trial averaging, missing and unknown ids, the registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datadojo.bench import Benchmark, get_benchmark, register_benchmark
from datadojo.bench.registry import benchmark_names
from datadojo.eval.scoring import Prediction, read_predictions, score_predictions
from datadojo.protocol.messages import messages_to_trajectory
from datadojo.types import Task


def _tasks() -> list[Task]:
    return [
        Task(
            id=str(i),
            question="q",
            answer={"x": str(i)},
            answer_kind="dabench",
            category="even" if i % 2 == 0 else "odd",
        )
        for i in range(4)
    ]


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_id_answer_records_with_auto_numbered_trials(tmp_path: Path) -> None:
    preds = read_predictions(
        _write(
            tmp_path / "p.jsonl",
            [{"id": 1, "answer": "a"}, {"id": "1", "answer": 2}, {"id": "2", "answer": None}],
        )
    )
    assert [(p.task_id, p.trial, p.answer) for p in preds] == [("1", 0, "a"), ("1", 1, "2"), ("2", 0, None)]
    preds = read_predictions(
        _write(tmp_path / "q.jsonl", [{"id": "1", "answer": [1, 2]}, {"id": "1", "answer": {"k": 1}}])
    )
    assert [p.answer for p in preds] == ["[1, 2]", '{"k": 1}']


def test_trajectories_are_predictions(tmp_path: Path) -> None:
    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "<think>x</think>\n<answer>@x[1]</answer>"},
    ]
    traj = messages_to_trajectory(msgs, task_id="1", sample=2)
    path = tmp_path / "t.jsonl"
    path.write_text(traj.to_json() + "\n" + json.dumps({"id": "3", "answer": "@x[3]"}) + "\n")
    preds = read_predictions(path)
    assert (preds[0].task_id, preds[0].trial, preds[0].answer, preds[0].turns, preds[0].finished) == (
        "1",
        2,
        "@x[1]",
        1,
        True,
    )
    assert preds[1].task_id == "3"


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([{"answer": "a"}], r"p.jsonl:1: missing 'id'"),
        ([{"id": "1"}], r"p.jsonl:1: missing 'answer'"),
        ([{"id": True, "answer": "a"}], "'id' must be"),
        ([{"id": "1", "answer": "a", "sample": -1}], "'sample' must be"),
        (
            [{"id": "1", "answer": "a", "sample": 0}, {"id": "1", "answer": "b", "sample": 0}],
            r"p.jsonl:2: .*already given on line 1",
        ),
        (
            [{"task_id": "1", "stop_reason": "bogus"}],
            r"p.jsonl:1: not a valid trajectory: field 'stop_reason'",
        ),
        ([[1, 2]], "expected a JSON object"),
        ([{"id": "1", "answer": "a", "note": "extra keys are ignored"}, {"id": "2", "answer": 3.5}], None),
    ],
)
def test_bad_prediction_files_name_the_line(tmp_path: Path, records: list, message: str | None) -> None:
    path = _write(tmp_path / "p.jsonl", records)
    if message is None:
        assert len(read_predictions(path)) == 2
        return
    with pytest.raises(ValueError, match=message):
        read_predictions(path)


def test_missing_file() -> None:
    with pytest.raises(FileNotFoundError):
        read_predictions("/nonexistent/p.jsonl")


def test_trials_are_averaged_and_pass_at_k_reported() -> None:
    bench = get_benchmark("dabench")
    preds = [
        Prediction("0", "@x[0]", 0), Prediction("0", "@x[9]", 1), Prediction("0", "@x[0]", 2),
        Prediction("1", "@x[9]", 0), Prediction("1", "@x[9]", 1), Prediction("1", "@x[1]", 2),
        Prediction("2", "@x[2]", 0), Prediction("2", "@x[2]", 1), Prediction("2", "@x[2]", 2),
        # task 3 has no prediction at all; "zz" is not a task
        Prediction("zz", "@x[1]", 0),
    ]  # fmt: skip
    rep = score_predictions(bench, _tasks(), preds)
    assert rep.n_trials == 3 and rep.missing_ids == ["3"] and rep.unknown_ids == ["zz"]
    assert len(rep.items) == 4 * 3
    # trial accuracies: t0 = 2/4 (tasks 0, 2), t1 = 1/4, t2 = 3/4 → mean 0.5
    assert rep.totals["accuracy"] == pytest.approx(0.5)
    s = rep.summary
    assert s.pass_at_1 == pytest.approx((2 / 3 + 1 / 3 + 1 + 0) / 4)
    assert s.any_of_n == pytest.approx(3 / 4) and s.pass_at_k[3] == pytest.approx(3 / 4)
    assert set(s.per_category) == {"even", "odd"}
    assert s.per_category["even"].any_of_n == 1.0  # tasks 0 and 2 were each right at least once
    assert s.per_category["odd"].any_of_n == 0.5  # task 1 once, task 3 never (no prediction)
    assert s.success_rate == pytest.approx(9 / 12)  # predictions without trajectories count as finished


class _Toy(Benchmark):
    name = "toy"

    def load(self, path, *, require_files=True, **options):  # type: ignore[no-untyped-def]
        yield Task(id="1", question="q", answer="a")

    def score(self, task, prediction):  # type: ignore[no-untyped-def]
        from datadojo.bench.base import ItemScore

        ok = prediction == task.answer
        return ItemScore(float(ok), ok, prediction, "toy", "EM")


def test_registry() -> None:
    assert {"dabench", "tablebench", "databench", "spider", "bird", "qrdata"} <= set(benchmark_names())
    assert get_benchmark("DABench") is get_benchmark("dabench")
    with pytest.raises(KeyError, match="unknown benchmark 'nope'"):
        get_benchmark("nope")
    with pytest.raises(ValueError, match="already registered"):
        register_benchmark("dabench", _Toy)
    register_benchmark("toy-test", _Toy, replace=True)
    rep = score_predictions(
        get_benchmark("toy-test"), get_benchmark("toy-test").load("."), [Prediction("1", "a")]
    )
    assert rep.totals == {"accuracy": 1.0, "exact": 1.0}


def test_no_tasks_is_an_error() -> None:
    with pytest.raises(ValueError, match="no tasks"):
        score_predictions(get_benchmark("dabench"), [], [])

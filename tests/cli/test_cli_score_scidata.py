"""`datadojo score scidata`: the QA track is scored by the scientific matcher without a judge; Meta needs one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.cli.app import app


def _task(tid: str, track: str, answer: str) -> dict:
    return {
        "id": tid, "question": f"question {tid}", "files": [{"path": "repo", "kind": "dir"}], "answer": answer,
        "answer_kind": f"sailor_{track}", "source": "scidata", "category": track, "difficulty": "L1",
        "extra": {"track": track, "seed_id": "s", "intent": "i"},
    }  # fmt: skip


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    qa = [_task("mean", "qa", "2.89 mg/L"), _task("temp", "qa", "25 °C"), _task("habitat", "qa", "meadow, 2.89 mg/L"),
          _task("count", "qa", "8 sequences of 120 bases each")]  # fmt: skip
    meta = [_task("map", "meta", "A CSV table and a README.")]
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(t) + "\n" for t in qa), encoding="utf-8")
    (tmp_path / "meta.jsonl").write_text("".join(json.dumps(t) + "\n" for t in meta), encoding="utf-8")
    preds = [
        {"id": "mean", "answer": "The mean is 2890 µg/L"},  # converted: right
        {"id": "temp", "answer": "25 K"},  # wrong unit
        {"id": "habitat", "answer": "Forest, 2.89 mg/L"},  # wrong entity
        {"id": "count", "answer": "8 sequences, each 120 bases long"},
        {"id": "map", "answer": "a table"},
    ]
    (tmp_path / "preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds), encoding="utf-8")
    return tmp_path


def _score(bench: Path, *options: str) -> object:
    args = ["score", "scidata", "--data", str(bench), "-p", str(bench / "preds.jsonl"), "--json"]
    for opt in options:
        args += ["--option", opt]
    return CliRunner().invoke(app, args)


def test_qa_scored_by_rule_without_a_judge(bench: Path) -> None:
    res = _score(bench, "track=qa")
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    items = {i["id"]: i for i in report["items"]}
    assert {k: v["correct"] for k, v in items.items()} == {"mean": True, "temp": False, "habitat": False,
                                                           "count": True}  # fmt: skip
    assert "incompatible" not in items["temp"]["reason"] and "not matched" in items["temp"]["reason"]
    assert "'meadow'" in items["habitat"]["reason"]
    assert all(i["parts"]["decided_by"] == "rule" and i["metric"] == "sailor_qa/rule" for i in items.values())
    assert report["totals"]["accuracy"] == 0.5 and report["totals"]["qa_rule"] == 0.5
    assert report["totals"]["judge_errors"] == 0


def test_tolerance_option(bench: Path) -> None:
    (bench / "preds.jsonl").write_text(json.dumps({"id": "mean", "answer": "2.95 mg/L"}) + "\n")
    strict = json.loads(_score(bench, "track=qa").stdout)
    loose = json.loads(_score(bench, "track=qa", "qa_rel_tol=0.03").stdout)
    assert [i["correct"] for i in strict["items"] if i["id"] == "mean"] == [False]
    assert [i["correct"] for i in loose["items"] if i["id"] == "mean"] == [True]


def test_meta_and_judged_qa_need_a_judge(bench: Path) -> None:
    res = _score(bench)
    assert res.exit_code == 2
    assert "Meta task" in res.output and "track=qa" in res.output
    res = _score(bench, "track=qa", "qa_scoring=rule+judge")
    assert res.exit_code == 2 and "qa_scoring=rule" in res.output
    res = _score(bench, "qa_scoring=vote")
    assert res.exit_code == 2 and "qa_scoring must be one of" in res.output


def test_table_output(bench: Path) -> None:
    res = CliRunner().invoke(app, ["score", "scidata", "--data", str(bench), "-p", str(bench / "preds.jsonl"),
                                   "--option", "track=qa"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "qa_rule" in res.output and "50.00%" in res.output


def test_meta_without_a_prediction_still_needs_a_judge(bench: Path) -> None:
    preds = [line for line in (bench / "preds.jsonl").read_text().splitlines() if '"map"' not in line]
    (bench / "preds.jsonl").write_text("\n".join(preds) + "\n")
    res = _score(bench)
    assert res.exit_code == 2 and "Meta task" in res.output

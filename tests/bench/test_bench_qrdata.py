"""QRData: the official ±3% (open interval) and multiple-choice prefix rules, and the official layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datadojo.bench import BenchmarkError, get_benchmark
from datadojo.bench.qrdata import qrdata_correct


@pytest.mark.parametrize(
    ("pred", "gold", "ok"),
    [
        ("0.20", "0.20", True),
        ("The proportion is 0.205", "0.20", True),  # the first number in the prediction
        ("102.9", "100", True),
        ("103", "100", False),  # exactly +3%: the interval is open
        ("97", "100", False),
        ("0.1941", "0.20", True),
        ("0.19", "0.20", False),  # −5%
        ("20%", "0.20", True),  # percent on the prediction side
        ("0.2", "20%", True),  # and on the reference side
        ("-1.02", "-1", True),  # bounds swapped for negative references
        ("-1.04", "-1", False),
        ("0", "0", False),  # a zero reference can never be matched (strict interval)
        ("roughly twenty", "0.20", False),
        ("In 2019 it was 0.2", "0.20", False),  # first number wins, as in the original
    ],
)
def test_numerical(pred: str, gold: str, ok: bool) -> None:
    assert qrdata_correct(pred, gold, "numerical") is ok


@pytest.mark.parametrize(
    ("pred", "gold", "ok"),
    [
        ("treatment group", "treatment group", True),
        ("Treatment group, because the rate is higher", "treatment group", True),  # prefix rule
        ("\n treatment group", "treatment group", True),  # surrounding whitespace stripped
        ("The treatment group", "treatment group", False),
        ("control group", "treatment group", False),
    ],
)
def test_multiple_choice(pred: str, gold: str, ok: bool) -> None:
    assert qrdata_correct(pred, gold, "multiple_choice") is ok


def test_loader_and_scoring_on_the_official_layout(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "stent365.csv").write_text("group,outcome\ntreatment,stroke\n")
    records = [
        {"data_description": "Stents.", "question": "Proportion?", "answer": "0.20", "data_files": ["stent365.csv"],
         "meta_data": {"reference": "OpenIntro 1.1", "keywords": ["Statistics"], "question_type": "numerical"}},
        {"data_description": "Stents.", "question": "Which group?", "answer": "treatment group",
         "data_files": ["stent365.csv"],
         "meta_data": {"question_type": "multiple_choice", "multiple_choices": ["treatment group", "control group"]}},
    ]  # fmt: skip
    (tmp_path / "QRData.json").write_text(json.dumps(records))
    bench = get_benchmark("qrdata")
    tasks = list(bench.load(tmp_path))
    assert [t.id for t in tasks] == ["qrdata-0", "qrdata-1"]
    assert tasks[0].description == "Stents." and tasks[0].files[0].kind == "csv"
    assert tasks[1].extra["multiple_choices"] == ["treatment group", "control group"]
    assert all(bench.score(t, str(t.answer)).correct for t in tasks)
    assert not bench.score(tasks[0], "0.3").correct and bench.score(tasks[0], None).reason == "no prediction"


def test_loader_errors(tmp_path: Path) -> None:
    (tmp_path / "QRData.json").write_text(
        json.dumps([{"question": "q", "answer": "x", "meta_data": {"question_type": "numerical"}}])
    )
    with pytest.raises(BenchmarkError, match="record 0: numerical answer 'x' is not a number"):
        list(get_benchmark("qrdata").load(tmp_path))
    (tmp_path / "QRData.json").write_text(
        json.dumps(
            [
                {
                    "question": "q",
                    "answer": "1",
                    "data_files": ["a.csv"],
                    "meta_data": {"question_type": "numerical"},
                }
            ]
        )
    )
    with pytest.raises(BenchmarkError, match=r"a\.csv not found"):
        list(get_benchmark("qrdata").load(tmp_path))

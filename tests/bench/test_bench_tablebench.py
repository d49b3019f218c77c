"""TableBench: real items score 100% against themselves; hand-checked ``readme``-rule EM / EM_with_error_10 /
ROUGE-L cases (the ``official`` rule's cases are in test_conformance_tablebench.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from datadojo.bench import BenchmarkError, get_benchmark
from datadojo.bench.tablebench import em_score, em_with_tolerance, metric_for, parse_final_answer
from datadojo.types import Task


@pytest.fixture(scope="module")
def data(shared_data: Callable[..., Path]) -> Path:
    return shared_data("tablebench", "TableBench.jsonl").parent


@pytest.fixture(scope="module")
def tasks(data: Path) -> list[Task]:
    return list(get_benchmark("tablebench").load(data))


def test_loader_skips_visualization_and_keeps_every_other_item(data: Path, tasks: list[Task]) -> None:
    raw = [json.loads(x) for x in (data / "TableBench.jsonl").read_text().splitlines() if x.strip()]
    expected = [r for r in raw if r["qtype"] != "Visualization"]
    assert len(tasks) == len(expected)
    assert len({t.id for t in tasks}) == len(tasks)  # a repeated id got a suffix
    assert {t.category for t in tasks} == {"FactChecking", "NumericalReasoning", "DataAnalysis"}


def test_gold_answers_score_100_percent(tasks: list[Task]) -> None:
    bench = get_benchmark("tablebench")
    items = [(t, bench.score(t, f"Final Answer: {t.answer}")) for t in tasks]
    assert all(s.correct for _, s in items), [(t.id, s.reason) for t, s in items if not s.correct][:3]
    assert bench.totals(items)["accuracy"] == 1.0
    assert {s.metric for _, s in items} == {"EM", "EM_with_error_10", "ROUGE-L"}


def test_perturbed_answers_lose_credit(tasks: list[Task]) -> None:
    bench = get_benchmark("tablebench")
    for subtype, metric in (("Counting", "EM"), ("StatisticalAnalysis", "EM_with_error_10")):
        t = next(t for t in tasks if t.extra["qsubtype"] == subtype and t.answer.replace(".", "").isdigit())
        wrong = str(float(t.answer) * 2 + 7)
        s = bench.score(t, wrong)
        assert s.metric == metric and not s.correct and s.score == 0.0
    t = next(t for t in tasks if metric_for(t.extra["qtype"], t.extra["qsubtype"]) == "ROUGE-L")
    s = bench.score(t, "completely unrelated words")
    assert s.metric == "ROUGE-L" and s.score < 0.3


@pytest.mark.parametrize(
    ("pred", "ref", "credit"),
    [
        ("51.44", "51.44", 1.0),
        ("51.4367", "51.44", 1.0),  # rounded to the reference's 2 decimals
        ("51.4", "51.44", 0.0),
        ("51.440", "51.44", 1.0),
        ("115.70", "115.7", 1.0),
        ("1,542,000", "1542000", 1.0),  # thousands separators are not list separators
        ("69.75%", "69.75%", 1.0),
        ("0.6975", "69.75%", 1.0),  # official normalize_number: 69.75% = 0.6975
        ("-0.03", "0.03", 0.0),  # the sign counts
        ("new york city, 1542000", "new york city, 1542000", 1.0),
        ("New York City, 1542000", "new york city, 1542000", 1.0),  # text elements normalized
        ("new york city, 1541999", "new york city, 1542000", 0.5),  # per-element credit
        ("new york city", "new york city, 1542000", 0.5),
        ("1542000, new york city", "new york city, 1542000", 0.0),  # positional
        ("the Bulgaria", "Bulgaria", 1.0),  # articles dropped
        ("", "12", 0.0),
        ("abc", "12", 0.0),
        ("No correlation, -0.15.", "No correlation, -0.15", 1.0),  # trailing punctuation after a number
        ("12!", "12", 1.0),
    ],
)
def test_em(pred: str, ref: str, credit: float) -> None:
    assert em_score(pred, ref) == pytest.approx(credit)


@pytest.mark.parametrize(
    ("pred", "ref", "credit"),
    [
        ("Weak positive correlation, 0.40", "Weak positive correlation, 0.42", 1.0),  # within 10%
        ("Weak positive correlation, 0.37", "Weak positive correlation, 0.42", 0.5),  # 11.9% off
        ("Strong positive correlation, 0.42", "Weak positive correlation, 0.42", 0.5),
        ("110", "100", 1.0),  # exactly 10%
        ("110.1", "100", 0.0),
        ("0", "0", 1.0),
        ("0.001", "0", 0.0),  # a zero reference needs an exact zero
        ("12%", "12.59%", 1.0),
        ("Weak positive correlation, 0.40.", "Weak positive correlation, 0.42", 1.0),
    ],
)
def test_em_with_error_10(pred: str, ref: str, credit: float) -> None:
    assert em_with_tolerance(pred, ref) == pytest.approx(credit)


def test_final_answer_parsing() -> None:
    assert parse_final_answer("Reasoning...\nFinal Answer: 12, 13\nmore") == "12, 13"
    assert parse_final_answer("  12  ") == "12"  # no marker: the whole answer (our agents' <answer> text)


def test_metric_per_subtype() -> None:
    assert metric_for("FactChecking", "MatchBased") == "EM"
    assert metric_for("NumericalReasoning", "Counting") == "EM"
    assert metric_for("DataAnalysis", "ImpactAnalysis") == "EM"
    assert metric_for("DataAnalysis", "TrendForecasting") == "EM_with_error_10"
    assert metric_for("DataAnalysis", "DescriptiveAnalysis") == "ROUGE-L"


def test_rouge_items_get_partial_credit_and_totals_group_by_type() -> None:
    bench = get_benchmark("tablebench")
    t = Task(
        id="x",
        question="q",
        answer="the sales rise steadily",
        extra={"qtype": "DataAnalysis", "qsubtype": "TrendAnalysis"},
    )
    s = bench.score(t, "Final Answer: sales rise")
    assert 0 < s.score < 1 and not s.correct
    assert bench.with_rule("readme").score(t, "sales rise").score == s.score  # readme: no marker needed
    totals = bench.totals([(t, s)])
    assert totals["DataAnalysis"] == totals["DataAnalysis/TrendAnalysis"] == s.score


def test_tables_dir_writes_csv_files(tmp_path: Path) -> None:
    src = tmp_path / "TableBench.jsonl"
    rec = {"id": "a/b", "qtype": "NumericalReasoning", "qsubtype": "Counting", "question": "How many?",
           "answer": "2", "table": {"columns": ["x", "y"], "data": [[1, "p"], [2, "q"]]}}  # fmt: skip
    viz = {**rec, "id": "v", "qtype": "Visualization", "qsubtype": "ChartGeneration"}
    src.write_text(json.dumps(rec) + "\n" + json.dumps(viz) + "\n" + json.dumps(rec) + "\n")
    out = tmp_path / "tables"
    tasks = list(get_benchmark("tablebench").load(src, tables_dir=out))
    assert [t.id for t in tasks] == ["a/b", "a/b~2"]
    frame = pd.read_csv(tasks[0].files[0].path)
    assert list(frame.columns) == ["x", "y"] and frame["x"].tolist() == [1, 2]
    assert tasks[0].files[0].visible_name == "table.csv"
    assert not list(out.glob(".*.tmp"))
    first = Path(tasks[0].files[0].path).stat().st_mtime_ns
    list(get_benchmark("tablebench").load(src, tables_dir=out))  # unchanged content is not rewritten
    assert Path(tasks[0].files[0].path).stat().st_mtime_ns == first


def test_loader_errors(tmp_path: Path) -> None:
    src = tmp_path / "TableBench.jsonl"
    src.write_text('{"id": "1", "qtype": "FactChecking"}\n')
    with pytest.raises(BenchmarkError, match=r"TableBench.jsonl:1: missing field 'qsubtype'"):
        list(get_benchmark("tablebench").load(src))
    with pytest.raises(BenchmarkError, match="not found"):
        list(get_benchmark("tablebench").load(tmp_path / "nope"))
    with pytest.raises(TypeError, match="unknown option"):
        list(get_benchmark("tablebench").load(src, lite=True))

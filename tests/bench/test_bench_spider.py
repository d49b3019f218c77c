"""Spider / BIRD execution accuracy: gold vs gold on every real dev record, and hand-checked edge cases."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from datadojo.bench import BenchmarkError, get_benchmark
from datadojo.bench.spider import BIRD, Spider, extract_sql
from datadojo.types import DataFile, Task


@pytest.fixture(scope="module")
def data(shared_data: Callable[..., Path]) -> Path:
    return shared_data("spider", "dev.json").parent


@pytest.fixture(scope="module")
def spider_tasks(data: Path) -> list[Task]:
    return list(get_benchmark("spider").load(data))


def test_gold_sql_scores_100_percent_on_all_dev_records(data: Path, spider_tasks: list[Task]) -> None:
    bench = Spider()
    records = json.loads((data / "dev.json").read_text())
    assert len(spider_tasks) == len(records)
    items = [(t, bench.score(t, t.answer)) for t in spider_tasks]
    bad = [(t.id, s.reason) for t, s in items if not s.correct]
    assert not bad, bad[:5]
    totals = bench.totals(items)
    assert totals["accuracy"] == 1.0 and totals["table_match"] == 1.0 and totals["gold_errors"] == 0


def test_perturbed_sql_fails(spider_tasks: list[Task]) -> None:
    bench = Spider()
    count = next(t for t in spider_tasks if t.answer.upper().startswith("SELECT COUNT(*)"))
    s = bench.score(
        count, count.answer.replace("count(*)", "count(*) + 1").replace("COUNT(*)", "COUNT(*) + 1")
    )
    assert not s.correct and s.parts["table_match"] is False
    s = bench.score(count, "SELEC nonsense")
    assert not s.correct and "failed" in s.reason


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, price REAL, cat TEXT);
        INSERT INTO item VALUES (1,'apple',1.0,'fruit'),(2,'pear',2.5,'fruit'),(3,'kale',3.0,'veg'),(4,'leek',3.0,'veg');
        """
    )
    con.commit()
    con.close()
    return path


def _task(db: Path, gold: str) -> Task:
    return Task(
        id="t", question="q", files=[DataFile(path=str(db), kind="sqlite")], answer=gold, answer_kind="sql"
    )


def test_set_rule_compares_rows_as_sets(db: Path) -> None:
    bench = Spider().with_rule("set")
    assert bench.rule.name == "set" and Spider().rule.name == "test-suite"
    t = _task(db, "SELECT name FROM item WHERE cat = 'veg' ORDER BY name")
    assert bench.score(
        t, "SELECT name FROM item WHERE cat = 'veg' ORDER BY name DESC"
    ).correct  # order ignored
    assert bench.score(
        t, "SELECT name FROM item WHERE price = 3 UNION ALL SELECT 'kale'"
    ).correct  # duplicates too
    assert not bench.score(t, "SELECT name, cat FROM item WHERE cat = 'veg'").correct  # rows are whole tuples
    assert not bench.score(t, "SELECT name FROM item WHERE cat = 'veg' LIMIT 1").correct
    # values compare exactly under EX; DataMind's table comparison tolerates 1e-2
    p = _task(db, "SELECT avg(price) FROM item")
    s = bench.score(p, "SELECT round(avg(price), 3) + 0.001 FROM item")
    assert not s.correct and s.parts["table_match"] is True
    # table comparison: every gold column somewhere among the predicted ones
    s = bench.score(t, "SELECT cat, name FROM item WHERE cat = 'veg'")
    assert not s.correct and s.parts["table_match"] is True


def test_errors_refusals_and_timeouts_score_zero(db: Path) -> None:
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    t = _task(db, "SELECT count(*) FROM item")
    for bad in ("DELETE FROM item", "DROP TABLE item", "SELECT * FROM nope", "SELECT 1; SELECT 2", ""):
        s = Spider().score(t, bad)
        assert not s.correct and s.score == 0.0, bad
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before  # read-only
    slow = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    s = Spider(timeout_s=0.3).score(t, slow)
    assert not s.correct and "did not finish" in s.reason
    s = Spider(max_rows=2).score(_task(db, "SELECT 1"), "SELECT * FROM item")
    assert not s.correct and "more than the limit" in s.reason


def test_gold_failure_is_reported_not_hidden(db: Path) -> None:
    s = Spider().score(_task(db, "SELECT * FROM missing_table"), "SELECT 1")
    assert not s.correct and "gold SQL failed" in s.reason and s.parts["gold_error"]


def test_missing_prediction_and_fences(db: Path) -> None:
    t = _task(db, "SELECT count(*) FROM item")
    assert Spider().score(t, None).reason == "no prediction"
    assert Spider().score(t, "Here:\n```sql\nSELECT 4\n```").correct
    assert extract_sql("```sql\nSELECT 1\n```\ntext\n```SELECT 2```") == "SELECT 2"
    assert extract_sql("  SELECT 3;  ") == "SELECT 3;"


def test_bird_loader_official_layout(tmp_path: Path, db: Path) -> None:
    dbdir = tmp_path / "dev_databases" / "shop"
    dbdir.mkdir(parents=True)
    (dbdir / "shop.sqlite").write_bytes(db.read_bytes())
    records = [
        {"question_id": 0, "db_id": "shop", "question": "How many items?", "evidence": "items are rows of item",
         "SQL": "SELECT count(*) FROM item", "difficulty": "simple"},
        {"question_id": 1, "db_id": "shop", "question": "Cheapest?", "evidence": "",
         "SQL": "SELECT name FROM item ORDER BY price LIMIT 1", "difficulty": "moderate"},
    ]  # fmt: skip
    (tmp_path / "dev.json").write_text(json.dumps(records))
    bench = get_benchmark("bird")
    tasks = list(bench.load(tmp_path))
    assert [t.id for t in tasks] == ["bird-0", "bird-1"]
    assert (
        "External knowledge: items are rows of item" in tasks[0].question and tasks[1].question == "Cheapest?"
    )
    assert [t.category for t in tasks] == ["simple", "moderate"]
    assert all(bench.score(t, t.answer).correct for t in tasks)
    assert not bench.score(tasks[1], "SELECT name FROM item ORDER BY price DESC LIMIT 1").correct
    assert isinstance(bench, BIRD)


def test_loader_errors(tmp_path: Path) -> None:
    (tmp_path / "dev.json").write_text(json.dumps([{"db_id": "x", "question": "q", "query": "SELECT 1"}]))
    with pytest.raises(BenchmarkError, match="database 'x' not found"):
        list(get_benchmark("spider").load(tmp_path))
    assert [t.id for t in get_benchmark("spider").load(tmp_path, require_files=False)] == ["dev-0"]
    (tmp_path / "dev.json").write_text(json.dumps([{"db_id": "x"}]))
    with pytest.raises(BenchmarkError, match="record 0: missing field 'question'"):
        list(get_benchmark("spider").load(tmp_path, require_files=False))
    (tmp_path / "dev.json").write_text("{not json")
    with pytest.raises(BenchmarkError, match="cannot read JSON"):
        list(get_benchmark("bird").load(tmp_path, require_files=False))

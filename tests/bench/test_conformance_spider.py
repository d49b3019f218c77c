"""Spider EX conformance with test-suite-sql-eval (``exec_eval.py``: ``eval_exec_match`` / ``result_eq``),
and BIRD's with its ``evaluation.py`` (``set(predicted_res) == set(ground_truth_res)``).

Every expected verdict below was worked out by reading the reference code, not by running DataDojo:

* ``result_eq(gold, pred, order_matters)``: two empty results are equal; different row counts or widths
  are not; a quick check compares each row's cells sorted by ``str(x) + str(type(x))`` (as a list when
  order matters, else as a set); then some column permutation must make the rows equal as a list
  (order matters) or as a multiset;
* ``eval_exec_match``: ``'> ='`` → ``'>='`` (and ``<``, ``!``), every ``distinct`` token removed from both
  queries (``keep_distinct`` defaults to False), order matters when ``'order by' in gold.lower()``,
  ``YEAR(CURDATE())`` → 2020, a failing prediction is wrong.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datadojo.bench import get_benchmark
from datadojo.bench.spider import Spider, clean_sql_like_test_suite, order_matters, remove_distinct
from datadojo.compare.tables import denotations_equal
from datadojo.types import DataFile, Task

# (gold rows, predicted rows, order matters, verdict of result_eq)
CASES: list[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], bool, bool]] = [
    ([], [], False, True),
    ([], [], True, True),
    ([(1,)], [], False, False),
    ([], [(1,)], False, False),
    ([(1,), (2,)], [(2,), (1,)], False, True),  # row order ignored without ORDER BY
    ([(1,), (2,)], [(2,), (1,)], True, False),  # ... and checked with it
    ([(1, "a"), (2, "b")], [("a", 1), ("b", 2)], False, True),  # columns in another order
    ([(1, "a"), (2, "b")], [("a", 1), ("b", 2)], True, True),
    ([(1,)], [(1, 1)], False, False),  # a duplicated column
    ([(1, 2)], [(1,)], False, False),  # a missing column
    ([(1,), (1,), (2,)], [(1,), (2,), (2,)], False, False),  # multisets, not sets
    ([(1,), (2,)], [(1,), (2,), (2,)], False, False),  # an extra row repeating an existing one
    ([(1,)], [(1.0,)], False, True),  # Python equality: 1 == 1.0
    ([("1",)], [(1,)], False, False),
    ([(None,)], [(None,)], False, True),
    ([(2, 2.5)], [(2.0, 2.5)], False, False),  # the quick check sorts '2<int>' after '2.5<float>'
    ([(1, "a"), (2, "b")], [(1, "b"), (2, "a")], False, False),  # columns match, rows do not
    ([(1, 2, 3, 4), (5, 6, 7, 8)], [(4, 3, 2, 1), (8, 7, 6, 5)], True, True),  # > 3 columns
    ([(1, 0), (0, 1)], [(0, 1), (1, 0)], True, True),  # order kept once the columns are swapped
    ([(1, 0), (0, 2)], [(0, 1), (2, 0)], True, True),
    ([(1, 0), (0, 2)], [(2, 0), (0, 1)], True, False),
]


@pytest.mark.parametrize(("gold", "pred", "ordered", "verdict"), CASES)
def test_result_eq_cases(gold: list[tuple], pred: list[tuple], ordered: bool, verdict: bool) -> None:
    assert denotations_equal(gold, pred, order_matters=ordered) is verdict


def _reference_definition(gold: list[tuple], pred: list[tuple], ordered: bool) -> bool:
    """result_eq restated from its definition, by brute force over every column permutation (test oracle)."""
    if not gold and not pred:
        return True
    if len(gold) != len(pred) or len(gold[0]) != len(pred[0]):
        return False

    def quick(rows: list[tuple]) -> list[tuple]:
        return [tuple(sorted(r, key=lambda x: str(x) + str(type(x)))) for r in rows]

    if (quick(gold) != quick(pred)) if ordered else (set(quick(gold)) != set(quick(pred))):
        return False
    for perm in itertools.permutations(range(len(gold[0]))):
        moved = [tuple(r[j] for j in perm) for r in pred]
        if (moved == gold) if ordered else (Counter(moved) == Counter(gold)):
            return True
    return False


_cell = st.sampled_from([0, 1, 1.0, 2, 2.5, "a", "b", None])


@st.composite
def _tables(draw: st.DrawFn) -> tuple[list[tuple], list[tuple]]:
    width = draw(st.integers(1, 4))
    n = draw(st.integers(0, 4))
    gold = [tuple(draw(_cell) for _ in range(width)) for _ in range(n)]
    if draw(st.booleans()) and gold:  # a permuted / shuffled copy, often equal
        perm = draw(st.permutations(range(width)))
        pred = [tuple(r[j] for j in perm) for r in draw(st.permutations(gold))]
    else:
        w2 = draw(st.sampled_from([width, width, width + 1]))
        pred = [tuple(draw(_cell) for _ in range(w2)) for _ in range(draw(st.integers(0, 4)))]
    return gold, pred


@settings(max_examples=300, deadline=None)
@given(_tables(), st.booleans())
def test_result_eq_agrees_with_its_definition(tables: tuple[list[tuple], list[tuple]], ordered: bool) -> None:
    gold, pred = tables
    assert denotations_equal(gold, pred, order_matters=ordered) is _reference_definition(gold, pred, ordered)


def test_query_clean_up_as_the_reference() -> None:
    assert remove_distinct("SELECT DISTINCT a FROM t") == "SELECT  a FROM t"
    assert remove_distinct("select count(distinct a) from t") == "select count( a) from t"
    assert (
        remove_distinct("SELECT 'distinct', \"distinct\" FROM t") == "SELECT 'distinct', \"distinct\" FROM t"
    )
    assert remove_distinct("SELECT distinct_name FROM t") == "SELECT distinct_name FROM t"
    assert clean_sql_like_test_suite("SELECT a FROM t WHERE b > = 2 AND c ! = 3") == (
        "SELECT a FROM t WHERE b >= 2 AND c != 3"
    )
    assert clean_sql_like_test_suite("SELECT YEAR(CURDATE()) - born FROM p") == "SELECT 2020- born FROM p"
    assert (
        clean_sql_like_test_suite("SELECT DISTINCT a FROM t", keep_distinct=True)
        == "SELECT DISTINCT a FROM t"
    )
    assert order_matters("SELECT a FROM t ORDER BY a")
    assert not order_matters("SELECT a FROM t ORDER  BY a")  # the reference tests the literal 'order by'


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, price REAL, cat TEXT);
        INSERT INTO item VALUES (1,'apple',1.0,'fruit'),(2,'pear',2.5,'fruit'),(3,'kale',3.0,'veg'),
                                (4,'leek',3.5,'veg');
        """
    )
    con.commit()
    con.close()
    return path


# (gold SQL, predicted SQL, verdict under test-suite, verdict under set)
SQL_CASES = [
    ("SELECT name FROM item ORDER BY price DESC", "SELECT name FROM item", False, True),  # dropped ORDER BY
    ("SELECT name FROM item ORDER BY price DESC", "SELECT name FROM item ORDER BY price", False, True),
    ("SELECT name FROM item", "SELECT name FROM item ORDER BY price DESC", True, True),
    # a wrong literal whose extra row repeats an existing row
    ("SELECT cat FROM item WHERE name IN ('apple', 'kale')",
     "SELECT cat FROM item WHERE name IN ('apple', 'kale', 'leek')", False, True),
    ("SELECT name, price FROM item", "SELECT price, name FROM item", True, False),  # columns reordered
    ("SELECT name FROM item", "SELECT name, name FROM item", False, False),  # a duplicated column
    ("SELECT DISTINCT cat FROM item", "SELECT cat FROM item", True, True),  # DISTINCT removed on both
    ("SELECT count(DISTINCT cat) FROM item", "SELECT count(cat) FROM item", True, False),
    ("SELECT count(*) FROM item", "SELECT count(1) AS n FROM item", True, True),  # no parser to trip up
    ("SELECT name FROM item WHERE price >= 3", "SELECT name FROM item WHERE price > = 3", True, False),
    ("SELECT name FROM item ORDER\nBY price", "SELECT name FROM item ORDER BY price DESC", True, True),
    ("SELECT name FROM item", "SELECT nme FROM item", False, False),  # an error is wrong
]  # fmt: skip


@pytest.mark.parametrize(("gold", "pred", "suite", "as_set"), SQL_CASES)
def test_sql_verdicts(db: Path, gold: str, pred: str, suite: bool, as_set: bool) -> None:
    task = Task(
        id="t", question="q", files=[DataFile(path=str(db), kind="sqlite")], answer=gold, answer_kind="sql"
    )
    assert Spider().score(task, pred).correct is suite
    assert Spider().with_rule("set").score(task, pred).correct is as_set


def test_keep_distinct_setting(db: Path) -> None:
    task = Task(id="t", question="q", files=[DataFile(path=str(db), kind="sqlite")],
                answer="SELECT DISTINCT cat FROM item", answer_kind="sql")  # fmt: skip
    assert Spider().score(task, "SELECT cat FROM item").correct
    assert not Spider(keep_distinct=True).score(task, "SELECT cat FROM item").correct


# BIRD's evaluation.py: ``res = 1 if set(predicted_res) == set(ground_truth_res) else 0`` (rows as tuples)
BIRD_CASES = [
    ("SELECT name FROM item ORDER BY price DESC", "SELECT name FROM item", True),  # order ignored
    ("SELECT cat FROM item", "SELECT DISTINCT cat FROM item", True),  # duplicates ignored
    ("SELECT name, price FROM item", "SELECT price, name FROM item", False),  # tuples in column order
    ("SELECT name FROM item", "SELECT name, name FROM item", False),
    ("SELECT price FROM item WHERE id = 1", "SELECT 1 FROM item WHERE id = 1", True),  # 1.0 == 1
]


@pytest.mark.parametrize(("gold", "pred", "verdict"), BIRD_CASES)
def test_bird_keeps_its_set_rule(db: Path, gold: str, pred: str, verdict: bool) -> None:
    bird = get_benchmark("bird")
    assert bird.rule_names() == ["official"]
    task = Task(
        id="t", question="q", files=[DataFile(path=str(db), kind="sqlite")], answer=gold, answer_kind="sql"
    )
    assert bird.score(task, pred).correct is verdict


def test_real_dev_items_flipped_order_is_wrong_only_under_test_suite(
    shared_data: Callable[..., Path],
) -> None:
    """On real Spider records with ORDER BY and several rows, reversing the order fails test-suite EX only."""
    data = shared_data("spider", "dev.json").parent
    tasks = list(get_benchmark("spider").load(data))
    records = json.loads((data / "dev.json").read_text())
    checked = 0
    for task, rec in zip(tasks, records, strict=True):
        q = rec["query"].rstrip(" ;")
        if "ORDER BY" not in q.upper() or "LIMIT" in q.upper():
            continue
        con = sqlite3.connect(f"file:{task.files[0].path}?mode=ro", uri=True)
        rows = con.execute(q).fetchall()
        con.close()
        if len(rows) < 3 or len(set(rows)) != len(rows):
            continue
        # the gold rows as literals, listed backwards
        values = " UNION ALL ".join(
            "SELECT " + ", ".join(f"{_lit(v)} AS c{i}" for i, v in enumerate(r)) + f", {k} AS k"
            for k, r in enumerate(rows)
        )
        cols = ", ".join(f"c{i}" for i in range(len(rows[0])))
        reversed_sql = f"SELECT {cols} FROM ({values}) ORDER BY k DESC"
        assert not Spider().score(task, reversed_sql).correct, task.id
        assert Spider().with_rule("set").score(task, reversed_sql).correct, task.id
        checked += 1
        if checked >= 10:
            break
    assert checked >= 5


def _lit(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, int | float):
        return repr(v)
    return "'" + str(v).replace("'", "''") + "'"


def test_every_sqlite_file_in_the_folder_must_agree(tmp_path: Path) -> None:
    """eval_exec_match runs both queries on every '.sqlite' file of the database's folder (the test suite)."""
    folder = tmp_path / "shop"
    folder.mkdir()
    for name, rows in (
        ("shop", "(1,'kale',3.0),(2,'apple',1.0)"),
        ("shop_ts1", "(1,'kale',1.5),(2,'leek',4.0)"),
    ):
        con = sqlite3.connect(folder / f"{name}.sqlite")
        con.executescript(
            f"CREATE TABLE item(id INTEGER, name TEXT, price REAL); INSERT INTO item VALUES {rows};"
        )
        con.commit()
        con.close()
    task = Task(id="t", question="q", files=[DataFile(path=str(folder / "shop.sqlite"), kind="sqlite")],
                answer="SELECT name FROM item WHERE price > 2", answer_kind="sql")  # fmt: skip
    hard_coded = "SELECT name FROM item WHERE name = 'kale'"  # right on shop.sqlite only
    s = Spider().score(task, hard_coded)
    assert not s.correct and "shop_ts1.sqlite" in s.reason
    assert Spider().score(task, "SELECT name FROM item WHERE price >= 2.5").correct
    assert Spider().with_rule("set").score(task, hard_coded).correct  # the set rule reads one database

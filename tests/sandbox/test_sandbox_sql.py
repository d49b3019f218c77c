"""The read-only SQL tool: refuses every write path, bounds rows and time, renders tables, saves CSV."""

from __future__ import annotations

import csv
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datadojo.sandbox.sql import MAX_CELL_CHARS, SqlResult, format_table, run_sql, split_statements
from helpers.digests import file_digest


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, city TEXT, score REAL);
        CREATE TABLE notes (id INTEGER, body TEXT, data BLOB);
        CREATE INDEX idx_city ON customers(city);
        """
    )
    conn.executemany(
        "INSERT INTO customers VALUES (?, ?, ?, ?)",
        [(i, f"name{i}", ["Brno", "Cork", None][i % 3], i * 1.5) for i in range(1, 501)],
    )
    conn.execute("INSERT INTO notes VALUES (1, 'line one\nline two\tTab', x'00ff10')")
    conn.execute("INSERT INTO notes VALUES (2, ?, NULL)", ("x" * 500,))
    conn.execute("INSERT INTO notes VALUES (3, CAST(x'caf0e9' AS TEXT), NULL)")  # invalid UTF-8 text
    conn.commit()
    conn.close()
    return path


def test_select_renders_aligned_table(db: Path) -> None:
    r = run_sql(str(db), "SELECT id, name, city, score FROM customers ORDER BY id LIMIT 3")
    assert r.error is None
    assert r.columns == ["id", "name", "city", "score"]
    assert r.rows == [(1, "name1", "Cork", 1.5), (2, "name2", None, 3.0), (3, "name3", "Brno", 4.5)]
    lines = r.text.splitlines()
    assert lines[0].split(" | ") == ["id", "name ", "city", "score"]
    assert set(lines[1]) <= {"-", "+"}
    assert lines[3].split(" | ")[2] == "NULL"
    assert lines[-1] == "(3 rows)"
    # numbers right-aligned, text left-aligned: every row has the separators at the same columns
    bars = {tuple(i for i, c in enumerate(line) if c == "|") for line in lines[2:5]}
    assert len(bars) == 1


def test_row_limit_and_total_count(db: Path) -> None:
    r = run_sql(str(db), "SELECT * FROM customers", row_limit=10)
    assert r.n_rows == 500 and len(r.rows) == 10 and r.truncated
    assert r.text.endswith("(500 rows, showing first 10)")
    r1 = run_sql(str(db), "SELECT name FROM customers WHERE id = 7")
    assert r1.text.endswith("(1 row)") and not r1.truncated
    r0 = run_sql(str(db), "SELECT * FROM customers WHERE id < 0")
    assert r0.n_rows == 0 and r0.text.endswith("(0 rows)") and r0.text.startswith("id")


def test_cells_are_escaped_and_capped(db: Path) -> None:
    r = run_sql(str(db), "SELECT id, body, data FROM notes ORDER BY id")
    assert r.error is None
    assert "line one\\nline two\\tTab" in r.text
    assert "<blob 3 bytes>" in r.text
    assert "x" * (MAX_CELL_CHARS - 3) + "..." in r.text
    assert "x" * (MAX_CELL_CHARS + 1) not in r.text
    assert "\ufffd" in r.rows[2][1]  # invalid UTF-8 decoded with replacement, no crash


@pytest.mark.parametrize(
    ("query", "what"),
    [
        ("INSERT INTO customers VALUES (1000, 'x', 'y', 1)", "INSERT statements"),
        ("UPDATE customers SET name = 'x'", "UPDATE statements"),
        ("DELETE FROM customers", "DELETE statements"),
        ("DROP TABLE customers", "DROP statements"),
        ("DROP INDEX idx_city", "DROP statements"),
        ("CREATE TABLE t (x)", "CREATE statements"),
        ("CREATE TEMP TABLE t (x)", "CREATE statements"),
        ("CREATE VIEW v AS SELECT 1", "CREATE statements"),
        ("ALTER TABLE customers ADD COLUMN z", "ALTER statements"),
        ("ATTACH DATABASE 'other.db' AS o", "ATTACH statements"),
        ("DETACH DATABASE main", "DETACH statements"),
        ("PRAGMA journal_mode = WAL", "PRAGMA journal_mode = WAL"),
        ("PRAGMA user_version = 5", "PRAGMA user_version = 5"),
        ("PRAGMA query_only = OFF", "PRAGMA query_only = OFF"),
        ("PRAGMA writable_schema = ON", "PRAGMA writable_schema = ON"),
        ("PRAGMA optimize", "PRAGMA optimize"),
        ("VACUUM", "VACUUM statements"),
        ("VACUUM INTO 'copy.db'", "VACUUM statements"),
        ("REINDEX", "REINDEX statements"),
        ("ANALYZE", "ANALYZE statements"),
        ("BEGIN", "BEGIN statements"),
        ("SAVEPOINT s", "SAVEPOINT statements"),
        ("SELECT load_extension('/tmp/evil.so')", "load_extension"),
        ("WITH x AS (SELECT 1) INSERT INTO customers(id) SELECT 9999 FROM x", "INSERT on customers"),
    ],
)
def test_writes_are_refused_and_file_unchanged(db: Path, query: str, what: str) -> None:
    before = file_digest(db)
    r = run_sql(str(db), query)
    assert r.error is not None and r.text == r.error
    assert r.error.startswith("SQL error: ")
    assert what in r.error and "read-only" in r.error, r.error
    assert file_digest(db) == before
    assert sorted(p.name for p in db.parent.iterdir()) == ["shop.sqlite"]  # no journal/wal/other files


@pytest.mark.parametrize(
    "query", ["UPDATE sqlite_master SET sql = 'x'", "WITH x AS (SELECT 1) UPDATE sqlite_master SET sql = 'x'"]
)
def test_schema_writes_refused(db: Path, query: str) -> None:
    before = file_digest(db)
    r = run_sql(str(db), query)
    assert r.error is not None and "sqlite_master" in r.error
    assert file_digest(db) == before


@pytest.mark.parametrize(
    "query",
    [
        "PRAGMA table_info(customers)",
        "PRAGMA index_list('customers')",
        "PRAGMA foreign_key_list(customers)",
        "PRAGMA user_version",
        "SELECT name FROM sqlite_master WHERE type = 'table'",
        "SELECT * FROM pragma_table_info('customers')",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5) SELECT sum(x) FROM c",
        "EXPLAIN QUERY PLAN SELECT * FROM customers WHERE city = 'Brno'",
        "SELECT upper(name), length(city), round(avg(score), 2) FROM customers GROUP BY city",
        "VALUES (1, 2)",
    ],
)
def test_reading_queries_allowed(db: Path, query: str) -> None:
    r = run_sql(str(db), query)
    assert r.error is None, r.error
    assert r.columns


def test_multiple_statements_refused(db: Path) -> None:
    r = run_sql(str(db), "SELECT 1; SELECT 2;")
    assert r.error == "SQL error: only one statement per call is allowed (found 2); send them one at a time"
    before = file_digest(db)
    r2 = run_sql(str(db), "SELECT 1; DROP TABLE customers")
    assert r2.error is not None and file_digest(db) == before


def test_trailing_semicolon_comments_and_quoted_semicolons(db: Path) -> None:
    assert run_sql(str(db), "SELECT 1;  -- done\n").rows == [(1,)]
    assert run_sql(str(db), "/* a; b */ SELECT ';' AS s;").rows == [(";",)]
    assert run_sql(str(db), 'SELECT 1 AS "a;b"').columns == ["a;b"]


def test_split_statements() -> None:
    assert split_statements("SELECT 1; SELECT 2") == ["SELECT 1", " SELECT 2"]
    assert split_statements("SELECT 'it''s; fine'") == ["SELECT 'it''s; fine'"]
    assert split_statements("SELECT [a;b] FROM t -- x;y\n;") == ["SELECT [a;b] FROM t -- x;y\n"]
    assert split_statements(" ; -- only a comment\n ; /* c */") == []


def test_errors_are_clear(db: Path, tmp_path: Path) -> None:
    assert run_sql(str(db), "SELECT * FROM nope").error == "SQL error: no such table: nope"
    assert run_sql(str(db), "SELEC 1").error == 'SQL error: near "SELEC": syntax error'
    assert run_sql(str(db), "   ").error == "SQL error: the query is empty"
    missing = tmp_path / "missing.sqlite"
    assert run_sql(str(missing), "SELECT 1").error == f"SQL error: database file not found: {missing}"
    assert not missing.exists()  # read-only open never creates the file
    r = run_sql(str(tmp_path), "SELECT 1")
    assert r.error is not None and "directory" in r.error
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    g = run_sql(str(garbage), "SELECT * FROM t")
    assert g.error is not None and g.error.startswith("SQL error: ")


def test_timeout_stops_a_runaway_query(db: Path) -> None:
    # the query never ends, so on any machine only the limit can stop it (pytest-timeout catches a hang)
    r = run_sql(
        str(db),
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
        timeout_s=0.3,
    )
    assert r.error is not None and "did not finish within 0.3 s" in r.error


def test_timeout_also_covers_fetching(db: Path) -> None:
    # a cross join that yields rows quickly but far too many of them
    q = "SELECT a.id FROM customers a, customers b, customers c"
    r = run_sql(str(db), q, timeout_s=0.3, row_limit=5)
    assert r.error is not None and "did not finish" in r.error


def test_save_csv_writes_the_full_result(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "ws" / "result.csv"
    r = run_sql(str(db), "SELECT id, city FROM customers ORDER BY id", row_limit=5, save_csv=str(out))
    assert r.error is None and r.csv_path == str(out)
    assert len(r.rows) == 5 and r.n_rows == 500
    assert f"Saved all 500 rows to {out}" in r.text
    with out.open(newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["id", "city"]
    assert len(rows) == 501
    assert rows[2] == ["2", ""]  # NULL -> empty field
    assert [p.name for p in out.parent.iterdir()] == ["result.csv"]  # temp file renamed away


def test_save_csv_failure_leaves_no_partial_file(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    q = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"
    r = run_sql(str(db), q, timeout_s=0.3, save_csv=str(out))
    assert r.error is not None
    assert list(tmp_path.iterdir()) == [db] or sorted(tmp_path.iterdir()) == sorted([db])


def test_save_csv_unwritable_target(db: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run_sql(str(db), "SELECT 1", save_csv=str(blocker / "sub" / "r.csv"))
    assert r.error is not None and "cannot write the CSV file" in r.error


def test_statement_without_result_set(db: Path) -> None:
    r = run_sql(str(db), "PRAGMA foreign_key_check")
    assert r.error is None
    assert isinstance(r, SqlResult)


def test_readonly_even_when_file_is_writable(db: Path) -> None:
    assert os.access(db, os.W_OK)
    before = file_digest(db)
    for q in ["DELETE FROM customers", "PRAGMA query_only = 0", "UPDATE customers SET score = 0"]:
        assert run_sql(str(db), q).error is not None
    assert run_sql(str(db), "SELECT count(*) FROM customers").rows == [(500,)]
    assert file_digest(db) == before


def test_format_table_direct() -> None:
    text = format_table(["a", "long_name"], [(1, "x"), (22, None)])
    assert text.splitlines() == [" a | long_name", "---+----------", " 1 | x", "22 | NULL", "(2 rows)"]
    assert format_table(["n"], [(1,)], n_rows=7).endswith("(7 rows, showing first 1)")


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.text(max_size=200))
def test_arbitrary_query_text_never_raises_and_never_writes(db: Path, query: str) -> None:
    before = file_digest(db)
    r = run_sql(str(db), query, timeout_s=0.5, row_limit=5)
    assert isinstance(r.text, str)
    assert (r.error is None) or r.error.startswith("SQL error: ")
    assert file_digest(db) == before


@given(st.text())
def test_split_statements_never_crashes(text: str) -> None:
    parts = split_statements(text)
    assert all(p.strip() for p in parts)


def test_spider_databases(shared_data: Callable[..., Path]) -> None:
    spider = shared_data("spider", "database")
    dbs = sorted(spider.glob("*/*.sqlite"))[:5]
    assert dbs, f"no Spider databases (*/*.sqlite) under {spider}"
    for path in dbs:
        before = file_digest(path)
        tables = run_sql(str(path), "SELECT name FROM sqlite_master WHERE type = 'table'")
        assert tables.error is None, (path, tables.error)
        assert tables.n_rows >= 1
        name = tables.rows[0][0]
        r = run_sql(str(path), f'SELECT * FROM "{name}"', row_limit=3)
        assert r.error is None, (path, r.error)
        assert len(r.rows) == min(3, r.n_rows)
        refused = run_sql(str(path), f'DELETE FROM "{name}"')
        assert refused.error is not None and "read-only" in refused.error
        assert file_digest(path) == before, f"{path} changed"

"""Metadata profile d: statistics, roles, SQLite DDL, and rendering within a budget."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datadojo.corpus import (
    FileProfile,
    Table,
    column_roles,
    load,
    profile_file,
    profile_table,
    profile_text,
    render_file_profile,
)

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "data"


def test_column_statistics_match_pandas() -> None:
    t = load(EXAMPLES / "sales.csv").tables[0]
    p = profile_table(t)
    cols = {c.name: c for c in p.columns}
    frame = t.frame
    assert cols["units"].min == int(frame["units"].min()) and cols["units"].max == int(frame["units"].max())
    assert cols["unit_price"].mean == pytest.approx(float(frame["unit_price"].mean()), rel=1e-5)
    assert cols["region"].n_distinct == frame["region"].nunique()
    top_value, top_count = cols["region"].top[0]
    assert (
        frame["region"].value_counts().iloc[0] == top_count
        and top_value == frame["region"].value_counts().index[0]
    )
    assert cols["date"].type == "datetime" and cols["date"].min == min(frame["date"])
    assert p.n_rows == 240 and len(p.sample_rows) == 3


def test_missing_ratio_and_representative_rows() -> None:
    frame = pd.DataFrame({"a": [np.nan, np.nan, 1.0, 2.0, 3.0], "b": [None, "x", "y", None, "z"]})
    p = profile_table(Table(name="t", frame=frame))
    a = p.columns[0]
    assert a.n_missing == 2 and a.missing_ratio == 0.4
    # the three rows with fewest missing values, kept in file order; the all-missing first row is left out
    assert p.sample_rows == [["", "x"], ["1", "y"], ["3", "z"]]


def test_roles_for_envlunch() -> None:
    db = load(EXAMPLES / "shop.sqlite")
    assert column_roles(db.table("orders")) == {
        "order_id": "key",
        "customer_id": "key",
        "order_date": "time",
        "status": "category",
    }
    assert column_roles(db.table("products"))["price"] == "measure"
    sales = column_roles(load(EXAMPLES / "sales.csv").tables[0])
    assert sales["order_id"] == "identifier" and sales["units"] == "measure" and sales["date"] == "time"
    lines = column_roles(load(EXAMPLES / "budget.xlsx").table("Lines"))
    assert lines["approved"] == "flag" and lines["line_id"] == "identifier"


def test_year_and_unique_string_roles() -> None:
    frame = pd.DataFrame(
        {
            "Year": list(range(2000, 2012)),
            "code_name": [f"n{i}" for i in range(12)],
            "score": np.arange(12) * 1.5,
        }
    )
    roles = column_roles(Table(name="t", frame=frame))
    assert roles == {"Year": "time", "code_name": "identifier", "score": "measure"}


def test_sqlite_profile_text_has_ddl_and_foreign_keys() -> None:
    text = profile_text(EXAMPLES / "shop.sqlite", budget_chars=6000)
    assert "CREATE TABLE order_items" in text
    assert "FOREIGN KEY (order_id) REFERENCES orders(order_id)" in text
    assert "Table customers (60 rows" in text


def test_xlsx_profile_names_sheets_and_header_rows() -> None:
    text = profile_text(EXAMPLES / "budget.xlsx", budget_chars=4000)
    assert "Sheet Summary (6 rows, 6 columns, 2 header rows joined)" in text
    assert "Budget H1" in text and "Sheet Lines" in text


@pytest.mark.parametrize("budget", [80, 200, 400, 800, 1500, 3000, 6000])
def test_render_respects_budget_and_degrades(budget: int) -> None:
    text = profile_text(EXAMPLES / "shop.sqlite", budget_chars=budget)
    assert len(text) <= budget
    if budget >= 400:
        assert all(name in text for name in ("customers", "products", "orders", "order_items"))
    if budget >= 6000:
        assert "Sample rows" in text


def _wide_or_many(tmp_path: Path, n_tables: int, n_cols: int) -> Path:
    p = tmp_path / f"db_{n_tables}_{n_cols}.sqlite"
    con = sqlite3.connect(p)
    for t in range(n_tables):
        cols = ", ".join(f"c{i} INTEGER" for i in range(n_cols))
        con.execute(f"CREATE TABLE t{t} (id INTEGER PRIMARY KEY, {cols})")
        con.execute(f"INSERT INTO t{t} VALUES ({', '.join(['1'] * (n_cols + 1))})")
    con.commit()
    con.close()
    return p


def test_very_wide_table_names_the_hidden_columns(tmp_path: Path) -> None:
    p = _wide_or_many(tmp_path, 1, 500)
    text = profile_text(p, budget_chars=4000)
    assert len(text) <= 4000 and "more columns" in text and "t0" in text


def test_very_many_tables_listed_then_summarized(tmp_path: Path) -> None:
    p = _wide_or_many(tmp_path, 120, 3)
    text = profile_text(p, budget_chars=2000)
    assert len(text) <= 2000
    assert all(f"t{i} 1×4" in text for i in range(120))  # every table still named, with its shape


@given(budget=st.integers(min_value=1, max_value=5000))
@settings(max_examples=40, deadline=None)
def test_render_never_exceeds_budget(budget: int) -> None:
    fp = _SALES_PROFILE
    assert len(render_file_profile(fp, budget)) <= budget


_SALES_PROFILE: FileProfile = profile_file(EXAMPLES / "sales.csv")


def test_profile_of_unreadable_file_names_the_problem(tmp_path: Path) -> None:
    p = tmp_path / "bad.xlsx"
    p.write_bytes(b"PK\x03\x04 not really a zip")
    fp = profile_file(p)
    assert fp.error_reason == "corrupt"
    text = profile_text(p, 500)
    assert "cannot be read as a table" in text and "bad.xlsx" in text


def test_profile_json_round_trip() -> None:
    fp = profile_file(EXAMPLES / "shop.sqlite")
    again = FileProfile.model_validate_json(fp.model_dump_json())
    assert again == fp


def test_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="budget_chars"):
        render_file_profile(_SALES_PROFILE, 0)

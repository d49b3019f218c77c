"""``shop-sql``: the bundled text-to-SQL set over the example database — gold SQL checked against pandas."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from datadojo.bench import BenchmarkError, get_benchmark
from datadojo.bench.shopsql import ShopSQL, shop_sql_set
from datadojo.bench.spider import execute

DB = Path(__file__).resolve().parents[2] / "examples" / "data" / "shop.sqlite"


@pytest.fixture(scope="module")
def frames() -> dict[str, pd.DataFrame]:
    with sqlite3.connect(DB) as con:
        return {t: pd.read_sql(f"SELECT * FROM {t}", con) for t in shop_sql_set()["tables"]}


def _gold(qid: str) -> set[tuple]:
    sql = next(q["sql"] for q in shop_sql_set()["questions"] if q["id"] == qid)
    out = execute(DB, sql)
    assert out.error is None, out.error
    return set(out.rows)


def test_registered_and_every_gold_query_runs_and_scores_itself() -> None:
    bench = get_benchmark("shop-sql")
    tasks = list(bench.load(DB.parent))  # a folder holding shop.sqlite works as well as the file
    assert len(tasks) == len(shop_sql_set()["questions"]) >= 12
    assert len({t.id for t in tasks}) == len(tasks) and len({t.category for t in tasks}) >= 6
    for t in tasks:
        assert t.answer_kind == "sql" and Path(t.files[0].path) == DB
        res = execute(DB, t.answer)
        assert res.error is None and res.rows, (t.id, res.error)
        assert bench.score(t, t.answer).correct, t.id
    first = tasks[0]
    assert not bench.score(first, "SELECT COUNT(*) FROM products").correct
    assert not bench.score(first, "SELECT nope FROM customers").correct
    assert bench.score(first, None).reason == "no prediction"


def test_gold_answers_agree_with_pandas(frames: dict[str, pd.DataFrame]) -> None:
    """The gold SQL answers its question: the same figures computed independently with pandas."""
    c, o, oi, p = frames["customers"], frames["orders"], frames["order_items"], frames["products"]
    assert _gold("shop-02") == {(int((o.status == "cancelled").sum()),)}
    assert _gold("shop-04") == set(c.groupby("city").size().items())
    in_2024 = o[o.order_date.str.startswith("2024")]
    assert _gold("shop-06") == {(len(in_2024),)}
    assert _gold("shop-11") == {(int((~c.customer_id.isin(in_2024.customer_id)).sum()),)}
    lines = oi.merge(p, on="product_id").merge(o, on="order_id")
    units = lines[lines.status != "cancelled"].groupby("category").quantity.sum()
    assert _gold("shop-08") == {(k, int(v)) for k, v in units.items()}
    spent = lines[lines.status.isin(["shipped", "delivered"])].assign(v=lambda d: d.quantity * d.price)
    top = spent.groupby("customer_id").v.sum().sort_values(ascending=False).head(3)
    names = c.set_index("customer_id").name
    assert _gold("shop-13") == {(names[i], round(v, 2)) for i, v in top.items()}
    assert _gold("shop-12") == set((n,) for n in p[p.price > p.price.mean()].name)


def test_wrong_database_and_options_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as con:
        con.execute("CREATE TABLE customers (id INTEGER)")
    with pytest.raises(BenchmarkError, match=r"other\.sqlite lacks table\(s\) order_items, orders, products"):
        list(ShopSQL().load(other))
    with pytest.raises(BenchmarkError, match="not found"):
        list(ShopSQL().load(tmp_path / "missing.sqlite"))
    with pytest.raises(TypeError, match="unknown option"):
        list(ShopSQL().load(DB, split="dev"))
    # scoring needs no database check: require_files=False loads the questions anywhere
    assert len(list(ShopSQL().load(tmp_path / "missing.sqlite", require_files=False))) >= 12


def test_bundled_file_is_valid_json_with_the_fields() -> None:
    from importlib import resources

    raw = json.loads(resources.files("datadojo.bench").joinpath("shop_sql.json").read_text(encoding="utf-8"))
    assert raw["database"] == "shop.sqlite" and raw["name"] == "shop-sql"
    for q in raw["questions"]:
        assert set(q) == {"id", "category", "question", "sql"}

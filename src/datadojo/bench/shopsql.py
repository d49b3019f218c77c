"""``shop-sql``: a small text-to-SQL set bundled with DataDojo, over the example shop database.

Why a bundled set: the oracle agent (gold SQL through the whole agent loop and sandbox,
:mod:`datadojo.eval.oracle`) is the end-to-end check that needs no model, and a newcomer should be able to
run it — and then a served model — without downloading Spider or BIRD. ``datadojo demo`` runs it; a
model runs on it like on any benchmark::

    datadojo eval shop-sql --data examples/data/shop.sqlite --model openai:MODEL@URL -n 3 --out runs/shop-sql

The questions and their gold SQL (``shop_sql.json``, package data) were written by the DataDojo authors
for the database ``examples/make_examples.py`` generates (customers, products, orders, order_items; a
fixed seed, so the same rows everywhere). ``category`` is the SQL skill a question needs (count, filter,
group by, dates, join, having, subquery, ranking).

**Scoring** is Spider's execution accuracy (:mod:`datadojo.bench.spider`): the predicted and gold
queries run read-only on the database and their result rows are compared as sets, with DataMind's table
comparison alongside. ``--data`` is the database file, or a folder holding ``shop.sqlite``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from datadojo.bench.base import BenchmarkError
from datadojo.bench.spider import SPIDER_SET, SPIDER_TEST_SUITE, _SqlBenchmark
from datadojo.sandbox.sql import run_sql
from datadojo.types import Task

__all__ = ["SHOP_SQL_FILE", "ShopSQL", "shop_sql_set"]

#: The bundled set, package data beside this module.
SHOP_SQL_FILE = "shop_sql.json"
_FIELDS = ("id", "category", "question", "sql")


@cache
def shop_sql_set() -> dict[str, Any]:
    """The bundled set (``name``, ``description``, ``database``, ``tables``, ``questions``), validated."""
    where = f"datadojo/bench/{SHOP_SQL_FILE}"
    data = json.loads(resources.files("datadojo.bench").joinpath(SHOP_SQL_FILE).read_text(encoding="utf-8"))
    questions = data.get("questions")
    if not isinstance(questions, list) or not questions:
        raise BenchmarkError(f"{where}: no questions")
    seen: set[str] = set()
    for i, q in enumerate(questions):
        missing = [f for f in _FIELDS if not isinstance(q.get(f), str) or not q[f].strip()]
        if missing:
            raise BenchmarkError(f"{where}: question {i}: missing field(s) {', '.join(missing)}")
        if q["id"] in seen:
            raise BenchmarkError(f"{where}: question {i}: duplicate id {q['id']!r}")
        seen.add(q["id"])
    return data


class ShopSQL(_SqlBenchmark):
    """Scored like Spider (its rules, ``test-suite`` first): the questions are Spider-style text-to-SQL."""

    name = "shop-sql"
    rules = (SPIDER_TEST_SUITE, SPIDER_SET)
    description = (
        "shop-sql: DataDojo's bundled text-to-SQL set over the example shop database, execution accuracy"
    )

    def load(self, path: str | Path, *, require_files: bool = True, **options: Any) -> Iterator[Task]:
        """The bundled questions over the database at ``path`` (the file, or a folder holding it)."""
        self._no_options(options)
        data = shop_sql_set()
        p = Path(path)
        db = p / data["database"] if p.is_dir() else p
        if require_files:
            self._require(db, f"the example database {data['database']}")
            self._check_tables(db, data["tables"])
        for q in data["questions"]:
            yield self._sql_task(
                q["id"], q["question"], db, q["sql"], q["category"], {"db_id": Path(data["database"]).stem}
            )

    def _check_tables(self, db: Path, tables: list[str]) -> None:
        """A database without the example's tables is the wrong file: say so before any episode runs."""
        res = run_sql(str(db), "SELECT name FROM sqlite_master WHERE type = 'table'")
        if res.error is not None:
            raise BenchmarkError(f"shop-sql: {db}: not a readable SQLite database ({res.error})")
        missing = sorted(set(tables) - {str(r[0]) for r in res.rows})
        if missing:
            raise BenchmarkError(
                f"shop-sql: {db} lacks table(s) {', '.join(missing)}; pass the database that "
                "examples/make_examples.py writes (examples/data/shop.sqlite)"
            )

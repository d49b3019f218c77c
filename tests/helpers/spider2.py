"""A tiny ``spider2-lite`` folder in the official layout of xlang-ai/Spider2, for the Spider 2.0-lite tests.

Two local instances over one SQLite database (``local001``: one gold CSV, row order counts, gold SQL
released; ``local002``: two gold CSVs ``_a``/``_b``, order ignored, no gold SQL) and one BigQuery
instance the loader must skip.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

__all__ = ["make_spider2_lite"]


def make_spider2_lite(root: Path) -> Path:
    """Write the folder at ``root`` and return it."""
    (root / "resource" / "databases" / "spider2-localdb").mkdir(parents=True)
    (root / "resource" / "documents").mkdir(parents=True)
    gold = root / "evaluation_suite" / "gold"
    (gold / "exec_result").mkdir(parents=True)
    (gold / "sql").mkdir(parents=True)
    con = sqlite3.connect(root / "resource" / "databases" / "spider2-localdb" / "shop.sqlite")
    con.executescript(
        "CREATE TABLE sales(region TEXT, amount REAL, month INTEGER);"
        "INSERT INTO sales VALUES ('North', 10.0, 1), ('South', 5.5, 1), ('North', 2.25, 2);"
    )
    con.commit()
    con.close()
    (root / "resource" / "documents" / "regions.md").write_text("Regions are North and South.")
    records = [
        {"instance_id": "local001", "db": "shop", "question": "Total amount per region, largest first?",
         "external_knowledge": "regions.md"},
        {"instance_id": "local002", "db": "shop", "question": "Months with sales?", "external_knowledge": None},
        {"instance_id": "bq001", "db": "cloud.dataset", "question": "not local", "external_knowledge": None},
    ]  # fmt: skip
    (root / "spider2-lite.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    standards = [
        {"instance_id": "local001", "condition_cols": [], "ignore_order": False, "toks": "40"},
        {"instance_id": "local002", "condition_cols": [], "ignore_order": True, "toks": "20"},
        {"instance_id": "bq001", "condition_cols": [], "ignore_order": True, "toks": "10"},
    ]
    (gold / "spider2lite_eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in standards))
    (gold / "exec_result" / "local001.csv").write_text("region,total\nNorth,12.25\nSouth,5.5\n")
    (gold / "exec_result" / "local002_a.csv").write_text("month\n1\n2\n")
    (gold / "exec_result" / "local002_b.csv").write_text("month,n\n1,2\n2,1\n")
    (gold / "sql" / "local001.sql").write_text(
        "SELECT region, SUM(amount) AS total FROM sales GROUP BY region ORDER BY total DESC"
    )
    return root

"""A tiny DA-Code ``da_code/`` folder in the official layout (``configs/task``, ``configs/eval``, ``source/<id>``,
``gold/<id>``): one task per scorer kind — text, CSV, ML metric, chart, SQLite.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np

__all__ = ["EVALS", "TASKS", "make_dacode", "write_jsonl"]

TASKS = [
    {"id": "di-text-001", "type": "Data Insight", "hardness": "Medium", "post_process": [],
     "instruction": "Identify the countries with the highest and lowest density. Output JSON: "
                    '{"highest country": [...], "lowest country": [...]}'},
    {"id": "dm-csv-001", "type": "Data Manipulation", "hardness": "Medium", "post_process": [],
     "instruction": "Count the undefeated fighters per weight class into undefeated.csv."},
    {"id": "ml-binary-001", "type": "ML Classification", "hardness": "Medium", "post_process": [],
     "instruction": "Predict the sentiment of test.csv into result.csv."},
    {"id": "plot-bar-001", "type": "Data Visualization", "hardness": "Easy", "post_process": ["plot_process"],
     "instruction": "Plot the top artists' sales as a bar chart titled 'Top Artists', saved as sales.jpg."},
    {"id": "data-wrangling-038", "type": "Data Wrangling", "hardness": "Medium", "post_process": [],
     "instruction": "Clean the tables into database.db."},
]  # fmt: skip
EVALS = [
    {"id": "di-text-001", "config": {"task": "data insight", "type": "text", "hardness": "Medium"},
     "func": ["compare_text"], "result": [{"number": [{"highest country": ["Monaco"], "lowest country": ["Mongolia"]}]}],
     "options": [{}]},
    {"id": "dm-csv-001", "config": {"task": "data manipulation", "type": "csv", "hardness": "Medium"},
     "func": ["compare_csv"], "result": [{"file": ["undefeated.csv"]}],
     "options": [{"condition_cols": [0, 1], "score_rule": "all", "ignore_order": True}]},
    {"id": "ml-binary-001", "config": {"task": "machine learning", "type": "binary classification", "metric": "f1",
     "upper_bound": 0.9, "lower_bound": 0.6, "hardness": "Medium"},
     "func": ["compare_ml"], "result": [{"file": "result.csv"}], "options": [{"target_column": "result"}]},
    {"id": "plot-bar-001", "config": {"task": "data visualization", "type": "bar", "metric": "", "threshold": 0.0,
     "hardness": "Easy"}, "func": ["compare_image"],
     "result": [{"multi": True, "file": ["sales.jpg", "dabench/plot.json", "dabench/result.npy"]}],
     "options": [{"keys": ["figsize", "graph_title"]}]},
    {"id": "data-wrangling-038", "config": {"task": "data wrangling", "hardness": "Medium"},
     "func": ["compare_sqlite"], "result": [{"file": ["database.db"]}],
     "options": [{"condition_tabs": ["company"], "condition_cols": [[]], "ignore_order": [True]}]},
]  # fmt: skip


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def make_dacode(tmp_path: Path) -> Path:
    """Write ``tmp_path/da-code/da_code`` and return the repository root ``tmp_path/da-code``."""
    root = tmp_path / "da-code" / "da_code"
    write_jsonl(root / "configs" / "task" / "all.jsonl", TASKS)
    write_jsonl(root / "configs" / "eval" / "eval_all.jsonl", EVALS)
    for t in TASKS:
        (root / "source" / t["id"]).mkdir(parents=True)
        (root / "source" / t["id"] / "README.md").write_text("task files\n")
    (root / "source" / "di-text-001" / "world-data-2023.csv").write_text("country,density\nMonaco,26337\n")
    gold = root / "gold"
    (gold / "dm-csv-001").mkdir(parents=True)
    (gold / "dm-csv-001" / "undefeated.csv").write_text(
        "weight_class,undefeated,note\nLight,3,a\nHeavy,1,b\n"
    )
    (gold / "ml-binary-001").mkdir(parents=True)
    (gold / "ml-binary-001" / "result.csv").write_text(
        "id,result\n" + "".join(f"{i},{'Positive' if i % 2 else 'Negative'}\n" for i in range(1, 11))
    )
    (gold / "plot-bar-001").mkdir(parents=True)
    np.save(gold / "plot-bar-001" / "result.npy", np.array([[5.0, 3.0, 2.0]]))
    info = {"type": "bar", "figsize": [6.0, 6.0], "graph_title": "Top Artists", "x_label": "", "y_label": ""}
    (gold / "plot-bar-001" / "plot.json").write_text(json.dumps(info))
    (gold / "plot-bar-001" / "sales.jpg").write_bytes(b"\xff\xd8\xff")
    (gold / "data-wrangling-038").mkdir(parents=True)
    with sqlite3.connect(gold / "data-wrangling-038" / "database.db") as conn:
        conn.execute("CREATE TABLE company (name TEXT, size INTEGER)")
        conn.executemany("INSERT INTO company VALUES (?, ?)", [("acme", 10), ("globex", 250)])
        conn.execute("CREATE TABLE ignored (x INTEGER)")
    return root.parent

"""Real benchmark data in ../shared/data (DABench CSVs, Spider SQLite, scientific folders), when present."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from datadojo.corpus import filter_file, load, profile_folder, profile_text

SharedData = Callable[..., Path]


def test_dabench_tables_all_load_with_the_row_counts_pandas_sees(shared_data: SharedData) -> None:
    import pandas as pd

    tables = sorted(shared_data("dabench", "da-dev-tables").glob("*.csv"))
    assert tables
    for p in tables:
        t = load(p).tables[0]
        ref = pd.read_csv(p, encoding_errors="replace", on_bad_lines="skip", engine="python")
        assert t.row_count == len(ref), p.name
        assert len(t.columns) >= len(ref.columns) - 1, p.name


def test_dabench_questions_files_exist_and_filter(shared_data: SharedData) -> None:
    root = shared_data("dabench")
    names = {
        json.loads(line)["file_name"]
        for line in (root / "da-dev-questions.jsonl").read_text().splitlines()
        if line
    }
    verdicts = [
        filter_file(root / "da-dev-tables" / n)
        for n in sorted(names)
        if (root / "da-dev-tables" / n).exists()
    ]
    assert verdicts and all(v.loaded is not None for v in verdicts)
    assert {v.reason for v in verdicts} <= {None, "too_many_rows", "too_few_rows"}


def test_spider_foreign_keys_match_tables_json(shared_data: SharedData) -> None:
    root = shared_data("spider")
    schemas = {s["db_id"]: s for s in json.loads((root / "tables.json").read_text())}
    checked = 0
    for db_dir in sorted((root / "database").iterdir())[:40]:
        db = db_dir / f"{db_dir.name}.sqlite"
        if not db.exists() or db_dir.name not in schemas:
            continue
        f = load(db, max_rows=5, count_limit=10_000)
        names = {t.name.lower() for t in f.tables}
        spider_names = {n.lower() for n in schemas[db_dir.name]["table_names_original"]}
        assert spider_names <= names, db_dir.name
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        for t in f.tables:
            n = con.execute(f'SELECT COUNT(*) FROM "{t.name}"').fetchone()[0]
            assert t.row_count == min(n, 10_001)
            for fk in t.foreign_keys:
                assert len(fk.columns) == len(fk.ref_columns)
        con.close()
        checked += 1
    assert checked >= 10


def test_spider_profile_text_fits_and_names_every_table(shared_data: SharedData) -> None:
    db = shared_data("spider", "database", "formula_1", "formula_1.sqlite")
    text = profile_text(db, budget_chars=3000)
    assert len(text) <= 3000
    for t in load(db, max_rows=0, count_limit=0).tables:
        assert t.name in text


def test_scientific_folders_profile(shared_data: SharedData) -> None:
    root = shared_data("scirepos")
    zika = profile_folder(root / "zika-tutorial")
    assert {"fasta", "genbank", "csv", "json", "readme"} <= set(zika.kinds)
    fasta = next(f for f in zika.files if f.kind == "fasta")
    assert fasta.summary["records"] > 0 and fasta.summary["alphabet"] == "DNA"
    text = profile_text(root / "co2-ppm", budget_chars=4000)
    assert len(text) <= 4000 and "datapackage.json" in text and "co2-mm-mlo.csv" in text

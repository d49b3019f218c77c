"""DataMind §3.1 filters: load failures, row bounds (streamed), anomalous types, duplicates."""

from __future__ import annotations

import json
import os
import sqlite3
import tracemalloc
from pathlib import Path

import pandas as pd
import pytest

from datadojo.corpus import REJECT_REASONS, DuplicateFilter, FilterConfig, filter_file

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "data"
GB = 1 << 30


def _bytes_read() -> int:
    """Bytes this process has read through system calls so far (Linux ``/proc/self/io``).

    How much of a file a filter reads is what decides whether it streams; unlike elapsed time it does not
    depend on how busy the machine is.
    """
    try:
        with open("/proc/self/io") as fh:
            return next(int(ln.split()[1]) for ln in fh if ln.startswith("rchar:"))
    except (OSError, StopIteration):
        pytest.skip("/proc/self/io is not available on this system")


def _csv(path: Path, n_rows: int, header: str = "a,b") -> Path:
    path.write_text(header + "\n" + "".join(f"{i},{i % 7}\n" for i in range(n_rows)), encoding="utf-8")
    return path


def test_defaults_follow_the_paper() -> None:
    cfg = FilterConfig()
    assert (cfg.min_rows, cfg.max_rows) == (20, 1000)
    assert cfg.bounds("sqlite") == (20, None)


@pytest.mark.parametrize(
    ("n", "reason"),
    [(0, "too_few_rows"), (19, "too_few_rows"), (20, None), (1000, None), (1001, "too_many_rows")],
)
def test_row_bounds_edges(tmp_path: Path, n: int, reason: str | None) -> None:
    v = filter_file(_csv(tmp_path / "t.csv", n))
    assert v.accepted is (reason is None)
    assert v.reason == reason
    assert v.loaded is not None  # a file rejected for its rows is still loaded, so it can be profiled


def test_bounds_are_configurable(tmp_path: Path) -> None:
    p = _csv(tmp_path / "t.csv", 5)
    assert not filter_file(p).accepted
    assert filter_file(p, FilterConfig(min_rows=5)).accepted
    assert filter_file(p, FilterConfig(min_rows=None, max_rows=4)).reason == "too_many_rows"


def test_every_rejection_reason_is_declared(tmp_path: Path) -> None:
    (tmp_path / "e.csv").touch()
    (tmp_path / "d.csv").mkdir()
    reasons = {filter_file(tmp_path / "e.csv").reason, filter_file(tmp_path / "d.csv").reason}
    assert reasons == {"empty", "not_a_file"} and reasons <= set(REJECT_REASONS)


def test_load_failures_become_rejections_with_detail(tmp_path: Path) -> None:
    bad = tmp_path / "bin.csv"
    bad.write_bytes(b"\x00\x01\x02" * 100)
    v = filter_file(bad)
    assert not v.accepted and v.reason == "binary" and "NUL" in (v.detail or "")
    latin = tmp_path / "l.csv"
    latin.write_bytes(b"a\n" + "é\n".encode("cp1252") * 30)
    v = filter_file(latin, FilterConfig(encodings=("utf-8",)))
    assert v.reason == "encoding" and (v.detail or "").startswith("line 2:")


def test_one_gb_sparse_nul_file_is_rejected_from_its_first_block(tmp_path: Path) -> None:
    p = tmp_path / "huge.csv"
    with p.open("wb") as fh:
        fh.truncate(GB)  # a sparse file: 1 GB of NUL bytes that occupies no disk
    tracemalloc.start()
    before = _bytes_read()
    v = filter_file(p)
    read = _bytes_read() - before
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert v.reason == "binary"
    assert read < 16 * 1024 * 1024 and peak < 8 * 1024 * 1024  # a first block, not the gigabyte


def test_one_gb_sparse_csv_is_rejected_by_the_row_bound_without_reading_it(tmp_path: Path) -> None:
    p = _csv(tmp_path / "huge.csv", 20_000)  # ~130 KB of rows, more than the 64 KiB sniffed block
    with p.open("r+b") as fh:
        fh.truncate(GB)  # the rest of the gigabyte is a hole
    assert p.stat().st_size == GB
    tracemalloc.start()
    before = _bytes_read()
    v = filter_file(p)
    read = _bytes_read() - before
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert v.reason == "too_many_rows" and "counting stopped at 1,001" in (v.detail or "")
    assert v.loaded is not None and len(v.loaded.tables[0].frame) <= 1001
    assert read < 64 * 1024 * 1024 and peak < 32 * 1024 * 1024  # the rows it needed, not the hole


def test_sqlite_defaults_largest_table_and_no_upper_bound(tmp_path: Path) -> None:
    p = tmp_path / "db.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE small (i INTEGER)")
    con.execute("CREATE TABLE big (i INTEGER)")
    con.executemany("INSERT INTO small VALUES (?)", [(i,) for i in range(3)])
    con.executemany("INSERT INTO big VALUES (?)", [(i,) for i in range(5000)])
    con.commit()
    con.close()
    v = filter_file(p)
    assert v.accepted and v.loaded is not None
    big = v.loaded.table("big")
    assert big.row_count == 5000 and len(big.frame) == FilterConfig().profile_rows
    assert filter_file(p, FilterConfig(row_scope="every")).reason == "too_few_rows"
    v = filter_file(p, FilterConfig(sqlite_max_rows=1000))
    assert v.reason == "too_many_rows" and "'big'" in (v.detail or "")


def test_row_scope_total(tmp_path: Path) -> None:
    from openpyxl import Workbook

    wb = Workbook()
    for name in ("A", "B"):
        ws = wb.create_sheet(name)
        ws.append(["x"])
        for i in range(600):
            ws.append([i])
    del wb["Sheet"]
    p = tmp_path / "two.xlsx"
    wb.save(p)
    assert filter_file(p).accepted  # largest sheet: 600 rows
    v = filter_file(p, FilterConfig(row_scope="total"))
    assert v.reason == "too_many_rows" and "1,200 rows" in (v.detail or "")


def test_anomalous_nested_and_binary_columns(tmp_path: Path) -> None:
    nested = tmp_path / "n.json"
    nested.write_text(json.dumps([{"id": i, "meta": {"k": i}} for i in range(30)]), encoding="utf-8")
    v = filter_file(nested)
    assert v.reason == "anomalous_types" and "n.meta: nested" in (v.detail or "")
    assert filter_file(nested, FilterConfig(reject_nested=False)).accepted
    assert filter_file(nested, FilterConfig(max_anomalous_columns=1)).accepted

    db = tmp_path / "blob.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (id INTEGER, img BLOB)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [(i, os.urandom(8)) for i in range(30)])
    con.commit()
    con.close()
    v = filter_file(db)
    assert v.reason == "anomalous_types" and "t.img: binary" in (v.detail or "")


def test_parquet_struct_column_is_anomalous(tmp_path: Path) -> None:
    p = tmp_path / "s.parquet"
    pd.DataFrame({"a": range(25), "tags": [[1, 2]] * 25}).to_parquet(p)
    assert filter_file(p).reason == "anomalous_types"


def test_mostly_missing_is_optional(tmp_path: Path) -> None:
    p = tmp_path / "m.csv"
    p.write_text("a,b,c\n" + "1,,\n" * 30, encoding="utf-8")
    assert filter_file(p).accepted
    v = filter_file(p, FilterConfig(max_missing_ratio=0.5))
    assert v.reason == "mostly_missing" and "67%" in (v.detail or "")


def test_kinds_can_be_excluded() -> None:
    v = filter_file(EXAMPLES / "shop.sqlite", FilterConfig(kinds=("csv",)))
    assert v.reason == "kind_excluded"


def test_duplicate_filter_first_wins() -> None:
    d = DuplicateFilter()
    assert d.seen("abc") is None
    d.add("abc", "/a.csv")
    d.add("abc", "/b.csv")
    assert d.seen("abc") == "/a.csv" and len(d) == 1

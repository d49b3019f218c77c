"""Corpus scan into corpus.jsonl: one record per file, reasons, duplicates, resume by content hash."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tracemalloc
from pathlib import Path

import pytest

from datadojo.corpus import CorpusRecord, FilterConfig, ScanConfig, scan_corpus
from datadojo.corpus.scan import read_corpus, sha256_file

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "data"


def _corpus(root: Path) -> Path:
    """A small crawled-looking folder with good, bad and duplicate files."""
    root.mkdir()
    shutil.copy(EXAMPLES / "sales.csv", root / "sales.csv")
    shutil.copy(EXAMPLES / "sales.csv", root / "sales_copy.csv")
    shutil.copy(EXAMPLES / "shop.sqlite", root / "shop.sqlite")
    shutil.copytree(EXAMPLES / "station_survey", root / "station_survey")
    (root / "empty.csv").touch()
    (root / "header_only.csv").write_text("a,b,c\n", encoding="utf-8")
    (root / "binary.csv").write_bytes(os.urandom(64) + b"\x00" * 64)
    (root / "dir.csv").mkdir()
    os.symlink(root / "gone.csv", root / "broken.csv")
    return root


def _records(out: Path) -> dict[str, CorpusRecord]:
    return {Path(r.path).name: r for r in read_corpus(out)}


def test_scan_records_every_file_with_reason(tmp_path: Path) -> None:
    root = _corpus(tmp_path / "crawl")
    out = tmp_path / "corpus.jsonl"
    summary = scan_corpus([root], out)
    recs = _records(out)
    assert recs["sales.csv"].accepted and recs["shop.sqlite"].accepted
    assert recs["sales_copy.csv"].reason == "duplicate" and recs["sales_copy.csv"].duplicate_of == str(
        root / "sales.csv"
    )
    assert recs["empty.csv"].reason == "empty"
    assert recs["header_only.csv"].reason == "too_few_rows"
    assert recs["binary.csv"].reason == "binary"
    assert recs["broken.csv"].reason == "missing" and recs["broken.csv"].sha256 is None
    assert recs["README.md"].reason == "not_tabular" and "first lines" in recs["README.md"].profile
    assert "dir.csv" not in recs  # an empty directory holds no file
    sales = recs["sales.csv"]
    assert sales.sha256 == hashlib.sha256((root / "sales.csv").read_bytes()).hexdigest()
    assert sales.tables[0].rows == 240 and sales.tables[0].columns[0] == "order_id"
    assert sales.profile.startswith("File: sales.csv") and len(sales.profile) <= 4000
    assert summary.processed == len(recs) == summary.seen
    assert summary.accepted == sum(r.accepted for r in recs.values())
    assert summary.accepted_by_kind == {"csv": 2, "sqlite": 1}  # sales.csv, raw/measurements.csv, shop.sqlite
    assert sum(summary.rejected_by_reason.values()) == summary.rejected
    assert summary.rejected_by_reason["duplicate"] == 1


def test_rescan_skips_recorded_files_and_picks_up_changes(tmp_path: Path) -> None:
    root = _corpus(tmp_path / "crawl")
    out = tmp_path / "corpus.jsonl"
    first = scan_corpus([root], out)
    n_lines = len(out.read_text(encoding="utf-8").splitlines())
    second = scan_corpus([root], out)
    assert second.skipped == first.processed and second.processed == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) == n_lines
    # same content, new mtime: re-hashed, still skipped
    st = (root / "sales.csv").stat()
    os.utime(root / "sales.csv", ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000_000))
    assert scan_corpus([root], out).processed == 0
    # changed content: scanned again, and its copy is no longer a duplicate of anything new
    with (root / "header_only.csv").open("a", encoding="utf-8") as fh:
        fh.writelines(f"{i},{i},{i}\n" for i in range(25))
    third = scan_corpus([root], out)
    assert third.processed == 1 and third.accepted == 1
    latest = [r for r in read_corpus(out) if r.path.endswith("header_only.csv")]
    assert [r.accepted for r in latest] == [False, True]


def test_resume_after_a_crash_mid_write(tmp_path: Path) -> None:
    root = _corpus(tmp_path / "crawl")
    out = tmp_path / "corpus.jsonl"
    scan_corpus([root], out)
    lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
    out.write_text("".join(lines[:3]) + lines[3][:25], encoding="utf-8")  # killed while writing record 4
    summary = scan_corpus([root], out)
    assert summary.skipped == 3 and summary.processed == len(lines) - 3
    assert len(list(read_corpus(out))) == len(lines)


def test_duplicates_across_runs(tmp_path: Path) -> None:
    a = tmp_path / "a"
    a.mkdir()
    shutil.copy(EXAMPLES / "sales.csv", a / "one.csv")
    out = tmp_path / "c.jsonl"
    scan_corpus([a], out)
    b = tmp_path / "b"
    b.mkdir()
    shutil.copy(EXAMPLES / "sales.csv", b / "two.csv")
    summary = scan_corpus([b], out)
    assert summary.rejected_by_reason == {"duplicate": 1}


def test_filter_settings_reach_the_scan(tmp_path: Path) -> None:
    root = _corpus(tmp_path / "crawl")
    out = tmp_path / "c.jsonl"
    cfg = ScanConfig(filters=FilterConfig(min_rows=0, dedupe=False), profile_chars=500)
    scan_corpus([root], out, cfg)
    recs = _records(out)
    assert recs["header_only.csv"].accepted and recs["sales_copy.csv"].accepted
    assert all(len(r.profile) <= 500 for r in recs.values())


def test_callbacks_and_single_file_roots(tmp_path: Path) -> None:
    seen: list[tuple[str, bool]] = []
    totals: list[int] = []
    out = tmp_path / "c.jsonl"
    summary = scan_corpus(
        [EXAMPLES / "sales.csv", EXAMPLES / "sales.csv", EXAMPLES / "budget.xlsx"],
        out,
        on_total=totals.append,
        on_file=lambda p, r: seen.append((p.name, r is not None)),
    )
    assert totals == [2] and seen == [("sales.csv", True), ("budget.xlsx", True)]
    assert summary.accepted_by_kind == {"csv": 1, "xlsx": 1} and summary.rejected_by_reason == {}


def test_malformed_output_is_an_error(tmp_path: Path) -> None:
    from datadojo.jsonl import JsonlError

    out = tmp_path / "c.jsonl"
    out.write_text('{"not json\n{"path": "x"}\n', encoding="utf-8")
    with pytest.raises(JsonlError, match=":1:"):
        scan_corpus([EXAMPLES / "sales.csv"], out)


def test_sha256_streams(tmp_path: Path) -> None:
    p = tmp_path / "s.bin"
    with p.open("wb") as fh:
        fh.truncate(8 << 20)
    expected = hashlib.sha256(b"\x00" * (8 << 20)).hexdigest()
    tracemalloc.start()
    assert sha256_file(p) == expected
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 4 << 20  # streamed in blocks, never the whole 8 MiB at once
    assert json.loads(CorpusRecord(path="x", kind="csv", accepted=True).model_dump_json())["accepted"] is True

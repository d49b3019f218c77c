"""Header-overlap contamination check (DataMind Appendix H)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datadojo.corpus import HeaderSet, OverlapConfig, collect_headers, header_overlap, scan_corpus
from datadojo.corpus.contamination import headers_of_file, normalize_column

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "data"


def H(source: str, *names: str) -> HeaderSet:
    return HeaderSet.from_names(source, names)


def test_normalization() -> None:
    assert normalize_column(" Unit Price ($)") == "unit_price"
    assert normalize_column("unit-price") == "unit_price"
    assert (
        normalize_column("Unnamed: 0") == ""
        and normalize_column("column_3") == ""
        and normalize_column("7") == ""
    )
    assert H("x", "A", "a", "column_1").columns == frozenset({"a"})


def test_exact_table_overlap_ignores_order_and_case() -> None:
    train = [H("t1", "Name", "Age", "City"), H("t2", "x", "y")]
    bench = [H("b1", "city", "name", "AGE"), H("b2", "p", "q"), H("b3", "x", "y", "z"), H("b4", "solo")]
    r = header_overlap(train, bench)
    assert r.n_bench == 3  # b4 has a single column and is left out (min_columns=2)
    assert r.n_overlapping == 1 and r.ratio == pytest.approx(1 / 3)
    assert r.matches == [("b1", "t1", 1.0)] and r.percent() == "33.33%"


def test_jaccard_and_containment() -> None:
    train = [H("t", "a", "b", "c", "d")]
    bench = [H("b", "a", "b", "c")]
    assert header_overlap(train, bench, OverlapConfig(match="jaccard", threshold=0.75)).n_overlapping == 1
    assert header_overlap(train, bench, OverlapConfig(match="jaccard", threshold=0.8)).n_overlapping == 0
    assert header_overlap(train, bench, OverlapConfig(match="containment", threshold=1.0)).n_overlapping == 1
    assert header_overlap(train, bench).n_overlapping == 0


def test_column_unit() -> None:
    r = header_overlap([H("t", "a", "b")], [H("b", "a", "c", "d", "e")], OverlapConfig(unit="column"))
    assert r.unit == "column" and r.n_bench == 4 and r.n_overlapping == 1 and r.ratio == 0.25


def test_empty_benchmark_is_zero() -> None:
    assert header_overlap([H("t", "a", "b")], []).ratio == 0.0


@given(
    st.lists(
        st.lists(st.sampled_from("abcdefgh"), min_size=2, max_size=5, unique=True), min_size=1, max_size=8
    )
)
def test_overlap_with_itself_is_total(headers: list[list[str]]) -> None:
    sets = [H(f"h{i}", *h) for i, h in enumerate(headers)]
    for match in ("exact", "jaccard", "containment"):
        r = header_overlap(sets, sets, OverlapConfig(match=match))  # type: ignore[arg-type]
        assert r.ratio == 1.0


def test_collect_from_files_folders_and_scan_output(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "same.csv").write_text(
        "Order ID,Date,Region,Product,Units,Unit Price,Discount,Returned\n1,2,3,4,5,6,7,8\n", encoding="utf-8"
    )
    (tmp_path / "b" / "other.csv").write_text("k,v\n1,2\n", encoding="utf-8")
    out = tmp_path / "train.jsonl"
    scan_corpus([EXAMPLES], out)
    train = collect_headers([out])
    assert any(h.source.endswith("sales.csv") for h in train)
    assert not any("sites" in h.source for h in train)  # rejected files are not training files
    bench = collect_headers([tmp_path / "b"])
    r = header_overlap(train, bench)
    assert r.n_bench == 2 and r.n_overlapping == 1 and r.matches[0][0].endswith("same.csv")
    db = headers_of_file(EXAMPLES / "shop.sqlite")
    assert [h.source.rsplit("#", 1)[1] for h in db] == ["customers", "products", "orders", "order_items"]
    assert headers_of_file(tmp_path / "missing.csv") == []

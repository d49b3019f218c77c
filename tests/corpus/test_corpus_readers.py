"""Readers: every format into typed tables, and bad input into a LoadError naming file, problem and place."""

from __future__ import annotations

import csv
import datetime
import decimal
import io
import json
import os
import sqlite3
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datadojo.corpus import LoadError, ReadOptions, load
from datadojo.corpus.json_reader import json_tables
from datadojo.types import DATA_KINDS

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "data"


def _write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_bytes(text.encode(encoding))
    return path


# --------------------------------------------------------------------------- CSV


def test_csv_example_types_and_kind() -> None:
    f = load(EXAMPLES / "sales.csv")
    assert f.kind == "csv" and f.kind in DATA_KINDS
    (t,) = f.tables
    assert t.row_count == 240 and len(t.frame) == 240 and not t.truncated
    assert t.column_types["order_id"] == "integer"
    assert t.column_types["date"] == "datetime"
    assert t.column_types["unit_price"] == "float"
    assert t.column_types["region"] == "string"
    assert f.encoding == "utf-8" and f.delimiter == ","


def test_csv_bom_is_stripped_from_first_header(tmp_path: Path) -> None:
    p = tmp_path / "bom.csv"
    p.write_bytes(b"\xef\xbb\xbfid,name\n1,a\n2,b\n")
    f = load(p)
    assert f.tables[0].columns == ["id", "name"]
    assert f.encoding == "utf-8-sig"


def test_csv_utf16_with_bom(tmp_path: Path) -> None:
    p = tmp_path / "u16.csv"
    p.write_bytes("a,b\n1,é\n2,ü\n".encode("utf-16"))
    t = load(p).tables[0]
    assert t.columns == ["a", "b"] and t.frame["b"].tolist() == ["é", "ü"]


def test_csv_cp1252_fallback_is_reported(tmp_path: Path) -> None:
    p = _write(tmp_path / "latin.csv", "city,temp\nZürich,3\nMálaga,18\n", "cp1252")
    f = load(p)
    assert f.encoding == "cp1252"
    assert f.tables[0].frame["city"].tolist() == ["Zürich", "Málaga"]
    assert any("not valid utf-8 at line 2" in w for w in f.warnings)


def test_csv_wrong_encoding_names_line_and_byte(tmp_path: Path) -> None:
    p = _write(tmp_path / "latin.csv", "a,b\n1,x\n2,Zürich\n", "cp1252")
    with pytest.raises(LoadError) as info:
        load(p, encodings=("utf-8",))
    err = info.value
    assert err.reason == "encoding" and err.where == "line 3"
    offset = p.read_bytes().index(b"\xfc")
    assert str(p) in str(err) and f"byte offset {offset}" in str(err) and "(bytes fc)" in str(err)


def test_csv_undecodable_in_every_candidate(tmp_path: Path) -> None:
    p = tmp_path / "bad.csv"
    p.write_bytes(b"a,b\n1,\x81\x8d\n")  # bytes undefined in cp1252 and invalid utf-8
    with pytest.raises(LoadError) as info:
        load(p)
    assert info.value.reason == "encoding" and "utf-8, cp1252" in str(info.value)


@pytest.mark.parametrize(
    ("delim", "suffix"), [(",", ".csv"), (";", ".csv"), ("\t", ".tsv"), ("|", ".txt"), ("\t", ".csv")]
)
def test_csv_delimiter_detection(tmp_path: Path, delim: str, suffix: str) -> None:
    rows = [["name", "note", "value"], ["a", "x, y; z", "1"], ["b", "plain", "2"], ["c", "w", "3"]]
    buf = io.StringIO()
    csv.writer(buf, delimiter=delim, lineterminator="\n").writerows(rows)
    p = _write(tmp_path / f"d{suffix}", buf.getvalue())
    f = load(p)
    assert f.delimiter == delim
    t = f.tables[0]
    assert t.columns == ["name", "note", "value"] and t.frame["note"].iloc[0] == "x, y; z"


def test_csv_ragged_rows_reported_with_line_numbers(tmp_path: Path) -> None:
    text = "a,b,c\n1,2,3\n4,5\n6,7,8,9\n\n10,11,12\n"
    p = _write(tmp_path / "r.csv", text)
    t = load(p).tables[0]
    assert t.row_count == 3  # the long row (line 4) is skipped, the short one (line 3) padded
    joined = " | ".join(t.warnings)
    assert "fewer fields than the header (3) padded: line 3" in joined
    assert "more fields than the header (3) skipped: line 4" in joined
    assert t.frame["c"].isna().sum() == 1


def test_csv_ragged_error_mode_names_line(tmp_path: Path) -> None:
    p = _write(tmp_path / "r.csv", 'a,b\n1,"multi\nline"\n3,4,5\n')
    with pytest.raises(LoadError) as info:
        load(p, on_ragged="error")
    assert info.value.reason == "ragged" and info.value.where == "line 4"


def test_csv_trailing_delimiter_is_not_ragged(tmp_path: Path) -> None:
    t = load(_write(tmp_path / "t.csv", "a,b\n1,2,\n3,4,\n")).tables[0]
    assert t.row_count == 2 and not t.warnings


def test_csv_header_wider_rows_extend_columns(tmp_path: Path) -> None:
    text = "date,value\n" + "".join(f"2020-{m:02d},{m},x\n" for m in range(1, 13))
    t = load(_write(tmp_path / "w.csv", text)).tables[0]
    assert t.columns == ["date", "value", "column_3"] and t.row_count == 12


def test_csv_blank_and_duplicate_headers_renamed(tmp_path: Path) -> None:
    t = load(_write(tmp_path / "h.csv", ",x,x\n1,2,3\n")).tables[0]
    assert t.columns == ["column_1", "x", "x_2"]
    assert "renamed columns" in t.warnings[0]


def test_csv_numeric_first_row_read_as_data(tmp_path: Path) -> None:
    t = load(_write(tmp_path / "n.csv", "1,2\n3,4\n")).tables[0]
    assert t.columns == ["column_1", "column_2"] and t.row_count == 2
    assert load(_write(tmp_path / "m.csv", "1,2\n3,4\n"), header="first_row").tables[0].row_count == 1


def test_csv_header_only_has_zero_rows(tmp_path: Path) -> None:
    t = load(_write(tmp_path / "h.csv", "a,b,c\n")).tables[0]
    assert t.row_count == 0 and t.columns == ["a", "b", "c"]


def test_csv_max_rows_and_count_limit_stop_early(tmp_path: Path) -> None:
    p = _write(tmp_path / "big.csv", "a,b\n" + "".join(f"{i},{i * 2}\n" for i in range(5000)))
    t = load(p, max_rows=10, count_limit=100).tables[0]
    assert len(t.frame) == 10 and t.row_count == 101 and t.row_count_is_lower_bound and t.truncated
    t = load(p, max_rows=10).tables[0]
    assert t.row_count == 5000 and not t.row_count_is_lower_bound


def test_csv_old_mac_line_endings(tmp_path: Path) -> None:
    p = tmp_path / "cr.csv"
    p.write_bytes(b"a,b\r1,2\r3,4\r")
    t = load(p).tables[0]
    assert t.row_count == 2 and t.frame["b"].tolist() == [2, 4]


csv_cell = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=12)


@given(
    header=st.lists(
        st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), min_size=2, max_size=6, unique=True
    ),
    data=st.data(),
)
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_csv_roundtrip_property(tmp_path: Path, header: list[str], data: st.DataObject) -> None:
    """Any rectangular table written by csv.writer reads back with the same shape and header."""
    rows = data.draw(st.lists(st.lists(csv_cell, min_size=len(header), max_size=len(header)), max_size=15))
    delim = data.draw(st.sampled_from([",", ";", "\t", "|"]))
    buf = io.StringIO()
    csv.writer(buf, delimiter=delim, lineterminator="\n").writerows([header, *rows])
    p = tmp_path / "prop.csv"
    p.write_text(buf.getvalue(), encoding="utf-8")
    f = load(p, delimiter=delim)
    t = f.tables[0]
    assert t.columns == header
    nonblank = [r for r in rows if not (len(r) == 1 and not r[0].strip()) and any(True for _ in r)]
    assert t.row_count == len(nonblank) == len(t.frame)


# --------------------------------------------------------------------------- bad paths


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "e.csv"
    p.touch()
    with pytest.raises(LoadError) as info:
        load(p)
    assert info.value.reason == "empty" and str(p) in str(info.value)


def test_blank_lines_only(tmp_path: Path) -> None:
    with pytest.raises(LoadError) as info:
        load(_write(tmp_path / "b.csv", "\n\n  \n"))
    assert info.value.reason == "empty"


def test_binary_renamed_csv(tmp_path: Path) -> None:
    p = tmp_path / "x.csv"
    p.write_bytes(bytes(range(256)) * 10)
    with pytest.raises(LoadError) as info:
        load(p)
    assert info.value.reason == "binary" and "NUL byte at offset 0" in str(info.value)
    assert "suffix says .csv" in str(info.value)


def test_sqlite_renamed_csv_is_read_as_sqlite(tmp_path: Path) -> None:
    p = tmp_path / "actually_db.csv"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (a INTEGER)")
    con.commit()
    con.close()
    f = load(p)
    assert f.kind == "sqlite" and any("suffix is .csv" in w for w in f.warnings)


def test_directory_named_csv(tmp_path: Path) -> None:
    d = tmp_path / "x.csv"
    d.mkdir()
    with pytest.raises(LoadError) as info:
        load(d)
    assert info.value.reason == "not_a_file" and "is a directory" in str(info.value)


def test_broken_symlink(tmp_path: Path) -> None:
    link = tmp_path / "gone.csv"
    os.symlink(tmp_path / "nowhere.csv", link)
    with pytest.raises(LoadError) as info:
        load(link)
    assert info.value.reason == "missing" and "broken symbolic link" in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(LoadError) as info:
        load(tmp_path / "nope.csv")
    assert info.value.reason == "missing"


def test_fifo_is_not_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    with pytest.raises(LoadError) as info:
        load(fifo)  # opening a FIFO would block forever
    assert info.value.reason == "not_a_file"


def test_not_tabular_kinds(tmp_path: Path) -> None:
    fa = _write(tmp_path / "s.fasta", ">a\nACGT\n>b\nGGCC\n")
    with pytest.raises(LoadError) as info:
        load(fa)
    assert info.value.reason == "not_tabular" and "FASTA" in str(info.value)


def test_legacy_xls_unsupported(tmp_path: Path) -> None:
    p = tmp_path / "old.xls"
    p.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600)
    with pytest.raises(LoadError) as info:
        load(p)
    assert info.value.reason == "unsupported" and ".xlsx" in str(info.value)


def test_bad_read_options() -> None:
    with pytest.raises(ValueError, match="delimiter"):
        ReadOptions(delimiter=",,")
    with pytest.raises(ValueError, match="max_rows"):
        ReadOptions(max_rows=-1)


# --------------------------------------------------------------------------- XLSX


def test_xlsx_merged_header_and_cached_formulas() -> None:
    f = load(EXAMPLES / "budget.xlsx")
    assert [t.name for t in f.tables] == ["Summary", "Lines"]
    s = f.table("Summary")
    assert s.source_sheet == "Summary" and s.header_rows == 2
    assert s.columns == ["Department", "Budget H1", "Budget H2", "Actual H1", "Actual H2", "Variance"]
    assert s.row_count == 6
    fr = s.frame
    expected = fr["Actual H1"] + fr["Actual H2"] - fr["Budget H1"] - fr["Budget H2"]
    assert fr["Variance"].tolist() == expected.tolist()  # cached formula values, not formula text
    lines = f.table("Lines")
    assert lines.header_rows == 1 and lines.row_count == 60
    assert lines.column_types["approved"] == "boolean"


def _workbook(path: Path, build) -> Path:  # type: ignore[no-untyped-def]
    from openpyxl import Workbook

    wb = Workbook()
    build(wb)
    wb.save(path)
    return path


def test_xlsx_formula_without_cached_value_warns(tmp_path: Path) -> None:
    def build(wb):  # type: ignore[no-untyped-def]
        ws = wb.active
        ws.append(["a", "b", "total"])
        for i in range(1, 4):
            ws.append([i, i * 2, f"=A{i + 1}+B{i + 1}"])

    t = load(_workbook(tmp_path / "f.xlsx", build)).tables[0]
    assert t.frame["total"].isna().all()
    assert any("3 of 3 formula cells have no cached value" in w and "C2" in w for w in t.warnings)


def test_xlsx_title_row_empty_sheet_and_wide_data(tmp_path: Path) -> None:
    def build(wb):  # type: ignore[no-untyped-def]
        ws = wb.active
        ws.title = "Data"
        ws["A1"] = "Quarterly report"
        ws.append([])
        ws.append(["x", "y"])
        ws.append([1, 2])
        ws.append([3, 4, 5])
        wb.create_sheet("Blank")

    f = load(_workbook(tmp_path / "t.xlsx", build))
    (t,) = f.tables
    assert t.columns == ["x", "y", "column_3"] and t.row_count == 2
    assert any("title 'Quarterly report'" in w for w in t.warnings)
    assert any("'Blank' is empty" in w for w in f.warnings)


def test_xlsx_truncated_is_corrupt(tmp_path: Path) -> None:
    data = (EXAMPLES / "budget.xlsx").read_bytes()
    p = tmp_path / "cut.xlsx"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(LoadError) as info:
        load(p)
    assert info.value.reason == "corrupt" and str(p) in str(info.value)


def test_xlsx_all_sheets_empty(tmp_path: Path) -> None:
    with pytest.raises(LoadError) as info:
        load(_workbook(tmp_path / "e.xlsx", lambda wb: None))
    assert info.value.reason == "empty" and "'Sheet'" in str(info.value)


# --------------------------------------------------------------------------- SQLite


def test_sqlite_keys_and_ddl() -> None:
    f = load(EXAMPLES / "shop.sqlite")
    assert [t.name for t in f.tables] == ["customers", "products", "orders", "order_items"]
    items = f.table("order_items")
    assert items.primary_key == ("order_id", "product_id")
    assert [(fk.columns, fk.ref_table, fk.ref_columns) for fk in items.foreign_keys] == [
        (("order_id",), "orders", ("order_id",)),
        (("product_id",), "products", ("product_id",)),
    ]
    assert items.declared_types["quantity"] == "INTEGER"
    assert "PRIMARY KEY (order_id, product_id)" in items.ddl
    assert "FOREIGN KEY (product_id) REFERENCES products(product_id)" in items.ddl
    con = sqlite3.connect(EXAMPLES / "shop.sqlite")
    n = con.execute("SELECT COUNT(*) FROM order_items").fetchone()[0]
    con.close()
    assert items.row_count == n


def test_sqlite_ddl_is_executable_and_fk_without_columns_resolves(tmp_path: Path) -> None:
    p = tmp_path / "db.sqlite"
    con = sqlite3.connect(p)
    con.executescript(
        'CREATE TABLE "a b" (k INTEGER PRIMARY KEY, v BLOB);'
        'CREATE TABLE c (id INTEGER, ak INTEGER REFERENCES "a b", note TEXT);'
        "INSERT INTO \"a b\" VALUES (1, x'00ff');"
        "INSERT INTO c VALUES (1, 1, 'ok');"
    )
    con.commit()
    con.close()
    f = load(p)
    c = f.table("c")
    assert [str(fk) for fk in c.foreign_keys] == ["(ak) -> a b(k)"]
    ab = f.table("a b")
    assert ab.column_types["v"] == "binary"
    other = sqlite3.connect(":memory:")
    for t in f.tables:
        other.execute(t.ddl)  # the regenerated DDL is valid SQL
    other.close()


def test_sqlite_no_tables(tmp_path: Path) -> None:
    p = tmp_path / "empty.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE VIEW v AS SELECT 1 AS x")
    con.commit()
    con.close()
    with pytest.raises(LoadError) as info:
        load(p)
    assert info.value.reason == "no_tables"


def test_sqlite_corrupt(tmp_path: Path) -> None:
    data = (EXAMPLES / "shop.sqlite").read_bytes()
    p = tmp_path / "bad.sqlite"
    p.write_bytes(data[:100] + b"\x13" * 3000)
    with pytest.raises(LoadError) as info:
        load(p)
    assert info.value.reason == "corrupt"


def test_sqlite_invalid_utf8_text_is_repaired(tmp_path: Path) -> None:
    p = tmp_path / "t.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (s TEXT)")
    con.execute("INSERT INTO t VALUES (CAST(x'41ff42' AS TEXT))")
    con.commit()
    con.close()
    f = load(p)
    assert f.tables[0].frame["s"].iloc[0] == "A\ufffdB"
    assert any("not valid UTF-8" in w for w in f.warnings)


def test_sqlite_row_limits(tmp_path: Path) -> None:
    p = tmp_path / "n.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (i INTEGER)")
    con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(500)])
    con.commit()
    con.close()
    t = load(p, max_rows=7, count_limit=50).tables[0]
    assert len(t.frame) == 7 and t.row_count == 51 and t.row_count_is_lower_bound


# --------------------------------------------------------------------------- Parquet, JSON


def test_parquet_types_and_nested(tmp_path: Path) -> None:
    df = pd.DataFrame(
        {
            "i": [1, 2, 3],
            "x": [0.5, None, 2.0],
            "s": ["a", "b", None],
            "nested": [{"k": 1}, {"k": 2}, {"k": 3}],
        }
    )
    p = tmp_path / "t.parquet"
    df.to_parquet(p)
    f = load(p, max_rows=2)
    t = f.tables[0]
    assert f.kind == "parquet" and t.row_count == 3 and len(t.frame) == 2
    assert t.column_types == {"i": "integer", "x": "float", "s": "string", "nested": "nested"}
    assert t.declared_types["i"] == "int64"


def test_parquet_corrupt(tmp_path: Path) -> None:
    p = tmp_path / "c.parquet"
    p.write_bytes(b"PAR1" + b"garbage" * 10)
    with pytest.raises(LoadError) as info:
        load(p)
    assert info.value.reason == "corrupt"


@pytest.mark.parametrize(
    ("value", "names", "rows"),
    [
        ([{"a": 1, "b": "x"}, {"a": 2, "c": True}], ["a", "b", "c"], 2),
        ([["a", "b"], [1, 2], [3, 4]], ["a", "b"], 2),
        ({"columns": ["p", "q"], "data": [[1, 2], [3, 4], [5, 6]]}, ["p", "q"], 3),
        ({"p": [1, 2, 3], "q": ["x", "y", "z"]}, ["p", "q"], 3),
        ({"r1": {"x": 1, "y": 2}, "r2": {"x": 3, "y": 4}}, ["key", "x", "y"], 2),
        ([1, 2, 3], ["value"], 3),
    ],
)
def test_json_table_shapes(value: object, names: list[str], rows: int) -> None:
    ((_, frame),) = json_tables(value, "t")
    assert list(frame.columns) == names and len(frame) == rows


def test_json_records_under_keys_become_tables(tmp_path: Path) -> None:
    doc = {"meta": {"v": 1}, "users": [{"id": 1}, {"id": 2}], "orders": [{"id": 9, "user": 1}]}
    f = load(_write(tmp_path / "d.json", json.dumps(doc)))
    assert [t.name for t in f.tables] == ["users", "orders"]


def test_json_not_tabular_and_corrupt(tmp_path: Path) -> None:
    with pytest.raises(LoadError) as info:
        load(_write(tmp_path / "cfg.json", json.dumps({"colors": {"a": "red"}, "debug": True})))
    assert info.value.reason == "not_tabular" and "'colors'" in str(info.value)
    with pytest.raises(LoadError) as info:
        load(_write(tmp_path / "bad.json", '{"a": [1, 2,\n  3,, 4]}'))
    assert info.value.reason == "corrupt" and info.value.where == "line 2, column 5"


def test_jsonl_streams_and_reports_bad_line(tmp_path: Path) -> None:
    p = _write(tmp_path / "r.jsonl", "".join(json.dumps({"i": i, "tags": [i]}) + "\n" for i in range(300)))
    t = load(p, max_rows=5, count_limit=100).tables[0]
    assert len(t.frame) == 5 and t.row_count == 101 and t.row_count_is_lower_bound
    assert t.column_types["tags"] == "nested"
    bad = _write(tmp_path / "b.jsonl", '{"a": 1}\n{"a": \n')
    with pytest.raises(LoadError) as info:
        load(bad)
    assert info.value.reason == "corrupt" and info.value.where == "line 2"


def test_json_document_holding_lines_is_read_as_jsonl(tmp_path: Path) -> None:
    f = load(_write(tmp_path / "x.json", '{"a": 1}\n{"a": 2}\n'))
    assert f.tables[0].row_count == 2


def test_kind_override_reads_text_as_csv(tmp_path: Path) -> None:
    p = _write(tmp_path / "data.log", "a b\n1 2\n")
    with pytest.raises(LoadError):
        load(p)
    t = load(p, kind="csv", delimiter=" ").tables[0]
    assert t.columns == ["a", "b"]


def test_infer_column_type_edge_cases() -> None:
    from datadojo.corpus import infer_column_type

    assert infer_column_type(pd.Series([1.0, 2.0, np.nan])) == "integer"
    assert infer_column_type(pd.Series([None, None], dtype=object)) == "empty"
    assert infer_column_type(pd.Series(["a", 1], dtype=object)) == "mixed"
    assert infer_column_type(pd.Series(["03/04/2021", "12/31/2020"])) == "datetime"
    assert infer_column_type(pd.Series([b"\x00\x01"], dtype=object)) == "binary"
    assert infer_column_type(pd.Series(["x" * 100, "y" * 90])) == "text"
    assert infer_column_type(pd.Series([[1], [2]], dtype=object)) == "nested"


class _Shown:
    """An object column value that is neither a number nor a date: judged by its text."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


@pytest.mark.parametrize(
    ("values", "kind"),
    [
        ([decimal.Decimal("1.5"), decimal.Decimal("2")], "string"),
        ([uuid.UUID(int=5)], "string"),
        (["a", _Shown("b")], "string"),
        ([_Shown("a\x01b")], "binary"),
        ([_Shown("2021-01-02"), "2021-03-04"], "datetime"),
        ([_Shown("x" * 100), "y" * 90], "text"),
        ([True, False], "boolean"),
        ([True, 1], "float"),
        ([1.0, float("nan"), 2.0], "integer"),
        ([datetime.date(2020, 1, 1)], "datetime"),
        (["a", datetime.date(2020, 1, 1)], "mixed"),
    ],
)
def test_infer_column_type_of_object_values(values: list[object], kind: str) -> None:
    """Strings and other objects' text go through the same checks (control characters, dates, length)."""
    from datadojo.corpus import infer_column_type

    assert infer_column_type(pd.Series(values, dtype=object)) == kind


def test_file_kinds_extend_the_data_model_kinds() -> None:
    """The sniffer's kind names start with the data model's, so a sniffed kind can become a DataFile kind."""
    from datadojo.corpus.sniff import FILE_KINDS
    from datadojo.types import DATA_KINDS

    assert FILE_KINDS[: len(DATA_KINDS)] == DATA_KINDS

"""XLSX reader: every sheet, cached formula values, merged header cells, streaming row bound.

Kaggle spreadsheets (DataMind §3.1 kept 560 ``.xlsx`` files) are rarely a clean rectangle: headers span
two rows with merged group cells ("Budget" over "H1" and "H2"), formulas carry the value Excel cached when
it saved, and a title line sits above the table. The reader therefore

* streams each sheet with openpyxl's read-only mode (``data_only=True``: the cached values, never the
  formula text) and stops counting past ``ReadOptions.count_limit``;
* finds merged ranges by scanning the sheet's XML for ``<mergeCell ref=…>`` (read-only mode does not
  expose them) and, when a merged cell starts the header row, reads as many header rows as the merges
  span, filling each merged value across its range and joining the levels (``"Budget H1"``);
* skips a leading title row (one non-empty cell above a wider row) with a warning;
* warns when formula cells have no cached value (files written by programs that do not compute
  formulas): those cells read as missing, exactly what an agent using pandas would see.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import zipfile
from pathlib import Path
from typing import Any

import pandas as pd

from datadojo.corpus.sniff import Sniffed
from datadojo.corpus.tables import LoadedFile, LoadError, ReadOptions, Table

__all__ = ["read_xlsx"]

_MERGE_RE = re.compile(
    rb'<(?:[A-Za-z_][\w.-]*:)?mergeCell\b[^>]*?\bref="([A-Za-z]+[0-9]+(?::[A-Za-z]+[0-9]+)?)"'
)
_FORMULA_RE = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?f\b")
_MAX_HEADER_ROWS = 5
_Range = tuple[int, int, int, int]  # min_col, min_row, max_col, max_row


def _empty(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def _n_filled(row: tuple[Any, ...]) -> int:
    return sum(not _empty(v) for v in row)


def _label(v: Any) -> str:
    if isinstance(v, dt.datetime) and v.time() == dt.time(0):
        return v.date().isoformat()
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v).strip()


def _scan_sheet_xml(
    zf: zipfile.ZipFile, member: str | None, opts: ReadOptions
) -> tuple[list[_Range], bool, str | None]:
    """Merged ranges and whether any formula exists, from one streaming pass over the sheet XML."""
    from openpyxl.utils.cell import range_boundaries

    if member is None:
        return [], False, "merged cells could not be located (unknown sheet part), header merges ignored"
    member = member.lstrip("/")
    try:
        info = zf.getinfo(member)
    except KeyError:
        return [], False, f"sheet part {member} is missing, header merges ignored"
    if info.file_size > opts.xlsx_scan_max_bytes:
        return [], False, f"sheet XML is {info.file_size} bytes, over xlsx_scan_max_bytes; merges not read"
    refs: set[bytes] = set()
    has_formula = False
    tail = b""
    with zf.open(info) as fh:
        while chunk := fh.read(1 << 20):
            buf = tail + chunk
            refs.update(m.group(1) for m in _MERGE_RE.finditer(buf))
            has_formula = has_formula or _FORMULA_RE.search(buf) is not None
            tail = buf[-512:]
    ranges = []
    for ref in refs:
        text = ref.decode()
        if ":" not in text:
            text = f"{text}:{text}"
        ranges.append(tuple(range_boundaries(text)))
    return sorted(ranges, key=lambda r: (r[1], r[0])), has_formula, None  # type: ignore[return-value]


def read_xlsx(path: Path, sniffed: Sniffed, opts: ReadOptions) -> LoadedFile:
    """Read every worksheet holding at least one cell into a :class:`Table` named after the sheet.

    Raises :class:`LoadError` with reason ``corrupt`` (not a zip, truncated archive, damaged sheet XML,
    naming the sheet when one sheet is the problem) or ``empty`` (no sheet holds any cell).
    """
    from openpyxl import load_workbook

    try:
        wb = load_workbook(path, read_only=True, data_only=True)
        zf = zipfile.ZipFile(path)
    except Exception as exc:  # openpyxl raises a zoo (BadZipFile, KeyError, ValueError, zlib.error…)
        raise LoadError(
            path, "corrupt", f"not a readable XLSX workbook ({type(exc).__name__}: {exc})"
        ) from exc
    tables: list[Table] = []
    warnings: list[str] = []
    formula_wb: list[Any] = []
    try:
        for ws in wb.worksheets:
            try:
                table = _read_sheet(path, ws, zf, opts, formula_wb)
            except LoadError:
                raise
            except Exception as exc:
                raise LoadError(
                    path,
                    "corrupt",
                    f"cannot read the sheet ({type(exc).__name__}: {exc})",
                    f"sheet {ws.title!r}",
                ) from exc
            if table is None:
                warnings.append(f"sheet {ws.title!r} is empty and was skipped")
            else:
                tables.append(table)
    finally:
        wb.close()
        zf.close()
        for f in formula_wb:
            f.close()
    if not tables:
        names = ", ".join(repr(ws.title) for ws in wb.worksheets) or "none"
        raise LoadError(path, "empty", f"no worksheet holds any cell (sheets: {names})")
    return LoadedFile(path=path, kind="xlsx", tables=tables, size_bytes=sniffed.size, warnings=warnings)


def _read_sheet(
    path: Path, ws: Any, zf: zipfile.ZipFile, opts: ReadOptions, formula_wb: list[Any]
) -> Table | None:
    warnings: list[str] = []
    merges, has_formula, note = _scan_sheet_xml(zf, getattr(ws, "_worksheet_path", None), opts)
    if note:
        warnings.append(note)
    ws.reset_dimensions()  # a wrong <dimension> tag must not cut rows or columns off
    rows = enumerate(ws.iter_rows(min_row=1, values_only=True), start=1)
    lookahead: list[tuple[int, tuple[Any, ...]]] = []

    def next_filled() -> tuple[int, tuple[Any, ...]] | None:
        if lookahead:
            return lookahead.pop(0)
        for item in rows:
            if _n_filled(item[1]):
                return item
        return None

    first = next_filled()
    if first is None:
        return None
    for _ in range(3):  # title lines: one filled cell above a wider row
        if _n_filled(first[1]) != 1:
            break
        nxt = next_filled()
        if nxt is None or _n_filled(nxt[1]) < 2:
            if nxt is not None:
                lookahead.append(nxt)
            break
        title = next(_label(v) for v in first[1] if not _empty(v))
        warnings.append(f"row {first[0]}: title {title!r} above the table was skipped")
        first = nxt
    r0 = first[0]
    depth = 1
    for min_col, min_row, max_col, max_row in merges:
        if min_row == r0:
            depth = max(depth, max_row - r0 + 1, 2 if max_col > min_col else 1)
    depth = min(depth, _MAX_HEADER_ROWS)
    header_rows: list[list[Any]] = [list(first[1])]
    last_row = r0
    for want in range(r0 + 1, r0 + depth):
        item = lookahead.pop(0) if lookahead else next(rows, None)
        if item is None:
            break
        last_row = item[0]
        if item[0] != want:  # cannot happen with gap filling, kept for safety
            lookahead.append(item)
            break
        header_rows.append(list(item[1]))
    names = _header_names(header_rows, r0, merges, warnings)
    data_merges = sum(1 for m in merges if m[1] > r0 + len(header_rows) - 1)
    if data_merges:
        warnings.append(
            f"{data_merges} merged ranges below the header: their value sits in the first cell only"
        )

    kept: list[list[Any]] = []
    n_rows = 0
    width = len(names)
    for rownum, row in itertools.chain(lookahead, rows):
        last_row = rownum
        if not _n_filled(row):
            continue
        n_rows += 1
        if opts.keep_more(len(kept)):
            values = list(row)
            while values and _empty(values[-1]):
                values.pop()
            width = max(width, len(values))
            kept.append(values)
        if not opts.count_more(n_rows):
            break
    if width > len(names):
        extra = [f"column_{i}" for i in range(len(names) + 1, width + 1)]
        warnings.append(f"data wider than the header: columns {', '.join(extra)} named by position")
        names = names + extra
    frame = pd.DataFrame([v + [None] * (width - len(v)) for v in kept], columns=names, dtype=object)
    frame = frame.infer_objects()
    if has_formula:
        _check_cached_formulas(path, ws.title, last_row, formula_wb, warnings)
    return Table(
        name=str(ws.title),
        frame=frame,
        source_sheet=str(ws.title),
        header_rows=len(header_rows),
        row_count=n_rows,
        row_count_is_lower_bound=opts.over_limit(n_rows),
        warnings=warnings,
    )


def _header_names(
    header_rows: list[list[Any]], r0: int, merges: list[_Range], warnings: list[str]
) -> list[str]:
    depth = len(header_rows)
    width = max(len(r) for r in header_rows)
    grid = [r + [None] * (width - len(r)) for r in header_rows]
    for min_col, min_row, max_col, max_row in merges:
        if min_row < r0 or min_row > r0 + depth - 1:
            continue
        value = grid[min_row - r0][min_col - 1] if min_col - 1 < width else None
        for r in range(min_row, min(max_row, r0 + depth - 1) + 1):
            for c in range(min_col, min(max_col, width) + 1):
                grid[r - r0][c - 1] = value
    while width and all(_empty(grid[r][width - 1]) for r in range(depth)):
        width -= 1
    names: list[str] = []
    seen: set[str] = set()
    for c in range(width):
        parts: list[str] = []
        for r in range(depth):
            v = grid[r][c]
            if not _empty(v) and (not parts or parts[-1] != _label(v)):
                parts.append(_label(v))
        base = " ".join(parts) or f"column_{c + 1}"
        name, k = base, 2
        while name in seen:
            name = f"{base}_{k}"
            k += 1
        seen.add(name)
        names.append(name)
    if depth > 1:
        warnings.append(f"header spans rows {r0}-{r0 + depth - 1} (merged cells); levels joined with spaces")
    return names


def _check_cached_formulas(
    path: Path, title: str, last_row: int, formula_wb: list[Any], warnings: list[str]
) -> None:
    from openpyxl import load_workbook

    if not formula_wb:
        formula_wb.append(load_workbook(path, read_only=True, data_only=False))
    wb_values = load_workbook(path, read_only=True, data_only=True)
    try:
        ws_f = formula_wb[0][title]
        ws_v = wb_values[title]
        ws_f.reset_dimensions()
        ws_v.reset_dimensions()
        missing: list[str] = []
        n_formulas = 0
        for r, (fr, vr) in enumerate(
            zip(
                ws_f.iter_rows(min_row=1, max_row=last_row),
                ws_v.iter_rows(min_row=1, max_row=last_row, values_only=True),
                strict=False,
            ),
            start=1,
        ):
            for c, cell in enumerate(fr):
                if getattr(cell, "data_type", None) == "f" or (
                    isinstance(cell.value, str) and cell.value.startswith("=")
                ):
                    n_formulas += 1
                    if c >= len(vr) or vr[c] is None:
                        missing.append(getattr(cell, "coordinate", None) or f"row {r} column {c + 1}")
    finally:
        wb_values.close()
    if missing:
        warnings.append(
            f"{len(missing)} of {n_formulas} formula cells have no cached value (the workbook was saved "
            f"without computing them), so they read as missing: {', '.join(missing[:10])}"
            + (" …" if len(missing) > 10 else "")
        )

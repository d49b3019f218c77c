"""JSON / JSON Lines reader: the tables a JSON file holds, or a clear "not a table".

JSON files in a crawled corpus are sometimes tables (a list of records, a column-oriented object, a
pandas ``split`` export ``{"columns": …, "data": …}``, ``{"rows": [records]}``) and often not (a config,
a Frictionless ``datapackage.json``). DataMind §3.1 discards "non-tabular formats"; the readers must
therefore recognize the tabular shapes and name the shape they found otherwise.

JSON Lines (``.jsonl``, ``.ndjson``, or a ``.json`` file that turns out to hold one document per line) is
streamed: rows past ``ReadOptions.max_rows`` are counted, not parsed into the frame, and counting stops
past ``count_limit``. A single JSON document must be parsed whole, so files over
``ReadOptions.json_max_bytes`` are refused with reason ``too_large``. Nested values (objects, arrays inside
a record) are kept as Python objects so that the anomalous-type filter sees them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from datadojo.corpus.sniff import Sniffed
from datadojo.corpus.tables import LoadedFile, LoadError, ReadOptions, Table

__all__ = ["json_tables", "read_json"]

_SCALAR = (str, int, float, bool, type(None))


def _records_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    columns: dict[str, None] = {}
    for r in records:
        for k in r:
            columns.setdefault(str(k), None)
    rows = [[r.get(c) for c in columns] for r in records]
    return pd.DataFrame(rows, columns=list(columns), dtype=object).infer_objects()


def _rows_frame(rows: list[list[Any]]) -> pd.DataFrame:
    first = rows[0]
    width = max(len(r) for r in rows)
    if all(isinstance(v, str) for v in first) and len(first) == width and len(rows) > 1:
        names, body = [str(v) for v in first], rows[1:]
    else:
        names, body = [f"column_{i}" for i in range(1, width + 1)], rows
    body = [list(r) + [None] * (width - len(r)) for r in body]
    return pd.DataFrame(body, columns=names, dtype=object).infer_objects()


def json_tables(value: Any, name: str) -> list[tuple[str, pd.DataFrame]]:
    """The tables found in a parsed JSON value, as ``(name, frame)`` pairs; ``[]`` when none.

    Recognized shapes: a list of objects (records); a list of arrays (rows, the first one a header when it
    is all strings); a list of scalars (one column ``value``); ``{"columns": [...], "data": [[...]]}``; an
    object of equal-length arrays (columns); an object whose values are objects with the same keys
    (index-oriented, the keys become column ``key``); and any object member holding records, each its own
    table named after the member.
    """
    if isinstance(value, list):
        if not value:
            return [(name, pd.DataFrame())]
        if all(isinstance(v, dict) for v in value):
            return [(name, _records_frame(value))]
        if all(isinstance(v, list) for v in value):
            return [(name, _rows_frame(value))]
        if all(isinstance(v, _SCALAR) for v in value):
            return [(name, pd.DataFrame({"value": pd.Series(value, dtype=object)}).infer_objects())]
        return []
    if not isinstance(value, dict) or not value:
        return []
    if isinstance(value.get("columns"), list) and isinstance(value.get("data"), list):
        cols = [str(c) for c in value["columns"]]
        data = value["data"]
        if all(isinstance(r, list) and len(r) == len(cols) for r in data):
            return [(name, pd.DataFrame(data, columns=cols, dtype=object).infer_objects())]
    values = list(value.values())
    columnar = all(isinstance(v, list) for v in values) and len({len(v) for v in values}) == 1 and values[0]
    if columnar and all(isinstance(x, _SCALAR) for v in values for x in v):
        frame = pd.DataFrame({str(k): pd.Series(v, dtype=object) for k, v in value.items()})
        return [(name, frame.infer_objects())]
    if len(values) >= 2 and all(isinstance(v, dict) and v for v in values):
        keysets = {tuple(v.keys()) for v in values}
        if len(keysets) == 1 and all(isinstance(x, _SCALAR) for v in values for x in v.values()):
            records = [{"key": k, **v} for k, v in value.items()]
            return [(name, _records_frame(records))]
    found: list[tuple[str, pd.DataFrame]] = []
    for key, v in value.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            found.append((str(key), _records_frame(v)))
    return found


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        keys = list(value)[:8]
        more = ", …" if len(value) > 8 else ""
        return f"an object with keys {', '.join(map(repr, keys))}{more} and no list of records"
    if isinstance(value, list):
        return "an array mixing objects, arrays and scalars"
    return f"a single {type(value).__name__} value"


def read_json(path: Path, sniffed: Sniffed, opts: ReadOptions) -> LoadedFile:
    """Read a JSON document or a JSON Lines file into tables.

    Raises :class:`LoadError` with reason ``corrupt`` (invalid JSON, naming line and column), ``encoding``,
    ``too_large`` (a single document over ``json_max_bytes``) or ``not_tabular`` (valid JSON holding no
    table, naming the shape it holds).
    """
    encoding = sniffed.bom_encoding or "utf-8"
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return _read_lines(path, sniffed, opts, encoding)
    if sniffed.size > opts.json_max_bytes:
        raise LoadError(
            path,
            "too_large",
            f"a single JSON document of {sniffed.size:,} bytes exceeds json_max_bytes={opts.json_max_bytes:,} "
            "(JSON Lines files are streamed instead)",
        )
    try:
        text = path.read_bytes().decode(encoding)
    except UnicodeDecodeError as exc:
        raise LoadError(path, "encoding", f"not valid {encoding} (byte offset {exc.start})") from exc
    try:
        value = json.loads(text.lstrip("\ufeff"))
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" and exc.lineno > 1:
            return _read_lines(path, sniffed, opts, encoding)
        raise LoadError(
            path, "corrupt", f"not valid JSON: {exc.msg}", f"line {exc.lineno}, column {exc.colno}"
        ) from exc
    found = json_tables(value, path.stem)
    if not found:
        raise LoadError(
            path, "not_tabular", f"valid JSON but not a table: the top level is {_describe(value)}"
        )
    tables = []
    for name, frame in found:
        n = len(frame)
        if opts.max_rows is not None:
            frame = frame.iloc[: opts.max_rows]
        tables.append(Table(name=name, frame=frame, row_count=n))
    return LoadedFile(path=path, kind="json", tables=tables, size_bytes=sniffed.size, encoding=encoding)


def _read_lines(path: Path, sniffed: Sniffed, opts: ReadOptions, encoding: str) -> LoadedFile:
    records: list[Any] = []
    n_rows = 0
    with path.open("r", encoding=encoding, newline="") as fh:
        lineno = 0
        try:
            for lineno, line in enumerate(fh, start=1):
                text = line.strip().lstrip("\ufeff")
                if not text:
                    continue
                n_rows += 1
                if opts.keep_more(len(records)):
                    try:
                        records.append(json.loads(text))
                    except json.JSONDecodeError as exc:
                        raise LoadError(
                            path, "corrupt", f"not valid JSON: {exc.msg}", f"line {lineno}"
                        ) from exc
                if not opts.count_more(n_rows):
                    break
        except UnicodeDecodeError as exc:
            raise LoadError(path, "encoding", f"not valid {encoding}", f"after line {lineno}") from exc
    if not records:
        raise LoadError(path, "empty", "no JSON records (only blank lines)")
    if not all(isinstance(r, dict) for r in records):
        bad = next(i for i, r in enumerate(records) if not isinstance(r, dict))
        raise LoadError(path, "not_tabular", "JSON Lines record is not an object", f"record {bad + 1}")
    table = Table(
        name=path.stem,
        frame=_records_frame(records),
        row_count=n_rows,
        row_count_is_lower_bound=opts.over_limit(n_rows),
    )
    return LoadedFile(path=path, kind="json", tables=[table], size_bytes=sniffed.size, encoding=encoding)

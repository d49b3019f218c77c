"""SQLite reader: every table with declared column types, primary keys and foreign keys, plus DDL.

DataMind §3.1 draws 1,954 ``.sqlite`` files from BIRD and OmniSQL and, in §3.2 Step 1, describes each by
its schema ("table names, column names, foreign key relationships"); EnvLunch builds SQL environments
whose joins follow the foreign keys. So the reader returns, per table, the declared types, the primary key
(in key order), the foreign keys (a ``REFERENCES t`` without columns resolved to ``t``'s primary key) and a
``CREATE TABLE`` statement regenerated from that schema — compact and uniform, unlike the original DDL with
its comments and quirks.

The database is opened read-only and ``immutable`` (no locks, no journal, never modified). Rows are read
with ``LIMIT`` (``ReadOptions.max_rows``) and counted with a bounded ``COUNT`` (``count_limit``), so a
multi-gigabyte database is profiled without reading it whole. Text that is not valid UTF-8 is decoded with
replacement characters and reported, instead of aborting the read as :mod:`sqlite3` does by default.
Views and SQLite's internal tables are not read; a table that cannot be read (e.g. a virtual table whose
module is not compiled in) is skipped with a warning.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from datadojo.corpus.sniff import Sniffed
from datadojo.corpus.tables import ForeignKey, LoadedFile, LoadError, ReadOptions, Table

__all__ = ["quote_ident", "read_sqlite", "sqlite_ddl"]

_PLAIN_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEYWORDS = {
    "order",
    "group",
    "select",
    "from",
    "where",
    "table",
    "index",
    "key",
    "primary",
    "references",
    "values",
}


def quote_ident(name: str, *, always: bool = True) -> str:
    """Quote an SQL identifier, doubling inner quotes; with ``always=False`` only when it needs quoting."""
    if not always and _PLAIN_IDENT.match(name) and name.lower() not in _KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def sqlite_ddl(
    name: str,
    columns: list[tuple[str, str, bool]],
    primary_key: tuple[str, ...],
    foreign_keys: tuple[ForeignKey, ...],
) -> str:
    """A one-statement ``CREATE TABLE`` from ``(column, declared type, not null)`` triples and the keys.

    A single-column primary key is written inline; a composite one as a table constraint. Foreign keys
    are table constraints, one per key, so a prompt shows every join path on its own line.
    """
    q = lambda n: quote_ident(n, always=False)  # noqa: E731
    parts = []
    for col, decl, notnull in columns:
        text = f"{q(col)} {decl}".rstrip() if decl else q(col)
        if len(primary_key) == 1 and primary_key[0] == col:
            text += " PRIMARY KEY"
        elif notnull:
            text += " NOT NULL"
        parts.append(text)
    if len(primary_key) > 1:
        parts.append(f"PRIMARY KEY ({', '.join(map(q, primary_key))})")
    for fk in foreign_keys:
        parts.append(
            f"FOREIGN KEY ({', '.join(map(q, fk.columns))}) REFERENCES {q(fk.ref_table)}"
            f"({', '.join(map(q, fk.ref_columns))})"
        )
    body = ",\n  ".join(parts)
    return f"CREATE TABLE {q(name)} (\n  {body}\n);"


class _Decoder:
    """``text_factory`` that decodes UTF-8 and counts values it had to repair."""

    def __init__(self) -> None:
        self.bad = 0

    def __call__(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.bad += 1
            return raw.decode("utf-8", errors="replace")


def _connect(path: Path) -> sqlite3.Connection:
    uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


def read_sqlite(path: Path, sniffed: Sniffed, opts: ReadOptions) -> LoadedFile:
    """Read every table of a SQLite database.

    Raises :class:`LoadError` with reason ``corrupt`` (not a database, malformed image) or ``no_tables``
    (a valid database without any table).
    """
    try:
        con = _connect(path)
    except sqlite3.Error as exc:
        raise LoadError(path, "corrupt", f"cannot open as SQLite: {exc}") from exc
    decoder = _Decoder()
    con.text_factory = decoder
    warnings: list[str] = []
    try:
        try:
            names = [
                r[0]
                for r in con.execute(
                    "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
                )
            ]
        except sqlite3.DatabaseError as exc:
            raise LoadError(path, "corrupt", f"not a readable SQLite database: {exc}") from exc
        if not names:
            raise LoadError(
                path, "no_tables", "the database holds no tables (views and internal tables aside)"
            )
        schemas = {n: _schema(con, n) for n in names}
        tables = []
        for name in names:
            try:
                tables.append(_read_table(con, name, schemas, opts))
            except sqlite3.Error as exc:
                warnings.append(f"table {name!r} skipped: {exc}")
        if not tables:
            raise LoadError(path, "corrupt", "no table could be read: " + "; ".join(warnings))
    finally:
        con.close()
    if decoder.bad:
        warnings.append(f"{decoder.bad} text values were not valid UTF-8 and were decoded with replacements")
    return LoadedFile(path=path, kind="sqlite", tables=tables, size_bytes=sniffed.size, warnings=warnings)


_Schema = tuple[list[tuple[str, str, bool]], tuple[str, ...], list[tuple[int, str, str, str | None]]]


def _schema(con: sqlite3.Connection, name: str) -> _Schema:
    info = con.execute(f"PRAGMA table_info({quote_ident(name)})").fetchall()
    columns = [(str(r[1]), str(r[2] or ""), bool(r[3])) for r in info]
    pk = tuple(str(r[1]) for r in sorted((r for r in info if r[5]), key=lambda r: r[5]))
    fks = [
        (int(r[0]), str(r[2]), str(r[3]), None if r[4] is None else str(r[4]))
        for r in con.execute(f"PRAGMA foreign_key_list({quote_ident(name)})").fetchall()
    ]
    return columns, pk, fks


def _foreign_keys(name: str, schemas: dict[str, _Schema], warnings: list[str]) -> tuple[ForeignKey, ...]:
    _, _, raw = schemas[name]
    groups: dict[int, list[tuple[str, str, str | None]]] = {}
    for fk_id, ref_table, col, ref_col in raw:
        groups.setdefault(fk_id, []).append((ref_table, col, ref_col))
    lower = {n.lower(): n for n in schemas}
    out = []
    for fk_id in sorted(groups, reverse=True):  # SQLite numbers keys last-declared first
        parts = groups[fk_id]
        ref_table = lower.get(parts[0][0].lower(), parts[0][0])
        cols = tuple(p[1] for p in parts)
        refs = [p[2] for p in parts]
        if any(r is None for r in refs):
            target_pk = schemas[ref_table][1] if ref_table in schemas else ()
            if len(target_pk) == len(cols):
                refs = list(target_pk)
            else:
                warnings.append(f"foreign key {cols} -> {ref_table}: target columns unknown")
                refs = [r or "?" for r in refs]
        if ref_table not in schemas:
            warnings.append(f"foreign key {', '.join(cols)} references a missing table {ref_table!r}")
        out.append(ForeignKey(cols, ref_table, tuple(str(r) for r in refs)))
    return tuple(out)


def _read_table(con: sqlite3.Connection, name: str, schemas: dict[str, _Schema], opts: ReadOptions) -> Table:
    columns, pk, _ = schemas[name]
    warnings: list[str] = []
    fks = _foreign_keys(name, schemas, warnings)
    qn = quote_ident(name)
    if opts.count_limit is None:
        n_rows = int(con.execute(f"SELECT COUNT(*) FROM {qn}").fetchone()[0])
    else:
        n_rows = int(
            con.execute(
                f"SELECT COUNT(*) FROM (SELECT 1 FROM {qn} LIMIT ?)", (opts.count_limit + 1,)
            ).fetchone()[0]
        )
    limit = -1 if opts.max_rows is None else opts.max_rows
    cur = con.execute(f"SELECT * FROM {qn} LIMIT ?", (limit,))
    names = [d[0] for d in cur.description]
    frame = pd.DataFrame(cur.fetchall(), columns=names, dtype=object).infer_objects()
    return Table(
        name=name,
        frame=frame,
        declared_types={c: d for c, d, _ in columns},
        primary_key=pk,
        foreign_keys=fks,
        row_count=n_rows,
        row_count_is_lower_bound=opts.over_limit(n_rows),
        ddl=sqlite_ddl(name, columns, pk, fks),
        warnings=warnings,
    )

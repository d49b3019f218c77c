"""The metadata profile *d* of a data file: per table its columns, types, statistics and sample rows.

DataMind §3.2 ("Query Categorization and Synthesis", Step 1: metadata extraction) gives its query and
trajectory models a description *d* of each file — "table headers, column names, data types for each
column, and representative rows", and for SQLite "the database schema (table names, column names, foreign
key relationships)" — never the raw file. This module computes that description as data
(:class:`FileProfile`, JSON-serializable); :mod:`datadojo.corpus.render` turns it into prompt text within
a character budget.

Per column: the inferred type, the declared type (SQLite / Parquet), missing count and ratio, distinct
count, numeric or date range (and mean), top categories, and a *role* hint. Roles serve EnvLunch (its
counterfactual copies rescale every "measure column … while identifier and key columns are never
changed", §3): ``key`` (primary or foreign key), ``identifier`` (id-named, or unique strings / a unique
running integer), ``measure`` (other numbers), ``time``, ``flag`` (booleans), ``category`` (few distinct
values), ``text`` (long free text) and ``other``.

Statistics are computed over the rows the reader kept (``Table.frame``); when that is not the whole table
the profile says so (``n_rows_profiled``).
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from datadojo.corpus.readers import load_sniffed
from datadojo.corpus.sniff import Sniffed, sniff
from datadojo.corpus.tables import LoadedFile, LoadError, ReadOptions, Table

__all__ = [
    "COLUMN_ROLES",
    "ColumnProfile",
    "FileProfile",
    "TableProfile",
    "column_role",
    "column_roles",
    "profile_file",
    "profile_loaded",
    "profile_table",
]

COLUMN_ROLES: tuple[str, ...] = ("key", "identifier", "measure", "time", "flag", "category", "text", "other")

_ID_NAME = re.compile(
    r"(?i:^id$|^id[_ ]|[_ ]id$|^key$|[_ ]key$|identifier|uuid|guid|^code$|[_ ]code$|[_ ]no$)|(?<=[a-z])(Id|ID)$"
)
_YEAR_NAME = re.compile(r"(^|[_ ])(year|yr|yyyy)$", re.IGNORECASE)
_VALUE_CHARS = 40
_TOP_K = 5
_SAMPLE_ROWS = 3


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ColumnProfile(_Model):
    """What the profile says about one column (see module docstring for ``role``)."""

    name: str
    type: str
    declared_type: str | None = None
    role: str = "other"
    n_missing: int = 0
    missing_ratio: float = 0.0
    n_distinct: int = 0
    unique: bool = False
    min: int | float | str | None = None
    max: int | float | str | None = None
    mean: float | None = None
    top: list[tuple[str, int]] = Field(default_factory=list)
    primary_key: bool = False
    foreign_key: str | None = None


class TableProfile(_Model):
    """One table: shape, keys, columns, a few representative rows, and the SQLite DDL when there is one."""

    name: str
    n_rows: int
    n_rows_is_lower_bound: bool = False
    n_rows_profiled: int = 0
    n_columns: int
    columns: list[ColumnProfile]
    sample_rows: list[list[str]] = Field(default_factory=list)
    primary_key: list[str] = Field(default_factory=list)
    foreign_keys: list[str] = Field(default_factory=list)
    ddl: str | None = None
    source_sheet: str | None = None
    header_rows: int = 1
    warnings: list[str] = Field(default_factory=list)


class FileProfile(_Model):
    """A file's profile. ``tables`` for tabular files; ``summary`` for other kinds (FASTA, images…);
    ``error`` when the file could not be read (then ``error_reason`` holds the reader's reason code)."""

    path: str
    name: str
    kind: str
    size_bytes: int = 0
    detail: str | None = None
    encoding: str | None = None
    delimiter: str | None = None
    tables: list[TableProfile] = Field(default_factory=list)
    summary: dict[str, Any] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    error: str | None = None
    error_reason: str | None = None


def _short(v: Any, limit: int = _VALUE_CHARS) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return ""
    if isinstance(v, pd.Timestamp):
        text = v.date().isoformat() if v == v.normalize() else v.isoformat()
    elif isinstance(v, float):
        text = f"{v:.6g}"
    elif isinstance(v, bytes | bytearray | memoryview):
        text = f"<{len(bytes(v))} bytes>"
    else:
        text = str(v)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _present(series: pd.Series) -> np.ndarray:
    """The non-missing values of a column as a NumPy array (vectorized; no per-call pandas overhead)."""
    arr = series.to_numpy()
    if arr.dtype.kind in "biu":
        return arr
    return arr[~pd.isna(arr)]


def _distinct(values: np.ndarray, col_type: str) -> int:
    if col_type in ("nested", "mixed", "binary"):
        return len(set(map(repr, values)))
    try:
        return len(set(values.tolist()))
    except TypeError:
        return len(set(map(repr, values)))


def column_role(
    name: str,
    series: pd.Series,
    col_type: str,
    *,
    is_key: bool = False,
    n_distinct: int | None = None,
) -> str:
    """The role hint of one column (one of :data:`COLUMN_ROLES`), from its name, type and values.

    Rules in order: declared key → ``key``; datetime, or an integer named like a year with values in
    1000–2999 → ``time``; boolean → ``flag``; id-like name (``id``, ``*_id``, ``customerId``, ``*_code``)
    or unique strings or a unique run of consecutive integers → ``identifier``; other integers/floats →
    ``measure``; strings with at most 20 distinct values or a distinct ratio ≤ 0.5 → ``category``; long
    strings → ``text``; anything else → ``other``.
    """
    return _role(name, _present(series), col_type, is_key, n_distinct)


def _as_float(values: np.ndarray) -> np.ndarray | None:
    try:
        out = values.astype("float64")
    except (TypeError, ValueError):
        out = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    out = out[np.isfinite(out)]
    return out if out.size else None


def _role(name: str, values: np.ndarray, col_type: str, is_key: bool, n_distinct: int | None) -> str:
    if is_key:
        return "key"
    n = len(values)
    if n_distinct is None:
        n_distinct = _distinct(values, col_type)
    if col_type == "datetime":
        return "time"
    nums = _as_float(values) if col_type == "integer" and n else None
    if (
        nums is not None
        and _YEAR_NAME.search(name)
        and nums.size == n
        and np.all((nums >= 1000) & (nums <= 2999))
    ):
        return "time"
    if col_type == "boolean":
        return "flag"
    if col_type in ("integer", "string") and _ID_NAME.search(name.strip()) and n:
        return "identifier"
    unique = n > 1 and n_distinct == n
    if col_type == "string" and unique and n >= 10:
        return "identifier"
    if nums is not None and unique and n >= 10 and np.all(np.diff(np.sort(nums)) == 1):
        return "identifier"
    if col_type in ("integer", "float"):
        return "measure"
    if col_type == "string":
        if n_distinct <= 20 or (n and n_distinct / n <= 0.5):
            return "category"
        return "other"
    if col_type == "text":
        return "text"
    return "other"


_ISO_DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?$")


def _range(values: np.ndarray, col_type: str) -> tuple[Any, Any, float | None]:
    if not len(values):
        return None, None, None
    if col_type in ("integer", "float"):
        nums = _as_float(values)
        if nums is None:
            return None, None, None
        lo, hi, mean = float(nums.min()), float(nums.max()), float(nums.mean())
        if col_type == "integer":
            return int(lo), int(hi), mean
        return lo, hi, mean
    if col_type == "datetime":
        if values.dtype.kind == "M":
            return _short(pd.Timestamp(values.min())), _short(pd.Timestamp(values.max())), None
        texts = [str(v).strip() for v in values.tolist()]
        if all(_ISO_DATE.match(t) for t in texts):  # ISO dates order as strings; no parsing needed
            return min(texts), max(texts), None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            stamps = pd.to_datetime(pd.Series(texts), errors="coerce", format="mixed").dropna()
        if stamps.empty:
            return None, None, None
        return _short(stamps.min()), _short(stamps.max()), None
    return None, None, None


def _top(values: np.ndarray, col_type: str, k: int) -> list[tuple[str, int]]:
    if not len(values) or k <= 0 or col_type in ("nested", "binary", "empty"):
        return []
    items = values.tolist()
    try:
        counts = Counter(items)
    except TypeError:
        counts = Counter(map(repr, items))
    return [(_short(v), int(c)) for v, c in counts.most_common(k)]


def _sample_rows(frame: pd.DataFrame, n: int) -> list[list[str]]:
    """Up to ``n`` representative rows: among the first 100, those with the fewest missing values."""
    if frame.empty or n <= 0:
        return []
    head = frame.iloc[:100].to_numpy(dtype=object)
    missing = pd.isna(head).sum(axis=1)
    order = np.sort(np.argsort(missing, kind="stable")[:n])
    return [[_short(v, 30) for v in head[i]] for i in order]


def profile_table(table: Table, *, top_k: int = _TOP_K, sample_rows: int = _SAMPLE_ROWS) -> TableProfile:
    """Profile one table (statistics over the rows in ``table.frame``)."""
    frame = table.frame
    n = len(frame)
    pk = set(table.primary_key)
    columns = []
    for i, col in enumerate(frame.columns):
        name = str(col)
        col_type = table.column_types.get(name) or "other"
        values = _present(frame.iloc[:, i])
        n_missing = int(n - len(values))
        distinct = _distinct(values, col_type)
        fk = table.foreign_key_of(name)
        lo, hi, mean = _range(values, col_type)
        role = _role(name, values, col_type, name in pk or fk is not None, distinct)
        want_top = col_type in ("string", "boolean", "mixed") or (col_type == "integer" and distinct <= 20)
        columns.append(
            ColumnProfile(
                name=name,
                type=col_type,
                declared_type=table.declared_types.get(name) or None,
                role=role,
                n_missing=n_missing,
                missing_ratio=round(n_missing / n, 4) if n else 0.0,
                n_distinct=distinct,
                unique=bool(len(values) > 0 and distinct == len(values)),
                min=lo,
                max=hi,
                mean=None if mean is None else round(mean, 6),
                top=_top(values, col_type, top_k) if want_top else [],
                primary_key=name in pk,
                foreign_key=None
                if fk is None
                else f"{fk.ref_table}.{fk.ref_columns[fk.columns.index(name)]}",
            )
        )
    return TableProfile(
        name=table.name,
        n_rows=table.row_count,
        n_rows_is_lower_bound=table.row_count_is_lower_bound,
        n_rows_profiled=n,
        n_columns=table.n_columns,
        columns=columns,
        sample_rows=_sample_rows(frame, sample_rows),
        primary_key=list(table.primary_key),
        foreign_keys=[str(fk) for fk in table.foreign_keys],
        ddl=table.ddl,
        source_sheet=table.source_sheet,
        header_rows=table.header_rows,
        warnings=list(table.warnings),
    )


def column_roles(table: Table) -> dict[str, str]:
    """``{column: role}`` for a table — the one call EnvLunch needs to know what it may rescale.

    Example::

        from datadojo.corpus import load, column_roles
        for t in load("shop.sqlite").tables:
            measures = [c for c, r in column_roles(t).items() if r == "measure"]
    """
    return {c.name: c.role for c in profile_table(table, top_k=0, sample_rows=0).columns}


def profile_loaded(loaded: LoadedFile, *, detail: str | None = None) -> FileProfile:
    """Profile every table of a loaded file."""
    return FileProfile(
        path=str(loaded.path),
        name=loaded.path.name,
        kind=loaded.kind,
        size_bytes=loaded.size_bytes,
        detail=detail,
        encoding=loaded.encoding,
        delimiter=loaded.delimiter,
        tables=[profile_table(t) for t in loaded.tables],
        warnings=list(loaded.warnings),
    )


#: Read options for profiling: statistics over the first 10,000 rows; counting stops past a million.
PROFILE_READ = ReadOptions(max_rows=10_000, count_limit=1_000_000)


def profile_file(
    path: str | Path, *, options: ReadOptions | None = None, sniffed: Sniffed | None = None
) -> FileProfile:
    """Profile any file: tables for tabular kinds, a short summary for the others, an error otherwise.

    Never raises for a bad file: a file the readers refuse gives a profile with ``error`` set (and, for
    kinds with a summary reader, the summary anyway).
    """
    from datadojo.corpus.other_kinds import ARRAY_KINDS, scrub_paths, summarize

    p = Path(path)
    sn = sniffed or sniff(p)
    base = {"path": str(p), "name": p.name, "kind": sn.kind, "size_bytes": sn.size, "detail": sn.detail}
    if sn.is_tabular:
        try:
            return profile_loaded(load_sniffed(sn, options=options or PROFILE_READ), detail=sn.detail)
        except LoadError as err:
            summary = summarize(sn) if sn.kind == "json" else {}
            message = scrub_paths(str(err), p)
            return FileProfile(**base, summary=summary, error=message, error_reason=err.reason)
    summary = summarize(sn)
    error = None
    reason = None
    if sn.kind in ("missing", "special", "binary", "empty"):
        error, reason = f"{p.name}: {sn.detail}", sn.kind
    elif sn.kind in ARRAY_KINDS and "error" in summary:
        # a corrupt array file is not a good file without a table: it is unreadable, and says why
        base.update(kind="unreadable", detail=f"{sn.detail} that cannot be read")
        error, reason = f"{p.name}: {summary.pop('error')}", "corrupt"
        summary = {"format": sn.kind, **summary}
    return FileProfile(**base, summary=summary, error=error, error_reason=reason)

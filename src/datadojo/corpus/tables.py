"""The typed result of loading a data file: :class:`LoadedFile` holding :class:`Table` objects.

Every reader (CSV/TSV, XLSX, SQLite, Parquet, JSON/JSONL) returns the same shape so that the filters, the
profile and the callers downstream (EnvLunch's environment builder, the agent's prompt) never branch on the
file format. A file that cannot be read raises :class:`LoadError`, whose message names the file, what is
wrong and where (line, byte offset, sheet or table), and whose ``reason`` is a short code the filters turn
into a rejection reason (DataMind §3.1, "Data File Collection and Filtering": files that "cannot be loaded
at all — corrupted formats, encoding errors, missing data — are discarded").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

from datadojo.corpus.config import ReadOptions
from datadojo.errors import DataDojoError

__all__ = [
    "COLUMN_TYPES",
    "LOAD_ERROR_REASONS",
    "ColumnType",
    "ForeignKey",
    "LoadError",
    "LoadErrorReason",
    "LoadedFile",
    "ReadOptions",
    "Table",
    "infer_column_type",
]

LoadErrorReason = Literal[
    "missing",
    "not_a_file",
    "empty",
    "binary",
    "encoding",
    "corrupt",
    "ragged",
    "not_tabular",
    "no_tables",
    "unsupported",
    "too_large",
]
LOAD_ERROR_REASONS: tuple[str, ...] = get_args(LoadErrorReason)

ColumnType = Literal[
    "integer", "float", "boolean", "datetime", "string", "text", "nested", "binary", "mixed", "empty"
]
COLUMN_TYPES: tuple[str, ...] = (
    "integer",
    "float",
    "boolean",
    "datetime",
    "string",
    "text",
    "nested",
    "binary",
    "mixed",
    "empty",
)


class LoadError(DataDojoError, ValueError):
    """A data file could not be read as tables.

    ``str(err)`` reads ``"<path>: <where>: <what>"`` (``where`` is omitted when the problem is the whole
    file). ``reason`` is one of :data:`LOAD_ERROR_REASONS`.
    """

    def __init__(
        self, path: str | Path, reason: LoadErrorReason, message: str, where: str | None = None
    ) -> None:
        self.path = str(path)
        self.reason: LoadErrorReason = reason
        self.where = where
        self.message = message
        super().__init__(f"{self.path}: {where}: {message}" if where else f"{self.path}: {message}")


@dataclass(frozen=True)
class ForeignKey:
    """``columns`` of this table reference ``ref_columns`` of ``ref_table`` (SQLite ``REFERENCES``)."""

    columns: tuple[str, ...]
    ref_table: str
    ref_columns: tuple[str, ...]

    def __str__(self) -> str:
        return f"({', '.join(self.columns)}) -> {self.ref_table}({', '.join(self.ref_columns)})"


@dataclass
class Table:
    """One table of a data file: its rows as a DataFrame plus what the source says about it.

    ``column_types`` are inferred from the values (:func:`infer_column_type`); ``declared_types`` are what
    the source declares (SQLite DDL types, Arrow types for Parquet), empty where it declares nothing.
    ``row_count`` is the number of data rows in the source; when ``row_count_is_lower_bound`` is true the
    reader stopped counting there (``ReadOptions.count_limit``). ``frame`` may hold fewer rows than
    ``row_count`` when ``ReadOptions.max_rows`` capped it (see :attr:`truncated`). For spreadsheets,
    ``source_sheet`` names the sheet and ``header_rows`` how many rows formed the header (2 or more when
    merged header cells were combined, e.g. ``"Budget H1"``). ``ddl`` is the ``CREATE TABLE`` statement
    for SQLite tables (generated from the schema, with keys).
    """

    name: str
    frame: pd.DataFrame
    column_types: dict[str, str] = field(default_factory=dict)
    declared_types: dict[str, str] = field(default_factory=dict)
    primary_key: tuple[str, ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = ()
    source_sheet: str | None = None
    header_rows: int = 1
    row_count: int = 0
    row_count_is_lower_bound: bool = False
    ddl: str | None = None
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.column_types:
            self.column_types = {str(c): infer_column_type(self.frame[c]) for c in self.frame.columns}
        if not self.row_count and not self.row_count_is_lower_bound:
            self.row_count = len(self.frame)

    @property
    def columns(self) -> list[str]:
        return [str(c) for c in self.frame.columns]

    @property
    def n_columns(self) -> int:
        return self.frame.shape[1]

    @property
    def truncated(self) -> bool:
        """True when ``frame`` holds only the first rows of the table."""
        return len(self.frame) < self.row_count or self.row_count_is_lower_bound

    def foreign_key_of(self, column: str) -> ForeignKey | None:
        """The foreign key ``column`` takes part in, if any."""
        return next((fk for fk in self.foreign_keys if column in fk.columns), None)


@dataclass
class LoadedFile:
    """A data file read into tables. ``kind`` agrees with :data:`datadojo.types.DATA_KINDS`.

    ``encoding`` and ``delimiter`` are set for text formats. ``warnings`` holds file-level notes (the
    encoding fallback used, sheets skipped); table-level notes live on each :class:`Table`.
    """

    path: Path
    kind: str
    tables: list[Table]
    size_bytes: int = 0
    encoding: str | None = None
    delimiter: str | None = None
    warnings: list[str] = field(default_factory=list)

    def table(self, name: str) -> Table:
        """The table called ``name``; ``KeyError`` lists the names there are."""
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(f"{self.path}: no table {name!r} (tables: {', '.join(t.name for t in self.tables)})")

    @property
    def all_warnings(self) -> list[str]:
        """File warnings, then each table's warnings prefixed by its name."""
        out = list(self.warnings)
        for t in self.tables:
            out.extend(f"{t.name}: {w}" for w in t.warnings)
        return out


_DATE_RE = re.compile(
    r"^\s*(\d{4}[-/.]\d{1,2}([-/.]\d{1,2})?|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}"
    r"|\d{1,2}[- ](jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*[- ]\d{2,4})"
    r"([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?\s*(z|[ap]m|[+-]\d{2}:?\d{2})?)?\s*$",
    re.IGNORECASE,
)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_TEXT_MEAN_CHARS = 60
_SAMPLE = 500


def _is_nested(v: Any) -> bool:
    return isinstance(v, dict | list | tuple | set | frozenset | np.ndarray)


def _is_binary(v: Any) -> bool:
    return isinstance(v, bytes | bytearray | memoryview)


def infer_column_type(series: pd.Series) -> str:
    """The semantic type of a column, one of :data:`COLUMN_TYPES`.

    Why not just the pandas dtype: a CSV column of ISO dates is ``str`` to pandas, an integer column with a
    blank is ``float64``, and a JSON column of objects is ``object`` like a column of names. The profile
    (the metadata text *d* of DataMind §3.2, Step 1) and the filter for "anomalous data types" (§3.1)
    both need the meaning. Rules: all missing → ``empty``; bool dtype → ``boolean``; integer dtype, or
    float whose values are all whole numbers → ``integer``; other numbers → ``float``; datetime dtype →
    ``datetime``. For object/string columns a sample of up to 500 values decides: any dict/list/array →
    ``nested``; any bytes, or strings with control characters → ``binary``; numbers mixed with strings →
    ``mixed``; 95 % date-like strings → ``datetime``; mean length over 60 characters → ``text``; else
    ``string``.
    """
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype) and not pd.api.types.is_object_dtype(dtype):
        return "boolean" if series.notna().any() else "empty"
    if pd.api.types.is_datetime64_any_dtype(dtype) or isinstance(dtype, pd.PeriodDtype):
        return "datetime" if series.notna().any() else "empty"
    if pd.api.types.is_integer_dtype(dtype):
        return "integer" if series.notna().any() else "empty"
    if pd.api.types.is_float_dtype(dtype):
        values = series.to_numpy(dtype="float64", na_value=np.nan)
        finite = values[np.isfinite(values)]
        if not finite.size:
            return "empty" if np.isnan(values).all() else "float"
        if np.all(np.mod(finite, 1) == 0) and np.all(np.abs(finite) < 2**53):
            return "integer"
        return "float"
    if pd.api.types.is_complex_dtype(dtype):
        return "float"
    if pd.api.types.is_timedelta64_dtype(dtype):
        return "string"
    sample = []
    for v in series.to_numpy(dtype=object):
        if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, float) and v != v):
            continue
        sample.append(v)
        if len(sample) >= _SAMPLE:
            break
    if not sample:
        return "empty"
    kinds: set[str] = set()
    date_like = 0
    lengths = 0
    for v in sample:
        if type(v) is str:  # the common case first: most object columns hold only strings
            text = v
        elif _is_nested(v):
            return "nested"
        elif _is_binary(v):
            return "binary"
        elif isinstance(v, bool | np.bool_):
            kinds.add("boolean")
            continue
        elif isinstance(v, int | float | np.integer | np.floating):
            if not (isinstance(v, float | np.floating) and math.isnan(float(v))):
                kinds.add("number")
            continue
        elif isinstance(v, pd.Timestamp | np.datetime64) or hasattr(v, "isoformat"):
            kinds.add("datetime")
            continue
        else:
            text = str(v)  # any other object is judged by its text, as a string is
        if _CONTROL_RE.search(text):
            return "binary"
        kinds.add("string")
        lengths += len(text)
        if _DATE_RE.match(text):
            date_like += 1
    if not kinds:
        return "empty"
    if len(kinds) > 1:
        if kinds <= {"number", "boolean"}:
            return "float"
        return "mixed"
    (only,) = kinds
    if only == "number":
        values = np.array([float(v) for v in sample if not _is_nan(v)])
        return "integer" if values.size and np.all(np.mod(values, 1) == 0) else "float"
    if only in ("boolean", "datetime"):
        return only
    n_str = len(sample)
    if date_like >= 0.95 * n_str:
        return "datetime"
    if lengths / max(n_str, 1) > _TEXT_MEAN_CHARS:
        return "text"
    return "string"


def _is_nan(v: Any) -> bool:
    try:
        return math.isnan(float(v))
    except (TypeError, ValueError):
        return False

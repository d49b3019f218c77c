"""The corpus settings (:class:`ReadOptions`, :class:`FilterConfig`, :class:`OverlapConfig`,
:class:`ScanConfig`), apart from the readers, filters and scan that use them.

A light module (pydantic and the standard library): the CLI builds its flags' help from these fields at
start-up, and importing :mod:`datadojo.corpus.tables` or :mod:`~datadojo.corpus.filters` would load pandas
for every ``datadojo`` command. The modules that used to hold them still export them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from datadojo.config import Settings
from datadojo.corpus.sniff import TABULAR_KINDS

__all__ = ["FilterConfig", "OverlapConfig", "ReadOptions", "ScanConfig"]


class ReadOptions(Settings):
    """How :func:`datadojo.corpus.readers.load` reads a file.

    ``encodings`` are tried in order for text formats without a byte-order mark; the default stops at
    cp1252 rather than ending with latin-1 (which decodes any byte string) so that a file in an encoding
    it cannot decode is reported as an encoding error, as DataMind §3.1 discards them. ``max_rows`` caps
    the rows kept per table in memory (``None`` = all); ``count_limit`` stops counting rows once a table
    has more than that many (the table's ``row_count`` is then a lower bound): together they let the row
    filter reject a 1 GB file after reading its first thousand rows. ``on_ragged`` says what a CSV row
    with more fields than the header does: ``"warn"`` skips it and records the line, ``"error"`` raises.
    ``json_max_bytes`` bounds a single JSON document, which has to be parsed whole (JSON Lines stream).
    ``header`` is ``"auto"`` (a first CSV row made only of numbers is taken as data), ``"first_row"`` or
    ``"none"``.
    """

    encodings: tuple[str, ...] = Field(
        ("utf-8", "cp1252"), description="text encodings tried in order for files without a byte-order mark"
    )
    delimiter: str | None = Field(None, description="CSV delimiter (None: sniffed)")
    max_rows: int | None = Field(None, description="rows kept per table in memory (None: all)")
    count_limit: int | None = Field(
        None,
        description="stop counting a table's rows beyond this many (the count is then a lower bound; None: count all)",
    )
    on_ragged: Literal["warn", "error"] = Field(
        "warn", description="a CSV row longer than the header: skipped and recorded (warn) or an error"
    )
    header: Literal["auto", "first_row", "none"] = Field(
        "auto", description="the first CSV row: auto (a row of numbers only is data), first_row or none"
    )
    max_warnings: int = Field(20, description="reader warnings kept per file")
    json_max_bytes: int = Field(
        256 * 1024 * 1024, description="largest single JSON document read (parsed whole; JSON Lines stream)"
    )
    xlsx_scan_max_bytes: int = Field(64 * 1024 * 1024, description="largest Excel file scanned")

    @model_validator(mode="after")
    def _check(self) -> ReadOptions:
        if not self.encodings:
            raise ValueError("ReadOptions.encodings must name at least one encoding")
        for name in ("max_rows", "count_limit"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"ReadOptions.{name} must be >= 0, got {value}")
        if self.delimiter is not None and len(self.delimiter) != 1:
            raise ValueError(f"ReadOptions.delimiter must be one character, got {self.delimiter!r}")
        return self

    def keep_more(self, n_kept: int) -> bool:
        """True while a reader should still store rows (``n_kept`` rows stored so far)."""
        return self.max_rows is None or n_kept < self.max_rows

    def count_more(self, n_counted: int) -> bool:
        """True while a reader should still count rows (``n_counted`` rows counted so far)."""
        return self.count_limit is None or n_counted <= self.count_limit

    def over_limit(self, n_counted: int) -> bool:
        """True when counting stopped early, so ``n_counted`` is only a lower bound."""
        return self.count_limit is not None and n_counted > self.count_limit


class FilterConfig(Settings):
    """Settings of the DataMind filters; defaults follow §3.1 (20 ≤ rows ≤ 1,000)."""

    min_rows: int | None = Field(20, ge=0, description="fewest data rows (DataMind §3.1: 20)")
    max_rows: int | None = Field(1000, ge=0, description="most data rows (DataMind §3.1: 1,000)")
    sqlite_min_rows: int | None = Field(
        20,
        ge=0,
        description="fewest rows for SQLite databases (of the largest table by default, see row_scope)",
    )
    sqlite_max_rows: int | None = Field(
        None, ge=0, description="most rows for SQLite databases (no upper bound by default)"
    )
    row_scope: Literal["largest", "every", "total"] = Field(
        "largest",
        description="which rows of a multi-table file (SQLite, workbook) the bounds apply to: the largest "
        "table, every table, or the total",
    )
    reject_nested: bool = Field(
        True,
        description="reject JSON with nested objects or lists in cells (DataMind §3.1: flat tables only)",
    )
    reject_binary: bool = Field(True, description="reject files that look binary")
    max_anomalous_columns: int = Field(
        0, ge=0, description="most columns with anomalous values a file may have"
    )
    max_missing_ratio: float | None = Field(
        None, ge=0.0, le=1.0, description="most missing cells, as a share of all cells (None: no bound)"
    )
    dedupe: bool = Field(True, description="reject exact duplicate files (same content hash)")
    kinds: tuple[str, ...] = Field(TABULAR_KINDS, description="file kinds kept (csv, xlsx, sqlite, ...)")
    encodings: tuple[str, ...] = Field(
        ("utf-8", "cp1252"), description="text encodings tried in order for files without a byte-order mark"
    )
    profile_rows: int = Field(1000, ge=1, description="rows kept per table when no upper bound applies")

    def bounds(self, kind: str) -> tuple[int | None, int | None]:
        """``(min, max)`` rows for a file of ``kind``."""
        if kind == "sqlite":
            return self.sqlite_min_rows, self.sqlite_max_rows
        return self.min_rows, self.max_rows

    def read_options(self, kind: str) -> ReadOptions:
        """Read options that stop counting just past the upper bound and keep at most that many rows."""
        _, hi = self.bounds(kind)
        keep = self.profile_rows if hi is None else hi + 1
        # one table over the bound already puts the file over it, whatever the scope
        return ReadOptions(encodings=self.encodings, max_rows=keep, count_limit=hi)


class OverlapConfig(Settings):
    """How :func:`header_overlap` counts (see the module docstring for the choices)."""

    unit: Literal["table", "column"] = Field(
        "table",
        description="what the ratio counts: the share of benchmark tables (table) or of benchmark column names "
        "(column)",
    )
    match: Literal["exact", "jaccard", "containment"] = Field(
        "exact", description="how two headers match: the same names, or Jaccard / containment >= threshold"
    )
    threshold: float = Field(0.8, gt=0.0, le=1.0, description="similarity needed for jaccard / containment")
    min_columns: int = Field(
        2, ge=1, description="fewest shared columns for two tables to count as overlapping"
    )


class ScanConfig(Settings):
    """Settings of a corpus scan: the filters, the profile budget, what to walk."""

    filters: FilterConfig = Field(
        default_factory=FilterConfig, description="file filters applied while scanning"
    )
    profile_chars: int = Field(4000, ge=200, description="budget of the rendered profile text per file")
    profile_rejected: bool = Field(True, description="also profile files rejected after loading")
    include_hidden: bool = Field(
        False, description="also scan hidden files and folders (names starting with '.')"
    )

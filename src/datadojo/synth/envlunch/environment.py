"""Environments for EnvLunch: a database (or a table) loaded whole or as a consistent sample, with its keys.

EnvLunch §3 ("Action Pool Construction") writes E for "a database instance together with its tables". An
environment here is exactly that, held in memory so that synthesis can execute thousands of partial
trajectories against it without touching the disk:

* a SQLite file becomes one environment with every table, its declared column types, its primary key and
  its foreign keys (read with ``PRAGMA table_info`` / ``PRAGMA foreign_key_list``; a ``REFERENCES t``
  without columns resolves to ``t``'s primary key, as SQLite itself does). Rows keep their ``rowid`` so
  that a counterfactual copy can delete exactly the rows it dropped (:mod:`.perturb`);
* a CSV / TSV / Parquet / Excel / JSON table becomes a one-table environment without keys (it can feed the
  pandas backend only, since the SQL backend needs a database file).

With ``sample_rows > 0`` (a build's ``BuildConfig.sample_rows``) a table with more rows is cut, as it is
read, to a seeded sample that keeps every foreign key resolvable (:mod:`.sample`); the environment *is*
that sample — synthesis, the copies and the agent's files all use it — and says so in
:attr:`Environment.sampled`.

Values stay as SQLite returned them (``int``, ``float``, ``str``, ``bytes``, ``None``): the SQL side must
compare keys exactly as SQLite stores them, and pandas would turn an integer column with a NULL into floats.
The pandas view of a table (:meth:`TableData.frame`) is built on demand and cached.

Schema reading is done here with PRAGMAs rather than through :mod:`datadojo.corpus` because EnvLunch needs
every row together with its ``rowid`` (the corpus reader samples rows for profiling and drops the rowid).
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from datadojo.corpus.sqlite_reader import quote_ident
from datadojo.errors import DataDojoError

__all__ = [
    "SQLITE_SUFFIXES",
    "TABLE_SUFFIXES",
    "EnvError",
    "Environment",
    "NoAction",
    "SchemaForeignKey",
    "TableData",
    "discover_sources",
    "load_environment",
    "load_sqlite",
    "load_table_file",
    "stable_int",
]

log = logging.getLogger(__name__)

SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq", ".xlsx", ".xls", ".json", ".jsonl")


class NoAction(Exception):
    """The valid-action pool of a step is empty: the trajectory is cut short (§3).

    Control flow shared by the SQL and pandas action pools (``sql_actions.NoAction`` and
    ``pandas_actions.NoAction`` are this class), not an error a user sees.
    """


class EnvError(DataDojoError, ValueError):
    """An environment cannot be loaded; the message names the file and what is wrong."""


def stable_int(*parts: Any) -> int:
    """A 63-bit integer from the parts' text, stable across processes (unlike :func:`hash`).

    Seeds for every random draw are derived with it, so a build is reproducible from ``--seed`` alone.
    """
    blob = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") >> 1


@dataclass(frozen=True)
class SchemaForeignKey:
    """``table(columns) REFERENCES ref_table(ref_columns)``."""

    table: str
    columns: tuple[str, ...]
    ref_table: str
    ref_columns: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.table}({', '.join(self.columns)}) -> {self.ref_table}({', '.join(self.ref_columns)})"


@dataclass
class TableData:
    """One table: column names and declared types, primary key, and all rows (raw values)."""

    name: str
    columns: list[str]
    decl_types: list[str]
    rows: list[tuple[Any, ...]]
    primary_key: tuple[str, ...] = ()
    rowids: list[int] | None = None
    _frame: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def n_rows(self) -> int:
        return len(self.rows)

    def column_values(self, column: str) -> list[Any]:
        i = self.columns.index(column)
        return [r[i] for r in self.rows]

    def frame(self) -> pd.DataFrame:
        """The table as a DataFrame (cached). Columns keep SQLite's values; pandas infers dtypes."""
        if self._frame is None:
            self._frame = frame_from_rows(self.columns, self.rows)
        return self._frame


def frame_from_rows(columns: list[str], rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """Build a DataFrame from raw rows, one column at a time so mixed-type columns stay ``object``.

    A column whose non-null values are all ``int`` becomes ``Int64`` when it holds NULLs (so an integer
    measure is not silently turned into floats), ``int64`` otherwise; ints mixed with floats become
    ``float64``; text mixed with numbers becomes text (``str(v)``), so that the frame survives a Parquet
    round trip unchanged.
    """
    data: dict[str, Any] = {}
    for i, col in enumerate(columns):
        values = [r[i] for r in rows]
        present = [v for v in values if v is not None]
        types = set(map(type, present))
        if present and types == {int}:
            data[col] = pd.array(values, dtype="Int64") if len(present) < len(values) else values
        elif present and types <= {int, float}:
            data[col] = pd.array([float("nan") if v is None else float(v) for v in values], dtype="float64")
        elif present and types != {str} and types != {bytes}:
            # mixed text and numbers (SQLite allows it): text, so that Parquet stores what pandas saw
            data[col] = pd.Series([None if v is None else _text(v) for v in values], dtype="object")
        else:
            data[col] = pd.Series(values, dtype="object")
    frame = pd.DataFrame(data, columns=columns)
    if len(set(columns)) != len(columns):
        raise EnvError(f"duplicate column names: {columns}")
    return frame


def _text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


@dataclass
class Environment:
    """E of EnvLunch §3: tables plus foreign keys, loaded from ``source``.

    ``env_id`` is a filesystem-safe name unique within one build (the database or file stem). ``kind`` is
    ``sqlite`` (SQL and pandas backends) or ``table`` (pandas only).
    """

    env_id: str
    source: Path
    kind: Literal["sqlite", "table"]
    tables: dict[str, TableData]
    foreign_keys: list[SchemaForeignKey] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: tables cut to a sample when loaded: ``{table: (rows kept, rows in the source)}`` (empty: whole tables)
    sampled: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: the ``sample_rows`` and ``seed`` it was loaded with (0: whole tables asked for)
    sample_rows: int = 0
    sample_seed: int = 0
    #: a sampled database's bytes (:meth:`sqlite3.Connection.serialize`): copies and the agent's file are
    #: made from it instead of the source file
    image: bytes | None = field(default=None, repr=False)

    def table(self, name: str) -> TableData:
        try:
            return self.tables[name]
        except KeyError:
            raise EnvError(f"{self.source}: no table {name!r} (tables: {', '.join(self.tables)})") from None

    def fks_of(self, table: str) -> list[SchemaForeignKey]:
        """Foreign keys that touch ``table`` (as child or as parent)."""
        return [fk for fk in self.foreign_keys if table in (fk.table, fk.ref_table)]

    @property
    def n_rows(self) -> int:
        return sum(t.n_rows for t in self.tables.values())

    def loaded_as(self, sample_rows: int, seed: int) -> bool:
        """Whether loading the source with ``sample_rows`` and ``seed`` gives these tables.

        True when it was loaded with them, or when nothing would be cut (whole tables under the cap, or a
        table :func:`load_sqlite` never cuts: one without ``rowid``).
        """
        if (self.sample_rows, self.sample_seed) == (sample_rows, seed):
            return True
        if self.sampled:
            return False
        cuttable = [t for t in self.tables.values() if self.kind == "table" or t.rowids is not None]
        return sample_rows == 0 or all(t.n_rows <= sample_rows for t in cuttable)


def _connect_ro(path: Path) -> sqlite3.Connection:
    uri = f"file:{path.resolve().as_posix()}?mode=ro&immutable=1"
    con = sqlite3.connect(uri, uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")
    return con


_q = quote_ident  # the one SQL identifier quoting


def load_sqlite(
    path: str | Path, *, env_id: str | None = None, sample_rows: int = 0, seed: int = 0
) -> Environment:
    """Load every ordinary table of a SQLite database with its keys and rows.

    Foreign keys whose referenced table or columns do not exist (Spider has a few, e.g. differing case)
    are resolved case-insensitively, and dropped with a warning when they still do not resolve, so a
    dangling declaration never makes a join that cannot run.

    ``sample_rows > 0`` cuts every table with more rows to a referentially consistent sample of about that
    many rows, drawn in SQL from ``seed`` (:mod:`.sample`); the environment is then that sample
    (:attr:`Environment.sampled` says what was cut, :attr:`Environment.image` holds its bytes). A sample is
    kept in memory for the process, per file (path, size, modification time), ``sample_rows``, ``seed``
    and ``env_id``: loading it again returns the same object, which callers must not change.
    """
    path = Path(path)
    if not path.is_file():
        raise EnvError(f"{path}: no such database file")
    if sample_rows < 0:
        raise EnvError(f"{path}: sample_rows must be >= 0, got {sample_rows}")
    env_id = env_id or path.stem
    key: tuple[Any, ...] | None = None
    if sample_rows > 0:
        st = path.stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns, sample_rows, seed, env_id)
        if key in _SAMPLES:
            return _SAMPLES[key]
    env = _load_sqlite(path, env_id, sample_rows, seed)
    if key is not None:
        _SAMPLES[key] = env
        while len(_SAMPLES) > _SAMPLES_KEPT:
            del _SAMPLES[next(iter(_SAMPLES))]
    return env


#: sampled environments loaded by this process (see :func:`load_sqlite`); small by construction
_SAMPLES: dict[tuple[Any, ...], Environment] = {}
_SAMPLES_KEPT = 64


def _load_sqlite(path: Path, env_id: str, sample_rows: int, seed: int) -> Environment:
    try:
        con = _connect_ro(path)
        names = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
    except sqlite3.DatabaseError as exc:
        raise EnvError(f"{path}: not a readable SQLite database ({exc})") from exc
    tables: dict[str, TableData] = {}
    raw_fks: list[tuple[str, list[tuple[Any, ...]]]] = []
    warnings: list[str] = []
    name = ""
    try:
        for name in names:
            info = con.execute(f"PRAGMA table_info({_q(name)})").fetchall()
            columns = [r[1] for r in info]
            decl = [str(r[2] or "") for r in info]
            pk = tuple(r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5]))
            tables[name] = TableData(name, columns, decl, [], pk, None)
            raw_fks.append((name, con.execute(f"PRAGMA foreign_key_list({_q(name)})").fetchall()))
    except sqlite3.DatabaseError as exc:
        con.close()
        raise EnvError(f"{path}: cannot read table {name!r} ({exc})") from exc
    fks = _resolve_fks(tables, raw_fks, warnings, path)
    sampled: dict[str, tuple[int, int]] = {}
    image: bytes | None = None
    if sample_rows > 0:
        from datadojo.synth.envlunch.sample import sample_database

        try:
            columns = {t: d.columns for t, d in tables.items()}
            got = sample_database(path, columns, fks, sample_rows, lambda t: stable_int(seed, env_id, t))
        except sqlite3.Error as exc:
            got = None
            warnings.append(f"{path}: cannot be sampled ({exc}); tables loaded whole")
        if got is not None:
            con.close()
            con = sqlite3.connect(":memory:")
            con.text_factory = lambda b: b.decode("utf-8", "replace")
            con.deserialize(got.image)
            image, sampled = got.image, got.kept
    try:
        for name, table in tables.items():
            try:
                cur = con.execute(f"SELECT rowid, * FROM {_q(name)} ORDER BY rowid")
                fetched = cur.fetchall()
                table.rowids = [r[0] for r in fetched]
                table.rows = [tuple(r[1:]) for r in fetched]
            except sqlite3.OperationalError:
                # WITHOUT ROWID tables: perturbation deletes by primary key instead.
                table.rows = [tuple(r) for r in con.execute(f"SELECT * FROM {_q(name)}")]
                table.rowids = None
    except sqlite3.DatabaseError as exc:
        raise EnvError(f"{path}: cannot read table {name!r} ({exc})") from exc
    finally:
        con.close()
    for w in warnings:
        log.debug("%s", w)
    return Environment(env_id, path, "sqlite", tables, fks, warnings, sampled, sample_rows, seed, image)


def _resolve_fks(
    tables: dict[str, TableData],
    raw: list[tuple[str, list[tuple[Any, ...]]]],
    warnings: list[str],
    path: Path,
) -> list[SchemaForeignKey]:
    by_lower = {t.lower(): t for t in tables}
    out: list[SchemaForeignKey] = []
    for child, rows in raw:
        groups: dict[int, list[tuple[Any, ...]]] = {}
        for r in rows:
            groups.setdefault(r[0], []).append(r)
        for parts in groups.values():
            parts.sort(key=lambda r: r[1])
            ref = by_lower.get(str(parts[0][2]).lower())
            if ref is None:
                warnings.append(f"{path}: {child}: foreign key to unknown table {parts[0][2]!r} ignored")
                continue
            cols = _match_columns(tables[child].columns, [p[3] for p in parts])
            to = [p[4] for p in parts]
            ref_cols = (
                list(tables[ref].primary_key)
                if all(t is None for t in to)
                else _match_columns(tables[ref].columns, to)
            )
            if cols is None or ref_cols is None or len(ref_cols) != len(cols) or not ref_cols:
                warnings.append(f"{path}: {child}: foreign key {[p[3] for p in parts]} -> {ref}{to} ignored")
                continue
            fk = SchemaForeignKey(child, tuple(cols), ref, tuple(ref_cols))
            if fk not in out:
                out.append(fk)
    return out


def _match_columns(columns: list[str], wanted: list[Any]) -> list[str] | None:
    lower = {c.lower(): c for c in columns}
    out = []
    for w in wanted:
        if w is None or str(w).lower() not in lower:
            return None
        out.append(lower[str(w).lower()])
    return out


def load_table_file(
    path: str | Path, *, env_id: str | None = None, sample_rows: int = 0, seed: int = 0
) -> Environment:
    """Load a CSV/TSV/Parquet/Excel/JSON file as a one-table environment.

    Reading (delimiter and encoding sniffing, Excel header rows, JSON records) is
    :func:`datadojo.corpus.readers.frame_of`'s job; values then go through :func:`frame_from_rows` like a
    database's, so both kinds of environment reach pandas the same way. ``sample_rows > 0`` keeps that
    many rows of a longer table (a seeded draw from ``stable_int(seed, env_id, table)``, in file order);
    the file is still read whole.
    """
    from datadojo.corpus.readers import frame_of

    path = Path(path)
    if path.suffix.lower() not in TABLE_SUFFIXES:
        raise EnvError(f"{path}: not a table file (expected one of {', '.join(TABLE_SUFFIXES)})")
    try:
        frame = frame_of(path)
    except Exception as exc:  # the corpus readers raise LoadError (a ValueError) and a few library errors
        raise EnvError(f"{path}: cannot read as a table ({type(exc).__name__}: {exc})") from exc
    columns = [str(c) for c in frame.columns]
    if len(set(columns)) != len(columns):
        raise EnvError(f"{path}: duplicate column names {columns}")
    rows = [tuple(None if _isna(v) else _py(v) for v in r) for r in frame.itertuples(index=False, name=None)]
    name = path.stem
    env_id = env_id or name
    sampled: dict[str, tuple[int, int]] = {}
    if 0 < sample_rows < len(rows):
        rng = np.random.default_rng(stable_int(seed, env_id, name))
        picked = np.sort(rng.choice(len(rows), size=sample_rows, replace=False))
        sampled[name] = (sample_rows, len(rows))
        rows = [rows[i] for i in picked]
    table = TableData(name, columns, [str(t) for t in frame.dtypes], rows, (), None)
    return Environment(env_id, path, "table", {name: table}, [], [], sampled, sample_rows, seed)


def _isna(v: Any) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _py(v: Any) -> Any:
    return v.item() if hasattr(v, "item") and not isinstance(v, (str, bytes)) else v


def load_environment(
    path: str | Path, *, env_id: str | None = None, sample_rows: int = 0, seed: int = 0
) -> Environment:
    """Load a SQLite database or a table file, choosing by suffix; ``sample_rows > 0`` samples large
    tables (:func:`load_sqlite`, :func:`load_table_file`)."""
    path = Path(path)
    if path.suffix.lower() in SQLITE_SUFFIXES:
        return load_sqlite(path, env_id=env_id, sample_rows=sample_rows, seed=seed)
    return load_table_file(path, env_id=env_id, sample_rows=sample_rows, seed=seed)


def discover_sources(paths: list[str | Path], *, exclude: tuple[str, ...] = ()) -> list[Path]:
    """Expand files and folders into the environment files they hold, sorted, minus excluded names.

    A folder is searched recursively for SQLite and table files. ``exclude`` names environments by stem
    (e.g. the Spider development databases, which EnvLunch §4 keeps out of the warm-up by name).
    """
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.is_file() and f.suffix.lower() in SQLITE_SUFFIXES + TABLE_SUFFIXES:
                    found.append(f)
        elif p.is_file():
            found.append(p)
        else:
            raise EnvError(f"{p}: no such file or folder")
    excluded = {e.lower() for e in exclude}
    out, seen = [], set()
    for f in found:
        if f.stem.lower() in excluded or f.resolve() in seen:
            continue
        seen.add(f.resolve())
        out.append(f)
    return out

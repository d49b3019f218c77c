"""Referentially consistent samples of large SQLite databases (``BuildConfig.sample_rows``).

EnvLunch §4 builds 1,600 warm-up tasks in 20 minutes on Spider-sized databases. On a BIRD-sized database
(tables of 100,000s of rows) almost all of a build's time goes to SQLite running synthesized queries over
whole tables, to planning and writing copies of them, and to reading every row into Python. A warm-up task
needs none of that size: it is exactly verified on whatever environment it is built on. So a large database
is cut, when it is loaded, to a *sample* of at most ``cap`` rows per table that keeps every foreign key
resolvable, and that sample is the environment: synthesis runs on it, the counterfactual copies are made
from it, and the agent's database file is it.

The draw, done in SQL on the file (rows that are not kept are never read into Python):

1. row counts first; a table with at most ``cap`` rows is kept whole, and so is a ``WITHOUT ROWID`` table
   (it is never cut, so nothing needs to refer into it);
2. the rows of a large table that a whole table references are kept (a whole child keeps its parents);
3. large tables are visited children first (a table that references others before the tables it
   references; in a cycle, the table with the fewest unvisited children first, then by name). Each is
   filled up to ``cap`` rows (after following its self-references from the rows it must keep) with a
   seeded draw among the rows not yet kept (rowids drawn by a NumPy
   generator seeded from ``stable_int(seed, env_id, table)``, never ``ORDER BY RANDOM()``), and the parent
   rows its kept rows reference are kept — even past the cap;
4. references are followed to a fixed point, which closes chains, self-references and mutual keys: every
   foreign-key value of a kept row that matched a parent row in the file matches a kept parent row.

Rows keep their ``rowid`` and their stored values (they are copied by ``INSERT … SELECT`` from the attached
file, schema, indexes, views and triggers included), so the copies can delete by ``rowid`` as on a whole
database. The result is a serialized in-memory database (:meth:`sqlite3.Connection.serialize`), which
:func:`.perturb.sqlite_copy` deserializes for each copy and :func:`.tasks.write_env_files` writes as the
agent's file. A schema that cannot be rebuilt table by table (virtual tables with shadow tables) makes the
loader keep the whole database, with a warning.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import quote

import numpy as np

from datadojo.corpus.sqlite_reader import quote_ident

__all__ = ["DatabaseSample", "ForeignKeyLike", "children_first", "sample_database"]

_q = quote_ident
_IDS = "temp._datadojo_sample_ids"


class ForeignKeyLike(Protocol):
    """``table(columns) REFERENCES ref_table(ref_columns)`` (:class:`.environment.SchemaForeignKey`; this
    module is below the environment loader, which calls it)."""

    @property
    def table(self) -> str: ...
    @property
    def columns(self) -> tuple[str, ...]: ...
    @property
    def ref_table(self) -> str: ...
    @property
    def ref_columns(self) -> tuple[str, ...]: ...


@dataclass
class DatabaseSample:
    """A sampled database: its bytes and, per table that was cut, ``(rows kept, rows in the file)``."""

    image: bytes
    kept: dict[str, tuple[int, int]]
    keep: dict[str, np.ndarray]


def children_first(tables: Iterable[str], fks: Sequence[ForeignKeyLike]) -> list[str]:
    """``tables`` ordered so that a table comes before the tables it references (self-references aside).

    In a cycle, the table with the fewest children not yet placed comes first, ties broken by name.
    """
    left = sorted(set(tables))
    children = {t: {fk.table for fk in fks if fk.ref_table == t and fk.table != t} for t in left}
    order: list[str] = []
    while left:
        unplaced = set(left)
        pick = min(left, key=lambda t: (len(children[t] & unplaced), t))
        order.append(pick)
        left.remove(pick)
    return order


class _Sampler:
    def __init__(
        self,
        con: sqlite3.Connection,
        columns: dict[str, list[str]],
        fks: Sequence[ForeignKeyLike],
        cap: int,
        table_seed: Callable[[str], int],
    ) -> None:
        self.con = con
        self.columns = columns
        self.fks = fks
        self.cap = cap
        self.table_seed = table_seed
        self.counts: dict[str, tuple[int, int | None, int | None]] = {}
        self.has_rowid: dict[str, bool] = {}
        for t in columns:
            try:
                n, lo, hi = con.execute(
                    f"SELECT count(*), min(rowid), max(rowid) FROM src.{_q(t)}"
                ).fetchone()
                self.has_rowid[t] = True
            except sqlite3.OperationalError:  # WITHOUT ROWID
                (n,) = con.execute(f"SELECT count(*) FROM src.{_q(t)}").fetchone()
                lo = hi = None
                self.has_rowid[t] = False
            self.counts[t] = (int(n), lo, hi)
        self.big = sorted(t for t in columns if self.has_rowid[t] and self.counts[t][0] > cap)
        self.keep: dict[str, set[int]] = {t: set() for t in self.big}
        self.pending: dict[str, set[int]] = {t: set() for t in self.big}

    # -- SQL helpers ----------------------------------------------------------------------------------------
    def _load_ids(self, ids: Iterable[int]) -> None:
        self.con.execute(f"DELETE FROM {_IDS}")
        self.con.executemany(f"INSERT OR IGNORE INTO {_IDS} VALUES (?)", ((int(i),) for i in ids))

    def _referenced(self, fk: ForeignKeyLike, child_ids: set[int] | None) -> set[int]:
        """Rowids of ``fk.ref_table`` rows that the given rows of ``fk.table`` (all, for ``None``) reference."""
        ccols = ", ".join(f"c.{_q(c)}" for c in fk.columns)
        pcols = ", ".join(f"p.{_q(c)}" for c in fk.ref_columns)
        sub = f"SELECT {ccols} FROM src.{_q(fk.table)} AS c"
        if child_ids is not None:
            self._load_ids(child_ids)
            sub += f" WHERE c.rowid IN (SELECT id FROM {_IDS})"
        sql = f"SELECT p.rowid FROM src.{_q(fk.ref_table)} AS p WHERE ({pcols}) IN ({sub})"
        return {r[0] for r in self.con.execute(sql)}

    def _rowids(self, table: str) -> np.ndarray:
        n, lo, hi = self.counts[table]
        if lo is not None and hi is not None and hi - lo + 1 == n:  # dense rowids: no need to read them
            return np.arange(lo, hi + 1, dtype=np.int64)
        cur = self.con.execute(f"SELECT rowid FROM src.{_q(table)} ORDER BY rowid")
        return np.fromiter((r[0] for r in cur), dtype=np.int64, count=n)

    # -- the draw ---------------------------------------------------------------------------------------------
    def _add(self, table: str, ids: Iterable[int]) -> None:
        new = set(ids) - self.keep[table]
        self.keep[table] |= new
        self.pending[table] |= new

    def _fill(self, table: str) -> None:
        want = self.cap - len(self.keep[table])
        if want <= 0:
            return
        ids = self._rowids(table)
        if self.keep[table]:
            ids = ids[~np.isin(ids, np.fromiter(self.keep[table], dtype=np.int64))]
        rng = np.random.default_rng(self.table_seed(table))
        picked = rng.choice(ids, size=min(want, len(ids)), replace=False)
        self._add(table, picked.tolist())

    def _close_self(self, table: str) -> None:
        """Keep the rows that ``table``'s kept rows reference through its self-references (before a fill,
        so that a chain the children need counts towards the cap)."""
        own = [fk for fk in self.fks if fk.table == fk.ref_table == table]
        frontier = set(self.pending[table]) if own else set()
        while frontier:
            found: set[int] = set()
            for fk in own:
                found |= self._referenced(fk, frontier)
            frontier = found - self.keep[table]
            self._add(table, frontier)

    def _propagate(self, table: str) -> None:
        batch, self.pending[table] = self.pending[table], set()
        if not batch:
            return
        for fk in self.fks:
            if fk.table == table and fk.ref_table in self.keep:
                self._add(fk.ref_table, self._referenced(fk, batch))

    def run(self) -> dict[str, np.ndarray]:
        """Rowids kept per large table (sorted); tables not in the result are kept whole."""
        if not self.big:
            return {}
        self.con.execute(f"CREATE TABLE IF NOT EXISTS {_IDS} (id INTEGER PRIMARY KEY)")
        for fk in self.fks:  # a table kept whole keeps every parent row it references
            if fk.ref_table in self.keep and fk.table not in self.keep:
                self._add(fk.ref_table, self._referenced(fk, None))
        order = children_first(self.big, [fk for fk in self.fks if fk.table in self.keep])
        for t in order:
            self._close_self(t)
            self._fill(t)
            self._propagate(t)
        while any(self.pending.values()):  # cycles and self-references
            for t in order:
                self._propagate(t)
        return {t: np.array(sorted(self.keep[t]), dtype=np.int64) for t in self.big}

    # -- the sample database ----------------------------------------------------------------------------------
    def write(self, keep: dict[str, np.ndarray]) -> bytes:
        """Schema and kept rows into the connection's (empty, in-memory) main database; its bytes."""
        con = self.con
        schema = con.execute(
            "SELECT type, sql FROM src.sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' "
            "ORDER BY rowid"
        ).fetchall()
        for kind, sql in schema:
            if kind == "table":
                con.execute(sql)
        for t, cols in self.columns.items():
            names = ", ".join(_q(c) for c in cols)
            if not self.has_rowid[t]:
                con.execute(f"INSERT INTO main.{_q(t)} ({names}) SELECT {names} FROM src.{_q(t)}")
                continue
            where = ""
            if t in keep:
                self._load_ids(keep[t].tolist())
                where = f" WHERE rowid IN (SELECT id FROM {_IDS})"
            con.execute(
                f"INSERT INTO main.{_q(t)} (rowid, {names}) SELECT rowid, {names} FROM src.{_q(t)}{where} "
                "ORDER BY rowid"
            )
        for wanted in ("index", "view", "trigger"):  # after the rows: no trigger fires, indexes built once
            for kind, sql in schema:
                if kind == wanted:
                    con.execute(sql)
        con.execute(f"DROP TABLE {_IDS}")
        con.commit()
        con.execute("DETACH DATABASE src")
        return con.serialize()


def _attach(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(":memory:", uri=True)
    con.execute("ATTACH DATABASE ? AS src", (f"file:{quote(path.resolve().as_posix())}?mode=ro&immutable=1",))
    return con


def sample_database(
    path: str | Path,
    columns: dict[str, list[str]],
    fks: Sequence[ForeignKeyLike],
    cap: int,
    table_seed: Callable[[str], int],
) -> DatabaseSample | None:
    """The sample of the database at ``path`` (module doc), or ``None`` when no table has over ``cap`` rows.

    ``columns`` are the tables to keep (every ordinary table) with their column names (``PRAGMA
    table_info``); ``fks`` the resolved foreign keys; ``table_seed(table)`` seeds a table's draw (the loader
    gives ``stable_int(seed, env_id, table)``). Raises :class:`sqlite3.Error` when the schema cannot be
    rebuilt in a fresh database.
    """
    if cap <= 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    con = _attach(Path(path))
    try:
        sampler = _Sampler(con, columns, fks, cap, table_seed)
        keep = sampler.run()
        if not keep:
            return None
        image = sampler.write(keep)
        kept = {t: (len(ids), sampler.counts[t][0]) for t, ids in keep.items()}
        return DatabaseSample(image, kept, keep)
    finally:
        con.close()

"""Counterfactual copies E'_1..E'_K of an environment (EnvLunch §3, "Counterfactual Multi-Environment
Verification").

Paper, verbatim: "Each copy deletes 30% of the rows of every table with at least twenty rows, cascading
along foreign keys so that the copy stays referentially consistent; on the dataframe side, every measure
column is also rescaled by a random factor, while identifier and key columns are never changed. We use K=2
copies for SQL and K=3 for pandas."

Choices where the paper is silent (also in ``docs/envlunch.md``):

* **How many rows**: exactly ``round(0.3 · n)`` rows of a table with ``n ≥ 20`` rows, drawn uniformly
  without replacement; the 20-row threshold is checked on the original table.
* **Cascade**: a child row is deleted when the parent key it references was present in the original and
  is gone from the copy; repeated to a fixed point (chains and self-references). A reference that already
  dangled in the original (Spider has some) is left alone, so a copy is exactly as consistent as the
  original plus the cascade, and never loses rows for an unrelated reason.
* **Rescaling** (pandas copies only): one factor per copy, table and measure column, log-uniform with
  ``|log f| ∈ [log 1.1, log 2]`` and a random sign, so ``f ∈ [0.5, 0.91] ∪ [1.1, 2]``; a factor too close
  to 1 would leave rounded integers unchanged. Integer measures are rounded back to integers (half to
  even, as NumPy rounds) and keep their dtype. Which columns are measures is :mod:`.keys`' job.
* **Copy k of SQL and pandas share the row deletions** (copy k deletes the same rows in both backends;
  pandas copy 3 has its own), drawn from ``(seed, env_id, k)`` only, so a copy can be regenerated from the
  seed without the synthesis run.
"""

from __future__ import annotations

import io
import math
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from datadojo.corpus.sqlite_reader import quote_ident
from datadojo.fs import atomic_path, write_bytes_atomic
from datadojo.synth.envlunch.config import K_PANDAS, K_SQL
from datadojo.synth.envlunch.environment import Environment, SchemaForeignKey, stable_int
from datadojo.synth.envlunch.keys import ColumnInfo

__all__ = [
    "DELETE_FRACTION",
    "K_PANDAS",
    "K_SQL",
    "MIN_ROWS_TO_DELETE",
    "RESCALE_RANGE",
    "CopyPlan",
    "norm_key",
    "pandas_copy",
    "parquet_roundtrip",
    "plan_copies",
    "plan_copy",
    "sqlite_copy",
    "write_atomic_bytes",
    "write_sqlite_atomic",
]

#: EnvLunch §3: "deletes 30% of the rows of every table with at least twenty rows".
DELETE_FRACTION = 0.3
MIN_ROWS_TO_DELETE = 20
#: Bounds on |log factor| for rescaling measures (paper: "a random factor"; our choice, see module doc).
RESCALE_RANGE = (1.1, 2.0)


@dataclass
class CopyPlan:
    """What copy ``k`` of an environment changes: rows kept per table, factor per measure column."""

    k: int
    keep: dict[str, np.ndarray]
    factors: dict[tuple[str, str], float] = field(default_factory=dict)

    def n_deleted(self) -> dict[str, int]:
        return {t: int((~m).sum()) for t, m in self.keep.items()}


def norm_key(v: Any) -> Any:
    """Normalize a key value for matching: integral floats become ints (SQLite compares 1 = 1.0)."""
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _fk_codes(env: Environment, fk: SchemaForeignKey) -> tuple[np.ndarray, np.ndarray, int]:
    """Integer codes for the key values of ``fk``: (parent row codes, child row codes, number of codes).

    A child value that no parent row holds gets ``-1``: it already dangled in the original and the cascade
    leaves it alone. Cached on the environment (every copy of every task cascades along the same keys).
    """
    cache: dict[SchemaForeignKey, tuple[np.ndarray, np.ndarray, int]] = env.__dict__.setdefault(
        "_fk_code_cache", {}
    )
    if fk not in cache:
        parent, child = env.tables[fk.ref_table], env.tables[fk.table]
        pidx = [parent.columns.index(c) for c in fk.ref_columns]
        cidx = [child.columns.index(c) for c in fk.columns]
        codes: dict[tuple[Any, ...], int] = {}
        pcodes = np.array(
            [codes.setdefault(tuple(norm_key(r[i]) for i in pidx), len(codes)) for r in parent.rows],
            dtype=np.int64,
        )
        ccodes = np.array(
            [codes.get(tuple(norm_key(r[i]) for i in cidx), -1) for r in child.rows], dtype=np.int64
        )
        cache[fk] = (pcodes, ccodes, len(codes))
    return cache[fk]


def _cascade(env: Environment, keep: dict[str, np.ndarray]) -> None:
    """Delete child rows whose referenced parent key was deleted, until nothing changes."""
    changed = True
    while changed:
        changed = False
        for fk in env.foreign_keys:
            pmask = keep[fk.ref_table]
            if pmask.all():
                continue
            pcodes, ccodes, n = _fk_codes(env, fk)
            alive = np.zeros(n + 1, dtype=bool)
            alive[pcodes[pmask]] = True
            alive[n] = True  # index -1 (dangling in the original) maps here: never removed
            cmask = keep[fk.table]
            drop = cmask & ~alive[ccodes]
            if drop.any():
                cmask[drop] = False
                changed = True


def plan_copy(
    env: Environment,
    roles: dict[str, dict[str, ColumnInfo]],
    k: int,
    seed: int,
    *,
    rescale: bool,
    delete_fraction: float = DELETE_FRACTION,
    min_rows: int = MIN_ROWS_TO_DELETE,
) -> CopyPlan:
    """Plan copy ``k`` (1-based): rows to delete (with the cascade) and, with ``rescale``, measure factors."""
    rng = np.random.default_rng(stable_int(seed, env.env_id, "copy", k))
    keep: dict[str, np.ndarray] = {}
    for name in sorted(env.tables):
        n = env.tables[name].n_rows
        mask = np.ones(n, dtype=bool)
        if n >= min_rows:
            mask[rng.choice(n, size=round(delete_fraction * n), replace=False)] = False
        keep[name] = mask
    _cascade(env, keep)
    factors: dict[tuple[str, str], float] = {}
    if rescale:
        frng = np.random.default_rng(stable_int(seed, env.env_id, "rescale", k))
        lo, hi = math.log(RESCALE_RANGE[0]), math.log(RESCALE_RANGE[1])
        for name in sorted(env.tables):
            for col, info in roles[name].items():
                if info.role == "measure":
                    mag = frng.uniform(lo, hi)
                    factors[(name, col)] = float(math.exp(mag if frng.random() < 0.5 else -mag))
    return CopyPlan(k, keep, factors)


def plan_copies(
    env: Environment, roles: dict[str, dict[str, ColumnInfo]], n_copies: int, seed: int, *, rescale: bool
) -> list[CopyPlan]:
    """Plans for copies ``1..n_copies``; copy k's deletions depend only on ``(seed, env_id, k)``."""
    return [plan_copy(env, roles, k, seed, rescale=rescale) for k in range(1, n_copies + 1)]


def sqlite_copy(
    env: Environment, plan: CopyPlan | None, dest: sqlite3.Connection | None = None
) -> sqlite3.Connection:
    """Copy ``env``'s database into ``dest`` (default: a new in-memory database) minus the planned rows.

    The whole file is copied with SQLite's backup API (schema, indexes, views, exact stored values) — for
    a sampled environment, the sample's database (:attr:`Environment.image`) is deserialized instead —
    then deleted rows are removed by ``rowid`` (by primary key for ``WITHOUT ROWID`` tables).
    ``plan=None`` copies the original unchanged.
    """
    if env.kind != "sqlite":
        raise ValueError(f"{env.source}: a SQL copy needs a SQLite environment, not a table file")
    dest = dest if dest is not None else sqlite3.connect(":memory:")
    if env.image is not None:
        dest.deserialize(env.image)
    else:
        src = sqlite3.connect(f"file:{env.source.resolve().as_posix()}?mode=ro&immutable=1", uri=True)
        try:
            src.backup(dest)
        finally:
            src.close()
    if plan is not None:
        for name, mask in plan.keep.items():
            if mask.all():
                continue
            table = env.tables[name]
            gone = np.flatnonzero(~mask)
            qn = quote_ident(name)
            if table.rowids is not None:
                dest.executemany(f"DELETE FROM {qn} WHERE rowid = ?", [(table.rowids[i],) for i in gone])
            else:
                pk = table.primary_key or tuple(table.columns)
                idx = [table.columns.index(c) for c in pk]
                cond = " AND ".join(f"{quote_ident(c)} IS ?" for c in pk)
                dest.executemany(
                    f"DELETE FROM {qn} WHERE {cond}", [tuple(table.rows[i][j] for j in idx) for i in gone]
                )
        dest.commit()
    return dest


def _rescale(series: pd.Series, factor: float) -> pd.Series:
    if pd.api.types.is_integer_dtype(series.dtype):
        scaled = (series.astype("float64") * factor).round()
        return scaled.astype(series.dtype)
    if pd.api.types.is_float_dtype(series.dtype):
        return series * factor
    # object column of numbers (mixed int/float): keep ints as ints
    return series.map(lambda v: v if v is None else (round(v * factor) if isinstance(v, int) else v * factor))


def pandas_copy(
    env: Environment, plan: CopyPlan | None, frames: dict[str, pd.DataFrame] | None = None
) -> dict[str, pd.DataFrame]:
    """The environment's tables as DataFrames with the plan's rows removed and measures rescaled.

    ``frames`` are the original tables to start from (default: :meth:`TableData.frame`); rows are in the
    same order as ``env``'s rows, which the plan's masks index.
    """
    out: dict[str, pd.DataFrame] = {}
    for name, table in env.tables.items():
        frame = table.frame() if frames is None else frames[name]
        if plan is not None:
            mask = plan.keep[name]
            if not mask.all():
                frame = frame[mask].reset_index(drop=True)
            for (tname, col), f in plan.factors.items():
                if tname == name:
                    frame = frame.assign(**{col: _rescale(frame[col], f)})
        out[name] = frame
    return out


def write_atomic_bytes(path: Path, data: bytes) -> None:
    """Write bytes via a temporary file and a rename (:func:`datadojo.fs.write_bytes_atomic`)."""
    write_bytes_atomic(path, data)


def write_sqlite_atomic(con: sqlite3.Connection, path: Path) -> None:
    """Save an (in-memory) database to ``path`` via a temporary file and a rename."""
    with atomic_path(path) as tmp:
        tmp.unlink(missing_ok=True)  # one a killed run left: backup() must start from an empty file
        out = sqlite3.connect(tmp)
        try:
            con.backup(out)
        finally:
            out.close()


def parquet_roundtrip(frame: pd.DataFrame) -> tuple[bytes, pd.DataFrame]:
    """The Parquet bytes of ``frame`` and the frame read back from them.

    Synthesis executes pandas programs on the read-back frame, so it sees exactly the dtypes an agent gets
    from ``pd.read_parquet`` on the stored file (e.g. pandas' ``str`` dtype for text columns).
    """
    data = frame.to_parquet(index=False)
    return data, pd.read_parquet(io.BytesIO(data))

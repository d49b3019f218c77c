"""Canonical execution results, and the agreement measure m of EnvLunch §3, Eq. (4).

The paper: "m ∈ [0, 1] measures agreement between two execution results and equals 1 only when they agree
exactly; it is the overlap of row multisets for relational results and an exact comparison after
canonicalisation for dataframe results." It does not spell the canonicalisation out; these are the rules
(also in ``docs/envlunch.md``):

**Values.** ``None``, NaN, ``NaT`` and ``pd.NA`` → ``None``; booleans → ``0``/``1``; a float that is
integral (and below 2**53) → that ``int`` (so SQLite's ``3.0`` equals pandas' ``3``); any other finite float
is rounded to :data:`SIG_DIGITS` significant digits (so ``sum``/``mean`` computed in a different order
agree); ``-0.0`` → ``0``; ±inf stay floats; NumPy scalars become Python ones; text is compared exactly
(case and spaces matter); bytes are decoded as UTF-8; timestamps become ``YYYY-MM-DD`` (midnight) or
``YYYY-MM-DD HH:MM:SS`` text, the form SQLite stores dates in.

**Shape.** A scalar is a 1×1 result. A ``Series``, ``Index``, list or array is one column; a ``Series`` or
``DataFrame`` whose index is not a default ``RangeIndex`` gets its index turned into leading columns
(``reset_index``), because a ``groupby`` result keeps its groups there. Column *names* are ignored (an
agent may name an aggregate anything), and so are column *order* and row *order*: columns are sorted by
their sorted contents, rows are sorted. Two results are equal when some ordering of columns makes their
row multisets equal.

**m.** Relational (SQL) results: multiset Jaccard overlap |A ∩ B| / |A ∪ B| of the rows, maximised over
column orderings (all of them up to :data:`MAX_PERMUTED_COLUMNS` columns); 1 exactly when the multisets
agree, 0 when the arity differs. Dataframe (pandas) results: 1 when the canonical forms are equal, else 0.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "MAX_PERMUTED_COLUMNS",
    "SHAPE_SOURCE",
    "SIG_DIGITS",
    "Canonical",
    "canon_value",
    "canonical_from_json",
    "canonical_pandas",
    "canonical_rows",
    "exact_match",
    "is_degenerate",
    "json_value",
    "result_table",
    "row_overlap",
]

SIG_DIGITS = 9
MAX_PERMUTED_COLUMNS = 4
_INT_LIMIT = 2**53

Value = None | int | float | str


def canon_value(v: Any) -> Value:
    """One value in canonical form (rules in the module docstring)."""
    if v is None or v is pd.NaT or v is pd.NA:
        return None
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, decimal.Decimal):
        v = float(v)
    if isinstance(v, (float, np.floating)):
        x = float(v)
        if math.isnan(x):
            return None
        if math.isinf(x):
            return x
        if x.is_integer() and abs(x) < _INT_LIMIT:
            return int(x)
        r = float(f"{x:.{SIG_DIGITS}g}")
        return int(r) if r.is_integer() and abs(r) < _INT_LIMIT else r
    if isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (pd.Timestamp, _dt.datetime)):
        ts = pd.Timestamp(v)
        if ts.hour == ts.minute == ts.second == ts.microsecond == 0:
            return ts.strftime("%Y-%m-%d")
        return ts.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(v, _dt.date):
        return v.isoformat()
    if isinstance(v, np.generic):
        return canon_value(v.item())
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return str(v)


def json_value(v: Any) -> Any:
    """A value as plain JSON (for showing and storing a result): like :func:`canon_value` without rounding."""
    if isinstance(v, (float, np.floating)):
        x = float(v)
        if math.isnan(x):
            return None
        return x if math.isfinite(x) else str(x)
    return canon_value(v)


def _sort_key(v: Value) -> tuple[int, Any]:
    if v is None:
        return (0, 0)
    if isinstance(v, (int, float)):
        return (1, v)
    return (2, v)


@dataclass(frozen=True)
class Canonical:
    """A result in canonical form: ``rows`` sorted, columns in canonical order; ``columns`` for display only
    (two results with the same rows are equal whatever their column names)."""

    columns: tuple[str, ...] = field(compare=False)
    rows: tuple[tuple[Value, ...], ...]

    @property
    def arity(self) -> int:
        return len(self.rows[0]) if self.rows else len(self.columns)

    @property
    def n_rows(self) -> int:
        return len(self.rows)

    def to_json(self) -> dict[str, Any]:
        return {"columns": list(self.columns), "rows": [list(r) for r in self.rows]}


def canonical_from_json(data: dict[str, Any]) -> Canonical:
    """Rebuild a :class:`Canonical` stored with :meth:`Canonical.to_json` (inf was stored as text)."""
    try:
        cols = tuple(str(c) for c in data["columns"])
        rows = [tuple(_from_json(v) for v in r) for r in data["rows"]]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a stored canonical result (needs 'columns' and 'rows'): {exc}") from exc
    return canonical_rows(cols, rows)


def _from_json(v: Any) -> Value:
    if v in ("inf", "-inf"):
        return float(v)
    return canon_value(v)


def _column_key(rows: Sequence[tuple[Value, ...]], j: int) -> tuple[Any, ...]:
    return tuple(sorted(_sort_key(r[j]) for r in rows))


def _sorted_rows(rows: Sequence[tuple[Value, ...]], order: Sequence[int]) -> tuple[tuple[Value, ...], ...]:
    permuted = [tuple(r[j] for j in order) for r in rows]
    return tuple(sorted(permuted, key=lambda r: tuple(_sort_key(v) for v in r)))


def canonical_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Canonical:
    """Canonicalise a relational result (column names and raw rows, as a DB-API cursor returns them)."""
    crow = [tuple(canon_value(v) for v in r) for r in rows]
    arity = len(columns) if columns else (len(crow[0]) if crow else 0)
    for i, r in enumerate(crow):
        if len(r) != arity:
            raise ValueError(f"row {i} has {len(r)} values, expected {arity}")
    keys = [_column_key(crow, j) for j in range(arity)]
    order = sorted(range(arity), key=lambda j: (keys[j], j))
    # Columns with equal contents: any order among them is as good; pick the smallest row form.
    groups = [list(g) for _, g in itertools.groupby(order, key=lambda j: keys[j])]
    best = _sorted_rows(crow, order)
    tied = [g for g in groups if len(g) > 1]
    if tied and sum(len(g) for g in tied) <= MAX_PERMUTED_COLUMNS:
        for perms in itertools.product(*(itertools.permutations(g) for g in groups)):
            cand = _sorted_rows(crow, [j for p in perms for j in p])
            if [tuple(_sort_key(v) for v in r) for r in cand] < [
                tuple(_sort_key(v) for v in r) for r in best
            ]:
                best = cand
    names = tuple(str(columns[j]) if j < len(columns) else f"c{j}" for j in order)
    return Canonical(names, best)


#: Turns a pandas program's result into ``(column names, rows)``: the *shape* rules of the module
#: docstring. It is source text because the same function must run inside the sandbox (appended to an
#: agent's program by :mod:`.executor`) and here; one text, so the two can never disagree.
SHAPE_SOURCE = r"""
def _envlunch_plain(v):
    import datetime as _dt
    import math as _m
    import numpy as _np
    import pandas as _pd
    if v is None or v is _pd.NaT or v is _pd.NA:
        return None
    if isinstance(v, _np.generic):
        v = v.item()
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, str)):
        return v
    if isinstance(v, float):
        return None if _m.isnan(v) else v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (_pd.Timestamp, _dt.datetime)):
        ts = _pd.Timestamp(v)
        if ts.hour == ts.minute == ts.second == ts.microsecond == 0:
            return ts.strftime("%Y-%m-%d")
        return ts.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(v, _dt.date):
        return v.isoformat()
    try:
        if _pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


def _envlunch_shape(obj):
    import numpy as _np
    import pandas as _pd

    def default_index(ix):
        return isinstance(ix, _pd.RangeIndex) and ix.start == 0 and ix.step == 1 and ix.name is None

    def rows_of(frame):
        return [[_envlunch_plain(v) for v in r] for r in frame.itertuples(index=False, name=None)]

    if isinstance(obj, _pd.DataFrame):
        frame = obj if default_index(obj.index) else obj.reset_index()
        cols = [".".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in frame.columns]
        return cols, rows_of(frame)
    if isinstance(obj, _pd.Series):
        name = "value" if obj.name is None else str(obj.name)
        if not default_index(obj.index):
            frame = obj.reset_index(name=name) if name not in [str(n) for n in obj.index.names] else (
                obj.rename("value").reset_index())
            return _envlunch_shape(frame)
        return [name], [[_envlunch_plain(v)] for v in obj.tolist()]
    if isinstance(obj, _pd.Index):
        return [str(obj.name or "value")], [[_envlunch_plain(v)] for v in obj.tolist()]
    if isinstance(obj, _np.ndarray):
        if obj.ndim == 0:
            return ["value"], [[_envlunch_plain(obj.item())]]
        if obj.ndim == 1:
            return ["value"], [[_envlunch_plain(v)] for v in obj.tolist()]
        if obj.ndim == 2:
            return [f"c{j}" for j in range(obj.shape[1])], [[_envlunch_plain(v) for v in r] for r in obj.tolist()]
        raise ValueError(f"cannot compare a {obj.ndim}-dimensional array")
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = list(obj)
        if items and all(isinstance(r, (list, tuple)) for r in items):
            width = max(len(r) for r in items)
            if any(len(r) != width for r in items):
                raise ValueError("rows of different lengths")
            return [f"c{j}" for j in range(width)], [[_envlunch_plain(v) for v in r] for r in items]
        return ["value"], [[_envlunch_plain(v)] for v in items]
    if isinstance(obj, dict):
        return ["key", "value"], [[_envlunch_plain(k), _envlunch_plain(v)] for k, v in obj.items()]
    return ["value"], [[_envlunch_plain(obj)]]
"""
_shape_ns: dict[str, Any] = {}
exec(compile(SHAPE_SOURCE, "<envlunch-shape>", "exec"), _shape_ns)
_shape = _shape_ns["_envlunch_shape"]


def result_table(obj: Any) -> tuple[list[str], list[list[Any]]]:
    """``(columns, rows)`` of a pandas program's result, values as plain Python (JSON-able except ±inf)."""
    return _shape(obj)


def canonical_pandas(obj: Any) -> Canonical:
    """Canonicalise what a pandas program left as its result (scalar, Series, DataFrame, list, array)."""
    cols, rows = _shape(obj)
    return canonical_rows(cols, rows)


def is_degenerate(result: Canonical) -> bool:
    """Empty, all-NULL, or holding ±inf: a result that says nothing about the computation (§3 filter)."""
    if not result.rows:
        return True
    values = [v for r in result.rows for v in r]
    if all(v is None for v in values):
        return True
    return any(isinstance(v, float) and math.isinf(v) for v in values)


def exact_match(pred: Canonical, ref: Canonical) -> float:
    """Dataframe m: 1.0 when the canonical forms are equal, else 0.0."""
    if pred.arity != ref.arity or pred.n_rows != ref.n_rows:
        return 0.0
    return 1.0 if pred.rows == ref.rows else 0.0


def _jaccard(a: Counter[tuple[Value, ...]], b: Counter[tuple[Value, ...]]) -> float:
    inter = sum((a & b).values())
    union = sum((a | b).values())
    return 1.0 if union == 0 else inter / union


def row_overlap(pred: Canonical, ref: Canonical) -> float:
    """Relational m: multiset Jaccard overlap of rows, maximised over column orderings of ``pred``."""
    if pred.arity != ref.arity:
        return 0.0
    if pred.rows == ref.rows:
        return 1.0
    ref_counts = Counter(ref.rows)
    arity = pred.arity
    if arity <= 1 or arity > MAX_PERMUTED_COLUMNS:
        return _jaccard(Counter(pred.rows), ref_counts)
    best = 0.0
    for perm in itertools.permutations(range(arity)):
        score = _jaccard(Counter(tuple(r[j] for j in perm) for r in pred.rows), ref_counts)
        best = max(best, score)
        if best == 1.0:
            break
    return best

"""Canonical execution results, and the agreement measure m of EnvLunch §3, Eq. (4).

The paper: "m ∈ [0, 1] measures agreement between two execution results and equals 1 only when they agree
exactly; it is the overlap of row multisets for relational results and an exact comparison after
canonicalization for dataframe results." It does not spell the canonicalization out; these are the rules
(also in ``docs/envlunch.md``):

**Values.** ``None``, NaN, ``NaT`` and ``pd.NA`` → ``None``; booleans → ``0``/``1``; a float that is
integral (and below 2**53) → that ``int`` (so SQLite's ``3.0`` equals pandas' ``3``); any other finite float
is kept as it is (no rounding: comparisons use a tolerance, below); ``-0.0`` → ``0``; ±inf stay floats; NumPy scalars become Python ones; text is compared exactly
(case and spaces matter); bytes are decoded as UTF-8; timestamps become ``YYYY-MM-DD`` (midnight) or
``YYYY-MM-DD HH:MM:SS`` text, the form SQLite stores dates in.

**Shape.** A scalar is a 1×1 result. A ``Series``, ``Index``, list or array is one column; a ``Series`` or
``DataFrame`` whose index is not a default ``RangeIndex`` gets its index turned into leading columns
(``reset_index``), because a ``groupby`` result keeps its groups there. Column *names* are ignored (an
agent may name an aggregate anything), and so are column *order* and row *order*: columns are sorted by
their sorted contents, rows are sorted. Two results are equal when some ordering of columns makes their
row multisets equal.

**Equal values.** Two numbers are equal when ``math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)``
(:data:`REL_TOL` = 1e-9, :data:`ABS_TOL` = 1e-12): a ``sum`` or ``mean`` computed in another order, or by
SQLite instead of pandas, differs in the last bits, and rounding to a fixed number of digits does not fix
that (1.00000000501 and 1.00000000499 round to different 9-digit figures although they are 2e-11 apart).
±inf equal only themselves; None equals only None; text and numbers never equal each other.

**Column alignment.** Column names are ignored, so ``pred``'s columns are matched to ``ref``'s: up to
:data:`MAX_PERMUTED_COLUMNS` columns every ordering is tried; wider results are aligned by their value
multisets (each ``pred`` column to the ``ref`` column whose values overlap it most, equal names breaking
ties), then improved by swapping pairs of columns whose multisets are alike (equal-content columns, such as
two 0/1 flags) while that raises the row overlap. A changed cell therefore never misaligns the columns at
any width (sorting the columns by content alone would, once the cell changes the content order).

**m.** Relational (SQL) results: multiset Jaccard overlap |A ∩ B| / |A ∪ B| of the rows (rows equal value by
value as above), maximized over the column alignments; 1 exactly when the multisets agree, 0 when the arity
differs. Dataframe (pandas) results: 1 when some alignment pairs every row with an equal row, else 0.
"""

from __future__ import annotations

import bisect
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
    "ABS_TOL",
    "MAX_PERMUTED_COLUMNS",
    "REL_TOL",
    "SHAPE_SOURCE",
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
    "same_result",
    "values_close",
]

#: Relative and absolute tolerance of two numbers being equal (module docstring, "Equal values").
REL_TOL = 1e-9
ABS_TOL = 1e-12
#: Up to this many columns every column ordering is tried; wider results are aligned by value multisets.
MAX_PERMUTED_COLUMNS = 4
#: A swap of two columns is tried when it costs at most this much summed column-multiset similarity.
_SWAP_SLACK = 0.25
#: At most this many orders of alike columns are tried exhaustively (6! = 720).
_MAX_TIED_ORDERS = 720
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
        return x
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
    """A value as plain JSON (for showing and storing a result): like :func:`canon_value`, floats kept."""
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
    """Canonicalize a relational result (column names and raw rows, as a DB-API cursor returns them)."""
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
    """Canonicalize what a pandas program left as its result (scalar, Series, DataFrame, list, array)."""
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


def values_close(a: Value, b: Value) -> bool:
    """Two canonical values are equal (module docstring, "Equal values")."""
    if a == b:
        return True
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isinf(a) or math.isinf(b):
            return False
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return False


def _rows_close(r: tuple[Value, ...], s: tuple[Value, ...]) -> bool:
    return all(values_close(a, b) for a, b in zip(r, s, strict=True))


def _is_number(v: Value) -> bool:
    return isinstance(v, (int, float)) and not math.isinf(v)


_NUM = object()  # the place of a number in a row's skeleton


def _close_matches(pred: list[tuple[Value, ...]], ref: list[tuple[Value, ...]]) -> int:
    """How many rows of ``pred`` pair with distinct rows of ``ref`` equal within the tolerance.

    Rows are grouped by their non-numeric values; in a group, ``ref`` rows are sorted by the numeric
    column with the most distinct values and each ``pred`` row takes the first free equal row inside the
    tolerance window of that column (greedy; equality within a tolerance is all but transitive here)."""
    groups: dict[tuple[Any, ...], list[tuple[Value, ...]]] = {}
    for r in ref:
        groups.setdefault(tuple(_NUM if _is_number(v) else v for v in r), []).append(r)
    by_group: dict[tuple[Any, ...], list[tuple[Value, ...]]] = {}
    for r in pred:
        sk = tuple(_NUM if _is_number(v) else v for v in r)
        if sk in groups:
            by_group.setdefault(sk, []).append(r)
    found = 0
    for sk, prows in by_group.items():
        rrows = groups[sk]
        numeric = [j for j, v in enumerate(sk) if v is _NUM]
        if not numeric:
            continue  # rows without numbers are equal only exactly, and exact pairs were taken already
        col = max(numeric, key=lambda j: len({r[j] for r in rrows}))
        rrows = sorted(rrows, key=lambda r: r[col])
        keys = [float(r[col]) for r in rrows]  # type: ignore[arg-type]
        used = [False] * len(rrows)
        for p in prows:
            x = float(p[col])  # type: ignore[arg-type]
            w = max(2 * REL_TOL * abs(x), ABS_TOL)
            k = bisect.bisect_left(keys, x - w)
            while k < len(keys) and keys[k] <= x + w:
                if not used[k] and _rows_close(p, rrows[k]):
                    used[k] = True
                    found += 1
                    break
                k += 1
    return found


def _matches(pred_rows: Sequence[tuple[Value, ...]], ref_counts: Counter[tuple[Value, ...]]) -> int:
    """The size of the row multiset intersection, rows equal value by value within the tolerance."""
    counts = Counter(pred_rows)
    common = counts & ref_counts
    exact = sum(common.values())
    if exact == len(pred_rows) or exact == ref_counts.total():
        return exact
    rest_p = list((counts - common).elements())
    rest_r = list((ref_counts - common).elements())
    return exact + _close_matches(rest_p, rest_r)


def _column_bag(rows: Sequence[tuple[Value, ...]], j: int) -> Counter[Any]:
    # Numbers at 6 significant digits: only to judge which columns are alike, never to decide equality.
    return Counter(
        f"{float(r[j]):.6g}" if _is_number(r[j]) else (type(r[j]).__name__, r[j])  # type: ignore[arg-type]
        for r in rows
    )


def _alignments(pred: Canonical, ref: Canonical) -> list[tuple[int, ...]]:
    """Orders of ``pred``'s columns worth trying against ``ref`` (``order[i]`` = pred column at ref's
    column i), best guess first: all orders up to :data:`MAX_PERMUTED_COLUMNS` columns, otherwise the
    alignment by value multisets (module docstring)."""
    arity = pred.arity
    identity = tuple(range(arity))
    if arity <= 1:
        return [identity]
    if arity <= MAX_PERMUTED_COLUMNS:
        return [identity, *(p for p in itertools.permutations(range(arity)) if p != identity)]
    pb = [_column_bag(pred.rows, j) for j in range(arity)]
    rb = [_column_bag(ref.rows, i) for i in range(arity)]
    size = max(pred.n_rows, ref.n_rows, 1)
    sim = [[sum((pb[j] & rb[i]).values()) / size for i in range(arity)] for j in range(arity)]
    pairs = sorted(
        (
            (sim[j][i], pred.columns[j] == ref.columns[i], -abs(i - j), j, i)
            for j in range(arity)
            for i in range(arity)
        ),
        reverse=True,
    )
    order: list[int | None] = [None] * arity
    taken: set[int] = set()
    for *_, j, i in pairs:
        if order[i] is None and j not in taken:
            order[i] = j
            taken.add(j)
    alike = [
        [sum((pb[j] & pb[k]).values()) / max(pred.n_rows, 1) for k in range(arity)] for j in range(arity)
    ]
    return _with_swaps(tuple(j for j in order if j is not None), sim, alike)


def _with_swaps(
    order: tuple[int, ...], sim: list[list[float]], alike: list[list[float]]
) -> list[tuple[int, ...]]:
    """``order``, then the orders that permute columns with alike value multisets among their places (all of
    them while there are at most :data:`_MAX_TIED_ORDERS`), else those one swap away that keep the columns
    about as similar to ``ref``'s."""
    n = len(order)
    parent = list(range(n))

    def root(j: int) -> int:
        while parent[j] != j:
            j = parent[j]
        return j

    for j in range(n):
        for k in range(j + 1, n):
            if alike[j][k] >= 1.0 - _SWAP_SLACK:
                parent[root(k)] = root(j)
    place = {j: i for i, j in enumerate(order)}
    groups: dict[int, list[int]] = {}
    for j in range(n):
        groups.setdefault(root(j), []).append(j)
    tied = [sorted(g, key=place.__getitem__) for g in groups.values() if len(g) > 1]
    if math.prod(math.factorial(len(g)) for g in tied) <= _MAX_TIED_ORDERS:
        out = [order]
        for perms in itertools.product(*(itertools.permutations(g) for g in tied)):
            cand = list(order)
            for g, p in zip(tied, perms, strict=True):
                for j, k in zip(g, p, strict=True):
                    cand[place[j]] = k
            if tuple(cand) != order:
                out.append(tuple(cand))
        return out
    out = [order]
    for a in range(n):
        for b in range(a + 1, n):
            ja, jb = order[a], order[b]
            loss = sim[ja][a] + sim[jb][b] - sim[ja][b] - sim[jb][a]
            if loss <= _SWAP_SLACK:
                cand = list(order)
                cand[a], cand[b] = jb, ja
                out.append(tuple(cand))
    return out


def _best_matches(pred: Canonical, ref: Canonical) -> int:
    """The largest row-multiset intersection over the column alignments (hill-climbing over swaps for
    wide results: a swap that raises the intersection is kept and the swaps around it tried again)."""
    ref_counts = Counter(ref.rows)
    need = min(pred.n_rows, ref.n_rows)
    cands = _alignments(pred, ref)
    best, best_order = -1, cands[0]
    for order in cands:
        rows = (
            pred.rows
            if order == tuple(range(pred.arity))
            else [tuple(r[j] for j in order) for r in pred.rows]
        )
        got = _matches(rows, ref_counts)
        if got > best:
            best, best_order = got, order
            if best == need:
                return best
    if pred.arity > MAX_PERMUTED_COLUMNS:
        for _ in range(pred.arity):  # a few rounds of swaps around the best order
            improved = False
            for a in range(pred.arity):
                for b in range(a + 1, pred.arity):
                    cand = list(best_order)
                    cand[a], cand[b] = cand[b], cand[a]
                    got = _matches([tuple(r[j] for j in cand) for r in pred.rows], ref_counts)
                    if got > best:
                        best, best_order, improved = got, tuple(cand), True
                        if best == need:
                            return best
            if not improved:
                break
    return best


def exact_match(pred: Canonical, ref: Canonical) -> float:
    """Dataframe m: 1.0 when the results are equal (some column alignment pairs every row of one with an
    equal row of the other, values within the tolerance), else 0.0."""
    if pred.arity != ref.arity or pred.n_rows != ref.n_rows:
        return 0.0
    if pred.rows == ref.rows:
        return 1.0
    return 1.0 if _best_matches(pred, ref) == ref.n_rows else 0.0


def same_result(a: Canonical, b: Canonical) -> bool:
    """``a`` and ``b`` are the same result (:func:`exact_match` is 1)."""
    return exact_match(a, b) == 1.0


def row_overlap(pred: Canonical, ref: Canonical) -> float:
    """Relational m: multiset Jaccard overlap of rows (values within the tolerance), maximized over the
    column alignments of ``pred`` to ``ref`` (module docstring)."""
    if pred.arity != ref.arity:
        return 0.0
    if pred.rows == ref.rows:
        return 1.0
    inter = _best_matches(pred, ref)
    union = pred.n_rows + ref.n_rows - inter
    return 1.0 if union == 0 else inter / union

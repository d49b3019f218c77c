"""Comparing query results: DataMind's column-wise table match and the test-suite bag-of-rows match.

Two rules live here because Spider/BIRD scoring and DataMind's reward both compare the same objects
(result tables of two queries) and must not drift apart: :func:`compare_tables` (below) and
:func:`denotations_equal` (the Spider test-suite rule, at the end of the module).

**DataMind's table comparison**: every gold column must appear among the predicted columns.

DataMind scores BIRD by materializing the predicted and the gold query results to CSV and comparing the
tables (DataMind §5.1, "Evaluation"; reference code ``eval/Datamind/sql/eval_bird.py``,
``compare_pandas_table`` with ``ignore_order=True``). The rule, reproduced here:

* each gold column is a vector of values; it is matched when *some* predicted column holds the same
  values, so extra predicted columns and a different column order or column names are fine;
* with ``ignore_order`` each vector is sorted before comparing, so row order does not matter (columns are
  compared one by one, not as aligned rows, exactly as in the reference);
* two numbers are equal within ``abs_tol`` (DataMind: ``math.isclose(a, b, abs_tol=1e-2)``, whose default
  ``rel_tol=1e-9`` is kept too) and two
  missing values (NULL / NaN / empty CSV cell) are equal;
* the vectors must have the same length.

Values are normalized the way a CSV round trip would (the reference reads both tables back with
``pandas.read_csv``): text that is a number compares as that number, booleans as 0/1, blobs as text.
One deliberate difference: the reference sorts every vector by ``str(x)``, which can put two numbers
that are equal within the tolerance (``0.3333`` and ``0.33``) in different places; here numbers sort by
value, so the tolerance is never defeated by the sort order.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DATAMIND_ABS_TOL",
    "TableMatch",
    "as_columns",
    "compare_tables",
    "csv_value",
    "denotations_equal",
    "values_equal",
]

#: Absolute tolerance of DataMind's ``compare_pandas_table`` (``tolerance = 1e-2``).
DATAMIND_ABS_TOL = 1e-2


def csv_value(value: Any) -> Any:
    """A cell as a CSV round trip would give it back: ``None`` for missing, numbers as numbers, else text."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, bytes | bytearray | memoryview):
        value = bytes(value).decode("utf-8", errors="replace")
    text = str(value).strip()
    if text == "" or text.lower() in ("nan", "null", "none"):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        f = float(text)
    except ValueError:
        return text
    return None if math.isnan(f) else f


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def values_equal(a: Any, b: Any, *, abs_tol: float = DATAMIND_ABS_TOL, rel_tol: float = 1e-9) -> bool:
    """Two normalized cells are equal: both missing, numbers within tolerance, or equal otherwise."""
    if a is None and b is None:
        return True
    if a is None or b is None:
        return False
    if _is_num(a) and _is_num(b):
        if math.isinf(a) or math.isinf(b):
            return a == b
        return abs(float(a) - float(b)) <= max(abs_tol, rel_tol * abs(float(b)))
    return a == b


def _sort_key(v: Any) -> tuple[int, float, str]:
    if v is None:
        return (2, 0.0, "")
    if _is_num(v):
        return (0, float(v), "")
    return (1, 0.0, str(v))


def _vectors_match(
    gold: list[Any], pred: list[Any], abs_tol: float, rel_tol: float, ignore_order: bool
) -> bool:
    if len(gold) != len(pred):
        return False
    if ignore_order:
        gold, pred = sorted(gold, key=_sort_key), sorted(pred, key=_sort_key)
    return all(values_equal(p, g, abs_tol=abs_tol, rel_tol=rel_tol) for g, p in zip(gold, pred, strict=True))


def as_columns(table: Any) -> tuple[list[str], list[list[Any]]]:
    """``(column names, column vectors)`` of a table given in any of the usual in-memory shapes.

    Accepts ``{"columns": [...], "data": [[row], ...]}`` (TableBench / pandas ``split``), a list of row
    dicts (pandas ``records``), a dict of column lists, a list of row lists/tuples (unnamed columns
    ``0, 1, …``), or a pandas DataFrame. Cells are normalized with :func:`csv_value`.
    """
    if hasattr(table, "to_dict") and hasattr(table, "columns") and not isinstance(table, Mapping):
        names = [str(c) for c in table.columns]
        return names, [[csv_value(v) for v in table[c].tolist()] for c in table.columns]
    if isinstance(table, Mapping):
        if "columns" in table and "data" in table:
            names = [str(c) for c in table["columns"]]
            rows = [list(r) for r in table["data"]]
            return names, _rows_to_columns(rows, len(names))
        names = [str(k) for k in table]
        cols = [
            list(v) if isinstance(v, Sequence) and not isinstance(v, str) else [v] for v in table.values()
        ]
        return names, [[csv_value(x) for x in c] for c in cols]
    if isinstance(table, Sequence) and not isinstance(table, str):
        rows_in = list(table)
        if not rows_in:
            return [], []
        if all(isinstance(r, Mapping) for r in rows_in):
            names: list[str] = []
            for r in rows_in:
                for k in r:
                    if str(k) not in names:
                        names.append(str(k))
            return names, [[csv_value(_get(r, n)) for r in rows_in] for n in names]
        if all(isinstance(r, Sequence) and not isinstance(r, str) for r in rows_in):
            width = max(len(r) for r in rows_in)
            return [str(i) for i in range(width)], _rows_to_columns([list(r) for r in rows_in], width)
        return ["0"], [[csv_value(v) for v in rows_in]]
    raise TypeError(f"not a table: {type(table).__name__} (give rows, records, or {{'columns', 'data'}})")


def _get(row: Mapping[Any, Any], name: str) -> Any:
    if name in row:
        return row[name]
    for k, v in row.items():
        if str(k) == name:
            return v
    return None


def _rows_to_columns(rows: list[list[Any]], width: int) -> list[list[Any]]:
    for i, r in enumerate(rows):
        if len(r) != width:
            raise ValueError(f"row {i} has {len(r)} cells, expected {width}")
    return [[csv_value(r[j]) for r in rows] for j in range(width)]


@dataclass(frozen=True)
class TableMatch:
    """Outcome of :func:`compare_tables`: ``match`` and, when it fails, which gold column had no partner."""

    match: bool
    reason: str
    unmatched_gold_columns: tuple[str, ...] = ()


def compare_tables(
    predicted: Any,
    gold: Any,
    *,
    abs_tol: float = DATAMIND_ABS_TOL,
    rel_tol: float = 1e-9,
    ignore_order: bool = True,
    gold_columns: Sequence[int] | None = None,
) -> TableMatch:
    """DataMind's table comparison (module docstring): every gold column has an equal predicted column.

    ``gold_columns`` restricts the check to those gold column positions (the reference's
    ``condition_cols``). An empty gold table (no columns) matches only an empty prediction.
    """
    _, pred_cols = as_columns(predicted)
    gold_names, gold_cols = as_columns(gold)
    if gold_columns is not None:
        gold_names = [gold_names[i] for i in gold_columns]
        gold_cols = [gold_cols[i] for i in gold_columns]
    if not gold_cols:
        ok = not pred_cols
        return TableMatch(
            ok, "both tables are empty" if ok else "the gold table is empty, the prediction is not"
        )
    missing = [
        name
        for name, g in zip(gold_names, gold_cols, strict=True)
        if not any(_vectors_match(g, p, abs_tol, rel_tol, ignore_order) for p in pred_cols)
    ]
    if missing:
        return TableMatch(
            False,
            f"{len(missing)} of {len(gold_cols)} gold column(s) have no equal predicted column: "
            + ", ".join(repr(m) for m in missing[:5]),
            tuple(missing),
        )
    return TableMatch(True, f"all {len(gold_cols)} gold column(s) found among {len(pred_cols)} predicted")


# --- the test-suite denotation match (Spider EX) -------------------------------------------------------


def _cell_key(value: Any) -> str:
    """How test-suite-sql-eval orders the cells of a row before its quick check: text, then type name."""
    return str(value) + str(type(value))


def _unordered(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(sorted(row, key=_cell_key))


def denotations_equal(
    gold: Sequence[Sequence[Any]], predicted: Sequence[Sequence[Any]], *, order_matters: bool
) -> bool:
    """Spider's execution match as test-suite-sql-eval computes it (``exec_eval.result_eq``).

    Two results are equal when some permutation of the predicted columns makes the predicted rows the
    same **multiset** as the gold rows (the same *list* when ``order_matters``, i.e. when the gold query
    has ``ORDER BY``). Facts of the reference kept exactly, since they decide verdicts:

    * two empty results are equal whatever their columns; otherwise row counts and widths must agree,
      so a duplicated or missing column is wrong;
    * cells compare with Python equality (``1 == 1.0``), no tolerance;
    * a quick check runs first: each row's cells, sorted by ``str(cell) + str(type(cell))``, must give
      the same rows (as a list when order matters, as a set otherwise). It is usually implied by the
      full check, but not always (``(2, 2.5)`` vs ``(2.0, 2.5)`` sorts differently), and the reference
      rejects when it fails, so it is reproduced.

    The reference enumerates column permutations (pruned by sampling 20 random rows); here the search
    is exact and deterministic: a gold column can only map to a predicted column holding the same
    multiset of values, identical predicted columns are tried once, and a partial assignment is
    abandoned as soon as the rows restricted to the assigned columns already differ. Both searches
    accept exactly when a valid permutation exists, so the verdicts agree.
    """
    g = [tuple(r) for r in gold]
    p = [tuple(r) for r in predicted]
    if not g and not p:
        return True
    if len(g) != len(p):
        return False
    width = len(g[0])
    if len(p[0]) != width:
        return False
    g_quick, p_quick = [_unordered(r) for r in g], [_unordered(r) for r in p]
    if (g_quick != p_quick) if order_matters else (set(g_quick) != set(p_quick)):
        return False
    g_cols = [tuple(r[i] for r in g) for i in range(width)]
    p_cols = [tuple(r[j] for r in p) for j in range(width)]
    p_counts = [Counter(c) for c in p_cols]
    candidates = [[j for j in range(width) if p_counts[j] == Counter(gc)] for gc in g_cols]
    if any(not c for c in candidates):
        return False
    # Most constrained gold columns first keeps the search small.
    order = sorted(range(width), key=lambda i: len(candidates[i]))

    def rows_agree(assigned: list[tuple[int, int]]) -> bool:
        g_part = [tuple(g[k][i] for i, _ in assigned) for k in range(len(g))]
        p_part = [tuple(p[k][j] for _, j in assigned) for k in range(len(p))]
        return g_part == p_part if order_matters else Counter(g_part) == Counter(p_part)

    def search(depth: int, assigned: list[tuple[int, int]], used: set[int]) -> bool:
        if depth == width:
            return True
        i = order[depth]
        tried: set[tuple[Any, ...]] = set()
        for j in candidates[i]:
            if j in used or p_cols[j] in tried:
                continue
            tried.add(p_cols[j])
            step = [*assigned, (i, j)]
            if rows_agree(step) and search(depth + 1, step, used | {j}):
                return True
        return False

    return search(0, [], set())

"""DA-Code's table, text and chart comparisons, rewritten from the behaviour of its ``da_agent/evaluators``.

Each function takes what DataDojo parsed from an answer (a DataFrame, a JSON value, a chart summary) and
the gold (read by :mod:`datadojo.bench.dacode` at load time) and returns the official credit in [0, 1].
Facts from the official code (``metrics/table.py``, ``metrics/text.py``, ``metrics/image.py``) are stated
on each function; where DataDojo departs, the docstring says so and ``docs/evaluation.md`` lists it.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "CHART_KEYS",
    "compare_chart",
    "compare_table",
    "compare_tables",
    "compare_text",
    "fuzzy_ratio",
    "text_to_json",
]

#: tolerance of every numeric comparison in the table and text scorers (``tolerance = 1e-2``)
TOLERANCE = 1e-2
#: the official table scorer reads at most this many rows and compares at most this many values a column
MAX_ROWS = 10000


# --- tables (compare_csv) ------------------------------------------------------------------------------


def _is_na(x: Any) -> bool:
    try:
        return bool(pd.isna(x))
    except (TypeError, ValueError):
        return False


def _sort_key(x: Any) -> tuple[int, str, bool]:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return (0, "", False)
    return (1, str(x), isinstance(x, (int, float)))


def _normalize(x: Any) -> Any:
    if _is_na(x):
        return "__NA__"
    if isinstance(x, float):
        return round(x / TOLERANCE) * TOLERANCE
    if isinstance(x, str):
        return x.lower().strip()
    return x


def _hashable(column: Sequence[Any], ignore_order: bool) -> tuple[Any, ...]:
    values = [_normalize(x) for x in column]
    if ignore_order:
        values = sorted(values, key=lambda v: (v == "__NA__", str(v)))
    return tuple(values)


def _columns_match(a: Sequence[Any], b: Sequence[Any], ignore_order: bool) -> bool:
    if len(a) != len(b):
        return False
    if ignore_order:
        a, b = sorted(a, key=_sort_key), sorted(b, key=_sort_key)
    for x, y in zip(a, b, strict=True):
        if _is_na(x) and _is_na(y):
            continue
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            if not math.isclose(float(x), float(y), abs_tol=TOLERANCE):
                return False
        elif isinstance(x, str) and isinstance(y, str):
            if x.lower().strip() != y.lower().strip():
                return False
        elif x != y:
            return False
    return True


def compare_table(
    pred: pd.DataFrame,
    gold: pd.DataFrame,
    *,
    condition_cols: Sequence[int] = (),
    score_rule: str = "divide",
    ignore_order: bool = False,
    total_scores: float = 1,
) -> float:
    """``compare_csv`` for one gold table: column names and column order are ignored.

    Every gold column (only those at ``condition_cols`` when given) is looked for among *all* predicted
    columns, as a whole vector: equal when its values pair up (in row order, or each side sorted by the
    text of its values when ``ignore_order``) with numbers within an absolute 0.01, strings equal after
    ``strip().lower()`` and missing values on both sides; a second, hashed look-up (floats rounded to
    multiples of 0.01) also counts as found. Extra predicted columns cost nothing. ``divide`` (the
    default) scores the share of gold columns found, ``all`` 1 only when every one is. An empty table
    scores 0.
    """
    if pred.empty or gold.empty:
        return 0.0
    gold_cols = gold.iloc[:, list(condition_cols)] if condition_cols else gold
    t_gold = [col[:MAX_ROWS] for col in gold_cols.transpose().values.tolist()]
    t_pred = [col[:MAX_ROWS] for col in pred.transpose().values.tolist()]
    hashes = {_hashable(col, ignore_order) for col in t_pred}

    def found(col: list[Any]) -> bool:
        if _hashable(col, ignore_order) in hashes:
            return True
        return any(_columns_match(col, p, ignore_order) for p in t_pred)

    if score_rule == "all":
        return float(total_scores) if all(found(c) for c in t_gold) else 0.0
    if score_rule == "divide":
        return sum(total_scores for c in t_gold if found(c)) / len(t_gold) if t_gold else 0.0
    raise ValueError(f"unknown score_rule {score_rule!r} (the official code knows 'all' and 'divide')")


def compare_tables(
    pred: dict[str, pd.DataFrame], gold: list[tuple[str, pd.DataFrame]], options: dict
) -> float:
    """``compare_sqlite``: each gold table (by name) against the predicted table of that name with
    :func:`compare_table` (``condition_cols`` and ``ignore_order`` per table); the item is the *lowest*
    table score, 0 when a table is missing."""
    if any(name not in pred for name, _ in gold):
        return 0.0
    n = len(gold)
    cols = options.get("condition_cols") or [[] for _ in range(n)]
    orders = options.get("ignore_order") or [False] * n
    scores = [
        compare_table(pred[name], table, condition_cols=cols[i] if i < len(cols) else [], ignore_order=bool(
            orders[i] if i < len(orders) else False))
        for i, (name, table) in enumerate(gold)
    ]  # fmt: skip
    return min(scores) if scores else 0.0


# --- text answers (compare_text) -----------------------------------------------------------------------


def text_to_json(text: str) -> Any:
    """The official ``text2json``: the span from the first ``{`` to the last ``}``, parsed.

    The official code parses it with ``json5``; DataDojo tries JSON, then a Python literal (single
    quotes, ``True``/``None``, trailing commas), which reads every JSON5 value a model writes except
    comments and unquoted keys. ``None`` when nothing parses.
    """
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        return None
    span = match.group()
    try:
        return json.loads(span)
    except (json.JSONDecodeError, RecursionError):
        pass
    try:
        return ast.literal_eval(span)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    try:  # JSON5's true/false/null inside a Python-style literal
        fixed = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", span)))
        return ast.literal_eval(fixed)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


class _NoRule(Exception):
    """A value type the official ``CalculateText`` has no ``calculate_<type>`` for (bool, None)."""


def _calc(gold: Any, ref: Any, ignore_order: Any) -> float:
    kind = type(gold).__name__
    if kind == "float":
        return 1.0 if abs(gold - ref) <= TOLERANCE else 0.0
    if kind == "int":
        return 1.0 if gold == ref else 0.0
    if kind == "str":
        return 1.0 if gold.lower().strip() == ref.lower().strip() else 0.0
    if kind == "list":
        return _calc_list(gold, ref, ignore_order)
    if kind == "dict":
        if gold.keys() != ref.keys():
            return 0.0
        scores = []
        for key, g in gold.items():
            r = ref[key]
            if type(g) is not type(r):
                return 0.0
            scores.append(_calc(g, r, ignore_order))
        return 1.0 if scores and all(scores) else 0.0
    raise _NoRule(kind)


def _calc_list(gold: list[Any], ref: list[Any], ignore_order: Any) -> float:
    if len(gold) != len(ref):
        return 0.0
    order = ignore_order[0] if isinstance(ignore_order, list) else ignore_order
    if order:
        key = _text_sort_key
        gold, ref = sorted(gold, key=key), sorted(ref, key=key)
    scores = []
    for g, r in zip(gold, ref, strict=True):
        if type(g) is not type(r):
            return 0.0
        scores.append(_calc(g, r, ignore_order))
    return 1.0 if scores and all(scores) else 0.0


def _text_sort_key(x: Any) -> tuple[bool, str, bool]:
    return (x is None, str(x), isinstance(x, (int, float)))


def _single(value: Any) -> Any:
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def _text_score(gold: dict[str, Any], ref: dict[str, Any], score_rule: str, ignore_order: Any) -> float:
    gold_l = {str(k).lower().strip(): v for k, v in gold.items()}
    ref_l = {str(k).lower().strip(): v for k, v in ref.items()}
    scores: list[float] = []
    for key, g in gold_l.items():
        if key not in ref_l:
            scores.append(0.0)
            continue
        r = ref_l[key]
        gn, rn = _single(g), _single(r)
        if type(gn) is type(rn):
            g, r = gn, rn
        elif isinstance(g, list) and not isinstance(r, list):
            r = [r]
        elif not isinstance(g, list) and isinstance(r, list):
            g = [g]
        try:
            r = type(g)(r)  # the official code casts the answer to the gold's type (int(3.7) is 3)
        except Exception:  # the official code scores any failed cast 0
            scores.append(0.0)
            continue
        scores.append(_calc(g, r, ignore_order))
    if score_rule == "all":
        return float(all(scores))
    if score_rule == "devide":  # sic: the official spelling; 'divide' raises there
        return sum(scores) / len(scores)
    raise ValueError(f"Wrong Score Rule: {score_rule}")


def compare_text(answer: Any, golds: list[dict[str, Any]], options: dict[str, Any]) -> float:
    """``compare_text``: the answer's JSON object against each gold object; the best score.

    Keys compare stripped and lower-cased; a gold key missing from the answer scores 0; one-element
    lists equal their element; the answer's value is cast to the gold's type (so ``3.7`` read against an
    int gold becomes ``3``), a failed cast scores 0; floats match within an absolute 0.01 (boundary
    included), ints exactly, strings stripped and lower-cased, lists element by element with equal types
    (sorted first with ``ignore_order``), dicts key by key. ``score_rule`` ``all`` (default) needs every
    key right. A bool or null gold value has no rule in the official code: the item scores 0. An answer
    that is a list counts by its first object; no object scores 0.
    """
    if isinstance(answer, list):
        answer = next((a for a in answer if isinstance(a, dict)), None)
    if not isinstance(answer, dict):
        return 0.0
    rules = options.get("score_rule") or ["all"] * len(golds)
    rules = [rules] * len(golds) if isinstance(rules, str) else rules
    ignore_order = options.get("ignore_order", [False] * len(golds))
    try:
        return max(_text_score(g, answer, rules[i], ignore_order) for i, g in enumerate(golds))
    except (_NoRule, ValueError):
        return 0.0  # the official evaluator catches the error and scores the item 0


# --- charts (compare_image) ----------------------------------------------------------------------------

#: the keys of the official chart summary (``plot.json``) and what the scorer does with each
CHART_KEYS = (
    "type",
    "color",
    "figsize",
    "graph_title",
    "legend_title",
    "labels",
    "x_label",
    "y_label",
    "xtick_labels",
    "ytick_labels",
)


def fuzzy_ratio(a: str, b: str) -> int:
    """``fuzz.ratio``: 100 × the similarity of two strings (Levenshtein ratio, rounded).

    ``2·M / T`` with M the matched characters of the optimal alignment, i.e. ``(len(a) + len(b) -
    indel_distance) / (len(a) + len(b))``: what fuzzywuzzy computes with python-Levenshtein installed.
    """
    if not a and not b:
        return 100
    n, m = len(a), len(b)
    prev = list(range(m + 1))
    for i in range(1, n + 1):
        cur = [i] + [0] * m
        for j in range(1, m + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (0 if a[i - 1] == b[j - 1] else 2))
        prev = cur
    return round(100 * (n + m - prev[m]) / (n + m))


def _hex_rgb(color: str) -> tuple[int, int, int]:
    c = color.lstrip("#")
    return (int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16))


def _compare_key(key: str, pred: dict[str, Any], gold: dict[str, Any]) -> bool:
    key = key.lower()
    if key == "figsize":
        return list(pred.get(key, [])) == list(gold.get(key, []))
    if key == "color":
        golds = [_hex_rgb(c) for c in gold.get(key, [])]
        return all(
            any(math.dist(_hex_rgb(c), g) <= 15 for g in golds) for c in pred.get(key, [])
        )  # every predicted colour within distance 15 of some gold colour
    if key == "type":
        return str(pred.get(key, "")).lower() == str(gold.get(key, "")).lower()
    if key in ("graph_title", "x_label", "y_label", "legend_title"):
        p, g = str(pred.get(key, "") or ""), str(gold.get(key, "") or "")
        if not p and g:
            return False
        return fuzzy_ratio(p.lower(), g.lower()) >= 90
    if key in ("labels", "xtick_labels", "ytick_labels"):
        p_list = [str(x).lower() for x in pred.get(key, [])]
        g_list = [str(x).lower() for x in gold.get(key, [])]
        if len(p_list) != len(g_list):
            return False
        return all(any(fuzzy_ratio(x, y) > 95 for y in g_list) for x in p_list)
    raise ValueError(f"please check your key: {key}")


def _data_close(pred: np.ndarray, gold: np.ndarray, scale: bool) -> bool:
    if pred.shape != gold.shape:
        return False
    if scale:
        pred, gold = pred / np.sum(pred), gold / np.sum(gold)
    pred = np.sort(pred, axis=0)
    gold = np.sort(gold, axis=0)
    return bool(np.allclose(pred, gold, atol=TOLERANCE, equal_nan=True))


def _as_2d(values: Any) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    return arr.reshape(-1, 1) if arr.ndim == 1 else arr


def compare_chart(
    pred: dict[str, Any], gold: dict[str, Any], keys: Sequence[str]
) -> tuple[float, dict[str, bool]]:
    """``compare_image`` without its pixel test: the chart's data, then its ``keys``.

    Data (``result.npy``: bar heights per group, line y-values per line, pie fractions, scatter points):
    1-D arrays become one column; shapes must be equal; each column is sorted (``axis=0``: the order of
    the series/groups does not matter, the order of values inside one does) and compared with
    ``np.allclose(atol=0.01)``, as is, or each array divided by its own sum. Then every key in ``keys``
    (all gold keys when empty): ``figsize`` equal, ``color`` each predicted colour within RGB distance 15
    of a gold one, ``type`` equal ignoring case, titles and axis labels a fuzzy ratio ≥ 90, legend and
    tick labels equal in number and each > 95 similar to some gold label. Credit 1 only when the data
    and every key match. The official scorer first compares the rendered images pixel by pixel (a match
    scores 1 outright); DataDojo has no rendered image (see ``docs/evaluation.md``).
    """
    parts: dict[str, bool] = {}
    try:
        p_data, g_data = _as_2d(pred.get("data", [])), _as_2d(gold.get("data", []))
    except (TypeError, ValueError):
        return 0.0, {"data": False}
    with np.errstate(divide="ignore", invalid="ignore"):
        parts["data"] = _data_close(p_data, g_data, False)
        parts["scale_data"] = _data_close(p_data, g_data, True)
    data_ok = parts["data"] or parts["scale_data"]
    info = gold.get("info") or {}
    if not info:
        return float(data_ok), parts
    p_info = pred.get("info", pred)
    ok = True
    for key in keys or list(info):
        try:
            parts[key] = _compare_key(key, p_info, info)
        except (TypeError, ValueError, AttributeError):
            parts[key] = False
        ok = ok and parts[key]
    return float(data_ok and ok), parts

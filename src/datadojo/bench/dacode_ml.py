"""DA-Code's machine-learning scorers (``compare_ml``, ``compare_competition_ml``), in numpy.

Rewritten from the behaviour of ``da_agent/evaluators/metrics/ml.py`` and ``script/ml_script.py``; the
official code uses scikit-learn and fuzzywuzzy, which DataDojo does not depend on: the metrics here are
their definitions, checked against hand computations in ``tests/bench/test_conformance_dacode.py``.

**Credit**: the metric ``s`` is turned into ``min(max((s - lower_bound) / (upper_bound - lower_bound), 0),
1)`` with the task's bounds (defaults 0.0 and 0.9). For an error metric the task lists the bounds the
other way round when the baseline error is the larger (``rmse`` 51.88 → 11.52), so smaller errors score
higher; the official files do not do so for every error metric (``mae`` lower 1.334, upper 1.443), and
there the formula rewards a *larger* error: DataDojo keeps the formula and the bounds as released.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from datadojo.bench.dacode_compare import fuzzy_ratio

__all__ = ["ML_METRICS", "MLResult", "compare_competition_ml", "compare_ml", "scaled"]

_LABELS = ("label", "labels", "class", "classes", "results", "result")
TASK_TYPES = {
    "binary classification": "binary",
    "multi classification": "multi",
    "cluster": "cluster",
    "regression": "regression",
}


class MLResult(dict):
    """``{"score": credit, "metric": value or None, "errors": [...]}``: what the scorer found."""


def scaled(value: float, lower: float, upper: float) -> float:
    """The official credit: ``min(max((value - lower) / (upper - lower), 0), 1)``."""
    if upper == lower or not math.isfinite(value):
        return 0.0
    return min(max((value - lower) / (upper - lower), 0.0), 1.0)


# --- metrics (each: (predicted, gold) → value; ValueError when it cannot be computed) ---------------------


def _codes(gold: pd.Series, pred: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Labels as the official ``convert_to_numeric`` makes them: floats truncated to int, bools 0/1, text
    stripped and lower-cased and encoded in sorted order of the gold labels (a label the gold never has is
    an error)."""

    def one(s: pd.Series, classes: list[str] | None) -> tuple[np.ndarray, list[str] | None]:
        dtype = str(s.dtype)
        if "float" in dtype:
            return s.astype(int).to_numpy(), classes
        if "int" in dtype:
            return s.to_numpy(), classes
        if "bool" in dtype:
            return s.astype(int).to_numpy(), classes
        text = [str(x).lower().strip() for x in s]
        if classes is None:
            classes = sorted(set(text))
        index = {c: i for i, c in enumerate(classes)}
        unseen = sorted(set(text) - set(index))
        if unseen:
            raise ValueError(f"label(s) not in the gold: {', '.join(unseen[:3])}")
        return np.array([index[t] for t in text]), classes

    g, classes = one(gold, None)
    p, _ = one(pred, classes)
    return g, p


def accuracy(pred: pd.Series, gold: pd.Series, **_: Any) -> float:
    """Share of equal labels (see :func:`_codes`)."""
    g, p = _codes(gold, pred)
    return float(np.mean(g == p))


def f1(pred: pd.Series, gold: pd.Series, *, average: str = "", **_: Any) -> float:
    """F1 over the labels present in either side: ``weighted`` by gold support (default), ``macro``,
    ``micro`` or ``binary`` (the positive label 1), as scikit-learn's ``f1_score`` defines them."""
    g, p = _codes(gold, pred)
    labels = np.unique(np.concatenate([g, p]))
    avg = average or "weighted"
    if avg == "micro":
        return float(np.mean(g == p))  # micro F1 over single-label predictions is the accuracy
    if avg == "binary":
        labels = np.array([1])
    scores, support = [], []
    for c in labels:
        tp = float(np.sum((p == c) & (g == c)))
        fp = float(np.sum((p == c) & (g != c)))
        fn = float(np.sum((p != c) & (g == c)))
        denom = 2 * tp + fp + fn
        scores.append(2 * tp / denom if denom else 0.0)
        support.append(float(np.sum(g == c)))
    if avg in ("macro", "binary"):
        return float(np.mean(scores))
    if avg == "weighted":
        total = sum(support)
        return float(sum(s * w for s, w in zip(scores, support, strict=True)) / total) if total else 0.0
    raise ValueError(f"unknown average {average!r}")


def _numeric(values: Any) -> np.ndarray:
    arr = values.to_numpy() if isinstance(values, (pd.Series, pd.DataFrame)) else np.asarray(values)
    if not np.issubdtype(arr.dtype, np.number):
        raise ValueError("the predictions hold non-numeric values")
    return arr.astype(float)


def _columns(arr: np.ndarray) -> np.ndarray:
    return arr.reshape(-1, 1) if arr.ndim == 1 else arr


def r2(pred: Any, gold: Any, **_: Any) -> float:
    """``1 - SS_res / SS_tot``, averaged over columns (a constant gold: 1 if predicted exactly, else 0)."""
    p, g = _columns(_numeric(pred)), _columns(_numeric(gold))
    if p.shape != g.shape:
        raise ValueError("shape mismatch")
    out = []
    for j in range(g.shape[1]):
        ss_res = float(np.sum((g[:, j] - p[:, j]) ** 2))
        ss_tot = float(np.sum((g[:, j] - g[:, j].mean()) ** 2))
        out.append((1.0 if ss_res == 0 else 0.0) if ss_tot == 0 else 1 - ss_res / ss_tot)
    return float(np.mean(out))


def _per_column(fn: Callable[[np.ndarray, np.ndarray], float]) -> Callable[..., float]:
    def metric(pred: Any, gold: Any, **_: Any) -> float:
        p, g = _columns(_numeric(pred)), _columns(_numeric(gold))
        if p.shape != g.shape:
            raise ValueError("shape mismatch")
        return float(np.mean([fn(p[:, j], g[:, j]) for j in range(g.shape[1])]))

    return metric


mae = _per_column(lambda p, g: float(np.mean(np.abs(g - p))))
mse = _per_column(lambda p, g: float(np.mean((g - p) ** 2)))
medae = _per_column(lambda p, g: float(np.median(np.abs(g - p))))


def rmse(pred: Any, gold: Any, **_: Any) -> float:
    """``sqrt(mean_squared_error)`` (the columns' mean squared error first averaged)."""
    return math.sqrt(mse(pred, gold))


def rmsle(pred: Any, gold: Any, **_: Any) -> float:
    """What the official ``calculate_rmsle`` returns: the mean squared log error (not its root), the
    predictions clipped at 0; a negative gold value is an error."""
    p, g = _columns(_numeric(pred)), _columns(_numeric(gold))
    p = np.clip(p, 0, None)
    if (g < 0).any():
        raise ValueError("mean squared log error needs non-negative gold values")
    return float(np.mean(np.mean((np.log1p(g) - np.log1p(p)) ** 2, axis=0)))


def smape(pred: Any, gold: Any, **_: Any) -> float:
    """100 × mean of ``|p - g| / ((|p| + |g|) / 2)``, a pair of zeros counting 0."""
    p, g = _columns(_numeric(pred)), _columns(_numeric(gold))
    num = np.abs(p - g)
    den = (np.abs(p) + np.abs(g)) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(den == 0, 0.0, num / np.where(den == 0, 1, den))
    return float(np.nanmean(ratio)) * 100


def _auc(y_true: np.ndarray, score: np.ndarray) -> float:
    """ROC AUC by the rank statistic (ties share their mean rank), as ``roc_auc_score`` computes it."""
    pos = y_true == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0 or set(np.unique(y_true)) - {0, 1}:
        raise ValueError("ROC AUC needs binary 0/1 gold labels of both classes")
    ranks = pd.Series(score).rank(method="average").to_numpy()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def roc_auc_score(pred: Any, gold: Any, **_: Any) -> float:
    """Binary: the AUC of each column, averaged over columns."""
    p, g = _columns(_numeric(pred)), _columns(_numeric(gold))
    return float(np.mean([_auc(g[:, j], p[:, j]) for j in range(g.shape[1])]))


def logloss_class(pred: Any, gold: Any, **_: Any) -> float:
    """The official class-balanced log loss: rows normalized to sum 1, clipped to [1e-15, 1 - 1e-15];
    ``-Σ_classes (Σ_rows y·log2 p) / n_class / 2``."""
    p, g = _columns(_numeric(pred)), _columns(_numeric(gold))
    p = p / p.sum(axis=0, keepdims=True) if p.ndim == 1 else p / p.sum(axis=1, keepdims=True)
    p = np.clip(p, 1e-15, 1 - 1e-15)
    if p.shape != g.shape:
        raise ValueError("shape mismatch")
    logs = np.where(g * p != 0, np.log2(p), 0.0)
    n_class = np.count_nonzero(g, axis=0)
    return float(-np.sum(logs.sum(axis=0) / n_class) / 2)


def logloss_total(pred: Any, gold: Any, **_: Any) -> float:
    """The official multi-class log loss: ``-Σ (Σ_rows y·log2 p) / n_rows / 2`` after normalizing rows."""
    p, g = _columns(_numeric(pred)), _columns(_numeric(gold))
    p = np.clip(p / (p.sum(axis=1, keepdims=True) + 1e-15), 1e-15, 1 - 1e-15)
    if p.shape != g.shape:
        raise ValueError("shape mismatch")
    logs = np.where(g * p != 0, np.log2(p), 0.0)
    return float(-np.sum(logs.sum(axis=0) / g.shape[0]) / 2)


def quadratic_weighted_kappa(pred: Any, gold: Any, **_: Any) -> float:
    """The official quadratic weighted kappa, with N = the number of *distinct gold ratings*.

    The observed matrix counts the (gold, predicted) pairs whose ratings both lie in ``0 … N-1`` as
    given (before any shift), and at least one gold rating must lie there; the weights are ``(i - j)² / (N - 1)²``; the predicted and gold rating
    ranges must agree; the rating histograms are taken after shifting both by the gold minimum and must
    have N bins (a rating beyond fails, as the official shapes do). With ratings ``0 … N-1`` all present
    this is Cohen's quadratic kappa.
    """
    p = _numeric(pred).reshape(-1).astype(int)
    g = _numeric(gold).reshape(-1).astype(int)
    n = len(np.unique(g))
    if n < 2:
        raise ValueError("quadratic weighted kappa needs two or more gold ratings")
    if not np.isin(g, np.arange(n)).any():  # the confusion matrix over labels 0 … N-1 refuses this
        raise ValueError(f"no gold rating lies in 0 … {n - 1}")
    observed = np.zeros((n, n))
    for a, b in zip(g, p, strict=True):
        if 0 <= a < n and 0 <= b < n:
            observed[a, b] += 1
    i, j = np.indices((n, n))
    weights = (i - j) ** 2 / (n - 1) ** 2
    if p.min() != g.min() or p.max() != g.max():
        raise ValueError("the predicted and gold rating ranges differ")
    lo = g.min()
    g, p = g - lo, p - lo
    hist_g, hist_p = np.bincount(g, minlength=n), np.bincount(p, minlength=n)
    if len(hist_g) != n or len(hist_p) != n:
        raise ValueError(f"ratings span more than the {n} distinct gold ratings")
    expected = np.outer(hist_g, hist_p).astype(float)
    expected = expected / expected.sum() * observed.sum()
    return float(1 - np.sum(weights * observed) / np.sum(weights * expected))


def silhouette(features: pd.DataFrame, labels: pd.Series, **_: Any) -> float:
    """The official silhouette: for each row, ``a`` the mean distance to every row of its cluster
    *itself included*, ``b`` the smallest mean distance to another cluster; the mean of ``(b - a) /
    max(a, b)``, negative means clipped to 0. Text columns are label-encoded; one cluster scores 0."""
    x = features.copy()
    for col in x.columns:
        if not pd.api.types.is_numeric_dtype(x[col]):
            x[col] = pd.factorize(x[col].astype(str), sort=True)[0]
    data = x.to_numpy(dtype=float)
    lab = labels.to_numpy()
    uniq = np.unique(lab)
    if len(uniq) < 2:
        raise ValueError("one cluster: silhouette needs two or more")
    scores = np.empty(len(data))
    for start in range(0, len(data), 512):  # row blocks: memory stays at 512 × n distances
        block = data[start : start + 512]
        dist = np.sqrt(np.maximum(((block[:, None, :] - data[None, :, :]) ** 2).sum(-1), 0))
        means = np.stack([dist[:, lab == c].mean(axis=1) for c in uniq], axis=1)
        own = np.searchsorted(uniq, lab[start : start + 512])
        a = means[np.arange(len(block)), own]
        others = means.copy()
        others[np.arange(len(block)), own] = np.inf
        b = others.min(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            scores[start : start + len(block)] = (b - a) / np.maximum(a, b)
    value = float(np.mean(scores))
    return 0.0 if value < 0 else value


ML_METRICS: dict[str, Callable[..., float]] = {
    "accuracy": accuracy,
    "f1": f1,
    "r2": r2,
    "silhouette": silhouette,
    "roc_auc_score": roc_auc_score,
    "logloss_class": logloss_class,
    "logloss_total": logloss_total,
    "quadratic_weighted_kappa": quadratic_weighted_kappa,
    "rmsle": rmsle,
    "rmse": rmse,
    "mae": mae,
    "mse": mse,
    "medae": medae,
    "smape": smape,
}


# --- column handling ------------------------------------------------------------------------------------


def _best_column(name: str, columns: list[str]) -> str:
    """The column whose name is most similar to ``name`` (similarity > 90), else ``""``."""
    if not name or not columns:
        return ""
    best = max(columns, key=lambda c: fuzzy_ratio(name.lower(), str(c).lower()))
    return best if fuzzy_ratio(name.lower(), str(best).lower()) > 90 else ""


def _is_incremental(s: pd.Series) -> bool:
    v = np.sort(s.to_numpy())
    try:
        return bool(np.all(np.diff(v) == 1))
    except TypeError:
        return False


def _identify(df: pd.DataFrame, task_type: str, ref: str) -> tuple[list[str], str]:
    """``identify_columns``: id columns (``id``/``unnamed`` in the name, > 80 % distinct) and the target."""
    cols = [str(c) for c in df.columns]
    if len(cols) == 1:
        return [], cols[0]
    ref = "Cluster" if task_type == "cluster" else ref
    target = ref if ref and ref in cols else ""
    ids, candidates = [], []
    n = len(df)
    for c in cols:
        s = df[c]
        if ("id" in c.lower() or "unnamed" in c.lower()) and s.nunique() > 0.8 * n:
            ids.append(c)
            continue
        if target:
            continue
        k = s.nunique()
        if (
            (task_type == "binary" and k == 2)
            or (task_type == "multi" and 2 < k < 10)
            or (task_type == "cluster" and 1 <= k < max(0.01 * n, 10))
            or (
                task_type == "regression"
                and str(s.dtype) in ("int64", "float64")
                and not _is_incremental(s)
                and k > max(3, 0.1 * n)
            )
        ):
            candidates.append(c)
    if not target:
        if len(candidates) == 1:
            target = candidates[0]
        else:
            target = next((c for c in candidates if c.lower() in _LABELS), "")
    return ids, target


def _process(df: pd.DataFrame, task_type: str, target: str) -> tuple[pd.DataFrame, str]:
    """``process_csv``: find the target column (fuzzily named, else by type), drop the id columns.

    The official code means to sort the rows by the id column but discards the sorted frame: rows are
    compared in file order, and so here.
    """
    target = "Cluster" if task_type == "cluster" else target
    found = _best_column(target, [str(c) for c in df.columns]) if target else ""
    ids, guessed = _identify(df, task_type, target)
    found = found or guessed
    ids = [c for c in ids if "pca" not in c.lower() and "feature" not in c.lower()]
    return df.drop(columns=ids), found


def compare_ml(
    pred: pd.DataFrame, gold: pd.DataFrame | None, config: dict[str, Any], options: dict[str, Any]
) -> MLResult:
    """``compare_ml``: the task's metric on the predicted target column against the gold's (module doc).

    Row counts must be equal (else 0); the gold's target column is ``target_column`` matched fuzzily or
    guessed from the task type, the prediction's the column most similar to it, else guessed the same way;
    clusters: the ``Cluster`` column, the metric the silhouette of the predicted rows' features.
    """
    out = MLResult(score=0.0, metric=None, errors=[])
    task_type = TASK_TYPES.get(str(config.get("type", "")).lower())
    metric = str(config.get("metric", ""))
    if task_type is None or metric not in ML_METRICS:
        raise ValueError(f"unsupported ML task: type {config.get('type')!r}, metric {metric!r}")
    target = str(options.get("target_column", ""))
    if gold is not None:
        if len(gold) != len(pred):
            out["errors"].append(f"{len(pred)} predicted rows, the gold has {len(gold)}")
            return out
        gold, gold_target = _process(gold, task_type, target)
    else:
        gold_target = ""
    pred, pred_target = _process(pred, task_type, gold_target or target)
    if not pred_target:
        out["errors"].append(f"no target column found in the prediction (the gold's is {gold_target!r})")
        return out
    try:
        if metric == "silhouette":
            value = silhouette(pred, pred[pred_target])
        else:
            if gold is None or not gold_target:
                raise ValueError("no gold target column")
            value = ML_METRICS[metric](
                pred[pred_target], gold[gold_target], average=options.get("average", "")
            )
    except (ValueError, TypeError, KeyError) as exc:
        out["errors"].append(str(exc))
        return out
    out["metric"] = value
    out["score"] = scaled(value, float(config.get("lower_bound", 0.0)), float(config.get("upper_bound", 0.9)))
    return out


def compare_competition_ml(
    pred: pd.DataFrame, gold: pd.DataFrame, config: dict[str, Any], options: dict[str, Any]
) -> MLResult:
    """``compare_competition_ml``: a whole submission file against the gold file.

    Row counts and the *set* of column names must be equal; when the first column with ``id`` in its name
    is an id (more than max(0.6 n, 2) distinct values) the id sets must be equal, and both files are sorted
    by it and it is dropped; columns are put in name order; the metric runs on all remaining columns.
    """
    out = MLResult(score=0.0, metric=None, errors=[])
    metric = str(config.get("metric", "")).lower().strip().replace(" ", "_")
    if metric not in ML_METRICS:
        raise ValueError(f"unsupported competition metric {metric!r}")
    if len(pred) != len(gold):
        out["errors"].append(f"{len(pred)} predicted rows, the gold has {len(gold)}")
        return out
    if {str(c) for c in pred.columns} != {str(c) for c in gold.columns}:
        out["errors"].append(
            f"columns differ: {sorted(set(map(str, pred.columns)) ^ set(map(str, gold.columns)))}"
        )
        return out
    id_col = next((c for c in gold.columns if "id" in str(c).lower()), None)
    if id_col is not None and gold[id_col].nunique() > max(0.6 * len(gold), 2):
        if set(pred[id_col]) != set(gold[id_col]):
            out["errors"].append("the predicted ids differ from the gold's")
            return out
        gold = gold.sort_values(by=id_col).drop(columns=[id_col])
        pred = pred.sort_values(by=id_col).drop(columns=[id_col])
    gold = gold.sort_index(axis=1)
    pred = pred.sort_index(axis=1)
    try:
        if metric in ("accuracy", "f1"):
            # the official accuracy is given the whole frame (and fails); f1 reads the first column
            value = ML_METRICS[metric](pred.iloc[:, 0], gold.iloc[:, 0], average=options.get("average", ""))
        else:
            value = ML_METRICS[metric](pred, gold)
    except (ValueError, TypeError, KeyError) as exc:
        out["errors"].append(str(exc))
        return out
    out["metric"] = value
    out["score"] = scaled(value, float(config.get("lower_bound", 0.0)), float(config.get("upper_bound", 0.9)))
    return out

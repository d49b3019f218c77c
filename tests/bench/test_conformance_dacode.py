"""DA-Code conformance with yiyihum/da-code ``da_agent/evaluators/metrics`` (table.py, text.py, image.py,
ml.py, script/ml_script.py).

Expected values were worked out by hand from the official code's rules, not by running DataDojo:

* ``compare_csv``: every gold column (``condition_cols`` only, when given) must equal *some* predicted
  column as a vector (names and column order ignored, extra predicted columns free): numbers by
  ``math.isclose(abs_tol=0.01)``, strings ``lower().strip()``, NaN = NaN; with ``ignore_order`` both vectors
  are sorted by ``(1, str(x), is_number)``; a second look-up hashes the vectors with floats rounded to
  ``round(x / 0.01) * 0.01`` (ints kept, strings lowered, sorted by ``str``); ``score_rule`` defaults to
  ``divide`` (share of gold columns found).
* ``compare_text``: keys ``lower().strip()``; one-element lists unwrapped when both sides unwrap to one
  type; the answer cast to the gold's type; float ``abs(g - r) <= 0.01``; no ``calculate_bool``.
* ``compare_image``: ``np.sort(axis=0)`` then ``np.allclose(atol=1e-2)`` (also after dividing each array by
  its sum); keys: figsize equal, titles ``fuzz.ratio >= 90``, tick/legend labels ``> 95``.
* ``compare_ml``: ``min(max((s - lower) / (upper - lower), 0), 1)``; F1 ``average='weighted'``.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest

from datadojo.bench.dacode_compare import compare_chart, compare_table, compare_text, fuzzy_ratio
from datadojo.bench.dacode_ml import (
    compare_competition_ml,
    compare_ml,
    f1,
    r2,
    roc_auc_score,
    scaled,
    silhouette,
)


def _df(text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text))


GOLD = "city,pop\nParis,2.1\nLyon,0.5\n"

TABLES = [
    # (predicted CSV, options, official credit)
    (GOLD, {}, 1.0),
    ("population,name\n2.1,Paris\n0.5,Lyon\n", {}, 1.0),  # columns renamed and reordered
    ("name,pop,extra\nParis,2.1,x\nLyon,0.5,y\n", {}, 1.0),  # an extra column costs nothing
    ("city\nParis\nLyon\n", {}, 0.5),  # one of two gold columns: divide
    ("city\nParis\nLyon\n", {"score_rule": "all"}, 0.0),
    ("city,pop\n paris ,2.105\nLYON,0.5\n", {}, 1.0),  # case, spaces, 0.005 off
    ("city,pop\nParis,2.11\nLyon,0.5\n", {}, 1.0),  # 2.11 - 2.1 is 0.00999…98 in floats: within 0.01
    ("city,pop\nParis,2.12\nLyon,0.5\n", {}, 0.5),
    ("city,pop\nLyon,0.5\nParis,2.1\n", {}, 0.0),  # rows swapped: no column matches in order
    ("city,pop\nLyon,0.5\nParis,2.1\n", {"ignore_order": True}, 1.0),
    ("city,pop\nParis,2.1\nLyon,0.5\nNice,0.3\n", {"ignore_order": True}, 0.0),  # an extra row
    ("city\nParis\nLyon\n", {"condition_cols": [0]}, 1.0),  # only gold column 0 is checked
]


@pytest.mark.parametrize(("pred", "options", "want"), TABLES)
def test_compare_csv(pred: str, options: dict, want: float) -> None:
    assert compare_table(_df(pred), _df(GOLD), **options) == pytest.approx(want)


def test_compare_csv_duplicates_and_the_hashed_look_up() -> None:
    # duplicates count: [1, 1, 2] is not [1, 2, 2] even unordered
    assert compare_table(_df("v\n1\n2\n2\n"), _df("v\n1\n1\n2\n"), ignore_order=True) == 0.0
    # sorted by text, [2, 10] pairs as (10, 2) and [2.0, 9.996] as (2.0, 9.996): the element check fails,
    # but hashed, 9.996 rounds to 10.0 and "10.0" sorts before "2.0": (10.0, 2.0) == (10, 2), so found
    assert compare_table(_df("v\n2.0\n9.996\n"), _df("v\n2\n10\n"), ignore_order=True) == 1.0
    # 1.01 - 1.0 is 0.0100…09 in floats: just outside isclose, and hashed 1.01 vs 1.0
    assert compare_table(_df("v\n1.01\n"), _df("v\n1.0\n")) == 0.0
    assert compare_table(_df("v\n1.005\n"), _df("v\n1.0\n")) == 1.0
    # missing values equal missing values
    assert compare_table(_df("a,b\n1,\n2,x\n"), _df("a,b\n1,\n2,x\n")) == 1.0


TEXT_GOLD = [{"highest country": ["Monaco"], "lowest country": ["Mongolia"]}]

TEXTS = [
    ({"Highest Country ": "monaco", "lowest country": ["Mongolia"]}, TEXT_GOLD, 1.0),
    ({"highest country": ["Monaco"]}, TEXT_GOLD, 0.0),  # a key missing: rule 'all'
    ({"x": 82.605}, [{"x": [82.6]}], 1.0),  # |diff| 0.005 <= 0.01
    ({"x": 82.62}, [{"x": [82.6]}], 0.0),
    ({"p": 0.0}, [{"p": [2.26e-37]}], 1.0),
    (
        {"x": 0.0},
        [{"x": [0.01]}],
        1.0,
    ),  # |0.01 - 0| == 0.01: the boundary counts  # an absolute tolerance: any tiny p-value is 0
    ({"n": 3.7}, [{"n": 3}], 1.0),  # cast to the gold's type: int(3.7) == 3
    ({"x": "0.46"}, [{"x": [0.46]}], 0.0),  # text in a list vs a float in a list: type mismatch
    ({"x": ["a", "b"]}, [{"x": ["b", "a"]}], 0.0),  # order matters without ignore_order
    ({"ok": True}, [{"ok": True}], 0.0),  # no rule for bool: the official evaluator scores 0
    # an empty list scores 0 even against itself (calculate_list needs a non-empty list of scores):
    # di-text-029 and di-text-035 of the release cannot be solved under the official rule
    ({"pos": ["Online boarding"], "neg": []}, [{"pos": ["Online boarding"], "neg": []}], 0.0),
    ([{"highest country": "Monaco", "lowest country": "Mongolia"}], TEXT_GOLD, 1.0),  # first object of a list
    (None, TEXT_GOLD, 0.0),
]


@pytest.mark.parametrize(("answer", "gold", "want"), TEXTS)
def test_compare_text(answer, gold, want) -> None:
    assert compare_text(answer, gold, {}) == want


def test_text_answers_are_found_in_prose_and_single_quotes() -> None:
    from datadojo.bench.dacode_compare import text_to_json

    assert text_to_json("Result:\n{'highest country': ['Monaco'],}\nDone.") == {"highest country": ["Monaco"]}
    assert text_to_json('so {"a": true, "b": null}') == {"a": True, "b": None}
    assert text_to_json("no object here") is None
    assert compare_text({"a": 0.5, "b": 1.0}, [{"a": 0.5, "b": 2.0}], {"score_rule": ["devide"]}) == 0.5


def test_fuzzy_ratio_by_hand() -> None:
    assert fuzzy_ratio("sales", "sale") == 89  # (9 - 1) / 9
    assert fuzzy_ratio("total sales", "total sale") == 95  # (21 - 1) / 21
    assert fuzzy_ratio("sales 2021", "sales 2020") == 90  # a substitution costs 2: (20 - 2) / 20
    assert fuzzy_ratio("", "") == 100 and fuzzy_ratio("", "x") == 0


INFO = {"type": "bar", "figsize": [6, 6], "graph_title": "Total Sales", "xtick_labels": ["Sales 2020", "B"]}


def _chart(data, **info):
    return {"data": data, **INFO, **info}


CHARTS = [
    (_chart([[3, 1, 2]]), [[3, 1, 2]], 1.0),
    (_chart([[4, 5, 6], [1, 2, 3]]), [[1, 2, 3], [4, 5, 6]], 1.0),  # series swapped: sorted per column
    (_chart([[3, 2, 1]]), [[1, 2, 3]], 0.0),  # values permuted inside one series
    (_chart([[2, 4, 6]]), [[1, 2, 3]], 1.0),  # the same shares (each array divided by its sum)
    (_chart([[1.009, 2, 3]]), [[1, 2, 3]], 1.0),  # within atol 0.01 (+ rtol 1e-5)
    (_chart([[1.02, 2, 3]]), [[1, 2, 3]], 1.0),  # off by 0.02, but its shares are within 0.01
    (_chart([[1.5, 2, 3]]), [[1, 2, 3]], 0.0),  # neither the values nor the shares
    (_chart([[1, 2]]), [[1, 2, 3]], 0.0),  # shapes differ
    (_chart([[1, 2, 3]], figsize=[6.0, 6.0]), [[1, 2, 3]], 1.0),
    (_chart([[1, 2, 3]], figsize=[6, 4]), [[1, 2, 3]], 0.0),
    (_chart([[1, 2, 3]], graph_title="total sale"), [[1, 2, 3]], 1.0),  # ratio 95 >= 90
    (_chart([[1, 2, 3]], graph_title="Sale"), [[1, 2, 3]], 0.0),
    (_chart([[1, 2, 3]], xtick_labels=["Sales 2021", "B"]), [[1, 2, 3]], 0.0),  # 90, not > 95
    (_chart([[1, 2, 3]], xtick_labels=["b", "sales 2020"]), [[1, 2, 3]], 1.0),  # order and case free
]


@pytest.mark.parametrize(("pred", "gold_data", "want"), CHARTS)
def test_compare_image_data_and_keys(pred, gold_data, want) -> None:
    keys = ["figsize", "graph_title", "xtick_labels"]
    value, _ = compare_chart(pred, {"data": gold_data, "info": INFO}, keys)
    assert value == want


def test_chart_titles_need_a_ratio_of_90() -> None:
    gold = {"data": [[1]], "info": {"graph_title": "Sales 2020", "x_label": "Year"}}
    assert compare_chart({"data": [[1]], "graph_title": "Sales 2021", "x_label": "year"}, gold, [])[0] == 1.0
    assert compare_chart({"data": [[1]], "graph_title": "Sales 2020", "x_label": ""}, gold, [])[0] == 0.0


def test_chart_colours_within_distance_15() -> None:
    gold = {"data": [[1]], "info": {"color": ["#1f77b4"]}}
    near = {"data": [[1]], "color": ["#2a7fb4"]}  # (11, 8, 0): sqrt(185) = 13.6
    far = {"data": [[1]], "color": ["#2f77c4"]}  # (16, 0, 16): 22.6
    assert compare_chart(near, gold, ["color"])[0] == 1.0
    assert compare_chart(far, gold, ["color"])[0] == 0.0


# --- machine learning ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "lower", "upper", "want"),
    [
        (0.75, 0.6, 0.9, 0.5),
        (0.9, 0.6, 0.9, 1.0),
        (0.899, 0.6, 0.9, 0.299 / 0.3),  # just below the upper bound: not full credit
        (0.95, 0.6, 0.9, 1.0),
        (0.6, 0.6, 0.9, 0.0),
        (0.59, 0.6, 0.9, 0.0),
        (11.52, 51.88, 11.52, 1.0),  # an error metric with the bounds reversed
        (31.70, 51.88, 11.52, (31.70 - 51.88) / (11.52 - 51.88)),
    ],
)
def test_scaled_credit(value, lower, upper, want) -> None:
    assert scaled(value, lower, upper) == pytest.approx(want)


def test_metrics_by_hand() -> None:
    g = pd.Series([1, 1, 0, 0])
    p = pd.Series([1, 0, 0, 0])
    # class 1: tp 1, fn 1 → 2/3; class 0: tp 2, fp 1 → 4/5; weighted by support 2 and 2
    assert f1(p, g) == pytest.approx((2 / 3 + 4 / 5) / 2)
    # unequal supports: class 1 (3 rows) F1 4/5, class 0 (1 row) F1 2/3, weighted 3:1 (macro would be 0.733)
    assert f1(pd.Series([1, 1, 0, 0]), pd.Series([1, 1, 1, 0])) == pytest.approx((3 * 4 / 5 + 2 / 3) / 4)
    assert r2(pd.Series([1.0, 2.0, 4.0]), pd.Series([1.0, 2.0, 3.0])) == pytest.approx(1 - 1 / 2)
    # pairs (pos, neg): 0.35>0.1, 0.35<0.4, 0.8>0.1, 0.8>0.4 → 3/4
    assert roc_auc_score(pd.Series([0.1, 0.4, 0.35, 0.8]), pd.Series([0, 0, 1, 1])) == pytest.approx(0.75)


def test_silhouette_counts_each_row_in_its_own_cluster_mean() -> None:
    df = pd.DataFrame({"x": [0.0, 1.0, 10.0], "Cluster": [0, 0, 1]})
    d02, d12 = math.sqrt(100 + 1), math.sqrt(81 + 1)
    s0 = (d02 - 0.5) / d02  # a = mean(0, 1) over the row's own cluster, itself included
    s1 = (d12 - 0.5) / d12
    s2 = 1.0  # a singleton: a = 0
    assert silhouette(df, df["Cluster"]) == pytest.approx((s0 + s1 + s2) / 3)


CONFIG = {"type": "binary classification", "metric": "f1", "lower_bound": 0.6, "upper_bound": 0.9}


def test_compare_ml_finds_the_target_column_and_scales() -> None:
    gold = _df("id,result\n1,Positive\n2,Positive\n3,Negative\n4,Negative\n")
    pred = _df("id,Result\n1, positive\n2,negative\n3,Negative\n4,negative\n")  # lower/strip encoded
    res = compare_ml(pred, gold, CONFIG, {"target_column": "result"})
    assert res["metric"] == pytest.approx((2 / 3 + 4 / 5) / 2)
    assert res["score"] == pytest.approx(((2 / 3 + 4 / 5) / 2 - 0.6) / 0.3)
    # one row short: 0; rows are compared in file order (the official sort result is discarded)
    assert compare_ml(pred.iloc[:3], gold, CONFIG, {"target_column": "result"})["score"] == 0.0
    shuffled = pred.iloc[[3, 2, 1, 0]].reset_index(drop=True)
    assert compare_ml(shuffled, gold, CONFIG, {"target_column": "result"})["metric"] < 0.7


def test_compare_competition_ml_aligns_ids_and_refuses_extra_columns() -> None:
    cfg = {"type": "regression", "metric": "rmse", "lower_bound": 51.88, "upper_bound": 11.52}
    gold = _df("id,price\n" + "".join(f"{i},{10 * i}\n" for i in (2, 1, 3, 5, 4)))
    pred = _df("price,id\n" + "".join(f"{10 * i},{i}\n" for i in (5, 3, 1, 2, 4)))
    res = compare_competition_ml(pred, gold, cfg, {})
    assert res["metric"] == 0.0 and res["score"] == 1.0
    extra = pred.assign(note="x")
    assert compare_competition_ml(extra, gold, cfg, {})["score"] == 0.0


def test_chart_gold_numpy_round_trip() -> None:
    # gold data as the loader reads it: np.load(...).tolist() of a 1-D array is one column
    gold = {"data": np.array([0.5, 0.25, 0.25]).tolist(), "info": {}}
    assert compare_chart({"data": [0.25, 0.5, 0.25]}, gold, [])[0] == 1.0  # one column, sorted


def test_compare_sqlite_takes_the_worst_table_and_needs_every_table() -> None:
    from datadojo.bench.dacode_compare import compare_tables

    gold = [("a", _df("x\n1\n2\n")), ("b", _df("y,z\n1,p\n2,q\n"))]
    good_a = _df("x\n2\n1\n")
    half_b = _df("y\n1\n2\n")  # one of b's two columns
    opts = {"condition_cols": [[], []], "ignore_order": [True, True]}
    assert compare_tables({"a": good_a, "b": half_b}, gold, opts) == 0.5  # min(1.0, 0.5)
    assert compare_tables({"a": good_a}, gold, opts) == 0.0  # table b missing


def test_compare_ml_cluster_uses_the_cluster_column_and_no_gold() -> None:
    cfg = {"type": "cluster", "metric": "silhouette", "lower_bound": 0.0, "upper_bound": 0.5}
    pred = pd.DataFrame({"x": [0.0, 1.0, 10.0], "Cluster": [0, 0, 1]})
    d02, d12 = math.sqrt(100 + 1), math.sqrt(81 + 1)
    value = ((d02 - 0.5) / d02 + (d12 - 0.5) / d12 + 1.0) / 3
    res = compare_ml(pred, None, cfg, {"target_column": "Cluster"})
    assert res["metric"] == pytest.approx(value) and res["score"] == 1.0  # above the upper bound
    one = pd.DataFrame({"x": [0.0, 1.0], "Cluster": [0, 0]})
    assert compare_ml(one, None, cfg, {})["score"] == 0.0  # one cluster: no silhouette


def test_quadratic_weighted_kappa_as_the_official_code_counts() -> None:
    from datadojo.bench.dacode_ml import quadratic_weighted_kappa

    # N = 3 distinct gold ratings {1, 2, 3}; the observed matrix counts pairs with both ratings in 0..2 as
    # given, so (3, 3) and the wrong (3, 2) fall outside it: observed weight 0, kappa 1 despite an error
    # (the expected matrix, on the shifted ratings, weighs 0.625 > 0)
    assert quadratic_weighted_kappa(pd.Series([1, 2, 3, 2]), pd.Series([1, 2, 3, 3])) == pytest.approx(1.0)
    # ratings 0..N-1 all present: Cohen's quadratic kappa. gold [0,1,2,2], pred [0,1,2,1]: observed weight
    # 0.25 (one 2→1); expected: outer([1,1,2], [1,2,1]) / 16 × 4 weighs 5 / 4 → 1 - 0.25 / 1.25
    assert quadratic_weighted_kappa(pd.Series([0, 1, 2, 1]), pd.Series([0, 1, 2, 2])) == pytest.approx(0.8)
    with pytest.raises(ValueError):  # no gold rating in 0..N-1 (N = 2): the official confusion matrix fails
        quadratic_weighted_kappa(pd.Series([2, 3, 3, 2]), pd.Series([2, 3, 2, 3]))

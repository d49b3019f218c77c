"""DataMind's table comparison (eval_bird.py compare_pandas_table, ignore_order=True)."""

from __future__ import annotations

import pandas as pd
import pytest

from datadojo.compare.tables import DATAMIND_ABS_TOL, as_columns, compare_tables, csv_value, values_equal


def test_extra_columns_and_any_column_order_match() -> None:
    gold = {"columns": ["name", "n"], "data": [["a", 1], ["b", 2]]}
    pred = [("x", 2, "b"), ("y", 1, "a")]  # columns in another order, rows too, one extra column
    assert compare_tables(pred, gold).match


def test_a_missing_gold_column_fails_and_is_named() -> None:
    res = compare_tables([(1,), (2,)], {"columns": ["name", "n"], "data": [["a", 1], ["b", 2]]})
    assert not res.match and res.unmatched_gold_columns == ("name",)


def test_numeric_tolerance_is_absolute_one_hundredth() -> None:
    assert compare_tables([(0.333,)], [(0.33,)]).match  # |diff| = 0.003
    assert compare_tables([(1.009,)], [(1.0,)]).match
    assert not compare_tables([(1.02,)], [(1.0,)]).match


def test_the_tolerance_boundary_is_the_official_one_hundredth() -> None:
    """eval_bird.py compares with ``math.isclose(a, b, abs_tol=1e-2)``: |1.011 − 1.0| = 0.011 is outside
    (a doubled tolerance, 0.02, would accept it), |1.0099 − 1.0| = 0.0099 inside; by hand, not by the
    function under test. (1.02 against 1.0 cannot tell the two apart: 0.020000000000000018 > 0.02.)"""
    assert DATAMIND_ABS_TOL == 1e-2
    assert not compare_tables([(1.011,)], [(1.0,)]).match
    assert compare_tables([(1.0099,)], [(1.0,)]).match
    assert not compare_tables([(-0.0115,)], [(0.0,)]).match  # 0.0115 > 0.01 around zero too
    assert compare_tables([(-0.0095,)], [(0.0,)]).match
    assert not values_equal(250.0111, 250.0) and values_equal(250.0099, 250.0)


def test_numbers_sort_by_value_so_tolerance_is_not_defeated() -> None:
    # sorted by str() the gold is ["10.0", "9.5"] and the prediction ["9.5", "9.999"], which would pair
    # 10.0 with 9.5; sorted by value, 9.999 pairs with 10.0 (within 1e-2)
    assert compare_tables([(9.999,), (9.5,)], [(10.0,), (9.5,)]).match


def test_missing_values_and_csv_round_trip() -> None:
    assert compare_tables([(None,), ("2",)], [(float("nan"),), (2,)]).match
    assert (
        csv_value(True) == 1
        and csv_value(" 3.5 ") == 3.5
        and csv_value("") is None
        and csv_value(b"ab") == "ab"
    )


def test_lengths_must_agree() -> None:
    assert not compare_tables([(1,), (1,)], [(1,)]).match


def test_empty_tables() -> None:
    assert compare_tables([], []).match
    assert not compare_tables([(1,)], []).match


def test_shapes_accepted() -> None:
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    assert as_columns(frame) == (["a", "b"], [[1, 2], ["x", "y"]])
    assert as_columns({"a": [1, 2]}) == (["a"], [[1, 2]])
    assert as_columns([{"a": 1}, {"a": 2, "b": 3}]) == (["a", "b"], [[1, 2], [None, 3]])
    with pytest.raises(ValueError, match="row 1 has 1 cells"):
        as_columns({"columns": ["a", "b"], "data": [[1, 2], [3]]})
    with pytest.raises(TypeError, match="not a table"):
        as_columns(42)


def test_gold_columns_restrict_the_check() -> None:
    gold = {"columns": ["a", "b"], "data": [[1, "x"], [2, "y"]]}
    assert compare_tables([(1,), (2,)], gold, gold_columns=[0]).match

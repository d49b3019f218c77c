"""Canonical results and the agreement m (EnvLunch §3, Eq. 4), and the reward R."""

from __future__ import annotations

import datetime
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datadojo.reward.canon import (
    SHAPE_SOURCE,
    canon_value,
    canonical_from_json,
    canonical_pandas,
    canonical_rows,
    exact_match,
    is_degenerate,
    row_overlap,
    same_result,
    values_close,
)
from datadojo.reward.envlunch import envlunch_reward, extract_submission
from datadojo.types import Action, Trajectory, Turn

REPO = Path(__file__).resolve().parents[2]


def test_value_rules() -> None:
    assert canon_value(3.0) == 3 and isinstance(canon_value(3.0), int)
    assert canon_value(np.int64(4)) == 4 and canon_value(True) == 1
    assert canon_value(float("nan")) is None and canon_value(pd.NA) is None and canon_value(pd.NaT) is None
    assert canon_value(-0.0) == 0
    # floats are kept; summation-order noise is absorbed by the tolerance of the comparison
    assert values_close(canon_value(0.1 + 0.2), canon_value(0.3))
    assert not values_close(canon_value(1234.56789012), canon_value(1234.56781012))
    assert canon_value(pd.Timestamp("2020-05-01")) == "2020-05-01"
    assert canon_value(pd.Timestamp("2020-05-01 10:30:00")) == "2020-05-01 10:30:00"
    assert canon_value(b"ab") == "ab" and canon_value("Ab ") == "Ab "


@pytest.mark.parametrize(
    "value",
    [
        pd.Timestamp("2020-05-01"),
        pd.Timestamp("2020-05-01 10:30:00"),
        datetime.datetime(2021, 2, 3),
        datetime.datetime(2021, 2, 3, 4, 5, 6, 7),
        datetime.date(1999, 12, 31),
        np.datetime64("2020-01-02T03:04:05"),
        b"\xffab",
        "Ab ",
        None,
        pd.NaT,
        pd.NA,
    ],
)
def test_sandbox_side_renders_text_dates_and_nulls_as_canon_value(value: object) -> None:
    """SHAPE_SOURCE runs in the agent's sandbox without DataDojo, so it keeps its own copy of the
    date / bytes / null rules of :func:`canon_value`; the two copies must give the same text."""
    ns: dict[str, object] = {}
    exec(SHAPE_SOURCE, ns)
    plain = ns["_envlunch_plain"]
    assert callable(plain)
    assert plain(value) == canon_value(value)


def test_shapes_scalar_series_frame() -> None:
    assert canonical_pandas(5) == canonical_pandas(pd.DataFrame({"x": [5.0]}))
    assert canonical_pandas(np.float64(2.5)) == canonical_pandas(pd.Series([2.5]))
    grouped = pd.DataFrame({"g": ["a", "b", "a"], "v": [1, 2, 3]}).groupby("g")["v"].sum()
    as_frame = pd.DataFrame({"name": ["b", "a"], "total": [2, 4]})
    # the groupby index becomes a column; names and orders do not matter
    assert canonical_pandas(grouped) == canonical_rows(["x", "y"], [(4, "a"), (2, "b")])
    assert exact_match(canonical_pandas(grouped), canonical_pandas(as_frame)) == 1.0
    assert exact_match(canonical_pandas(grouped), canonical_pandas(as_frame.assign(total=[2, 5]))) == 0.0
    assert canonical_pandas([1, 2]) == canonical_pandas(np.array([2, 1]))


def test_overlap_worked_example() -> None:
    """A = {(1,a), (2,b), (2,b)}, B = {(2,b), (3,c)} as multisets: |A∩B| = 1, |A∪B| = 4 → m = 1/4."""
    a = canonical_rows(["n", "s"], [(1, "a"), (2, "b"), (2, "b")])
    b = canonical_rows(["s", "n"], [("b", 2), ("c", 3)])  # columns in the other order
    assert row_overlap(a, b) == pytest.approx(0.25)
    assert row_overlap(a, a) == 1.0
    assert row_overlap(a, canonical_rows(["n"], [(1,)])) == 0.0  # arity differs
    empty = canonical_rows(["n"], [])
    assert row_overlap(empty, empty) == 1.0 and is_degenerate(empty)


def test_degenerate_results() -> None:
    assert is_degenerate(canonical_rows(["a", "b"], [(None, None)]))
    assert is_degenerate(canonical_pandas(float("inf")))
    assert is_degenerate(canonical_pandas(float("nan")))
    assert not is_degenerate(canonical_rows(["a"], [(0,)]))


def test_json_round_trip_keeps_the_canonical_form() -> None:
    c = canonical_rows(["a", "b"], [(1.5, "x"), (None, "y"), (2, "z")])
    assert canonical_from_json(c.to_json()) == c
    with pytest.raises(ValueError, match="columns"):
        canonical_from_json({"rows": []})


rows_strategy = st.lists(
    st.tuples(
        st.integers(-5, 5), st.sampled_from(["a", "b", "c", None]), st.floats(-100, 100, allow_nan=False)
    ),
    max_size=12,
)


@given(rows_strategy, st.randoms())
@settings(max_examples=80, deadline=None)
def test_canonical_form_ignores_row_and_column_order(rows: list[tuple], rnd) -> None:
    shuffled = list(rows)
    rnd.shuffle(shuffled)
    perm = [2, 0, 1]
    permuted = [tuple(r[j] for j in perm) for r in shuffled]
    a = canonical_rows(["x", "y", "z"], rows)
    b = canonical_rows(["z", "x", "y"], permuted)
    assert a == b
    assert row_overlap(a, b) == 1.0 and exact_match(a, b) == 1.0


@given(rows_strategy, rows_strategy)
@settings(max_examples=80, deadline=None)
def test_overlap_is_in_unit_interval_and_one_only_when_equal(r1: list[tuple], r2: list[tuple]) -> None:
    a, b = canonical_rows(["x", "y", "z"], r1), canonical_rows(["x", "y", "z"], r2)
    m = row_overlap(a, b)
    assert 0.0 <= m <= 1.0
    assert (m == 1.0) == (a.rows == b.rows) or row_overlap(b, a) == 1.0


def test_reward_worked_example() -> None:
    """Eq. (4): t = 4 of t_max = 16, w = 0.5, m = (1, 0.5): (1 + 0.5 · (1 − 4/16)) · 0.5 = 0.6875."""
    assert envlunch_reward([1.0, 0.5], 4, 16, 0.5) == pytest.approx(0.6875)
    assert envlunch_reward([1.0, 1.0, 1.0], 0, 48) == pytest.approx(1.5)
    assert envlunch_reward([1.0], 48, 48) == pytest.approx(1.0)
    assert envlunch_reward([1.0], 99, 48) == pytest.approx(1.0)  # t clipped to t_max
    assert envlunch_reward([0.0, 1.0], 2, 16) == 0.0
    with pytest.raises(ValueError, match="at least one copy"):
        envlunch_reward([], 1, 16)
    assert math.isclose(envlunch_reward([0.8], 8, 16), 1.25 * 0.8)


def _traj(turns: list[Turn], answer: str | None, stop: str = "answer") -> Trajectory:
    return Trajectory(task_id="t", turns=turns, final_answer=answer, stop_reason=stop)  # type: ignore[arg-type]


def test_submission_is_the_answer_program_and_t_the_turns_before_it() -> None:
    code = Turn(raw="<code>x</code>", action=Action(kind="sql", text="SELECT 1"))
    ans = Turn(raw="<answer>…</answer>", action=Action(kind="answer", text="SELECT 2"))
    sub = extract_submission(_traj([code, code, code, ans], "```sql\nSELECT name FROM t\n```"), "sql")
    assert sub.program == "SELECT name FROM t" and sub.t == 3 and sub.error is None
    none = extract_submission(_traj([code] * 5, None, "max_turns"), "sql")
    assert none.program is None and none.t == 5 and "no final answer" in (none.error or "")
    wrong = extract_submission(_traj([ans], "```sql\nSELECT 1\n```"), "pandas")
    assert wrong.program is None and "python" in (wrong.error or "")


# --- issue 28 items 6 and 7: wide results and float tolerance (each case failed before the fix) ---------


def _wide(rows: list[tuple]) -> list[tuple]:
    return [tuple(r) for r in rows]


def test_wide_result_one_changed_cell_keeps_the_other_rows() -> None:
    """Six columns, three rows, one cell changed: 2 rows shared, union 4 → m = 0.5 (was 0: the changed cell
    moved the column to another place in the content-sorted order and no other order was tried)."""
    ref_rows = [(1, "Ann", 30, 5.5, "x", 7), (2, "Bob", 40, 6.5, "y", 8), (3, "Cy", 50, 7.5, "z", 9)]
    # Ann's age 30 → 5 moves the age column before n=(7, 8, 9) in the content-sorted column order
    pred_rows = [(1, "Ann", 5, 5.5, "x", 7), (2, "Bob", 40, 6.5, "y", 8), (3, "Cy", 50, 7.5, "z", 9)]
    cols = ["id", "name", "age", "score", "tag", "n"]
    ref, pred = canonical_rows(cols, ref_rows), canonical_rows(cols, pred_rows)
    assert row_overlap(pred, ref) == pytest.approx(0.5)
    assert row_overlap(ref, pred) == pytest.approx(0.5)
    assert exact_match(pred, ref) == 0.0


def test_wide_result_columns_with_equal_contents_are_aligned_by_rows() -> None:
    """Seven columns, two of them 0/1 flags with the same multiset, given in another order and another
    column order: still the same result."""
    rows = [
        (i, f"n{i}", i % 2, (i + 1) % 2 if i < 3 else i % 2, i * 1.5, f"t{i % 3}", 100 - i) for i in range(8)
    ]
    perm = [6, 3, 0, 5, 2, 1, 4]
    a = canonical_rows(list("abcdefg"), rows)
    b = canonical_rows(
        [list("abcdefg")[j] for j in perm], [tuple(r[j] for j in perm) for r in reversed(rows)]
    )
    assert row_overlap(a, b) == 1.0 and exact_match(a, b) == 1.0
    changed = [(*r[:6], -1) if r[0] == 0 else r for r in rows]
    assert row_overlap(canonical_rows(list("abcdefg"), changed), b) == pytest.approx(7 / 9)


def test_pandas_agreement_tolerates_last_bit_noise() -> None:
    """2e-11 apart, on either side of a 9th-digit rounding boundary: equal (was unequal: both sides were
    rounded to 9 significant digits, 1.00000001 vs 1.0)."""
    a = canonical_pandas(pd.Series([1.000000005 + 1e-11, 2.5], index=["a", "b"]))
    b = canonical_pandas(pd.Series([1.000000005 - 1e-11, 2.5], index=["a", "b"]))
    assert exact_match(a, b) == 1.0 and same_result(a, b)
    assert row_overlap(a, b) == 1.0
    # summation order, and SQLite's integral float against pandas' int
    assert exact_match(canonical_pandas(0.1 + 0.2), canonical_pandas(0.3)) == 1.0
    assert exact_match(canonical_rows(["x"], [(2.9999999999999996,)]), canonical_pandas(3)) == 1.0


def test_tolerance_does_not_merge_real_differences() -> None:
    assert exact_match(canonical_pandas(1.2345), canonical_pandas(1.2346)) == 0.0
    assert exact_match(canonical_pandas(1e-6), canonical_pandas(2e-6)) == 0.0
    assert exact_match(canonical_pandas(float("inf")), canonical_pandas(1e308)) == 0.0
    assert not values_close(None, 0) and not values_close("1", 1) and values_close(None, None)
    # noise near zero (a difference of sums) is equal to zero
    assert values_close(canon_value(1e-17), 0)


def test_tolerant_rows_pair_one_to_one() -> None:
    """Rows equal within the tolerance are paired at most once each (multiset semantics kept)."""
    a = canonical_rows(["k", "v"], [("a", 0.3), ("a", 0.3), ("b", 1.0)])
    b = canonical_rows(["k", "v"], [("a", 0.1 + 0.2), ("b", 1.0), ("c", 2.0)])
    assert row_overlap(a, b) == pytest.approx(2 / 4)


@given(st.lists(st.tuples(*[st.integers(0, 3)] * 6), min_size=1, max_size=10), st.randoms())
@settings(max_examples=60, deadline=None)
def test_wide_column_and_row_order_never_matter(rows: list[tuple], rnd) -> None:
    perm = list(range(6))
    rnd.shuffle(perm)
    shuffled = [tuple(r[j] for j in perm) for r in rows]
    rnd.shuffle(shuffled)
    a, b = canonical_rows(list("abcdef"), rows), canonical_rows(list("abcdef"), shuffled)
    assert row_overlap(a, b) == 1.0 and exact_match(a, b) == 1.0

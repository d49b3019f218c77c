"""EnvLunch's agreement m and reward R (§3, Eq. 4) pinned with values computed by hand.

Eq. (4): R = (1 + w·(1 − t/t_max)) · min_k m(τ̂(E'_k), τ(E'_k)), with m the overlap of row multisets for
relational results and an exact comparison after canonicalization for dataframe results, m = 1 only on
exact agreement (§3, below Eq. 4). So a pandas program that gets two of three rows right scores 0, while the same rows from
SQL score the multiset Jaccard overlap 2/3. The programs run for real (pandas on Parquet, SQL on SQLite)
in two counterfactual copies written here; the targets are the hand-computed group sums.
"""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from datadojo.reward.canon import canonical_rows, exact_match, row_overlap, values_close
from datadojo.reward.envlunch import (
    EnvLunchTaskInfo,
    agreement,
    envlunch_reward,
    extract_submission,
    score_programs,
)
from datadojo.reward.programs import InProcessExecutor
from datadojo.types import Action, Task, Trajectory, Turn

# Two copies of a sales table. Hidden program: total amount per region.
COPIES = {
    "copy1": [("N", 10), ("N", 20), ("S", 5)],  # N 30, S 5
    "copy2": [("N", 10), ("S", 5), ("S", 7), ("E", 1)],  # N 10, S 12, E 1
}
TARGETS = {
    "copy1": [("N", 30), ("S", 5)],
    "copy2": [("N", 10), ("S", 12), ("E", 1)],
}
# A plausible wrong recovery: right on copy 1, but it drops region E, which only copy 2 has.
PANDAS_PARTIAL = (
    "import pandas as pd\n"
    "df = pd.read_parquet('sales.parquet')\n"
    "df[df.region != 'E'].groupby('region', as_index=False).amount.sum()"
)
PANDAS_RIGHT = (
    "import pandas as pd\n"
    "df = pd.read_parquet('sales.parquet')\n"
    "df.groupby('region', as_index=False)['amount'].sum()"
)
SQL_PARTIAL = "SELECT region, SUM(amount) FROM sales WHERE region != 'E' GROUP BY region"
SQL_RIGHT = "SELECT region, SUM(amount) AS total FROM sales GROUP BY region"


def _task(tmp_path: Path, backend: str) -> EnvLunchTaskInfo:
    for name, rows in COPIES.items():
        d = tmp_path / name
        d.mkdir(exist_ok=True)
        frame = pd.DataFrame(rows, columns=["region", "amount"])
        if backend == "pandas":
            frame.to_parquet(d / "sales.parquet")
        else:
            with sqlite3.connect(d / "shop.sqlite") as con:
                frame.to_sql("sales", con, index=False)
            con.close()
    targets = [canonical_rows(["region", "total"], TARGETS[c]).to_json() for c in COPIES]
    task = Task(
        id=f"el-{backend}",
        question="Target value: ...",
        answer_kind="envlunch",
        extra={
            "backend": backend,
            "copies": list(COPIES),
            "orig": "copy1",
            "copy_targets": targets,
            "target": targets[0],
            "db_name": "shop.sqlite" if backend == "sql" else None,
            "level": 1,
            "program": PANDAS_RIGHT if backend == "pandas" else SQL_RIGHT,
        },
    )
    return EnvLunchTaskInfo(task, tmp_path)


def test_pandas_agreement_is_exact_match_never_partial_credit() -> None:
    ref = canonical_rows(["region", "total"], TARGETS["copy2"])
    two_of_three = canonical_rows(["region", "total"], [("N", 10), ("S", 12)])
    with_extra_row = canonical_rows(["region", "total"], [*TARGETS["copy2"], ("W", 4)])
    # Eq. 4: m = 1 only on exact agreement; for dataframes m is the exact comparison (0 or 1)
    assert agreement("pandas", two_of_three, ref) == 0.0
    assert agreement("pandas", with_extra_row, ref) == 0.0
    assert agreement("pandas", ref, ref) == 1.0
    # relational results: multiset Jaccard, |∩| / |∪| = 2 / (2 + 3 − 2) and 3 / (4 + 3 − 3)
    assert agreement("sql", two_of_three, ref) == pytest.approx(2 / 3)
    assert agreement("sql", with_extra_row, ref) == pytest.approx(3 / 4)


def test_pandas_program_right_on_one_copy_only_scores_zero(tmp_path: Path) -> None:
    info = _task(tmp_path, "pandas")
    assert info.t_max == 48 and info.w == 0.5  # the paper's pandas turn budget and brevity weight
    partial, right = score_programs(
        [(info, PANDAS_PARTIAL, 6, 0), (info, PANDAS_RIGHT, 6, 1)], InProcessExecutor()
    )
    assert partial.m == [1.0, 0.0] and partial.reward == 0.0 and not partial.solved
    # solved: (1 + 0.5·(1 − 6/48)) · 1 = 1.4375
    assert right.m == [1.0, 1.0] and right.solved
    assert right.reward == pytest.approx(1 + 0.5 * (1 - 6 / 48))


def test_sql_program_gets_the_row_overlap_of_its_worst_copy(tmp_path: Path) -> None:
    info = _task(tmp_path, "sql")
    assert info.t_max == 16
    partial, right, none = score_programs(
        [(info, SQL_PARTIAL, 4, 0), (info, SQL_RIGHT, 4, 1), (info, None, 2, 2)], InProcessExecutor()
    )
    # copy 2: {N 10, S 12} against {N 10, S 12, E 1} → 2/3; R = (1 + 0.5·(1 − 4/16)) · 2/3
    assert partial.m == pytest.approx([1.0, 2 / 3])
    assert partial.reward == pytest.approx(1.375 * 2 / 3) and not partial.solved
    assert right.reward == pytest.approx(1.375) and right.solved
    assert none.reward == 0.0 and none.m == [0.0, 0.0] and none.errors == ["no program submitted"]


def test_a_failing_copy_scores_zero_and_says_why(tmp_path: Path) -> None:
    info = _task(tmp_path, "pandas")
    (rec,) = score_programs([(info, "result = 1 / 0", 3, 0)], InProcessExecutor())
    assert rec.m == [0.0, 0.0] and rec.reward == 0.0
    assert (
        len(rec.errors) == 2 and rec.errors[0].startswith("copy 1:") and "ZeroDivisionError" in rec.errors[0]
    )


def test_brevity_factor_of_eq4_by_hand() -> None:
    # w = 0.5, t_max = 16: t = 0 → 1.5, t = 8 → 1.25, t = 16 → 1.0; the worst copy decides
    assert envlunch_reward([1.0, 1.0], 0, 16) == pytest.approx(1.5)
    assert envlunch_reward([1.0, 0.4], 8, 16) == pytest.approx(1.25 * 0.4)
    assert envlunch_reward([0.9, 1.0], 16, 16) == pytest.approx(0.9)
    assert envlunch_reward([1.0], -3, 16) == pytest.approx(1.5)  # t clipped at 0
    assert envlunch_reward([1.0], 4, 16, w=1.0) == pytest.approx(1.75)
    assert envlunch_reward([1.0], 0, 1) == pytest.approx(1.5) and envlunch_reward([1.0], 1, 1) == 1.0
    with pytest.raises(ValueError, match="t_max"):
        envlunch_reward([1.0], 1, 0)


def _answered(answer: str, turns_before: int = 2) -> Trajectory:
    code = Turn(raw="<code>x</code>", action=Action(kind="sql", text="SELECT 1"))
    ans = Turn(raw=f"<answer>{answer}</answer>", action=Action(kind="answer", text=answer))
    return Trajectory(
        task_id="t", turns=[code] * turns_before + [ans], final_answer=answer, stop_reason="answer"
    )


def test_a_sentence_before_the_fenced_program_does_not_cost_the_reward() -> None:
    # models often introduce their program ("Here is the query:"); the fenced part is the program
    sub = extract_submission(_answered("Here is the query:\n```sql\nSELECT name FROM t\n```"), "sql")
    assert (sub.program, sub.t, sub.error) == ("SELECT name FROM t", 2, None)


def test_an_empty_program_is_no_submission() -> None:
    sub = extract_submission(_answered("```sql\n\n```"), "sql")
    assert sub.program is None and "empty" in (sub.error or "")
    blank = extract_submission(_answered("   "), "pandas")
    assert blank.program is None and "no final answer" in (blank.error or "")


class _DroppingExecutor:
    """A broken executor (e.g. a remote one losing results): runs the jobs, then drops some outcomes."""

    def __init__(self, drop_job: bool) -> None:
        self.drop_job = drop_job

    def run(self, jobs):  # type: ignore[no-untyped-def]
        outcomes = InProcessExecutor().run(jobs)
        return outcomes[:-1] if self.drop_job else [o[:1] for o in outcomes]


def test_an_executor_losing_outcomes_is_an_error_not_a_reward(tmp_path: Path) -> None:
    # a copy whose result went missing must not drop out of min_k: R would be decided by fewer copies
    info = _task(tmp_path, "sql")
    with pytest.raises(ValueError):
        score_programs([(info, SQL_PARTIAL, 4, 0)], _DroppingExecutor(drop_job=False))
    with pytest.raises(ValueError):
        score_programs([(info, SQL_RIGHT, 4, 0), (info, SQL_PARTIAL, 4, 1)], _DroppingExecutor(drop_job=True))


def test_values_equal_within_tolerance_only_between_finite_numbers() -> None:
    assert values_close(1.0, 1.0 + 1e-12) and not values_close(1.0, 1.001)
    assert not values_close(math.inf, 1e308) and not values_close(-1e308, -math.inf)
    assert not values_close(math.inf, -math.inf) and values_close(math.inf, math.inf)
    assert not values_close("N", "S") and not values_close("1", 1) and not values_close(None, 0)


def test_a_row_counted_exactly_is_not_counted_again_within_the_tolerance() -> None:
    # pred {1.0, 5.0} vs ref {1.0, 1.0 + 1e-12}: 1.0 pairs with 1.0 exactly; 5.0 pairs with nothing.
    # |∩| = 1, |∪| = 2 + 2 − 1 = 3. Reusing the matched 1.0 for the near-equal ref row would claim 2 of 2.
    pred = canonical_rows(["x"], [(1.0,), (5.0,)])
    ref = canonical_rows(["x"], [(1.0,), (1.0 + 1e-12,)])
    assert row_overlap(pred, ref) == pytest.approx(1 / 3)
    assert exact_match(pred, ref) == 0.0
    # and near-equal rows do pair: {1.0 + 1e-12, 1.0} against the same reference is a full match
    assert exact_match(canonical_rows(["x"], [(1.0 + 2e-12,), (1.0,)]), ref) == 1.0


def test_an_empty_result_shares_nothing_with_a_one_row_target() -> None:
    # |∩| = 0, |∪| = 0 + 1 − 0 = 1 → m = 0 (an empty result must never pass for a match, in either direction)
    empty, one = canonical_rows(["x"], []), canonical_rows(["x"], [(1,)])
    assert row_overlap(empty, one) == 0.0 and row_overlap(one, empty) == 0.0
    assert exact_match(empty, one) == 0.0

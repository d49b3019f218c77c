"""SciDataSailor Table 4 metrics on trajectories whose counts are known by construction."""

from __future__ import annotations

from pathlib import Path

import pytest

from datadojo.eval.behaviour import behaviour_by, behaviour_metrics, code_stats
from datadojo.jsonl import write_jsonl_atomic
from datadojo.types import Action, Observation, TokenUsage, Trajectory, Turn


def _turn(kind: str, text: str = "", status: str | None = "ok", tokens: int = 10) -> Turn:
    obs = Observation(text="out", status=status) if status is not None else None
    return Turn(
        raw=text,
        action=Action(kind=kind, text=text),
        observation=obs,
        tokens=TokenUsage(prompt=tokens, completion=tokens),
    )


def _traj(turns: list[Turn], model: str = "m1") -> Trajectory:
    return Trajectory(task_id="t", turns=turns, stop_reason="answer", model=model)


CODE_A = """import pandas as pd
import numpy as np  # comment

# a comment line
df = pd.read_csv('x.csv')
for c in df.columns:
    if c:
        print(c)
"""
CODE_B = (
    "from sklearn.linear_model import LinearRegression\nx = [i for i in range(3) if i]\ny = 1 if x else 2\n"
)


def test_code_stats_counts() -> None:
    a = code_stats(CODE_A)
    assert a is not None
    assert a.lines_of_code == 6  # blank and comment-only lines excluded
    assert a.branches_loops == 2  # for, if
    assert a.imports == {"pandas", "numpy"}
    b = code_stats(CODE_B)
    # the comprehension loop and the conditional expression; a comprehension's filter is not a node of its own
    assert b is not None and b.branches_loops == 2
    assert b.imports == {"sklearn"}
    assert code_stats("def f(:\n") is None


def test_ast_depth_definition() -> None:
    assert code_stats("x").ast_depth == 4  # Module > Expr > Name > Load  # type: ignore[union-attr]
    assert code_stats("if a:\n    b").ast_depth == 5  # Module > If > Expr > Name > Load  # type: ignore[union-attr]


def test_error_metrics() -> None:
    t1 = _traj([
        _turn("code", "print(1)", "ok"),
        _turn("code", "1/0", "error"),
        _turn("code", "1/0", "timeout"),
        _turn("code", "print(2)", "ok"),
        _turn("sql", "SELECT x", "error"),
        _turn("answer", "42", None),
    ])  # fmt: skip
    t2 = _traj(
        [_turn("code", "print(1)", "env_error"), _turn("code", "print(1)", "ok"), _turn("answer", "1", None)]
    )
    t3 = _traj([_turn("answer", "1", None)])
    m = behaviour_metrics([t1, t2, t3])
    assert m.n_trajectories == 3 and m.avg_steps == pytest.approx(10 / 3)
    assert m.n_calls == 6  # env_error excluded; answers are not calls
    assert m.code_error_rate == pytest.approx(3 / 6)
    assert m.error_free_rate == pytest.approx(2 / 3)
    assert m.mean_error_chain == pytest.approx((2 + 1) / 2)  # runs: [error, timeout], [sql error]
    assert m.avg_tokens == pytest.approx(20 * 10 / 3)


def test_structure_metrics_and_grouping(tmp_path: Path) -> None:
    t1 = _traj(
        [
            _turn("code", CODE_A),
            _turn("code", CODE_B),
            _turn("code", "def broken(:"),
            _turn("answer", "1", None),
        ]
    )
    t2 = _traj([_turn("code", "import pandas\nprint(1)"), _turn("answer", "1", None)], model="m2")
    m = behaviour_metrics([t1])
    a, b = code_stats(CODE_A), code_stats(CODE_B)
    assert m.n_python_blocks == 3 and m.n_unparsable_blocks == 1
    assert m.lines_of_code == pytest.approx((a.lines_of_code + b.lines_of_code) / 2)  # type: ignore[union-attr]
    assert m.ast_depth == pytest.approx((a.ast_depth + b.ast_depth) / 2)  # type: ignore[union-attr]
    assert m.unique_imports == 3  # pandas, numpy, sklearn
    assert m.mean_error_chain is None and m.code_error_rate == 0.0
    path = tmp_path / "trajs.jsonl"
    write_jsonl_atomic(path, [t1, t2])
    groups = behaviour_by(path)
    assert set(groups) == {"m1", "m2"} and groups["m2"].unique_imports == 1
    assert behaviour_metrics(path).n_trajectories == 2


def test_no_trajectories() -> None:
    with pytest.raises(ValueError, match="no trajectories"):
        behaviour_metrics([])


def test_the_page_says_no_code_calls_instead_of_a_rate_over_none() -> None:
    """Issue 40: over trajectories that ended at context_limit with 0 turns the eval page said
    "error-free trajectories 100 %"; with no code call there is no rate to show."""
    from datadojo.eval.report import behaviour_rows

    cut = Trajectory(task_id="t", turns=[], stop_reason="context_limit", model="m1")
    rows = dict(behaviour_rows({"behaviour": behaviour_metrics([cut, cut]).to_dict()}))
    assert rows["code calls"] == "0"
    assert rows["error-free trajectories"] == rows["code error rate"] == "no code calls"
    one = _traj([_turn("code", "print(1)"), _turn("answer", "1", status=None)])
    rows = dict(behaviour_rows({"behaviour": behaviour_metrics([one]).to_dict()}))
    assert rows["error-free trajectories"] == "100.00%" and rows["code error rate"] == "0.00%"

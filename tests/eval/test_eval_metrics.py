"""pass@k against brute force, any-of-n, and the summary figures."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datadojo.eval.metrics import TrialRecord, any_of_n, mean_pass_at_k, pass_at_k, summarize


def _brute_force(n: int, c: int, k: int) -> float:
    """Probability that a random k-subset of n trials (c correct) contains a correct one."""
    trials = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(trials[i] for i in s) for s in subsets) / len(subsets)


@given(st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_equals_the_combinatorial_definition(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    assert pass_at_k(n, c, k) == pytest.approx(_brute_force(n, c, k))


def test_pass_at_k_worked_values_and_large_n() -> None:
    assert pass_at_k(3, 1, 1) == pytest.approx(1 / 3)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - math.comb(7, 5) / math.comb(10, 5))
    assert pass_at_k(200, 0, 10) == 0.0 and pass_at_k(200, 191, 10) == 1.0
    assert pass_at_k(1000, 5, 100) == pytest.approx(1 - math.comb(995, 100) / math.comb(1000, 100))


def test_pass_at_k_validation() -> None:
    with pytest.raises(ValueError, match="c <= n"):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError, match="no tasks"):
        mean_pass_at_k([], 1)


def test_any_of_n_is_datamind_pass3() -> None:
    counts = [(3, 0), (3, 1), (3, 3), (3, 2)]
    assert any_of_n(counts) == 0.75
    assert mean_pass_at_k(counts, 3) == 0.75  # equal when every task has exactly n = k trials


def test_summarize() -> None:
    recs = [
        TrialRecord("a", 0, True, turns=3, tokens=100, category="x"),
        TrialRecord("a", 1, False, finished=False, turns=10, tokens=400, category="x"),
        TrialRecord("a", 2, True, turns=4, tokens=100, category="x"),
        TrialRecord("b", 0, False, score=0.5, turns=2, tokens=50, category="y"),
        TrialRecord("b", 1, False, score=0.25, turns=2, tokens=50, category="y"),
        TrialRecord("b", 2, False, score=0.0, turns=2, tokens=50, category="y"),
    ]
    s = summarize(recs, ks=(1, 2, 3, 5))
    assert s.n_tasks == 2 and s.n_trials == 6 and s.trials_per_task == (3, 3)
    assert s.pass_at_1 == pytest.approx((2 / 3 + 0) / 2)
    assert s.pass_at_k[2] == pytest.approx((1 - 0 + 0) / 2)  # task a: 1 - C(1,2)/C(3,2) = 1
    assert 5 not in s.pass_at_k  # needs 5 trials per task
    assert s.any_of_n == 0.5
    assert s.mean_score == pytest.approx((2 / 3 + 0.25) / 2)
    assert s.success_rate == pytest.approx(5 / 6)
    assert s.avg_turns == pytest.approx(23 / 6) and s.avg_tokens == pytest.approx(750 / 6)
    assert s.per_category["x"].pass_at_1 == pytest.approx(2 / 3) and s.per_category["y"].any_of_n == 0.0
    d = s.to_dict()
    assert d["pass@1"] == s.pass_at_1 and "pass@3" in d and d["per_category"]["y"]["n_tasks"] == 1


def test_summarize_rejects_duplicates_and_empty() -> None:
    with pytest.raises(ValueError, match="appears twice"):
        summarize([TrialRecord("a", 0, True), TrialRecord("a", 0, False)])
    with pytest.raises(ValueError, match="no trial records"):
        summarize([])


def test_pass_at_1_averages_per_task_when_trial_counts_differ() -> None:
    # DataMind §5.1's pass@1 is a mean over tasks of each task's c/n. Task A: 1 of 1 correct; task B: 0 of 3.
    # Per task: (1/1 + 0/3) / 2 = 0.5. Pooling the trials instead would give 1/4 and let a task with many
    # trials outweigh the others.
    recs = [TrialRecord("A", 0, True), *(TrialRecord("B", i, False) for i in range(3))]
    s = summarize(recs)
    assert s.pass_at_1 == pytest.approx(0.5)
    assert s.mean_score == pytest.approx(0.5) and s.any_of_n == 0.5
    assert s.trials_per_task == (1, 3)
    # pass@3 needs 3 trials of every task: A has 1, so it is left out rather than estimated
    assert s.pass_at_k == {1: pytest.approx(0.5)} and "pass@3" not in s.to_dict()


def test_summarize_reports_pass_at_1_and_3_by_default() -> None:
    # DataMind reports pass@1 and pass@3 over three trials; both are the default ks, and no other k
    recs = [TrialRecord("a", i, ok) for i, ok in enumerate([True, False, False])]
    d = summarize(recs).to_dict()
    assert d["pass@1"] == pytest.approx(1 / 3) and d["pass@3"] == 1.0
    assert sorted(k for k in d if k.startswith("pass@")) == ["pass@1", "pass@3"]


def test_pass_at_k_needs_integer_counts() -> None:
    # a float count is a caller's bug (e.g. a mean passed as c): refused, whichever argument it is
    for args in ((3.0, 1, 1), (3, 1.0, 1), (3, 1, 1.0)):
        with pytest.raises(TypeError, match="integers"):
            pass_at_k(*args)  # type: ignore[arg-type]

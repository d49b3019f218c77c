r"""Evaluation figures over repeated trials: pass@1, unbiased pass@k, any-of-n, success rate, turns, tokens.

What the papers report, and how it is computed here:

* **pass@1** (DataMind §5.1: "the average of three independent trials"): the mean over tasks of
  :math:`c/n`, the share of a task's :math:`n` trials that are correct. With the same :math:`n` for every
  task this is exactly the mean of the per-trial accuracies.
* **pass@k**, the unbiased estimator of Chen et al. (2021, "Evaluating Large Language Models Trained on
  Code", §2.1): :math:`1 - \binom{n-c}{k} / \binom{n}{k}` per task, averaged over tasks, computed as a
  product so that large :math:`n` does not overflow. Defined only when every task has :math:`n \ge k`
  trials; other ``k`` are left out of the result.
* **any-of-n** (DataMind's pass@3: "success on any of the three trials counts as correct"): the share of
  tasks with at least one correct trial. It equals pass@n when every task has exactly n trials.
* **success rate** (SciDataSailor §5.1, SR): the share of trials that produced a final answer within the
  turn budget (``finished``).
* **average turns** and **average tokens** per trial (SciDataSailor Table 4, "Avg. ReAct Steps / Task",
  "Total Tokens").

:func:`summarize` computes all of them, overall and per category.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EvalSummary", "TrialRecord", "any_of_n", "mean_pass_at_k", "pass_at_k", "summarize"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task with ``c`` correct among ``n`` trials (Chen et al. 2021)."""
    if not (isinstance(n, int) and isinstance(c, int) and isinstance(k, int)):
        raise TypeError("n, c and k must be integers")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    prob_all_wrong = 1.0
    for i in range(n - c + 1, n + 1):
        prob_all_wrong *= 1.0 - k / i
    return 1.0 - prob_all_wrong


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float:
    """Mean of :func:`pass_at_k` over tasks given as ``(n, c)`` pairs."""
    values = [pass_at_k(n, c, k) for n, c in counts]
    if not values:
        raise ValueError("no tasks")
    return sum(values) / len(values)


def any_of_n(counts: Iterable[tuple[int, int]]) -> float:
    """Share of tasks with at least one correct trial (DataMind's pass@3 with three trials)."""
    flags = [c > 0 for _, c in counts]
    if not flags:
        raise ValueError("no tasks")
    return sum(flags) / len(flags)


@dataclass(frozen=True)
class TrialRecord:
    """One trial of one task: its correctness and credit, whether it finished, its turns and tokens."""

    task_id: str
    trial: int
    correct: bool
    score: float | None = None
    finished: bool = True
    turns: int | None = None
    tokens: int | None = None
    category: str | None = None

    @property
    def credit(self) -> float:
        return float(self.correct) if self.score is None else self.score


@dataclass
class EvalSummary:
    """The figures of :func:`summarize` (fractions in [0, 1]; ``None`` when not computable)."""

    n_tasks: int
    n_trials: int
    trials_per_task: tuple[int, int]
    pass_at_1: float
    pass_at_k: dict[int, float]
    any_of_n: float
    mean_score: float
    success_rate: float
    avg_turns: float | None
    avg_tokens: float | None
    per_category: dict[str, EvalSummary] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_tasks": self.n_tasks,
            "n_trials": self.n_trials,
            "trials_per_task": list(self.trials_per_task),
            "pass@1": self.pass_at_1,
            **{f"pass@{k}": v for k, v in sorted(self.pass_at_k.items())},
            "any_of_n": self.any_of_n,
            "mean_score": self.mean_score,
            "success_rate": self.success_rate,
            "avg_turns": self.avg_turns,
            "avg_tokens": self.avg_tokens,
            "per_category": {c: s.to_dict() for c, s in sorted(self.per_category.items())},
        }


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _summary(records: Sequence[TrialRecord], ks: Sequence[int]) -> EvalSummary:
    by_task: dict[str, list[TrialRecord]] = {}
    for r in records:
        by_task.setdefault(r.task_id, []).append(r)
    counts = [(len(rs), sum(r.correct for r in rs)) for rs in by_task.values()]
    sizes = [n for n, _ in counts]
    min_n = min(sizes)
    return EvalSummary(
        n_tasks=len(by_task),
        n_trials=len(records),
        trials_per_task=(min_n, max(sizes)),
        pass_at_1=sum(c / n for n, c in counts) / len(counts),
        pass_at_k={k: mean_pass_at_k(counts, k) for k in ks if k <= min_n},
        any_of_n=any_of_n(counts),
        mean_score=sum(sum(r.credit for r in rs) / len(rs) for rs in by_task.values()) / len(by_task),
        success_rate=sum(r.finished for r in records) / len(records),
        avg_turns=_mean([r.turns for r in records if r.turns is not None]),
        avg_tokens=_mean([r.tokens for r in records if r.tokens is not None]),
    )


def summarize(records: Iterable[TrialRecord], ks: Sequence[int] = (1, 3)) -> EvalSummary:
    """All figures of the module docstring over ``records``, overall and per ``category``.

    A ``(task_id, trial)`` pair may appear only once. ``ks`` lists the k of pass@k to report (each only
    when every task has at least k trials).
    """
    recs = list(records)
    if not recs:
        raise ValueError("no trial records to summarize")
    seen: set[tuple[str, int]] = set()
    for r in recs:
        if (r.task_id, r.trial) in seen:
            raise ValueError(f"trial {r.trial} of task {r.task_id!r} appears twice")
        seen.add((r.task_id, r.trial))
    for k in ks:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
    out = _summary(recs, ks)
    cats: dict[str, list[TrialRecord]] = {}
    for r in recs:
        if r.category is not None:
            cats.setdefault(r.category, []).append(r)
    out.per_category = {c: _summary(rs, ks) for c, rs in cats.items()}
    return out

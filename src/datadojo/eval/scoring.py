"""Score a file of predictions against a benchmark without running an agent (``datadojo score``).

**Predictions file**: JSONL, one record per line, either

* ``{"id": "...", "answer": "..."}``: a task id and the answer text (``answer`` may be ``null`` for "no
  answer"; a number, list or object is turned into text: numbers and booleans with ``str``, lists and
  objects as JSON). An optional integer ``sample`` numbers repeated trials of one task; without it the
  repeats of an id are numbered 0, 1, 2, … in file order; or
* a :class:`~datadojo.types.Trajectory` (recognized by its ``task_id`` key): its ``final_answer`` is the
  answer and its ``sample`` the trial, so a rollout output can be scored directly.

The two kinds may be mixed. A ``(task, trial)`` pair given twice is an error naming both lines.

**Scoring**: every prediction is scored with the benchmark's scoring rule (its default, or the one
:meth:`~datadojo.bench.base.Benchmark.with_rule` chose; the report names it and links the section of
``docs/evaluation.md`` that lists its deviations from the benchmark's own code); a task without any
prediction counts as wrong ("no prediction") in every trial; a prediction whose id matches no task is
reported under ``unknown_ids`` and not scored. The rule's totals are computed per trial index (trial j
uses each task's j-th prediction, a missing one counting as wrong) and averaged over trials, which is
DataMind's pass@1 ("the average of three independent trials"); pass@k and any-of-n come from
:func:`datadojo.eval.metrics.summarize`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from datadojo.bench.base import Benchmark, ItemScore, ScoringRule
from datadojo.errors import DataDojoError
from datadojo.eval.metrics import EvalSummary, TrialRecord, summarize
from datadojo.jsonl import JsonlError, iter_jsonl
from datadojo.types import Task, Trajectory

__all__ = ["Prediction", "ScoreReport", "ScoredItem", "ScoringError", "read_predictions", "score_predictions"]


class ScoringError(DataDojoError, ValueError):
    """A predictions file or a task set that cannot be scored; the message names the file and line."""


@dataclass(frozen=True)
class Prediction:
    """One answer to one task (``trial`` numbers repeats); ``line`` is where it came from (0 if built in code)."""

    task_id: str
    answer: str | None
    trial: int = 0
    line: int = 0
    turns: int | None = None
    tokens: int | None = None
    finished: bool = True


def _answer_text(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return str(value)
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    raise ScoringError(
        f"{where}: 'answer' must be text, a number, a list or an object, got {type(value).__name__}"
    )


def read_predictions(path: str | Path) -> list[Prediction]:
    """Predictions from a JSONL file of ``{id, answer}`` records and/or trajectories (module docstring)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"predictions file not found: {path}")
    out: list[Prediction] = []
    auto: dict[str, int] = {}
    where_of: dict[tuple[str, int], int] = {}
    try:
        for lineno, rec in iter_jsonl(path, skip_partial_tail=False):  # an input: a torn record is an error
            where = f"{path}:{lineno}"
            if not isinstance(rec, dict):
                raise ScoringError(
                    f"{where}: expected a JSON object with 'id' and 'answer' (or a trajectory)"
                )
            if "task_id" in rec:
                try:
                    traj = Trajectory.model_validate(rec)
                except ValidationError as exc:
                    first = exc.errors()[0]
                    loc = ".".join(str(x) for x in first["loc"]) or "(record)"
                    raise ScoringError(
                        f"{where}: not a valid trajectory: field {loc!r}: {first['msg']}"
                    ) from exc
                tokens = sum(t.tokens.prompt + t.tokens.completion for t in traj.turns)
                pred = Prediction(
                    traj.task_id, traj.final_answer, traj.sample, lineno,
                    turns=traj.n_turns, tokens=tokens, finished=traj.stop_reason == "answer",
                )  # fmt: skip
            else:
                if "id" not in rec:
                    raise ScoringError(
                        f"{where}: missing 'id' (records are {{'id', 'answer'}} or trajectories)"
                    )
                if "answer" not in rec:
                    raise ScoringError(f"{where}: missing 'answer' (use null for no answer)")
                rid = rec["id"]
                if not isinstance(rid, str | int) or isinstance(rid, bool) or str(rid).strip() == "":
                    raise ScoringError(f"{where}: 'id' must be a non-empty string or an integer, got {rid!r}")
                task_id = str(rid)
                sample = rec.get("sample")
                if sample is None:
                    sample = auto.get(task_id, 0)
                elif not isinstance(sample, int) or isinstance(sample, bool) or sample < 0:
                    raise ScoringError(f"{where}: 'sample' must be a non-negative integer, got {sample!r}")
                auto[task_id] = max(auto.get(task_id, 0), sample + 1)
                pred = Prediction(task_id, _answer_text(rec["answer"], where), sample, lineno)
            key = (pred.task_id, pred.trial)
            if key in where_of:
                raise ScoringError(
                    f"{where}: task {pred.task_id!r} trial {pred.trial} was already given on line {where_of[key]}"
                )
            where_of[key] = lineno
            out.append(pred)
    except JsonlError as exc:
        raise ScoringError(str(exc)) from exc
    return out


@dataclass(frozen=True)
class ScoredItem:
    """One scored (task, trial): the prediction, the gold answer, and the benchmark's :class:`ItemScore`."""

    task: Task
    trial: int
    prediction: Prediction | None
    score: ItemScore

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.task.id,
            "trial": self.trial,
            "category": self.task.category,
            "answer": self.prediction.answer if self.prediction else None,
            "gold": self.task.answer,
            **self.score.to_dict(),
        }


@dataclass
class ScoreReport:
    """Per-item scores, the rule's totals averaged over trials, and the trial statistics."""

    benchmark: str
    items: list[ScoredItem]
    totals: dict[str, float]
    summary: EvalSummary
    n_tasks: int
    n_trials: int
    missing_ids: list[str] = field(default_factory=list)
    unknown_ids: list[str] = field(default_factory=list)
    rule: ScoringRule | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "rule": self.rule.to_dict() if self.rule is not None else None,
            "n_tasks": self.n_tasks,
            "n_trials": self.n_trials,
            "totals": self.totals,
            "summary": self.summary.to_dict(),
            "missing_ids": self.missing_ids,
            "unknown_ids": self.unknown_ids,
            "items": [i.to_dict() for i in self.items],
        }


def score_predictions(
    benchmark: Benchmark,
    tasks: Iterable[Task],
    predictions: Sequence[Prediction],
    *,
    ks: Sequence[int] = (1, 3),
    exclude: Collection[tuple[str, int]] = (),
) -> ScoreReport:
    """Score ``predictions`` for ``tasks`` with ``benchmark``'s scoring rule (module docstring).

    ``exclude`` names ``(task_id, trial)`` pairs that are scored (they keep their item) but left out of
    every figure — pass@k, the official totals: trials the model server failed, which say nothing about
    the agent (a task whose every trial is excluded leaves the figures). When every trial is excluded
    nothing is left out: the figures are zero and the caller's banner says why.
    """
    task_list = list(tasks)
    if not task_list:
        raise ScoringError(f"{benchmark.name}: no tasks to score")
    by_id = {t.id: t for t in task_list}
    preds: dict[str, dict[int, Prediction]] = {}
    unknown: list[str] = []
    for p in predictions:
        if p.task_id not in by_id:
            if p.task_id not in unknown:
                unknown.append(p.task_id)
            continue
        preds.setdefault(p.task_id, {})[p.trial] = p
    n_trials = max((max(d) + 1 for d in preds.values()), default=1)
    items: list[ScoredItem] = []
    per_trial: list[list[tuple[Task, ItemScore]]] = [[] for _ in range(n_trials)]
    records: list[TrialRecord] = []
    skip = set(exclude) if len(set(exclude)) < len(task_list) * n_trials else set()
    for task in task_list:
        given = preds.get(task.id, {})
        for j in range(n_trials):
            p = given.get(j)
            s = benchmark.score(task, p.answer if p is not None else None)
            items.append(ScoredItem(task, j, p, s))
            if (task.id, j) in skip:
                continue
            per_trial[j].append((task, s))
            records.append(
                TrialRecord(
                    task.id, j, s.correct, s.score,
                    finished=p is not None and p.finished,
                    turns=p.turns if p is not None else None,
                    tokens=p.tokens if p is not None else None,
                    category=task.category,
                )
            )  # fmt: skip
    trial_totals = [benchmark.totals(t) for t in per_trial if t]
    keys = list(dict.fromkeys(k for t in trial_totals for k in t))
    totals = {k: sum(t.get(k, 0.0) for t in trial_totals) / len(trial_totals) for k in keys}
    return ScoreReport(
        benchmark=benchmark.name,
        items=items,
        totals=totals,
        summary=summarize(records, ks=ks),
        n_tasks=len(task_list),
        n_trials=n_trials,
        missing_ids=[t.id for t in task_list if t.id not in preds],
        unknown_ids=unknown,
        rule=benchmark.rule,
    )

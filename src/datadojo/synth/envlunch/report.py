"""EnvLunch scores as a run folder in the evaluation harness's layout, so the shared report renders them.

``datadojo warmup score --report DIR`` and ``datadojo demo`` write ``DIR/summary.json``,
``DIR/scores.jsonl`` and ``DIR/trajectories.jsonl`` the way ``datadojo eval`` does, then
:func:`datadojo.eval.report.write_report` turns them into ``report.html`` / ``report.md`` (summary, plots,
a viewer for every trajectory); ``datadojo report DIR`` rebuilds them later.

A trial's score is the agreement min_k m over the hidden copies (1 = solved in every copy, EnvLunch Eq. 4);
the EnvLunch reward R, with its turn bonus, is shown per trajectory.

**Headline figures** (:func:`headline`, one definition for ``datadojo warmup score`` and the page): pass@1 =
share of trials solved in every copy, mean credit = mean of min_k m, mean R = mean Eq. 4 reward (with the
turn bonus, so up to 1.5). Each is averaged over a task's trials first, then over tasks, as the evaluation
harness averages (:mod:`datadojo.eval.metrics`), so a task with more samples does not weigh more. Credit and
R are different quantities; both are shown, each under its own name, never one in place of the other.
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datadojo.reward.envlunch import T_MAX, ScoreRecord
from datadojo.types import Trajectory

__all__ = ["Headline", "headline", "headline_rows", "write_warmup_report"]


@dataclass(frozen=True)
class Headline:
    """The warm-up's headline figures over some score records (definitions in the module docstring)."""

    n_tasks: int
    n_trials: int
    pass_at_1: float
    mean_credit: float
    mean_reward: float


def _per_task_mean(records: Sequence[ScoreRecord], value: Callable[[ScoreRecord], float]) -> float:
    by_task: dict[str, list[float]] = defaultdict(list)
    for r in records:
        by_task[r.task_id].append(value(r))
    return statistics.fmean(statistics.fmean(v) for v in by_task.values())


def headline(records: Sequence[ScoreRecord]) -> Headline:
    """Headline figures of ``records`` (at least one)."""
    if not records:
        raise ValueError("no score records")
    return Headline(
        n_tasks=len({r.task_id for r in records}),
        n_trials=len(records),
        pass_at_1=_per_task_mean(records, lambda r: float(r.solved)),
        mean_credit=_per_task_mean(records, lambda r: min(r.m) if r.m else 0.0),
        mean_reward=_per_task_mean(records, lambda r: r.reward),
    )


def headline_rows(h: Headline) -> list[tuple[str, str]]:
    """``(label, text)`` of the headline as the CLI prints it; the page shows the same labels and texts."""
    return [
        ("pass@1 (mean over trials)", f"{h.pass_at_1 * 100:.2f}%"),
        ("mean credit", f"{h.mean_credit * 100:.2f}%"),
        ("mean EnvLunch reward R (Eq. 4)", f"{h.mean_reward:.3f}"),
    ]


def write_warmup_report(
    run_dir: str | Path,
    tasks_path: str | Path,
    trajectories: Sequence[Trajectory],
    records: Sequence[ScoreRecord],
) -> tuple[Path, Path]:
    """Write the run folder for ``trajectories`` scored as ``records`` (one each, same order); return
    the paths of ``report.html`` and ``report.md``. Each trajectory gets ``rewards["envlunch"]`` set."""
    from datadojo.eval.metrics import TrialRecord, summarize
    from datadojo.eval.report import write_report
    from datadojo.fs import write_json_atomic
    from datadojo.jsonl import write_jsonl_atomic

    run_dir, tasks_path = Path(run_dir), Path(tasks_path)
    run_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    trials: list[TrialRecord] = []
    for traj, rec in zip(trajectories, records, strict=True):
        traj.rewards["envlunch"] = rec.reward
        score = min(rec.m) if rec.m else 0.0
        category = f"{rec.backend} L{rec.level}"
        rows.append(
            {
                "id": traj.task_id,
                "trial": traj.sample,
                "score": score,
                "correct": rec.solved,
                # the reference solver is a search: "max_turns" would hide that it found no program in budget
                "stop_reason": traj.extra.get("outcome") or traj.stop_reason,
                "turns": len(traj.turns),
                "category": category,
                "rewards": {"envlunch": rec.reward},
                "gold": "reproduce o* (shown in the question) in every hidden copy",
                "answer": traj.final_answer,
                "prediction_source": "final answer (program)",
                "metric": "EnvLunch agreement min_k m",
                "reason": traj.extra.get("outcome") or "; ".join(rec.errors) or f"m = {rec.m}",
            }
        )
        trials.append(
            TrialRecord(
                task_id=traj.task_id,
                trial=traj.sample,
                correct=rec.solved,
                score=score,
                finished=traj.stop_reason == "answer",
                turns=len(traj.turns),
                category=category,
            )
        )
    summary = {
        "benchmark": "envlunch",
        "description": "EnvLunch warm-up tasks: a trial is solved when its program reproduces o* in every "
        "hidden counterfactual copy (arXiv 2610.33817, Eq. 4)",
        "model": ", ".join(sorted({t.model or "?" for t in trajectories})),
        "agent": "trajectories from " + str(tasks_path.name),
        "data": str(tasks_path),
        "n_tasks": len({r["id"] for r in rows}),
        "n_trials": max((r["trial"] for r in rows), default=0) + 1,
        "metric": "agreement (min over copies)",
        # the report's "turn budget" row: EnvLunch has none, but Eq. 4 scales the turn bonus by t_max
        "agent_config": {
            "dialect": ", ".join(sorted({t.dialect for t in trajectories})) or None,
            "max_turns": " · ".join(
                f"{T_MAX[b]} ({b})" for b in sorted({r.backend for r in records}, reverse=True)
            )
            or None,
        },
        "ks": [1],
        "metrics": summarize(trials, ks=(1,)).to_dict(),
        "rewards": {"mean_envlunch": headline(records).mean_reward if records else None},
        "scored_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    write_json_atomic(run_dir / "summary.json", summary, default=str)
    write_jsonl_atomic(run_dir / "scores.jsonl", rows)
    write_jsonl_atomic(run_dir / "trajectories.jsonl", list(trajectories))
    return write_report(run_dir)

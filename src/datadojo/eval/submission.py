"""Leaderboard submission files: a run's answers in the format a benchmark's leaderboard accepts.

Some benchmarks withhold their test answers and score submissions themselves (DABstep's leaderboard
takes one JSONL line per task: ``task_id``, ``agent_answer``, ``reasoning_trace``). ``datadojo eval``
then writes the benchmark's :attr:`~datadojo.bench.base.Benchmark.submission_file` into the run folder,
one record per task in task order (:meth:`~datadojo.bench.base.Benchmark.submission_record`), from each
task's first trial: a leaderboard takes one answer per task, and trial 0 is the one every run has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from datadojo.bench.base import Benchmark
from datadojo.jsonl import write_jsonl_atomic
from datadojo.types import Task, Trajectory

__all__ = ["reasoning_trace", "write_submission"]


def reasoning_trace(trajectory: Trajectory) -> str:
    """The episode as text: each turn's model output, then the observation it got (the steps by which the
    agent reached its answer, which leaderboards ask for alongside it)."""
    parts: list[str] = []
    for i, turn in enumerate(trajectory.turns, 1):
        parts.append(f"[turn {i}]\n{turn.raw.strip()}")
        if turn.observation is not None and turn.observation.text.strip():
            parts.append(f"[observation {i}]\n{turn.observation.text.strip()}")
    return "\n\n".join(parts)


def write_submission(
    benchmark: Benchmark,
    tasks: Sequence[Task],
    trajectories: Mapping[str, Trajectory],
    answer_of: Callable[[Task, Trajectory], str | None],
    path: str | Path,
) -> Path:
    """Write ``benchmark``'s submission for ``tasks`` to ``path`` (atomically) and return the path.

    ``trajectories`` maps a task id to the trajectory whose answer is submitted; ``answer_of`` says what
    that answer is (the harness's ``predicted_answer``). A task without a trajectory is submitted with no
    answer, so the file always has one line per task, as a leaderboard expects.
    """
    records = []
    for task in tasks:
        traj = trajectories.get(task.id)
        answer = answer_of(task, traj) if traj is not None else None
        trace = reasoning_trace(traj) if traj is not None else ""
        records.append(benchmark.submission_record(task, answer, trace))
    out = Path(path)
    write_jsonl_atomic(out, records)
    return out

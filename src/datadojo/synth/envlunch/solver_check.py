"""How much of a build the reference solver solves, and why it fails on the rest (issue 39).

A build's tasks can be hard (o* pins the program down, but the search does not find it), ambiguous (o*
admits another program on E that differs in a copy: no agent can be sure to score) or broken (the found
program fails in a copy). A user cannot tell these apart from the task file; the solver's outcome per task
can. After a build, :func:`check_with_solver` runs :func:`.solver.solve` on a seeded sample of the tasks
with a deterministic budget (``candidates`` compositions, no clock, so the figure depends on the seed
alone), scores each found program in the copies like an agent's (EnvLunch Eq. 4, in-process: the programs
are ours), and sorts each unsolved task into one reason of :data:`FAILURE_REASONS`.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datadojo.reward.envlunch import ScoreRecord, score_programs, task_info
from datadojo.reward.programs import InProcessExecutor
from datadojo.synth.envlunch.config import SolverConfig
from datadojo.synth.envlunch.environment import stable_int
from datadojo.synth.envlunch.solver import SolveResult, solve
from datadojo.types import Task

__all__ = ["FAILURE_REASONS", "SolverCheck", "check_with_solver", "failure_reason", "solver_sample"]

#: Why the solver did not solve a task, most telling first: the code and what it says about the task.
FAILURE_REASONS: dict[str, str] = {
    "error_in_copy": "its program matches o* on E but fails in a copy (a broken task)",
    "differs_in_copy": "its program matches o* on E but not the hidden program in a copy (o* is ambiguous)",
    "budget_spent": "no program matching o* on E within the budget (a hard task, or beyond the search)",
    "no_candidate": "no operator and table of the action space reaches o*'s columns (beyond the search)",
}


def failure_reason(result: SolveResult, record: ScoreRecord) -> str | None:
    """The code of :data:`FAILURE_REASONS` for one task (``None`` when it is solved in every copy)."""
    if record.solved:
        return None
    if result.program is None:
        return "no_candidate" if result.candidates == 0 else "budget_spent"
    return "error_in_copy" if record.errors else "differs_in_copy"


def solver_sample(tasks: Sequence[Task], size: int, seed: int) -> list[Task]:
    """A seeded sample of ``size`` tasks (all of them when there are fewer), in the build's order."""
    if size >= len(tasks):
        return list(tasks)
    picked = sorted(random.Random(stable_int(seed, "solver-check")).sample(range(len(tasks)), size))
    return [tasks[i] for i in picked]


@dataclass
class SolverCheck:
    """The solver's outcome on a sample of a build: solved share, per backend, failure reasons."""

    n_tasks: int  # tasks in the build
    tried: int
    solved: int
    by_backend: dict[str, tuple[int, int]]  # backend -> (solved, tried)
    failures: Counter[str]
    examples: dict[str, list[str]] = field(default_factory=dict)  # reason -> first task ids
    candidates: int = 0
    seconds: float = 0.0

    @property
    def share(self) -> float:
        return self.solved / self.tried if self.tried else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": self.n_tasks,
            "tried": self.tried,
            "solved": self.solved,
            "share": self.share,
            "by_backend": {b: {"solved": s, "tried": n} for b, (s, n) in sorted(self.by_backend.items())},
            "failures": dict(self.failures.most_common()),
            "reasons": {k: FAILURE_REASONS[k] for k in self.failures},
            "examples": self.examples,
            "budget": f"{self.candidates} candidates per task, no time limit",
            "seconds": round(self.seconds, 2),
        }

    def text(self) -> str:
        """The summary line(s) a build prints."""
        backends = ", ".join(f"{b} {s}/{n}" for b, (s, n) in sorted(self.by_backend.items()))
        head = (
            f"reference solver: solved {self.solved}/{self.tried} tasks in every copy ({self.share:.0%}; "
            f"{backends}) — a seeded sample of {self.tried} of {self.n_tasks} tasks, {self.candidates} "
            f"candidates each, {self.seconds:.1f} s"
        )
        lines = [head]
        for code, n in self.failures.most_common():
            lines.append(f"  {n} {code}: {FAILURE_REASONS[code]} (e.g. {self.examples[code][0]})")
        return "\n".join(lines)


def check_with_solver(
    tasks: Sequence[Task], tasks_path: str | Path, *, sample: int, seed: int, candidates: int
) -> SolverCheck:
    """Run the reference solver on a seeded sample of ``sample`` of ``tasks`` (written at ``tasks_path``,
    their copies beside it) with ``candidates`` compositions each, and score its programs in the copies."""
    start = time.perf_counter()
    chosen = solver_sample(tasks, sample, seed)
    infos = [task_info(t, tasks_path) for t in chosen]
    results = solve(infos, SolverConfig(max_candidates=candidates, time_limit_s=None, seed=seed))
    records = score_programs(
        [(i, r.program, 0, 0) for i, r in zip(infos, results, strict=True)], InProcessExecutor()
    )
    by_backend: dict[str, tuple[int, int]] = {}
    failures: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for info, result, record in zip(infos, results, records, strict=True):
        solved, tried = by_backend.get(info.backend, (0, 0))
        by_backend[info.backend] = (solved + record.solved, tried + 1)
        reason = failure_reason(result, record)
        if reason is not None:
            failures[reason] += 1
            ids = examples.setdefault(reason, [])
            if len(ids) < 3:
                ids.append(info.task.id)
    return SolverCheck(
        n_tasks=len(tasks),
        tried=len(chosen),
        solved=sum(r.solved for r in records),
        by_backend=by_backend,
        failures=failures,
        examples=examples,
        candidates=candidates,
        seconds=time.perf_counter() - start,
    )

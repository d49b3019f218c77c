"""The EnvLunch reward (§3, Eq. 4) and scoring of trajectories.

    R(τ̂; τ, E'_1:K) = (1 + w · (1 − t / t_max)) · min_k m(τ̂(E'_k), τ(E'_k))

with w = 0.5, t_max = 16 (SQL) / 48 (pandas), m from :mod:`.canon` (row-multiset overlap for SQL, exact
match after canonicalization for pandas). τ(E'_k) was computed at synthesis and is stored in the task;
τ̂(E'_k) comes from running the agent's submitted program in copy k (:mod:`.executor`).

**What the agent submits** (our definition; the paper says the agent "submits a recovered trajectory τ̂ in
its final action"): the content of its final answer (``Trajectory.final_answer``, the ``<answer>`` block)
is the program — one SQL query for an SQL task, a complete Python program for a pandas task (it reads the
Parquet files itself and leaves its answer in ``result`` or ends with an expression). A Markdown code fence
around it is stripped. ``t`` is the number of turns before the answer turn (the agent's interaction with
the environment), clipped to ``[0, t_max]``. A trajectory with no answer scores 0.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datadojo.protocol.code import extract_code
from datadojo.reward.canon import Canonical, canonical_from_json, exact_match, row_overlap
from datadojo.reward.programs import Job, ProgramExecutor, ProgramOutcome
from datadojo.types import Task, Trajectory

__all__ = [
    "T_MAX",
    "W_BREVITY",
    "EnvLunchTaskInfo",
    "ScoreRecord",
    "Submission",
    "agreement",
    "envlunch_reward",
    "extract_submission",
    "score_programs",
    "score_trajectories",
    "task_info",
]


#: EnvLunch §3, Eq. (4): "t_max is the turn budget of the harness (16 for SQL and 48 for pandas), and w=0.5".
T_MAX = {"sql": 16, "pandas": 48}
W_BREVITY = 0.5


class EnvLunchTaskInfo:
    """The scoring view of an EnvLunch task: backend, copies (absolute), targets, w, t_max."""

    def __init__(self, task: Task, base_dir: Path) -> None:
        extra = task.extra
        if task.answer_kind != "envlunch":
            raise ValueError(f"task {task.id}: answer_kind is {task.answer_kind!r}, not 'envlunch'")
        try:
            self.backend: str = extra["backend"]
            self.copy_dirs = tuple(_resolve(base_dir, p) for p in extra["copies"])
            self.orig_dir = _resolve(base_dir, extra["orig"])
            self.copy_targets: list[Canonical] = [canonical_from_json(c) for c in extra["copy_targets"]]
            self.target: Canonical = canonical_from_json(extra["target"])
            self.w = float(extra.get("w", W_BREVITY))
            self.t_max = int(extra.get("t_max", T_MAX[self.backend]))
            self.db_name: str | None = extra.get("db_name")
            self.level = int(extra["level"])
            self.program: str = extra["program"]
        except KeyError as exc:
            raise ValueError(f"task {task.id}: extra lacks the EnvLunch field {exc.args[0]!r}") from None
        if self.backend not in T_MAX:
            raise ValueError(f"task {task.id}: extra.backend must be 'sql' or 'pandas', got {self.backend!r}")
        if len(self.copy_dirs) != len(self.copy_targets):
            raise ValueError(
                f"task {task.id}: {len(self.copy_dirs)} copies but {len(self.copy_targets)} targets"
            )
        self.task = task


def _resolve(base: Path, p: str) -> Path:
    path = Path(p)
    return path if path.is_absolute() else (base / path)


def task_info(task: Task, tasks_path: str | Path) -> EnvLunchTaskInfo:
    """Scoring view of ``task`` read from ``tasks_path`` (relative paths resolve against its folder)."""
    return EnvLunchTaskInfo(task, Path(os.path.abspath(tasks_path)).parent)


def agreement(backend: str, pred: Canonical, ref: Canonical) -> float:
    """m(τ̂(E'), τ(E')) ∈ [0, 1] (EnvLunch §3): row-multiset overlap (SQL) or exact match (pandas)."""
    return row_overlap(pred, ref) if backend == "sql" else exact_match(pred, ref)


def envlunch_reward(m_values: Sequence[float], t: int, t_max: int, w: float = 0.5) -> float:
    """Eq. (4): the brevity factor ``1 + w(1 − t/t_max)`` times the worst agreement over the copies."""
    if not m_values:
        raise ValueError("the reward needs at least one copy")
    if t_max <= 0:
        raise ValueError(f"t_max must be positive, got {t_max}")
    t = min(max(t, 0), t_max)
    m = min(m_values)
    # the registry's sum of parts, agreement + w·brevity, added in its order so both give the same float
    return m + w * ((1.0 - t / t_max) * m)


@dataclass(frozen=True)
class Submission:
    """The program a trajectory submitted, and the turns it took before submitting."""

    program: str | None
    t: int
    error: str | None = None


def extract_submission(traj: Trajectory, backend: str) -> Submission:
    """Read the submitted program and t from a rollout-runner trajectory (rules in the module doc)."""
    answer_turns = [i for i, turn in enumerate(traj.turns) if turn.action.kind == "answer"]
    t = answer_turns[0] if answer_turns else len(traj.turns)
    text = traj.final_answer
    if text is None or not text.strip():
        return Submission(None, t, f"no final answer (stop_reason={traj.stop_reason})")
    language = "sql" if backend == "sql" else "python"
    code = extract_code(text, tag="answer", allowed=(language,), default_language=language, strict=False)
    if code.errors or not code.code.strip():
        why = "; ".join(code.errors) or "the answer is empty"
        return Submission(None, t, f"the answer is not a {language} program: {why}")
    return Submission(code.code, t)


@dataclass
class ScoreRecord:
    """The score of one submission on one task."""

    task_id: str
    sample: int
    backend: str
    level: int
    reward: float
    m: list[float]
    t: int
    errors: list[str] = field(default_factory=list)

    @property
    def solved(self) -> bool:
        """All copies agree exactly (min_k m = 1)."""
        return bool(self.m) and min(self.m) == 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "sample": self.sample,
            "backend": self.backend,
            "level": self.level,
            "reward": self.reward,
            "m": self.m,
            "t": self.t,
            "solved": self.solved,
            "errors": self.errors,
        }


def score_programs(
    items: Sequence[tuple[EnvLunchTaskInfo, str | None, int, int]],
    executor: ProgramExecutor,
    *,
    copies: bool = True,
) -> list[ScoreRecord]:
    """Score ``(task, program, t, sample)`` items. With ``copies=False`` the program is checked in the
    original environment against o* instead (what the reward would be without counterfactual copies —
    used by the audit)."""
    jobs: list[Job] = []
    where: list[int] = []
    for i, (info, program, _, _) in enumerate(items):
        if program is None:
            continue
        dirs = info.copy_dirs if copies else (info.orig_dir,)
        jobs.append(Job(info.backend, program, tuple(dirs), info.db_name))  # type: ignore[arg-type]
        where.append(i)
    outcomes: dict[int, list[ProgramOutcome]] = dict(zip(where, executor.run(jobs), strict=True))
    records = []
    for i, (info, program, t, sample) in enumerate(items):
        refs = info.copy_targets if copies else [info.target]
        if program is None:
            records.append(
                ScoreRecord(
                    info.task.id,
                    sample,
                    info.backend,
                    info.level,
                    0.0,
                    [0.0] * len(refs),
                    t,
                    ["no program submitted"],
                )
            )
            continue
        ms, errors = [], []
        for k, (out, ref) in enumerate(zip(outcomes[i], refs, strict=True), 1):
            if out.result is None:
                ms.append(0.0)
                errors.append(f"copy {k}: {out.error}")
            else:
                ms.append(agreement(info.backend, out.result, ref))
        reward = envlunch_reward(ms, t, info.t_max, info.w)
        records.append(ScoreRecord(info.task.id, sample, info.backend, info.level, reward, ms, t, errors))
    return records


def score_trajectories(
    tasks: dict[str, EnvLunchTaskInfo], trajectories: Sequence[Trajectory], executor: ProgramExecutor
) -> list[ScoreRecord]:
    """Score rollout trajectories against their tasks; a trajectory for an unknown task is an error."""
    items: list[tuple[EnvLunchTaskInfo, str | None, int, int]] = []
    extra_errors: dict[int, str] = {}
    for i, traj in enumerate(trajectories):
        info = tasks.get(traj.task_id)
        if info is None:
            raise ValueError(
                f"trajectory {i} (task_id={traj.task_id!r}): no such EnvLunch task in the task file"
            )
        sub = extract_submission(traj, info.backend)
        if sub.error:
            extra_errors[i] = sub.error
        items.append((info, sub.program, sub.t, traj.sample))
    records = score_programs(items, executor)
    for i, err in extra_errors.items():
        records[i].errors = [err]
    return records

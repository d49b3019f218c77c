"""Accuracy of a rollout's trajectories against the reference answers their tasks carry.

Why: ``datadojo rollout`` runs tasks that often carry answers (hand-written, DataMind's curated queries,
warm-up tasks), yet it reported only turns and stop reasons; a user had to run ``datadojo score tasks``
to learn whether the agent was right. The rule is the one ``score tasks`` uses
(:class:`~datadojo.bench.tasks.OwnTasks`, :func:`~datadojo.compare.matchers.match_task`: numbers within 3 %,
normalized text, yes/no, lists, records, tables), so both commands agree on every trajectory. Beside the
accuracy goes the *undecided* share: answered trajectories where the matcher guessed (free text, several
candidate numbers), which only a judge could settle.

Tasks are left out, and counted, when ``score tasks`` would refuse them
(:func:`~datadojo.bench.tasks.unscorable_reason`: a kind another command scores, such as ``sql``, or a
reference that does not fit its kind); ``score tasks`` names those records.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from datadojo.bench.tasks import OwnTasks, unscorable_reason
from datadojo.types import Task, Trajectory

__all__ = ["AnswerAccuracy", "answer_accuracy"]


@dataclass
class AnswerAccuracy:
    """Counts over the trajectories of tasks with a usable reference answer."""

    trajectories: int = 0
    correct: int = 0
    answered: int = 0
    undecided: int = 0
    tasks: int = 0
    #: ids of tasks with an answer that the ``match`` rule cannot score (left out of every count)
    unscorable: list[str] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.correct / self.trajectories if self.trajectories else 0.0

    @property
    def undecided_share(self) -> float:
        """Of the answered trajectories, the share the matcher could not decide for certain."""
        return self.undecided / self.answered if self.answered else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": "match",
            "accuracy": round(self.accuracy, 6),
            "trajectories": self.trajectories,
            "correct": self.correct,
            "answered": self.answered,
            "undecided": round(self.undecided_share, 6),
            "tasks": self.tasks,
            "unscorable": self.unscorable,
        }


def answer_accuracy(tasks: Iterable[Task], trajectories: Iterable[Trajectory]) -> AnswerAccuracy | None:
    """Score every trajectory of a task in ``tasks`` that carries an answer; ``None`` when none does.

    A trajectory without a final answer counts as wrong (the episode submitted nothing). Trajectories of
    tasks not in ``tasks`` (a run continued with ``--limit``) are ignored.
    """
    usable: dict[str, Task] = {}
    out = AnswerAccuracy()
    any_answer = False
    for task in tasks:
        if task.answer is None:
            continue
        any_answer = True
        if unscorable_reason(task) is not None:
            out.unscorable.append(task.id)
        else:
            usable[task.id] = task
    if not any_answer:
        return None
    out.tasks = len(usable)
    scorer = OwnTasks()
    for traj in trajectories:
        task = usable.get(traj.task_id)
        if task is None:
            continue
        item = scorer.score(task, traj.final_answer)
        out.trajectories += 1
        out.correct += bool(item.correct)
        if item.parsed is not None:
            out.answered += 1
            out.undecided += not item.parts.get("decided", True)
    return out

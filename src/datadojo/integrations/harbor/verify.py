"""The verifier an exported Harbor task runs: DataDojo's reward of the agent's answer, as Harbor's reward file.

A Harbor agent (Terminus, Claude Code, …) works in the task's container with a shell, not in DataDojo's
tag dialect; what it leaves is its answer, in the file the instruction names. ``tests/test.sh`` calls
``python -m datadojo.integrations.harbor.verify``, which

1. reads the task (``tests/task.json``, its data files under the container's data folder) and the answer;
2. builds the trajectory DataDojo would have recorded for an episode answering it in one well-formed turn
   (the dialect's own ``format_turn``, parsed back by the dialect) — the reward sees the answer exactly as
   it sees the final ``<answer>`` of a ``datadojo eval`` episode;
3. scores it with :func:`datadojo.reward.registry.score_pairs_sync` (the one function every consumer calls)
   and writes ``reward.json``: ``reward`` (the total), ``correct`` (0/1) and each named part, numbers only,
   as Harbor's verifier reads it.

No answer file (the agent never answered) is the trajectory of an episode that ran out of turns.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from datadojo.fs import write_json_atomic
from datadojo.protocol import get_dialect
from datadojo.reward.registry import RewardResult, RewardSpec, score_pairs_sync
from datadojo.types import Action, DataFile, Task, Trajectory

__all__ = ["answer_trajectory", "main", "reward_file", "task_in", "verify_answer"]

#: How the answer was given, recorded in the synthesized turn's thought.
THOUGHT = "The answer the Harbor agent wrote to its answer file."


def task_in(task: Task, data_dir: str | Path) -> Task:
    """``task`` with its data files found in ``data_dir`` (by their visible names), as the image holds them."""
    base = Path(data_dir)
    files = [DataFile(path=str(base / f.visible_name), kind=f.kind, name=f.name) for f in task.files]
    return task.model_copy(update={"files": files})


def answer_trajectory(task: Task, answer: str | None, dialect: str = "datamind") -> Trajectory:
    """The trajectory of an episode of ``task`` that answered ``answer`` in one turn (``None``: no answer)."""
    d = get_dialect(dialect)
    if answer is None:
        return Trajectory(task_id=task.id, dialect=d.name, turns=[], stop_reason="max_turns")
    raw = d.format_turn(THOUGHT, Action(kind="answer", text=answer.strip()))
    parsed = d.parse_turn(raw)
    if parsed.kind != "answer":  # an answer holding the dialect's own tags cannot be one answer block
        raise ValueError(f"the answer cannot be written as one <{d.answer}> block: {parsed.error}")
    return Trajectory(
        task_id=task.id,
        dialect=d.name,
        turns=[parsed.to_turn()],
        final_answer=d.extract_answer(parsed.text),
        stop_reason="answer",
    )


def verify_answer(
    task: Task, answer: str | None, *, dialect: str = "datamind", reward: RewardSpec | str | None = None
) -> RewardResult:
    """DataDojo's reward (registry) of ``answer`` to ``task``."""
    spec = RewardSpec(name=reward) if isinstance(reward, str) else reward
    [result] = score_pairs_sync([(task, answer_trajectory(task, answer, dialect))], spec)
    return result


def reward_file(result: RewardResult) -> dict[str, float]:
    """Harbor's ``reward.json``: the total as ``reward``, then ``correct`` and the parts (numbers only)."""
    out: dict[str, float] = {"reward": float(result.total), "correct": 1.0 if result.correct else 0.0}
    for name, value in result.parts.items():
        key = name if name not in out else f"part_{name}"
        out[key] = float(value)
    return out


def _read_answer(path: Path) -> str | None:
    if not path.exists():
        return None
    return path.read_text(encoding="utf-8", errors="replace")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m datadojo.integrations.harbor.verify",
        description="Score a Harbor agent's answer with DataDojo's reward and write Harbor's reward.json.",
    )
    parser.add_argument("--task", required=True, type=Path, help="the task's JSON (tests/task.json)")
    parser.add_argument("--answer", required=True, type=Path, help="the agent's answer file")
    parser.add_argument("--data-dir", required=True, type=Path, help="where the task's data files are")
    parser.add_argument("--out", required=True, type=Path, help="reward.json to write")
    args = parser.parse_args(argv)
    try:
        spec: dict[str, Any] = json.loads(args.task.read_text(encoding="utf-8"))
        task = task_in(Task.model_validate(spec["task"]), args.data_dir)
    except (OSError, ValueError, KeyError) as exc:
        print(f"{args.task}: not a DataDojo Harbor task file: {exc}", file=sys.stderr)
        return 2
    result = verify_answer(
        task, _read_answer(args.answer), dialect=spec.get("dialect", "datamind"), reward=spec.get("reward")
    )
    rewards = reward_file(result)
    write_json_atomic(args.out, rewards)
    print(json.dumps(rewards))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

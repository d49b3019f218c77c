"""verl reward function backed by DataDojo's scorers: ``compute_score(data_source, solution_str, ground_truth, extra_info)``.

Point verl at it with ``custom_reward_function.path=<this file>`` and ``custom_reward_function.name=compute_score``.
The parquet rows written by :mod:`datadojo.train.export.verl` carry the whole task as JSON in
``extra_info["task"]``; the score is then:

* for ordinary tasks, DataMind's composite reward (§4): r_answer from the task benchmark's official scorer
  or the tolerant matcher (:func:`datadojo.reward.default_answer_check`) applied to the last
  ``<answer>…</answer>`` block of the response, r_length from that answer's length, and r_format = 1 when
  the response ends in a closed answer block (verl gives us the flat response text, not DataDojo's parsed
  turns, so the full trajectory validator cannot run; a missing or unclosed answer is the format failure
  that matters);
* for EnvLunch tasks (``answer_kind == "envlunch"``), EnvLunch's Eq. 4: the submitted program is run in the
  counterfactual copies (found under ``extra_info["tasks_dir"]``) in a sandbox, with t = the number of tool
  calls before the answer.

Returns a dict with ``score`` (what verl trains on) and ``acc`` (correct or not: DAPO's dynamic-sampling
filter ``algorithm.filter_groups.metric=acc`` keeps groups with 0 < #correct < G).
"""

from __future__ import annotations

import json
from typing import Any

from datadojo.protocol import get_dialect
from datadojo.reward import DataMindReward, composite_reward, default_answer_check, length_reward
from datadojo.types import Action, Task, Trajectory, Turn

__all__ = ["compute_score", "task_from_row"]

_TOOL_CALL_MARKERS = ("<tool_call>",)


def task_from_row(data_source: str, ground_truth: Any, extra_info: dict[str, Any] | None) -> Task:
    """The task a parquet row describes: ``extra_info["task"]`` when present, else a minimal one."""
    info = extra_info or {}
    raw = info.get("task")
    if raw:
        return Task.model_validate(json.loads(raw) if isinstance(raw, str) else raw)
    answer = ground_truth
    if isinstance(ground_truth, str):
        try:
            answer = json.loads(ground_truth)
        except json.JSONDecodeError:
            answer = ground_truth
    return Task(
        id=str(info.get("task_id", info.get("index", "verl"))), question="", answer=answer, source=data_source
    )


def _answer_block(solution_str: str, dialect: str) -> str | None:
    d = get_dialect(dialect)
    blocks = [b for b in d.scan(solution_str).blocks if b.name == d.answer and b.closed]
    if not blocks:
        return None
    return d.extract_answer(solution_str[blocks[-1].start :])


def _envlunch_score(
    task: Task, answer: str | None, solution_str: str, info: dict[str, Any]
) -> dict[str, Any]:
    from pathlib import Path

    from datadojo.train.rewards import envlunch_reward_fn

    tasks_dir = info.get("tasks_dir")
    if not tasks_dir:
        raise ValueError(
            f"task {task.id}: an EnvLunch row needs extra_info['tasks_dir'] (where its copies live)"
        )
    t = sum(solution_str.count(m) for m in _TOOL_CALL_MARKERS)
    turns = [Turn(raw="", action=Action(kind="code", text="")) for _ in range(t)]
    if answer is not None:
        turns.append(Turn(raw="", action=Action(kind="answer", text=answer)))
    traj = Trajectory(
        task_id=task.id,
        turns=turns,
        final_answer=answer,
        stop_reason="answer" if answer is not None else "max_turns",
    )
    result = envlunch_reward_fn(Path(tasks_dir) / "tasks.jsonl")([(task, traj)])[0]
    return {"score": result.total, "acc": float(result.correct), **result.parts}


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Score one verl response (module docstring); ``kwargs`` absorbs arguments newer verl versions pass."""
    info = extra_info or {}
    task = task_from_row(data_source, ground_truth, info)
    dialect = str(info.get("dialect", "datamind"))
    answer = _answer_block(solution_str, dialect)
    if task.answer_kind == "envlunch":
        return _envlunch_score(task, answer, solution_str, info)
    check = default_answer_check(task, answer)
    r_format = 1.0 if answer is not None else 0.0
    scorer = DataMindReward()
    n_tokens = scorer.count_tokens(answer) if answer else 0
    r_length = length_reward(n_tokens, scorer.l_min, scorer.l_max)
    r_answer = 1.0 if check.correct else 0.0
    score = composite_reward(r_format, r_answer, r_length, malformed_penalty=scorer.malformed_penalty)
    # Numbers only: verl averages every returned field into its metrics.
    return {"score": score, "acc": r_answer, "format": r_format, "length": r_length}

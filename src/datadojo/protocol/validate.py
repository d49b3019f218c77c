"""The strict whole-trajectory validator behind the format reward (DataMind §4, r_format).

DataMind's format reward is 1 only when the whole trajectory follows the ReAct format: reasoning in
``<think>``, code in ``<code>``, every code block answered by its ``<interpreter>`` observation, and the
final answer in ``<answer>`` (DataMind §3.2 also drops synthesized trajectories that deviate from it).
SciDataSailor's quality control (§4.2) likewise rejects traces with missing ``<python>`` or ``<result>``
blocks. :func:`validate_trajectory` checks exactly this, over the OpenAI messages of a trajectory:

* every assistant turn passes :meth:`Dialect.parse_turn` with ``strict=True`` (tags paired, one action,
  a ``<think>`` first, nothing outside tags, no tags nested in blocks);
* every code turn is followed by one environment message wrapped in the observation tags;
* after the prompt there are only assistant turns and their observations;
* there is exactly one final answer, and it is the last message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from datadojo.protocol.dialect import Dialect, get_dialect
from datadojo.protocol.messages import trajectory_to_messages
from datadojo.types import Trajectory

__all__ = ["validate_trajectory"]


def _first_turn(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the first assistant message that is a turn (not a prompt message marked ``train: false``)."""
    for i, m in enumerate(messages):
        if m.get("role") == "assistant" and m.get("train", True) is not False:
            return i
    return None


def validate_trajectory(
    trajectory: Trajectory | Sequence[Mapping[str, Any]], dialect: Dialect | str | None = None
) -> list[str]:
    """Every format problem in a trajectory, each naming its message and turn; empty means valid.

    Accepts a :class:`~datadojo.types.Trajectory` (``dialect`` defaults to its own) or a list of OpenAI
    chat messages (then ``dialect`` is required). Never raises on malformed content: a message that is not
    a ``{"role", "content"}`` mapping with string content is itself reported.
    """
    if isinstance(trajectory, Trajectory):
        d = get_dialect(dialect if dialect is not None else trajectory.dialect)
        messages: Sequence[Any] = trajectory_to_messages(trajectory, dialect=d)
    else:
        if dialect is None:
            raise ValueError("validate_trajectory: give the dialect when validating a list of messages")
        d = get_dialect(dialect)
        messages = list(trajectory)

    problems: list[str] = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            problems.append(f"message {i}: not a mapping with 'role' and 'content'")
        elif not isinstance(m.get("content"), str):
            problems.append(f"message {i}: content must be a string, got {type(m.get('content')).__name__}")
    if problems:
        return problems

    start = _first_turn(messages)
    if start is None:
        return ["no assistant turn: the trajectory has only prompt messages"]

    code_tags = "/".join(f"<{t}>" for t in d.action_tags if t != d.answer)
    obs = f"<{d.observation}>…</{d.observation}>"
    answers: list[tuple[int, int]] = []  # (turn number, message index)
    turn = 0
    i = start
    while i < len(messages):
        m = messages[i]
        role, content = m.get("role"), m["content"]
        if role != "assistant":
            what = (
                "an observation with no code turn before it"
                if d.is_observation(content)
                else f"a {role} message"
            )
            problems.append(
                f"message {i}: {what}; after the prompt only assistant turns and their {obs} may follow"
            )
            i += 1
            continue
        turn += 1
        where = f"message {i} (turn {turn})"
        parsed = d.parse_turn(content, strict=True)
        problems.extend(f"{where}: {e}" for e in parsed.errors)
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        nxt_is_env = nxt is not None and nxt.get("role") == "user"
        if parsed.kind in ("code", "sql"):
            if not nxt_is_env:
                problems.append(f"{where}: the {code_tags} block is not followed by its {obs} observation")
            elif not d.is_observation(nxt["content"]):
                problems.append(f"message {i + 1}: the observation of turn {turn} must be wrapped in {obs}")
            i += 2 if nxt_is_env else 1
            continue
        if parsed.kind == "answer":
            answers.append((turn, i))
        elif nxt_is_env and d.is_observation(nxt["content"]):
            i += 1  # the harness's feedback to an invalid turn belongs to that turn
        i += 1

    if not answers:
        problems.append(f"no final answer: the trajectory must end with <{d.answer}>…</{d.answer}>")
    elif len(answers) > 1:
        turns = ", ".join(str(t) for t, _ in answers)
        problems.append(
            f"{len(answers)} final answers (turns {turns}): give exactly one <{d.answer}>, in the last turn"
        )
    if answers and answers[-1][1] != len(messages) - 1:
        t, idx = answers[-1]
        problems.append(
            f"the final answer (turn {t}, message {idx}) is not last: {len(messages) - 1 - idx} message(s) follow it"
        )
    return problems

"""Trajectories ⇄ OpenAI chat messages, each message marked trainable (agent) or environment (masked).

Training reads trajectories as chat messages: the prompt, then for each turn the assistant's text and the
environment's reply. DataMind §4 computes the SFT loss only on tokens the agent generated and masks the
interpreter's output (the indicator 𝕀(y_t ∉ o)); the ``train`` flag on each message carries that mask:

* prompt messages (system, user, few-shot): ``train=False``;
* assistant turns: ``train=True``, content = :attr:`Turn.raw` verbatim (completed with the closing tag a
  stop sequence cut off, see :meth:`Dialect.complete_turn`, so the model learns to close its blocks);
* observations: ``role="user"``, content wrapped in the dialect's observation tags
  (``<interpreter>…</interpreter>``, ``<result>…</result>``), ``train=False``. Every observation, including
  the harness's feedback to a malformed turn, goes through this one channel.

:func:`messages_to_trajectory` re-parses the assistant turns, so ``messages → trajectory → messages`` gives
back the same messages, and ``trajectory → messages → trajectory`` the same raw texts, parsed actions,
thoughts, observation texts (up to trailing line breaks, see :meth:`Dialect.format_observation`) and
prompt (observation status too with ``with_status=True``). Timings,
token counts, rewards and provenance are not carried by messages; pass them as keyword fields.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from datadojo.errors import DataDojoError
from datadojo.protocol.dialect import Dialect, get_dialect
from datadojo.types import STOP_REASONS, Observation, StopReason, Trajectory, Turn

__all__ = [
    "ROLES",
    "MessagesError",
    "messages_to_trajectory",
    "strip_masks",
    "trajectory_to_messages",
]

ROLES: tuple[str, ...] = ("system", "user", "assistant")

#: Keys a plain OpenAI chat message may carry; :func:`strip_masks` keeps only these.
_OPENAI_KEYS = ("role", "content", "name")


class MessagesError(DataDojoError, ValueError):
    """A chat message list that cannot be a trajectory; ``index`` is the offending message (or ``None``)."""

    def __init__(self, index: int | None, message: str) -> None:
        super().__init__(f"message {index}: {message}" if index is not None else message)
        self.index = index


def trajectory_to_messages(
    traj: Trajectory,
    *,
    include_prompt: bool = True,
    dialect: Dialect | str | None = None,
    with_status: bool = False,
) -> list[dict[str, Any]]:
    """The trajectory as OpenAI chat messages with ``train`` masks (see the module docstring).

    ``dialect`` defaults to ``traj.dialect``. ``with_status`` adds ``status`` and ``truncated`` keys to
    observation messages so that :func:`messages_to_trajectory` can restore them.
    """
    d = get_dialect(dialect if dialect is not None else traj.dialect)
    out: list[dict[str, Any]] = []
    if include_prompt:
        for i, m in enumerate(traj.prompt):
            if not isinstance(m, Mapping) or "role" not in m:
                raise MessagesError(i, f"prompt message of trajectory {traj.task_id!r} has no 'role'")
            out.append({**m, "train": False})
    for turn in traj.turns:
        raw = turn.raw if turn.action.kind == "invalid" else d.complete_turn(turn.raw)
        out.append({"role": "assistant", "content": raw, "train": True})
        if turn.observation is not None:
            env: dict[str, Any] = {
                "role": "user",
                "content": d.format_observation(turn.observation.text),
                "train": False,
            }
            if with_status:
                env["status"] = turn.observation.status
                env["truncated"] = turn.observation.truncated
            out.append(env)
    return out


def _check(messages: Sequence[Any]) -> None:
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise MessagesError(i, f"expected a mapping with 'role' and 'content', got {type(m).__name__}")
        role = m.get("role")
        if role not in ROLES:
            raise MessagesError(i, f"role {role!r} is not one of {', '.join(ROLES)}")
        if not isinstance(m.get("content"), str):
            raise MessagesError(i, f"content must be a string, got {type(m.get('content')).__name__}")


def _first_turn(messages: Sequence[Mapping[str, Any]]) -> int:
    for i, m in enumerate(messages):
        if m["role"] == "assistant" and m.get("train", True) is not False:
            return i
    return len(messages)


def messages_to_trajectory(
    messages: Sequence[Mapping[str, Any]],
    *,
    task_id: str,
    dialect: Dialect | str = "datamind",
    sample: int = 0,
    stop_reason: StopReason | None = None,
    default_language: str | None = None,
    **fields: Any,
) -> Trajectory:
    """Rebuild a trajectory from chat messages, re-parsing each assistant turn with the (lenient) parser.

    The prompt is every message before the first assistant message not marked ``train: false``. After it,
    each assistant message is a turn and a following user message is that turn's observation, which must
    be wrapped in the dialect's observation tags. ``stop_reason`` defaults to ``answer`` when the last turn
    answers, ``invalid`` when it is malformed, ``max_turns`` otherwise; ``final_answer`` is the last
    turn's answer through :meth:`Dialect.extract_answer`. Other ``fields`` go to :class:`Trajectory`.
    Raises :class:`MessagesError` naming the message index.
    """
    d = get_dialect(dialect)
    _check(messages)
    start = _first_turn(messages)
    prompt = [{k: v for k, v in m.items() if k != "train"} for m in messages[:start]]
    turns: list[Turn] = []
    i = start
    while i < len(messages):
        m = messages[i]
        if m["role"] != "assistant":
            raise MessagesError(
                i, f"a {m['role']} message after the prompt must follow an assistant turn as its observation"
            )
        parsed = d.parse_turn(m["content"], default_language=default_language)
        observation: Observation | None = None
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        if nxt is not None and nxt["role"] != "assistant":
            if nxt["role"] != "user":
                raise MessagesError(i + 1, f"a {nxt['role']} message cannot follow an assistant turn")
            try:
                text = d.parse_observation(nxt["content"])
            except ValueError as exc:
                raise MessagesError(i + 1, str(exc)) from None
            obs: dict[str, Any] = {"text": text}
            for key in ("status", "truncated"):
                if key in nxt:
                    obs[key] = nxt[key]
            try:
                observation = Observation.model_validate(obs)
            except ValueError as exc:
                raise MessagesError(i + 1, f"bad observation fields: {exc}") from None
            i += 1
        turns.append(parsed.to_turn(observation))
        i += 1

    final_answer = None
    inferred: StopReason = "max_turns"
    if turns and turns[-1].action.kind == "answer":
        final_answer = d.extract_answer(turns[-1].action.text)
        inferred = "answer"
    elif turns and turns[-1].action.kind == "invalid":
        inferred = "invalid"
    if stop_reason is not None and stop_reason not in STOP_REASONS:
        raise ValueError(f"stop_reason {stop_reason!r} is not one of {', '.join(STOP_REASONS)}")
    fields.setdefault("final_answer", final_answer)
    return Trajectory(
        task_id=task_id,
        sample=sample,
        dialect=d.name,
        prompt=prompt,
        turns=turns,
        stop_reason=stop_reason or inferred,
        **fields,
    )


def strip_masks(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Plain OpenAI chat messages: only ``role``, ``content`` (and ``name``) kept; ``train`` etc. dropped."""
    return [{k: m[k] for k in _OPENAI_KEYS if k in m} for m in messages]

"""Multi-turn trajectories → token ids and a loss mask, through the model's own chat template.

DataMind §4 trains only on what the agent generated: the indicator 𝕀(y_t ∉ o) masks the interpreter's
output, and prompts are conditioning, not targets. :func:`datadojo.protocol.messages.trajectory_to_messages` marks
each message ``train`` (assistant turns) or not (prompt, observations); this module renders the messages
with the tokenizer's chat template and gives every token a mask bit.

How a turn is cut. For the k-th message the template is rendered for messages ``[:k]`` and ``[:k+1]``; the
difference is that message's text. For an assistant turn the part up to the generation prompt (e.g.
``<|im_start|>assistant\\n``) is the header — the harness writes it, so it is masked — and the rest is the
reply: trainable up to and including the end-of-turn token (``<|im_end|>``, the tokenizer's EOS, or
``end_of_turn``), because the model must learn to stop; template glue after it (a newline) is masked.

Each piece is tokenized on its own and the ids concatenated. That is also how the tokens arose at rollout
time — the prompt (header included) was tokenized, and the reply was generated after it — so a token never
straddles a mask boundary. A template that rewrites earlier turns when later ones are added (Qwen3's drops
past ``<think>`` blocks) is not prefix-stable; it is rejected with :class:`TemplateError`, since the tokens
trained on would not be the tokens the model saw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from datadojo.errors import DataDojoError
from datadojo.protocol.messages import strip_masks, trajectory_to_messages
from datadojo.types import Trajectory

__all__ = [
    "TemplateError",
    "TokenizedTrajectory",
    "render_segments",
    "tokenize_messages",
    "tokenize_trajectory",
]


class TemplateError(DataDojoError, ValueError):
    """The chat template cannot be split into per-message pieces (the message names the trajectory / message)."""


@dataclass
class TokenizedTrajectory:
    """Token ids and a loss mask (1 = agent token, trained on) for one trajectory.

    ``void`` carries :attr:`Trajectory.has_void_turn` so the trainers can mask the trajectory out
    (DataMind §4); ``truncated`` says ``max_length`` cut the tail; ``key`` is ``(task_id, sample)``.
    """

    input_ids: list[int]
    loss_mask: list[int]
    void: bool = False
    truncated: bool = False
    key: tuple[str, int] = ("", 0)

    @property
    def n_tokens(self) -> int:
        return len(self.input_ids)

    @property
    def n_agent_tokens(self) -> int:
        return sum(self.loss_mask)


def _render(tokenizer: Any, messages: list[dict[str, Any]], add_generation_prompt: bool) -> str:
    if not messages:
        return ""
    return tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=add_generation_prompt
    )


def _end_strings(tokenizer: Any, end_of_turn: str | Sequence[str] | None) -> list[str]:
    if end_of_turn is not None:
        ends = [end_of_turn] if isinstance(end_of_turn, str) else list(end_of_turn)
    else:
        ends = [tokenizer.eos_token] if getattr(tokenizer, "eos_token", None) else []
    return [e for e in ends if e]


def _split_reply(body: str, content: str, ends: Sequence[str]) -> tuple[str, str]:
    """The trainable reply (through the end-of-turn marker) and the template glue after it."""
    start = len(content) if body.startswith(content) else 0
    best: int | None = None
    for end in ends:
        i = body.find(end, start)
        if i >= 0 and (best is None or i + len(end) < best):
            best = i + len(end)
    if best is None:
        return body, ""
    return body[:best], body[best:]


def render_segments(
    messages: Sequence[Mapping[str, Any]],
    tokenizer: Any,
    *,
    end_of_turn: str | Sequence[str] | None = None,
    where: str = "messages",
) -> list[tuple[str, bool]]:
    """The chat-templated conversation as ``(text, trainable)`` pieces whose concatenation is the full render.

    ``messages`` carry ``train`` flags (:func:`datadojo.protocol.messages.trajectory_to_messages`); a message without
    one is trainable iff it is an assistant message. ``where`` names the source in error messages.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise TemplateError(f"{where}: the tokenizer has no chat template")
    plain = strip_masks(messages)
    ends = _end_strings(tokenizer, end_of_turn)
    segments: list[tuple[str, bool]] = []
    prev = ""
    for k, msg in enumerate(messages):
        trainable = bool(msg.get("train", msg.get("role") == "assistant"))
        full = _render(tokenizer, plain[: k + 1], False)
        if not full.startswith(prev):
            raise TemplateError(
                f"{where}, message {k}: the chat template is not prefix-stable (rendering message {k} changes "
                "the text of earlier ones); multi-turn training needs a template that leaves past turns as they are"
            )
        if trainable and msg.get("role") == "assistant":
            head = _render(tokenizer, plain[:k], True)
            if not head.startswith(prev) or not full.startswith(head):
                raise TemplateError(
                    f"{where}, message {k}: the generation prompt of the chat template is not a prefix of the "
                    "rendered assistant turn"
                )
            reply, glue = _split_reply(full[len(head) :], str(msg.get("content", "")), ends)
            segments += [(head[len(prev) :], False), (reply, True), (glue, False)]
        else:
            segments.append((full[len(prev) :], False))
        prev = full
    return [(text, flag) for text, flag in segments if text]


def tokenize_messages(
    messages: Sequence[Mapping[str, Any]],
    tokenizer: Any,
    *,
    max_length: int | None = None,
    end_of_turn: str | Sequence[str] | None = None,
    where: str = "messages",
) -> tuple[list[int], list[int], bool]:
    """``(input_ids, loss_mask, truncated)`` for chat messages with ``train`` flags (see the module docstring)."""
    if max_length is not None and max_length < 2:
        raise ValueError(f"max_length must be >= 2, got {max_length}")
    ids: list[int] = []
    mask: list[int] = []
    for text, trainable in render_segments(messages, tokenizer, end_of_turn=end_of_turn, where=where):
        piece = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids.extend(piece)
        mask.extend([int(trainable)] * len(piece))
    truncated = max_length is not None and len(ids) > max_length
    if truncated:
        assert max_length is not None
        ids, mask = ids[:max_length], mask[:max_length]
    return ids, mask, truncated


def tokenize_trajectory(
    traj: Trajectory,
    tokenizer: Any,
    *,
    max_length: int | None = None,
    end_of_turn: str | Sequence[str] | None = None,
) -> TokenizedTrajectory:
    """Tokenize a trajectory with its prompt, masking prompts and observations (DataMind §4)."""
    where = f"trajectory {traj.task_id!r} (sample {traj.sample})"
    messages = trajectory_to_messages(traj)
    if not any(m.get("train") for m in messages):
        raise TemplateError(f"{where}: no assistant turn to train on")
    ids, mask, truncated = tokenize_messages(
        messages, tokenizer, max_length=max_length, end_of_turn=end_of_turn, where=where
    )
    return TokenizedTrajectory(ids, mask, void=traj.has_void_turn, truncated=truncated, key=traj.key)

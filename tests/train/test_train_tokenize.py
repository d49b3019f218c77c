"""Tokenization with loss masks on a real chat template (Qwen2.5's ChatML, set on a locally built tokenizer)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from datadojo.protocol.messages import strip_masks, trajectory_to_messages
from datadojo.train.tokenize import TemplateError, render_segments, tokenize_messages, tokenize_trajectory
from datadojo.train.toy import QWEN25_TEMPLATE, synthetic_trajectory
from datadojo.types import Trajectory


def _trained_text(tok: Any, ids: list[int], mask: list[int]) -> str:
    """Decode the runs of masked-in tokens, joined by '|'."""
    runs, cur = [], []
    for i, m in zip(ids, mask, strict=True):
        if m:
            cur.append(i)
        elif cur:
            runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    return "|".join(tok.decode(r) for r in runs)


def test_masks_follow_the_chat_template(toy_tok: Any) -> None:
    assert toy_tok.chat_template == QWEN25_TEMPLATE
    traj = synthetic_trajectory("t1", n_code_turns=2)
    messages = trajectory_to_messages(traj)
    ex = tokenize_trajectory(traj, toy_tok)
    # the ids are exactly the rendered conversation
    rendered = toy_tok.apply_chat_template(strip_masks(messages), tokenize=False)
    assert toy_tok.decode(ex.input_ids) == rendered
    # trained: each assistant reply through its <|im_end|>, nothing else
    replies = [m["content"] + "<|im_end|>" for m in messages if m["role"] == "assistant"]
    assert _trained_text(toy_tok, ex.input_ids, ex.loss_mask) == "|".join(replies)
    # so the system prompt, the question, the headers and every <interpreter> observation are masked
    masked = toy_tok.decode([i for i, m in zip(ex.input_ids, ex.loss_mask, strict=True) if not m])
    for obs in (t.observation.text for t in traj.turns if t.observation):
        assert obs in masked
    assert "<|im_start|>assistant\n" in masked and traj.prompt[1]["content"] in masked
    assert ex.void is False and ex.key == ("t1", 0) and ex.n_agent_tokens == sum(ex.loss_mask)


def test_segments_concatenate_to_the_render(toy_tok: Any) -> None:
    traj = synthetic_trajectory("t2", void=True)
    messages = trajectory_to_messages(traj)
    segs = render_segments(messages, toy_tok)
    assert "".join(s for s, _ in segs) == toy_tok.apply_chat_template(strip_masks(messages), tokenize=False)
    # the glue after <|im_end|> (a newline) is masked; the malformed (void) turn is still rendered verbatim
    assert all(s.endswith("<|im_end|>") for s, trainable in segs if trainable)
    assert any(trainable and "no action" in s for s, trainable in segs)
    assert tokenize_trajectory(traj, toy_tok).void is True


def test_truncation_keeps_the_head(toy_tok: Any) -> None:
    traj = synthetic_trajectory("t3")
    full = tokenize_trajectory(traj, toy_tok)
    cut = tokenize_trajectory(traj, toy_tok, max_length=40)
    assert cut.truncated and cut.input_ids == full.input_ids[:40] and cut.loss_mask == full.loss_mask[:40]
    with pytest.raises(ValueError, match="max_length"):
        tokenize_messages(trajectory_to_messages(traj), toy_tok, max_length=1)


def test_a_template_that_rewrites_history_is_rejected(toy_tok: Any) -> None:
    # like Qwen3's template, drop the earlier assistant turns' <think> text once a later turn exists
    rewriting = (
        "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
        "{%- if m.role == 'assistant' and not loop.last %}{{ m.content.split('</think>')[-1] }}"
        "{%- else %}{{ m.content }}{%- endif %}<|im_end|>\n{%- endfor %}"
        "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
    )
    other = copy.deepcopy(toy_tok)  # keep the shared tokenizer untouched
    other.chat_template = rewriting
    with pytest.raises(TemplateError, match="prefix-stable"):
        tokenize_trajectory(synthetic_trajectory("t4"), other)
    other.chat_template = None
    with pytest.raises(TemplateError, match="no chat template"):
        tokenize_trajectory(synthetic_trajectory("t4"), other)


def test_no_assistant_turn_is_an_error_naming_the_trajectory(toy_tok: Any) -> None:
    traj = Trajectory(task_id="empty", prompt=[{"role": "user", "content": "hi"}], stop_reason="llm_error")
    with pytest.raises(TemplateError, match="'empty'"):
        tokenize_trajectory(traj, toy_tok)


def test_explicit_end_of_turn(toy_tok: Any) -> None:
    # a tokenizer whose EOS is not the template's end-of-turn marker (as base Llama 3 tokenizers)
    other = copy.deepcopy(toy_tok)
    other.eos_token = "<|endoftext|>"
    messages = [
        {"role": "user", "content": "q", "train": False},
        {"role": "assistant", "content": "<answer>1</answer>", "train": True},
    ]
    ids, mask, _ = tokenize_messages(messages, other)
    assert (
        _trained_text(other, ids, mask) == "<answer>1</answer><|im_end|>\n"
    )  # no marker found: glue trained
    ids, mask, _ = tokenize_messages(messages, other, end_of_turn="<|im_end|>")
    assert _trained_text(other, ids, mask) == "<answer>1</answer><|im_end|>"

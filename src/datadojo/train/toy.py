"""Tiny models, tokenizers and trajectories built locally: for tests, smoke runs and the GPU benchmark.

Nothing here downloads. The tokenizer is a byte-level BPE (the kind Qwen2.5 and Llama 3 use) trained in a
second on DataMind-style text, with Qwen2.5's ChatML chat template (:data:`QWEN25_TEMPLATE`, the template of
the Qwen2.5-Instruct checkpoints without its tool-calling branch), so tokenization and loss masks are
exercised on a real template. The model is a randomly initialized Llama built from a config of any size.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from datadojo.protocol import get_dialect
from datadojo.types import Action, Observation, Trajectory

__all__ = [
    "QWEN25_TEMPLATE",
    "build_toy_model",
    "build_toy_tokenizer",
    "save_toy_checkpoint",
    "synthetic_trajectory",
]

#: Qwen2.5-Instruct's chat template (ChatML; default system prompt when none is given), minus tool calls.
QWEN25_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) "
    "or (message.role == 'assistant') %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- endif %}"
)

_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_CORPUS = [
    "<think> Let me look at the data first. </think>",
    "<code> import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(df.head()) </code>",
    "<interpreter> region amount\n0 north 12.5\n1 south 7.0 </interpreter>",
    "<answer> The total is 42. </answer>",
    "You are a data analyst. Answer the question about the files.",
    "How many rows are there? What is the mean of the amount column?",
    "system user assistant 0 1 2 3 4 5 6 7 8 9 sum mean count rows columns",
]
_WORDS = [
    "the",
    "data",
    "rows",
    "column",
    "mean",
    "sum",
    "count",
    "total",
    "region",
    "amount",
    "north",
    "south",
    "value",
    "file",
    "table",
]


def build_toy_tokenizer(
    vocab_size: int = 512,
    *,
    corpus: Sequence[str] | None = None,
    chat_template: str = QWEN25_TEMPLATE,
    extra_tokens: Sequence[str] = (),
) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` with ChatML specials and :data:`QWEN25_TEMPLATE`.

    The keywords serve tests that need exact token counts: ``corpus`` replaces the DataMind-style text the
    merges are learnt from (so chosen words become single tokens), ``chat_template`` replaces the template,
    and ``extra_tokens`` are added whole, never split (as Qwen2.5 adds ``<tool_call>``).
    """
    import tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=_SPECIAL,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 20 if corpus is None else corpus, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", padding_side="right"
    )
    if extra_tokens:
        fast.add_tokens(list(extra_tokens))
    fast.chat_template = chat_template
    return fast


def build_toy_model(
    tokenizer: Any,
    *,
    hidden: int = 32,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    max_positions: int = 4096,
    vocab_size: int | None = None,
    seed: int = 0,
) -> Any:
    """A randomly initialized ``LlamaForCausalLM`` sized by the arguments, matched to ``tokenizer``.

    ``vocab_size`` (at least the tokenizer's) pads the embedding and output layers to a realistic
    vocabulary, which dominates the memory of the logits (Qwen2.5 has 152k entries).
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if vocab_size is not None and vocab_size < len(tokenizer):
        raise ValueError(f"vocab_size {vocab_size} is smaller than the tokenizer's {len(tokenizer)}")
    config = LlamaConfig(
        vocab_size=vocab_size or len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden if hidden < 256 else int(hidden * 8 / 3) // 64 * 64,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def save_toy_checkpoint(path: str | Path, *, tokenizer: Any | None = None, **model_kwargs: Any) -> Path:
    """Build a toy tokenizer + model and save both to ``path`` (a checkpoint ``hf:PATH`` and trainers load).

    ``tokenizer`` reuses one already built (training a tokenizer takes about a second) instead of a new
    :func:`build_toy_tokenizer`.
    """
    path = Path(path)
    tok = build_toy_tokenizer() if tokenizer is None else tokenizer
    model = build_toy_model(tok, **model_kwargs)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def synthetic_trajectory(
    task_id: str,
    *,
    sample: int = 0,
    n_code_turns: int = 2,
    answer: str = "42",
    void: bool = False,
    rng: random.Random | None = None,
    words: int = 8,
) -> Trajectory:
    """A well-formed DataMind-dialect trajectory: ``n_code_turns`` code turns with observations, then an answer.

    ``void=True`` makes the first turn malformed (no action), which marks it void. ``words`` sets the length
    of each thought and observation (the benchmark uses it to reach a target sequence length).
    """
    rng = rng or random.Random(f"{task_id}/{sample}")
    d = get_dialect("datamind")

    def text(n: int) -> str:
        return " ".join(rng.choice(_WORDS) for _ in range(n))

    turns = []
    if void:
        bad = d.parse_turn(f"<think> {text(words)} </think> no action")
        turns.append(bad.to_turn(Observation(text="No action found.", status="feedback")))
    for _ in range(n_code_turns):
        raw = d.format_turn(text(words), Action(kind="code", text=f"print(df['{rng.choice(_WORDS)}'].sum())"))
        parsed = d.parse_turn(raw)
        turns.append(parsed.to_turn(Observation(text=text(words), status="ok")))
    final = d.parse_turn(d.format_turn(text(words), Action(kind="answer", text=answer)))
    turns.append(final.to_turn())
    return Trajectory(
        task_id=task_id,
        sample=sample,
        dialect=d.name,
        prompt=[
            {"role": "system", "content": "You are a data analyst."},
            {"role": "user", "content": f"Question {task_id}: {text(6)}?"},
        ],
        turns=turns,
        final_answer=answer,
        stop_reason="answer",
    )

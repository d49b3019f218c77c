"""TRL (pinned in requirements/trl.txt): SFTTrainer with assistant-only loss on DataDojo's TRL exports.

Trains 2 steps on the oracle Spider and the EnvLunch warm-up exports with a tiny Qwen2 and Qwen2.5's chat
template (with TRL's ``{% generation %}`` marks), and checks that the tokens TRL trains on are exactly the
assistant turns of each record — prompts and ``<interpreter>`` observations masked (DataMind §4).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from _fixtures import EXPORTS, FX, MANIFEST, MODEL, masked_spans, read_jsonl
from datasets import load_dataset
from transformers import AutoTokenizer
from trl import SFTConfig, SFTTrainer


@pytest.mark.parametrize("name", ["spider", "warmup"])
def test_sft_trainer_trains_on_assistant_turns_only(name: str, tmp_path: Path) -> None:
    data = EXPORTS / "trl" / f"{name}.jsonl"
    records = read_jsonl(data)
    assert len(records) == MANIFEST["written"][f"trl/{name}"] >= 1
    tok = AutoTokenizer.from_pretrained(MODEL)
    tok.chat_template = (FX / "qwen25_generation.jinja").read_text(encoding="utf-8")
    args = SFTConfig(
        output_dir=str(tmp_path),
        assistant_only_loss=True,
        max_length=None,  # whole trajectories: a cut one would lose its last assistant turns
        max_steps=2,
        per_device_train_batch_size=1,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        dataloader_num_workers=0,
        seed=0,
    )
    trainer = SFTTrainer(
        model=str(MODEL),
        args=args,
        train_dataset=load_dataset("json", data_files=str(data), split="train"),
        processing_class=tok,
    )
    # the labels TRL trains on: exactly each assistant reply and its end-of-turn token
    for i, rec in enumerate(records):
        batch = trainer.data_collator([trainer.train_dataset[i]])
        ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
        spans = masked_spans(ids, [lab != -100 for lab in labels])
        expected = [m["content"] + "<|im_end|>" for m in rec["messages"] if m["role"] == "assistant"]
        assert [tok.decode(s) for s in spans] == expected, f"{name} record {i}"
        assert all(lab == tid for lab, tid in zip(labels, ids, strict=True) if lab != -100)
    result = trainer.train()
    assert trainer.state.global_step == 2
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
    assert math.isfinite(result.training_loss)

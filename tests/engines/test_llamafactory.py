"""LLaMA-Factory (pinned in requirements/llamafactory.txt): its own loader and trainer on DataDojo's exports.

For every export kind — oracle Spider and EnvLunch warm-up trajectories, observations exported as
``observation`` or as ``human`` turns — LLaMA-Factory reads ``dataset_info.json`` and the ShareGPT file with
its own converter and tokenizes it with its ``qwen`` template (``get_dataset``); the labels must be exactly
the ``gpt`` turns (each with the template's end of turn), every ``human``/``observation`` turn and the
system prompt masked. Then ``run_exp`` (what ``llamafactory-cli train`` runs) trains 2 steps of full SFT on
the tiny Qwen2.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from _fixtures import EXPORTS, MANIFEST, MODEL, masked_spans, read_jsonl

KINDS = ["spider", "spider_human", "warmup", "warmup_human"]
LF_DIR = EXPORTS / "llamafactory"


def _args(name: str, out: Path) -> dict[str, Any]:
    return {
        "model_name_or_path": str(MODEL),
        "trust_remote_code": False,
        "stage": "sft",
        "do_train": True,
        "finetuning_type": "full",
        "dataset_dir": str(LF_DIR),
        "dataset": name,
        "template": "qwen",
        "cutoff_len": 8192,
        "overwrite_cache": True,
        "preprocessing_num_workers": None,
        "dataloader_num_workers": 0,
        "output_dir": str(out),
        "overwrite_output_dir": True,
        "per_device_train_batch_size": 1,
        "gradient_accumulation_steps": 1,
        "max_steps": 2,
        "learning_rate": 1.0e-3,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "bf16": False,
        "plot_loss": False,
    }


@pytest.mark.parametrize("name", KINDS)
def test_loader_labels_are_the_gpt_turns(name: str, tmp_path: Path) -> None:
    from llamafactory.data import get_dataset, get_template_and_fix_tokenizer
    from llamafactory.hparams import get_train_args
    from llamafactory.model import load_tokenizer

    records = read_jsonl(LF_DIR / f"{name}.jsonl")
    assert len(records) == MANIFEST["written"][f"llamafactory/{name}"] >= 1
    info = json.loads((LF_DIR / "dataset_info.json").read_text())
    assert info[name]["columns"] == {"messages": "conversations", "system": "system"}
    model_args, data_args, training_args, _, _ = get_train_args(_args(name, tmp_path))
    tokenizer_module = load_tokenizer(model_args)
    tokenizer = tokenizer_module["tokenizer"]
    template = get_template_and_fix_tokenizer(tokenizer, data_args)
    dataset = get_dataset(template, model_args, data_args, training_args, stage="sft", **tokenizer_module)
    train = dataset["train_dataset"]
    assert len(train) == len(records)
    for i, rec in enumerate(records):
        row = train[i]
        spans = masked_spans(row["input_ids"], [lab != -100 for lab in row["labels"]])
        expected = [t["value"] for t in rec["conversations"] if t["from"] == "gpt"]
        decoded = [tokenizer.decode(s) for s in spans]
        # Qwen's template ends an assistant turn with <|im_end|>\n, trained as part of the turn
        assert [d.removesuffix("<|im_end|>\n") for d in decoded] == expected, f"{name} record {i}"
        assert all(d.endswith("<|im_end|>\n") for d in decoded)
        # and nothing else is trained: the system prompt, questions and observations are all masked
        text = tokenizer.decode(row["input_ids"])
        for turn in rec["conversations"]:
            if turn["from"] != "gpt":
                assert turn["value"].strip() in text
        if rec["system"]:
            assert rec["system"].strip() in text


@pytest.mark.parametrize("name", KINDS)
def test_two_training_steps(name: str, tmp_path: Path) -> None:
    from llamafactory.train.tuner import run_exp

    out = tmp_path / "run"
    run_exp(_args(name, out))
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    losses = [h["loss"] for h in state["log_history"] if "loss" in h]
    assert len(losses) == 2 and all(math.isfinite(x) and x > 0 for x in losses)

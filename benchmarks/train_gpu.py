"""Benchmark the RL trainer: a few mixed-objective (γ·SFT + (1−γ)·DAPO) steps on synthetic trajectories.

Usage::

    python benchmarks/train_gpu.py                  # GPU if present (size "gpu"), else CPU (size "toy")
    python benchmarks/train_gpu.py --size toy       # the CI size, seconds on CPU
    python benchmarks/train_gpu.py --size gpu --steps 6 --seq-words 160

A randomly initialized Llama built from a config (no download) is trained by the real
:class:`datadojo.train.rl.RLTrainer` — tokenization with masks, old log-probs, group advantages, dynamic
sampling, micro-batched updates, checkpoints — with rollouts replayed from synthetic DataMind-format
trajectories instead of generated (so the figures measure training, not generation or sandboxes). Each
task's G rollouts alternate right / wrong answers, so every group is kept by dynamic sampling; each task
has one expert trajectory for the SFT term.

Printed: model size, tokens per step, **training tokens/s** (tokens through forward + backward in the
updates, plus the old-log-prob pass, per second of training time, steady state: the first step is
excluded as warm-up) and **peak memory** (``torch.cuda.max_memory_allocated`` on GPU, the process's peak
RSS on CPU). Sizes: ``toy`` — 2 layers × 64 hidden; ``gpu`` — 16 layers × 2048 hidden, 32k vocabulary
(≈1.1B parameters), bf16 autocast, sequences of a few thousand tokens.

``--engine verl`` (run with a Python that has verl 0.9.1, e.g. the engine job's environment) measures the
γ-mixed loss inside verl instead: DataDojo's agent loop (:mod:`datadojo.train.export.verl_agent`) rolls out
``--episodes`` real episodes (sandbox per trajectory) against a server-manager stand-in that samples from the
model with ``transformers`` ``generate`` (token ids in / out, log-probs returned); then one batch of G
rollouts per prompt plus expert rows goes through verl's own ``left_right_2_no_padding`` and
``prepare_micro_batches`` and is trained twice on the same tensors — with verl's plain DAPO loss
(``ppo_loss``, vanilla, clip 0.2 / 0.28, token-mean) and with DataDojo's γ-mixed loss
(``datadojo_mixed_loss`` + the worker's annotations) — printing training tokens/s and peak memory of each and
their ratios. Sizes: ``toy`` (CPU, seconds) and ``gpu`` (Qwen2.5-0.5B's architecture, randomly initialized
from its config — no download — bf16, 40 rows of up to 2.5k tokens; ≤ 10 minutes on one H100/H200).
``--dry-run`` prints the plan without touching torch models. **The gpu size has not been run on a GPU in this
repository** (no device was lent to the task that wrote it); the toy size runs in the engine job.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

from datadojo.jsonl import append_jsonl
from datadojo.reward.registry import RewardResult
from datadojo.train.config import OptimConfig, RLConfig
from datadojo.train.metrics import read_metrics
from datadojo.train.rl import RLTrainer
from datadojo.train.tokenize import tokenize_trajectory
from datadojo.train.toy import build_toy_model, build_toy_tokenizer, synthetic_trajectory
from datadojo.types import Task, Trajectory

SIZES: dict[str, dict[str, Any]] = {
    "toy": {
        "model": {"hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2},
        "tasks": 2,
        "group": 4,
        "micro": 4,
        "words": 12,
        "steps": 3,
    },
    "gpu": {
        "model": {
            "hidden": 2048,
            "layers": 16,
            "heads": 16,
            "kv_heads": 8,
            "vocab_size": 32768,
            "max_positions": 8192,
        },
        "tasks": 8,
        "group": 4,
        "micro": 4,
        "words": 160,
        "steps": 4,
    },
}


class SyntheticRollouts:
    """Replays synthetic trajectories: sample s of each task answers right when s is even."""

    def __init__(self, words: int, turns: int) -> None:
        self.words, self.turns = words, turns

    def generate(self, tasks: Sequence[Task], group_size: int, out: Path, *, seed: int) -> list[Trajectory]:
        rng = random.Random(seed)
        trajs = [
            synthetic_trajectory(
                t.id,
                sample=s,
                answer="42" if s % 2 == 0 else "7",
                n_code_turns=self.turns,
                words=self.words,
                rng=rng,
            )
            for t in tasks
            for s in range(group_size)
        ]
        append_jsonl(out, trajs)
        return trajs

    def sync(self, accelerator: Any, model: Any) -> None:
        """Nothing to sync: no generator holds weights."""

    def close(self) -> None:
        """Nothing to release."""


def reward(pairs: Sequence[tuple[Task, Trajectory]]) -> list[RewardResult]:
    return [RewardResult(1.0 if tr.final_answer == "42" else 0.0, tr.final_answer == "42") for _, tr in pairs]


def peak_memory_gib(device: str) -> float:
    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux reports KiB


VERL_SIZES: dict[str, dict[str, Any]] = {
    "toy": {
        "model": {
            "hidden_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "intermediate_size": 128,
            "vocab_size": 512,
        },
        "prompts": 2,
        "group": 4,
        "experts": 2,
        "prompt_len": 24,
        "response_len": 48,
        "micro": 2,
        "steps": 2,
        "episodes": 1,
        "max_new_tokens": 16,
        "dtype": "float32",
    },
    "gpu": {
        # Qwen2.5-0.5B's architecture (config values of the released checkpoint), random weights
        "model": {
            "hidden_size": 896,
            "num_hidden_layers": 24,
            "num_attention_heads": 14,
            "num_key_value_heads": 2,
            "intermediate_size": 4864,
            "vocab_size": 151936,
            "tie_word_embeddings": True,
            "rope_theta": 1000000.0,
        },
        "prompts": 8,
        "group": 4,
        "experts": 8,
        "prompt_len": 512,
        "response_len": 2048,
        "micro": 4,
        "steps": 3,
        "episodes": 4,
        "max_new_tokens": 256,
        "dtype": "bfloat16",
    },
}


def verl_plan(args: argparse.Namespace) -> dict[str, Any]:
    """What ``--engine verl`` will do (no torch work): sizes, rows, tokens, the two losses."""
    spec = VERL_SIZES[args.size or ("gpu" if torch.cuda.is_available() else "toy")]
    rows = spec["prompts"] * spec["group"] + spec["experts"]
    return {
        "engine": "verl",
        "size": args.size or ("gpu" if torch.cuda.is_available() else "toy"),
        "model": {"architecture": "Qwen2ForCausalLM", **spec["model"]},
        "rows": rows,
        "rollout_rows": spec["prompts"] * spec["group"],
        "expert_rows": spec["experts"],
        "max_tokens_per_row": spec["prompt_len"] + spec["response_len"],
        "micro_batch": spec["micro"],
        "steps": args.steps or spec["steps"],
        "episodes": spec["episodes"] if args.episodes is None else args.episodes,
        "gamma": args.gamma,
        "losses": ["verl ppo_loss (vanilla, DAPO clip 0.2/0.28, token-mean)", "datadojo_mixed_loss"],
        "dtype": spec["dtype"],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--engine", choices=["datadojo", "verl"], default="datadojo", help="datadojo train rl, or inside verl"
    )
    ap.add_argument("--dry-run", action="store_true", help="print the plan only (no model is built)")
    ap.add_argument("--episodes", type=int, default=None, help="verl: agent-loop episodes before training")
    ap.add_argument("--gamma", type=float, default=0.5, help="verl: γ of the mixed loss")
    ap.add_argument(
        "--size",
        choices=sorted(set(SIZES) | set(VERL_SIZES)),
        default=None,
        help="default: gpu with CUDA, else toy",
    )
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument(
        "--seq-words", type=int, default=None, help="words per thought / observation (sets length)"
    )
    ap.add_argument("--turns", type=int, default=3, help="code turns per synthetic trajectory")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON object only")
    args = ap.parse_args(argv)
    if args.engine == "verl":
        if args.size is not None and args.size not in VERL_SIZES:
            ap.error(f"--engine verl takes --size {' or '.join(VERL_SIZES)}")
        if not 0.0 <= args.gamma <= 1.0:
            ap.error(f"--gamma must be in [0, 1], got {args.gamma}")
        plan = verl_plan(args)
        if args.dry_run:
            print(json.dumps(plan, indent=None if args.json else 1))
            return plan
        from _verl_bench import run_verl_bench

        figures = run_verl_bench(plan, VERL_SIZES[plan["size"]])
        _print(figures, args.json, torch.cuda.is_available())
        return figures
    if args.dry_run:
        ap.error("--dry-run is for --engine verl")

    cuda = torch.cuda.is_available()
    size = args.size or ("gpu" if cuda else "toy")
    spec = SIZES[size]
    steps = args.steps or spec["steps"]
    words = args.seq_words or spec["words"]
    device = "cuda" if cuda else "cpu"

    tok = build_toy_tokenizer()
    model = build_toy_model(tok, **spec["model"])
    n_params = sum(p.numel() for p in model.parameters())
    tasks = [Task(id=f"t{i}", question="How much?") for i in range(spec["tasks"])]
    experts = [synthetic_trajectory(t.id, sample=99, n_code_turns=args.turns, words=words) for t in tasks]
    with tempfile.TemporaryDirectory() as run:
        cfg = RLConfig(
            output_dir=run,
            total_steps=steps,
            tasks_per_step=spec["tasks"],
            group_size=spec["group"],
            updates_per_step=2,
            micro_batch_size=spec["micro"],
            save_every=0,
            max_length=None,
            optim=OptimConfig(
                lr=1e-6, betas=(0.9, 0.98), weight_decay=0.01, scheduler="constant", warmup_ratio=0.0
            ),
        )
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        trainer = RLTrainer(
            cfg,
            tasks,
            reward,
            SyntheticRollouts(words, args.turns),
            experts=experts,
            model=model,
            tokenizer=tok,
        )
        t0 = time.perf_counter()
        trainer.train()
        wall = time.perf_counter() - t0
        records = read_metrics(Path(run) / "metrics.jsonl")
    # tokens through the model per step: rollouts twice (old log-probs, then the update), experts once
    lengths = [
        tokenize_trajectory(
            synthetic_trajectory("t0", sample=s, n_code_turns=args.turns, words=words), tok
        ).n_tokens
        for s in range(spec["group"])
    ]
    mean_len = sum(lengths) / len(lengths)
    per_step = mean_len * spec["tasks"] * (2 * spec["group"] + 1)
    steady = records[1:] or records
    train_s = sum(r["time_train_s"] for r in steady)
    figures = {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "size": size,
        "params_m": round(n_params / 1e6, 2),
        "steps": steps,
        "trajectories_per_step": spec["tasks"] * spec["group"],
        "mean_sequence_tokens": round(mean_len),
        "tokens_per_step": round(per_step),
        "train_tokens_per_s": round(per_step * len(steady) / train_s, 1) if train_s > 0 else None,
        "step_train_s": round(train_s / len(steady), 3),
        "peak_memory_gib": round(peak_memory_gib(device), 3),
        "wall_s": round(wall, 2),
        "last_sft_loss": records[-1]["sft_loss"],
        "last_policy_loss": records[-1]["policy_loss"],
    }
    _print(figures, args.json, cuda)
    return figures


def _print(figures: dict[str, Any], as_json: bool, cuda: bool) -> None:
    if as_json:
        print(json.dumps(figures))
    else:
        width = max(len(k) for k in figures)
        for k, v in figures.items():
            print(f"{k:<{width}}  {v}")
        if not cuda:
            print("(no CUDA device: CPU toy figures; run on a GPU for the real ones)", file=sys.stderr)


if __name__ == "__main__":
    main()

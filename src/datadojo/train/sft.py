"""Supervised fine-tuning on trajectories with environment tokens masked (``datadojo train sft``; the cold start).

DataMind §4: the SFT loss is next-token cross-entropy over the agent's own tokens only — interpreter output
and prompts are masked (:mod:`datadojo.train.tokenize`) — and a trajectory with any void turn is left out
entirely. The loss of an optimizer step is normalized over the *whole* batch (all devices, all
micro-batches; :func:`datadojo.train.losses.normalization_weights`), so ``micro_batch_size`` and the number
of GPUs change memory use, not the result.

A run folder holds ``config.json``, ``metrics.jsonl`` (one record per step: SFT loss, learning rate,
gradient norm, tokens/s), ``curves.svg``, ``checkpoints/step_N`` (resumable, see
:mod:`datadojo.train.checkpoint`), ``final/`` (the trained model and tokenizer) and ``summary.json``.
Rerunning the same command resumes from the newest checkpoint, replaying the same data order.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from datadojo.fs import write_json_atomic
from datadojo.jsonl import read_trajectories
from datadojo.train.checkpoint import CheckpointManager, save_hf_model
from datadojo.train.config import SFTConfig
from datadojo.train.losses import normalization_weights, sft_loss
from datadojo.train.metrics import MetricsLog
from datadojo.train.modeling import (
    TrainingError,
    begin_run,
    build_optimizer,
    collate,
    forward_logprobs,
    load_model_and_tokenizer,
    make_accelerator,
)
from datadojo.train.plots import DEFAULT_SFT_KEYS, write_curves
from datadojo.train.tokenize import TemplateError, TokenizedTrajectory, tokenize_trajectory
from datadojo.types import Trajectory

__all__ = ["SFTSummary", "SFTTrainer", "prepare_sft_examples", "train_sft"]

log = logging.getLogger(__name__)


@dataclass
class SFTSummary:
    """What a run did: steps, losses, data kept and dropped, tokens, time, where the model is."""

    run_dir: str
    steps: int
    resumed_from: int
    n_examples: int
    n_void: int
    n_untrainable: int
    n_truncated: int
    first_loss: float | None
    last_loss: float | None
    agent_tokens: int
    elapsed_s: float
    model_dir: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _target_tokens(example: TokenizedTrajectory) -> int:
    """Agent tokens that are predicted (the first token of a sequence never is)."""
    return sum(example.loss_mask[1:])


def prepare_sft_examples(
    trajectories: Iterable[Trajectory], tokenizer: Any, config: SFTConfig
) -> tuple[list[TokenizedTrajectory], dict[str, int]]:
    """Tokenize trajectories for SFT, dropping void ones and ones with no agent token; return counts."""
    examples: list[TokenizedTrajectory] = []
    counts = {"void": 0, "untrainable": 0, "truncated": 0}
    for traj in trajectories:
        if traj.has_void_turn:
            counts["void"] += 1
            continue
        try:
            ex = tokenize_trajectory(
                traj, tokenizer, max_length=config.max_length, end_of_turn=config.end_of_turn
            )
        except TemplateError as exc:
            if "no assistant turn" in str(exc):
                counts["untrainable"] += 1
                continue
            raise
        if _target_tokens(ex) == 0:
            counts["untrainable"] += 1
            continue
        counts["truncated"] += int(ex.truncated)
        examples.append(ex)
    return examples, counts


class SFTTrainer:
    """Masked-token SFT on transformers + accelerate (module docstring).

    ``model`` / ``tokenizer`` may be passed in (tests, notebooks); otherwise they are loaded from
    ``config.model``, a local checkpoint.
    """

    def __init__(self, config: SFTConfig, *, model: Any = None, tokenizer: Any = None) -> None:
        self.config = config
        self.run_dir = Path(config.output_dir)
        self.accelerator = make_accelerator(config.mixed_precision, seed=config.seed)
        if model is None or tokenizer is None:
            if not config.model:
                raise TrainingError(
                    "SFTConfig.model must name a local checkpoint (or pass model and tokenizer)"
                )
            model, tokenizer = load_model_and_tokenizer(
                config.model, gradient_checkpointing=config.gradient_checkpointing
            )
        self.model = model
        self.tokenizer = tokenizer
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token

    def _order(self, n: int, epoch: int) -> list[int]:
        order = list(range(n))
        random.Random(self.config.seed * 1_000_003 + epoch).shuffle(order)
        return order

    def _batches(self, n: int, total_steps: int) -> list[list[int]]:
        """The example indices of each optimizer step: epochs of seeded shuffles, cut into batches."""
        bs = self.config.batch_size
        per_epoch = math.ceil(n / bs)
        out: list[list[int]] = []
        epoch = 0
        while len(out) < total_steps:
            order = self._order(n, epoch)
            out += [order[i * bs : (i + 1) * bs] for i in range(per_epoch)]
            epoch += 1
        return out[:total_steps]

    def train(self, trajectories: Iterable[Trajectory], *, resume: bool = True) -> SFTSummary:
        """Train on ``trajectories``; resumes from the newest checkpoint in the run folder when ``resume``."""
        cfg, acc = self.config, self.accelerator
        started = time.perf_counter()
        examples, counts = prepare_sft_examples(trajectories, self.tokenizer, cfg)
        if not examples:
            raise TrainingError(
                f"no trainable trajectories ({counts['void']} void, {counts['untrainable']} without agent tokens)"
            )
        world = acc.num_processes
        if cfg.batch_size < world:
            raise TrainingError(
                f"batch_size ({cfg.batch_size}) must be at least the number of processes ({world})"
            )
        per_epoch = math.ceil(len(examples) / cfg.batch_size)
        total = cfg.max_steps or max(1, math.ceil(cfg.epochs * per_epoch))
        batches = self._batches(len(examples), total)

        model = self.model
        optimizer, scheduler = build_optimizer(model, cfg.optim, total)
        model, optimizer = acc.prepare(model, optimizer)
        acc.register_for_checkpointing(scheduler)
        ckpt = CheckpointManager(self.run_dir, keep=cfg.keep_checkpoints)
        metrics = MetricsLog(self.run_dir / "metrics.jsonl")
        cfg_dict = json.loads(json.dumps(cfg.to_dict()))
        start, _ = begin_run(acc, ckpt, self.run_dir, cfg_dict, metrics, resume=resume)

        first_loss: float | None = None
        last_loss: float | None = None
        agent_tokens = 0
        pad = self.tokenizer.pad_token_id
        for step in range(start, total):
            t0 = time.perf_counter()
            batch_idx = batches[step]
            global_items = [examples[i] for i in batch_idx]
            if cfg.normalization == "token":
                denom = sum(_target_tokens(e) for e in global_items)
            else:
                denom = sum(1 for e in global_items if _target_tokens(e) > 0)
            local = global_items[acc.process_index :: world]
            chunks = [local[i : i + cfg.micro_batch_size] for i in range(0, len(local), cfg.micro_batch_size)]
            model.train()
            step_loss = torch.zeros((), device=acc.device)
            for j, chunk in enumerate(chunks):
                tb = collate(chunk, pad).to(acc.device)
                sync = j == len(chunks) - 1
                with contextlib.nullcontext() if sync else acc.no_sync(model), acc.autocast():
                    logp, _ = forward_logprobs(model, tb)
                    mask = tb.target_mask
                    w = normalization_weights(mask, cfg.normalization, total=denom)
                    # DDP averages gradients over processes; the weights already normalize globally.
                    loss = sft_loss(logp, mask, weights=w) * world
                acc.backward(loss)
                step_loss += loss.detach() / world
            grad_norm = None
            if cfg.optim.max_grad_norm > 0:
                grad_norm = acc.clip_grad_norm_(model.parameters(), cfg.optim.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            loss_value = float(acc.reduce(step_loss, reduction="sum").item())
            first_loss = loss_value if first_loss is None else first_loss
            last_loss = loss_value
            tokens = sum(_target_tokens(e) for e in global_items)
            agent_tokens += tokens
            dt = time.perf_counter() - t0
            if acc.is_main_process:
                metrics.append(
                    {
                        "step": step + 1,
                        "epoch": round((step + 1) / per_epoch, 4),
                        "sft_loss": loss_value,
                        "lr": scheduler.get_last_lr()[0],
                        "grad_norm": None if grad_norm is None else float(grad_norm),
                        "agent_tokens": tokens,
                        "tokens": sum(e.n_tokens for e in global_items),
                        "tokens_per_s": sum(e.n_tokens for e in global_items) / dt if dt > 0 else None,
                        "time_s": round(dt, 4),
                    }
                )
            done = step + 1
            if (cfg.save_every and done % cfg.save_every == 0) or done == total:
                ckpt.save(acc, model, self.tokenizer, done, {"config": cfg_dict})
                if acc.is_main_process:
                    write_curves(metrics.read(), self.run_dir / "curves.svg", DEFAULT_SFT_KEYS, title="SFT")

        final_dir = save_hf_model(acc, model, self.tokenizer, self.run_dir / "final")
        # The losses and tokens of the whole run, from its metrics (they hold every step, resumed or not):
        # a rerun of a finished run trains no step here and must not write nulls over its summary.
        records = metrics.read() if acc.is_main_process else []
        if records:
            first_loss, last_loss = records[0].get("sft_loss"), records[-1].get("sft_loss")
            agent_tokens = sum(int(r.get("agent_tokens") or 0) for r in records)
        summary = SFTSummary(
            run_dir=str(self.run_dir),
            steps=total,
            resumed_from=start,
            n_examples=len(examples),
            n_void=counts["void"],
            n_untrainable=counts["untrainable"],
            n_truncated=counts["truncated"],
            first_loss=first_loss,
            last_loss=last_loss,
            agent_tokens=agent_tokens,
            elapsed_s=round(time.perf_counter() - started, 3),
            model_dir=str(final_dir),
        )
        if acc.is_main_process:
            write_curves(metrics.read(), self.run_dir / "curves.svg", DEFAULT_SFT_KEYS, title="SFT")
            write_json_atomic(self.run_dir / "summary.json", summary.to_dict(), indent=1, ensure_ascii=True)
        return summary


def train_sft(
    config: SFTConfig, data: str | Path | Iterable[Trajectory], *, resume: bool = True
) -> SFTSummary:
    """Run SFT on a trajectories JSONL file (or an iterable of trajectories) with ``config``."""
    trajectories = read_trajectories(data) if isinstance(data, str | Path) else data
    return SFTTrainer(config).train(trajectories, resume=resume)

"""What both trainers do with a causal LM: load it (offline), set up accelerate, pad batches, get log-probs.

Distribution is accelerate's: :func:`make_accelerator` builds an ``Accelerator`` from the environment that
``accelerate launch`` sets up (one CPU process in tests, one GPU, DDP over many, or DeepSpeed / FSDP from an
``accelerate config`` file), so one training configuration runs everywhere and this project contains no
distribution code of its own.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from datadojo.errors import DataDojoError, ResumeError
from datadojo.fs import write_json_atomic
from datadojo.jsonl import repair_tail
from datadojo.runs import settings_diff
from datadojo.train.losses import token_entropy, token_logprobs
from datadojo.train.tokenize import TokenizedTrajectory

log = logging.getLogger(__name__)

__all__ = [
    "TokenBatch",
    "TrainingError",
    "TrainingResumeError",
    "begin_run",
    "collate",
    "forward_logprobs",
    "load_model_and_tokenizer",
    "make_accelerator",
    "pad_stack",
    "repair_run_ledgers",
]


def make_accelerator(mixed_precision: str = "auto", *, seed: int | None = None) -> Any:
    """An ``accelerate.Accelerator``; ``auto`` mixed precision is bf16 on a bf16-capable GPU, else none."""
    try:
        from accelerate import Accelerator
        from accelerate.utils import set_seed
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("training needs accelerate: pip install 'datadojo[train]'") from exc
    if mixed_precision == "auto":
        mixed_precision = "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "no"
    acc = Accelerator(mixed_precision=mixed_precision)
    if seed is not None:
        set_seed(seed)
    return acc


def load_model_and_tokenizer(
    path: str | os.PathLike[str],
    *,
    gradient_checkpointing: bool = False,
    trust_remote_code: bool = False,
) -> tuple[Any, Any]:
    """A causal LM and its tokenizer from a *local* checkpoint (never downloaded), in float32.

    Weights stay float32 (master weights); accelerate's mixed precision casts the compute. The tokenizer
    must have a chat template (tokenization with masks needs it) and gets a pad token (EOS) if it has none.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = os.fspath(path)
    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code)
        import transformers

        major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
        dtype_kw = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"  # renamed in transformers 4.56
        model = AutoModelForCausalLM.from_pretrained(
            path, local_files_only=True, trust_remote_code=trust_remote_code, **{dtype_kw: torch.float32}
        )
    except (OSError, ValueError) as exc:
        raise TrainingError(f"cannot load checkpoint {path!r} (offline, local files only): {exc}") from exc
    if not getattr(tok, "chat_template", None):
        raise TrainingError(f"{path}: the tokenizer has no chat template; set one in tokenizer_config.json")
    if tok.pad_token_id is None:
        if tok.eos_token is None:
            raise TrainingError(f"{path}: the tokenizer has neither a pad nor an eos token")
        tok.pad_token = tok.eos_token
    if gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    return model, tok


class TrainingError(DataDojoError, ValueError):
    """A training run that cannot start or go on: a checkpoint that cannot be loaded, a tokenizer without a
    chat template, a task list or output folder that does not fit the run; the message names it."""


@dataclass
class TokenBatch:
    """Right-padded ``(B, T)`` tensors: ids, attention mask and loss mask (1 = agent token)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor

    @property
    def target_mask(self) -> torch.Tensor:
        """The loss mask aligned with predicted tokens (position t predicts token t + 1): ``(B, T - 1)``."""
        return self.loss_mask[:, 1:]

    def to(self, device: Any) -> TokenBatch:
        return TokenBatch(
            self.input_ids.to(device), self.attention_mask.to(device), self.loss_mask.to(device)
        )


def collate(examples: Sequence[TokenizedTrajectory], pad_id: int) -> TokenBatch:
    """Pad tokenized trajectories on the right into one :class:`TokenBatch`."""
    if not examples:
        raise ValueError("cannot collate an empty batch")
    length = max(len(e.input_ids) for e in examples)
    ids = torch.full((len(examples), length), pad_id, dtype=torch.long)
    attn = torch.zeros((len(examples), length), dtype=torch.long)
    mask = torch.zeros((len(examples), length), dtype=torch.float32)
    for i, e in enumerate(examples):
        n = len(e.input_ids)
        ids[i, :n] = torch.tensor(e.input_ids, dtype=torch.long)
        attn[i, :n] = 1
        mask[i, :n] = torch.tensor(e.loss_mask, dtype=torch.float32)
    return TokenBatch(ids, attn, mask)


def pad_stack(rows: Sequence[torch.Tensor], length: int, value: float = 0.0) -> torch.Tensor:
    """Stack 1-D tensors into ``(len(rows), length)``, right-padded with ``value`` (or cut)."""
    out = torch.full((len(rows), length), value, dtype=torch.float32, device=rows[0].device if rows else None)
    for i, r in enumerate(rows):
        n = min(length, r.shape[0])
        out[i, :n] = r[:n]
    return out


def forward_logprobs(
    model: Any, batch: TokenBatch, *, entropy: bool = False, entropy_grad: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs of the batch's own tokens, ``(B, T - 1)``, and optionally per-token entropies.

    Gradients flow when the caller has them enabled. Entropies carry a gradient only with ``entropy_grad``
    (GRPO's entropy bonus); as a metric they are computed without building a graph.
    """
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
    logits = out.logits[:, :-1]
    logp = token_logprobs(logits, batch.input_ids[:, 1:])
    ent = None
    if entropy and entropy_grad:
        ent = token_entropy(logits)
    elif entropy:
        with torch.no_grad():  # a metric: chunked along the sequence so only a slice of (T, V) is live
            d = logits.detach()
            ent = torch.cat([token_entropy(d[:, i : i + 1024]) for i in range(0, d.shape[1], 1024)], dim=1)
    return logp, ent


def build_optimizer(model: Any, optim: Any, total_steps: int) -> tuple[Any, Any]:
    """AdamW over the trainable parameters and a transformers LR scheduler over ``total_steps`` updates.

    ``optim`` is an :class:`~datadojo.train.config.OptimConfig`; warm-up is ``warmup_ratio`` of the steps.
    """
    from transformers import get_scheduler

    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    optimizer = torch.optim.AdamW(
        params, lr=optim.lr, betas=tuple(optim.betas), eps=optim.eps, weight_decay=optim.weight_decay
    )
    scheduler = get_scheduler(
        optim.scheduler,
        optimizer,
        num_warmup_steps=int(optim.warmup_ratio * total_steps),
        num_training_steps=total_steps,
    )
    return optimizer, scheduler


class TrainingResumeError(TrainingError, ResumeError):
    """The checkpoint was made with other settings (the run kit's one :class:`~datadojo.errors.ResumeError`)."""


#: Settings that may change between resumes: step budgets, checkpoint cadence, the output folder.
RESUME_FREE = frozenset(
    {"epochs", "max_steps", "total_steps", "save_every", "keep_checkpoints", "output_dir", "sampler"}
)


def check_resumable(saved: dict[str, Any], current: dict[str, Any], where: str) -> None:
    """Refuse to resume a run whose configuration changed in a way that changes its meaning.

    Step budgets, checkpoint cadence and the output folder may change between runs (:data:`RESUME_FREE`);
    anything else (the model, the data order seed, the loss, the batch sizes) would make the resumed run a
    different one. The comparison is the run kit's (:func:`datadojo.runs.settings_diff`, nested settings by
    dotted key), and the message names each setting with its old and new value.
    """
    keep = lambda d: {k: v for k, v in d.items() if k not in RESUME_FREE}  # noqa: E731
    changed = settings_diff(keep(saved), keep(current))
    if changed:
        names = sorted({k.split(".")[0] for k, _, _ in changed})
        detail = "; ".join(f"{k}: was {a!r}, now {b!r}" for k, a, b in changed[:8])
        raise TrainingResumeError(
            f"{where}: cannot resume: the configuration differs from the checkpoint's in "
            f"{', '.join(names)} ({detail}); use a new output folder or the original settings"
        )


def begin_run(
    acc: Any, ckpt: Any, run_dir: Path, cfg_dict: dict[str, Any], metrics: Any, *, resume: bool
) -> tuple[int, dict[str, Any] | None]:
    """Resume a trainer's run from its latest checkpoint, or start it afresh; shared by SFT and RL.

    Returns the first step to run and the loaded checkpoint state (``None`` for a fresh start). Refuses a
    folder that holds checkpoints when not resuming (they would be overwritten) and a checkpoint whose
    configuration changed meaning (:func:`check_resumable`). The main process writes ``config.json``
    (atomically), repairs the run's ledgers (:func:`repair_run_ledgers`) and drops metric records past the
    resumed step.
    """
    start, state = 0, None
    latest = ckpt.latest() if resume else None
    if latest is not None:
        check_resumable(latest[1].get("config", {}), cfg_dict, str(latest[0]))
        state = ckpt.load(acc, latest[0])
        start = int(state["step"])
        log.info("resuming from %s (step %d)", latest[0], start)
    elif ckpt.list():
        raise TrainingError(f"{run_dir}: holds checkpoints; resume, or choose a new output folder")
    if acc.is_main_process:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(run_dir / "config.json", cfg_dict, indent=1, ensure_ascii=True)
        repair_run_ledgers(run_dir)
        metrics.truncate_after(start)
    return start, state


def repair_run_ledgers(run_dir: Path) -> int:
    """Cut the unterminated last line a kill left in each JSONL ledger a training run owns
    (``metrics.jsonl``, RL's ``rollouts/*.jsonl``); return the bytes removed.

    Why here, at every start: the ledgers were repaired only when a step appended to them, so a rerun that
    found the run finished (a kill after the last checkpoint, then a second kill) trained nothing and left
    ``metrics.jsonl`` ending in a torn record that every strict reader of the run then rejected.
    """
    ledgers = [run_dir / "metrics.jsonl", *sorted((run_dir / "rollouts").glob("*.jsonl"))]
    return sum(repair_tail(path) for path in ledgers)

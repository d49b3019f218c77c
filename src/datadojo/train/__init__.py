"""Training: SFT with environment masking, DAPO, the γ-mixed objective, void-turn masking, GRPO; exports.

Modules (the ones marked * need the ``train`` extra: torch, transformers, accelerate):

* :mod:`~datadojo.train.losses` * — the losses as pure tensor functions (DataMind §4, EnvLunch §4);
* :mod:`~datadojo.train.schedules` — γ cosine 0.9 → 0.05 (optional hold at the peak, fixed mode);
* :mod:`~datadojo.train.tokenize` — trajectories → ids + loss mask through the model's chat template;
* :mod:`~datadojo.train.registry` * — policy losses by name (``dapo``, ``grpo``, yours);
* :mod:`~datadojo.train.config` — :class:`SFTConfig`, :class:`RLConfig` with the papers' defaults;
* :mod:`~datadojo.train.sft` *, :mod:`~datadojo.train.rl` * — the trainers (transformers + accelerate);
* :mod:`~datadojo.train.rollouts`, :mod:`~datadojo.train.rewards` — online rollouts and their rewards;
* :mod:`~datadojo.train.metrics`, :mod:`~datadojo.train.plots`, :mod:`~datadojo.train.checkpoint` — run
  folders: per-step JSONL metrics, an SVG of the curves, resumable checkpoints;
* :mod:`~datadojo.train.export` — LLaMA-Factory, TRL and verl;
* :mod:`~datadojo.train.toy` — tiny local models and tokenizers for tests and benchmarks.

``docs/training.md`` shows the commands. The names below are imported lazily, so ``import datadojo.train``
works without torch.
"""

from __future__ import annotations

from datadojo.lazy import lazy_exports

__all__ = [
    "GammaSchedule",
    "RLConfig",
    "RLTrainer",
    "SFTConfig",
    "SFTTrainer",
    "tokenize_trajectory",
    "train_sft",
]

_WHERE = {
    "GammaSchedule": "schedules",
    "RLConfig": "config",
    "SFTConfig": "config",
    "RLTrainer": "rl",
    "SFTTrainer": "sft",
    "train_sft": "sft",
    "tokenize_trajectory": "tokenize",
}


__getattr__, __dir__ = lazy_exports("datadojo.train", _WHERE, globals())

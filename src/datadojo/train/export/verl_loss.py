"""DataMind's DAPO surrogate for verl's policy-loss registry (``actor.policy_loss.loss_mode=datadojo_dapo``).

verl selects its actor's policy loss by name from ``verl.trainer.ppo.core_algos.POLICY_LOSS_REGISTRY``;
:func:`register` adds :func:`compute_policy_loss_datadojo_dapo` there under :data:`LOSS_NAME`. It is
:func:`datadojo.train.losses.dapo_loss` — decoupled clip ε_low = 0.2 / ε_high = 0.28 (or verl's
``clip_ratio_low`` / ``clip_ratio_high``), with verl's aggregation modes mapped onto DataDojo's
normalisations (``token-mean`` → token, ``seq-mean-token-mean`` → sequence, ``seq-mean-token-sum`` →
sequence_sum) — so both engines train on one implementation of the formula.

verl runs the actor in Ray worker processes, so the registration must happen *there*: pass
``register`` as Ray's ``worker_process_setup_hook`` (see ``docs/training.md``) or import this module from a
``sitecustomize`` on the workers' path. What verl's batch does not carry — DataMind's per-group token
normalisation (group ids) and the SFT term on expert trajectories — is available in ``datadojo train rl``.
"""

from __future__ import annotations

from typing import Any

import torch

from datadojo.train.losses import DAPO_EPS_HIGH, DAPO_EPS_LOW, Normalization, dapo_loss

__all__ = ["AGG_MODES", "LOSS_NAME", "compute_policy_loss_datadojo_dapo", "register"]

LOSS_NAME = "datadojo_dapo"

#: verl's ``loss_agg_mode`` values and the DataDojo normalisation each one is.
AGG_MODES: dict[str, Normalization] = {
    "token-mean": "token",
    "seq-mean-token-mean": "sequence",
    "seq-mean-token-sum": "sequence_sum",
}


def _cfg(config: Any, name: str, default: float) -> float:
    if config is None:
        return default
    value = config.get(name, None) if isinstance(config, dict) else getattr(config, name, None)
    return default if value is None else float(value)


def compute_policy_loss_datadojo_dapo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_log_probs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl's ``PolicyLossFn`` signature → ``(loss, metrics)``; ``advantages`` are per token, as verl passes them."""
    if loss_agg_mode not in AGG_MODES:
        raise ValueError(f"loss_agg_mode {loss_agg_mode!r} is not one of {', '.join(AGG_MODES)}")
    out = dapo_loss(
        log_prob,
        old_log_prob,
        advantages,
        response_mask,
        eps_low=_cfg(config, "clip_ratio_low", DAPO_EPS_LOW),
        eps_high=_cfg(config, "clip_ratio_high", DAPO_EPS_HIGH),
        normalization=AGG_MODES[loss_agg_mode],
    )
    metrics = {
        "actor/pg_loss": out.metrics["pg_loss"].item(),
        "actor/pg_clipfrac": out.metrics["clip_frac"].item(),
        "actor/ppo_ratio_mean": out.metrics["ratio_mean"].item(),
    }
    return out.loss, metrics


def register() -> bool:
    """Register the loss in verl's registry (idempotent); ``False`` when verl is not installed."""
    try:
        from verl.trainer.ppo import core_algos
    except ImportError:
        return False
    registry = getattr(core_algos, "POLICY_LOSS_REGISTRY", None)
    if registry is not None and LOSS_NAME in registry:
        return True
    core_algos.register_policy_loss(LOSS_NAME)(compute_policy_loss_datadojo_dapo)
    return True

"""DataMind's DAPO surrogate for verl's policy-loss registry (``actor.policy_loss.loss_mode=datadojo_dapo``).

verl selects its actor's policy loss by name from ``verl.trainer.ppo.core_algos.POLICY_LOSS_REGISTRY``;
:func:`register` adds :func:`compute_policy_loss_datadojo_dapo` there under :data:`LOSS_NAME`. The per-token
term is :func:`datadojo.train.losses.dapo_loss`'s — DataMind §4's decoupled clip −min(r·A, clip(r, 1−ε_low,
1+ε_high)·A) with ε_low = 0.2 / ε_high = 0.28 (or verl's ``clip_ratio_low`` / ``clip_ratio_high``) — so both
engines train on one implementation of the formula.

How verl 0.9 calls a policy loss (``verl/workers/utils/losses.py:ppo_loss``, once per micro-batch)::

    policy_loss_fn(old_log_prob=..., log_prob=..., advantages=..., response_mask=...,
                   loss_agg_mode=config.loss_agg_mode, config=config, rollout_is_weights=...)

after filling ``config.global_batch_info`` with ``dp_size``, ``batch_num_tokens`` (valid tokens of the
whole mini-batch, all ranks), ``global_batch_size`` (its sequences) and ``loss_scale_factor``. Each
micro-batch's loss is backpropagated as it is, so it must already be normalized by the *global* counts:
:func:`verl_agg_weights` reproduces verl's ``agg_loss`` for every ``loss_agg_mode`` (``token-mean``,
``token-sum``, ``seq-mean-token-sum``, ``seq-mean-token-sum-norm``, ``seq-mean-token-mean``), so the
micro-batch losses add up to the mini-batch loss and gradient accumulation is scaled as verl's own losses
are. ``rollout_is_weights`` (verl's rollout-correction importance weights) multiply the per-token loss, as in
verl's ``vanilla`` loss. The return value is ``(loss, metrics)`` with float metrics, what verl 0.9 expects.

Differences from verl's ``vanilla`` loss (verl's DAPO recipe), on purpose: no dual clip (``clip_ratio_c``,
a lower bound on −r·A for A < 0 when r > clip_ratio_c, 3 by default) and no clamp of the log-ratio to ±20 —
DataMind's formula has neither. Where every ratio is below ``clip_ratio_c`` the two losses are equal (the
engine test checks this inside verl).

verl runs the actor in Ray worker processes, so the registration must happen *there*: pass
``register`` as Ray's ``worker_process_setup_hook`` (see ``docs/training.md``) or import this module from a
``sitecustomize`` on the workers' path. A registered policy loss sees no group ids, so it can only
aggregate as verl's ``loss_agg_mode`` says (``token-mean`` is ``batch_token_mean``); DataMind's per-query
aggregation (``query_token_mean``, the default of the shared ``loss_aggregation`` setting) and the SFT term
on expert trajectories are in the ``datadojo_mixed`` trainer's loss (:mod:`~datadojo.train.export.verl_mixed`)
and in ``datadojo train rl``.
"""

from __future__ import annotations

from typing import Any

import torch

from datadojo.train.losses import DAPO_EPS_HIGH, DAPO_EPS_LOW, dapo_loss, masked_mean

__all__ = ["AGG_MODES", "LOSS_NAME", "compute_policy_loss_datadojo_dapo", "register", "verl_agg_weights"]

LOSS_NAME = "datadojo_dapo"

#: verl's ``loss_agg_mode`` values (``verl.trainer.ppo.core_algos.agg_loss``).
AGG_MODES: tuple[str, ...] = (
    "token-mean",
    "token-sum",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
    "seq-mean-token-mean",
)


def _get(config: Any, name: str, default: Any = None) -> Any:
    if config is None:
        return default
    value = config.get(name, None) if hasattr(config, "get") else getattr(config, name, None)
    return default if value is None else value


def _count(value: Any) -> float | None:
    if value is None:
        return None
    return float(value.item()) if isinstance(value, torch.Tensor) else float(value)


def verl_agg_weights(
    mask: torch.Tensor,
    loss_agg_mode: str,
    *,
    dp_size: int = 1,
    batch_num_tokens: Any = None,
    global_batch_size: Any = None,
    loss_scale_factor: Any = None,
) -> torch.Tensor:
    """Per-token weights ``w`` with ``Σ w·ℓ`` = verl's ``agg_loss(ℓ, mask, loss_agg_mode, **global_batch_info)``.

    Counts left ``None`` are the micro-batch's own (verl's single-process behaviour); with ``dp_size > 1``
    they are required, as in verl. ``seq-mean-token-sum-norm`` divides by ``loss_scale_factor`` (default: the
    padded response length).
    """
    if loss_agg_mode not in AGG_MODES:
        raise ValueError(f"loss_agg_mode {loss_agg_mode!r} is not one of {', '.join(AGG_MODES)}")
    if mask.dim() != 2:
        raise ValueError(f"response_mask must be (batch, tokens), got shape {tuple(mask.shape)}")
    m = mask.float()
    dp = float(dp_size or 1)
    if loss_agg_mode == "token-sum":
        return m * dp
    if loss_agg_mode == "token-mean":
        tokens = _count(batch_num_tokens)
        if tokens is None:
            if dp > 1:
                raise ValueError("global_batch_info.batch_num_tokens is required when dp_size > 1")
            tokens = float(m.sum().item())
        return m * (dp / tokens) if tokens > 0 else torch.zeros_like(m)
    per_seq = m.sum(dim=-1, keepdim=True)
    n_seq = _count(global_batch_size)
    if n_seq is None:
        if dp > 1:
            raise ValueError("global_batch_info.global_batch_size is required when dp_size > 1")
        n_seq = float((per_seq > 0).sum().item())
    if n_seq <= 0:
        return torch.zeros_like(m)
    if loss_agg_mode == "seq-mean-token-mean":
        return m / (per_seq + 1e-8) * (dp / n_seq)  # verl's own +1e-8 in the per-sequence token mean
    w = m * (dp / n_seq)
    if loss_agg_mode == "seq-mean-token-sum-norm":
        scale = _count(loss_scale_factor)
        w = w / (scale if scale is not None else float(m.shape[-1]))
    return w


def compute_policy_loss_datadojo_dapo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, dict[str, float]]:
    """verl's ``PolicyLossFn`` → ``(loss, metrics)``: DataMind's DAPO term aggregated as verl's ``agg_loss``.

    ``advantages`` are per token, as verl passes them; ``config`` is verl's actor config (``clip_ratio``,
    ``clip_ratio_low`` / ``clip_ratio_high``, ``global_batch_info``). Other keyword arguments that a later verl
    passes (e.g. ``rollout_log_probs`` in 0.5) are accepted and ignored.
    """
    clip = _get(config, "clip_ratio")
    eps_low = float(_get(config, "clip_ratio_low", clip if clip is not None else DAPO_EPS_LOW))
    eps_high = float(_get(config, "clip_ratio_high", clip if clip is not None else DAPO_EPS_HIGH))
    info = dict(_get(config, "global_batch_info", None) or {})
    weights = verl_agg_weights(
        response_mask,
        loss_agg_mode,
        dp_size=int(info.get("dp_size") or 1),
        batch_num_tokens=info.get("batch_num_tokens"),
        global_batch_size=info.get("global_batch_size"),
        loss_scale_factor=info.get("loss_scale_factor"),
    ).to(log_prob.dtype)
    if rollout_is_weights is not None:
        weights = weights * rollout_is_weights.to(log_prob.dtype)
    out = dapo_loss(
        log_prob, old_log_prob, advantages, response_mask, eps_low=eps_low, eps_high=eps_high, weights=weights
    )
    with torch.no_grad():
        m = response_mask.to(log_prob.dtype)
        ppo_kl = masked_mean((old_log_prob - log_prob).detach(), m)
    metrics = {
        "actor/pg_clipfrac": float(out.metrics["clip_frac"].item()),
        "actor/ppo_kl": float(ppo_kl.item()),
        "actor/ppo_ratio_mean": float(out.metrics["ratio_mean"].item()),
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

r"""DataMind's γ-mixed objective on one verl micro-batch, as a pure function of tensors (no verl import).

DataMind §4 ("Dynamic SFT+RL Objective and γ Scheduling") trains on
:math:`\mathcal L = \gamma\,\mathcal L_{SFT} + (1-\gamma)\,\mathcal L_{DAPO}` where the SFT term is the masked
NLL of *expert* trajectories and the DAPO term the decoupled-clip surrogate on the policy's own rollouts, γ
cosine-annealed 0.9 → 0.05 (:class:`~datadojo.train.schedules.GammaSchedule`), trajectories with a void turn
masked out of both terms ("Void Turn Filtering") and groups whose G rollouts are all right or all wrong dropped
from the RL term (dynamic sampling, :func:`~datadojo.train.losses.dynamic_sampling_keep`).

In verl both kinds of rows travel in one batch (the expert rows are replayed by the ``datadojo_expert`` agent
loop, :mod:`datadojo.train.export.verl_mixed`), and verl's engine cuts each mini-batch into micro-batches and
back-propagates each micro-batch's loss on its own. For the sum of the micro-batch losses to equal the
mini-batch loss, each term must be normalized by its count over the *whole mini-batch on all ranks* —
:func:`mixed_counts` computes them once per mini-batch (verl's worker all-reduces them), and
:func:`gamma_mixed_loss` then turns each micro-batch into its exact share, with the formulas of
:mod:`datadojo.train.losses` (``sft_loss``, ``dapo_loss``, ``mixed_objective``) — one implementation for
``datadojo train rl`` and verl. ``dp_size`` multiplies the loss as verl's own losses do (FSDP averages
gradients over ranks).

Choices where the paper is silent (the same as ``datadojo train rl``): both terms are token means (the SFT
term over expert tokens, the DAPO term over the kept rollouts' tokens, DAPO's token-level normalization);
a mini-batch without expert rows contributes :math:`(1-\gamma)\mathcal L_{DAPO}` (the SFT term is 0, not
renormalized), one whose rollouts were all filtered contributes :math:`\gamma\mathcal L_{SFT}`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from datadojo.train.losses import (
    DAPO_EPS_HIGH,
    DAPO_EPS_LOW,
    PolicyLossOutput,
    apply_void_mask,
    dapo_loss,
    dynamic_sampling_keep,
    masked_mean,
    mixed_objective,
    normalization_weights,
    sft_loss,
)

__all__ = ["MixedCounts", "gamma_mixed_loss", "group_keep", "mixed_counts", "term_masks"]


@dataclass(frozen=True)
class MixedCounts:
    """Token counts of a whole mini-batch (all ranks): the denominators of the two terms."""

    sft_tokens: float
    policy_tokens: float


def _rows(flag: torch.Tensor | None, batch: int, device: torch.device, default: bool) -> torch.Tensor:
    if flag is None:
        return torch.full((batch,), default, dtype=torch.bool, device=device)
    flag = flag.reshape(-1) if flag.dim() > 1 and flag.shape[-1] == 1 else flag
    if flag.shape != (batch,):
        raise ValueError(f"a per-row flag must have shape ({batch},), got {tuple(flag.shape)}")
    return flag.to(device).bool()


def term_masks(
    response_mask: torch.Tensor,
    expert: torch.Tensor | None = None,
    *,
    void: torch.Tensor | None = None,
    keep: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sft_mask, policy_mask)``: which tokens enter the SFT term and which the DAPO term.

    ``expert`` marks expert rows (SFT only); ``void`` rows are masked out of both (DataMind §4); ``keep``
    (one per row, from :func:`group_keep`) drops the rollouts of filtered groups from the DAPO term.
    """
    if response_mask.dim() != 2:
        raise ValueError(f"response_mask must be (batch, tokens), got shape {tuple(response_mask.shape)}")
    b, dev = response_mask.shape[0], response_mask.device
    m = response_mask.float()
    m = apply_void_mask(m, _rows(void, b, dev, False))
    is_expert = _rows(expert, b, dev, False)
    kept = _rows(keep, b, dev, True)
    sft = m * is_expert.float().unsqueeze(1)
    policy = m * (~is_expert & kept).float().unsqueeze(1)
    return sft, policy


def mixed_counts(
    response_mask: torch.Tensor,
    expert: torch.Tensor | None = None,
    *,
    void: torch.Tensor | None = None,
    keep: torch.Tensor | None = None,
) -> MixedCounts:
    """The two token counts of (this rank's part of) a mini-batch; a trainer sums them over ranks."""
    sft, policy = term_masks(response_mask, expert, void=void, keep=keep)
    return MixedCounts(float(sft.sum().item()), float(policy.sum().item()))


def group_keep(
    groups: Sequence[Hashable], correct: torch.Tensor, expert: torch.Tensor | None = None
) -> torch.Tensor:
    """DAPO's dynamic sampling per row: a rollout group is kept when 0 < #correct < G (DataMind §4).

    ``groups`` are verl's prompt ``uid`` of each row; expert rows are always kept (they only feed the SFT
    term) and are not counted in any rollout group.
    """
    n = len(groups)
    if correct.shape != (n,):
        raise ValueError(f"correct must have shape ({n},), got {tuple(correct.shape)}")
    is_expert = _rows(expert, n, correct.device, False)
    keep = torch.ones(n, dtype=torch.bool, device=correct.device)
    live = [i for i in range(n) if not bool(is_expert[i])]
    if live:
        ids: dict[Hashable, int] = {}
        gid = torch.tensor([ids.setdefault(groups[i], len(ids)) for i in live], device=correct.device)
        keep[live] = dynamic_sampling_keep(correct[live].bool(), gid)
    return keep


def gamma_mixed_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    gamma: float,
    counts: MixedCounts,
    expert: torch.Tensor | None = None,
    void: torch.Tensor | None = None,
    keep: torch.Tensor | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    eps_low: float = DAPO_EPS_LOW,
    eps_high: float = DAPO_EPS_HIGH,
    dp_size: int = 1,
) -> PolicyLossOutput:
    """One micro-batch's share of γ·L_SFT + (1−γ)·L_DAPO of its mini-batch (module docstring).

    ``counts`` are the mini-batch's (all ranks, :func:`mixed_counts` summed); ``rollout_is_weights`` (verl's
    rollout-correction weights) multiply the DAPO term's per-token loss. Metrics: ``sft_loss`` and
    ``pg_loss`` (this micro-batch's shares of each term), ``clip_frac``, ``ratio_mean``, ``sft_tokens``,
    ``policy_tokens``.
    """
    sft_mask, pol_mask = term_masks(response_mask, expert, void=void, keep=keep)
    dtype = log_prob.dtype
    scale = float(dp_size or 1)
    zero = log_prob.sum() * 0.0  # keeps the graph when a term is empty
    if counts.sft_tokens > 0 and gamma > 0:
        w_sft = normalization_weights(sft_mask, "token", total=counts.sft_tokens).to(dtype) * scale
        sft = sft_loss(log_prob, sft_mask, weights=w_sft)
    else:
        sft = zero
    if counts.policy_tokens > 0 and gamma < 1:
        w_pol = normalization_weights(pol_mask, "token", total=counts.policy_tokens).to(dtype) * scale
        if rollout_is_weights is not None:
            w_pol = w_pol * rollout_is_weights.to(dtype)
        pol = dapo_loss(
            log_prob, old_log_prob, advantages, pol_mask, eps_low=eps_low, eps_high=eps_high, weights=w_pol
        )
        pg, metrics = pol.loss, dict(pol.metrics)
    else:
        pg = zero
        metrics = {"clip_frac": torch.zeros(()), "ratio_mean": torch.ones(())}
    loss = mixed_objective(sft, pg, gamma)
    with torch.no_grad():
        metrics.update(
            {
                "sft_loss": sft.detach(),
                "pg_loss": pg.detach(),
                "sft_tokens": sft_mask.sum(),
                "policy_tokens": pol_mask.sum(),
                "ppo_kl": masked_mean((old_log_prob - log_prob).detach(), pol_mask),
            }
        )
    return PolicyLossOutput(loss, metrics)

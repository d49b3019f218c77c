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

How the DAPO term averages its tokens is the setting ``datadojo train rl`` reads too
(:data:`~datadojo.train.config.LossAggregation`): ``query_token_mean`` (default, DataMind §4's 1/Σ_i|y*_i|
inside the expectation over queries) is a token mean within each query's group — verl's prompt ``uid`` —
then the mean over the mini-batch's kept groups, so a group's size and the number of groups are counted
over the whole mini-batch (:func:`policy_group_tokens`, :attr:`MixedCounts.policy_groups`) and a group split
over micro-batches or ranks is weighed whole; ``batch_token_mean`` is the token mean over all kept rollout
tokens of the mini-batch. Choices where the paper is silent (the same as ``datadojo train rl``): the SFT
term is the token mean over expert tokens; a mini-batch without expert rows contributes :math:`(1-\gamma)\mathcal L_{DAPO}` (the SFT term is 0, not
renormalized), one whose rollouts were all filtered contributes :math:`\gamma\mathcal L_{SFT}`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import torch

from datadojo.train.config import DEFAULT_LOSS_AGGREGATION
from datadojo.train.losses import (
    DAPO_EPS_HIGH,
    DAPO_EPS_LOW,
    PolicyLossOutput,
    aggregation_normalization,
    apply_void_mask,
    dapo_loss,
    dynamic_sampling_keep,
    masked_mean,
    mixed_objective,
    normalization_weights,
    sft_loss,
)

__all__ = [
    "MixedCounts",
    "gamma_mixed_loss",
    "group_keep",
    "mixed_counts",
    "policy_group_tokens",
    "row_group_tokens",
    "term_masks",
]


@dataclass(frozen=True)
class MixedCounts:
    """Counts of a whole mini-batch (all ranks): the denominators of the two terms.

    ``policy_groups`` — rollout groups (prompt ``uid``) with a token in the DAPO term — is the outer
    denominator of ``query_token_mean``; ``policy_tokens`` that of ``batch_token_mean``.
    """

    sft_tokens: float
    policy_tokens: float
    policy_groups: float = 0.0


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
    m = response_mask if response_mask.is_floating_point() else response_mask.float()
    m = apply_void_mask(m, _rows(void, b, dev, False))
    is_expert = _rows(expert, b, dev, False)
    kept = _rows(keep, b, dev, True)
    sft = m * is_expert.to(m.dtype).unsqueeze(1)
    policy = m * (~is_expert & kept).to(m.dtype).unsqueeze(1)
    return sft, policy


def policy_group_tokens(groups: Sequence[Hashable], policy_mask: torch.Tensor) -> dict[Hashable, float]:
    """Tokens each rollout group (verl's ``uid``) puts into the DAPO term, from ``term_masks``' policy mask.

    A trainer with several ranks merges these per-rank dictionaries by summing per group.
    """
    if len(groups) != policy_mask.shape[0]:
        raise ValueError(f"{len(groups)} group ids for {policy_mask.shape[0]} rows")
    out: dict[Hashable, float] = {}
    for g, n in zip(groups, policy_mask.sum(dim=1).tolist(), strict=True):
        out[g] = out.get(g, 0.0) + float(n)
    return out


def row_group_tokens(groups: Sequence[Hashable], totals: Mapping[Hashable, float]) -> torch.Tensor:
    """Each row's whole-group token count (``totals`` from :func:`policy_group_tokens`, merged over ranks)."""
    return torch.tensor([float(totals.get(g, 0.0)) for g in groups], dtype=torch.float64)


def mixed_counts(
    response_mask: torch.Tensor,
    expert: torch.Tensor | None = None,
    *,
    void: torch.Tensor | None = None,
    keep: torch.Tensor | None = None,
    groups: Sequence[Hashable] | None = None,
) -> MixedCounts:
    """The counts of (this rank's part of) a mini-batch; a trainer sums the token counts over ranks and
    counts ``policy_groups`` from the merged :func:`policy_group_tokens` (a group may span ranks)."""
    sft, policy = term_masks(response_mask, expert, void=void, keep=keep)
    n_groups = 0.0
    if groups is not None:
        n_groups = float(sum(1 for v in policy_group_tokens(groups, policy).values() if v > 0))
    return MixedCounts(float(sft.sum().item()), float(policy.sum().item()), n_groups)


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
    aggregation: str = DEFAULT_LOSS_AGGREGATION,
    group_tokens: torch.Tensor | None = None,
) -> PolicyLossOutput:
    """One micro-batch's share of γ·L_SFT + (1−γ)·L_DAPO of its mini-batch (module docstring).

    ``counts`` are the mini-batch's (all ranks, :func:`mixed_counts` summed); ``aggregation`` is how the DAPO
    term averages its tokens (``query_token_mean`` needs ``group_tokens``, each row's whole-group token count
    from :func:`row_group_tokens`, and ``counts.policy_groups``); ``rollout_is_weights`` (verl's
    rollout-correction weights) multiply the DAPO term's per-token loss. Metrics: ``sft_loss`` and
    ``pg_loss`` (this micro-batch's shares of each term), ``clip_frac``, ``ratio_mean``, ``sft_tokens``,
    ``policy_tokens``.
    """
    # weights in at least float32, in float64 when the log-probs are (1/Σ|y| is not exact in float32)
    precision = torch.promote_types(log_prob.dtype, torch.float32)
    sft_mask, pol_mask = term_masks(response_mask.to(precision), expert, void=void, keep=keep)
    dtype = log_prob.dtype
    scale = float(dp_size or 1)
    zero = log_prob.sum() * 0.0  # keeps the graph when a term is empty
    if counts.sft_tokens > 0 and gamma > 0:
        w_sft = normalization_weights(sft_mask, "token", total=counts.sft_tokens).to(dtype) * scale
        sft = sft_loss(log_prob, sft_mask, weights=w_sft)
    else:
        sft = zero
    mode = aggregation_normalization(aggregation)
    if counts.policy_tokens > 0 and gamma < 1:
        if mode == "token":
            w_pol = normalization_weights(pol_mask, "token", total=counts.policy_tokens)
        else:
            if group_tokens is None or counts.policy_groups <= 0:
                raise ValueError(
                    f"loss aggregation {aggregation!r} needs each row's group token count (group_tokens) and "
                    "the mini-batch's group count (counts.policy_groups)"
                )
            w_pol = normalization_weights(
                pol_mask, "group", total=counts.policy_groups, group_tokens=group_tokens.reshape(-1)
            )
        w_pol = w_pol.to(dtype) * scale
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

r"""Training losses as pure functions on tensors: SFT, DAPO, GRPO, the γ-mixed objective, and their helpers.

Every function here takes per-token tensors already aligned with the *predicted* tokens (shape ``(B, T)``:
``logp[b, t]`` is log π(y_t | y_<t) of the token at position ``t`` of sequence ``b``) and a ``mask`` of the
same shape that is 1 on the agent's own tokens and 0 on prompts, environment observations and padding
(DataMind §4: "any tokens emitted by the environment are discarded when computing the objective"). Nothing
here knows about models, tokenizers or trainers, which is what lets the tests check each formula against a
hand-computed example.

The formulas (DataMind §4, "Supervised Fine-Tuning Loss Design" … "Void Turn Filtering"; EnvLunch §4,
"Training details"):

* **SFT** — :math:`\mathcal L_{SFT} = -\mathbb E_{(x,y)\sim D}\big[\sum_t \mathbb I(y_t\notin o)\log\pi_\theta(y_t|x,y_{<t})\big]`
  (:func:`sft_loss`).
* **DAPO** — :math:`\mathcal L_{DAPO} = -\mathbb E\big[\frac{1}{\sum_i|y_i|}\sum_i\sum_t
  \min(r_{i,t}\hat A_{i,t}, \mathrm{clip}(r_{i,t}, 1-\varepsilon_{low}, 1+\varepsilon_{high})\hat A_{i,t})\big]`
  with :math:`\varepsilon_{low}=0.2`, :math:`\varepsilon_{high}=0.28`, token-level normalization over all tokens
  of the group, :math:`\hat A_i = (R_i-\mathrm{mean}(R))/\mathrm{std}(R)` over the group
  (:func:`group_advantages`), and the dynamic-sampling constraint :math:`0 < |\{y_i \text{ correct}\}| < G`
  (:func:`dynamic_sampling_keep`) (:func:`dapo_loss`).
* **Mixed** — :math:`\mathcal L = \gamma\mathcal L_{SFT} + (1-\gamma)\mathcal L_{DAPO}` (:func:`mixed_objective`;
  γ from :mod:`datadojo.train.schedules`).
* **Void turns** — a trajectory with any void turn contributes nothing to either term (:func:`apply_void_mask`).
* **GRPO as EnvLunch trains it** — the clipped surrogate with ε = 0.2 / ε_high = 0.28, truncated importance
  sampling clipped to [0.5, 1.5], a low-variance KL loss to the initial policy with coefficient 0.01 and an
  entropy coefficient of 0.001 (:func:`grpo_loss`).

Aggregation of the DAPO term, one setting for every trainer (:data:`datadojo.train.config.LossAggregation`): ``query_token_mean``
(the default) is DataMind §4's formula as written — the 1/Σ_i|y*_i| sits *inside* the expectation over
queries, so each query's group is a token mean and the mini-batch loss is the mean over its queries;
``batch_token_mean`` is the token mean over every kept rollout token of the mini-batch (DAPO's reference
code, verl's ``token-mean``), which weighs a query by how many tokens its rollouts wrote. ``datadojo train
rl`` (``RLConfig.loss_aggregation``) and the γ-mixed loss inside verl (``+datadojo.loss_aggregation``) read
the same names and give the same number on the same mini-batch.

Normalization, and why it is a separate step: a trainer that cannot fit a whole batch in one forward pass
splits it into micro-batches, but DAPO's 1/Σ|y_i| runs over the whole group. :func:`normalization_weights`
turns a mask into per-token weights computed once over the whole batch; slicing them per micro-batch makes
the micro-batch losses sum exactly to the full-batch loss. Every loss accepts such ``weights``; without them
it computes its own from the ``mask`` it was given (the formula as written).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch

from datadojo.train.config import LOSS_AGGREGATIONS

__all__ = [
    "DAPO_EPS_HIGH",
    "DAPO_EPS_LOW",
    "GRPO_ENTROPY_COEF",
    "GRPO_KL_COEF",
    "TIS_HIGH",
    "TIS_LOW",
    "Normalization",
    "PolicyLossOutput",
    "aggregation_normalization",
    "apply_void_mask",
    "dapo_loss",
    "dynamic_sampling_keep",
    "group_advantages",
    "grpo_loss",
    "low_var_kl",
    "masked_mean",
    "mixed_objective",
    "normalization_count",
    "normalization_weights",
    "sft_loss",
    "token_entropy",
    "token_logprobs",
]

#: DataMind §4 (from DAPO): the lower and upper clipping bounds of the importance ratio.
DAPO_EPS_LOW = 0.2
DAPO_EPS_HIGH = 0.28
#: EnvLunch §4: truncated importance sampling clipped to [0.5, 1.5].
TIS_LOW = 0.5
TIS_HIGH = 1.5
#: EnvLunch §4: "a low-variance KL loss against the initial policy with coefficient 0.01".
GRPO_KL_COEF = 0.01
#: EnvLunch §4: "an entropy coefficient of 0.001".
GRPO_ENTROPY_COEF = 0.001

Normalization = Literal["token", "group", "sequence", "sequence_sum"]

#: Each :data:`~datadojo.train.config.LossAggregation` as the :func:`normalization_weights` mode computing it.
_AGGREGATION_MODES: dict[str, Normalization] = {"query_token_mean": "group", "batch_token_mean": "token"}
assert set(_AGGREGATION_MODES) == set(LOSS_AGGREGATIONS)

# verl / slime clamp the log-ratio and the k3 value of the low-variance KL for numerical safety.
_KL_LOG_RATIO_CLAMP = 20.0
_KL_VALUE_CLAMP = 10.0


# --------------------------------------------------------------------------------------------- helpers


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log π(target) for each position: ``logits`` ``(B, T, V)`` already aligned with ``targets`` ``(B, T)``.

    For a causal LM pass ``logits[:, :-1]`` and ``input_ids[:, 1:]``. Computed as the target logit minus
    the log-sum-exp (in float32), which avoids materializing a second ``(B, T, V)`` log-softmax tensor.
    """
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"logits {tuple(logits.shape)} do not match targets {tuple(targets.shape)}")
    logits = logits.float()
    picked = torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the next-token distribution at each position, ``(B, T, V)`` → ``(B, T)`` (nats)."""
    logits = logits.float()
    logz = torch.logsumexp(logits, dim=-1, keepdim=True)
    p = torch.exp(logits - logz)
    return (logz.squeeze(-1) - (p * logits).sum(-1)).clamp_min(0.0)


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over positions where ``mask`` is non-zero (0 when the mask is empty)."""
    m = mask.to(values.dtype)
    return (values * m).sum() / m.sum().clamp_min(1.0)


def _check_same_shape(**tensors: torch.Tensor | None) -> torch.Size:
    shape: torch.Size | None = None
    first = ""
    for name, t in tensors.items():
        if t is None:
            continue
        if shape is None:
            shape, first = t.shape, name
        elif t.shape != shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)} but {first} has {tuple(shape)}")
    assert shape is not None
    return shape


def _default_groups(group_ids: torch.Tensor | None, batch: int, device: torch.device) -> torch.Tensor:
    if group_ids is None:
        return torch.zeros(batch, dtype=torch.long, device=device)
    if group_ids.shape != (batch,):
        raise ValueError(f"group_ids must have shape ({batch},), got {tuple(group_ids.shape)}")
    return group_ids.to(device=device, dtype=torch.long)


def _trajectory_groups(values: torch.Tensor, group_ids: torch.Tensor | None, what: str) -> torch.Tensor:
    """The group id of each trajectory, for the data-side functions that take one value per trajectory.

    ``values`` (named ``what`` in the error) must be 1-D; groups are as in :func:`_default_groups` (all
    trajectories in one group when ``group_ids`` is None).
    """
    if values.dim() != 1:
        raise ValueError(f"{what} must be 1-D (one per trajectory), got shape {tuple(values.shape)}")
    return _default_groups(group_ids, values.shape[0], values.device)


def aggregation_normalization(aggregation: str) -> Normalization:
    """The :func:`normalization_weights` mode of a loss aggregation name (a clear error otherwise)."""
    try:
        return _AGGREGATION_MODES[aggregation]
    except KeyError:
        raise ValueError(
            f"unknown loss aggregation {aggregation!r}; use {' or '.join(LOSS_AGGREGATIONS)}"
        ) from None


def normalization_count(
    mask: torch.Tensor, mode: Normalization, *, group_ids: torch.Tensor | None = None
) -> float:
    """The outer denominator of ``mode`` on (this process's part of) a batch: unmasked tokens for ``token``,
    groups with an unmasked token for ``group``, sequences with one otherwise.

    A trainer sums it over processes and passes it as :func:`normalization_weights`' ``total``.
    """
    if mask.dim() != 2:
        raise ValueError(f"mask must be (batch, tokens), got shape {tuple(mask.shape)}")
    per_seq = mask.to(torch.float64).sum(dim=1)
    if mode == "token":
        return float(per_seq.sum().item())
    if mode == "group":
        groups = _default_groups(group_ids, mask.shape[0], mask.device)
        return float(len({int(g) for g, n in zip(groups.tolist(), per_seq.tolist(), strict=True) if n > 0}))
    if mode in ("sequence", "sequence_sum"):
        return float((per_seq > 0).sum().item())
    raise ValueError(f"unknown normalization {mode!r}; use token, group, sequence or sequence_sum")


def normalization_weights(
    mask: torch.Tensor,
    mode: Normalization,
    *,
    group_ids: torch.Tensor | None = None,
    total: float | None = None,
    group_tokens: torch.Tensor | None = None,
) -> torch.Tensor:
    """Per-token weights ``w`` such that a loss is ``Σ_{b,t} w[b,t] · ℓ[b,t]`` under normalization ``mode``.

    * ``token`` — 1 / (number of unmasked tokens in the batch): a token mean over everything (DAPO's original
      implementation, verl's ``token-mean``, our SFT default);
    * ``group`` — 1 / (n_groups · Σ_{i∈g}|y_i|): DataMind's DAPO formula, a token mean *within* each group
      (the 1/Σ_i|y*_i| of §4), then the mean over groups (the expectation over queries);
    * ``sequence`` — 1 / (n_seq · |y_i|): each sequence's token mean, then the mean over sequences (GRPO as
      Shao et al. write it, slime's default ``sum_of_sample_mean``);
    * ``sequence_sum`` — 1 / n_seq: the per-sequence *sum* averaged over sequences (DataMind's SFT formula
      read literally, −E[Σ_t …]).

    Only groups / sequences with at least one unmasked token count. ``total`` replaces the count in the
    outer denominator (tokens for ``token``, groups for ``group``, sequences otherwise): a trainer passes the
    count over the whole batch (or over all ranks) so that micro-batch losses add up to the batch loss.
    For ``group``, ``group_tokens`` (one value per row: the tokens of the row's whole group, when a group is
    split over micro-batches or ranks) replaces the group sizes counted in ``mask``. The weights keep a
    floating ``mask``'s precision (float64 in, float64 out).
    """
    if mask.dim() != 2:
        raise ValueError(f"mask must be (batch, tokens), got shape {tuple(mask.shape)}")
    m = mask if mask.is_floating_point() else mask.float()
    per_seq = m.sum(dim=1)
    if mode == "token":
        denom = float(per_seq.sum().item()) if total is None else float(total)
        return m / denom if denom > 0 else torch.zeros_like(m)
    if mode in ("sequence", "sequence_sum"):
        live = per_seq > 0
        n = float(live.sum().item()) if total is None else float(total)
        if n <= 0:
            return torch.zeros_like(m)
        if mode == "sequence_sum":
            return m / n
        return m / (per_seq.clamp_min(1.0).unsqueeze(1) * n)
    if mode == "group":
        if group_tokens is not None:
            if group_tokens.shape != per_seq.shape:
                raise ValueError(
                    f"group_tokens must have shape ({m.shape[0]},), got {tuple(group_tokens.shape)}"
                )
            if total is None:
                raise ValueError("group_tokens (whole-group sizes) need the batch's group count as total")
            seq_group_tokens = group_tokens.to(device=m.device, dtype=m.dtype)
            n = float(total)
        else:
            groups = _default_groups(group_ids, m.shape[0], m.device)
            uniq, inverse = torch.unique(groups, return_inverse=True)
            sizes = torch.zeros(len(uniq), device=m.device, dtype=m.dtype).index_add_(0, inverse, per_seq)
            n = float((sizes > 0).sum().item()) if total is None else float(total)
            seq_group_tokens = sizes[inverse]
        if n <= 0:
            return torch.zeros_like(m)
        return m / (seq_group_tokens.clamp_min(1.0).unsqueeze(1) * n)
    raise ValueError(f"unknown normalization {mode!r}; use token, group, sequence or sequence_sum")


# --------------------------------------------------------------------------------------------- data-side


def group_advantages(
    rewards: torch.Tensor,
    group_ids: torch.Tensor | None = None,
    *,
    eps: float = 1e-6,
    unbiased: bool = True,
) -> torch.Tensor:
    r"""Group-normalized advantages :math:`\hat A_i = (R_i - \mathrm{mean}_g R)/(\mathrm{std}_g R + \epsilon)`.

    DataMind §4 (DAPO) and GRPO normalize each trajectory's scalar reward within the G trajectories sampled
    for the same query. ``unbiased`` uses the sample standard deviation (Bessel's correction), as verl's and
    TRL's GRPO implementations do (``torch.std``); a group of one, or of equal rewards, gets advantage 0.
    """
    groups = _trajectory_groups(rewards, group_ids, "rewards")
    r = rewards.float()
    out = torch.zeros_like(r)
    for g in torch.unique(groups):
        idx = groups == g
        vals = r[idx]
        if vals.numel() < 2:
            continue
        std = vals.std(unbiased=unbiased)
        if std.item() == 0.0:  # equal rewards: no signal (and no 0/0 when eps is 0)
            continue
        out[idx] = (vals - vals.mean()) / (std + eps)
    return out


def dynamic_sampling_keep(correct: torch.Tensor, group_ids: torch.Tensor | None = None) -> torch.Tensor:
    r"""Which trajectories belong to a group kept by DAPO's dynamic sampling: :math:`0 < \#correct < G`.

    DataMind §4: a group whose G rollouts are all equivalent to the expert answer, or none is, carries no
    learning signal (every advantage is 0) and is dropped from the RL term. ``correct`` is one boolean per
    trajectory; the result is one boolean per trajectory (the same for every member of a group).
    """
    groups = _trajectory_groups(correct, group_ids, "correct")
    c = correct.bool()
    keep = torch.zeros_like(c)
    for g in torch.unique(groups):
        idx = groups == g
        k, n = int(c[idx].sum().item()), int(idx.sum().item())
        keep[idx] = 0 < k < n
    return keep


def apply_void_mask(mask: torch.Tensor, void: torch.Tensor) -> torch.Tensor:
    """Zero the whole loss mask of every trajectory that contains a void turn (DataMind §4, "Void Turn Filtering").

    ``void`` is one boolean per sequence. The masked trajectory then contributes nothing to the numerator
    *or* the token-count denominator of either loss term.
    """
    if void.shape != mask.shape[:1]:
        raise ValueError(f"void must have shape ({mask.shape[0]},), got {tuple(void.shape)}")
    return mask * (~void.bool()).to(mask.dtype).unsqueeze(1)


# --------------------------------------------------------------------------------------------- losses


@dataclass
class PolicyLossOutput:
    """A policy loss and detached diagnostics (all scalar tensors).

    ``metrics`` always holds ``pg_loss`` (the surrogate term alone), ``clip_frac`` (share of agent tokens
    whose clipped branch was taken), ``ratio_mean``; GRPO adds ``kl``, ``entropy`` and ``tis_clip_frac``.
    """

    loss: torch.Tensor
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)


def sft_loss(
    logp: torch.Tensor,
    mask: torch.Tensor,
    *,
    normalization: Normalization = "token",
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    r"""Masked negative log-likelihood of the agent's tokens (DataMind §4, :math:`\mathcal L_{SFT}`).

    ``mask`` is :math:`\mathbb I(y_t \notin o)` (and 0 on prompts and padding). ``normalization="token"``
    (default) divides by the number of agent tokens; ``"sequence_sum"`` is the formula read literally (sum
    over each trajectory's tokens, mean over trajectories). We default to the token mean because the mixed
    objective adds this term to DAPO's token-level mean: with per-sequence sums the SFT term would be
    ~|y| times larger and γ = 0.05 would still leave SFT dominating, contrary to §4's "95% of the gradient
    comes from RL" at the end of training.
    """
    _check_same_shape(logp=logp, mask=mask, weights=weights)
    w = normalization_weights(mask, normalization) if weights is None else weights
    return -(logp * w * mask.to(logp.dtype)).sum()


def _clipped_surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float,
    eps_high: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-token −min(r·A, clip(r)·A), the clipped-branch indicator and the ratio r."""
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1).expand_as(logp)
    ratio = torch.exp(logp - old_logp.detach())
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    was_clipped = clipped < unclipped
    return per_token, was_clipped, ratio


def _check_eps(eps_low: float, eps_high: float) -> None:
    if not (0 <= eps_low < 1) or eps_high < 0:
        raise ValueError(f"need 0 <= eps_low < 1 and eps_high >= 0, got {eps_low}, {eps_high}")


def dapo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    group_ids: torch.Tensor | None = None,
    eps_low: float = DAPO_EPS_LOW,
    eps_high: float = DAPO_EPS_HIGH,
    normalization: Normalization = "group",
    weights: torch.Tensor | None = None,
) -> PolicyLossOutput:
    r"""DAPO's clipped surrogate with decoupled clip and token-level normalization (DataMind §4).

    ``advantages`` is one value per sequence (``(B,)``, from :func:`group_advantages`) or per token.
    ``group_ids`` names each sequence's query group; with the default ``normalization="group"`` the loss is
    the token mean within each group, averaged over groups — the 1/Σ_i|y*_i| of the formula under the
    expectation over queries (no ``group_ids``: the whole batch is one group). Dynamic sampling and
    void-turn masking are applied by the caller through ``mask`` (see :func:`dynamic_sampling_keep`,
    :func:`apply_void_mask`).
    """
    _check_same_shape(logp=logp, old_logp=old_logp, mask=mask, weights=weights)
    _check_eps(eps_low, eps_high)
    per_token, was_clipped, ratio = _clipped_surrogate(logp, old_logp, advantages, eps_low, eps_high)
    m = mask.to(logp.dtype)
    w = normalization_weights(mask, normalization, group_ids=group_ids) if weights is None else weights
    loss = (per_token * w * m).sum()
    with torch.no_grad():
        metrics = {
            "pg_loss": loss.detach(),
            "clip_frac": masked_mean(was_clipped.float(), m),
            "ratio_mean": masked_mean(ratio.detach(), m),
        }
    return PolicyLossOutput(loss, metrics)


def low_var_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    r"""Schulman's k3 estimator of KL(π_θ ‖ π_ref) per token: :math:`e^{\delta} - \delta - 1`, δ = log π_ref − log π_θ.

    Non-negative, unbiased when tokens are sampled from π_θ, and of low variance — the "low-variance KL"
    EnvLunch §4 names (``low_var_kl`` in verl and slime, whose clamps of δ to ±20 and of the value to
    ±10 are kept for numerical safety).
    """
    delta = torch.clamp(ref_logp.detach() - logp, -_KL_LOG_RATIO_CLAMP, _KL_LOG_RATIO_CLAMP)
    return torch.clamp(torch.exp(delta) - delta - 1.0, -_KL_VALUE_CLAMP, _KL_VALUE_CLAMP)


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    ref_logp: torch.Tensor | None = None,
    rollout_logp: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    group_ids: torch.Tensor | None = None,
    eps_low: float = DAPO_EPS_LOW,
    eps_high: float = DAPO_EPS_HIGH,
    tis_low: float = TIS_LOW,
    tis_high: float = TIS_HIGH,
    tis_mode: Literal["truncate", "mask"] = "truncate",
    kl_coef: float = GRPO_KL_COEF,
    entropy_coef: float = GRPO_ENTROPY_COEF,
    normalization: Normalization = "sequence",
    weights: torch.Tensor | None = None,
) -> PolicyLossOutput:
    r"""GRPO as EnvLunch §4 trains it: clipped surrogate × truncated IS + β·KL(π‖π_ref) − c·entropy.

    Per agent token:

    .. math:: \ell_t = -\min(r_t A, \mathrm{clip}(r_t, 1-\varepsilon, 1+\varepsilon_{high})A)\cdot
              \mathrm{clip}(e^{\log\pi_{old} - \log\pi_{rollout}}, 0.5, 1.5)
              + \beta\,k_3(\pi_\theta, \pi_{ref}) - c\,H_t

    with ε = 0.2, ε_high = 0.28, β = 0.01 (``kl_coef``), c = 0.001 (``entropy_coef``). The truncated
    importance weight (slime's TIS; detached) corrects for the gap between the engine that sampled the
    rollout and the trainer's recomputed old log-probs; without ``rollout_logp`` it is 1 (the sampler *is*
    the old policy). ``tis_mode="mask"`` is masked importance sampling (MIS): a token whose weight leaves
    [0.5, 1.5] is dropped from the surrogate instead of clipped to the band. ``ref_logp`` (the initial policy's log-probs) is required when ``kl_coef > 0`` and
    ``entropy`` (per-token entropies, with gradient) when ``entropy_coef > 0``. The default
    ``normalization="sequence"`` is GRPO's own 1/G Σ_i 1/|o_i| Σ_t.
    """
    _check_same_shape(
        logp=logp,
        old_logp=old_logp,
        mask=mask,
        ref_logp=ref_logp,
        rollout_logp=rollout_logp,
        entropy=entropy,
        weights=weights,
    )
    _check_eps(eps_low, eps_high)
    if not 0 < tis_low <= 1 <= tis_high:
        raise ValueError(f"need 0 < tis_low <= 1 <= tis_high, got [{tis_low}, {tis_high}]")
    if kl_coef > 0 and ref_logp is None:
        raise ValueError("kl_coef > 0 needs ref_logp (log-probs under the initial policy)")
    if entropy_coef > 0 and entropy is None:
        raise ValueError("entropy_coef > 0 needs per-token entropy")
    per_token, was_clipped, ratio = _clipped_surrogate(logp, old_logp, advantages, eps_low, eps_high)
    m = mask.to(logp.dtype)
    metrics: dict[str, torch.Tensor] = {}
    if rollout_logp is not None:
        tis = torch.exp(old_logp.detach() - rollout_logp.detach())
        if tis_mode == "mask":  # MIS: drop the tokens whose ratio leaves the band instead of clipping it
            tis_w = torch.where((tis >= tis_low) & (tis <= tis_high), tis, torch.zeros_like(tis))
        elif tis_mode == "truncate":
            tis_w = torch.clamp(tis, tis_low, tis_high)
        else:
            raise ValueError(f"tis_mode must be truncate or mask, got {tis_mode!r}")
        per_token = per_token * tis_w
        metrics["tis_clip_frac"] = masked_mean((tis_w != tis).float(), m)
    else:
        metrics["tis_clip_frac"] = torch.zeros((), device=logp.device)
    w = normalization_weights(mask, normalization, group_ids=group_ids) if weights is None else weights
    pg = (per_token * w * m).sum()
    loss = pg
    if kl_coef > 0:
        assert ref_logp is not None
        kl = (low_var_kl(logp, ref_logp) * w * m).sum()
        loss = loss + kl_coef * kl
        metrics["kl"] = kl.detach()
    if entropy_coef > 0:
        assert entropy is not None
        ent = (entropy * w * m).sum()
        loss = loss - entropy_coef * ent
        metrics["entropy"] = ent.detach()
    with torch.no_grad():
        metrics["pg_loss"] = pg.detach()
        metrics["clip_frac"] = masked_mean(was_clipped.float(), m)
        metrics["ratio_mean"] = masked_mean(ratio.detach(), m)
    return PolicyLossOutput(loss, metrics)


def mixed_objective(sft: torch.Tensor, policy: torch.Tensor, gamma: float) -> torch.Tensor:
    r"""DataMind §4: :math:`\mathcal L_{Final} = \gamma\,\mathcal L_{SFT} + (1-\gamma)\,\mathcal L_{DAPO}`, γ ∈ [0, 1].

    For groups removed by dynamic sampling the caller leaves them out of ``policy`` (its mean runs over the
    kept groups only), so those queries contribute the SFT term alone, as §4 prescribes.
    """
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    return gamma * sft + (1.0 - gamma) * policy

"""The losses against hand-computed examples (DataMind §4; EnvLunch §4), gradients, masks and micro-batching."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from datadojo.train.losses import (  # noqa: E402
    DAPO_EPS_HIGH,
    DAPO_EPS_LOW,
    GRPO_ENTROPY_COEF,
    GRPO_KL_COEF,
    TIS_HIGH,
    TIS_LOW,
    apply_void_mask,
    dapo_loss,
    dynamic_sampling_keep,
    group_advantages,
    grpo_loss,
    low_var_kl,
    masked_mean,
    mixed_objective,
    normalization_weights,
    sft_loss,
    token_entropy,
    token_logprobs,
)


def t(x: object, **kw: object) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float32, **kw)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------ helpers


def test_token_logprobs_and_entropy_match_the_definitions() -> None:
    logits = t([[[0.0, math.log(3.0)], [math.log(2.0), 0.0]]])  # probs [1/4, 3/4], [2/3, 1/3]
    targets = torch.tensor([[1, 1]])
    lp = token_logprobs(logits, targets)
    assert lp.tolist()[0] == pytest.approx([math.log(3 / 4), math.log(1 / 3)], abs=1e-6)
    ent = token_entropy(logits)
    h1 = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    h2 = -(2 / 3 * math.log(2 / 3) + 1 / 3 * math.log(1 / 3))
    assert ent.tolist()[0] == pytest.approx([h1, h2], abs=1e-6)
    with pytest.raises(ValueError, match="do not match"):
        token_logprobs(logits, torch.tensor([[1]]))


def test_group_advantages_by_hand() -> None:
    # rewards [1, 0, 0, 0]: mean 0.25, sample std sqrt((0.5625 + 3 * 0.0625) / 3) = 0.5
    a = group_advantages(t([1, 0, 0, 0]), eps=0.0)
    assert a.tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5])
    # two groups are normalized separately; equal rewards and singletons give 0
    a = group_advantages(t([1, 0, 2, 2, 5]), torch.tensor([0, 0, 1, 1, 2]), eps=0.0)
    s = math.sqrt(0.5)  # sample std of [1, 0]
    assert a.tolist() == pytest.approx([0.5 / s, -0.5 / s, 0.0, 0.0, 0.0])
    # population std when asked: [1, 0, 0, 0] has std sqrt(0.1875)
    a = group_advantages(t([1, 0, 0, 0]), eps=0.0, unbiased=False)
    assert a[0].item() == pytest.approx(0.75 / math.sqrt(0.1875))


def test_dynamic_sampling_keeps_only_mixed_groups() -> None:
    correct = torch.tensor([1, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1], dtype=torch.bool)
    groups = torch.tensor([0] * 4 + [1] * 4 + [2] * 4)
    keep = dynamic_sampling_keep(correct, groups)
    assert keep.tolist() == [False] * 8 + [True] * 4


def test_per_trajectory_inputs_are_checked() -> None:
    """Rewards and correctness flags are one per trajectory; group ids, when given, one per trajectory too."""
    with pytest.raises(ValueError, match=r"rewards must be 1-D \(one per trajectory\), got shape \(2, 2\)"):
        group_advantages(torch.zeros(2, 2))
    with pytest.raises(ValueError, match=r"correct must be 1-D \(one per trajectory\), got shape \(2, 2\)"):
        dynamic_sampling_keep(torch.zeros(2, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"group_ids must have shape \(3,\)"):
        group_advantages(t([1, 0, 1]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"group_ids must have shape \(2,\)"):
        dynamic_sampling_keep(torch.tensor([True, False]), torch.tensor([0]))


def test_normalization_weights_by_hand() -> None:
    mask = t([[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0]])
    groups = torch.tensor([0, 0, 1, 1])
    tok = normalization_weights(mask, "token")
    assert tok.sum().item() == pytest.approx(1.0) and tok[0, 0].item() == pytest.approx(1 / 6)
    grp = normalization_weights(mask, "group", group_ids=groups)
    # group 0 has 4 tokens, group 1 has 2; two groups: 1/(2*4) and 1/(2*2)
    assert grp[0, 0].item() == pytest.approx(1 / 8) and grp[3, 0].item() == pytest.approx(1 / 4)
    assert grp.sum().item() == pytest.approx(1.0)
    seq = normalization_weights(mask, "sequence")
    # three live sequences of 3, 1 and 2 tokens (the empty one does not count)
    assert seq[0, 0].item() == pytest.approx(1 / 9) and seq[1, 0].item() == pytest.approx(1 / 3)
    ssum = normalization_weights(mask, "sequence_sum")
    assert ssum[0, 0].item() == pytest.approx(1 / 3)
    assert normalization_weights(mask, "token", total=12)[0, 0].item() == pytest.approx(1 / 12)
    assert normalization_weights(torch.zeros(2, 3), "group").sum().item() == 0.0


def test_normalization_weights_edge_cases_by_hand() -> None:
    # an update with no agent token at all (every rollout void or filtered) weighs nothing: zeros, never NaN
    for mode in ("token", "group", "sequence", "sequence_sum"):
        w = normalization_weights(torch.zeros(2, 3), mode)  # type: ignore[arg-type]
        assert w.tolist() == [[0.0] * 3] * 2, mode
        # a single agent token carries the whole loss in every mode
        one = normalization_weights(t([[0, 1, 0], [0, 0, 0]]), mode)  # type: ignore[arg-type]
        assert one.tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]], mode
    # a group whose rollouts are all masked is not a group: one live group of 2 tokens → 1/2 each
    grp = normalization_weights(t([[1, 1], [0, 0]]), "group", group_ids=torch.tensor([0, 1]))
    assert grp.tolist() == [[0.5, 0.5], [0.0, 0.0]]
    # groups of 1 and 2 tokens: 1/(2·1) and 1/(2·2)
    grp = normalization_weights(t([[1, 0], [1, 1]]), "group", group_ids=torch.tensor([0, 1]))
    assert grp.tolist() == [[0.5, 0.0], [0.25, 0.25]]


def test_masked_mean_by_hand() -> None:
    assert masked_mean(t([3.0, 5.0, 7.0]), t([0, 1, 1])).item() == pytest.approx(6.0)
    assert masked_mean(t([3.0, 5.0]), t([0, 1])).item() == pytest.approx(5.0)  # one token: itself
    assert masked_mean(t([3.0, 5.0]), t([0, 0])).item() == 0.0  # empty mask: 0, not NaN


def test_default_advantage_epsilon_is_grpos() -> None:
    # verl's / TRL's ε = 1e-6 in (R − mean)/(std + ε); it matters when rewards differ by little.
    # rewards [0, 2e-6]: sample std √2·1e-6, so A = ∓1e-6 / (√2·1e-6 + 1e-6) = ∓(√2 − 1)
    a = group_advantages(torch.tensor([0.0, 2e-6], dtype=torch.float64))
    assert a.tolist() == pytest.approx([-(math.sqrt(2) - 1), math.sqrt(2) - 1], rel=1e-6)


def test_dynamic_sampling_keeps_a_group_with_a_single_correct_rollout() -> None:
    # 0 < #correct < G: one correct of four is the most informative group, not a filtered one
    keep = dynamic_sampling_keep(torch.tensor([True, False, False, False, True, True, True, False]),
                                 torch.tensor([0] * 4 + [1] * 4))  # fmt: skip
    assert keep.tolist() == [True] * 8


# ------------------------------------------------------------------------------------------------ SFT


def test_sft_loss_by_hand_and_masked_tokens_get_no_gradient() -> None:
    logp = t([[-1.0, -2.0, -3.0], [-0.5, -4.0, -9.0]], requires_grad=True)
    mask = t([[1, 1, 0], [0, 1, 0]])
    loss = sft_loss(logp, mask)
    assert loss.item() == pytest.approx((1 + 2 + 4) / 3)  # token mean over the 3 agent tokens
    loss.backward()
    assert logp.grad is not None
    assert logp.grad.flatten().tolist() == pytest.approx([-1 / 3, -1 / 3, 0.0, 0.0, -1 / 3, 0.0])
    # §4's formula read literally: per-trajectory sums, averaged over trajectories
    assert sft_loss(logp.detach(), mask, normalization="sequence_sum").item() == pytest.approx(
        ((1 + 2) + 4) / 2
    )


# ------------------------------------------------------------------------------------------------ DAPO


def _dapo_example() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    # sequence 0: ratios 1.5 and 0.9, advantage +1; sequence 1: ratio 0.7 (+ a masked token), advantage -1
    old = t([[0.0, 0.0], [0.0, 0.0]])
    logp = torch.log(t([[1.5, 0.9], [0.7, 2.0]])).requires_grad_(True)
    adv = t([1.0, -1.0])
    mask = t([[1, 1], [1, 0]])
    return logp, old, adv, mask


def test_dapo_loss_by_hand() -> None:
    logp, old, adv, mask = _dapo_example()
    out = dapo_loss(logp, old, adv, mask)
    # min(rA, clip(r, 0.8, 1.28)A): 1.5 -> 1.28 (clipped), 0.9 -> 0.9, 0.7·(-1) -> min(-0.7, -0.8) = -0.8 (clipped)
    assert out.loss.item() == pytest.approx(-(1.28 + 0.9 - 0.8) / 3)
    assert out.metrics["clip_frac"].item() == pytest.approx(2 / 3)
    out.loss.backward()
    assert logp.grad is not None
    # only the unclipped token carries gradient: d(-rA/3)/dlogp = -r·A/3 = -0.3; the masked token gets none
    assert logp.grad.flatten().tolist() == pytest.approx([0.0, -0.3, 0.0, 0.0], abs=1e-6)


def test_dapo_upper_clip_is_decoupled_from_the_lower_one() -> None:
    old = t([[0.0, 0.0]])
    logp = torch.log(t([[1.25, 0.75]]))
    pos = dapo_loss(logp, old, t([1.0]), t([[1, 1]]))
    # with symmetric PPO (0.2/0.2) the 1.25 ratio would be clipped at 1.2; ε_high = 0.28 leaves it alone.
    # For A > 0 the lower bound never binds: min(0.75, clip(0.75) = 0.8) = 0.75.
    assert pos.loss.item() == pytest.approx(-(1.25 + 0.75) / 2)
    sym = dapo_loss(logp, old, t([1.0]), t([[1, 1]]), eps_high=0.2)
    assert sym.loss.item() == pytest.approx(-(1.2 + 0.75) / 2)


def test_dapo_group_normalization_by_hand() -> None:
    # group 0: 3 tokens at ratio 1 with A=+1; group 1: 1 token, A=-1 → mean over groups of per-group means
    old = torch.zeros(2, 3)
    logp = torch.zeros(2, 3)
    mask = t([[1, 1, 1], [1, 0, 0]])
    out = dapo_loss(logp, old, t([1.0, -1.0]), mask, group_ids=torch.tensor([0, 1]))
    assert out.loss.item() == pytest.approx((-1.0 + 1.0) / 2)
    one = dapo_loss(logp, old, t([1.0, -1.0]), mask)  # one group: token mean over all 4 tokens
    assert one.loss.item() == pytest.approx(-(3 - 1) / 4)


def test_micro_batches_with_batch_weights_sum_to_the_batch_loss() -> None:
    torch.manual_seed(0)
    logp = torch.randn(6, 5) * 0.1 - 1
    old = logp + torch.randn(6, 5) * 0.2
    mask = (torch.rand(6, 5) > 0.3).float()
    adv = torch.randn(6)
    groups = torch.tensor([0, 0, 0, 1, 1, 1])
    full = dapo_loss(logp, old, adv, mask, group_ids=groups).loss
    w = normalization_weights(mask, "group", group_ids=groups)
    parts = sum(
        dapo_loss(logp[i : i + 2], old[i : i + 2], adv[i : i + 2], mask[i : i + 2], weights=w[i : i + 2]).loss
        for i in range(0, 6, 2)
    )
    assert float(parts) == pytest.approx(full.item(), abs=1e-6)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-2, 2), min_size=2, max_size=6),
    st.lists(st.integers(1, 4), min_size=2, max_size=6),
)
def test_dapo_at_ratio_one_is_minus_the_token_weighted_advantage(
    advs: list[float], lengths: list[int]
) -> None:
    n = min(len(advs), len(lengths))
    advs, lengths = advs[:n], lengths[:n]
    mask = torch.zeros(n, 4)
    for i, L in enumerate(lengths):
        mask[i, :L] = 1
    out = dapo_loss(torch.zeros(n, 4), torch.zeros(n, 4), t(advs), mask)
    expected = -sum(a * L for a, L in zip(advs, lengths, strict=True)) / sum(lengths)
    assert out.loss.item() == pytest.approx(expected, abs=1e-5)
    assert out.metrics["clip_frac"].item() == 0.0


# ------------------------------------------------------------------------------------------------ void turns


def test_void_trajectories_contribute_nothing() -> None:
    torch.manual_seed(1)
    logp = (torch.randn(3, 4) * 0.1 - 1).requires_grad_(True)
    old = logp.detach() + 0.05
    mask = torch.ones(3, 4)
    adv = t([1.0, -0.5, 2.0])
    void = torch.tensor([False, True, False])
    masked = apply_void_mask(mask, void)
    with_void = dapo_loss(logp, old, adv, masked).loss
    without = dapo_loss(logp[[0, 2]], old[[0, 2]], adv[[0, 2]], mask[[0, 2]]).loss
    assert with_void.item() == pytest.approx(without.item(), abs=1e-6)  # neither numerator nor denominator
    sft = sft_loss(logp, masked)
    (with_void + sft).backward()
    assert logp.grad is not None and torch.all(logp.grad[1] == 0)


# ------------------------------------------------------------------------------------------------ GRPO


def test_low_var_kl_is_k3() -> None:
    logp, ref = t([-1.0, -2.0]), t([-1.5, -1.0])
    d = ref - logp
    assert low_var_kl(logp, ref).tolist() == pytest.approx((torch.exp(d) - d - 1).tolist())
    assert low_var_kl(logp, logp).tolist() == [0.0, 0.0]


def test_grpo_loss_by_hand() -> None:
    # one sequence, two tokens; A = +1
    logp = torch.log(t([[1.2, 1.0]])).requires_grad_(True)  # ratios 1.2 and 1.0 against old = 0
    old = t([[0.0, 0.0]])
    rollout = t([[math.log(0.4), math.log(0.9)]])  # TIS weights exp(old - rollout) = 2.5 → 1.5, 1.111…
    ref = t([[0.0, math.log(2.0)]])
    ent = t([[0.5, 1.5]])
    mask = t([[1, 1]])
    out = grpo_loss(
        logp,
        old,
        t([1.0]),
        mask,
        ref_logp=ref,
        rollout_logp=rollout,
        entropy=ent,
        kl_coef=0.01,
        entropy_coef=0.001,
    )
    pg = -(1.2 * 1.5 + 1.0 * (1 / 0.9)) / 2  # sequence mean of -min(rA, clip(r)A)·TIS
    d = torch.log(t([1 / 1.2, 2.0]))  # log(π_ref/π_θ) per token
    kl = float((torch.exp(d) - d - 1).mean())
    entropy = (0.5 + 1.5) / 2
    assert out.loss.item() == pytest.approx(pg + 0.01 * kl - 0.001 * entropy, abs=1e-6)
    assert out.metrics["tis_clip_frac"].item() == pytest.approx(0.5)
    assert out.metrics["kl"].item() == pytest.approx(kl, abs=1e-6)
    out.loss.backward()
    assert logp.grad is not None and torch.isfinite(logp.grad).all()


def test_grpo_kl_is_beta_times_the_mean_k3_however_the_batch_is_split() -> None:
    # EnvLunch §4: loss += β·KL with β = 0.01, KL the low-variance k3 = e^δ − δ − 1, δ = log π_ref − log π_θ,
    # under GRPO's sequence normalization 1/B Σ_i 1/|o_i| Σ_t. A trainer that splits the batch into k
    # micro-batches must get the same β·KL, not k times it (each micro-batch normalizing on its own).
    # By hand: δ = ln 2 → k3 = 1 − ln 2; δ = −ln 2 → k3 = ln 2 − ½; δ = 0 → 0.
    ln2 = math.log(2)
    logp = torch.full((3, 3), -1.0)
    delta = t([[ln2, 0.0, ln2], [-ln2, ln2, ln2], [ln2, -ln2, 0.0]])  # masked positions carry δ ≠ 0 too
    mask = t([[1, 1, 0], [1, 0, 0], [1, 1, 1]])
    per_sequence = [(1 - ln2 + 0) / 2, (ln2 - 0.5) / 1, (1 - ln2 + ln2 - 0.5 + 0) / 3]
    mean_k3 = sum(per_sequence) / 3
    weights = normalization_weights(mask, "sequence")
    for k in (1, 3):
        size = 3 // k
        loss = kl = 0.0
        for i in range(0, 3, size):
            rows = slice(i, i + size)
            out = grpo_loss(
                logp[rows],
                logp[rows],  # old = current, A = 0: the surrogate term is 0
                t([0.0] * size),
                mask[rows],
                ref_logp=logp[rows] + delta[rows],
                weights=weights[rows],
                entropy_coef=0.0,
            )
            loss += out.loss.item()
            kl += out.metrics["kl"].item()
        assert kl == pytest.approx(mean_k3, abs=1e-6), k
        assert loss == pytest.approx(0.01 * mean_k3, abs=1e-8), k
    # without weights, the loss normalizes over the batch it was given: the same figure for the whole batch
    whole = grpo_loss(logp, logp, t([0.0] * 3), mask, ref_logp=logp + delta, entropy_coef=0.0)
    assert whole.loss.item() == pytest.approx(0.01 * mean_k3, abs=1e-8)


def test_grpo_defaults_are_envlunchs_and_the_ratio_is_against_the_old_policy() -> None:
    # EnvLunch §4: ε = 0.2 / ε_high = 0.28, TIS clipped to [0.5, 1.5], β = 0.01, entropy coefficient 0.001
    assert (DAPO_EPS_LOW, DAPO_EPS_HIGH, TIS_LOW, TIS_HIGH) == (0.2, 0.28, 0.5, 1.5)
    assert (GRPO_KL_COEF, GRPO_ENTROPY_COEF) == (0.01, 0.001)
    # old π = 0.5, new π = 0.6: r = 1.2 (inside [0.8, 1.28]); A = 1; π_ref = π_θ (KL 0); entropies 2 and 4
    logp, old = torch.log(t([[0.6, 0.6]])), torch.log(t([[0.5, 0.5]]))
    out = grpo_loss(logp, old, t([1.0]), t([[1, 1]]), ref_logp=logp.clone(), entropy=t([[2.0, 4.0]]))
    assert out.metrics["ratio_mean"].item() == pytest.approx(1.2)
    assert out.loss.item() == pytest.approx(-1.2 - 0.001 * 3.0, abs=1e-6)


def test_grpo_entropy_bonus_counts_agent_tokens_only() -> None:
    # −c·(1/|o|)Σ_t H_t over the agent tokens: entropies 2 and 6 on agent tokens, 100 on a masked one
    logp = torch.zeros(1, 3)
    out = grpo_loss(logp, logp, t([0.0]), t([[1, 1, 0]]), entropy=t([[2.0, 6.0, 100.0]]),
                    kl_coef=0.0, entropy_coef=0.01)  # fmt: skip
    assert out.metrics["entropy"].item() == pytest.approx(4.0)
    assert out.loss.item() == pytest.approx(-0.01 * 4.0)


def test_grpo_rejects_an_importance_band_without_one_in_it() -> None:
    x = torch.zeros(1, 2)
    kw = {"kl_coef": 0.0, "entropy_coef": 0.0, "rollout_logp": x}
    for low, high in ((0.0, 1.5), (1.1, 1.5), (0.5, 0.9)):
        with pytest.raises(ValueError, match="tis_low"):
            grpo_loss(x, x, t([1.0]), torch.ones(1, 2), tis_low=low, tis_high=high, **kw)  # type: ignore[arg-type]
    # the degenerate band [1, 1] is allowed: every weight is exactly 1, kept by MIS (the band is closed)
    for mode in ("truncate", "mask"):
        out = grpo_loss(x, x, t([1.0]), torch.ones(1, 2), tis_low=1.0, tis_high=1.0, tis_mode=mode, **kw)  # type: ignore[arg-type]
        assert out.loss.item() == pytest.approx(-1.0) and out.metrics["tis_clip_frac"].item() == 0.0


def test_tis_clip_fraction_counts_the_clipped_tokens() -> None:
    # IS weights 2.5, 1.0 and 1.0: one of three agent tokens clipped (to 1.5)
    logp = torch.zeros(1, 3)
    rollout = t([[math.log(0.4), 0.0, 0.0]])
    out = grpo_loss(
        logp, logp, t([1.0]), torch.ones(1, 3), rollout_logp=rollout, kl_coef=0.0, entropy_coef=0.0
    )
    assert out.metrics["tis_clip_frac"].item() == pytest.approx(1 / 3)
    assert out.loss.item() == pytest.approx(-(1.5 + 1.0 + 1.0) / 3)


def test_low_var_kl_is_clamped_like_verls() -> None:
    # δ = 5: k3 = e^5 − 6 ≈ 142 → clamped to 10; δ = −30: k3 = 29 → 10; moderate δ untouched
    kl = low_var_kl(t([0.0, 0.0, 0.0]), t([5.0, -30.0, 1.0]))
    assert kl.tolist() == pytest.approx([10.0, 10.0, math.e - 2.0])


def test_grpo_without_rollout_logprobs_has_unit_importance_weight() -> None:
    logp = torch.log(t([[1.1, 0.95]]))
    out = grpo_loss(logp, torch.zeros(1, 2), t([2.0]), torch.ones(1, 2), kl_coef=0.0, entropy_coef=0.0)
    assert out.loss.item() == pytest.approx(-(1.1 * 2 + 0.95 * 2) / 2)


def test_grpo_requires_what_its_terms_need() -> None:
    x = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="ref_logp"):
        grpo_loss(x, x, t([1.0]), torch.ones(1, 2), entropy=x)
    with pytest.raises(ValueError, match="entropy"):
        grpo_loss(x, x, t([1.0]), torch.ones(1, 2), ref_logp=x)
    with pytest.raises(ValueError, match="shape"):
        dapo_loss(x, torch.zeros(1, 3), t([1.0]), torch.ones(1, 2))


# ------------------------------------------------------------------------------------------------ mixed


def test_mixed_objective() -> None:
    assert mixed_objective(t(2.0), t(-1.0), 0.9).item() == pytest.approx(0.9 * 2 - 0.1)
    assert mixed_objective(t(2.0), t(-1.0), 0.0).item() == pytest.approx(-1.0)
    assert mixed_objective(t(2.0), t(4.0), 0.5).item() == pytest.approx(3.0)
    assert mixed_objective(t(2.0), t(4.0), 1.0).item() == pytest.approx(2.0)  # γ = 1: SFT alone (§4's start)
    with pytest.raises(ValueError, match="gamma"):
        mixed_objective(t(1.0), t(1.0), 1.5)


def test_grpo_mis_masks_tokens_outside_the_band_where_tis_clips_them() -> None:
    import math

    from datadojo.train.losses import grpo_loss

    logp = torch.zeros(1, 2, requires_grad=True)
    old = torch.zeros(1, 2)
    rollout = torch.tensor([[math.log(1 / 0.3), math.log(1 / 1.2)]])  # IS weights 0.3 and 1.2
    mask, adv = torch.ones(1, 2), torch.tensor([1.0])
    kw = {"kl_coef": 0.0, "entropy_coef": 0.0, "normalization": "token"}
    tis = grpo_loss(logp, old, adv, mask, rollout_logp=rollout, **kw)
    mis = grpo_loss(logp, old, adv, mask, rollout_logp=rollout, tis_mode="mask", **kw)
    assert float(tis.loss) == pytest.approx(-(0.5 + 1.2) / 2)  # 0.3 clipped up to 0.5
    assert float(mis.loss) == pytest.approx(-(0.0 + 1.2) / 2)  # 0.3 dropped
    assert float(tis.metrics["tis_clip_frac"]) == pytest.approx(0.5)


def test_whole_group_sizes_need_one_per_row_and_the_batchs_group_count() -> None:
    # A micro-batch of 2 rows whose groups hold 4 and 6 tokens over the whole batch of 3 groups: by hand,
    # row 0's tokens weigh 1 / (4 * 3) and row 1's 1 / (6 * 3) (DataMind §4, the group's 1/Σ|y| then the
    # mean over the batch's groups), whatever the micro-batch itself counts.
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]], dtype=torch.float64)
    w = normalization_weights(
        mask, "group", total=3, group_tokens=torch.tensor([4.0, 6.0], dtype=torch.float64)
    )
    assert w[0, 0].item() == pytest.approx(1 / 12, abs=1e-15) and w[1, 0].item() == pytest.approx(
        1 / 18, abs=1e-15
    )
    assert w[0, 2].item() == 0.0
    with pytest.raises(ValueError, match=r"group_tokens must have shape \(2,\)"):
        normalization_weights(mask, "group", total=3, group_tokens=torch.tensor([4.0, 6.0, 5.0]))
    with pytest.raises(ValueError, match="need the batch's group count"):
        normalization_weights(mask, "group", group_tokens=torch.tensor([4.0, 6.0]))

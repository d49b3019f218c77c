"""The γ-mixed micro-batch loss for verl (datadojo.train.verl_mixed): micro-batch shares add up to
DataMind §4's γ·L_SFT + (1−γ)·L_DAPO of the whole mini-batch, with and without expert rows."""

from __future__ import annotations

import math

import pytest
import torch

from datadojo.train.losses import dapo_loss, mixed_objective, sft_loss
from datadojo.train.schedules import GammaSchedule
from datadojo.train.verl_mixed import MixedCounts, gamma_mixed_loss, group_keep, mixed_counts, term_masks


def _batch(seed: int = 0, rows: int = 6, width: int = 5) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = [5, 3, 4, 2, 5, 1][:rows]
    mask = torch.tensor([[1.0] * n + [0.0] * (width - n) for n in lengths])
    return {
        "logp": torch.randn(rows, width, generator=g) * 0.3 - 1.0,
        "old": torch.randn(rows, width, generator=g) * 0.3 - 1.0,
        "adv": torch.tensor([0.9, -0.4, 1.3, -1.1, 0.2, 0.7][:rows]).unsqueeze(1).expand(rows, width).clone(),
        "mask": mask,
    }


def _reference(t: dict[str, torch.Tensor], expert: torch.Tensor, gamma: float) -> torch.Tensor:
    """The formula on the whole batch: the SFT token mean over expert rows, the DAPO token mean over the rest."""
    e = expert.bool()
    sft = sft_loss(t["logp"][e], t["mask"][e]) if e.any() else torch.zeros(())
    pol = dapo_loss(t["logp"][~e], t["old"][~e], t["adv"][~e], t["mask"][~e], normalization="token").loss
    return mixed_objective(sft, pol, gamma)


def _micro_sum(t: dict[str, torch.Tensor], expert: torch.Tensor, gamma: float, size: int) -> torch.Tensor:
    counts = mixed_counts(t["mask"], expert)
    total = torch.zeros(())
    for s in range(0, t["mask"].shape[0], size):
        sl = slice(s, s + size)
        out = gamma_mixed_loss(
            t["logp"][sl],
            t["old"][sl],
            t["adv"][sl],
            t["mask"][sl],
            gamma=gamma,
            counts=counts,
            expert=expert[sl],
        )
        total = total + out.loss
    return total


@pytest.mark.parametrize("size", [1, 2, 3, 6])
@pytest.mark.parametrize("with_experts", [True, False])
def test_micro_batches_add_up_to_the_mixed_objective(size: int, with_experts: bool) -> None:
    t = _batch()
    expert = torch.tensor([1, 0, 0, 1, 0, 0]) if with_experts else torch.zeros(6)
    gamma = GammaSchedule(total_steps=10)(3)
    assert 0.05 < gamma < 0.9
    got = _micro_sum(t, expert, gamma, size)
    assert got.item() == pytest.approx(_reference(t, expert, gamma).item(), rel=1e-6)


def test_micro_batch_local_normalization_would_not_add_up() -> None:
    """Guard for the test above: normalizing each micro-batch by its own counts gives another number."""
    t = _batch()
    expert = torch.tensor([1, 0, 0, 1, 0, 0])
    local = torch.zeros(())
    for s in range(0, 6, 2):
        sl = slice(s, s + 2)
        c = mixed_counts(t["mask"][sl], expert[sl])
        local = (
            local
            + gamma_mixed_loss(
                t["logp"][sl],
                t["old"][sl],
                t["adv"][sl],
                t["mask"][sl],
                gamma=0.5,
                counts=c,
                expert=expert[sl],
            ).loss
        )
    assert abs(local.item() - _reference(t, expert, 0.5).item()) > 1e-3


def test_worked_example_by_hand() -> None:
    """One expert row of two tokens, one rollout of one token with r = 1 (no clipping)."""
    logp = torch.tensor([[math.log(0.5), math.log(0.25)], [-1.0, 0.0]])
    old = torch.tensor([[0.0, 0.0], [-1.0, 0.0]])
    adv = torch.tensor([[0.0, 0.0], [2.0, 2.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    expert = torch.tensor([1, 0])
    out = gamma_mixed_loss(logp, old, adv, mask, gamma=0.9, counts=mixed_counts(mask, expert), expert=expert)
    sft = -(math.log(0.5) + math.log(0.25)) / 2
    pg = -2.0  # −min(r·A, clip(r)·A) with r = 1, A = 2, one token
    assert out.loss.item() == pytest.approx(0.9 * sft + 0.1 * pg, rel=1e-6)
    assert out.metrics["sft_tokens"].item() == 2 and out.metrics["policy_tokens"].item() == 1


def test_void_rows_leave_both_terms_and_their_counts() -> None:
    t = _batch()
    expert = torch.tensor([1, 0, 0, 1, 0, 0])
    void = torch.tensor([0, 1, 0, 1, 0, 0])
    counts = mixed_counts(t["mask"], expert, void=void)
    assert counts == MixedCounts(5.0, 4 + 5 + 1)
    out = gamma_mixed_loss(
        t["logp"], t["old"], t["adv"], t["mask"], gamma=0.3, counts=counts, expert=expert, void=void
    )
    keep = torch.tensor([True, False, True, False, True, True])
    ref = _reference({k: v[keep] for k, v in t.items()}, expert[keep], 0.3)
    assert out.loss.item() == pytest.approx(ref.item(), rel=1e-6)


def test_group_keep_is_dynamic_sampling_and_spares_expert_rows() -> None:
    uids = ["a", "a", "b", "b", "c", "c", "a"]
    correct = torch.tensor([1, 0, 1, 1, 0, 0, 0])
    expert = torch.tensor([0, 0, 0, 0, 0, 0, 1])
    keep = group_keep(uids, correct, expert)
    assert keep.tolist() == [True, True, False, False, False, False, True]
    sft, pol = term_masks(torch.ones(7, 2), expert, keep=keep)
    assert sft.sum().item() == 2 and pol.sum().item() == 4


def test_gradients_of_the_micro_batch_sum_equal_the_formulas() -> None:
    t = _batch(seed=3)
    expert = torch.tensor([0, 1, 0, 0, 1, 0])
    a = t["logp"].clone().requires_grad_(True)
    b = t["logp"].clone().requires_grad_(True)
    _micro_sum({**t, "logp": a}, expert, 0.6, 4).backward()
    _reference({**t, "logp": b}, expert, 0.6).backward()
    assert torch.allclose(a.grad, b.grad, atol=1e-7)


def test_bad_flag_shape_is_named() -> None:
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        term_masks(torch.ones(2, 3), torch.ones(3))

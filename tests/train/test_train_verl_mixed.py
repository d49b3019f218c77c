"""The γ-mixed micro-batch loss for verl (datadojo.train.verl_mixed): micro-batch shares add up to
DataMind §4's γ·L_SFT + (1−γ)·L_DAPO of the whole mini-batch, with and without expert rows."""

from __future__ import annotations

import math
import sys
import types

import pytest
import torch

from datadojo.train.config import RLConfig
from datadojo.train.export import verl_mixed as verl_mixed_export
from datadojo.train.losses import (
    dapo_loss,
    dynamic_sampling_keep,
    mixed_objective,
    normalization_count,
    normalization_weights,
    sft_loss,
)
from datadojo.train.registry import PolicyInputs, get_policy_loss
from datadojo.train.schedules import GammaSchedule
from datadojo.train.verl_mixed import (
    MixedCounts,
    gamma_mixed_loss,
    group_keep,
    mixed_counts,
    term_masks,
)


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
            aggregation="batch_token_mean",
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
                aggregation="batch_token_mean",
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
    counts = mixed_counts(mask, expert)
    out = gamma_mixed_loss(
        logp, old, adv, mask, gamma=0.9, counts=counts, expert=expert, aggregation="batch_token_mean"
    )
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
        t["logp"],
        t["old"],
        t["adv"],
        t["mask"],
        gamma=0.3,
        counts=counts,
        expert=expert,
        void=void,
        aggregation="batch_token_mean",
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


# The worked example of issue 37, γ = 0.9, micro-batches of 2 rows (group a is split over two of verl's).
# Rows: a1, E, b1, a2, c1, b2, c2 — groups (verl's prompt uid) a, expert, b, a, c, b, c.
#   a1: correct, 3 tokens, A = +1, ratios 1, 1, e^0.5 (the last clipped to 1 + ε_high = 1.28)
#   E:  an expert row, 2 tokens with log-probs ln 0.5, ln 0.25 (the SFT term)
#   b1, b2: group b, both correct → filtered by dynamic sampling (2 and 3 tokens)
#   a2: wrong, 1 token, A = −1;  c1: correct, 2 tokens, A = +0.8;  c2: wrong, void, 4 tokens, A = −0.8
# By hand, per token −min(r·A, clip(r, 0.8, 1.28)·A): a1 → −1, −1, −1.28; a2 → +1; c1 → −0.8, −0.8.
#   L_SFT = −(ln 0.5 + ln 0.25) / 2 = 1.5 ln 2
#   query_token_mean (DataMind §4): group a (−3.28 + 1) / 4 = −0.57, group c −1.6 / 2 = −0.8 → −0.685
#   batch_token_mean: (−3.28 + 1 − 1.6) / 6 = −3.88 / 6
_HAND_DAPO = {"query_token_mean": (-0.57 - 0.8) / 2, "batch_token_mean": -3.88 / 6}
_UIDS = ["a", "expert", "b", "a", "c", "b", "c"]


def _worked_example() -> dict[str, torch.Tensor]:
    lengths, width = [3, 2, 2, 1, 2, 3, 4], 4
    d = torch.float64
    mask = torch.tensor([[1.0] * n + [0.0] * (width - n) for n in lengths], dtype=d)
    old = -1.0 * mask
    logp = old.clone()
    logp[0, 2] = -0.5  # ratio e^0.5 ≈ 1.65 on a1's last token
    logp[1, :2] = torch.tensor([math.log(0.5), math.log(0.25)], dtype=d)
    adv = torch.tensor([1.0, 0.0, 0.0, -1.0, 0.8, 0.0, -0.8], dtype=d)
    return {
        "logp": logp,
        "old": old,
        "adv": adv,
        "mask": mask,
        "expert": torch.tensor([0, 1, 0, 0, 0, 0, 0]).bool(),
        "void": torch.tensor([0, 0, 0, 0, 0, 0, 1]).bool(),
        "correct": torch.tensor([1, 0, 1, 0, 1, 1, 0]).bool(),
    }


class _Batch:
    """The part of verl's TensorDict batch that DataDojo's worker and loss touch (``data[key]``, ``get``,
    ``select(...).to_padded_tensor()``, non-tensor values through ``tensordict_utils``), sliced into
    micro-batches by rows as verl's ``prepare_micro_batches`` does. The engine test runs the real one."""

    def __init__(self, tensors: dict[str, torch.Tensor], non_tensor: dict[str, object]) -> None:
        self.tensors, self.non_tensor = dict(tensors), dict(non_tensor)

    @property
    def shape(self) -> tuple[int]:
        return (next(iter(self.tensors.values())).shape[0],)

    def __getitem__(self, key: str) -> torch.Tensor:
        return self.tensors[key]

    def __setitem__(self, key: str, value: torch.Tensor) -> None:
        self.tensors[key] = value

    def __contains__(self, key: str) -> bool:
        return key in self.tensors

    def get(self, key: str, default: object = None) -> object:
        return self.tensors.get(key, default)

    def select(self, *keys: str) -> _Batch:
        return _Batch({k: self.tensors[k] for k in keys}, {})

    def to_padded_tensor(self) -> dict[str, torch.Tensor]:
        return dict(self.tensors)

    def rows(self, sl: slice) -> _Batch:
        nt = {k: v[sl] if isinstance(v, list) else v for k, v in self.non_tensor.items()}
        return _Batch({k: v[sl] for k, v in self.tensors.items()}, nt)


def _fake_verl(monkeypatch: pytest.MonkeyPatch) -> None:
    """verl's modules as datadojo_mixed_loss and the worker's annotations import them (verl is an engine
    dependency, absent here): non-tensor access, metrics, and log-probs already padded."""
    tu = types.ModuleType("verl.utils.tensordict_utils")
    tu.get = lambda data, key, default=None: data.non_tensor.get(key, default)  # type: ignore[attr-defined]
    tu.assign_non_tensor = lambda data, **kw: data.non_tensor.update(kw)  # type: ignore[attr-defined]
    metric = types.ModuleType("verl.utils.metric")
    metric.AggregationType = types.SimpleNamespace(SUM="sum", MEAN="mean")  # type: ignore[attr-defined]
    metric.Metric = lambda value, aggregation: (value, aggregation)  # type: ignore[attr-defined]
    padding = types.ModuleType("verl.workers.utils.padding")
    padding.no_padding_2_padding = lambda log_probs, data: log_probs  # type: ignore[attr-defined]
    utils, wutils = types.ModuleType("verl.utils"), types.ModuleType("verl.workers.utils")
    utils.tensordict_utils, utils.metric, wutils.padding = tu, metric, padding  # type: ignore[attr-defined]
    for name, mod in {
        "verl": types.ModuleType("verl"),
        "verl.utils": utils,
        "verl.utils.tensordict_utils": tu,
        "verl.utils.metric": metric,
        "verl.workers": types.ModuleType("verl.workers"),
        "verl.workers.utils": wutils,
        "verl.workers.utils.padding": padding,
    }.items():
        monkeypatch.setitem(sys.modules, name, mod)


def _verl_path(t: dict[str, torch.Tensor], aggregation: str, gamma: float, micro: int) -> float:
    """DataDojo's verl worker and loss as verl drives them on one rank: ``annotate_step_batch`` (row tags,
    dynamic sampling by ``uid``), the trainer's γ and ``loss_aggregation`` in the batch, ``annotate_mini_batch``
    (counts, whole-group token counts), then ``datadojo_mixed_loss(config, model_output, micro_batch)``."""
    extra = [
        {"datadojo_expert": int(e), "datadojo_void": int(v), "reward_extra_info": {"acc": float(c)}}
        for e, v, c in zip(t["expert"], t["void"], t["correct"], strict=True)
    ]
    data = _Batch(
        {
            "response_mask": t["mask"],
            "old_log_probs": t["old"],
            "advantages": t["adv"].unsqueeze(1) * t["mask"],  # verl's advantages are per token
        },
        {"uid": list(_UIDS), "extra_fields": extra},
    )
    verl_mixed_export.annotate_step_batch(data, None)  # DataDojoTrainingWorker.train_mini_batch
    settings = {"loss_aggregation": aggregation}  # the +datadojo section DataDojoMixedTrainer reads
    data.non_tensor.update(
        datadojo_gamma=gamma, datadojo_loss_aggregation=verl_mixed_export.aggregation_of(settings), dp_size=1
    )
    verl_mixed_export.annotate_mini_batch(data, None)  # DataDojoTrainingWorker.train_batch
    config = {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "use_kl_loss": False, "entropy_coeff": 0.0}
    total = 0.0
    for s in range(0, len(_UIDS), micro):
        sl = slice(s, s + micro)
        loss, _ = verl_mixed_export.datadojo_mixed_loss(config, {"log_probs": t["logp"][sl]}, data.rows(sl))
        total += loss.item()
    return total


def _train_rl_path(t: dict[str, torch.Tensor], aggregation: str, gamma: float, micro: int) -> float:
    """What RLTrainer._update does: the policy rows are the kept, non-void rollouts, weighted over the whole
    update by the registered loss's normalization under the config; the SFT term on the expert rows."""
    cfg = RLConfig(model="m", loss_aggregation=aggregation)  # type: ignore[arg-type]
    spec = get_policy_loss(cfg.policy_loss)
    mode = spec.normalization_for(cfg)
    rollout = ~t["expert"]
    gid = torch.tensor([{"a": 0, "b": 1, "c": 2}.get(u, 3) for u in _UIDS])
    keep = torch.zeros(len(_UIDS), dtype=torch.bool)
    keep[rollout] = dynamic_sampling_keep(t["correct"][rollout], gid[rollout])
    rows = (rollout & keep & ~t["void"]).nonzero().flatten()
    mask, groups = t["mask"][rows], gid[rows]
    weights = normalization_weights(
        mask, mode, group_ids=groups, total=normalization_count(mask, mode, group_ids=groups)
    )
    policy = 0.0
    for s in range(0, len(rows), micro):
        r, sl = rows[s : s + micro], slice(s, s + micro)
        inputs = PolicyInputs(
            logp=t["logp"][r],
            old_logp=t["old"][r],
            advantages=t["adv"][r],
            mask=mask[sl],
            weights=weights[sl],
            group_ids=groups[sl],
        )
        policy += mixed_objective(torch.zeros(()), spec.fn(inputs, cfg).loss, gamma).item()
    e = t["expert"] & ~t["void"]
    sft_mask = t["mask"][e]
    sft_w = normalization_weights(
        sft_mask, cfg.sft_normalization, total=normalization_count(sft_mask, cfg.sft_normalization)
    )
    sft = sft_loss(t["logp"][e], sft_mask, weights=sft_w)
    return policy + mixed_objective(sft, torch.zeros(()), gamma).item()


@pytest.mark.parametrize("aggregation", ["query_token_mean", "batch_token_mean"])
def test_dapo_aggregation_is_the_same_in_verl_and_train_rl(
    aggregation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37: one loss_aggregation setting; verl's γ-mixed loss and train rl's agree with the hand value.

    Before the setting existed verl gave 0.871082 (batch_token_mean) and train rl 0.867249 (query_token_mean)
    on this example; the default is DataMind §4's reading.
    """
    _fake_verl(monkeypatch)
    t = _worked_example()
    want = 0.9 * 1.5 * math.log(2) + 0.1 * _HAND_DAPO[aggregation]
    verl = _verl_path(t, aggregation, 0.9, micro=2)
    train_rl = _train_rl_path(t, aggregation, 0.9, micro=2)
    assert abs(verl - train_rl) < 1e-9
    assert abs(verl - want) < 1e-9 and abs(train_rl - want) < 1e-9
    assert RLConfig(model="m").loss_aggregation == "query_token_mean"

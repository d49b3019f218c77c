"""The RL trainer on a tiny model with scripted rollouts: DAPO moves log-probs the right way, dynamic sampling,
void masking, γ per step, GRPO's KL to the initial policy, resume, and weight sync into the in-process sampler."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from datadojo.jsonl import append_jsonl, read_trajectories  # noqa: E402
from datadojo.reward.registry import RewardResult  # noqa: E402
from datadojo.train.config import OptimConfig, RLConfig  # noqa: E402
from datadojo.train.losses import dapo_loss  # noqa: E402
from datadojo.train.modeling import collate, forward_logprobs, make_accelerator  # noqa: E402
from datadojo.train.rl import RLTrainer  # noqa: E402
from datadojo.train.schedules import GammaSchedule  # noqa: E402
from datadojo.train.tokenize import tokenize_trajectory  # noqa: E402
from datadojo.train.toy import synthetic_trajectory  # noqa: E402
from datadojo.types import Task, Trajectory  # noqa: E402


def test_one_dapo_step_raises_the_logprob_of_positive_advantage_tokens(
    toy_tok: Any, make_model: Callable[..., Any]
) -> None:
    model = make_model()
    good = synthetic_trajectory("q", sample=0, answer="42")
    bad = synthetic_trajectory("q", sample=1, answer="7")
    tb = collate(
        [tokenize_trajectory(good, toy_tok), tokenize_trajectory(bad, toy_tok)], toy_tok.pad_token_id
    )
    mask = tb.target_mask

    def seq_logp() -> torch.Tensor:
        with torch.no_grad():
            lp, _ = forward_logprobs(model, tb)
        return (lp * mask).sum(1)

    before = seq_logp()
    logp, _ = forward_logprobs(model, tb)
    out = dapo_loss(logp, logp.detach(), torch.tensor([1.0, -1.0]), mask)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    out.loss.backward()
    opt.step()
    after = seq_logp()
    assert after[0] > before[0]  # positive advantage: more likely
    assert after[1] < before[1]  # negative advantage: less likely


class ScriptedSource:
    """Rollouts from a fixed rule: sample s of task t answers ``answer(t, s)``; sample 3 is void when asked."""

    def __init__(self, answer: Callable[[str, int], str], void_sample: int | None = None) -> None:
        self.answer = answer
        self.void_sample = void_sample
        self.calls: list[list[str]] = []
        self.synced = 0

    def generate(self, tasks: Sequence[Task], group_size: int, out: Path, *, seed: int) -> list[Trajectory]:
        self.calls.append([t.id for t in tasks])
        trajs = [
            synthetic_trajectory(t.id, sample=s, answer=self.answer(t.id, s), void=s == self.void_sample)
            for t in tasks
            for s in range(group_size)
        ]
        append_jsonl(out, trajs)
        return trajs

    def sync(self, accelerator: Any, model: Any) -> None:
        self.synced += 1

    def close(self) -> None:
        pass


def exact_42(pairs: Sequence[tuple[Task, Trajectory]]) -> list[RewardResult]:
    return [RewardResult(1.0 if tr.final_answer == "42" else 0.0, tr.final_answer == "42") for _, tr in pairs]


TASKS = [Task(id=f"t{i}", question="How much?") for i in range(4)]


def _rl_cfg(run: Path, **kw: Any) -> RLConfig:
    base: dict[str, Any] = {
        "output_dir": str(run),
        "total_steps": 2,
        "tasks_per_step": 2,
        "group_size": 4,
        "updates_per_step": 2,
        "micro_batch_size": 4,
        "save_every": 1,
        "optim": OptimConfig(
            lr=1e-3, betas=(0.9, 0.98), weight_decay=0.01, scheduler="constant", warmup_ratio=0.0
        ),
    }
    return RLConfig(**{**base, **kw})


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_mixed_objective_step_metrics_filtering_and_void_masking(
    tmp_path: Path, toy_tok: Any, make_model: Callable[..., Any]
) -> None:
    # t0, t2: every sample right (group filtered); t1, t3: samples 0 and 2 right; sample 3 is always void
    src = ScriptedSource(lambda tid, s: "42" if tid in ("t0", "t2") or s % 2 == 0 else "7", void_sample=3)
    experts = [synthetic_trajectory(t.id, sample=99) for t in TASKS]
    run = tmp_path / "rl"
    trainer = RLTrainer(
        _rl_cfg(run), TASKS, exact_42, src, experts=experts, model=make_model(), tokenizer=toy_tok
    )
    summary = trainer.train()
    assert summary.steps == 2 and src.synced == 2
    recs = _records(run)
    gammas = GammaSchedule(total_steps=2)
    assert {frozenset(c) for c in src.calls} != {frozenset({"t0", "t2"})}  # the seed gives some mixed group
    for rec, call in zip(recs, src.calls, strict=True):
        assert rec["gamma"] == pytest.approx(gammas(rec["step"] - 1))
        for key in ("sft_loss", "reward_mean", "frac_groups_filtered", "void_rate"):
            assert rec[key] is not None, key
        assert rec["void_rate"] == pytest.approx(0.25)  # one void sample in each group of 4
        assert rec["rollouts"] == 8
        # each step draws 2 of the 4 tasks; the fraction filtered is that of the all-correct groups
        all_right = sum(t in ("t0", "t2") for t in call)
        assert rec["frac_groups_filtered"] == pytest.approx(all_right / 2)
        for key in ("policy_loss", "entropy", "clip_frac"):  # present exactly when some group was kept
            assert (rec[key] is not None) is (all_right < 2), key
    # the scored rollouts carry rewards, advantages and the dynamic-sampling decision
    scored = list(read_trajectories(run / "rollouts" / "step_000001.rank0.scored.jsonl"))
    assert len(scored) == 8
    for tr in scored:
        mixed = tr.task_id in ("t1", "t3")
        assert tr.extra["kept"] is mixed
        if not mixed:
            assert tr.extra["advantage"] == 0.0
    assert (run / "curves.svg").read_text().count("<g transform") == 8
    assert (run / "checkpoints" / "step_000002" / "model" / "config.json").exists()


def test_filtered_groups_leave_the_sft_term_alone(
    tmp_path: Path, toy_tok: Any, make_model: Callable[..., Any]
) -> None:
    src = ScriptedSource(lambda tid, s: "42")  # every group all-correct: dynamic sampling drops them all
    experts = [synthetic_trajectory(t.id, sample=99) for t in TASKS]
    run = tmp_path / "rl"
    RLTrainer(
        _rl_cfg(run, total_steps=1),
        TASKS,
        exact_42,
        src,
        experts=experts,
        model=make_model(),
        tokenizer=toy_tok,
    ).train()
    (rec,) = _records(run)
    assert rec["frac_groups_filtered"] == 1.0
    assert rec["policy_loss"] is None and rec["sft_loss"] is not None
    assert rec["loss"] == pytest.approx(rec["gamma"] * rec["sft_loss"])
    assert rec["updates"] == 2


def test_mixed_objective_needs_experts(tmp_path: Path, toy_tok: Any, make_model: Callable[..., Any]) -> None:
    with pytest.raises(ValueError, match="expert"):
        RLTrainer(
            _rl_cfg(tmp_path),
            TASKS,
            exact_42,
            ScriptedSource(lambda t, s: "42"),
            model=make_model(),
            tokenizer=toy_tok,
        )


def test_grpo_warmup_preset_with_kl_to_the_initial_policy_and_resume(
    tmp_path: Path, toy_tok: Any, make_model: Callable[..., Any]
) -> None:
    run = tmp_path / "grpo"
    cfg = RLConfig.envlunch(
        output_dir=str(run),
        total_steps=2,
        tasks_per_step=2,
        group_size=4,
        updates_per_step=1,
        micro_batch_size=4,
        save_every=1,
    )
    cfg = cfg.replace(optim=cfg.optim.replace(lr=1e-3))
    assert (cfg.policy_loss, cfg.kl_coef, cfg.entropy_coef, cfg.dynamic_sampling) == (
        "grpo",
        0.01,
        0.001,
        False,
    )
    src = ScriptedSource(lambda tid, s: "42" if s < 2 else "7")
    trainer = RLTrainer(cfg, TASKS, exact_42, src, model=make_model(), tokenizer=toy_tok)
    assert trainer.ref_model is not None
    trainer.train()
    recs = _records(run)
    assert [r["gamma"] for r in recs] == [0.0, 0.0] and all(r["sft_loss"] is None for r in recs)
    assert recs[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # step 1's one update starts at the initial policy
    assert recs[1]["kl"] > 0  # then the policy has moved away from it
    # resume with a longer budget: only step 3 is rolled out again
    src2 = ScriptedSource(lambda tid, s: "42" if s < 2 else "7")
    longer = cfg.replace(total_steps=3)
    summary = RLTrainer(longer, TASKS, exact_42, src2, model=make_model(), tokenizer=toy_tok).train()
    assert summary.resumed_from == 2 and len(src2.calls) == 1
    assert [r["step"] for r in _records(run)] == [1, 2, 3]


def test_in_process_sampler_gets_the_trained_weights(toy_ckpt: Path, make_model: Callable[..., Any]) -> None:
    from datadojo.train.rollouts import AgentRollouts, in_process_sampler

    backend = in_process_sampler(str(toy_ckpt), "cpu")
    source = AgentRollouts(backend)
    model = make_model()
    with torch.no_grad():
        model.lm_head.weight.add_(1.0)  # "trained" weights differ from the checkpoint's
    assert not torch.equal(backend.model.lm_head.weight, model.lm_head.weight)
    source.sync(make_accelerator("no"), model)
    assert torch.equal(backend.model.lm_head.weight, model.lm_head.weight)
    source.close()


def test_micro_batch_size_does_not_change_the_rl_update(
    tmp_path: Path, toy_tok: Any, make_model: Callable[..., Any]
) -> None:
    # groups of 4 split over micro-batches of 1 must give the update of one micro-batch of 4: the per-group
    # token normalization (DataMind's 1/Σ|y_i|) is computed over the whole update, not per micro-batch
    experts = [synthetic_trajectory(t.id, sample=99) for t in TASKS]
    weights = []
    for micro in (1, 4):
        src = ScriptedSource(lambda tid, s: "42" if s % 2 == 0 else "7", void_sample=3)
        model = make_model()
        cfg = _rl_cfg(
            tmp_path / f"m{micro}", total_steps=1, updates_per_step=1, micro_batch_size=micro, save_every=0
        )
        RLTrainer(cfg, TASKS, exact_42, src, experts=experts, model=model, tokenizer=toy_tok).train()
        weights.append(model.lm_head.weight.detach().clone())
    assert torch.allclose(weights[0], weights[1], atol=1e-6)


def test_micro_batch_size_does_not_scale_grpos_kl(
    tmp_path: Path, toy_tok: Any, make_model: Callable[..., Any]
) -> None:
    # EnvLunch's GRPO (β = 0.01 KL to the initial policy, entropy bonus): the KL term is normalized over the
    # whole update like the surrogate, so micro-batches of 1 and of 4 give the same update and the same KL.
    # Were each micro-batch to normalize its own KL, β would in effect be 4 times larger with micro-batches
    # of 1. Step 2 starts away from the initial policy, so its KL (and its gradient) is not 0.
    weights, kls = [], []
    for micro in (1, 4):
        cfg = RLConfig.envlunch(
            output_dir=str(tmp_path / f"m{micro}"),
            total_steps=2,
            tasks_per_step=2,
            group_size=4,
            updates_per_step=1,
            micro_batch_size=micro,
            save_every=0,
        )
        cfg = cfg.replace(optim=cfg.optim.replace(lr=1e-3))
        src = ScriptedSource(lambda tid, s: "42" if s < 2 else "7")
        model = make_model()
        RLTrainer(cfg, TASKS, exact_42, src, model=model, tokenizer=toy_tok).train()
        weights.append(model.lm_head.weight.detach().clone())
        kls.append(_records(tmp_path / f"m{micro}")[1]["kl"])
    assert kls[0] > 0 and kls[0] == pytest.approx(kls[1], rel=1e-4)
    # Adam turns float noise in near-zero gradients into steps of up to lr: 1e-5 (one weight in 13504
    # differed by 1.6e-6 when this was written), while the KL figure above is the exact check
    assert torch.allclose(weights[0], weights[1], atol=1e-5)

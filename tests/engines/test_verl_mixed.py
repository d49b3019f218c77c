"""verl (pinned): DataMind's γ·SFT + (1−γ)·DAPO through verl's whole-batch loss hook, with an expert stream.

* a verl-format batch (left-padded prompts, right-padded responses, ``extra_fields`` / ``uid`` as the agent
  loops and TransferQueue store them) goes through verl's own ``left_right_2_no_padding`` and
  ``prepare_micro_batches``; ``DataDojoTrainingWorker``'s step and mini-batch annotations run on it; the loss
  set with ``set_loss_fn`` (``datadojo_mixed_loss``) is called per micro-batch as the FSDP engine's
  ``forward_step`` calls it (``loss_function(model_output=..., data=micro_batch, dp_group=...)``) with the
  log-probs as verl's engine hands them (a jagged tensor over prompt + response). The sum of the micro-batch
  losses and its gradient equal ``datadojo.train.losses`` on the same tensors (γ·sft_loss + (1−γ)·dapo_loss,
  void rows and filtered groups out), with and without expert rows, for both loss aggregations
  (``query_token_mean``: groups by verl's ``uid``; ``batch_token_mean``); at γ = 0 without experts and
  ``batch_token_mean`` it equals verl's own ``ppo_loss`` (vanilla, token-mean, DAPO clip);
* the ``datadojo_expert`` agent loop, instantiated from verl's registry, replays a real oracle trajectory
  token for token (the chat template's rendering, environment tokens masked);
* ``export_verl_mixed`` rows load in verl's ``RLHFDataset``;
* ``DataDojoActorRolloutRefWorker`` uses verl's ``actor_worker_cls`` extension point.
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch
from _fixtures import FX, MODEL, read_jsonl
from omegaconf import OmegaConf
from tensordict import NonTensorStack, TensorDict
from transformers import AutoTokenizer
from verl.utils import tensordict_utils as tu
from verl.workers.engine.utils import prepare_micro_batches
from verl.workers.utils.padding import left_right_2_no_padding

from datadojo.jsonl import read_tasks
from datadojo.testing.verl import agent_loop, dapo_actor_config
from datadojo.train.export import verl_mixed
from datadojo.train.losses import dapo_loss, mixed_objective, sft_loss
from datadojo.train.tokenize import tokenize_trajectory
from datadojo.types import Trajectory

P, R = 3, 6  # padded prompt / response widths
PROMPT_LENS = [3, 2, 3, 1, 2, 3, 2, 3]
RESP_LENS = [6, 4, 5, 3, 6, 2, 5, 4]
UIDS = ["a", "a", "b", "b", "c", "c", "x", "x"]
ACC = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0]  # group b: all right -> filtered by dynamic sampling


def _flags(with_experts: bool) -> tuple[list[int], list[int]]:
    expert = [0, 0, 0, 0, 0, 0, 1, 1] if with_experts else [0] * 8
    void = [0, 0, 0, 0, 1, 0, 0, 0]  # row 4 (group c) has a void turn
    return expert, void


def _batch(with_experts: bool, *, simple: bool = False) -> tuple[TensorDict, dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(7)
    n = len(PROMPT_LENS)
    prompts = torch.zeros(n, P, dtype=torch.long)
    responses = torch.zeros(n, R, dtype=torch.long)
    attention = torch.zeros(n, P + R, dtype=torch.long)
    response_mask = torch.zeros(n, R, dtype=torch.long)
    for i, (pl, rl) in enumerate(zip(PROMPT_LENS, RESP_LENS, strict=True)):
        prompts[i, P - pl :] = torch.randint(5, 100, (pl,), generator=g)
        responses[i, :rl] = torch.randint(5, 100, (rl,), generator=g)
        attention[i, P - pl : P + rl] = 1
        response_mask[i, :rl] = 1
    response_mask[0, 2] = 0  # an environment token inside a response
    input_ids = torch.cat([prompts, responses], dim=1)
    position_ids = (attention.cumsum(-1) - 1).clamp_min(0)
    logp = (torch.randn(n, R, generator=g) * 0.3 - 1.0) * response_mask
    old = (logp + torch.randn(n, R, generator=g) * 0.2) * response_mask
    adv = torch.tensor([0.9, -0.9, 0.0, 0.0, -0.7, 0.7, 0.0, 0.0]).unsqueeze(1).expand(n, R) * response_mask
    expert, void = _flags(with_experts)
    if simple:  # no void rows, every group mixed: the plain-DAPO comparison
        void = [0] * n
    acc = [1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0] if simple else ACC
    extra = [
        {"datadojo_expert": e, "datadojo_void": v, "reward_extra_info": {"acc": a}}
        for e, v, a in zip(expert, void, acc, strict=True)
    ]
    td = TensorDict(
        {
            "prompts": prompts,
            "responses": responses,
            "input_ids": input_ids,
            "attention_mask": attention,
            "position_ids": position_ids,
            "response_mask": response_mask,
            "old_log_probs": old.float(),
            "advantages": adv.float().contiguous(),
            "extra_fields": NonTensorStack(*extra),
            "uid": NonTensorStack(*UIDS),
        },
        batch_size=[n],
    )
    ref = {"logp": logp, "old": old, "adv": adv, "mask": response_mask.float(), "acc": torch.tensor(acc)}
    ref["expert"], ref["void"] = torch.tensor(expert).bool(), torch.tensor(void).bool()
    return td, ref


def _model_output(mb: TensorDict, leaf: torch.Tensor, rows: range) -> dict[str, Any]:
    """What verl's engine passes the loss: per-token log-probs as a jagged tensor over prompt + response,
    position j holding log π(token j+1) (verl's left shift, undone by ``no_padding_2_padding``)."""
    pieces = []
    for k, i in enumerate(rows):
        pl, rl = PROMPT_LENS[i], RESP_LENS[i]
        assert int(mb["input_ids"].offsets().diff()[k]) == pl + rl
        pieces += [torch.zeros(pl - 1), leaf[i, :rl], torch.zeros(1)]
    values = torch.cat(pieces)
    return {"log_probs": torch.nested.nested_tensor_from_jagged(values, offsets=mb["input_ids"].offsets())}


def _actor_config() -> Any:
    return dapo_actor_config(rollout_n=2, mini_batch=4, micro_batch=2)


def _through_verl(
    td: TensorDict,
    ref: dict[str, torch.Tensor],
    gamma: float,
    loss_fn: Any,
    aggregation: str = "query_token_mean",
) -> tuple[float, torch.Tensor]:
    """verl's path: no-padding conversion, the worker's annotations, micro-batches, the loss per micro-batch."""
    data = left_right_2_no_padding(td)
    verl_mixed.annotate_step_batch(data, None)  # DataDojoTrainingWorker.train_mini_batch
    tu.assign_non_tensor(
        data,
        use_dynamic_bsz=False,
        micro_batch_size_per_gpu=2,
        datadojo_gamma=gamma,
        datadojo_loss_aggregation=aggregation,  # what DataDojoMixedTrainer puts into extra_info
        dp_size=1,
        batch_num_tokens=int(data["loss_mask"].values().sum())
        if data["loss_mask"].is_nested
        else int(data["loss_mask"].sum()),
        global_batch_size=data.shape[0],
    )
    verl_mixed.annotate_mini_batch(data, None)  # DataDojoTrainingWorker.train_batch
    micro, _ = prepare_micro_batches(data)
    assert len(micro) == 4
    leaf = ref["logp"].clone().float().requires_grad_(True)
    total = 0.0
    for k, mb in enumerate(micro):
        loss, _metrics = loss_fn(
            model_output=_model_output(mb, leaf, range(2 * k, 2 * k + 2)), data=mb, dp_group=None
        )
        loss.backward()
        total += float(loss.item())
    return total, leaf.grad


def _reference(
    ref: dict[str, torch.Tensor], gamma: float, aggregation: str = "query_token_mean"
) -> tuple[float, torch.Tensor]:
    """The formulas of datadojo.train.losses on the whole mini-batch (groups: verl's uid)."""
    from datadojo.train.losses import aggregation_normalization, dynamic_sampling_keep

    leaf = ref["logp"].clone().float().requires_grad_(True)
    live = ~ref["void"]
    rollout = live & ~ref["expert"]
    gid = torch.tensor([{"a": 0, "b": 1, "c": 2, "x": 3}[u] for u in UIDS])
    keep = torch.zeros(8, dtype=torch.bool)
    # dynamic sampling over the rollout rows (the void row still counts as a member of its group)
    not_expert = ~ref["expert"]
    keep[not_expert] = dynamic_sampling_keep(ref["acc"][not_expert] > 0.5, gid[not_expert])
    pol = rollout & keep
    exp = live & ref["expert"]
    sft = sft_loss(leaf[exp], ref["mask"][exp]) if exp.any() else leaf.sum() * 0
    dapo = dapo_loss(
        leaf[pol],
        ref["old"][pol],
        ref["adv"][pol],
        ref["mask"][pol],
        group_ids=gid[pol],
        normalization=aggregation_normalization(aggregation),
    ).loss
    loss = mixed_objective(sft, dapo, gamma)
    loss.backward()
    return float(loss.item()), leaf.grad


@pytest.mark.parametrize("aggregation", ["query_token_mean", "batch_token_mean"])
@pytest.mark.parametrize("with_experts", [True, False], ids=["with-experts", "no-experts"])
@pytest.mark.parametrize("gamma", [0.9, 0.37, 0.05])
def test_mixed_loss_through_verls_micro_batches_equals_datadojo_losses(
    with_experts: bool, gamma: float, aggregation: str
) -> None:
    td, ref = _batch(with_experts)
    loss_fn = partial(verl_mixed.datadojo_mixed_loss, _actor_config())
    got, grad = _through_verl(td, ref, gamma, loss_fn, aggregation)
    want, want_grad = _reference(ref, gamma, aggregation)
    assert got == pytest.approx(want, rel=1e-5, abs=1e-7)
    assert torch.allclose(grad, want_grad, rtol=1e-5, atol=1e-7)
    # the void row and the filtered group b get no gradient; the expert rows do only with experts
    assert torch.all(grad[4] == 0) and torch.all(grad[2:4] == 0)
    assert bool(grad[6:].abs().sum() > 0) is with_experts


def test_at_gamma_zero_without_experts_it_is_verls_own_dapo_loss() -> None:
    from verl.workers.utils.losses import ppo_loss

    td, ref = _batch(False, simple=True)
    td2, _ = _batch(False, simple=True)
    ours, g_ours = _through_verl(
        td, ref, 0.0, partial(verl_mixed.datadojo_mixed_loss, _actor_config()), "batch_token_mean"
    )
    theirs, g_theirs = _through_verl(td2, ref, 0.0, partial(ppo_loss, _actor_config()))
    assert torch.exp(ref["logp"] - ref["old"]).max() < 3.0  # below verl's dual clip
    assert ours == pytest.approx(theirs, rel=1e-5, abs=1e-7)
    assert torch.allclose(g_ours, g_theirs, rtol=1e-5, atol=1e-7)


def test_the_loss_refuses_a_batch_without_gamma() -> None:
    td, _ = _batch(True)
    data = left_right_2_no_padding(td)
    verl_mixed.annotate_step_batch(data, None)
    verl_mixed.annotate_mini_batch(data, None)
    with pytest.raises(ValueError, match="trainer_mode=datadojo_mixed"):
        verl_mixed.datadojo_mixed_loss(_actor_config(), {"log_probs": None}, data)


def _oracle() -> Trajectory:
    rows = read_jsonl(FX / "spider" / "run" / "trajectories.jsonl")
    return Trajectory.model_validate(rows[0])


def test_expert_agent_loop_replays_the_expert_token_for_token() -> None:
    verl_mixed.register()
    tok = AutoTokenizer.from_pretrained(MODEL)
    loop = agent_loop(verl_mixed.EXPERT_AGENT, tokenizer=tok, response_length=8192, prompt_length=8192)
    traj = _oracle()
    out = asyncio.run(loop.run({}, extra_info={"task_id": traj.task_id, "expert": traj.model_dump_json()}))
    ex = tokenize_trajectory(traj, tok)
    assert out.prompt_ids + out.response_ids == ex.input_ids
    assert [0] * len(out.prompt_ids) + out.response_mask == ex.loss_mask
    assert out.response_mask[0] == 1 and 0 in out.response_mask  # observations are masked
    assert out.extra_fields["datadojo_expert"] == 1 and out.extra_fields["datadojo_void"] == 0
    with pytest.raises(ValueError, match="extra_info\\['expert'\\]"):
        asyncio.run(loop.run({}, extra_info={"task_id": "t"}))


def test_export_verl_mixed_loads_in_rlhf_dataset(tmp_path: Path) -> None:
    from verl.utils.dataset.rl_dataset import RLHFDataset

    tasks = list(read_tasks(FX / "spider" / "tasks.jsonl"))
    experts = [Trajectory.model_validate(r) for r in read_jsonl(FX / "spider" / "run" / "trajectories.jsonl")]
    report = verl_mixed.export_verl_mixed(tasks, experts, tmp_path, agent_name="datadojo")
    cfg = OmegaConf.create(
        {
            "prompt_key": "prompt",
            "max_prompt_length": 16384,
            "return_raw_chat": True,
            "truncation": "error",
            "filter_overlong_prompts": False,
            "cache_dir": str(tmp_path / "cache"),
        }
    )
    ds = RLHFDataset(str(tmp_path / "train.parquet"), AutoTokenizer.from_pretrained(MODEL), cfg)
    names = [ds[i]["agent_name"] for i in range(len(ds))]
    assert names.count("datadojo") == len(tasks) and names.count("datadojo_expert") >= 1
    assert len(ds) == report.written - 0 or len(ds) == names.count("datadojo") + names.count(
        "datadojo_expert"
    )
    row = next(ds[i] for i in range(len(ds)) if ds[i]["agent_name"] == "datadojo_expert")
    traj = Trajectory.model_validate_json(row["extra_info"]["expert"])
    assert traj.task_id == row["extra_info"]["task_id"]
    assert json.loads(row["extra_info"]["task"])["id"] == traj.task_id


def test_worker_plugs_in_through_verls_extension_points() -> None:
    from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker

    classes = verl_mixed.register()
    actor, training = classes["DataDojoActorRolloutRefWorker"], classes["DataDojoTrainingWorker"]
    assert issubclass(actor, ActorRolloutRefWorker) and issubclass(training, TrainingWorker)
    assert actor.actor_worker_cls is training
    from verl.single_controller.base.decorator import MAGIC_ATTR

    assert getattr(actor.init_model, MAGIC_ATTR) == getattr(ActorRolloutRefWorker.init_model, MAGIC_ATTR)


TRAINER_SCRIPT = r"""
import json, sys, types
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf, open_dict
from datadojo.train.export import verl_mixed
from datadojo.train.schedules import GammaSchedule

classes = verl_mixed.register()
from verl.trainer.ppo.v1 import get_trainer_cls
from verl.workers.engine_workers import ActorRolloutRefWorker

cls = get_trainer_cls(verl_mixed.TRAINER_MODE)
assert cls is classes["DataDojoMixedTrainer"], cls
with initialize_config_module("verl.trainer.config", version_base=None):
    cfg = compose("ppo_trainer", overrides=["trainer.v1.trainer_mode=datadojo_mixed",
        "+datadojo.gamma.start=0.9", "+datadojo.gamma.end=0.05", "+datadojo.dynamic_sampling=true"])
trainer = cls.__new__(cls)
trainer.config = cfg
trainer._init_resource_pool_mgr()
workers = [getattr(c, "__ray_actor_class__", None) for c in trainer.role_worker_mapping.values()]
assert classes["DataDojoActorRolloutRefWorker"] in workers and ActorRolloutRefWorker not in workers, workers

class WG:
    def update_actor(self, batch):
        self.batch = batch
        return {"metrics": {"mfu": [0.5], "pg_loss": [1.0]}}

trainer.actor_rollout_wg = WG()
trainer.global_steps, trainer.total_training_steps = 3, 10
trainer.distillation_config = None
batch = types.SimpleNamespace(extra_info={})
metrics = {}
cls._update_actor(trainer, batch, metrics)
want = GammaSchedule(total_steps=10)(2)
info = trainer.actor_rollout_wg.batch.extra_info
print(json.dumps({"gamma": info["datadojo_gamma"], "want": want, "dyn": info["datadojo_dynamic_sampling"],
                  "logged": metrics["datadojo/gamma"], "mini": info["mini_batch_size"],
                  "agg": info["datadojo_loss_aggregation"]}))
"""


def test_trainer_mode_sets_gamma_per_step_and_swaps_the_actor_worker(tmp_path: Path) -> None:
    """verl's v1 trainers import TransferQueue, which this pinned environment lacks: a stand-in module makes
    ``verl.trainer.ppo.v1`` importable; the trainer's own methods then run on verl's composed config."""
    import os
    import subprocess
    import sys

    (tmp_path / "transfer_queue.py").write_text(
        "class _Any:\n    def __init__(self, *a, **k): pass\n"
        "def __getattr__(name):\n    return type(name, (_Any,), {})\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{os.environ.get('PYTHONPATH', '')}:{tmp_path}"}
    proc = subprocess.run(
        [sys.executable, "-c", TRAINER_SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["gamma"] == pytest.approx(got["want"]) == pytest.approx(got["logged"])
    assert 0.05 < got["gamma"] < 0.9 and got["dyn"] is True and got["mini"] > 0
    assert got["agg"] == "query_token_mean"  # DataMind §4's reading, the default


@pytest.mark.parametrize("name", ["datamind", "envlunch"])
def test_paper_configs_compose_with_verls_config(name: str) -> None:
    """The shipped configs are valid Hydra configs of this verl (unknown keys would be refused) and carry
    the papers' settings (DataMind §5.1, EnvLunch §4)."""
    import subprocess
    import sys

    from datadojo.train.export import verl_configs

    args = ["--config-path", verl_configs.DIR, "--config-name", name, "--cfg", "job"]
    args += ["data.train_files=t.parquet", "data.val_files=v.parquet", "actor_rollout_ref.model.path=m"]
    proc = subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    c = OmegaConf.create(proc.stdout)
    actor, rollout = c.actor_rollout_ref.actor, c.actor_rollout_ref.rollout
    assert (actor.clip_ratio_low, actor.clip_ratio_high) == (0.2, 0.28)
    assert rollout.agent.default_agent_loop == "datadojo" and c.algorithm.adv_estimator == "datadojo_grpo"
    assert (
        c.ray_kwargs.ray_init.runtime_env.worker_process_setup_hook
        == "datadojo.train.export.verl_agent.register"
    )
    if name == "datamind":
        assert (c.data.train_batch_size, actor.ppo_mini_batch_size, rollout.n) == (32, 4, 4)
        assert rollout.multi_turn.max_assistant_turns == 10 and actor.loss_agg_mode == "token-mean"
        assert c.trainer.v1.trainer_mode == verl_mixed.TRAINER_MODE
        assert (c.datadojo.gamma.start, c.datadojo.gamma.end, c.datadojo.gamma.mode) == (0.9, 0.05, "cosine")
        assert c.datadojo.loss_aggregation == "query_token_mean"
        assert not actor.use_kl_loss and actor.entropy_coeff == 0 and not c.algorithm.filter_groups.enable
    else:
        assert (
            rollout.n == 8
            and c.data.train_batch_size * rollout.n // (actor.ppo_mini_batch_size * rollout.n) == 4
        )
        assert actor.ppo_mini_batch_size * rollout.n == 32
        assert (
            actor.optim.lr == 1e-6
            and list(actor.optim.betas) == [0.9, 0.98]
            and actor.optim.weight_decay == 0.01
        )
        assert actor.use_kl_loss and actor.kl_loss_type == "low_var_kl" and actor.kl_loss_coef == 0.01
        assert actor.entropy_coeff == 0.001 and rollout.temperature == 1.0
        assert c.algorithm.rollout_correction.rollout_is == "token"
        assert c.algorithm.rollout_correction.rollout_is_threshold == 1.5

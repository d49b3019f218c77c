"""verl (pinned in requirements/verl.txt): DataDojo's parquet and DAPO loss inside verl.

* ``RLHFDataset`` reads both exports (oracle Spider tasks, EnvLunch warm-up tasks): every row is routed to
  DataDojo's agent loop (``agent_name: datadojo``) and carries the task, whose data files exist; the
  exported ``agent_loops.yaml`` loads in verl's agent-loop registry format (the loop itself is driven in
  ``test_verl_agent.py``, the γ-mixed loss in ``test_verl_mixed.py``);
* the ``datadojo_dapo`` policy loss, called as ``verl/workers/utils/losses.py`` calls a registered loss
  (``config.global_batch_info`` filled per micro-batch, ``rollout_is_weights``), equals verl's own
  ``vanilla`` loss with DAPO's clip-higher settings, micro-batch by micro-batch, with equal gradients;
* the documented ``main_ppo`` command (docs/training.md) composes with verl's own Hydra config.

verl's ``tool_agent`` path (a sandbox tool and a flat-text reward) was removed in issue 37.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from _fixtures import EXPORTS, MANIFEST, MODEL
from omegaconf import OmegaConf
from transformers import AutoTokenizer

from datadojo.train.export import verl_loss
from datadojo.train.export.verl import AGENT_NAME
from datadojo.train.export.verl_agent import task_from_row

KINDS = ["spider", "warmup"]


def _dataset(kind: str, tmp_path: Path) -> Any:
    from verl.utils.dataset.rl_dataset import RLHFDataset

    out = EXPORTS / f"verl_{kind}"
    config = OmegaConf.create(
        {
            "prompt_key": "prompt",
            "max_prompt_length": 16384,
            "return_raw_chat": True,
            "truncation": "error",
            "filter_overlong_prompts": True,
            "filter_overlong_prompts_workers": 1,
            "cache_dir": str(tmp_path / "cache"),
        }
    )
    return RLHFDataset(str(out / "train.parquet"), AutoTokenizer.from_pretrained(MODEL), config)


@pytest.mark.parametrize("kind", KINDS)
def test_rlhf_dataset_reads_the_export(kind: str, tmp_path: Path) -> None:
    ds = _dataset(kind, tmp_path)
    assert len(ds) == MANIFEST["written"][f"verl/{kind}"] >= 1
    for i in range(len(ds)):
        row = ds[i]
        assert [m["role"] for m in row["raw_prompt"]] == ["system", "user"]
        assert row["agent_name"] == AGENT_NAME
        info = row["extra_info"]
        task = task_from_row(row["data_source"], row["reward_model"]["ground_truth"], info)
        assert task.id == info["task_id"] and task.files and all(Path(f.path).exists() for f in task.files)
        if kind == "warmup":  # EnvLunch rows find their counterfactual copies
            assert (Path(info["tasks_dir"]) / "tasks.jsonl").exists()
    loops = OmegaConf.load(EXPORTS / f"verl_{kind}" / "agent_loops.yaml")
    assert [(c["name"], c["_target_"]) for c in loops] == [
        (AGENT_NAME, "datadojo.train.export.verl_agent.DataDojoAgentLoop")
    ]


MODES = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm", "token-sum"]


def _actor_config(loss_mode: str, agg: str) -> Any:
    from verl.workers.config import FSDPActorConfig, PolicyLossConfig

    return FSDPActorConfig(
        strategy="fsdp",
        rollout_n=4,
        ppo_mini_batch_size=4,
        ppo_micro_batch_size_per_gpu=2,
        clip_ratio=0.2,
        clip_ratio_low=0.2,
        clip_ratio_high=0.28,
        loss_agg_mode=agg,
        policy_loss=PolicyLossConfig(loss_mode=loss_mode),
    )


def _micro_batch_losses(
    loss_mode: str, agg: str, t: dict[str, torch.Tensor]
) -> tuple[list[float], torch.Tensor]:
    """The mini-batch's micro-batch losses as verl's ppo_loss computes them, and the gradient of their sum."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    config = _actor_config(loss_mode, agg)
    log_prob = t["log_prob"].clone().requires_grad_(True)
    mask = t["mask"]
    losses = []
    for sl in (slice(0, 2), slice(2, 4)):
        # what verl/workers/utils/losses.py:ppo_loss does before calling the registered loss
        config.global_batch_info["dp_size"] = 1
        config.global_batch_info["batch_num_tokens"] = int(mask.sum())
        config.global_batch_info["global_batch_size"] = mask.shape[0]
        config.global_batch_info["loss_scale_factor"] = config.loss_scale_factor
        policy_loss_fn = get_policy_loss_fn(config.policy_loss.get("loss_mode", "vanilla"))
        pg_loss, pg_metrics = policy_loss_fn(
            old_log_prob=t["old"][sl],
            log_prob=log_prob[sl],
            advantages=t["adv"][sl],
            response_mask=mask[sl].to(bool),
            loss_agg_mode=config.loss_agg_mode,
            config=config,
            rollout_is_weights=t["is_w"][sl],
        )
        assert all(isinstance(v, float) for v in pg_metrics.values())
        pg_loss.backward()
        losses.append(pg_loss.item())
    return losses, log_prob.grad


@pytest.mark.parametrize("agg", MODES)
def test_policy_loss_equals_verls_dapo_clip_loss(agg: str) -> None:
    assert verl_loss.register()
    torch.manual_seed(0)
    t = {
        "log_prob": torch.randn(4, 7) * 0.3 - 1.0,
        "old": torch.randn(4, 7) * 0.3 - 1.0,
        "adv": torch.tensor([1.2, -0.7, 0.4, -1.1]).unsqueeze(1).expand(4, 7).contiguous(),
        "mask": torch.tensor([[1] * 7, [1] * 3 + [0] * 4, [1] * 5 + [0] * 2, [1] * 6 + [0]]),
        "is_w": torch.rand(4, 7) * 0.5 + 0.75,
    }
    assert torch.exp(t["log_prob"] - t["old"]).max() < 3.0  # below verl's dual clip (clip_ratio_c = 3)
    ours, grad_ours = _micro_batch_losses("datadojo_dapo", agg, t)
    theirs, grad_theirs = _micro_batch_losses("vanilla", agg, t)
    assert ours == pytest.approx(theirs, rel=1e-5, abs=1e-7)
    assert torch.allclose(grad_ours, grad_theirs, rtol=1e-5, atol=1e-7)


def _documented_main_ppo_overrides() -> list[str]:
    """The overrides of the ``main_ppo`` command in docs/training.md (the block after its engine-test marker)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text(encoding="utf-8")
    block = (
        doc.split("<!-- engine-test: verl main_ppo overrides", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    )
    command = block.replace("\\\n", " ").split("python -m verl.trainer.main_ppo", 1)[1].split("\n", 1)[0]
    return command.split()


def test_documented_main_ppo_command_composes_with_verls_config() -> None:
    """Every option of the documented command exists in this verl (Hydra refuses unknown keys)."""
    import subprocess
    import sys

    overrides = _documented_main_ppo_overrides()
    assert "actor_rollout_ref.actor.policy_loss.loss_mode=datadojo_dapo" in overrides
    proc = subprocess.run(
        [sys.executable, "-m", "verl.trainer.main_ppo", *overrides, "--cfg", "job"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = OmegaConf.create(proc.stdout)
    rollout = config.actor_rollout_ref.rollout
    assert config.actor_rollout_ref.actor.policy_loss.loss_mode == "datadojo_dapo"
    assert rollout.agent.default_agent_loop == AGENT_NAME
    assert rollout.agent.agent_loop_config_path == "data/verl/agent_loops.yaml"
    assert config.algorithm.adv_estimator == "datadojo_grpo"
    assert (
        config.ray_kwargs.ray_init.runtime_env.worker_process_setup_hook
        == "datadojo.train.export.verl_agent.register"
    )
    assert rollout.multi_turn.tool_config_path is None  # no tool path any more

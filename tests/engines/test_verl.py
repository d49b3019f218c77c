"""verl (pinned in requirements/verl.txt): DataDojo's parquet, reward, sandbox tool and DAPO loss inside verl.

* ``RLHFDataset`` reads both exports (oracle Spider tasks, EnvLunch warm-up tasks) with the tool config;
* the reward, loaded by verl's ``get_custom_reward_fn`` from the module path the docs give, scores a
  response like DataDojo does (Spider: the benchmark's execution match; warm-up: the reward
  ``datadojo warmup score`` gave the solver's trajectory);
* the sandbox tool, built by ``initialize_tools_from_config`` from the exported ``tool_config.yaml``, is
  driven through ``ToolAgentLoop._call_tool`` — verl's own per-call create / execute / release — for calls
  that depend on each other: the task's files are there at the first call, state is kept across calls of
  one trajectory, not shared with another, and the sandbox is closed when the trajectory ends;
* the ``datadojo_dapo`` policy loss, called as ``verl/workers/utils/losses.py`` calls a registered loss
  (``config.global_batch_info`` filled per micro-batch, ``rollout_is_weights``), equals verl's own
  ``vanilla`` loss with DAPO's clip-higher settings, micro-batch by micro-batch, with equal gradients.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sqlite3
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
import torch
from _fixtures import EXPORTS, MANIFEST, MODEL
from omegaconf import OmegaConf
from transformers import AutoTokenizer

import datadojo.train.export.verl_reward as verl_reward
from datadojo.train.export import verl_loss
from datadojo.train.export.verl_tool import DataDojoSandboxTool

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
            "tool_config_path": str(out / "tool_config.yaml"),
            "cache_dir": str(tmp_path / "cache"),
        }
    )
    return RLHFDataset(str(out / "train.parquet"), AutoTokenizer.from_pretrained(MODEL), config)


@pytest.mark.parametrize("kind", KINDS)
def test_rlhf_dataset_reads_the_export(kind: str, tmp_path: Path) -> None:
    ds = _dataset(kind, tmp_path)
    assert len(ds) == MANIFEST["written"][f"verl/{kind}"] >= 1
    assert ds.tool_schemas and ds.tool_schemas[0]["function"]["name"] == "python"
    for i in range(len(ds)):
        row = ds[i]
        assert [m["role"] for m in row["raw_prompt"]] == ["system", "user"]
        assert row["agent_name"] == "tool_agent"
        files = json.loads(row["tools_kwargs"]["python"]["create_kwargs"]["files_json"])
        assert files and all(Path(f["path"]).exists() for f in files)
        assert row["extra_info"]["task_id"]


def _reward_fn() -> Any:
    from verl.trainer.ppo.reward import get_custom_reward_fn

    config = OmegaConf.create(
        {"reward": {"custom_reward_function": {"path": verl_reward.__file__, "name": "compute_score"}}}
    )
    fn = get_custom_reward_fn(config)
    assert fn is not None
    return fn


def _rows_by_task(kind: str, tmp_path: Path) -> dict[str, dict]:
    ds = _dataset(kind, tmp_path)
    return {ds[i]["extra_info"]["task_id"]: ds[i] for i in range(len(ds))}


def test_reward_through_get_custom_reward_fn_spider(tmp_path: Path) -> None:
    fn = _reward_fn()
    rows = _rows_by_task("spider", tmp_path)
    assert MANIFEST["spider_oracle"]
    for item in MANIFEST["spider_oracle"]:
        row = rows[item["task_id"]]
        args = {
            "data_source": row["data_source"],
            "ground_truth": row["reward_model"]["ground_truth"],
            "extra_info": row["extra_info"],
        }
        right = fn(solution_str=f"<think>gold</think><answer>{item['gold']}</answer>", **args)
        wrong = fn(solution_str="<think>guess</think><answer>SELECT 1 WHERE 0</answer>", **args)
        assert (right["acc"], wrong["acc"]) == (1.0, 0.0), item["task_id"]
        assert right["score"] > wrong["score"]


def test_reward_through_get_custom_reward_fn_matches_warmup_score(tmp_path: Path) -> None:
    fn = _reward_fn()
    rows = _rows_by_task("warmup", tmp_path)
    assert MANIFEST["warmup_rewards"]
    for item in MANIFEST["warmup_rewards"]:
        row = rows[item["task_id"]]
        calls = '<tool_call>{"name": "python", "arguments": {"code": "..."}}</tool_call>' * item["tool_turns"]
        got = fn(
            data_source=row["data_source"],
            solution_str=f"{calls}<answer>{item['final_answer']}</answer>",
            ground_truth=row["reward_model"]["ground_truth"],
            extra_info=row["extra_info"],
        )
        assert got["score"] == pytest.approx(item["reward"]), item["task_id"]


def _agent_data(row: dict) -> Any:
    from verl.experimental.agent_loop.tool_agent_loop import AgentData

    return AgentData(
        messages=list(row["raw_prompt"]),
        image_data=[],
        video_data=[],
        audio_data=None,
        mm_processor_kwargs=None,
        metrics={},
        request_id=uuid4().hex,
        tools_kwargs=row["tools_kwargs"],
    )


def test_tool_through_tool_agent_loop_call_tool(tmp_path: Path) -> None:
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
    from verl.experimental.agent_loop.tool_parser import FunctionCall
    from verl.tools.tool_registry import initialize_tools_from_config

    tools = initialize_tools_from_config(str(EXPORTS / "verl_spider" / "tool_config.yaml"))
    assert len(tools) == 1 and isinstance(tools[0], DataDojoSandboxTool)
    tool = tools[0]
    # _call_tool is verl's own method; only the attributes it reads are set (no inference server here)
    loop = ToolAgentLoop.__new__(ToolAgentLoop)
    loop.tools = {t.name: t for t in tools}
    loop.max_tool_response_length = 8192
    loop.tool_response_truncate_side = "middle"

    row = next(iter(_rows_by_task("spider", tmp_path).values()))
    db = json.loads(row["tools_kwargs"]["python"]["create_kwargs"]["files_json"])[0]
    name = Path(db.get("name") or db["path"]).name
    with sqlite3.connect(db["path"]) as con:
        table = con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name").fetchone()[0]
        n_rows = con.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0]

    async def call(agent_data: Any, code: str) -> str:
        fc = FunctionCall(name="python", arguments=json.dumps({"code": code}))
        response, reward, _ = await loop._call_tool(fc, agent_data.tools_kwargs, agent_data)
        assert reward == 0.0
        return response.text or ""

    async def go() -> None:
        a, b = _agent_data(row), _agent_data(row)
        # 1: the task's database is there at the first call
        first = await call(
            a, f"import os, sqlite3\ncon = sqlite3.connect({name!r})\nprint(sorted(os.listdir('.')))"
        )
        assert name in first, first
        # 2 and 3 depend on 1 and 2: the connection and the variables survive verl's per-call instances
        assert "Error" not in await call(
            a, f"n = con.execute('SELECT COUNT(*) FROM \"{table}\"').fetchone()[0]"
        )
        assert (await call(a, "print(n + 1)")).strip() == str(n_rows + 1)
        # another trajectory has its own sandbox
        assert "NameError" in await call(b, "print(n)")
        live = set(tool.live_trajectories)
        assert live == {f"request:{a.request_id}", f"request:{b.request_id}"}
        # the trajectory ends when verl drops its AgentData: its sandbox is closed
        key = f"request:{a.request_id}"
        del a
        gc.collect()
        await tool.wait_ended()
        assert key not in tool.live_trajectories
        assert tool.live_trajectories == [f"request:{b.request_id}"]
        await tool.close_all()

    asyncio.run(go())


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
    return [arg.replace("$REWARD", verl_reward.__file__) for arg in command.split()]


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
    assert config.actor_rollout_ref.actor.policy_loss.loss_mode == "datadojo_dapo"
    assert config.reward.custom_reward_function.path == verl_reward.__file__
    assert config.algorithm.filter_groups.enable is True
    assert config.actor_rollout_ref.rollout.multi_turn.tool_config_path == "data/verl/tool_config.yaml"

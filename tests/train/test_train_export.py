"""Exports for LLaMA-Factory, TRL and verl checked against their schemas; the verl loss called as verl does."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from datadojo.agent import AgentConfig
from datadojo.env.prompts import episode_prompt
from datadojo.protocol import get_dialect
from datadojo.protocol.messages import messages_to_trajectory
from datadojo.train.export import ExportError
from datadojo.train.export.llamafactory import export_llamafactory, trajectory_to_sharegpt
from datadojo.train.export.trl import export_trl
from datadojo.train.export.verl import VERL_SCHEMA, export_verl
from datadojo.train.export.verl_agent import task_from_row
from datadojo.train.toy import synthetic_trajectory
from datadojo.types import Action, DataFile, Observation, Task, Trajectory

REPO = Path(__file__).resolve().parents[2]
SALES = REPO / "examples" / "data" / "sales.csv"


def _ends_with_observation() -> Trajectory:
    """An episode that ran out of turns right after a code step."""
    d = get_dialect("datamind")
    turn = d.parse_turn(d.format_turn("look", Action(kind="code", text="print(1)"))).to_turn(
        Observation(text="1")
    )
    return Trajectory(
        task_id="maxed",
        prompt=[{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}],
        turns=[turn],
        stop_reason="max_turns",
    )


def test_llamafactory_sharegpt_and_dataset_info(tmp_path: Path) -> None:
    trajs = [synthetic_trajectory("a"), synthetic_trajectory("v", void=True), _ends_with_observation()]
    (tmp_path / "dataset_info.json").write_text(json.dumps({"other": {"file_name": "x.json"}}))
    report = export_llamafactory(trajs, tmp_path, name="dd")
    assert (report.written, report.skipped_void) == (2, 1)
    records = [json.loads(x) for x in (tmp_path / "dd.jsonl").read_text().splitlines()]
    for rec in records:
        roles = [m["from"] for m in rec["conversations"]]
        # LLaMA-Factory's rule: human/observation at odd positions (1-based), gpt at even ones, ending with gpt
        assert all(r in ("human", "observation") for r in roles[0::2])
        assert all(r == "gpt" for r in roles[1::2]) and roles[-1] == "gpt"
        assert set(rec) == {"conversations", "system"}
    first = records[0]["conversations"]
    assert [m["from"] for m in first] == ["human", "gpt", "observation", "gpt", "observation", "gpt"]
    assert first[2]["value"].startswith("<interpreter>") and "<answer>42</answer>" in first[-1]["value"]
    assert [m["from"] for m in records[1]["conversations"]] == [
        "human",
        "gpt",
    ]  # trailing observation dropped
    info = json.loads((tmp_path / "dataset_info.json").read_text())
    assert info["other"] == {"file_name": "x.json"}  # other entries kept
    entry = info["dd"]
    assert entry["file_name"] == "dd.jsonl" and entry["formatting"] == "sharegpt"
    assert entry["columns"] == {"messages": "conversations", "system": "system"}
    assert entry["tags"]["observation_tag"] == "observation" and entry["tags"]["assistant_tag"] == "gpt"
    human = trajectory_to_sharegpt(trajs[0], observation_role="human")
    assert [m["from"] for m in human["conversations"]][2] == "human"


def test_llamafactory_rejects_few_shot_prompts() -> None:
    traj = synthetic_trajectory("f")
    traj = traj.model_copy(
        update={
            "prompt": [
                *traj.prompt,
                {"role": "assistant", "content": "example"},
                {"role": "user", "content": "q"},
            ]
        }
    )
    with pytest.raises(ExportError, match="'f'"):
        trajectory_to_sharegpt(traj)


def test_trl_messages_round_trip(tmp_path: Path) -> None:
    trajs = [synthetic_trajectory("a"), synthetic_trajectory("v", void=True)]
    out = tmp_path / "trl.jsonl"
    report = export_trl(trajs, out)
    assert (report.written, report.skipped_void) == (1, 1)
    (rec,) = [json.loads(x) for x in out.read_text().splitlines()]
    assert set(rec) == {"messages"} and all(set(m) == {"role", "content"} for m in rec["messages"])
    back = messages_to_trajectory(rec["messages"], task_id="a")
    assert [t.raw for t in back.turns] == [t.raw for t in trajs[0].turns]
    masked = export_trl(trajs[:1], tmp_path / "m.jsonl", with_masks=True)
    assert masked.written == 1
    flags = [m["train"] for m in json.loads((tmp_path / "m.jsonl").read_text())["messages"]]
    assert flags == [False, False, True, False, True, False, True]


def _task(answer: object = 240, **kw: object) -> Task:
    return Task(
        id="rows",
        question="How many orders are there?",
        files=[DataFile.from_path(SALES)],
        answer=answer,
        answer_kind="number",
        **kw,  # type: ignore[arg-type]
    )


def test_verl_parquet_rows_are_for_datadojos_agent_loop(tmp_path: Path) -> None:
    tasks = [_task(), _task(answer=3).model_copy(update={"id": "three"})]
    report = export_verl(tasks, tmp_path, val_fraction=0.5, seed=1, max_turns=7)
    assert report.written == 2
    train = pq.read_table(tmp_path / "train.parquet")
    val = pq.read_table(tmp_path / "val.parquet")
    assert train.schema.equals(VERL_SCHEMA) and val.schema.equals(VERL_SCHEMA)
    rows = train.to_pylist() + val.to_pylist()
    for row in rows:
        assert set(row) == {"data_source", "prompt", "ability", "reward_model", "extra_info", "agent_name"}
        assert row["agent_name"] == "datadojo"
        info = row["extra_info"]
        task = task_from_row(row["data_source"], row["reward_model"]["ground_truth"], info)
        assert task.id == info["task_id"] and json.loads(row["reward_model"]["ground_truth"]) == task.answer
        assert task.files[0].path == str(SALES) and info["max_turns"] == 7 and info["dialect"] == "datamind"
        # the prompt verl's dataset measures is the one the agent loop sends (no `python` tool any more)
        assert row["prompt"] == episode_prompt(task, AgentConfig(max_turns=7, dialect="datamind"))
        assert (
            "sales.csv" in row["prompt"][0]["content"] and "`python` tool" not in row["prompt"][0]["content"]
        )
        assert row["reward_model"]["style"] == "rule" and row["ability"] == "data_analysis"
    assert {r["extra_info"]["split"] for r in rows} == {"train", "val"}
    assert not (tmp_path / "tool_config.yaml").exists()
    loops = json.loads((tmp_path / "agent_loops.yaml").read_text())
    assert loops == [{"name": "datadojo", "_target_": "datadojo.train.export.verl_agent.DataDojoAgentLoop"}]
    yaml = pytest.importorskip("yaml")
    assert yaml.safe_load((tmp_path / "agent_loops.yaml").read_text()) == loops  # JSON is YAML
    assert any("agent_loop_config_path=" in n for n in report.notes)


def test_verl_tool_agent_path_is_removed_with_a_migration_note(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match=r"tool_agent path .* was removed.*agent_loops\.yaml"):
        export_verl([_task()], tmp_path, agent_loop="tool_agent")
    with pytest.raises(ExportError, match="unknown agent loop 'react'"):
        export_verl([_task()], tmp_path, agent_loop="react")
    assert not list(tmp_path.iterdir())  # refused before anything is written
    for gone in ("verl_tool", "verl_reward"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"datadojo.train.export.{gone}")


def test_verl_task_from_row_without_the_task_json() -> None:
    """A row written by hand (no extra_info.task): the ground truth alone makes the task."""
    task = task_from_row("dabench", '{"n": 240}', {"task_id": "t7"})
    assert (task.id, task.answer, task.source, task.files) == ("t7", {"n": 240}, "dabench", [])
    assert task_from_row("x", "not json", None).answer == "not json"


class _ActorConfig(dict):
    """The part of verl's ActorConfig a policy loss reads (verl's config supports ``.get`` and attributes)."""

    __getattr__ = dict.get


def _verl_agg_loss(loss_mat, mask, mode, dp_size=1, batch_num_tokens=None, global_batch_size=None):  # type: ignore[no-untyped-def]
    """verl 0.9.1's agg_loss, transcribed for the modes checked here (the engine test calls verl's own)."""
    m = mask.float()
    if mode == "token-mean":
        n = m.sum() if batch_num_tokens is None else batch_num_tokens
        return (loss_mat * m).sum() / n * dp_size
    per_seq = m.sum(-1)
    n = (per_seq > 0).float().sum() if global_batch_size is None else global_batch_size
    seq_losses = (loss_mat * m).sum(-1) / (per_seq + 1e-8)
    return (seq_losses * (per_seq > 0).float()).sum() / n * dp_size


def test_verl_policy_loss_takes_verls_call_and_global_batch_info() -> None:
    torch = pytest.importorskip("torch")
    from datadojo.train.export.verl_loss import compute_policy_loss_datadojo_dapo, register
    from datadojo.train.losses import dapo_loss

    torch.manual_seed(0)
    logp, old = torch.randn(4, 5) * 0.3, torch.randn(4, 5) * 0.3
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5]).unsqueeze(1).expand(4, 5).contiguous()
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0]]).bool()
    is_w = torch.rand(4, 5) + 0.5
    ratio = torch.exp(logp - old)
    per_token = -torch.minimum(ratio * adv, torch.clamp(ratio, 0.8, 1.28) * adv) * is_w  # DataMind §4
    for mode in ("token-mean", "seq-mean-token-mean"):
        # called exactly as verl 0.9's workers/utils/losses.py calls a registered policy loss
        full = compute_policy_loss_datadojo_dapo(
            old_log_prob=old,
            log_prob=logp,
            advantages=adv,
            response_mask=mask,
            loss_agg_mode=mode,
            config=_ActorConfig(
                clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.28, global_batch_info={}
            ),
            rollout_is_weights=is_w,
        )[0]
        assert full.item() == pytest.approx(_verl_agg_loss(per_token, mask, mode).item(), rel=1e-6)
        # two micro-batches with the mini-batch's global counts add up to the whole (gradient accumulation)
        info = {
            "dp_size": 1,
            "batch_num_tokens": int(mask.sum()),
            "global_batch_size": 4,
            "loss_scale_factor": None,
        }
        parts = [
            compute_policy_loss_datadojo_dapo(
                old_log_prob=old[sl],
                log_prob=logp[sl],
                advantages=adv[sl],
                response_mask=mask[sl],
                loss_agg_mode=mode,
                config=_ActorConfig(clip_ratio_low=0.2, clip_ratio_high=0.28, global_batch_info=info),
                rollout_is_weights=is_w[sl],
                unknown_future_argument=1,  # **kwargs: a later verl may pass more
            )[0]
            for sl in (slice(0, 2), slice(2, 4))
        ]
        assert (parts[0] + parts[1]).item() == pytest.approx(full.item(), rel=1e-6)
        # dp_size 2: each rank's loss is scaled so that DDP's gradient average gives the global mean
        one, two = (
            compute_policy_loss_datadojo_dapo(
                old[:2],
                logp[:2],
                adv[:2],
                mask[:2],
                mode,
                _ActorConfig(global_batch_info={**info, "dp_size": dp}),
            )[0]
            for dp in (1, 2)
        )
        assert two.item() == pytest.approx(2 * one.item(), rel=1e-6)
    loss, metrics = compute_policy_loss_datadojo_dapo(old, logp, adv, mask, "token-mean", None)
    assert loss.item() == pytest.approx(dapo_loss(logp, old, adv, mask, normalization="token").loss.item())
    assert set(metrics) == {"actor/pg_clipfrac", "actor/ppo_kl", "actor/ppo_ratio_mean"}
    assert all(isinstance(v, float) for v in metrics.values())
    with pytest.raises(ValueError, match="loss_agg_mode"):
        compute_policy_loss_datadojo_dapo(old, logp, adv, mask, "seq-sum")
    with pytest.raises(ValueError, match="batch_num_tokens is required"):
        compute_policy_loss_datadojo_dapo(
            old, logp, adv, mask, "token-mean", _ActorConfig(global_batch_info={"dp_size": 2})
        )
    try:
        import verl  # noqa: F401
    except ImportError:
        assert register() is False

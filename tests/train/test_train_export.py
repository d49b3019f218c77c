"""Exports for LLaMA-Factory, TRL and verl checked against their schemas; the verl reward, loss and tool called."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from datadojo.messages import messages_to_trajectory
from datadojo.protocol import get_dialect
from datadojo.train.export import ExportError
from datadojo.train.export.llamafactory import export_llamafactory, trajectory_to_sharegpt
from datadojo.train.export.trl import export_trl
from datadojo.train.export.verl import VERL_SCHEMA, export_verl
from datadojo.train.export.verl_reward import compute_score
from datadojo.train.export.verl_tool import TOOL_SCHEMA, DataDojoSandboxTool
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


def test_verl_parquet_schema_and_tool_config(tmp_path: Path) -> None:
    tasks = [_task(), _task(answer=3).model_copy(update={"id": "three"})]
    report = export_verl(tasks, tmp_path, val_fraction=0.5, seed=1)
    assert report.written == 2
    train = pq.read_table(tmp_path / "train.parquet")
    val = pq.read_table(tmp_path / "val.parquet")
    assert train.schema.equals(VERL_SCHEMA) and val.schema.equals(VERL_SCHEMA)
    rows = train.to_pylist() + val.to_pylist()
    for row in rows:
        assert set(row) == {"data_source", "prompt", "ability", "reward_model", "extra_info", "agent_name"}
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert "sales.csv" in row["prompt"][0]["content"] and "`python` tool" in row["prompt"][0]["content"]
        assert row["reward_model"]["style"] == "rule" and row["ability"] == "data_analysis"
        info = row["extra_info"]
        task = Task.model_validate_json(info["task"])
        assert task.id == info["task_id"] and json.loads(row["reward_model"]["ground_truth"]) == task.answer
        files = json.loads(info["tools_kwargs"]["python"]["create_kwargs"]["files_json"])
        assert files[0]["path"] == str(SALES) and info["need_tools_kwargs"] is True
    assert {r["extra_info"]["split"] for r in rows} == {"train", "val"}
    cfg = json.loads((tmp_path / "tool_config.yaml").read_text())
    (tool,) = cfg["tools"]
    assert tool["class_name"] == "datadojo.train.export.verl_tool.DataDojoSandboxTool"
    assert tool["tool_schema"] == TOOL_SCHEMA
    yaml = pytest.importorskip("yaml")
    assert yaml.safe_load((tmp_path / "tool_config.yaml").read_text()) == cfg  # JSON is YAML


def test_verl_reward_module(tmp_path: Path) -> None:
    export_verl([_task()], tmp_path)
    row = pq.read_table(tmp_path / "train.parquet").to_pylist()[0]

    def score(solution: str) -> dict:  # verl calls it with keywords
        return compute_score(
            data_source=row["data_source"],
            solution_str=solution,
            ground_truth=row["reward_model"]["ground_truth"],
            extra_info=row["extra_info"],
        )

    right = "<think>count</think><tool_call>{}</tool_call> ... <think>done</think><answer>240</answer>"
    assert score(right) == {"score": 1.0, "acc": 1.0, "format": 1.0, "length": 1.0}
    wrong = score("<answer>17</answer>")
    assert (wrong["score"], wrong["acc"]) == (0.0, 0.0)
    unanswered = score("<think>hmm")
    assert (unanswered["score"], unanswered["format"]) == (-0.1, 0.0)
    # without extra_info the ground truth alone is enough for a plain answer
    assert (
        compute_score(data_source="datadojo", solution_str="<answer>240</answer>", ground_truth="240")["acc"]
        == 1.0
    )


def test_verl_sandbox_tool_runs_code_on_the_task_files() -> None:
    tool = DataDojoSandboxTool({"type": "native"}, TOOL_SCHEMA)
    assert tool.name == "python"

    async def go() -> tuple[str, str, str]:
        files_json = json.dumps([DataFile.from_path(SALES).to_dict()])
        created = await tool.create("i1", files_json=files_json)
        iid = created[0] if isinstance(created, tuple) else created
        out, reward, metrics = await tool.execute(
            iid, {"code": "import pandas as pd\nprint(len(pd.read_csv('sales.csv')))"}
        )
        err, _, err_metrics = await tool.execute(iid, json.dumps({"code": "1/0"}))  # verl's older string form
        empty, _, _ = await tool.execute(iid, {})
        assert reward == 0.0 and await tool.calc_reward(iid) == 0.0
        assert metrics["status"] == "ok" and err_metrics["status"] == "error"
        await tool.release(iid)
        with pytest.raises(KeyError):
            await tool.execute(iid, {"code": "print(1)"})
        text = [getattr(x, "text", x) for x in (out, err, empty)]
        return text[0], text[1], text[2]

    out, err, empty = asyncio.run(go())
    assert out.strip() == "240"
    assert "ZeroDivisionError" in err
    assert "code" in empty


def test_verl_policy_loss_is_dapo() -> None:
    torch = pytest.importorskip("torch")
    from datadojo.train.export.verl_loss import compute_policy_loss_datadojo_dapo, register
    from datadojo.train.losses import dapo_loss

    torch.manual_seed(0)
    logp, old = torch.randn(2, 3) * 0.1, torch.randn(2, 3) * 0.1
    adv = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    loss, metrics = compute_policy_loss_datadojo_dapo(
        old, logp, adv, mask, "token-mean", {"clip_ratio_high": 0.28}
    )
    assert loss.item() == pytest.approx(dapo_loss(logp, old, adv, mask, normalization="token").loss.item())
    assert "actor/pg_clipfrac" in metrics
    seq, _ = compute_policy_loss_datadojo_dapo(old, logp, adv, mask, "seq-mean-token-mean")
    assert seq.item() == pytest.approx(dapo_loss(logp, old, adv, mask, normalization="sequence").loss.item())
    with pytest.raises(ValueError, match="loss_agg_mode"):
        compute_policy_loss_datadojo_dapo(old, logp, adv, mask, "seq-mean-token-sum-norm")
    try:
        import verl  # noqa: F401
    except ImportError:
        assert register() is False

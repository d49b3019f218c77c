"""``datadojo train sft|rl`` and ``datadojo export`` from the command line, on a tiny checkpoint and tiny files.

The RL runs are real online steps: rollouts through the agent runtime and a real sandbox, generated either
by a scripted OpenAI-compatible server (standing in for vLLM) or by the training model itself in process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.jsonl import append_jsonl, read_trajectories
from datadojo.train.toy import synthetic_trajectory
from datadojo.types import DataFile, Task

REPO = Path(__file__).resolve().parents[2]
SALES = REPO / "examples" / "data" / "sales.csv"
runner = CliRunner()


def _json_out(result: Any) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    start = result.stdout.index("{")
    return json.loads(result.stdout[start:])


def _tasks(path: Path, n: int = 2) -> Path:
    tasks = [
        Task(
            id=f"rows{i}",
            question="How many orders?",
            files=[DataFile.from_path(SALES)],
            answer=240,
            answer_kind="number",
        )
        for i in range(n)
    ]
    append_jsonl(path, tasks)
    return path


def test_train_sft_two_steps(tmp_path: Path, toy_ckpt: Path) -> None:
    data = tmp_path / "traj.jsonl"
    append_jsonl(
        data, [synthetic_trajectory(f"s{i}") for i in range(4)] + [synthetic_trajectory("v", void=True)]
    )
    out = tmp_path / "run"
    res = runner.invoke(
        app,
        ["train", "sft", "--model", f"hf:{toy_ckpt}", "--data", str(data), "--out", str(out),
         "--max-steps", "2", "--batch-size", "2", "--save-every", "0", "--lr", "1e-3"],
    )  # fmt: skip
    summary = _json_out(res)
    assert (summary["steps"], summary["n_examples"], summary["n_void"]) == (2, 4, 1)
    assert (out / "final" / "model.safetensors").exists() and (out / "curves.svg").exists()
    assert json.loads((out / "config.json").read_text())["optim"]["lr"] == 1e-3


def test_train_rl_unknown_reward_is_the_registry_one_line_error(tmp_path: Path, toy_ckpt: Path) -> None:
    tasks = _tasks(tmp_path / "tasks.jsonl")
    res = runner.invoke(
        app,
        ["train", "rl", "--reward", "f1", "--model", str(toy_ckpt), "--tasks", str(tasks), "--steps", "1"],
    )
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "unknown reward 'f1'; known: benchmark, datamind, envlunch, judge, scientific" in res.output


def test_train_sft_errors_are_clear(tmp_path: Path, toy_ckpt: Path) -> None:
    data = tmp_path / "traj.jsonl"
    append_jsonl(data, [synthetic_trajectory("v", void=True)])
    res = runner.invoke(
        app, ["train", "sft", "--model", str(toy_ckpt), "--data", str(data), "--out", str(tmp_path / "r")]
    )
    assert res.exit_code == 2 and "no trainable trajectories" in res.output
    bad = tmp_path / "cfg.toml"
    bad.write_text("epoch = 3\n")
    res = runner.invoke(app, ["train", "sft", "--data", str(data), "--config", str(bad)])
    assert res.exit_code == 2 and "unknown key 'epoch'" in res.output and "cfg.toml" in res.output
    good = tmp_path / "good.jsonl"
    append_jsonl(good, [synthetic_trajectory("g")])
    res = runner.invoke(app, ["train", "sft", "--model", str(tmp_path / "nope"), "--data", str(good)])
    assert res.exit_code == 2 and "no such folder" in res.output and "nope" in res.output
    assert "Traceback" not in res.output


CODE_REPLY = "<think>Count the rows.</think>\n<code>\nimport pandas as pd\nprint(len(pd.read_csv('sales.csv')))\n</code>"


def _script() -> Any:
    """Code first, then an answer; samples of even seed answer right, odd ones wrong (mixed groups)."""

    def reply(request: dict[str, Any]) -> str:
        last = request["messages"][-1]["content"]
        if "<interpreter>" not in last:
            return CODE_REPLY
        right = int(request.get("seed") or 0) % 2 == 0
        return f"<think>Done.</think>\n<answer>{240 if right else 17}</answer>"

    return reply


def _token_script(tok: Any) -> Any:
    """The same script token-in / token-out: the decoded prompt decides the reply, sent as token ids."""
    from datadojo.env.tokens import GenOutput

    def handler(prompt_ids: list[int], sampling: dict[str, Any]) -> GenOutput:
        last = tok.decode(prompt_ids).rsplit("<|im_start|>user", 1)[-1]
        if "<interpreter>" not in last:
            text = CODE_REPLY
        else:
            right = int(sampling.get("seed") or 0) % 2 == 0
            text = f"<think>Done.</think>\n<answer>{240 if right else 17}</answer>"
        ids = [*tok.encode(text, add_special_tokens=False), tok.eos_token_id]
        return GenOutput(ids, [-1.0] * len(ids), "completed")

    return handler


def test_train_rl_one_step_with_a_server_sampler(tmp_path: Path, toy_ckpt: Path, toy_tok: Any) -> None:
    from datadojo.testing.token_server import TokenServer

    tasks = _tasks(tmp_path / "tasks.jsonl")
    experts = tmp_path / "experts.jsonl"
    append_jsonl(experts, [synthetic_trajectory(f"rows{i}", sample=9) for i in range(2)])
    out = tmp_path / "rl"
    with TokenServer(_token_script(toy_tok), reload=lambda path: None) as srv:
        res = runner.invoke(
            app,
            ["train", "rl", "--model", str(toy_ckpt), "--tasks", str(tasks), "--experts", str(experts),
             "--out", str(out), "--sampler", f"openai:scripted@{srv.base_url}/v1", "--steps", "1",
             "--tasks-per-step", "2", "--group-size", "2", "--updates-per-step", "1", "--max-turns", "3",
             "--concurrency", "2", "--lr", "1e-3", "--weight-update", "sglang"],
        )  # fmt: skip
        calls = list(srv.calls)
    summary = _json_out(res)
    assert summary["steps"] == 1 and summary["updates"] == 1
    rec = json.loads((out / "metrics.jsonl").read_text())
    assert rec["gamma"] == pytest.approx(0.9) and rec["sft_loss"] is not None
    # the two samples of a task get different seeds, so one is right and one wrong: every group is kept
    assert rec["frac_groups_filtered"] == 0.0 and rec["policy_loss"] is not None and rec["void_rate"] == 0.0
    scored = list(read_trajectories(out / "rollouts" / "step_000001.rank0.scored.jsonl"))
    assert len(scored) == 4 and all(t.stop_reason == "answer" for t in scored)
    # the real sandbox ran the code: the observation is the true row count
    assert all(t.turns[0].observation.text.strip() == "240" for t in scored)
    assert all(t.rewards["total"] == (1.0 if t.final_answer == "240" else 0.0) for t in scored)
    assert rec["reward_mean"] == pytest.approx(sum(t.rewards["total"] for t in scored) / 4)
    assert rec["accuracy"] == pytest.approx(sum(t.final_answer == "240" for t in scored) / 4)
    # token-in / token-out with the server's log-probs, and the new weights loaded in place after the step
    assert all(t.extra["tokens"]["has_logprobs"] for t in scored)
    assert all(isinstance(body["prompt"], list) for path, body in calls if path.endswith("/completions"))
    loads = [body for path, body in calls if path == "/update_weights_from_disk"]
    assert [b["model_path"] for b in loads] == [str((out / "policy" / "step_000001").resolve())]
    assert rec["policy_lag"] == 0


@pytest.mark.timeout(150)  # generation in a worker thread + sandboxes: fail fast (with stacks) if stuck
def test_train_rl_grpo_with_the_in_process_sampler(tmp_path: Path, toy_ckpt: Path) -> None:
    tasks = _tasks(tmp_path / "tasks.jsonl")
    out = tmp_path / "grpo"
    res = runner.invoke(
        app,
        ["train", "rl", "--preset", "envlunch", "--reward", "datamind", "--model", str(toy_ckpt),
         "--tasks", str(tasks), "--out", str(out), "--steps", "1", "--tasks-per-step", "2", "--group-size", "2",
         "--updates-per-step", "1", "--max-turns", "1", "--max-new-tokens", "6", "--concurrency", "2"],
    )  # fmt: skip
    summary = _json_out(res)
    assert summary["steps"] == 1
    rec = json.loads((out / "metrics.jsonl").read_text())
    # a random model writes no valid turn: every rollout is void and masked out, nothing trains
    assert rec["void_rate"] == 1.0 and rec["policy_loss"] is None and rec["gamma"] == 0.0
    raw = list(read_trajectories(out / "rollouts" / "step_000001.rank0.jsonl"))
    assert len(raw) == 4 and {t.model for t in raw} == {str(toy_ckpt)}


def test_export_commands(tmp_path: Path) -> None:
    data = tmp_path / "traj.jsonl"
    append_jsonl(data, [synthetic_trajectory("a"), synthetic_trajectory("v", void=True)])
    rep = _json_out(
        runner.invoke(app, ["export", "llamafactory", "--data", str(data), "--out", str(tmp_path / "lf")])
    )
    assert rep["written"] == 1 and rep["skipped_void"] == 1
    assert "datadojo" in json.loads((tmp_path / "lf" / "dataset_info.json").read_text())
    rep = _json_out(
        runner.invoke(app, ["export", "trl", "--data", str(data), "--out", str(tmp_path / "trl.jsonl")])
    )
    assert rep["written"] == 1
    tasks = _tasks(tmp_path / "tasks.jsonl")
    rep = _json_out(
        runner.invoke(app, ["export", "verl", "--tasks", str(tasks), "--out", str(tmp_path / "verl")])
    )
    assert rep["written"] == 2 and (tmp_path / "verl" / "train.parquet").exists()
    assert (tmp_path / "verl" / "agent_loops.yaml").exists()
    assert (
        pq.read_table(tmp_path / "verl" / "train.parquet").column("agent_name").to_pylist()
        == ["datadojo"] * 2
    )
    assert any("agent_loop_config_path=" in n for n in rep["notes"])
    # the removed tool path: one line naming what replaces it, nothing written
    res = runner.invoke(
        app,
        [
            "export",
            "verl",
            "--tasks",
            str(tasks),
            "--out",
            str(tmp_path / "old"),
            "--agent-loop",
            "tool_agent",
        ],
    )
    assert res.exit_code != 0 and "tool_agent path" in res.output and "agent_loops.yaml" in res.output
    assert not (tmp_path / "old").exists()


def test_toy_model_command_writes_a_loadable_checkpoint(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    res = CliRunner().invoke(app, ["train", "toy-model", str(tmp_path / "toy"), "--layers", "1"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["model"] == f"hf:{tmp_path / 'toy'}"
    tok = AutoTokenizer.from_pretrained(tmp_path / "toy")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "toy")
    assert model.config.num_hidden_layers == 1 and model.config.vocab_size == len(tok)
    assert "<|im_start|>assistant" in tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )

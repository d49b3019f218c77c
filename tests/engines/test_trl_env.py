"""TRL (pinned): ``GRPOTrainer`` trains on DataDojo tasks through :mod:`datadojo.train.export.trl_env`.

Two real ``GRPOTrainer`` steps on the tiny Qwen2 of the fixtures, with DataDojo's ``rollout_func``:

* scripted rollouts (a server stand-in answering char-level token ids, which no tokenizer produces) on a
  three-turn pandas task and on an EnvLunch warm-up task replayed from the reference solver: what TRL
  trains on (its ``completion_ids``, ``completion_mask × tool_mask`` and sampler log-probs) is exactly the
  rollout's ids and masks; the EnvLunch agreement reward reaching TRL equals ``datadojo warmup score``'s;
  an infrastructure failure is unscored (NaN reward, advantage 0) and masked; the weights move;
* the policy itself sampling in process: every sampled token's log-prob kept from generation equals the
  log-prob TRL's own forward pass gives that token at that position (a shifted, cut or re-tokenized row
  would not).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from _fixtures import FX, MANIFEST, MODEL
from transformers import AutoTokenizer
from trl import GRPOConfig

from datadojo.env.tokens import GenOutput
from datadojo.jsonl import read_tasks, read_trajectories
from datadojo.train.export.trl_env import DataDojoRollouts, grpo_trainer
from datadojo.types import DataFile, Task

SALES = Path(__file__).resolve().parents[2] / "examples" / "data" / "sales.csv"
DEPENDENT = [
    "<think>Count rows and keep state.</think>\n<code>\nimport pandas as pd\nx = len(pd.read_csv('sales.csv'))\n"
    "open('note.txt', 'w').write(str(x * 6))\nprint('saved', x)\n</code>",
    "<think>Read my note back.</think>\n<code>\nprint(open('note.txt').read(), x)\n</code>",
    "<think>Done.</think>\n<answer>1440</answer>",
]
WRONG = ["<think>Guess.</think>\n<answer>7</answer>"]


def _sales() -> Task:
    return Task(
        id="sales",
        question="Rows times six?",
        files=[DataFile.from_path(SALES)],
        answer=1440,
        answer_kind="number",
    )


def _warmup() -> tuple[Task, list[str], float]:
    """The solved warm-up task with the highest reward, the solver's replies, and that reward."""
    item = max(MANIFEST["warmup_rewards"], key=lambda x: x["reward"])
    task = next(t for t in read_tasks(FX / "warmup" / "tasks.jsonl") if t.id == item["task_id"])
    traj = next(t for t in read_trajectories(FX / "warmup" / "scored.jsonl") if t.task_id == item["task_id"])
    return task, [turn.raw for turn in traj.turns], float(item["reward"])


class Server:
    """Scripted episodes per task (picked by the question in the first prompt), in order; char-level ids."""

    def __init__(self, tok: Any, scripts: dict[str, list[list[str] | Exception]]) -> None:
        self.tok, self.scripts = tok, {k: list(v) for k, v in scripts.items()}
        self.first: list[int] | None = None
        self.current: list[str] | Exception = []
        self.outputs: list[list[int]] = []

    async def __call__(self, prompt_ids: list[int], sampling: dict[str, Any]) -> GenOutput:
        f = self.first
        if f is None or len(prompt_ids) <= len(f) or prompt_ids[: len(f)] != f:  # a new episode
            text = self.tok.decode(prompt_ids)
            key = next(k for k in self.scripts if k in text)
            script = self.scripts[key].pop(0)
            self.first = list(prompt_ids)
            self.current = script if isinstance(script, Exception) else list(script)
        if isinstance(self.current, Exception):
            raise self.current
        ids = [i for ch in self.current.pop(0) for i in self.tok.encode(ch, add_special_tokens=False)]
        self.outputs.append(ids)
        return GenOutput(ids, [-0.5] * len(ids), "completed")


def _config(tmp_path: Path, **kw: Any) -> GRPOConfig:
    base: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"),
        "max_steps": 2,
        "per_device_train_batch_size": 4,
        "num_generations": 2,
        "max_completion_length": 4096,
        "learning_rate": 1e-2,
        "beta": 0.0,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": [],
        "use_cpu": True,
        "dataloader_num_workers": 0,
        "seed": 0,
    }
    return GRPOConfig(**{**base, **kw})


def _capture(trainer: Any, rollouts: DataDojoRollouts) -> tuple[list[dict], list[dict]]:
    """What each rollout returned and what TRL made of it (its batch before the loss), per generation."""
    replies: list[dict] = []
    batches: list[dict] = []
    collect, score = rollouts.collect, trainer._generate_and_score_completions

    def collect_spy(*a: Any, **k: Any) -> dict:
        replies.append(collect(*a, **k))
        return replies[-1]

    def score_spy(inputs: Any) -> dict:
        out = score(inputs)
        batches.append({k: v.detach().clone() if torch.is_tensor(v) else v for k, v in out.items()})
        return out

    rollouts.collect = collect_spy  # type: ignore[method-assign]
    trainer._generate_and_score_completions = score_spy
    return replies, batches


def _rows(batch: dict, i: int) -> tuple[list[int], list[int], list[int]]:
    """Row ``i`` of TRL's batch: the prompt (left padding dropped), the completion and the trained-token mask
    (``completion_mask × tool_mask``, right padding dropped)."""
    p = batch["prompt_ids"][i][batch["prompt_mask"][i].bool()].tolist()
    cm = batch["completion_mask"][i]
    n = int(cm.sum())
    loss = (cm * batch["tool_mask"][i])[:n].tolist()
    return p, batch["completion_ids"][i][:n].tolist(), [int(x) for x in loss]


def test_two_grpo_steps_with_scripted_rollouts_train_on_the_exact_tokens(tmp_path: Path) -> None:
    tok = AutoTokenizer.from_pretrained(MODEL)
    warm, replay, warm_reward = _warmup()
    sales = _sales()
    # per step and task, the group's two samples (rows come as task, task, other, other)
    scripts: dict[str, list[list[str] | Exception]] = {
        sales.question: [DEPENDENT, WRONG, DEPENDENT, ConnectionError("engine died")],
        warm.question[:60]: [replay, ["<answer>\nSELECT 1\n</answer>"], replay, replay],
    }
    server = Server(tok, scripts)
    rollouts = DataDojoRollouts(
        [sales, warm],
        tasks_path=FX / "warmup" / "tasks.jsonl",
        concurrency=1,
        generate=lambda trainer: server,
        rollouts_path=tmp_path / "rollouts.jsonl",
    )
    trainer = grpo_trainer(str(MODEL), rollouts, _config(tmp_path), processing_class=tok)
    replies, batches = _capture(trainer, rollouts)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()

    assert trainer.state.global_step == 2 and len(replies) == len(batches) == 2
    for reply, batch in zip(replies, batches, strict=True):
        assert len(reply["completion_ids"]) == 4
        for i in range(4):
            prompt, completion, loss_mask = _rows(batch, i)
            # TRL trains on the rollout's own ids, masks and sampler log-probs, unchanged
            assert prompt == reply["prompt_ids"][i]
            assert completion == reply["completion_ids"][i]
            assert loss_mask == reply["env_mask"][i]
            lps = batch["sampling_per_token_logps"][i][: len(completion)].tolist()
            assert lps == pytest.approx(reply["logprobs"][i])
            assert {lp for lp, m in zip(lps, loss_mask, strict=True) if m} <= {-0.5}
    # every sampled token TRL trains on came from the server, in order, and nothing else has mask 1
    trained = [
        t
        for r in replies
        for c, m in zip(r["completion_ids"], r["env_mask"], strict=True)
        for t, k in zip(c, m, strict=True)
        if k
    ]
    assert trained == [t for out in server.outputs for t in out]
    # the environment's tokens are the observations, masked
    first = replies[0]
    row = first["datadojo_stop_reason"].index("answer")
    env = tok.decode(
        [t for t, m in zip(first["completion_ids"][row], first["env_mask"][row], strict=True) if not m]
    )
    assert "<interpreter>" in env and "<|im_start|>assistant" in env
    # rewards: DataMind's on the pandas task, EnvLunch's agreement reward on the warm-up task
    trajs = list(read_trajectories(tmp_path / "rollouts.jsonl"))
    warm_rewards = [
        t.rewards["datadojo"] for t in trajs if t.task_id == warm.id and t.final_answer != "SELECT 1"
    ]
    assert len(warm_rewards) == 3 and warm_rewards == pytest.approx([warm_reward] * 3) and warm_reward > 0
    sales_rewards = [t.rewards.get("datadojo") for t in trajs if t.task_id == sales.id]
    assert sales_rewards[0] > sales_rewards[1] and sales_rewards[3] is None  # step 2: one infra failure
    # the infra failure: masked, unscored, advantage 0, and left out of its group's statistics
    last, lb = replies[1], batches[1]
    bad = last["datadojo_infra_failure"].index(1)
    assert last["datadojo_reward"][bad] is None and set(last["env_mask"][bad]) == {0}
    assert float(lb["advantages"][bad]) == 0.0
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    assert len(rewards) == 2 and all(math.isfinite(r) for r in rewards)
    logged = [h for h in trainer.state.log_history if "datadojo/infra_failure_rate" in h]
    assert [h["datadojo/infra_failure_rate"] for h in logged] == [0.0, 0.25]
    # the first step's groups had different rewards: non-zero advantages, the weights moved
    assert any(float(a) != 0.0 for a in batches[0]["advantages"])
    assert any(not torch.equal(p, before[n]) for n, p in trainer.model.named_parameters())


def test_in_process_sampling_keeps_logprobs_aligned_with_trls_forward(tmp_path: Path) -> None:
    tok = AutoTokenizer.from_pretrained(MODEL)
    # a random policy writes void turns: kept in the loss here (void_masking off) to have tokens to check
    rollouts = DataDojoRollouts([_sales()], max_turns=2, max_tokens_per_turn=24, void_masking=False)
    args = _config(tmp_path, per_device_train_batch_size=2, max_completion_length=256, temperature=1.0)
    trainer = grpo_trainer(str(MODEL), rollouts, args, processing_class=tok)
    replies, batches = _capture(trainer, rollouts)
    logps: list[torch.Tensor] = []
    score = trainer._generate_and_score_completions

    def with_forward(inputs: Any) -> dict:
        out = score(inputs)
        ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
        att = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
        with torch.no_grad():
            lp, _, _ = trainer._get_per_token_logps_and_entropies(
                trainer.model, ids, att, out["completion_ids"].size(1), batch_size=2
            )
        logps.append(lp)
        return out

    trainer._generate_and_score_completions = with_forward
    trainer.train()
    assert trainer.state.global_step == 2 and len(batches) == 2
    n_checked = 0
    for reply, batch, lp in zip(replies, batches, logps, strict=True):
        for i in range(len(reply["completion_ids"])):
            _, completion, loss_mask = _rows(batch, i)
            assert completion == reply["completion_ids"][i] and loss_mask == reply["env_mask"][i]
            assert len(completion) <= 256
            sampled = [j for j, m in enumerate(loss_mask) if m]
            got = [reply["logprobs"][i][j] for j in sampled]
            assert lp[i, sampled].tolist() == pytest.approx(got, abs=2e-3)
            n_checked += len(sampled)
    assert n_checked > 0
    # two generations with the environment's tokens between them: the alignment held across a turn
    assert any(
        2 in r["datadojo_turns"] and {0, 1} <= {m for row in r["env_mask"] for m in row} for r in replies
    )


def test_parity_rows_through_the_rollout_func(tmp_path: Path) -> None:
    """The parity fixture through ``DataDojoRollouts.collect`` (what TRL's ``rollout_func`` calls): the
    reward reaching TRL is the papers' by hand, and the row file joins the parity table."""
    import os

    from datadojo.testing.parity import parity_row, reply_for_prompt, write_parity_fixture, write_rows

    tok = AutoTokenizer.from_pretrained(MODEL)
    fixture = write_parity_fixture(tmp_path / "parity")

    async def generate(prompt_ids: list[int], sampling: dict[str, Any]) -> GenOutput:
        reply = reply_for_prompt(fixture, tok.decode(prompt_ids))
        ids = [i for ch in reply for i in tok.encode(ch, add_special_tokens=False)]  # char-level ids
        return GenOutput(ids, [-0.5] * len(ids), "completed")

    rollouts = DataDojoRollouts(
        list(fixture.tasks), tasks_path=fixture.tasks_path, concurrency=2, max_turns=4,
        rollouts_path=tmp_path / "rollouts.jsonl",
    )  # fmt: skip
    ids = [t.id for t in fixture.tasks]
    out = rollouts.collect(ids, generate, tok, max_completion_length=4096)
    records = {t.task_id: t for t in read_trajectories(tmp_path / "rollouts.jsonl")}
    rows = {}
    for task_id, total in zip(ids, out["datadojo_reward"], strict=True):
        assert total == pytest.approx(fixture.expected_total(task_id), abs=1e-12), task_id
        rows[f"{task_id}/0"] = parity_row(total, records[task_id].rewards)
    write_rows(os.environ.get("DATADOJO_PARITY_DIR") or tmp_path / "table", "trl", rows)

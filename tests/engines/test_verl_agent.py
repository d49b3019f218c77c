"""verl (pinned): DataDojo's agent loop registered in verl, instantiated the way verl's AgentLoopWorker does
(Hydra, from the registry entry), driven through three dependent turns by a server-manager stand-in that
answers verl's ``generate(request_id, prompt_ids, sampling_params)`` with token ids and log-probs.

Checked token by token: every request is the previous one plus the sampled ids plus environment ids; the
sampled ids come back unchanged with mask 1 and their log-probs; environment ids have mask 0; the sandbox
kept state and files across turns; the reward is DataDojo's; a server failure is masked out, and the
``datadojo_grpo`` advantage leaves it out of the group statistics.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import torch
from verl.trainer.ppo import core_algos
from verl.workers.rollout.replica import TokenOutput

from datadojo.testing.verl import agent_loop
from datadojo.train.export import verl_agent
from datadojo.train.export.verl import task_to_verl_row
from datadojo.train.toy import build_toy_tokenizer
from datadojo.types import DataFile, Task

SALES = Path(__file__).resolve().parents[2] / "examples" / "data" / "sales.csv"
REPLIES = [
    "<think>Count rows and keep state.</think>\n<code>\nimport pandas as pd\nx = len(pd.read_csv('sales.csv'))\n"
    "open('note.txt', 'w').write(str(x * 6))\nprint('saved', x)\n</code>",
    "<think>Read my note back.</think>\n<code>\nprint(open('note.txt').read(), x)\n</code>",
    "<think>Done.</think>\n<answer>1440</answer>",
]


class Server:
    """verl's server manager, scripted: char-level ids (no tokenizer would produce them) and log-probs."""

    def __init__(self, tok: Any, fail: bool = False) -> None:
        self.tok, self.fail = tok, fail
        self.replies = list(REPLIES)
        self.prompts: list[list[int]] = []
        self.outputs: list[list[int]] = []
        self.params: list[dict[str, Any]] = []

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kw: Any
    ):
        if self.fail:
            raise RuntimeError("engine died")
        self.prompts.append(list(prompt_ids))
        self.params.append(dict(sampling_params))
        ids = [i for ch in self.replies.pop(0) for i in self.tok.encode(ch, add_special_tokens=False)]
        # like vLLM with the loop's stop strings (</code>, </answer>): the reply ends on the stop, no EOS
        self.outputs.append(ids)
        return TokenOutput(token_ids=ids, log_probs=[-0.25] * len(ids), stop_reason="completed")


def _loop(server: Server, tok: Any) -> Any:
    verl_agent.register()
    return agent_loop(verl_agent.AGENT_NAME, tokenizer=tok, server_manager=server, max_assistant_turns=5)


def _row() -> dict[str, Any]:
    task = Task(
        id="t1",
        question="Rows times six?",
        files=[DataFile.from_path(SALES)],
        answer=1440,
        answer_kind="number",
    )
    return task_to_verl_row(task, 0, "train")


@pytest.fixture(scope="module")
def tok() -> Any:
    return build_toy_tokenizer()


def test_three_dependent_turns_token_by_token(tok: Any) -> None:
    server = Server(tok)
    out = asyncio.run(_loop(server, tok).run({"temperature": 1.0, "top_p": 1.0}, **_row()))
    assert len(server.prompts) == 3 and all(p["logprobs"] for p in server.params)
    resp, mask, lps = out.response_ids, out.response_mask, out.response_logprobs
    assert out.prompt_ids == server.prompts[0]
    pos = 0
    for k, gen in enumerate(server.outputs):
        # the request of turn k is exactly: prompt + everything before (no re-tokenization)
        assert server.prompts[k] == out.prompt_ids + resp[:pos]
        assert resp[pos : pos + len(gen)] == gen and mask[pos : pos + len(gen)] == [1] * len(gen)
        assert lps[pos : pos + len(gen)] == [-0.25] * len(gen)
        pos += len(gen)
        if k < 2:  # environment tokens (closing the reply, the observation turn): mask 0, log-prob 0
            env = server.prompts[k + 1][len(out.prompt_ids) + pos :]
            assert resp[pos : pos + len(env)] == env and set(mask[pos : pos + len(env)]) == {0}
            text = tok.decode(env)
            assert text.startswith("<|im_end|>\n<|im_start|>user\n<interpreter>") and text.endswith(
                "<|im_start|>assistant\n"
            )
            assert ("saved 240" if k == 0 else "1440 240") in text  # state and the file persisted
            pos += len(env)
    assert pos == len(resp)
    assert out.reward_score > 0.5 and out.extra_fields["reward_extra_info"]["acc"] == 1.0
    assert out.extra_fields["datadojo_infra_failure"] == 0
    d = out.as_dict()
    assert d["rollout_log_probs"].shape == d["responses"].shape == d["response_mask"].shape


def test_server_failure_is_masked_and_left_out_of_the_advantage(tok: Any) -> None:
    out = asyncio.run(_loop(Server(tok, fail=True), tok).run({"temperature": 1.0}, **_row()))
    assert out.extra_fields["datadojo_infra_failure"] == 1 and sum(out.response_mask) == 0
    fn = core_algos.get_adv_estimator_fn(verl_agent.ADV_ESTIMATOR)
    rewards = torch.zeros(4, 3)
    rewards[:, -1] = torch.tensor([1.0, 0.0, 1.0, 0.0])
    mask = torch.ones(4, 3)
    mask[3] = 0  # row 3 failed on the infrastructure: its 0 must not enter the group's statistics
    adv, _ = fn(token_level_rewards=rewards, response_mask=mask, index=["g"] * 4)
    live = torch.tensor([1.0, 0.0, 1.0])
    expect = (live - live.mean()) / (live.std() + 1e-6)
    assert torch.allclose(adv[:3, 0], expect) and torch.all(adv[3] == 0)


def test_parity_rows_through_the_agent_loop(tok: Any, tmp_path: Path) -> None:
    """The parity fixture through verl's agent loop: ``reward_score`` is the papers' value by hand, and the
    row file (total and parts from ``reward_extra_info``) joins the parity table."""
    import os

    from datadojo.testing.parity import parity_row, reply_for_prompt, write_parity_fixture, write_rows

    fixture = write_parity_fixture(tmp_path / "parity")

    class ParityServer:
        async def generate(
            self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kw: Any
        ):
            reply = reply_for_prompt(fixture, tok.decode(prompt_ids))
            ids = [i for ch in reply for i in tok.encode(ch, add_special_tokens=False)]
            return TokenOutput(token_ids=ids, log_probs=[-0.25] * len(ids), stop_reason="completed")

    async def run_all() -> dict[str, Any]:
        loop = _loop(ParityServer(), tok)  # type: ignore[arg-type]
        out = {}
        for i, task in enumerate(fixture.tasks):
            row = task_to_verl_row(task, i, "train", max_turns=4, tasks_dir=str(fixture.tasks_path.parent))
            out[task.id] = await loop.run({"temperature": 1.0, "top_p": 1.0}, **row)
        return out

    rows = {}
    for task_id, res in asyncio.run(run_all()).items():
        assert res.reward_score == pytest.approx(fixture.expected_total(task_id), abs=1e-12), task_id
        rows[f"{task_id}/0"] = parity_row(res.reward_score, res.extra_fields["reward_extra_info"])
    write_rows(os.environ.get("DATADOJO_PARITY_DIR") or tmp_path / "table", "verl", rows)

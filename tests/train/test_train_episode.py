"""Token-level episodes: the ReAct loop token-in / token-out over a real sandbox, checked token by token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from datadojo.agent import AgentConfig
from datadojo.env.tokens import (
    EpisodeError,
    GenOutput,
    TokenEpisode,
    parse_completion_choice,
    run_token_episode,
)
from datadojo.llm.base import SamplingParams
from datadojo.protocol.messages import strip_masks, trajectory_to_messages
from datadojo.sandbox import Sandbox, SandboxConfig
from datadojo.types import DataFile, Task

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"

# Three dependent turns: state (x) and a file written in turn 1 are read in turn 2; turn 3 answers.
REPLIES = [
    "<think>Count rows and keep state.</think>\n<code>\nimport pandas as pd\nx = len(pd.read_csv('sales.csv'))\n"
    "open('note.txt', 'w').write(str(x * 6))\nprint('saved', x)\n</code>",
    "<think>Read my note back.</think>\n<code>\nprint(open('note.txt').read(), x)\n</code>",
    "<think>Done.</think>\n<answer>42</answer>",
]


class ScriptedGenerator:
    """A server stand-in: records every prompt, answers the scripted replies as char-level token ids
    (a segmentation the tokenizer itself never produces, so any re-tokenization would show)."""

    def __init__(self, tok: Any, replies: list[str], *, tail: str = "") -> None:
        self.tok, self.replies, self.tail = tok, list(replies), tail
        self.prompts: list[list[int]] = []
        self.outputs: list[list[int]] = []

    def ids(self, text: str) -> list[int]:
        out: list[int] = []
        for ch in text:
            out += self.tok.encode(ch, add_special_tokens=False)
        return out

    async def __call__(self, prompt_ids: list[int], sampling: dict[str, Any]) -> GenOutput:
        self.prompts.append(list(prompt_ids))
        ids = self.ids(self.replies.pop(0) + self.tail)
        self.outputs.append(ids)
        return GenOutput(ids, [-0.5 - 0.01 * i for i in range(len(ids))], "completed")


@pytest.fixture
async def sandbox():
    async with await Sandbox.create([DataFile.from_path(EXAMPLES / "sales.csv")], SandboxConfig()) as sb:
        yield sb


def _task() -> Task:
    return Task(
        id="t1", question="Rows times six?", files=[DataFile.from_path(EXAMPLES / "sales.csv")], answer="42"
    )


async def test_three_dependent_turns_are_token_exact(toy_tok, sandbox):
    # The model keeps going after </code> (as a server that ignores stop strings would): the tail is cut.
    gen = ScriptedGenerator(toy_tok, REPLIES, tail=" trailing junk")
    cfg = AgentConfig(max_turns=5, sampling=SamplingParams(temperature=1.0, top_p=1.0, max_tokens=512))
    res = await run_token_episode(_task(), gen, toy_tok, sandbox, cfg)
    traj, ep = res.trajectory, res.episode
    assert traj.stop_reason == "answer" and traj.final_answer == "42" and not res.infra_failure
    assert len(gen.prompts) == 3 and len(ep.turns) == 3
    # Token-in: each request is exactly the previous request + what was generated + environment tokens.
    for k in (1, 2):
        start, end = ep.turns[k - 1]
        prev = gen.prompts[k - 1]
        assert gen.prompts[k][: len(prev)] == prev
        assert gen.prompts[k][len(prev) : len(prev) + end - start] == ep.response_ids[start:end]
    # Token-out: the generated ids are the server's, unchanged (cut after the stop string), mask 1 with
    # the server's log-probs; every other response token is environment, mask 0, log-prob 0.
    gen_pos: set[int] = set()
    for (start, end), out in zip(ep.turns, gen.outputs, strict=True):
        assert ep.response_ids[start:end] == out[: end - start]
        assert ep.response_logprobs[start:end] == [-0.5 - 0.01 * i for i in range(end - start)]
        gen_pos |= set(range(start, end))
    for i, m in enumerate(ep.response_mask):
        assert m == (1 if i in gen_pos else 0)
        if not m:
            assert ep.response_logprobs[i] == 0.0
    assert "trailing" not in toy_tok.decode(ep.response_ids[ep.turns[0][0] : ep.turns[0][1]])
    # The char-level ids differ from the tokenizer's own encoding: a re-tokenizing trainer would not match.
    first = ep.response_ids[ep.turns[0][0] : ep.turns[0][1]]
    assert first != toy_tok.encode(toy_tok.decode(first), add_special_tokens=False)
    # The environment: state and the file of turn 1 were there in turn 2.
    assert traj.turns[0].observation.text.strip() == "saved 240"  # sales.csv has 240 rows
    assert traj.turns[1].observation.text.split() == ["1440", "240"]
    env2 = toy_tok.decode([t for t, m in zip(ep.response_ids, ep.response_mask, strict=True) if m == 0])
    assert "<interpreter>" in env2 and "<|im_start|>user" in env2 and env2.count("<|im_start|>assistant") == 2
    # The whole sequence decodes to the chat template's rendering of the conversation.
    msgs = strip_masks(trajectory_to_messages(traj))
    rendered = toy_tok.apply_chat_template(msgs, tokenize=False)
    decoded = toy_tok.decode(ep.input_ids)
    assert rendered == decoded + "<|im_end|>\n"  # the last reply ended on its stop string, not on EOS
    # Round trip through the trajectory record.
    assert TokenEpisode.from_dict(traj.extra["tokens"]).input_ids == ep.input_ids
    assert len(ep.rollout_logprobs) == len(ep.input_ids) - 1


async def test_server_failure_is_an_infra_failure_not_a_score(toy_tok, sandbox):
    async def broken(prompt_ids: list[int], sampling: dict[str, Any]) -> GenOutput:
        raise ConnectionError("engine died")

    res = await run_token_episode(_task(), broken, toy_tok, sandbox, AgentConfig(max_turns=3))
    assert res.trajectory.stop_reason == "llm_error" and res.infra_failure


def test_reply_without_token_ids_is_refused():
    with pytest.raises(EpisodeError, match="no token ids"):
        parse_completion_choice({"text": "hi", "logprobs": {"tokens": ["hi"], "token_logprobs": [-1.0]}})
    out = parse_completion_choice(
        {"logprobs": {"content": [{"token": "token_id:5", "logprob": -0.25}]}, "finish_reason": "stop"}
    )
    assert out.token_ids == [5] and out.log_probs == [-0.25]

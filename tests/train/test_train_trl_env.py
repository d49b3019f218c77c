"""The TRL adapter's own part (no TRL imported): DataDojo episodes as ``rollout_func`` rows, token by token.

A scripted server stand-in answers with char-level token ids (a segmentation the tokenizer never produces,
so a re-tokenized row would differ) through three dependent turns in a real sandbox; the rows must hold
exactly the sampled ids (env_mask 1, their log-probs) and the environment's ids (env_mask 0), an
infrastructure failure must be masked and unscored (None, not 0), and the reward must be DataDojo's.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from datadojo.env.tokens import GenOutput, TokenEpisode
from datadojo.jsonl import read_trajectories
from datadojo.reward.registry import RewardSpec, score_pairs_sync
from datadojo.sandbox.session import SandboxError
from datadojo.train.export.trl_env import (
    DataDojoRollouts,
    TRLRolloutError,
    to_trl_sample,
    trajectory_tokens,
)
from datadojo.types import Action, DataFile, Task, Trajectory, Turn

SALES = Path(__file__).resolve().parents[2] / "examples" / "data" / "sales.csv"
DEPENDENT = [
    "<think>Count rows and keep state.</think>\n<code>\nimport pandas as pd\nx = len(pd.read_csv('sales.csv'))\n"
    "open('note.txt', 'w').write(str(x * 6))\nprint('saved', x)\n</code>",
    "<think>Read my note back.</think>\n<code>\nprint(open('note.txt').read(), x)\n</code>",
    "<think>Done.</think>\n<answer>1440</answer>",
]
WRONG = ["<think>Guess.</think>\n<answer>7</answer>"]


def _task(task_id: str = "t1") -> Task:
    return Task(
        id=task_id,
        question="Rows times six?",
        files=[DataFile.from_path(SALES)],
        answer=1440,
        answer_kind="number",
    )


class Server:
    """Scripted replies (one list per episode, episodes in order), char-level ids, log-probs −0.25 − 0.001·i."""

    def __init__(self, tok: Any, episodes: list[list[Any] | Exception], *, tail: str = "") -> None:
        self.tok, self.tail = tok, tail
        self.episodes = [e if isinstance(e, Exception) else list(e) for e in episodes]
        self.prompts: list[list[int]] = []
        self.outputs: list[list[int]] = []
        self.sampling: list[dict[str, Any]] = []
        self._current: list[Any] | Exception | None = None
        self._first: list[int] | None = None

    def ids(self, text: str) -> list[int]:
        return [i for ch in text for i in self.tok.encode(ch, add_special_tokens=False)]

    async def __call__(self, prompt_ids: list[int], sampling: dict[str, Any]) -> GenOutput:
        first = self._first
        if first is None or len(prompt_ids) <= len(first) or prompt_ids[: len(first)] != first:  # new episode
            self._first, self._current = list(prompt_ids), self.episodes.pop(0)
        if isinstance(self._current, Exception):
            raise self._current
        self.prompts.append(list(prompt_ids))
        self.sampling.append(dict(sampling))
        assert isinstance(self._current, list)
        reply = self._current.pop(0)
        if isinstance(reply, Exception):  # the server dies mid-episode
            raise reply
        ids = self.ids(reply + self.tail)[: sampling["max_tokens"]]
        self.outputs.append(ids)
        return GenOutput(ids, [-0.25 - 0.001 * i for i in range(len(ids))], "completed")


def _collect(rollouts: DataDojoRollouts, prompts: list[str], server: Server, tok: Any, **kw: Any) -> dict:
    return rollouts.collect(
        prompts, server, tok, max_completion_length=kw.pop("max_completion_length", 4096), **kw
    )


def test_rows_are_the_sampled_and_environment_tokens_exactly(toy_tok: Any, tmp_path: Path) -> None:
    log = tmp_path / "rollouts.jsonl"
    rollouts = DataDojoRollouts([_task()], concurrency=1, rollouts_path=log)
    server = Server(toy_tok, [DEPENDENT, WRONG], tail=" trailing junk")
    out = _collect(rollouts, ["t1", "t1"], server, toy_tok, temperature=0.9, top_p=0.95)
    assert set(out) >= {"prompt_ids", "completion_ids", "logprobs", "env_mask", "datadojo_reward"}
    assert len(server.prompts) == 4  # three dependent turns, then one answer
    assert {s["temperature"] for s in server.sampling} == {0.9} and {s["top_p"] for s in server.sampling} == {
        0.95
    }
    prompt, comp, mask, lps = (out[k][0] for k in ("prompt_ids", "completion_ids", "env_mask", "logprobs"))
    assert prompt == server.prompts[0]
    pos = 0
    for k in range(3):
        req, gen = server.prompts[k], server.outputs[k]
        assert req == prompt + comp[:pos]  # token-in: the request is everything so far, unchanged
        n = len(gen) - len(server.ids(" trailing junk"))  # the tail after the stop string is cut
        assert comp[pos : pos + n] == gen[:n] and mask[pos : pos + n] == [1] * n
        assert lps[pos : pos + n] == pytest.approx([-0.25 - 0.001 * i for i in range(n)])
        pos += n
        if k < 2:
            env = server.prompts[k + 1][len(prompt) + pos :]
            assert comp[pos : pos + len(env)] == env and mask[pos : pos + len(env)] == [0] * len(env)
            assert lps[pos : pos + len(env)] == [0.0] * len(env)
            text = toy_tok.decode(env)
            assert text.startswith("<|im_end|>\n<|im_start|>user\n<interpreter>")
            assert text.endswith("<|im_start|>assistant\n")
            assert ("saved 240" if k == 0 else "1440 240") in text  # state and the file persisted
            pos += len(env)
    # the reply ended on </answer>: the end-of-turn token closes it, as environment (mask 0)
    assert comp[pos:] == [toy_tok.eos_token_id] and mask[pos:] == [0]
    # the char-level ids are not the tokenizer's: a re-tokenized row would differ
    sampled = [t for t, m in zip(comp, mask, strict=True) if m]
    assert sampled != toy_tok.encode(toy_tok.decode(sampled), add_special_tokens=False)
    # DataDojo's reward on the real trajectories: the right answer beats the wrong one
    assert out["datadojo_correct"] == [1, 0] and out["datadojo_infra_failure"] == [0, 0]
    r0, r1 = out["datadojo_reward"]
    assert r0 is not None and r1 is not None and r0 > r1
    trajs = list(read_trajectories(log))
    assert [t.sample for t in trajs] == [0, 1]
    expect = score_pairs_sync([(_task(), t) for t in trajs], RewardSpec(name="datamind"))
    assert [t.rewards["datadojo"] for t in trajs] == [e.total for e in expect] == [r0, r1]
    ep = trajectory_tokens(trajs[0])
    assert ep.prompt_ids == prompt and ep.response_ids == comp[:-1]
    assert trajs[0].extra["trl_env_mask"] == mask


def test_infrastructure_failures_are_masked_and_unscored(toy_tok: Any) -> None:
    rollouts = DataDojoRollouts([_task()], concurrency=1)
    died = ConnectionError("engine died")
    # the second episode's server dies at once, the third's after a turn (its tokens so far are masked too)
    server = Server(toy_tok, [WRONG, died, [DEPENDENT[0], died], DEPENDENT])
    out = _collect(rollouts, ["t1"] * 4, server, toy_tok)
    assert out["datadojo_infra_failure"] == [0, 1, 1, 0]
    assert out["datadojo_stop_reason"][1:3] == ["llm_error", "llm_error"]
    assert out["datadojo_reward"][1:3] == [None, None]  # not 0: TRL keeps them out of the group's statistics
    assert len(out["completion_ids"][2]) > 20  # the first turn was generated and is in the row ...
    assert set(out["env_mask"][1]) == set(out["env_mask"][2]) == {0}  # ... but nothing is trained on
    assert sum(out["env_mask"][0]) > 0 and sum(out["env_mask"][3]) > 0
    logged: dict[str, float] = {}
    rewards = rollouts.reward_func(
        prompts=["t1"] * 4,
        completions=[""] * 4,
        log_metric=lambda name, value: logged.__setitem__(name, value),
        **{k: v for k, v in out.items() if k.startswith("datadojo_")},
    )
    assert rewards[1] is None and rewards[2] is None and rewards[3] > rewards[0]
    assert logged["datadojo/infra_failure_rate"] == pytest.approx(2 / 4)
    assert logged["datadojo/accuracy"] == pytest.approx(1 / 4)


def test_a_sandbox_that_cannot_start_is_an_infra_failure(toy_tok: Any) -> None:
    @contextlib.asynccontextmanager
    async def broken(task: Task):
        raise SandboxError("worker died at start")
        yield  # pragma: no cover

    rollouts = DataDojoRollouts([_task()], sandboxes=broken)
    out = _collect(rollouts, ["t1"], Server(toy_tok, []), toy_tok)
    assert out["datadojo_stop_reason"] == ["env_error"] and out["datadojo_reward"] == [None]
    assert out["env_mask"] == [[0]] and len(out["prompt_ids"][0]) == 1


def test_the_completion_budget_covers_every_turn(toy_tok: Any) -> None:
    rollouts = DataDojoRollouts([_task()], concurrency=1)
    server = Server(toy_tok, [DEPENDENT])
    budget = 300  # the first reply fits; its observation and a second reply do not
    out = _collect(rollouts, ["t1"], server, toy_tok, max_completion_length=budget)
    comp = out["completion_ids"][0]
    assert len(comp) <= budget
    first = len(server.prompts[0])
    for req, s in zip(server.prompts, server.sampling, strict=True):
        assert s["max_tokens"] <= budget - 1 - (len(req) - first)
    assert out["datadojo_stop_reason"] == ["context_limit"]
    assert comp[-1] != toy_tok.eos_token_id  # cut, not finished: TRL must see it as truncated


def test_to_trl_sample_masks_void_and_keeps_missing_logprobs_unknown() -> None:
    ep = TokenEpisode(prompt_ids=[1, 2])
    ep.add_generated([5, 6], None)
    ep.add_environment([7])
    ep.add_generated([8], None)
    void = Trajectory(
        task_id="t",
        turns=[Turn(raw="", action=Action(kind="code", text=""), void=True)],
        stop_reason="answer",
    )
    row = to_trl_sample(ep, void, max_completion_length=10, eos_token_id=0, pad_token_id=3, reward=0.5)
    assert row.completion_ids == [5, 6, 7, 8, 0] and row.env_mask == [0] * 5  # void: no loss term
    assert row.reward == 0.5 and row.void  # but its reward stays in the group's statistics
    assert row.logprobs == [None, None, 0.0, None, 0.0]  # unknown sampler log-probs: no IS correction
    kept = to_trl_sample(
        ep, void, max_completion_length=10, eos_token_id=0, pad_token_id=3, void_masking=False
    )
    assert kept.env_mask == [1, 1, 0, 1, 0]
    cut = to_trl_sample(ep, void, max_completion_length=3, eos_token_id=0, pad_token_id=3, void_masking=False)
    assert cut.completion_ids == [5, 6, 7] and cut.env_mask == [1, 1, 0] and cut.truncated


class FakeVLLMClient:
    """TRL's VLLMClient.generate as it answers: prompt-major lists, per-token top-logprob lists."""

    def __init__(self, tok: Any, replies: list[str]) -> None:
        self.tok, self.replies, self.calls = tok, list(replies), []

    def generate(self, **kw: Any) -> dict[str, Any]:
        self.calls.append(kw)
        ids = [i for ch in self.replies.pop(0) for i in self.tok.encode(ch, add_special_tokens=False)]
        return {
            "prompt_ids": kw["prompts"],
            "completion_ids": [ids],
            "logprobs": [[[-0.5, -3.0] for _ in ids]],  # sampled token first, then the next best
            "logprob_token_ids": [[[i, 0] for i in ids]],
        }


def test_trl_vllm_server_generator_through_an_episode(toy_tok: Any) -> None:
    client = FakeVLLMClient(toy_tok, [DEPENDENT[0], DEPENDENT[2]])
    trainer = SimpleNamespace(
        args=SimpleNamespace(
            max_completion_length=4096,
            temperature=1.0,
            top_p=1.0,
            top_k=20,
            min_p=0.0,
            repetition_penalty=1.0,
            seed=3,
            vllm_mode="server",
        ),
        state=SimpleNamespace(global_step=2),
        accelerator=SimpleNamespace(process_index=0),
        processing_class=toy_tok,
        use_vllm=True,
        vllm_generation=SimpleNamespace(vllm_client=client),
    )
    rollouts = DataDojoRollouts([_task()])
    out = rollouts(["t1"], trainer)
    assert [len(c["prompts"]) for c in client.calls] == [1, 1]
    assert all(isinstance(t, int) for t in client.calls[1]["prompts"][0])  # token ids, not text
    assert client.calls[0]["logprobs"] == 0 and client.calls[0]["top_k"] == 20
    extra = client.calls[0]["generation_kwargs"]
    assert extra["include_stop_str_in_output"] and "</code>" in extra["stop"]
    assert client.calls[1]["prompts"][0][: len(out["prompt_ids"][0])] == out["prompt_ids"][0]
    lps = [lp for lp, m in zip(out["logprobs"][0], out["env_mask"][0], strict=True) if m]
    assert lps and set(lps) == {-0.5}
    assert out["datadojo_correct"] == [1]
    trainer.args.vllm_mode = "colocate"
    with pytest.raises(TRLRolloutError, match="colocate"):
        rollouts(["t1"], trainer)
    with pytest.raises(TRLRolloutError, match=r"prompt 0 .* not a task id"):
        rollouts.tasks_for([[{"role": "user", "content": "hi"}]])


def test_bad_task_sets_are_refused() -> None:
    with pytest.raises(TRLRolloutError, match="appears twice"):
        DataDojoRollouts([_task(), _task()])
    with pytest.raises(TRLRolloutError, match="no answer"):
        DataDojoRollouts([Task(id="q", question="?")])
    envlunch = Task(id="e", question="?", answer={"columns": [], "rows": []}, answer_kind="envlunch")
    with pytest.raises(TRLRolloutError, match="tasks_path"):
        DataDojoRollouts([envlunch])


def test_from_file_rows_are_task_ids(tmp_path: Path) -> None:
    path = tmp_path / "rl_tasks.jsonl"
    path.write_text(
        "\n".join(json.dumps(_task(i).model_dump(mode="json")) for i in ("a", "b")) + "\n", encoding="utf-8"
    )
    rollouts = DataDojoRollouts.from_file(path, max_turns=4)
    assert rollouts.rows() == [{"prompt": "a"}, {"prompt": "b"}] and rollouts.max_turns == 4


def test_without_trl_the_error_names_the_install_line() -> None:
    import importlib.util

    from datadojo.errors import MissingExtraError
    from datadojo.train.export.trl_env import grpo_trainer

    if importlib.util.find_spec("trl") is not None:
        pytest.skip("trl is installed here")
    with pytest.raises(MissingExtraError, match=r"pip install 'trl==1\.16\.0'"):
        grpo_trainer("runs/toy", "rl_tasks.jsonl")

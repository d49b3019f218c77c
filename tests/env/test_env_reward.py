"""Episode.reward(): the reward registry's score of the finished episode, against DataMind's R by hand.

DataMind §4: R = r_length · r_answer when the answer is right, 0 when it is wrong in a well-formed trajectory,
−0.1 when it is wrong and the trajectory malformed; r_length(l) = 1 for l ≤ l_min, then
(l_max − l)/(l_max − l_min) · 0.5 + 0.5 up to l_max. The answers here are numbers (one approximate token
per digit: "240" is l = 3); with l_min = 1 and l_max = 5, r_length(3) = (5 − 3)/(5 − 1) · 0.5 + 0.5 = 0.75.
"""

from __future__ import annotations

import pytest

from datadojo.env import DataEnv, EnvConfig, EnvUsageError
from datadojo.errors import UnknownNameError
from datadojo.reward.registry import RewardSpec
from datadojo.testing.env import runner_factory
from datadojo.types import Task

TASK = Task(id="r", question="How many rows?", answer="240")
CODE = "<think>Count.</think>\n<code>\nprint(240)\n</code>"


async def _reward(replies: list[str], spec: RewardSpec | str | None) -> tuple[float, dict[str, float]]:
    env = DataEnv(EnvConfig(profile_chars=0), sandboxes=runner_factory(), reward=spec)
    async with env, await env.reset(TASK) as episode:
        with pytest.raises(EnvUsageError, match="has not ended"):
            await episode.reward()
        for reply in replies:
            await episode.step(reply)
        assert episode.done
        result = await episode.reward()
    assert result.reward == "datamind"
    assert sum(result.parts.values()) == pytest.approx(result.total, abs=1e-12)
    return result.total, result.parts


async def test_a_correct_answer_gets_r_length() -> None:
    spec = RewardSpec(l_min=1, l_max=5)
    total, parts = await _reward([CODE, "<think>Done.</think>\n<answer>240</answer>"], spec)
    assert total == pytest.approx(0.75, abs=1e-12)
    assert parts == pytest.approx({"answer": 1.0, "length": -0.25, "format": 0.0}, abs=1e-12)
    # the paper's constants: 3 tokens ≤ l_min = 256, full reward; the name chooses the same reward
    total, _ = await _reward([CODE, "<think>Done.</think>\n<answer>240</answer>"], "datamind")
    assert total == pytest.approx(1.0, abs=1e-12)


async def test_a_wrong_answer_gets_zero_or_the_malformed_penalty() -> None:
    wrong = "<think>Done.</think>\n<answer>300</answer>"
    total, _ = await _reward([CODE, wrong], None)
    assert total == pytest.approx(0.0, abs=1e-12)
    # a malformed turn on the way (no action): wrong and malformed, −0.1
    total, parts = await _reward([CODE, "I guess it is around 300.", wrong], None)
    assert total == pytest.approx(-0.1, abs=1e-12) and parts["format"] == pytest.approx(-0.1, abs=1e-12)


def test_an_unknown_reward_name_fails_when_the_environment_is_made() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown reward 'nope'; known: .*datamind"):
        DataEnv(reward="nope")


async def test_leaving_the_environment_closes_its_judge(tmp_path) -> None:
    """A judged reward's model backend is opened for the environment's episodes; leaving the environment
    closes it (else aiohttp warns "Unclosed client session" when the process ends)."""
    from datadojo.reward.registry import reward_for_task, spec_for_cli
    from datadojo.testing.server import ScriptedLLMServer

    with ScriptedLLMServer(['{"score": 1, "reason": "same count"}']) as server:
        spec = spec_for_cli(None, judge=f"openai:judge@{server.base_url}?max_retries=0", cache_dir=tmp_path)
        env = DataEnv(EnvConfig(profile_chars=0), sandboxes=runner_factory(), reward=spec)
        async with env, await env.reset(TASK) as episode:
            await episode.step("<think>Done.</think>\n<answer>two hundred and forty</answer>")
            result = await episode.reward()
            backend = reward_for_task(TASK, spec).scorer.judge.backend  # type: ignore[attr-defined]
            assert backend._clients
    assert (result.reward, result.correct, result.total) == ("judge", True, 1.0)
    assert backend._clients == {}

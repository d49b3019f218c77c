"""DataMind's reward (§4): r_length's worked values, the three tiers of R, r_format, tokenizers, r_answer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datadojo.protocol.messages import messages_to_trajectory
from datadojo.reward import (
    L_MAX,
    L_MIN,
    MALFORMED_PENALTY,
    DataMindReward,
    LLMJudge,
    composite_reward,
    format_reward,
    length_reward,
    token_counter,
)
from datadojo.types import Task

# --- r_length ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (0, 1.0),
        (256, 1.0),  # l <= l_min: no penalty
        (640, 0.75),  # half way from 256 to 1024: (1024-640)/768*0.5+0.5
        (448, (1024 - 448) / 768 * 0.5 + 0.5),
        (1024, 0.5),  # l = l_max: the linear part ends at 0.5
        (1025, 0.5),
        (100_000, 0.5),
    ],
)
def test_length_reward_worked_values(tokens: int, expected: float) -> None:
    assert length_reward(tokens) == pytest.approx(expected)


def test_length_reward_constants_are_the_papers() -> None:
    assert (L_MIN, L_MAX, MALFORMED_PENALTY) == (256, 1024, -0.1)


@given(st.integers(0, 5000), st.integers(0, 5000))
def test_length_reward_is_monotone_and_bounded(a: int, b: int) -> None:
    lo, hi = sorted((a, b))
    assert 0.5 <= length_reward(hi) <= length_reward(lo) <= 1.0


def test_length_reward_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="n_tokens"):
        length_reward(-1)
    with pytest.raises(ValueError, match="l_min < l_max"):
        length_reward(10, l_min=100, l_max=100)


# --- composite R -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "ans", "length", "expected"),
    [
        (1, 1, 0.75, 0.75),  # tier 1: r_length * r_answer
        (0, 1, 0.6, 0.6),  # correct answers are rewarded whatever the format
        (1, 0, 1.0, 0.0),  # tier 2: well formed, wrong
        (0, 0, 1.0, -0.1),  # tier 3: malformed and wrong
    ],
)
def test_composite_reward_tiers(fmt: int, ans: int, length: float, expected: float) -> None:
    assert composite_reward(fmt, ans, length) == pytest.approx(expected)


def test_composite_reward_validates() -> None:
    with pytest.raises(ValueError, match="r_answer"):
        composite_reward(1, 0.5, 1.0)
    with pytest.raises(ValueError, match="r_length"):
        composite_reward(1, 1, 1.5)


# --- trajectories ------------------------------------------------------------------------------------


def _traj(answer_turn: str, *, task_id: str = "t1") -> Any:
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "How many rows?"},
        {"role": "assistant", "content": "<think>Count them.</think>\n<code>\nprint(240)\n</code>"},
        {"role": "user", "content": "<interpreter>\n240\n</interpreter>"},
        {"role": "assistant", "content": answer_turn},
    ]
    return messages_to_trajectory(msgs, task_id=task_id)


def test_format_reward_uses_the_strict_validator() -> None:
    good = _traj("<think>Done.</think>\n<answer>240</answer>")
    assert format_reward(good) == (1.0, [])
    bad = _traj("The answer: <answer>240</answer>")
    r, problems = format_reward(bad)
    assert r == 0.0
    assert any("turn 2" in p for p in problems)


def test_reward_of_a_correct_wellformed_short_answer_is_one() -> None:
    task = Task(id="t1", question="How many rows?", answer=240)
    rb = DataMindReward().score(_traj("<think>Done.</think>\n<answer>240</answer>"), task)
    assert (rb.format, rb.answer, rb.length, rb.total) == (1.0, 1.0, 1.0, 1.0)
    assert rb.answer_source == "matcher:number"
    assert rb.as_rewards() == {"format": 1.0, "answer": 1.0, "length": 1.0, "total": 1.0}


def test_reward_tiers_on_trajectories() -> None:
    task = Task(id="t1", question="How many rows?", answer=240)
    reward = DataMindReward()
    wrong_ok = reward.score(_traj("<think>Done.</think>\n<answer>300</answer>"), task)
    assert (wrong_ok.answer, wrong_ok.total) == (0.0, 0.0)
    wrong_bad = reward.score(_traj("Hmm <answer>300</answer>"), task)
    assert (wrong_bad.format, wrong_bad.total) == (0.0, -0.1)
    right_bad = reward.score(_traj("Hmm <answer>240</answer>"), task)
    assert (right_bad.format, right_bad.answer, right_bad.total) == (0.0, 1.0, 1.0)


def test_long_answers_are_penalized_with_the_given_tokenizer() -> None:
    task = Task(id="t1", question="Describe", answer="yes")
    words = " ".join(["yes"] + ["word"] * 639)  # 640 whitespace tokens
    reward = DataMindReward(tokenizer=lambda s: len(s.split()))
    rb = reward.score(_traj(f"<think>Done.</think>\n<answer>{words}</answer>"), task)
    assert rb.answer_tokens == 640
    assert rb.answer == 1.0 and rb.length == pytest.approx(0.75) and rb.total == pytest.approx(0.75)


def test_token_counter_accepts_callables_and_tokenizer_objects() -> None:
    class FakeTokenizer:
        def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
            assert add_special_tokens is False
            return list(range(len(text)))

    assert token_counter(FakeTokenizer())("abcd") == 4
    assert token_counter(len)("abc") == 3
    assert token_counter(None)("one two three") == 3  # the documented approximation: one per short word
    with pytest.raises(TypeError, match="tokenizer"):
        token_counter(42)


def test_benchmark_tasks_are_scored_by_their_official_rule() -> None:
    task = Task(id="t1", question="q", answer={"mean": "1.50"}, answer_kind="dabench", source="dabench")
    reward = DataMindReward()
    ok = reward.score(_traj("<think>Done.</think>\n<answer>@mean[1.5]</answer>"), task)
    assert ok.answer == 1.0 and ok.answer_source == "bench:dabench"
    # within the tolerant matcher's 3% but not DABench's 1e-6: the official rule decides
    off = reward.score(_traj("<think>Done.</think>\n<answer>@mean[1.51]</answer>"), task)
    assert off.answer == 0.0


def test_trajectory_and_task_must_agree() -> None:
    with pytest.raises(ValueError, match="scored against task"):
        DataMindReward().score(
            _traj("<think>x</think>\n<answer>1</answer>"), Task(id="other", question="q", answer=1)
        )


def test_apply_merges_rewards_into_a_copy() -> None:
    traj = _traj("<think>Done.</think>\n<answer>240</answer>")
    rb = DataMindReward().score(traj, Task(id="t1", question="q", answer=240))
    out = DataMindReward.apply(traj, rb)
    assert out.rewards["total"] == 1.0 and traj.rewards == {}


async def test_ascore_asks_the_judge() -> None:
    from datadojo.llm import load_backend
    from datadojo.testing.server import ScriptedLLMServer

    task = Task(id="t1", question="Which region sells most?", answer={"region": "North"})
    with ScriptedLLMServer(['{"score": 1, "reason": "same region"}']) as server:
        backend = load_backend(f"openai:judge@{server.base_url}?max_retries=0")
        reward = DataMindReward(judge=LLMJudge(backend))
        rb = await reward.ascore(_traj("<think>Done.</think>\n<answer>The North region</answer>"), task)
        await backend.aclose()
        sent = server.requests[0].json
    assert rb.answer == 1.0 and rb.answer_source == "judge:judge" and rb.answer_reason == "same region"
    assert json.dumps({"region": "North"}) in sent["messages"][1]["content"]


async def test_rule_and_judge_sends_an_undecided_correct_guess_to_the_judge() -> None:
    # rule+judge: the rule decides only what it is certain about. An undecided guess of "correct" (a hedge
    # the rule half-read) must reach the judge, whose "wrong" is the reward: a rule's guess that skipped the
    # judge would pay the policy for answers nobody checked.
    from datadojo.llm import load_backend
    from datadojo.reward.datamind import AnswerCheck
    from datadojo.testing.server import ScriptedLLMServer

    def guess(task: Task, prediction: str | None) -> AnswerCheck:
        return AnswerCheck(True, "one number in the sentence matches", "matcher:number", decided=False)

    def sure(task: Task, prediction: str | None) -> AnswerCheck:
        return AnswerCheck(True, "exact", "matcher:number", decided=True)

    task = Task(id="t1", question="Which region sells most?", answer="North")
    traj = _traj("<think>Done.</think>\n<answer>North or South</answer>")
    with ScriptedLLMServer(['{"score": 0, "reason": "two regions named"}']) as server:
        backend = load_backend(f"openai:judge@{server.base_url}?max_retries=0")
        judged = await DataMindReward(judge=LLMJudge(backend), checker=guess, rule_first=True).ascore(
            traj, task
        )
        decided = await DataMindReward(judge=LLMJudge(backend), checker=sure, rule_first=True).ascore(
            traj, task
        )
        await backend.aclose()
        n_requests = len(server.requests)
    assert (judged.answer, judged.total, judged.answer_source) == (0.0, 0.0, "judge:judge")
    assert judged.answer_reason == "two regions named"
    assert (decided.answer, decided.answer_source) == (1.0, "matcher:number") and n_requests == 1


def test_length_reward_with_no_free_tokens_and_custom_bounds() -> None:
    # l_min = 0 is a valid choice (every token costs): (10 − 5)/(10 − 0)·0.5 + 0.5 = 0.75
    assert length_reward(0, l_min=0, l_max=10) == 1.0
    assert length_reward(5, l_min=0, l_max=10) == pytest.approx(0.75)
    # r_length may be 0 for a caller's own length rule: a correct answer then earns 0, still no penalty
    assert composite_reward(1, 1, 0.0) == 0.0 and composite_reward(0, 1, 0.0) == 0.0


def test_an_empty_answer_is_wrong_and_decided_whoever_the_task_is() -> None:
    from datadojo.reward import default_answer_check

    task = Task(
        id="t1", question="How many rows?", answer=240, source="datamind"
    )  # synthesized, no benchmark
    for prediction in (None, "", "   \n"):
        check = default_answer_check(task, prediction)
        assert (check.correct, check.decided, check.source, check.reason) == (
            False,
            True,
            "matcher",
            "no final answer",
        )
    # a synthesized task's source names no benchmark: the tolerant matcher decides, not a benchmark lookup
    check = default_answer_check(task, "There are 240 rows.")
    assert check.correct and check.source.startswith("matcher:")


def test_a_trajectory_without_answer_has_zero_answer_tokens() -> None:
    rb = DataMindReward().score(_traj("<think>I give up.</think>"), Task(id="t1", question="q", answer=240))
    assert (rb.answer_tokens, rb.length, rb.answer, rb.total) == (0, 1.0, 0.0, -0.1)


async def test_the_judge_reads_a_non_ascii_reference_as_written() -> None:
    from datadojo.llm import load_backend
    from datadojo.testing.server import ScriptedLLMServer

    task = Task(id="t1", question="Which city?", answer={"city": "Zürich", "share": "12 %"})
    with ScriptedLLMServer(['{"score": 1, "reason": "same city"}']) as server:
        backend = load_backend(f"openai:judge@{server.base_url}?max_retries=0")
        await DataMindReward(judge=LLMJudge(backend)).ascore(
            _traj("<think>Done.</think>\n<answer>Zürich</answer>"), task
        )
        await backend.aclose()
        prompt = server.requests[0].json["messages"][1]["content"]
    assert '"city": "Zürich"' in prompt and "\\u00fc" not in prompt

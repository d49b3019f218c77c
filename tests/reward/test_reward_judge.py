"""The LLM judge through the real OpenAI client and the loopback server: parsing, retry, cache, rubrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datadojo.llm import load_backend
from datadojo.llm.testing import ScriptedLLMServer
from datadojo.reward.judge import (
    JudgeCache,
    JudgeError,
    JudgeItem,
    JudgeParseError,
    LLMJudge,
    parse_verdict,
    prompt_hash,
)
from datadojo.reward.judge_prompts import get_rubric

# --- parsing -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"score": 1, "reason": "same value"}', (1, "same value")),
        ('```json\n{"score": 0, "reason": "wrong unit"}\n```', (0, "wrong unit")),
        ('<think>compare 3.1 and 3.0</think>{"score": 1, "reason": "within 3%"}', (1, "within 3%")),
        ('Verdict: {"score": "1", "reason": "ok"} done', (1, "ok")),
        ('{"score": 1.0}', (1, "")),
        ('{"score": true, "reason": "x"}', (1, "x")),
    ],
)
def test_parse_verdict_accepts(reply: str, expected: tuple[int, str]) -> None:
    assert parse_verdict(reply) == expected


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("", "empty"),
        ("The answer is correct.", "no JSON object"),
        ('{"reason": "no score"}', "no JSON object"),
        ('{"score": 0.5, "reason": "partly"}', "0 or 1"),
        ('{"score": 2}', "0 or 1"),
        ('{"score": 1, "reason": 5}', "reason"),
    ],
)
def test_parse_verdict_rejects(reply: str, why: str) -> None:
    with pytest.raises(JudgeParseError, match=why):
        parse_verdict(reply)


# --- through the server ------------------------------------------------------------------------------


def _backend(server: ScriptedLLMServer):
    return load_backend(f"openai:judge-model@{server.base_url}?max_retries=0")


async def test_verdict_at_temperature_zero_with_the_datamind_rules() -> None:
    with ScriptedLLMServer(['{"score": 1, "reason": "3.02 is within 3% of 3"}']) as server:
        backend = _backend(server)
        judge = LLMJudge(backend)
        v = await judge.judge("What is the mean?", "3", "About 3.02")
        await backend.aclose()
        req = server.requests[0].json
    assert (v.score, v.correct, v.attempts, v.cached, v.model) == (1, True, 1, False, "judge-model")
    assert req["temperature"] == 0
    system, user = req["messages"][0]["content"], req["messages"][1]["content"]
    assert "within 3%" in system and "semantically equivalent" in system and "Completeness" in system
    assert "Ground-truth answer: 3" in user and "Candidate answer: About 3.02" in user


async def test_one_retry_on_an_unreadable_reply() -> None:
    with ScriptedLLMServer(["I think it is right.", '{"score": 0, "reason": "wrong entity"}']) as server:
        backend = _backend(server)
        v = await LLMJudge(backend).judge("q", "Oslo", "Bergen")
        await backend.aclose()
        second = server.requests[1].json["messages"]
    assert (v.score, v.attempts, v.reason) == (0, 2, "wrong entity")
    assert second[-2] == {"role": "assistant", "content": "I think it is right."}
    assert "could not be read" in second[-1]["content"]


async def test_two_unreadable_replies_raise() -> None:
    with ScriptedLLMServer(["nope", "still nope"]) as server:
        backend = _backend(server)
        with pytest.raises(JudgeError, match="after one retry") as info:
            await LLMJudge(backend).judge("q", "a", "b")
        await backend.aclose()
    assert info.value.replies == ["nope", "still nope"]


async def test_empty_answers_cost_no_request() -> None:
    with ScriptedLLMServer([]) as server:
        backend = _backend(server)
        v = await LLMJudge(backend).judge("q", "a", "  ")
        await backend.aclose()
        assert server.requests == []
    assert (v.score, v.reason) == (0, "empty answer")


async def test_cache_by_model_and_prompt_survives_a_restart(tmp_path: Path) -> None:
    cache_file = tmp_path / "judge.jsonl"
    with ScriptedLLMServer(['{"score": 1, "reason": "ok"}', '{"score": 0, "reason": "no"}']) as server:
        backend = _backend(server)
        judge = LLMJudge(backend, cache=cache_file)
        first = await judge.judge("q", "a", "a")
        again = await LLMJudge(backend, cache=cache_file).judge("q", "a", "a")  # a new judge, same file
        other_model = await LLMJudge(backend, cache=cache_file, model="another").judge("q", "a", "a")
        await backend.aclose()
        n_requests = len(server.requests)
    assert (first.cached, again.cached, again.score) == (False, True, 1)
    assert other_model.cached is False and other_model.score == 0  # the key includes the judge model
    assert n_requests == 2
    lines = [json.loads(line) for line in cache_file.read_text().splitlines()]
    assert [(r["model"], r["score"]) for r in lines] == [("judge-model", 1), ("another", 0)]
    assert lines[0]["prompt_hash"] == prompt_hash(get_rubric("datamind").render("q", "a", "a"))
    assert len(JudgeCache(cache_file)) == 2


def test_cache_rejects_foreign_records(tmp_path: Path) -> None:
    bad = tmp_path / "c.jsonl"
    bad.write_text('{"hello": 1}\n')
    with pytest.raises(ValueError, match=r"c.jsonl:1"):
        JudgeCache(bad)


async def test_sailor_rubrics_and_judge_many() -> None:
    replies = ['{"score": 1, "reason": "a"}', '{"score": 0, "reason": "b"}', '{"score": 1, "reason": "c"}']
    with ScriptedLLMServer(replies) as server:
        backend = _backend(server)
        judge = LLMJudge(backend, rubric="sailor_qa")
        items = [JudgeItem(f"q{i}", "ref", f"cand{i}") for i in range(3)]
        verdicts = await judge.judge_many(items, concurrency=1)
        await backend.aclose()
        req = server.requests[0].json
    assert [v.score for v in verdicts] == [1, 0, 1]
    assert req["messages"][0]["content"].startswith(
        "You are a strict but fair evaluator for scientific dataset"
    )
    user = req["messages"][1]["content"]
    assert "Task type: scientific dataset QA" in user and "all central values must be present" in user
    meta = get_rubric("sailor_meta").render("q", "r", "p")[1]["content"]
    assert "Task type: meta-information summary" in meta and "core metadata summary" in meta


def test_unknown_rubric() -> None:
    with pytest.raises(ValueError, match="unknown judge rubric"):
        get_rubric("nope")


def test_template_slots_are_filled_once() -> None:
    msgs = get_rubric("datamind").render("What is {reference}?", "R", "P")
    assert "What is {reference}?" in msgs[1]["content"]

"""The LLM judge through the real OpenAI client and the loopback server: structured verdicts, repair, cache, rubrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datadojo.compare.judge import (
    JudgeCache,
    JudgeError,
    JudgeItem,
    LLMJudge,
    VerdictReply,
    prompt_hash,
)
from datadojo.compare.judge_prompts import get_rubric
from datadojo.llm import load_backend
from datadojo.llm.structured import json_schema_for
from datadojo.testing.server import ScriptedLLMServer

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


async def test_the_verdict_schema_is_sent_as_response_format() -> None:
    with ScriptedLLMServer(['{"score": 0, "reason": "wrong unit"}']) as server:
        backend = _backend(server)
        v = await LLMJudge(backend, rubric="sailor_qa").judge("q", "3 K", "3 °C")
        await backend.aclose()
        req = server.requests[0].json
    assert (v.score, v.reason, v.raw) == (0, "wrong unit", '{"score": 0, "reason": "wrong unit"}')
    fmt = req["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema == json_schema_for(VerdictReply)
    assert schema["properties"]["score"]["enum"] == [0, 1] and schema["required"] == ["score", "reason"]


@pytest.mark.parametrize(
    "bad",
    [
        "I think it is right.",  # prose: never searched for JSON
        'Verdict: {"score": 1, "reason": "ok"}',  # JSON inside prose is not fished out
        '{"score": 0.5, "reason": "partly"}',
        '{"score": 1}',  # the reason is required by the schema
        '{"score": 1, "reason": "x", "extra": 2}',
    ],
)
async def test_one_repair_on_an_invalid_reply(bad: str) -> None:
    with ScriptedLLMServer([bad, '{"score": 0, "reason": "wrong entity"}']) as server:
        backend = _backend(server)
        judge = LLMJudge(backend)
        v = await judge.judge("q", "Oslo", "Bergen")
        await backend.aclose()
        second = server.requests[1].json["messages"]
    assert (v.score, v.attempts, v.reason, judge.requests) == (0, 2, "wrong entity", 2)
    assert second[-2] == {"role": "assistant", "content": bad}
    assert "could not be used" in second[-1]["content"]


async def test_a_fenced_verdict_is_read() -> None:
    with ScriptedLLMServer(['```json\n{"score": 1, "reason": "same value"}\n```']) as server:
        backend = _backend(server)
        v = await LLMJudge(backend).judge("q", "3", "3.0")
        await backend.aclose()
    assert (v.score, v.reason, v.attempts) == (1, "same value", 1)


async def test_two_invalid_replies_raise() -> None:
    with ScriptedLLMServer(["nope", '{"score": 2, "reason": "still wrong"}']) as server:
        backend = _backend(server)
        with pytest.raises(JudgeError, match="after one repair") as info:
            await LLMJudge(backend).judge("q", "a", "b")
        await backend.aclose()
    assert info.value.replies == ['{"score": 2, "reason": "still wrong"}']


@pytest.mark.parametrize(("mode", "fmt"), [("off", None), ("json_object", {"type": "json_object"})])
async def test_structured_modes(mode: str, fmt: dict | None) -> None:
    with ScriptedLLMServer(['{"score": 1, "reason": "ok"}']) as server:
        backend = _backend(server)
        v = await LLMJudge(backend, structured=mode).judge("q", "a", "a")  # type: ignore[arg-type]
        await backend.aclose()
        req = server.requests[0].json
    assert v.score == 1 and req.get("response_format") == fmt
    assert '"enum":[0,1]' in req["messages"][0]["content"]  # the schema is described in the prompt instead


def test_unknown_structured_mode() -> None:
    with ScriptedLLMServer([]) as server:
        backend = _backend(server)
        with pytest.raises(ValueError, match="structured mode must be one of"):
            LLMJudge(backend, structured="yaml")  # type: ignore[arg-type]


async def test_cache_files_written_before_structured_output_are_read(tmp_path: Path) -> None:
    old = tmp_path / "judge_cache.jsonl"
    phash = prompt_hash(get_rubric("sailor_qa").render("q", "3 K", "3 K"))
    old.write_text(
        json.dumps({"model": "judge-model", "prompt_hash": phash, "score": 1, "reason": "same",
                    "raw": '<think>x</think>{"score": 1, "reason": "same"}', "attempts": 2, "created": 1.0})
        + "\n"
    )  # fmt: skip
    with ScriptedLLMServer([]) as server:
        backend = _backend(server)
        v = await LLMJudge(backend, rubric="sailor_qa", cache=old).judge("q", "3 K", "3 K")
        await backend.aclose()
        assert server.requests == []
    assert (v.score, v.reason, v.cached, v.attempts) == (1, "same", True, 2)


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

"""Structured output end to end: the real OpenAI client, the loopback server, schema sent, validate, repair once."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pytest
from pydantic import BaseModel, Field

from datadojo.llm import LLMError, load_backend
from datadojo.llm.base import ChatBackend, Completion, Message, SamplingParams, TokenLogprob
from datadojo.llm.structured import (
    StructuredOutputError,
    complete_structured,
    json_schema_for,
    parse_structured,
    response_format_for,
)
from datadojo.testing.server import Reply, ScriptedLLMServer, Status

MSGS = [
    {"role": "system", "content": "You write queries."},
    {"role": "user", "content": "Two queries, please."},
]


class Query(BaseModel):
    text: str
    columns: list[str] = Field(default_factory=list)


class Queries(BaseModel):
    queries: list[Query]


GOOD = json.dumps({"queries": [{"text": "How many rows?", "columns": []}]})


def _backend(srv: ScriptedLLMServer):
    return load_backend(f"openai:teacher@{srv.base_url}", max_retries=0)


def test_schema_is_closed_at_every_level() -> None:
    schema = json_schema_for(Queries)
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["Query"]["additionalProperties"] is False
    rf = response_format_for(Queries, "json_schema")
    assert rf["type"] == "json_schema"
    assert rf["json_schema"]["name"] == "Queries" and rf["json_schema"]["strict"] is True
    assert rf["json_schema"]["schema"] == schema
    assert response_format_for(Queries, "json_object") == {"type": "json_object"}
    assert response_format_for(Queries, "off") is None


def test_parse_unwraps_one_fence_and_names_the_field() -> None:
    assert parse_structured(f"```json\n{GOOD}\n```", Queries).queries[0].text == "How many rows?"
    with pytest.raises(ValueError, match=r"queries\.0\.text"):
        parse_structured('{"queries": [{"columns": []}]}', Queries)
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_structured('Sure! {"queries": []}', Queries)  # prose around JSON is not accepted


async def test_valid_reply_sends_the_json_schema() -> None:
    with ScriptedLLMServer([GOOD]) as srv:
        result = await complete_structured(_backend(srv), MSGS, Queries, temperature=0.2)
        assert result.value.queries[0].text == "How many rows?"
        assert (result.repaired, result.requests) == (False, 1)
        body = srv.requests[0].json
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["schema"] == json_schema_for(Queries)
        assert body["messages"] == MSGS  # the schema travels in response_format, not in the prompt
        assert body["temperature"] == 0.2


async def test_invalid_reply_is_repaired_once_with_the_error_shown() -> None:
    bad = '{"queries": [{"txt": "oops"}]}'
    with ScriptedLLMServer([bad, GOOD]) as srv:
        result = await complete_structured(_backend(srv), MSGS, Queries)
        assert result.repaired and result.requests == 2
        repair = srv.requests[1].json["messages"]
        assert repair[:2] == MSGS
        assert repair[2] == {"role": "assistant", "content": bad}
        assert "queries.0.text" in repair[3]["content"]
        assert result.completion_tokens > 0 and result.prompt_tokens > 0


async def test_still_invalid_after_repair_raises_with_the_reply() -> None:
    with ScriptedLLMServer(["not json", "still not json"]) as srv:
        with pytest.raises(StructuredOutputError) as info:
            await complete_structured(_backend(srv), MSGS, Queries)
        assert info.value.reply == "still not json" and not info.value.retryable
        assert "after one repair" in str(info.value)
        assert len(srv.requests) == 2


async def test_no_repair_when_disabled() -> None:
    with ScriptedLLMServer(["not json"]) as srv:
        with pytest.raises(StructuredOutputError):
            await complete_structured(_backend(srv), MSGS, Queries, repair=False)
        assert len(srv.requests) == 1


async def test_auto_steps_down_when_the_server_rejects_response_format_and_remembers() -> None:
    with ScriptedLLMServer([Status(400, message="response_format not supported"), GOOD, GOOD]) as srv:
        backend = _backend(srv)
        first = await complete_structured(backend, MSGS, Queries)
        assert first.value.queries and first.requests == 2
        assert srv.requests[1].json["response_format"] == {"type": "json_object"}
        assert "JSON Schema" in srv.requests[1].json["messages"][0]["content"]
        await complete_structured(backend, MSGS, Queries)
        assert srv.requests[2].json["response_format"] == {"type": "json_object"}  # remembered


async def test_explicit_mode_does_not_step_down() -> None:
    with ScriptedLLMServer([Status(400, message="no")]) as srv, pytest.raises(LLMError):
        await complete_structured(_backend(srv), MSGS, Queries, mode="json_schema")


async def test_off_mode_describes_the_schema_in_the_prompt() -> None:
    with ScriptedLLMServer([GOOD]) as srv:
        await complete_structured(_backend(srv), MSGS, Queries, mode="off")
        body = srv.requests[0].json
        assert "response_format" not in body
        assert body["messages"][0]["content"].startswith("You write queries.")
        assert '"queries"' in body["messages"][0]["content"]
        assert MSGS[0]["content"] == "You write queries."  # the caller's messages are not mutated


class _LocalBackend(ChatBackend):
    """A backend that cannot pass response_format (like the transformers one): replies from a list."""

    def __init__(self, replies: list[str]) -> None:
        super().__init__(model_id="local")
        self.replies = replies
        self.seen: list[tuple[list[Message], SamplingParams]] = []

    async def _generate(self, messages: list[Message], params: SamplingParams) -> list[Completion]:
        self.seen.append((messages, params))
        return [Completion(text=self.replies.pop(0), finish_reason="stop")]

    def count_tokens(self, messages: Sequence[Message]) -> int:
        return 1


async def test_auto_is_off_for_local_backends_and_still_validates_and_repairs() -> None:
    backend = _LocalBackend(["{}", GOOD])
    result = await complete_structured(backend, MSGS, Queries)
    assert result.repaired
    assert all(params.response_format is None for _, params in backend.seen)
    assert "JSON Schema" in backend.seen[0][0][0]["content"]


async def test_n_other_than_one_and_response_format_are_refused() -> None:
    backend = _LocalBackend([GOOD])
    with pytest.raises(ValueError, match="one completion"):
        await complete_structured(backend, MSGS, Queries, n=2)
    with pytest.raises(ValueError, match="sets response_format"):
        await complete_structured(backend, MSGS, Queries, response_format={"type": "json_object"})


async def test_logprobs_are_requested_and_returned() -> None:
    scripted = (("Hel", -0.1, (("Hel", -0.1), ("Hi", -2.4))), ("lo", -0.5, (("lo", -0.5),)))
    with ScriptedLLMServer([Reply("Hello", logprobs=scripted), "plain"]) as srv:
        backend = _backend(srv)
        (c,) = await backend.chat(MSGS, logprobs=True, top_logprobs=2)
        assert srv.requests[0].json["logprobs"] is True and srv.requests[0].json["top_logprobs"] == 2
        assert c.logprobs == (
            TokenLogprob("Hel", -0.1, (("Hel", -0.1), ("Hi", -2.4))),
            TokenLogprob("lo", -0.5, (("lo", -0.5),)),
        )
        (d,) = await backend.chat(MSGS)
        assert d.logprobs is None and "logprobs" not in srv.requests[1].json


async def test_default_scripted_logprobs_cover_the_reply() -> None:
    with ScriptedLLMServer(["two words"]) as srv:
        (c,) = await _backend(srv).chat(MSGS, logprobs=True)
        assert c.logprobs is not None
        assert "".join(t.token for t in c.logprobs) == "two words"
        assert all(math.isclose(t.logprob, 0.0) for t in c.logprobs)


def test_sampling_params_validate_the_new_fields() -> None:
    with pytest.raises(ValueError, match="response_format"):
        SamplingParams(response_format={"schema": {}})
    with pytest.raises(ValueError, match="top_logprobs"):
        SamplingParams(top_logprobs=50)

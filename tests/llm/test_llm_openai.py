"""The OpenAI backend end to end: the real ``openai`` client against the loopback server."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from datadojo.llm import LLMError, OpenAIBackend, load_backend
from datadojo.llm.base import approx_message_tokens, approx_token_count
from datadojo.llm.openai_backend import _retry_after
from datadojo.testing.server import Drop, Hang, Malformed, Reply, ScriptedLLMServer, Status

MSGS = [{"role": "system", "content": "You analyse data."}, {"role": "user", "content": "How many rows?"}]
AGENT_STOP = ["</code>", "</answer>", "<interpreter>"]


def _backend(srv: ScriptedLLMServer, **kw: object) -> OpenAIBackend:
    opts = {"max_retries": 3, "backoff_base": 0.01, "backoff_max": 0.05, "jitter_seed": 0, **kw}
    b = load_backend(f"openai:fake-model@{srv.base_url}", **opts)
    assert isinstance(b, OpenAIBackend)
    return b


async def test_reply_with_stop_sequences_and_usage() -> None:
    reply = "Let me count. <code>print(len(df))</code>\n<interpreter>999</interpreter>"
    with ScriptedLLMServer([reply]) as srv:
        b = _backend(srv)
        (c,) = await b.chat(MSGS, stop=AGENT_STOP, temperature=0.3, top_p=0.9, max_tokens=256, seed=11)
        assert c.text == "Let me count. <code>print(len(df))"
        assert (c.finish_reason, c.stop_sequence) == ("stop", "</code>")
        assert c.prompt_tokens == approx_message_tokens(MSGS)
        assert c.completion_tokens == approx_token_count(c.text)
        assert c.latency_s > 0
        body = srv.requests[0].json
        assert body["model"] == "fake-model" and body["messages"] == MSGS
        assert (body["stop"], body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (
            AGENT_STOP,
            0.3,
            0.9,
            256,
            11,
        )
        assert "n" not in body
        assert b.usage.requests == 1 and b.usage.completion_tokens == c.completion_tokens
        await b.aclose()


async def test_length_finish_and_n_choices_share_usage() -> None:
    with ScriptedLLMServer(
        [
            "a b c d e f",
            Reply("short", completion_tokens=2),
            Reply("much longer text here", completion_tokens=8),
        ]
    ) as srv:
        b = _backend(srv)
        (c,) = await b.chat(MSGS, max_tokens=2)
        assert (c.text, c.finish_reason, c.stop_sequence) == ("a b", "length", None)
        two = await b.chat(MSGS, n=2)
        assert [x.text for x in two] == ["short", "much longer text here"]
        assert sum(x.completion_tokens for x in two) == 10  # the server's total, split by length
        assert two[0].completion_tokens < two[1].completion_tokens
        assert srv.requests[1].json["n"] == 2
        assert b.usage.completions == 3
        await b.aclose()


async def test_retries_429_500_drop_and_garbage_then_succeeds() -> None:
    script = [Status(429), Status(500), Drop(), Malformed(), Status(503), "done"]
    with ScriptedLLMServer(script) as srv:
        b = _backend(srv, max_retries=5)
        (c,) = await b.chat(MSGS)
        assert c.text == "done"
        assert len(srv.requests) == 6
        assert b.usage.retries == 5
        await b.aclose()


async def test_wrongly_shaped_200_bodies_are_retried() -> None:
    bodies = [
        '{"choices": "nope"}',
        '{"choices": []}',
        '{"choices": [{"index": 0, "finish_reason": "stop"}]}',
        '{"choices": [{"index": 0, "message": {"role": "assistant", "content": 7}}]}',
        "[1, 2]",
    ]
    with ScriptedLLMServer([*(Malformed(b) for b in bodies), "fine"]) as srv:
        b = _backend(srv, max_retries=len(bodies))
        (c,) = await b.chat(MSGS)
        assert c.text == "fine" and b.usage.retries == len(bodies)
        await b.aclose()


async def test_missing_usage_falls_back_to_estimates() -> None:
    body = '{"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": "42 rows"}, "finish_reason": null}]}'
    with ScriptedLLMServer([Malformed(body)]) as srv:
        b = _backend(srv)
        (c,) = await b.chat(MSGS)
        assert (c.text, c.finish_reason, c.stop_sequence) == ("42 rows", "unknown", None)
        assert c.prompt_tokens == approx_message_tokens(MSGS)
        assert c.completion_tokens == approx_token_count("42 rows")
        await b.aclose()


async def test_gives_up_after_max_retries_with_clear_error() -> None:
    with ScriptedLLMServer([Status(500, message="GPU on fire")] * 3) as srv:
        b = _backend(srv, max_retries=2)
        with pytest.raises(LLMError) as info:
            await b.chat(MSGS)
        err = info.value
        assert err.retryable and err.attempts == 3 and err.status == 500
        assert "giving up after 3 attempt(s)" in str(err) and "GPU on fire" in str(err)
        assert "fake-model" in str(err)
        assert len(srv.requests) == 3 and b.usage.failures == 1
        await b.aclose()


async def test_client_errors_are_not_retried_and_context_overflow_is_flagged() -> None:
    overflow = "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens."
    with ScriptedLLMServer([Status(400, message=overflow), Status(401, message="bad key")]) as srv:
        b = _backend(srv)
        with pytest.raises(LLMError) as info:
            await b.chat(MSGS)
        assert (info.value.retryable, info.value.context_overflow, info.value.status) == (False, True, 400)
        with pytest.raises(LLMError) as info:
            await b.chat(MSGS)
        assert (info.value.retryable, info.value.context_overflow, info.value.status) == (False, False, 401)
        assert len(srv.requests) == 2
        await b.aclose()


async def test_timeout_is_retried() -> None:
    # The hang outlasts any timeout (the server cancels it on close), so the first attempt must time out
    # whatever the machine's speed; the reply is the second scripted entry, so it came from a retry.
    with ScriptedLLMServer([Hang(600.0), Reply("slow but fine", delay=0.05)]) as srv:
        b = _backend(srv, timeout=1.0)
        t0 = time.perf_counter()
        (c,) = await b.chat(MSGS)
        assert c.text == "slow but fine"
        assert time.perf_counter() - t0 >= 1.0  # a lower bound: a busy machine only makes it longer
        assert b.usage.retries == 1 and len(srv.requests) == 2
        await b.aclose()


async def test_timeout_exhausted_names_the_timeout() -> None:
    with ScriptedLLMServer([Hang(600.0), Hang(600.0)]) as srv:  # never answers: always a timeout
        b = _backend(srv, timeout=0.2, max_retries=1)
        with pytest.raises(LLMError, match=r"timed out after 0\.2s") as info:
            await b.chat(MSGS)
        assert info.value.retryable and info.value.status is None
        await b.aclose()


async def test_retry_after_header_is_honoured() -> None:
    with ScriptedLLMServer([Status(429, retry_after=0.4), "ok"]) as srv:
        b = _backend(srv, backoff_base=0.0)  # without Retry-After the retry would be immediate
        t0 = time.perf_counter()
        await b.chat(MSGS)
        gap = srv.requests[1].received_at - srv.requests[0].received_at
        assert gap >= 0.4
        assert time.perf_counter() - t0 >= 0.4
        await b.aclose()


def test_retry_after_parsing_and_backoff_bounds() -> None:
    assert _retry_after({"retry-after": "2"}) == 2.0
    assert _retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert _retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert _retry_after({"retry-after": "soon"}) is None
    assert _retry_after({}) is None
    b = OpenAIBackend("m", "http://127.0.0.1:9/v1", backoff_base=0.5, backoff_max=4.0, max_retry_after=10.0)
    for attempt in range(1, 10):
        cap = min(4.0, 0.5 * 2 ** (attempt - 1))
        delays = [b._backoff(attempt, None) for _ in range(200)]
        assert all(0 <= d <= cap for d in delays)
        assert max(delays) > cap / 2  # full jitter spreads over the whole range
    assert b._backoff(1, 30.0) == 10.0  # Retry-After capped


async def test_concurrency_bound_is_respected() -> None:
    with ScriptedLLMServer(lambda req: "ok", latency_s=0.05) as srv:
        b = _backend(srv, max_concurrency=3)
        out = await asyncio.gather(*(b.chat(MSGS) for _ in range(12)))
        assert len(out) == 12
        assert srv.max_in_flight == 3
        await b.aclose()


async def test_backing_off_does_not_hold_a_slot() -> None:
    # One request is rate-limited with a long Retry-After; the other must not wait behind it.
    def script(req: dict) -> object:
        if req["messages"][-1]["content"] == "limited" and len(seen) == 0:
            seen.append(1)
            return Status(429, retry_after=600)
        return "ok"

    seen: list[int] = []
    with ScriptedLLMServer(script) as srv:
        b = _backend(srv, max_concurrency=1, max_retry_after=600.0)
        first = asyncio.create_task(b.chat([{"role": "user", "content": "limited"}]))
        while b.usage.retries == 0:  # wait until it is backing off (no fixed sleep: a busy box is slow)
            await asyncio.sleep(0.01)
        await b.chat(MSGS)
        # had the sleeper kept the only slot, this call could only finish after its 600 s wait
        assert not first.done()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        await b.aclose()


async def test_api_key_sent_but_never_in_repr_errors_or_logs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-do-not-leak-4242"
    monkeypatch.setenv("DOJO_TEST_KEY", secret)
    caplog.set_level(logging.DEBUG)
    with ScriptedLLMServer([Status(429), "ok", Status(500), Status(500)]) as srv:
        b = load_backend(f"openai:m@{srv.base_url}?api_key_env=DOJO_TEST_KEY&max_retries=1&backoff_base=0.01")
        await b.chat(MSGS)
        with pytest.raises(LLMError) as info:
            await b.chat(MSGS)
        assert srv.requests[0].headers["authorization"] == f"Bearer {secret}"
        for text in (repr(b), str(b), str(vars(b)), str(info.value), repr(info.value), caplog.text):
            assert secret not in text
        assert "retry 1/1" in caplog.text  # the retry was logged, without the key
        await b.aclose()


async def test_default_key_placeholder_for_local_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ScriptedLLMServer(["ok"]) as srv:
        b = _backend(srv)
        await b.chat(MSGS)
        assert srv.requests[0].headers["authorization"] == "Bearer EMPTY"
        await b.aclose()


async def test_split_n_for_servers_without_n() -> None:
    with ScriptedLLMServer(["one", "two", "three"]) as srv:
        b = _backend(srv, split_n=True)
        out = await b.chat(MSGS, n=3, seed=5)
        assert sorted(c.text for c in out) == ["one", "three", "two"]
        assert all("n" not in r.json for r in srv.requests)
        assert sorted(r.json["seed"] for r in srv.requests) == [5, 6, 7]  # distinct samples, reproducible
        await b.aclose()


async def test_server_ignoring_n_is_a_clear_error() -> None:
    with ScriptedLLMServer(["only one"], ignore_n=True) as srv:
        b = _backend(srv)
        with pytest.raises(LLMError, match=r"asked for n=2 choices, got 1.*split_n") as info:
            await b.chat(MSGS, n=2)
        assert not info.value.retryable
        await b.aclose()


def test_backend_usable_from_successive_event_loops() -> None:
    with ScriptedLLMServer(["one", "two"]) as srv:
        b = _backend(srv)
        assert b.chat_sync(MSGS)[0].text == "one"
        assert b.chat_sync(MSGS)[0].text == "two"  # a new loop: new client and semaphore, no stale pool


def test_count_tokens_approximate_callable_and_window() -> None:
    b = OpenAIBackend("m", "http://127.0.0.1:9/v1", context_window=50)
    assert b.count_tokens(MSGS) == approx_message_tokens(MSGS)
    assert b.fits(MSGS, max_tokens=10)
    assert not b.fits([{"role": "user", "content": "word " * 100}])
    by_chars = OpenAIBackend("m", "http://127.0.0.1:9/v1", tokenizer=len)
    assert by_chars.count_tokens(MSGS) == sum(len(m["content"]) for m in MSGS) + 2 * 4 + 3
    with pytest.raises(TypeError, match="tokenizer must be"):
        OpenAIBackend("m", "http://127.0.0.1:9/v1", tokenizer=42).count_tokens(MSGS)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"base_url": "localhost:8000"}, "base_url must start with http"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"max_retries": -1}, "max_retries"),
        ({"timeout": 0}, "timeout must be > 0"),
        ({"backoff_base": -1}, "backoff_base"),
    ],
)
def test_constructor_validation(kwargs: dict, fragment: str) -> None:
    args = {"model": "m", "base_url": "http://127.0.0.1:9/v1", **kwargs}
    with pytest.raises(ValueError, match=fragment):
        OpenAIBackend(**args)


async def test_connection_refused_is_retryable_llm_error() -> None:
    with ScriptedLLMServer() as srv:
        url = srv.base_url
    b = load_backend(f"openai:m@{url}?max_retries=1&backoff_base=0.01")  # server gone: port closed
    with pytest.raises(LLMError, match="connection error") as info:
        await b.chat(MSGS)
    assert info.value.retryable and info.value.attempts == 2
    await b.aclose()

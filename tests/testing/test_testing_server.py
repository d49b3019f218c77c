"""The loopback server on its own, spoken to with a plain HTTP client (not the backend under test)."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import pytest

from datadojo.llm.base import approx_message_tokens, approx_token_count, approx_tokenize
from datadojo.testing.server import Drop, Hang, Malformed, Reply, ScriptedLLMServer, Status

MSGS = [{"role": "user", "content": "How many rows?"}]


def _post(srv: ScriptedLLMServer, timeout: float = 5.0, **body: object) -> httpx.Response:
    payload = {"model": "m", "messages": MSGS, **body}
    return httpx.post(f"{srv.base_url}/chat/completions", json=payload, timeout=timeout)


def test_reply_stop_usage_and_request_log() -> None:
    with ScriptedLLMServer(["I will look. <code>len(df)</code><interpreter>fake</interpreter>"]) as srv:
        r = _post(srv, stop=["</code>", "<interpreter>"], temperature=0.5)
        assert r.status_code == 200
        data = r.json()
        choice = data["choices"][0]
        assert choice["message"] == {"role": "assistant", "content": "I will look. <code>len(df)"}
        assert (choice["finish_reason"], choice["stop_reason"]) == ("stop", "</code>")
        assert data["usage"]["prompt_tokens"] == approx_message_tokens(MSGS)
        assert data["usage"]["completion_tokens"] == approx_token_count("I will look. <code>len(df)")
        assert (
            data["usage"]["total_tokens"]
            == data["usage"]["prompt_tokens"] + data["usage"]["completion_tokens"]
        )
        (req,) = srv.requests
        assert req.json["temperature"] == 0.5 and req.path == "/v1/chat/completions"
        assert srv.remaining == 0


def test_max_tokens_cuts_with_length_reason() -> None:
    text = "one two three four five six"
    with ScriptedLLMServer([text]) as srv:
        choice = _post(srv, max_tokens=3).json()["choices"][0]
        assert choice["message"]["content"] == "".join(approx_tokenize(text)[:3]) == "one two three"
        assert choice["finish_reason"] == "length"


def test_n_choices_draw_consecutive_entries_and_forced_fields() -> None:
    with ScriptedLLMServer(
        ["a", Reply("b", finish_reason="length", completion_tokens=9, prompt_tokens=77)]
    ) as srv:
        data = _post(srv, n=2).json()
        assert [c["message"]["content"] for c in data["choices"]] == ["a", "b"]
        assert [c["finish_reason"] for c in data["choices"]] == ["stop", "length"]
        assert data["usage"]["completion_tokens"] == 1 + 9
        assert data["usage"]["prompt_tokens"] == 77


def test_status_entries_and_retry_after() -> None:
    with ScriptedLLMServer(
        [Status(429, retry_after=1.5), Status(503, message="overloaded", error_code="busy")]
    ) as srv:
        r = _post(srv)
        assert r.status_code == 429 and r.headers["retry-after"] == "1.5"
        assert r.json()["error"]["type"] == "rate_limit_error"
        r = _post(srv)
        assert r.status_code == 503 and r.json()["error"] == {
            "message": "overloaded",
            "type": "server_error",
            "code": "busy",
        }


def test_drop_hang_and_malformed() -> None:
    # the hang outlasts the client's timeout on any machine (the server cancels it when it closes)
    with ScriptedLLMServer([Drop(), Hang(600), Malformed(), Malformed("oops", status=502), "fine"]) as srv:
        with pytest.raises(httpx.RemoteProtocolError):
            _post(srv)
        with pytest.raises(httpx.ReadTimeout):
            _post(srv, timeout=0.1)
        r = _post(srv)
        assert r.status_code == 200
        with pytest.raises(json.JSONDecodeError):
            json.loads(r.content)
        r = _post(srv)
        assert (r.status_code, r.text) == (502, "oops")
        assert _post(srv).json()["choices"][0]["message"]["content"] == "fine"


def test_callable_script_sees_the_request() -> None:
    def fake(req: dict) -> str:
        last = req["messages"][-1]["content"]
        return f"<answer>{len(last)}</answer>"

    with ScriptedLLMServer(fake) as srv:
        assert (
            _post(srv).json()["choices"][0]["message"]["content"]
            == f"<answer>{len(MSGS[0]['content'])}</answer>"
        )
        with pytest.raises(TypeError, match="callable"):
            srv.add("x")


def test_exhausted_script_fails_the_with_block() -> None:
    with pytest.raises(AssertionError, match="script exhausted"), ScriptedLLMServer(["only"]) as srv:
        assert _post(srv).status_code == 200
        r = _post(srv)
        assert r.status_code == 500 and "script exhausted" in r.json()["error"]["message"]
    with ScriptedLLMServer([], strict=False) as srv:  # opt out
        assert _post(srv).status_code == 500
        assert srv.script_errors


def test_non_reply_drawn_for_extra_choice_is_a_script_error() -> None:
    with ScriptedLLMServer(["a", Drop()], strict=False) as srv:
        assert _post(srv, n=2).status_code == 500
        assert "non-reply" in srv.script_errors[0]


def test_models_route_404_bad_json_and_add() -> None:
    with ScriptedLLMServer(model="tiny") as srv:
        assert httpx.get(f"{srv.base_url}/models").json()["data"][0]["id"] == "tiny"
        assert httpx.post(f"{srv.base_url}/embeddings", json={}).status_code == 404
        r = httpx.post(
            f"{srv.base_url}/chat/completions", content=b"{nope", headers={"content-type": "application/json"}
        )
        assert r.status_code == 400
        srv.add("later")
        assert _post(srv).json()["choices"][0]["message"]["content"] == "later"
    with pytest.raises(RuntimeError, match="not running"):
        _ = srv.base_url


def test_keep_alive_and_chunked_request_body() -> None:
    with ScriptedLLMServer(["x", "y"]) as srv, httpx.Client() as client:
        body = json.dumps({"model": "m", "messages": MSGS}).encode()
        r1 = client.post(f"{srv.base_url}/chat/completions", content=iter([body[:10], body[10:]]))  # chunked
        r2 = client.post(f"{srv.base_url}/chat/completions", json={"model": "m", "messages": MSGS})
        assert [
            r1.json()["choices"][0]["message"]["content"],
            r2.json()["choices"][0]["message"]["content"],
        ] == [
            "x",
            "y",
        ]
        assert len(srv.requests) == 2


def test_dropped_connection_is_really_closed() -> None:
    with ScriptedLLMServer([Drop()]) as srv:
        body = json.dumps({"model": "m", "messages": MSGS}).encode()
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
            s.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n" % len(body)
                + body
            )
            assert s.recv(100) == b""  # EOF, no bytes


async def _raw_post(port: int, body: bytes) -> tuple[float, bytes]:
    """One request over a fresh socket with a hand-written HTTP/1.1 client.

    httpx's connection pool scans every pooled connection on each request, which at 64 connections
    costs more CPU than the server under test; a raw client keeps this test about the server.
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n" % len(body)
    t0 = time.perf_counter()
    writer.write(head + body)
    await writer.drain()
    resp_head = await reader.readuntil(b"\r\n\r\n")
    length = int(
        next(h for h in resp_head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1]
    )
    payload = await reader.readexactly(length)
    elapsed = time.perf_counter() - t0
    writer.close()
    return elapsed, payload


async def test_sixty_four_concurrent_requests_each_take_the_fixed_latency() -> None:
    """The benchmark's shape: 64 requests at once, each reply held for ``latency_s``, none serialized."""
    # Not timed against a bound: all 64 held at once (max_in_flight) is what proves nothing is serialized.
    # The latency is long enough that the 64 requests all arrive while the first are still held, even on
    # a busy machine; each reply is held at least that long (a lower bound, safe under load).
    latency = 1.0
    body = json.dumps({"model": "m", "messages": MSGS}).encode()
    with ScriptedLLMServer(lambda req: "ok", latency_s=latency) as srv:
        results = await asyncio.gather(*(_raw_post(srv.port, body) for _ in range(64)))
        assert all(json.loads(p)["choices"][0]["message"]["content"] == "ok" for _, p in results)
        assert min(t for t, _ in results) >= latency * 0.98
        assert srv.max_in_flight == 64  # all held at once
        assert len(srv.requests) == 64


async def test_usable_from_async_with() -> None:
    async with ScriptedLLMServer(["hi"]) as srv:
        async with httpx.AsyncClient() as client:
            r = await client.post(f"{srv.base_url}/chat/completions", json={"model": "m", "messages": MSGS})
        assert r.json()["choices"][0]["message"]["content"] == "hi"


def test_callable_failures_are_script_errors() -> None:
    def broken(req: dict) -> object:
        if len(req["messages"]) > 1:
            return 42  # not an entry
        raise KeyError("boom")

    with ScriptedLLMServer(broken, strict=False) as srv:
        assert _post(srv).status_code == 500
        r = httpx.post(
            f"{srv.base_url}/chat/completions", json={"model": "m", "messages": MSGS * 2}, timeout=5
        )
        assert r.status_code == 500
        assert srv.script_errors == ["script callable raised KeyError: 'boom'", "bad script entry 42"]

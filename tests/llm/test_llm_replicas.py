"""Several replicas behind one model spec: fewest-in-flight routing, failover, benching, over real HTTP."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from datadojo.llm import load_backend, parse_model_spec
from datadojo.llm.base import LLMError
from datadojo.llm.replicas import ReplicaSet, split_base_urls
from datadojo.testing.server import Drop, Reply, ScriptedLLMServer, Status


def closed_port_url() -> str:
    """A loopback URL nobody listens on (connection refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


async def ask(backend: Any, i: int) -> str:
    return (await backend.chat([{"role": "user", "content": f"q{i}"}]))[0].text


def test_spec_with_several_base_urls() -> None:
    ms = parse_model_spec("openai:m@http://a:8000/v1,http://b:8000/v1?replica_down_s=5")
    assert ms.base_url == "http://a:8000/v1,http://b:8000/v1" and ms.options["replica_down_s"] == 5.0
    backend = load_backend(ms)
    assert [r.url for r in backend.replicas.replicas] == ["http://a:8000/v1", "http://b:8000/v1"]
    with pytest.raises(ValueError, match="must be http"):
        parse_model_spec("openai:m@http://a:8000/v1,ftp://b/v1")
    with pytest.raises(ValueError, match="appears twice"):
        parse_model_spec("openai:m@http://a:8000/v1,http://a:8000/v1/")
    with pytest.raises(ValueError, match="empty base URL"):
        split_base_urls("http://a/v1,,http://b/v1")


def test_fewest_in_flight_with_rotating_ties() -> None:
    now = [0.0]
    rs = ReplicaSet(["a", "b", "c"], down_s=10, clock=lambda: now[0])
    first = [rs.pick().url for _ in range(3)]
    assert sorted(first) == ["a", "b", "c"]  # one each while all are busy
    b = rs.replicas[1]
    rs.done(b)
    assert rs.pick() is b  # the only one with a free hand
    rs.failed(b, "HTTP 500")
    rs.done(b)
    for r in rs.replicas:
        if r is not b:
            rs.done(r)
    assert {rs.pick().url for _ in range(4)} == {"a", "c"}  # b is benched
    now[0] = 10.0
    for r in rs.replicas:
        r.in_flight = 0
    assert "b" in {rs.pick().url for _ in range(3)}  # back after down_s
    rs2 = ReplicaSet(["a", "b"], down_s=10, clock=lambda: now[0])
    rs2.failed(rs2.replicas[0], "x")
    rs2.failed(rs2.replicas[1], "y", retry_after=30)
    assert rs2.pick().url == "a"  # all down: the one that comes back first


async def test_requests_spread_over_two_servers() -> None:
    with (
        ScriptedLLMServer(lambda r: "from a", latency_s=0.05) as a,
        ScriptedLLMServer(lambda r: "from b", latency_s=0.05) as b,
    ):
        backend = load_backend(f"openai:m@{a.base_url},{b.base_url}?max_concurrency=8")
        texts = await asyncio.gather(*(ask(backend, i) for i in range(8)))
        await backend.aclose()
    assert sorted(texts) == ["from a"] * 4 + ["from b"] * 4
    assert len(a.requests) == len(b.requests) == 4


async def test_a_replica_that_dies_mid_run_is_failed_over_and_benched() -> None:
    dead = {"a": False}

    def script_a(_request: dict[str, Any]) -> Any:
        return Drop() if dead["a"] else Reply("from a")

    with (
        ScriptedLLMServer(script_a, latency_s=0.02) as a,
        ScriptedLLMServer(lambda r: "from b", latency_s=0.02) as b,
    ):
        backend = load_backend(
            f"openai:m@{a.base_url},{b.base_url}?max_concurrency=4&max_retries=2&replica_down_s=3600"
        )
        before = await asyncio.gather(*(ask(backend, i) for i in range(4)))
        assert sorted(before) == ["from a"] * 2 + ["from b"] * 2
        dead["a"] = True  # a now drops every connection, as a crashing server does
        after = await asyncio.gather(*(ask(backend, i) for i in range(10)))
        stats = backend.replicas.stats()
        retries = backend.usage.retries
        await backend.aclose()
    assert after == ["from b"] * 10
    a_stats, b_stats = stats
    assert a_stats["failures"] >= 1 and a_stats["down_for_s"] > 0 and "connection" in a_stats["last_error"]
    # a got at most the requests in flight when it died; once benched, no more.
    assert len(a.requests) - 2 == a_stats["failures"] == retries
    assert b_stats["failures"] == 0


async def test_an_unreachable_replica_and_request_errors() -> None:
    with ScriptedLLMServer(["ok 1", "ok 2", Status(400, message="bad request")]) as b:
        backend = load_backend(f"openai:m@{closed_port_url()},{b.base_url}?max_retries=1&replica_down_s=3600")
        got = [await ask(backend, i) for i in range(2)]
        # A 400 belongs to the request: it is not retried and does not bench b.
        with pytest.raises(LLMError, match="HTTP 400") as info:
            await ask(backend, 3)
        stats = backend.replicas.stats()
        await backend.aclose()
    assert got == ["ok 1", "ok 2"] and not info.value.retryable
    assert stats[0]["failures"] == 1 and stats[1]["failures"] == 0 and stats[1]["down_for_s"] == 0
    # Both replicas unreachable: the retry budget is spent and the error names the last replica tried.
    backend = load_backend(
        f"openai:m@{closed_port_url()},{closed_port_url()}?max_retries=1&backoff_base=0&replica_down_s=0"
    )
    with pytest.raises(LLMError, match="giving up after 2 attempt"):
        await ask(backend, 0)
    await backend.aclose()

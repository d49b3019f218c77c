"""A loopback OpenAI chat-completions server that replays scripted replies, for tests and benchmarks.

Why a real HTTP server rather than a mock object: the OpenAI backend's retry loop, timeouts, connection
pool and response parsing are exactly what breaks in production (429 storms, 500s, dropped keep-alive
connections, slow replies). Serving scripted replies over a socket makes tests exercise the real
``openai`` client path end to end.

Usage::

    with ScriptedLLMServer(["<code>print(1)</code>", Status(429, retry_after=0.01), "<answer>1</answer>"]) as srv:
        backend = load_backend(f"openai:fake@{srv.base_url}")
        ...
        assert srv.requests[0].json["stop"] == ["</code>"]

A script is either a list of entries consumed in order, or a callable ``(request_json) -> entry`` for
stateful fakes. Entries are plain strings (a reply), :class:`Reply`, :class:`Status`, :class:`Drop`,
:class:`Hang` or :class:`Malformed`. A request for ``n`` choices draws ``n`` entries; a failure entry
first in line answers the whole request. Like vLLM, the server cuts a reply at the earliest stop
sequence (finish_reason ``"stop"``, the sequence reported as ``stop_reason``) or at ``max_tokens``
approximate tokens (finish_reason ``"length"``), and reports approximate token usage.

The server is a small hand-written asyncio HTTP/1.1 server (keep-alive, Content-Length or chunked
bodies) running on its own event loop in a daemon thread, so synchronous and asynchronous tests can
both use it; it binds ``127.0.0.1`` on a free port. It holds no limit on concurrent requests, and the
fixed ``latency_s`` is applied per request with ``asyncio.sleep`` (about a millisecond of precision).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from datadojo.errors import DataDojoError
from datadojo.llm.base import apply_stop, approx_message_tokens, approx_token_count, approx_tokenize

__all__ = [
    "Drop",
    "Hang",
    "Malformed",
    "RecordedRequest",
    "Reply",
    "ScriptEntry",
    "ScriptedLLMServer",
    "Status",
]


@dataclass(frozen=True)
class Reply:
    """A successful choice. ``delay`` (seconds) replaces the server's ``latency_s`` for this request.

    ``finish_reason`` forces the reported reason (otherwise computed from stop / max_tokens);
    ``prompt_tokens`` / ``completion_tokens`` force the reported usage. ``logprobs`` is what the server
    returns when the request asks for log-probabilities: ``(token, logprob, ((alt, logprob), ...))`` per
    token. Without it such a request gets each approximate token at log-probability 0 and no alternatives.
    """

    text: str
    delay: float | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    logprobs: tuple[tuple[str, float, tuple[tuple[str, float], ...]], ...] | None = None


@dataclass(frozen=True)
class Status:
    """An HTTP error reply in OpenAI's error format, optionally with a ``Retry-After`` header (seconds)."""

    code: int
    retry_after: float | None = None
    message: str | None = None
    error_code: str | None = None
    delay: float | None = None


@dataclass(frozen=True)
class Drop:
    """Close the connection after reading the request, without any reply."""

    delay: float | None = None


@dataclass(frozen=True)
class Hang:
    """Send nothing for ``seconds`` (beyond any client timeout), then close the connection."""

    seconds: float


@dataclass(frozen=True)
class Malformed:
    """Reply with a raw body (default: truncated JSON) and the given status, as a broken proxy might."""

    body: str = '{"id": "chatcmpl-broken", "choices": [{"message": '
    status: int = 200
    delay: float | None = None


ScriptEntry = str | Reply | Status | Drop | Hang | Malformed
Script = Iterable[ScriptEntry] | Callable[[dict[str, Any]], ScriptEntry]


@dataclass
class RecordedRequest:
    """One request as the server saw it: method, path, lower-cased headers, parsed JSON body."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    received_at: float = field(default_factory=time.monotonic)


class ScriptError(DataDojoError, RuntimeError):
    """The script could not answer a request (exhausted, bad entry, callable raised)."""


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    411: "Length Required",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
_MAX_BODY = 64 * 1024 * 1024


class ScriptedLLMServer:
    """Context manager running the loopback server; see the module docstring.

    ``latency_s`` is the fixed delay before every reply (entries may override it). ``model`` is what
    ``/v1/models`` lists. With ``strict=True`` (the default) leaving the ``with`` block raises
    ``AssertionError`` if the script failed to answer some request (exhausted, or a bad entry), so a test
    whose fake ran dry cannot pass by accident. ``ignore_n=True`` answers one choice whatever ``n`` asks,
    as some servers (Ollama) do. ``requests``, ``max_in_flight`` and ``script_errors`` may
    be read at any time from any thread.
    """

    def __init__(
        self,
        script: Script = (),
        *,
        latency_s: float = 0.0,
        model: str = "scripted",
        strict: bool = True,
        ignore_n: bool = False,
        port: int = 0,
    ) -> None:
        if latency_s < 0:
            raise ValueError(f"latency_s must be >= 0, got {latency_s}")
        self.latency_s = float(latency_s)
        self._bind_port = port  # 0: a free port; a fixed one lets a test restart "the same" server
        self.model = model
        self.strict = strict
        self.ignore_n = ignore_n
        self._lock = threading.Lock()
        self._fn: Callable[[dict[str, Any]], ScriptEntry] | None = None
        self._queue: list[ScriptEntry] = []
        if callable(script):
            self._fn = script
        else:
            self._queue = list(script)
        self._requests: list[RecordedRequest] = []
        self._errors: list[str] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self._port: int | None = None

    # -- public state ------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("server is not running; use it as a context manager or call start()")
        return self._port

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``http://127.0.0.1:PORT/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Chat-completion requests received so far (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def max_in_flight(self) -> int:
        """Most chat requests the server was handling at once."""
        with self._lock:
            return self._max_in_flight

    @property
    def script_errors(self) -> list[str]:
        with self._lock:
            return list(self._errors)

    @property
    def remaining(self) -> int:
        """Entries left in a list script (0 for a callable script)."""
        with self._lock:
            return len(self._queue)

    def add(self, *entries: ScriptEntry) -> None:
        """Append entries to a list script while the server runs."""
        if self._fn is not None:
            raise TypeError("cannot add entries to a callable script")
        with self._lock:
            self._queue.extend(entries)

    def reset_stats(self) -> None:
        """Forget recorded requests and the in-flight high-water mark (e.g. after a warm-up)."""
        with self._lock:
            self._requests.clear()
            self._max_in_flight = self._in_flight

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> ScriptedLLMServer:
        if self._thread is not None:
            raise RuntimeError("server already started")
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(
                        self._handle, "127.0.0.1", self._bind_port, backlog=2048, limit=_MAX_BODY
                    )
                )
                self._port = self._server.sockets[0].getsockname()[1]
            except BaseException as e:  # reported to the starting thread
                failure.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._shutdown())
                loop.close()

        self._thread = threading.Thread(target=run, name="ScriptedLLMServer", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise RuntimeError(f"loopback server failed to start: {failure[0]}") from failure[0]
        return self

    def stop(self) -> None:
        if self._thread is None or self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._thread = None
        self._port = None

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._conns):
            t.cancel()
        if self._conns:
            await asyncio.gather(*self._conns, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.stop()
        if self.strict and exc_type is None and self._errors:
            raise AssertionError("ScriptedLLMServer script errors:\n  " + "\n  ".join(self._errors))

    async def __aenter__(self) -> ScriptedLLMServer:
        return self.start()

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        await asyncio.to_thread(self.__exit__, exc_type, exc, tb)

    # -- script --------------------------------------------------------------------------------------

    def _draw(self, request: dict[str, Any]) -> ScriptEntry:
        if self._fn is not None:
            try:
                entry = self._fn(request)
            except Exception as e:
                raise ScriptError(f"script callable raised {type(e).__name__}: {e}") from e
        else:
            with self._lock:
                if not self._queue:
                    raise ScriptError(f"script exhausted after {len(self._requests)} request(s)")
                entry = self._queue.pop(0)
        if not isinstance(entry, str | Reply | Status | Drop | Hang | Malformed):
            raise ScriptError(f"bad script entry {entry!r}")
        return entry

    # -- HTTP ----------------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            while True:
                req = await self._read_request(reader)
                if req is None:
                    break
                method, path, headers, body = req
                keep = await self._dispatch(method, path, headers, body, writer)
                if not keep or headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            self._conns.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _read_request(
        self, reader: asyncio.StreamReader
    ) -> tuple[str, str, dict[str, str], bytes] | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:  # the client closed the keep-alive connection
            return None
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            raise ValueError(f"bad request line {lines[0]!r}")
        method, path, _ = parts
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunk = await reader.readexactly(size + 2)
                if size == 0:
                    break
                chunks.append(chunk[:-2])
            body = b"".join(chunks)
        else:
            length = int(headers.get("content-length", "0"))
            if length > _MAX_BODY:
                raise ValueError("body too large")
            body = await reader.readexactly(length) if length else b""
        return method, path, headers, body

    @staticmethod
    def _write(
        writer: asyncio.StreamWriter,
        status: int,
        payload: bytes,
        extra: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        head = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
            f"content-type: {content_type}",
            f"content-length: {len(payload)}",
        ]
        for k, v in (extra or {}).items():
            head.append(f"{k}: {v}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)

    @staticmethod
    def _error_body(message: str, type_: str, code: str | None = None) -> bytes:
        return json.dumps({"error": {"message": message, "type": type_, "code": code}}).encode()

    async def _dispatch(
        self, method: str, path: str, headers: dict[str, str], body: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one request; return whether the connection may be kept open."""
        route = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and route.endswith("/models"):
            data = {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "datadojo"}]}
            self._write(writer, 200, json.dumps(data).encode())
            await writer.drain()
            return True
        if method != "POST" or not route.endswith("/chat/completions"):
            self._write(writer, 404, self._error_body(f"no route {method} {path}", "not_found"))
            await writer.drain()
            return True
        try:
            request = json.loads(body or b"null")
        except json.JSONDecodeError as e:
            self._write(writer, 400, self._error_body(f"invalid JSON body: {e}", "invalid_request_error"))
            await writer.drain()
            return True
        with self._lock:
            self._requests.append(RecordedRequest(method, path, headers, request))
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            return await self._complete(request, writer)
        finally:
            with self._lock:
                self._in_flight -= 1

    async def _complete(self, request: Any, writer: asyncio.StreamWriter) -> bool:
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            self._write(writer, 400, self._error_body("'messages' must be a list", "invalid_request_error"))
            await writer.drain()
            return True
        n = 1 if self.ignore_n else request.get("n") or 1
        try:
            first = self._draw(request)
            entries = [first]
            if isinstance(first, str | Reply):
                for _ in range(int(n) - 1):
                    e = self._draw(request)
                    if not isinstance(e, str | Reply):
                        raise ScriptError(f"request for n={n} choices drew the non-reply entry {e!r}")
                    entries.append(e)
        except ScriptError as e:
            with self._lock:
                self._errors.append(str(e))
            self._write(writer, 500, self._error_body(f"script error: {e}", "server_error"))
            await writer.drain()
            return True

        delay = getattr(first, "delay", None)
        if isinstance(first, Hang):
            await asyncio.sleep(first.seconds)
            return False
        await asyncio.sleep(self.latency_s if delay is None else delay)
        if isinstance(first, Drop):
            return False
        if isinstance(first, Status):
            extra = {}
            if first.retry_after is not None:
                extra["retry-after"] = f"{first.retry_after:g}"
            msg = first.message or f"scripted {first.code}"
            kind = "rate_limit_error" if first.code == 429 else "server_error"
            self._write(writer, first.code, self._error_body(msg, kind, first.error_code), extra)
            await writer.drain()
            return True
        if isinstance(first, Malformed):
            self._write(writer, first.status, first.body.encode())
            await writer.drain()
            return True
        replies = [e if isinstance(e, Reply) else Reply(e) for e in entries]
        self._write(writer, 200, json.dumps(self._completion(request, replies)).encode())
        await writer.drain()
        return True

    def _completion(self, request: dict[str, Any], replies: list[Reply]) -> dict[str, Any]:
        raw_stop = request.get("stop") or []
        stop = [raw_stop] if isinstance(raw_stop, str) else list(raw_stop)
        max_tokens = request.get("max_tokens") or request.get("max_completion_tokens")
        choices = []
        completion_total = 0
        forced_prompt: int | None = None
        for i, r in enumerate(replies):
            text, matched = apply_stop(r.text, stop)
            reason = "stop"
            pieces = approx_tokenize(text)
            if max_tokens is not None and len(pieces) > int(max_tokens):
                text, matched, reason = "".join(pieces[: int(max_tokens)]), None, "length"
            tokens = r.completion_tokens if r.completion_tokens is not None else approx_token_count(text)
            completion_total += tokens
            if r.prompt_tokens is not None:
                forced_prompt = r.prompt_tokens
            choices.append(
                {
                    "index": i,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": r.finish_reason or reason,
                    "stop_reason": matched,
                    "logprobs": _logprobs_body(r, pieces, request) if request.get("logprobs") else None,
                }
            )
        msgs = [m for m in request["messages"] if isinstance(m, dict)]
        prompt = forced_prompt if forced_prompt is not None else approx_message_tokens(msgs)
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", self.model),
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion_total,
                "total_tokens": prompt + completion_total,
            },
        }


def _logprobs_body(reply: Reply, pieces: list[str], request: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's ``choice.logprobs`` object for a scripted reply (see :class:`Reply`)."""
    top_n = int(request.get("top_logprobs") or 0)
    if reply.logprobs is None:
        scripted = [(p, 0.0, ()) for p in pieces]
    else:
        scripted = [(t, lp, tuple(top)) for t, lp, top in reply.logprobs]
    return {
        "content": [
            {
                "token": token,
                "logprob": logprob,
                "bytes": list(token.encode()),
                "top_logprobs": [
                    {"token": alt, "logprob": alt_lp, "bytes": list(alt.encode())}
                    for alt, alt_lp in top[:top_n]
                ],
            }
            for token, logprob, top in scripted
        ]
    }

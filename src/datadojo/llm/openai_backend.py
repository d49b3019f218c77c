"""Chat completions from any OpenAI-compatible server (vLLM, SGLang, Ollama, llama.cpp, hosted APIs).

Built on the official ``openai`` ``AsyncOpenAI`` client with its own retries switched off
(``max_retries=0``): the retry loop here retries 429s, 5xx, timeouts, dropped connections and garbled
bodies with exponential backoff and *full jitter* (delay drawn uniformly from ``[0, min(cap, base·2^k)]``,
the AWS "Exponential Backoff and Jitter" scheme, so that 64 workers hit by the same 429 do not retry in
lock-step), honours ``Retry-After`` when the server sends one, and raises one :class:`LLMError` naming
the cause once the budget is spent. An ``asyncio.Semaphore`` bounds requests in flight (it is released
while backing off, so a sleeping retry does not hold a slot).

Requests go through ``AsyncOpenAI.post("/chat/completions", ...)`` rather than
``chat.completions.create``: the latter re-walks every message through the client's TypedDict
transformer, which measured at roughly a third of the client's CPU per request on long conversations,
and the agent runtime sends thousands of them. Authentication, base URL handling, timeouts and
error-to-exception mapping are the client's own either way.

The API key is read from an environment variable when the backend is created and is never stored in a
repr, log line or error message.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import json
import logging
import os
import random
import re
import ssl
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import openai

from datadojo.llm.base import (
    DEFAULT_MAX_CONCURRENCY,
    ChatBackend,
    Completion,
    LLMError,
    Message,
    ModelSpecError,
    SamplingParams,
    TokenLogprob,
    approx_message_tokens,
    approx_token_count,
    split_total,
)
from datadojo.llm.replicas import Replica, ReplicaSet, split_base_urls

__all__ = ["DEFAULT_API_KEY_ENV", "OpenAIBackend", "TokenizerLike"]

log = logging.getLogger(__name__)

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
# Local servers (vLLM, SGLang, llama.cpp) accept any key; the client refuses an empty one.
_PLACEHOLDER_KEY = "EMPTY"
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
_CONNECTIONS_PER_CLIENT = 8
_CONTEXT_OVERFLOW = re.compile(
    r"maximum context length|context (length|size|window)|prompt is too long", re.I
)

TokenizerLike = Any  # a callable str -> int, a tokenizer with apply_chat_template, or a local path


class _Secret:
    """Holds the API key; prints as ``***`` so no repr, f-string or traceback local shows it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "***"

    __str__ = __repr__


_MISSING = object()


class _Malformed(Exception):
    """The server answered 200 with a body that is not a usable chat completion."""


class OpenAIBackend(ChatBackend):
    """A :class:`ChatBackend` talking to an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    Args:
        model: model name as the server knows it (``--served-model-name`` for vLLM).
        base_url: e.g. ``http://localhost:8000/v1``; several replicas of the model as a comma-separated
            list (``http://a:8000/v1,http://b:8000/v1``): each request goes to the healthy replica with the
            fewest requests in flight, and a replica that fails is retried on another and benched for
            ``replica_down_s`` seconds (:mod:`datadojo.llm.replicas`).
        api_key_env: environment variable holding the key. If it is the default ``OPENAI_API_KEY`` and
            unset, the placeholder ``"EMPTY"`` is sent (what local servers expect); a variable named
            explicitly must be set.
        context_window: the model's window in tokens, or None if unknown (no pre-flight check).
        max_concurrency: requests in flight at once from this backend (a command's ``--concurrency``
            raises it: :func:`datadojo.llm.spec.requests_in_flight`).
        timeout / connect_timeout: seconds for a whole request / for opening a connection.
        max_retries: retries after the first attempt for transient failures.
        backoff_base / backoff_max: full-jitter backoff parameters (seconds).
        max_retry_after: cap on a server's ``Retry-After`` (seconds).
        tokenizer: for :meth:`count_tokens`: None (the approximation in :mod:`datadojo.llm.base`), a
            callable ``str -> int``, a transformers tokenizer, or a local tokenizer path (loaded lazily,
            offline) — the last two give exact counts with the model's chat template.
        split_n: send ``n > 1`` as ``n`` concurrent single-choice requests, for servers that ignore
            ``n`` (Ollama, some llama.cpp builds).
        extra_body: extra JSON fields for every request (e.g. vLLM's ``top_k``, ``chat_template_kwargs``).
        jitter_seed: seeds the backoff jitter, for reproducible tests.
        replica_down_s: how long a failed replica gets no requests (with several base URLs).
        http_client: the official client's HTTP transport: ``aiohttp`` (``openai[aiohttp]``'s
            ``DefaultAioHttpClient``, one client per replica: about half the CPU per request of httpx, which
            is what limits a driver core at high concurrency), ``httpx`` (the client's default, sharded over
            several connection pools), or ``auto`` (aiohttp when installed).
    """

    supports_response_format = True

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        context_window: int | None = None,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        max_retries: int = 5,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_retry_after: float = 120.0,
        tokenizer: TokenizerLike = None,
        split_n: bool = False,
        extra_body: dict[str, Any] | None = None,
        jitter_seed: int | None = None,
        replica_down_s: float = 30.0,
        http_client: str = "auto",
    ) -> None:
        super().__init__(model_id=model, context_window=context_window)
        if not model:
            raise ModelSpecError("model name must not be empty")
        urls = split_base_urls(base_url) if base_url and base_url.strip() else [""]
        for url in urls:
            if not re.match(r"^https?://[^/\s]+", url):
                raise ModelSpecError(
                    f"base_url must start with http:// or https:// and name a host, got {url!r}"
                )
        if not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise ModelSpecError(f"max_concurrency must be a positive integer, got {max_concurrency!r}")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ModelSpecError(f"max_retries must be a non-negative integer, got {max_retries!r}")
        for name, value in (
            ("timeout", timeout),
            ("connect_timeout", connect_timeout),
            ("backoff_max", backoff_max),
            ("max_retry_after", max_retry_after),
        ):
            if not value > 0:
                raise ModelSpecError(f"{name} must be > 0, got {value!r}")
        if backoff_base < 0:
            raise ModelSpecError(f"backoff_base must be >= 0, got {backoff_base!r}")
        key = os.environ.get(api_key_env)
        if not key:
            if api_key_env != DEFAULT_API_KEY_ENV:
                raise ModelSpecError(f"environment variable {api_key_env} (api_key_env) is not set")
            key = _PLACEHOLDER_KEY
        self._api_key = _Secret(key)
        self.api_key_env = api_key_env
        if http_client not in ("auto", "httpx", "aiohttp"):
            raise ModelSpecError(f"http_client must be auto, httpx or aiohttp, got {http_client!r}")
        self.http_client = _aiohttp_choice(http_client)
        self.base_url = ",".join(urls)
        self.replicas = ReplicaSet(urls, down_s=replica_down_s)
        self.max_concurrency = max_concurrency
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self.max_retries = max_retries
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.max_retry_after = float(max_retry_after)
        self.split_n = split_n
        self.extra_body = dict(extra_body or {})
        self._tokenizer_spec = tokenizer
        self._tokenizer: Any = None
        self._rng = random.Random(jitter_seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clients: dict[str, list[openai.AsyncOpenAI]] = {}
        self._turns: dict[str, int] = {}
        self._ssl: ssl.SSLContext | None = None
        self._sem: asyncio.Semaphore | None = None

    def __repr__(self) -> str:
        return (
            f"OpenAIBackend(model_id={self.model_id!r}, base_url={self.base_url!r}, "
            f"api_key_env={self.api_key_env!r}, context_window={self.context_window!r}, "
            f"max_concurrency={self.max_concurrency})"
        )

    # -- connection state ------------------------------------------------------------------------

    def _state(self) -> asyncio.Semaphore:
        """The semaphore for the running loop; (re)makes the clients too (both bind to the loop that
        first uses them).

        Each replica's requests are spread round-robin over ``ceil(max_concurrency / 8)`` clients (at most
        16): the HTTP connection pool scans all its connections on every request, so one pool of 64
        connections costs measurably more CPU per request than eight pools of eight. The clients share one
        TLS context, which is slow to build.
        """
        loop = asyncio.get_running_loop()
        if self._loop is not loop or not self._clients or self._sem is None:
            self._loop = loop
            if self._ssl is None:
                self._ssl = _ssl_context()
            if self.http_client == "aiohttp":
                shards = 1

                def transport() -> Any:
                    return openai.DefaultAioHttpClient(verify=self._ssl)
            else:
                shards = min(16, -(-self.max_concurrency // _CONNECTIONS_PER_CLIENT))

                def transport() -> Any:
                    return openai.DefaultAsyncHttpxClient(verify=self._ssl)

            self._clients = {
                r.url: [
                    openai.AsyncOpenAI(
                        api_key=self._api_key.get(),
                        base_url=r.url,
                        max_retries=0,
                        timeout=openai.Timeout(self.timeout, connect=self.connect_timeout),
                        http_client=transport(),
                    )
                    for _ in range(shards)
                ]
                for r in self.replicas.replicas
            }
            self._sem = asyncio.Semaphore(self.max_concurrency)
        return self._sem

    def _client(self, url: str) -> openai.AsyncOpenAI:
        clients = self._clients[url]
        turn = self._turns[url] = (self._turns.get(url, 0) + 1) % len(clients)
        return clients[turn]

    async def aclose(self) -> None:
        by_url, self._clients, self._loop, self._sem = self._clients, {}, None, None
        for client in (c for clients in by_url.values() for c in clients):
            try:
                await client.close()
            except RuntimeError:  # created on a loop that is gone; nothing left to release
                pass

    async def check_reachable(self) -> None:
        """One ``GET /models`` per replica, without retries: fine when any replica answers (an HTTP error
        status is an answer: the server is up), :class:`LLMError` naming every URL when none does."""
        self._state()
        causes = []
        for replica in self.replicas.replicas:
            try:
                await self._client(replica.url).models.list(timeout=self.connect_timeout)
                return
            except openai.APIStatusError:
                return
            except (openai.APIConnectionError, openai.APITimeoutError) as exc:
                causes.append(f"{replica.url} ({_root_cause(exc)})")
        raise LLMError(
            f"cannot reach the model server for {self.model_id!r} at {', '.join(causes)}: is it up, and is "
            "the URL right?",
            retryable=True,
        )

    # -- requests --------------------------------------------------------------------------------

    def _body(self, messages: list[Message], params: SamplingParams, n: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            **self.extra_body,
            "model": self.model_id,
            "messages": messages,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if n != 1:
            body["n"] = n
        if params.stop:
            body["stop"] = list(params.stop)
        if params.max_tokens is not None:
            body["max_tokens"] = params.max_tokens
        if params.seed is not None:
            body["seed"] = params.seed
        if params.response_format is not None:
            body["response_format"] = params.response_format
        if params.logprobs:
            body["logprobs"] = True
            if params.top_logprobs is not None:
                body["top_logprobs"] = params.top_logprobs
        return body

    async def _generate(self, messages: list[Message], params: SamplingParams) -> list[Completion]:
        if self.split_n and params.n > 1:
            parts = await asyncio.gather(
                *(
                    self._request(messages, params, 1, None if params.seed is None else params.seed + i)
                    for i in range(params.n)
                )
            )
            return [c for part in parts for c in part]
        return await self._request(messages, params, params.n, params.seed)

    async def _request(
        self, messages: list[Message], params: SamplingParams, n: int, seed: int | None
    ) -> list[Completion]:
        sem = self._state()
        sp = params if seed == params.seed else dataclasses.replace(params, seed=seed)
        body = self._body(messages, sp, n)
        attempts = self.max_retries + 1
        t0 = time.perf_counter()
        for attempt in range(1, attempts + 1):
            retry_after: float | None = None
            replica: Replica | None = None
            try:
                async with sem:
                    replica = self.replicas.pick()  # chosen once a slot is free: in-flight counts are current
                    try:
                        # The raw response: building the client's typed objects costs more CPU than the
                        # JSON itself, and _convert checks every field anyway.
                        raw = await self._client(replica.url).post(
                            "/chat/completions", body=body, cast_to=httpx.Response
                        )
                        data = json.loads(raw.content)
                    finally:
                        self.replicas.done(replica)
                    return self._convert(data, messages, sp, n, time.perf_counter() - t0)
            except openai.APIStatusError as e:
                status = e.status_code
                retryable = status in _RETRYABLE_STATUS or status >= 500
                cause = f"HTTP {status}: {_error_message(e)}"
                if not retryable:
                    raise LLMError(
                        f"{self.model_id} at {replica.url if replica else self.base_url}: {cause}",
                        retryable=False,
                        attempts=attempt,
                        status=status,
                        context_overflow=_is_context_overflow(e),
                    ) from e
                retry_after = _retry_after(e.response.headers)
                error: Exception = e
            except openai.APITimeoutError as e:
                status, cause, error = None, f"timed out after {self.timeout:g}s", e
                root = _root(e)
                if (
                    root is not e
                    and not isinstance(root, TimeoutError)
                    and "Timeout" not in type(root).__name__
                ):
                    # The aiohttp transport reports a refused or dropped connection as a connect timeout.
                    cause = f"connection error ({_root_cause(e)})"
            except openai.APIConnectionError as e:
                status, cause, error = None, f"connection error ({_root_cause(e)})", e
            except (_Malformed, openai.APIResponseValidationError, json.JSONDecodeError) as e:
                # JSONDecodeError: a 200 whose body is not JSON (a broken proxy, a truncated reply).
                status, cause, error = None, f"malformed response ({e})", e
            where = self.base_url
            if replica is not None:
                where = replica.url
                self.replicas.failed(replica, cause, retry_after=retry_after)
            if attempt == attempts:
                raise LLMError(
                    f"{self.model_id} at {where}: giving up after {attempts} attempt(s); last: {cause}",
                    retryable=True,
                    attempts=attempt,
                    status=status,
                ) from error
            if replica is not None and self.replicas.another_up(replica):
                delay = 0.0  # another replica is healthy: fail over at once
            else:
                delay = self._backoff(attempt, retry_after)
            self.usage.retries += 1
            log.warning(
                "%s at %s: %s; retry %d/%d in %.2fs",
                self.model_id,
                where,
                cause,
                attempt,
                self.max_retries,
                delay,
            )
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before retry ``attempt`` (1-based): Retry-After if given, else full jitter."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        cap = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        return self._rng.uniform(0, cap)

    def _convert(
        self, resp: Any, messages: list[Message], params: SamplingParams, n: int, latency: float
    ) -> list[Completion]:
        """Completions from a response body (the decoded JSON, or a typed ``ChatCompletion``);
        ``_Malformed`` if the body has the wrong shape.

        A 200 from a broken proxy can hold anything; every field is checked here rather than trusted.
        """
        choices = _field(resp, "choices")
        if not isinstance(choices, list) or not choices:
            raise _Malformed("no choices in the response")
        if len(choices) < n:
            raise LLMError(
                f"{self.model_id} at {self.base_url}: asked for n={n} choices, got {len(choices)}; "
                "the server may not support n > 1 (use split_n=true)",
                retryable=False,
            )
        texts: list[str] = []
        reasons: list[str] = []
        for i, c in enumerate(choices[:n]):
            index = _field(c, "index", i)
            content = _field(_field(c, "message"), "content", _MISSING)
            if content is _MISSING:
                raise _Malformed(f"choice {index} has no message")
            if content is not None and not isinstance(content, str):
                raise _Malformed(f"choice {index} content is {type(content).__name__}, not text")
            reason = _field(c, "finish_reason")
            texts.append(content or "")
            reasons.append(reason if isinstance(reason, str) and reason else "unknown")
        usage = _field(resp, "usage")
        prompt = _field(usage, "prompt_tokens")
        total = _field(usage, "completion_tokens")
        if not isinstance(prompt, int):
            prompt = self.count_tokens(messages)
        if isinstance(total, int):
            shares = split_total(total, [approx_token_count(t) + 1 for t in texts])
        else:
            shares = [approx_token_count(t) for t in texts]
        return [
            Completion(
                text=text,
                finish_reason=reason,
                stop_sequence=_matched_stop(c, reason, params.stop),
                prompt_tokens=prompt,
                completion_tokens=tokens,
                latency_s=latency,
                logprobs=_token_logprobs(c) if params.logprobs else None,
            )
            for c, text, reason, tokens in zip(choices[:n], texts, reasons, shares, strict=True)
        ]

    # -- token counting ----------------------------------------------------------------------------

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Prompt tokens for ``messages`` including the generation prompt.

        Exact when a tokenizer with a chat template was given; otherwise content tokens (by the given
        counter, or :func:`~datadojo.llm.base.approx_token_count`) plus OpenAI's per-message framing.
        """
        tok = self._resolve_tokenizer()
        if tok is None:
            return approx_message_tokens(messages)
        if hasattr(tok, "apply_chat_template"):
            text = tok.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
            return len(tok(text, add_special_tokens=False)["input_ids"])
        return approx_message_tokens(messages, counter=tok)

    def _resolve_tokenizer(self) -> Callable[[str], int] | Any | None:
        if self._tokenizer is None and self._tokenizer_spec is not None:
            spec = self._tokenizer_spec
            if isinstance(spec, str | os.PathLike):
                try:
                    from transformers import AutoTokenizer
                except ImportError as e:  # pragma: no cover - depends on the install
                    raise ImportError("tokenizer=PATH needs transformers: pip install 'datadojo[hf]'") from e
                spec = AutoTokenizer.from_pretrained(os.fspath(spec), local_files_only=True)
            elif not (callable(spec) or hasattr(spec, "apply_chat_template")):
                raise TypeError(
                    f"tokenizer must be a callable, a tokenizer or a path, got {type(spec).__name__}"
                )
            self._tokenizer = spec
        return self._tokenizer


def _ssl_context() -> ssl.SSLContext:
    """The CA bundle httpx would use: ``$SSL_CERT_FILE`` if set, else certifi's, else the system store."""
    cafile = os.environ.get("SSL_CERT_FILE")
    if not cafile:
        try:
            import certifi

            cafile = certifi.where()
        except ImportError:  # pragma: no cover - certifi ships with httpx
            cafile = None
    return ssl.create_default_context(cafile=cafile)


def _error_message(e: openai.APIStatusError) -> str:
    body = e.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:500]
        if isinstance(inner, str):
            return inner[:500]
    return str(e.message)[:500]


def _is_context_overflow(e: openai.APIStatusError) -> bool:
    if e.status_code not in (400, 413, 422):
        return False
    if getattr(e, "code", None) == "context_length_exceeded":
        return True
    return bool(_CONTEXT_OVERFLOW.search(_error_message(e)))


def _retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` / ``Retry-After`` (delta-seconds or an HTTP date), if present."""
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return float(ms) / 1000
        value = headers.get("retry-after")
    except AttributeError:
        return None
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _matched_stop(choice: Any, finish_reason: str, requested: Sequence[str]) -> str | None:
    """The stop string that ended a choice, from vLLM's ``stop_reason`` or SGLang's ``matched_stop``."""
    if finish_reason != "stop":
        return None
    extra = choice if isinstance(choice, dict) else getattr(choice, "model_extra", None)
    if not isinstance(extra, dict):
        return None
    for key in ("stop_reason", "matched_stop"):
        value = extra.get(key)
        if isinstance(value, str) and value in requested:
            return value
    return None


def _field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj.name`` or ``obj[name]``: a field of the decoded JSON body, or of a typed model built from it
    without validation (where a nested field can still be the plain dict the server sent)."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _aiohttp_choice(choice: str) -> str:
    """``aiohttp`` or ``httpx``: ``auto`` takes aiohttp when the client's aiohttp extra is installed."""
    if choice == "httpx":
        return choice
    try:
        import aiohttp  # noqa: F401
        from openai import DefaultAioHttpClient  # noqa: F401
    except ImportError:
        if choice == "aiohttp":
            raise ValueError(
                "http_client=aiohttp needs the client's aiohttp extra: pip install 'openai[aiohttp]'"
            ) from None
        return "httpx"
    return "aiohttp"


def _token_logprobs(choice: Any) -> tuple[TokenLogprob, ...] | None:
    """The choice's ``logprobs.content`` as :class:`TokenLogprob` records, or None when absent or malformed.

    OpenAI's shape (which vLLM and SGLang follow): ``{"content": [{"token", "logprob", "top_logprobs":
    [{"token", "logprob"}, ...]}, ...]}``. A server that ignores the request sends nothing; that is not an
    error, the caller sees ``None``.
    """
    content = _field(_field(choice, "logprobs"), "content")
    if not isinstance(content, list):
        return None
    out: list[TokenLogprob] = []
    for item in content:
        token, logprob = _field(item, "token"), _field(item, "logprob")
        if not isinstance(token, str) or not isinstance(logprob, int | float):
            return None
        top: list[tuple[str, float]] = []
        for alt in _field(item, "top_logprobs") or ():
            alt_token, alt_lp = _field(alt, "token"), _field(alt, "logprob")
            if isinstance(alt_token, str) and isinstance(alt_lp, int | float):
                top.append((alt_token, float(alt_lp)))
        out.append(TokenLogprob(token, float(logprob), tuple(top)))
    return tuple(out)


def _root(e: BaseException) -> BaseException:
    while e.__cause__ is not None:
        e = e.__cause__
    return e


def _root_cause(e: BaseException) -> str:
    e = _root(e)
    return type(e).__name__ + (f": {e}" if str(e) else "")

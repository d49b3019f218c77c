"""The one small protocol every LLM backend speaks: :class:`ChatBackend`.

Why a protocol of our own rather than passing an ``openai`` client around: the agent loop, the
synthesis pipelines and evaluation must not know whether a completion came from a vLLM server, a
hosted API or a local transformers checkpoint (see ``docs/architecture.md``). They only need
"messages in, ``n`` completions out", a way to tell whether the next request still fits the context
window, and one exception type for a request that finally failed.

Everything a caller needs is here:

* :class:`SamplingParams` — temperature / top-p / max tokens / n / seed / stop, validated once;
* :class:`Completion` — the text, why generation stopped, token counts and latency;
* :class:`LLMError` — a final failure, with ``retryable`` telling callers whether trying later may help;
* :class:`UsageStats` — running totals a backend keeps (requests, retries, tokens);
* :func:`approx_tokenize` / :func:`approx_message_tokens` — the documented token approximation used
  when no exact tokenizer is available (the OpenAI backend by default, and the loopback test server).
"""

from __future__ import annotations

import abc
import asyncio
import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from datadojo.errors import DataDojoError, ExitCode

__all__ = [
    "DEFAULT_MAX_CONCURRENCY",
    "ChatBackend",
    "Completion",
    "FinishReason",
    "LLMError",
    "Message",
    "ModelSpecError",
    "SamplingParams",
    "ServerUnreachableError",
    "TokenCounter",
    "TokenLogprob",
    "UsageStats",
    "apply_stop",
    "approx_message_tokens",
    "approx_token_count",
    "approx_tokenize",
    "normalize_stop",
    "split_total",
    "validate_messages",
]

Message = dict[str, Any]
FinishReason = Literal["stop", "length", "content_filter", "tool_calls", "unknown"]
TokenCounter = Callable[[str], int]

#: :class:`~datadojo.llm.openai_backend.OpenAIBackend`'s own ``max_concurrency``: what a spec without one gets
#: when no command concurrency is known, and the floor under one that is (a unit of synthesis work may have
#: several requests in flight: :func:`datadojo.llm.spec.requests_in_flight`).
DEFAULT_MAX_CONCURRENCY = 64

_ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one request.

    Defaults follow DataMind §5.1 ("all models use temperature 0.7, top-p 0.95" at inference).
    ``max_tokens=None`` leaves the cap to the backend (the server's default for OpenAI-compatible
    servers, ``default_max_tokens`` for local models). ``temperature=0`` means greedy decoding.
    ``seed`` asks the backend for reproducible sampling where it supports it (vLLM, SGLang, transformers).
    ``response_format`` is sent as OpenAI's field of that name (``{"type": "json_schema", ...}`` or
    ``{"type": "json_object"}``); backends that cannot constrain decoding ignore it, which is why callers
    go through :func:`datadojo.llm.structured.complete_structured`, which validates every reply.
    ``logprobs`` asks for per-token log-probabilities of the sampled tokens (and ``top_logprobs``
    alternatives per position); vLLM, SGLang and OpenAI return them, and SciDataSailor's token entropy and
    RL's truncated importance sampling use them.
    """

    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int | None = None
    n: int = 1
    seed: int | None = None
    stop: tuple[str, ...] = ()
    response_format: dict[str, Any] | None = None
    logprobs: bool = False
    top_logprobs: int | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.temperature, int | float) and math.isfinite(self.temperature)):
            raise ValueError(f"temperature must be a finite number, got {self.temperature!r}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not (isinstance(self.top_p, int | float) and 0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if self.max_tokens is not None and (not isinstance(self.max_tokens, int) or self.max_tokens < 1):
            raise ValueError(f"max_tokens must be a positive integer or None, got {self.max_tokens!r}")
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 1:
            raise ValueError(f"n must be a positive integer, got {self.n!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)):
            raise ValueError(f"seed must be an integer or None, got {self.seed!r}")
        object.__setattr__(self, "stop", normalize_stop(self.stop))
        if self.response_format is not None and (
            not isinstance(self.response_format, dict)
            or not isinstance(self.response_format.get("type"), str)
        ):
            raise ValueError(
                f"response_format must be a dict with a 'type' (json_schema, json_object, text), "
                f"got {self.response_format!r}"
            )
        if self.top_logprobs is not None and (
            not isinstance(self.top_logprobs, int)
            or isinstance(self.top_logprobs, bool)
            or not 0 <= self.top_logprobs <= 20
        ):
            raise ValueError(f"top_logprobs must be an integer in [0, 20] or None, got {self.top_logprobs!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def normalize_stop(stop: str | Sequence[str] | None) -> tuple[str, ...]:
    """Stop sequences as a tuple of distinct non-empty strings, in the order given.

    OpenAI-compatible servers accept a single string or a list; an empty string would stop every
    completion immediately, so it is an error rather than silently ignored.
    """
    if stop is None:
        return ()
    items = [stop] if isinstance(stop, str) else list(stop)
    out: list[str] = []
    for s in items:
        if not isinstance(s, str):
            raise ValueError(f"stop sequences must be strings, got {s!r}")
        if not s:
            raise ValueError("stop sequences must not be empty strings")
        if s not in out:
            out.append(s)
    return tuple(out)


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and, when asked for, the top alternatives.

    ``top`` holds ``(token, logprob)`` pairs as the server ranked them (the sampled token may be among
    them). Used for token-level entropy (SciDataSailor's H_token) and RL importance ratios.
    """

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Completion:
    """One generated choice.

    ``text`` never contains the stop sequence that ended it (OpenAI semantics); ``stop_sequence`` names
    it when the backend knows (the transformers backend always does; OpenAI-compatible servers report it
    through vLLM's ``stop_reason`` / SGLang's ``matched_stop`` fields, hosted APIs do not).
    ``prompt_tokens`` is the request's prompt size; ``completion_tokens`` is this choice's share of the
    generated tokens. ``latency_s`` is the wall time of the whole request, retries included.
    ``logprobs`` holds one :class:`TokenLogprob` per generated token when the request asked for them and
    the backend returned them, else None.
    """

    text: str
    finish_reason: str
    stop_sequence: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    logprobs: tuple[TokenLogprob, ...] | None = None


class ModelSpecError(DataDojoError, ValueError):
    """A model spec (``--model``, ``--judge``, ``$DATADOJO_MODEL``) or backend setting that cannot be used: a
    malformed spec, an option out of range, an unset API-key variable, a checkpoint that cannot be loaded. The
    message quotes the spec or setting and says what is expected."""


class LLMError(DataDojoError, RuntimeError):
    """A request that finally failed (after the backend's own retries, if any).

    ``retryable`` says whether the cause was transient (rate limit, server error, timeout, dropped
    connection): a caller may try the whole task again later. ``context_overflow`` marks a request the
    server rejected because the prompt does not fit the model's window, so the agent loop can stop with
    ``context_limit`` rather than ``llm_error``. The message never contains credentials.

    Reaching the command, it ends it with :attr:`ExitCode.MODEL_SERVER` (3): whatever the stage (``ask``,
    ``eval``, ``synth``), a request that finally failed is the model server's, not the user's input.
    """

    exit_code = ExitCode.MODEL_SERVER

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        attempts: int = 1,
        status: int | None = None,
        context_overflow: bool = False,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.attempts = attempts
        self.status = status
        self.context_overflow = context_overflow

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only fields survive pickling (process pools, multiprocessing queues).
        kwargs = {
            "retryable": self.retryable,
            "attempts": self.attempts,
            "status": self.status,
            "context_overflow": self.context_overflow,
        }
        return (_make_llm_error, (str(self), kwargs))


def _make_llm_error(message: str, kwargs: dict[str, Any]) -> LLMError:
    return LLMError(message, **kwargs)


class ServerUnreachableError(DataDojoError, ConnectionError):
    """No replica of the model server answered the probe :meth:`ChatBackend.check_before_first_request` armed.

    Deliberately not an :class:`LLMError`: stages record a failed request and go on, but when the server is
    not there at all the whole run must end at once, with one line and exit 3.
    """

    exit_code = ExitCode.MODEL_SERVER


@dataclass
class UsageStats:
    """Running totals for one backend; all counts are cumulative since the backend was created."""

    requests: int = 0
    completions: int = 0
    failures: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0

    def record(self, completions: Sequence[Completion], latency_s: float) -> None:
        self.requests += 1
        self.completions += len(completions)
        if completions:
            self.prompt_tokens += completions[0].prompt_tokens
        self.completion_tokens += sum(c.completion_tokens for c in completions)
        self.latency_s += latency_s

    def as_dict(self) -> dict[str, float | int]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def validate_messages(messages: Sequence[Message]) -> list[Message]:
    """Check a chat is a non-empty list of ``{"role", "content"}`` dicts; name the bad message.

    Done once in :meth:`ChatBackend.chat` so a malformed conversation fails here with the index of the
    offending message, not as an opaque HTTP 400 or a Jinja error inside a chat template.
    """
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise ValueError(f"messages must be a list of dicts, got {type(messages).__name__}")
    if not messages:
        raise ValueError("messages must not be empty")
    out: list[Message] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise ValueError(
                f"message {i}: expected a dict with 'role' and 'content', got {type(m).__name__}"
            )
        role = m.get("role")
        if role not in _ROLES:
            raise ValueError(f"message {i}: role must be one of {sorted(_ROLES)}, got {role!r}")
        content = m.get("content")
        if not isinstance(content, str):
            raise ValueError(f"message {i} ({role}): content must be a string, got {type(content).__name__}")
        out.append(m)
    return out


def apply_stop(text: str, stop: Iterable[str]) -> tuple[str, str | None]:
    """Cut ``text`` before the earliest occurrence of any stop string, as OpenAI-compatible servers do.

    Returns the kept text and the stop string that matched (``None`` when none occurs). When two stop
    strings start at the same place the longer one is reported.
    """
    best: tuple[int, int, str] | None = None
    for s in stop:
        i = text.find(s)
        if i >= 0 and (best is None or (i, -len(s)) < (best[0], best[1])):
            best = (i, -len(s), s)
    if best is None:
        return text, None
    return text[: best[0]], best[2]


# --- token approximation ---------------------------------------------------------------------------
#
# Used when no exact tokenizer is at hand. BPE vocabularies of current chat models (Qwen2.5, Llama 3,
# GPT-4o) give common English words one token and split long identifiers; Qwen tokenizes every digit
# separately. The pieces below mimic that coarsely and err on the side of *more* tokens for code and
# numbers, so a context-window check made with them stops early rather than overflowing. Pieces always
# concatenate back to the input, which lets the test server cut a reply at ``max_tokens`` pieces.
_APPROX_PIECE = re.compile(
    r"""
    [ ]?[A-Za-z]{1,6}            # a word, or a 6-letter chunk of a longer one, with its leading space
   |\d                           # one digit
   |[ ]?[^\sA-Za-z\d]{1,2}       # one or two symbols / non-ASCII characters
   |\s+?(?=[ ]\S)                # whitespace before a space-led piece keeps that space for the piece
   |\s+                          # any other run of whitespace
    """,
    re.VERBOSE,
)

# Per-message framing overhead, as in OpenAI's published counting recipe for chat models:
# every message costs ``<|start|>{role}\n ... <|end|>\n`` (about 4 tokens) and the reply is primed with 3.
_MESSAGE_OVERHEAD = 4
_REPLY_PRIMING = 3


def approx_tokenize(text: str) -> list[str]:
    """Split ``text`` into approximate tokens; ``"".join(approx_tokenize(t)) == t`` always holds."""
    return _APPROX_PIECE.findall(text)


def approx_token_count(text: str) -> int:
    """Approximate token count of ``text`` (see :func:`approx_tokenize`)."""
    return len(_APPROX_PIECE.findall(text))


def approx_message_tokens(messages: Sequence[Message], counter: TokenCounter = approx_token_count) -> int:
    """Approximate prompt size of a chat: content tokens plus per-message framing and reply priming."""
    total = _REPLY_PRIMING
    for m in messages:
        total += _MESSAGE_OVERHEAD + counter(str(m.get("content") or ""))
    return total


# --- the protocol ------------------------------------------------------------------------------------


class ChatBackend(abc.ABC):
    """Base class of every backend: validate inputs, time the request, keep :class:`UsageStats`.

    Subclasses implement :meth:`_generate` (the request itself) and :meth:`count_tokens`, and set
    ``model_id`` and ``context_window`` (``None`` when unknown). Backends are async context managers;
    :meth:`aclose` releases connections or model memory.
    """

    model_id: str
    context_window: int | None
    default_params: SamplingParams
    #: Whether the backend passes ``response_format`` to a server that constrains decoding with it.
    #: False for local transformers models: :mod:`datadojo.llm.structured` then describes the schema in
    #: the prompt and relies on validation and the repair request alone.
    supports_response_format: bool = False

    def __init__(self, *, model_id: str, context_window: int | None = None) -> None:
        if context_window is not None and (not isinstance(context_window, int) or context_window < 1):
            raise ValueError(f"context_window must be a positive integer or None, got {context_window!r}")
        self.model_id = model_id
        self.context_window = context_window
        self.default_params = SamplingParams()
        self.usage = UsageStats()

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        n: int = 1,
        stop: str | Sequence[str] | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        response_format: dict[str, Any] | None = None,
        logprobs: bool | None = None,
        top_logprobs: int | None = None,
        params: SamplingParams | None = None,
    ) -> list[Completion]:
        """Generate ``n`` completions for ``messages``.

        Keyword arguments override ``params`` (or :attr:`default_params` when ``params`` is None), so a
        caller can hold one :class:`SamplingParams` and still vary ``n`` per call. Raises
        :class:`LLMError` when the request finally fails and ``ValueError`` for malformed input.
        """
        base = params if params is not None else self.default_params
        given: dict[str, Any] = {
            "stop": stop,
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "seed": seed,
            "response_format": response_format,
            "logprobs": logprobs,
            "top_logprobs": top_logprobs,
        }
        # None means "not given here": keep the value of ``base``.
        overrides = {"n": n, **{k: v for k, v in given.items() if v is not None}}
        sp = replace(base, **overrides)
        msgs = validate_messages(messages)
        if self.__dict__.get("_reach_armed"):
            await self._check_before_first()
        t0 = time.perf_counter()
        try:
            completions = await self._generate(msgs, sp)
        except LLMError:
            self.usage.failures += 1
            raise
        latency = time.perf_counter() - t0
        completions = [c if c.latency_s else replace(c, latency_s=latency) for c in completions]
        self.usage.record(completions, latency)
        return completions

    def chat_sync(self, messages: Sequence[Message], **kwargs: Any) -> list[Completion]:
        """Blocking :meth:`chat` for scripts and notebooks without an event loop of their own."""
        return asyncio.run(self.chat(messages, **kwargs))

    @abc.abstractmethod
    async def _generate(self, messages: list[Message], params: SamplingParams) -> list[Completion]:
        """Run one request; return exactly ``params.n`` completions or raise :class:`LLMError`."""

    @abc.abstractmethod
    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Prompt tokens ``messages`` would take, generation prompt included (exact or documented estimate)."""

    def fits(self, messages: Sequence[Message], max_tokens: int = 0) -> bool:
        """Whether ``messages`` plus ``max_tokens`` of reply fit :attr:`context_window` (True if unknown)."""
        if self.context_window is None:
            return True
        return self.count_tokens(messages) + max_tokens <= self.context_window

    async def aclose(self) -> None:  # noqa: B027 - optional hook, a no-op for stateless backends
        """Release connections / model memory. Safe to call twice."""

    def check_before_first_request(self) -> None:
        """Run :meth:`check_reachable` once, just before the first :meth:`chat` (not now).

        Why not at once: a command first validates its input (a missing stage input, a changed setting, an
        empty folder: exit 2), which needs no server; checking the server before that would answer a user's
        typo with "server down". Deferred to the first request, a down server still ends the run after one
        quick probe (exit 3) instead of after every request's retries. Concurrent first requests share the
        one probe, and its failure is raised to each of them as :class:`ServerUnreachableError` — not an
        :class:`LLMError`, which stages record per request and go on: a server that is not there ends the run.
        """
        self.__dict__["_reach_armed"] = True
        self.__dict__["_reach_error"] = None

    async def _check_before_first(self) -> None:
        lock = self.__dict__.setdefault("_reach_lock", asyncio.Lock())
        async with lock:
            error = self.__dict__.get("_reach_error")
            if error is not None:
                raise error
            if not self.__dict__.get("_reach_armed"):
                return
            try:
                await self.check_reachable()
            except LLMError as exc:
                error = ServerUnreachableError(str(exc))
                self.__dict__["_reach_error"] = error
                raise error from exc
            finally:
                if self.__dict__.get("_reach_error") is None:
                    self.__dict__["_reach_armed"] = False

    async def check_reachable(self) -> None:  # noqa: B027 - optional hook: a local backend is always there
        """Raise :class:`LLMError` (exit 3 at the command) when the model server cannot be reached at all.

        Called once by long-running commands before their first request, so that a down server or a wrong
        URL ends the run in a second with one line, not after every task has spent its retries.
        """

    async def __aenter__(self) -> ChatBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_id={self.model_id!r}, context_window={self.context_window!r})"


def split_total(total: int, weights: Sequence[int]) -> list[int]:
    """Split an integer ``total`` in proportion to ``weights`` (largest remainder; sums to ``total``).

    OpenAI-compatible servers report one ``completion_tokens`` for all ``n`` choices of a request; this
    gives each choice a share proportional to its approximate length so per-turn counts add up exactly.
    """
    if not weights:
        return []
    wsum = sum(max(w, 0) for w in weights)
    if wsum == 0:
        weights = [1] * len(weights)
        wsum = len(weights)
    raw = [total * max(w, 0) / wsum for w in weights]
    floors = [math.floor(r) for r in raw]
    rest = total - sum(floors)
    order = sorted(range(len(raw)), key=lambda i: raw[i] - floors[i], reverse=True)
    for i in order[:rest]:
        floors[i] += 1
    return floors

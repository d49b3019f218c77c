"""Structured LLM output: ask for JSON that fits a typed model, validate it, repair once.

Every synthesis and judging step that expects JSON (DataMind query synthesis, composition, the
self-consistency judge and its critique; SciDataSailor's strategy scoring, verifiers and QA synthesis)
goes through :func:`complete_structured`. The rules, from the project's standards:

* the schema comes from a pydantic model in code (:func:`json_schema_for`), so what is asked for and what
  is validated are the same object, and the schema is documented where the model is;
* the request carries ``response_format`` with that JSON Schema — vLLM, SGLang, OpenAI and Ollama use it
  to constrain decoding — unless the mode says otherwise;
* the reply is parsed with :func:`json.loads` and validated with the model; JSON is never fished out of
  prose with a regular expression (a reply that is exactly one fenced ```json block is unwrapped, since
  models without constrained decoding habitually fence);
* an invalid reply gets exactly one repair request that shows the model its reply and the validation
  error; a reply still invalid after that raises :class:`StructuredOutputError`.

Modes (:data:`StructuredMode`), a setting for servers that do not support every form:

``auto``
    ``json_schema`` for backends that pass ``response_format`` to a server
    (:attr:`ChatBackend.supports_response_format`), ``off`` for local models. If the server rejects the
    field with HTTP 400/422 the call steps down to ``json_object``, then to ``off``, and the backend
    remembers the step so later calls do not pay for the rejection again.
``json_schema``
    ``{"type": "json_schema", "json_schema": {"name", "schema", "strict": true}}``.
``json_object``
    ``{"type": "json_object"}`` (JSON mode) plus the schema described in the prompt.
``off``
    no ``response_format``; the schema is described in the prompt. Validation and repair still apply.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from datadojo.llm.base import ChatBackend, Completion, LLMError, Message

__all__ = [
    "STRUCTURED_MODES",
    "StructuredMode",
    "StructuredOutputError",
    "StructuredResult",
    "UsageSink",
    "complete_counted",
    "complete_structured",
    "json_schema_for",
    "parse_structured",
    "response_format_for",
    "schema_instruction",
]

StructuredMode = Literal["auto", "json_schema", "json_object", "off"]
STRUCTURED_MODES: tuple[str, ...] = get_args(StructuredMode)

T = TypeVar("T", bound=BaseModel)

# Servers reject an unsupported ``response_format`` with 400 (OpenAI, vLLM) or 422 (some proxies).
_REJECTED_STATUS = frozenset({400, 422})
_STEP_DOWN: dict[str, str] = {"json_schema": "json_object", "json_object": "off"}
_FENCE = re.compile(r"\A\s*```(?:json|JSON)?[ \t]*\n(.*?)\n?```\s*\Z", re.S)
_MAX_SHOWN_REPLY = 4000


class StructuredOutputError(LLMError):
    """The model's reply did not fit the schema, even after one repair request.

    ``reply`` is the last reply's text and ``errors`` the validation error for it; ``schema_name`` names
    the model class. Not retryable: asking the same prompt again is the caller's decision.
    """

    def __init__(self, message: str, *, schema_name: str, reply: str, errors: str, attempts: int) -> None:
        super().__init__(message, retryable=False, attempts=attempts)
        self.schema_name = schema_name
        self.reply = reply
        self.errors = errors

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _make_structured_error,
            (str(self), self.schema_name, self.reply, self.errors, self.attempts),
        )


def _make_structured_error(
    message: str, schema_name: str, reply: str, errors: str, attempts: int
) -> StructuredOutputError:
    return StructuredOutputError(
        message, schema_name=schema_name, reply=reply, errors=errors, attempts=attempts
    )


@dataclass
class StructuredResult(Generic[T]):
    """A validated reply: the model instance, the completion it came from, and what it cost."""

    value: T
    completion: Completion
    repaired: bool
    requests: int
    prompt_tokens: int
    completion_tokens: int


def json_schema_for(model_cls: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema sent for ``model_cls``: pydantic's schema, closed to extra keys at every level.

    ``additionalProperties: false`` is what OpenAI's strict mode requires and what keeps a constrained
    decoder from inventing fields; pydantic models here are declared with the fields they accept.
    """
    return json.loads(_schema_text(model_cls))  # a fresh dict per call: callers may change theirs


@functools.lru_cache(maxsize=256)
def _schema_text(model_cls: type[BaseModel]) -> str:
    # Building a pydantic schema costs milliseconds; synthesis sends the same few schemas thousands of times.
    schema = model_cls.model_json_schema()
    _close_objects(schema)
    return json.dumps(schema)


def _close_objects(node: Any) -> None:
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            node.setdefault("additionalProperties", False)
        for value in node.values():
            _close_objects(value)
    elif isinstance(node, list):
        for value in node:
            _close_objects(value)


def _schema_name(model_cls: type[BaseModel]) -> str:
    # OpenAI: name must match ^[a-zA-Z0-9_-]{1,64}$.
    return re.sub(r"[^A-Za-z0-9_-]", "_", model_cls.__name__)[:64] or "reply"


def response_format_for(model_cls: type[BaseModel], mode: str) -> dict[str, Any] | None:
    """The ``response_format`` field for ``mode`` (``json_schema``, ``json_object`` or ``off``)."""
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {
                "name": _schema_name(model_cls),
                "schema": json_schema_for(model_cls),
                "strict": True,
            },
        }
    if mode == "json_object":
        return {"type": "json_object"}
    if mode == "off":
        return None
    raise ValueError(f"structured mode must be one of json_schema, json_object, off here, got {mode!r}")


def schema_instruction(model_cls: type[BaseModel]) -> str:
    """Prompt text describing the schema, for modes where the server does not receive it."""
    schema = json.dumps(json_schema_for(model_cls), ensure_ascii=False, separators=(",", ":"))
    return (
        "Reply with one JSON object only (no prose, no code fence) that validates against this JSON Schema:\n"
        f"{schema}"
    )


def parse_structured(text: str, model_cls: type[T]) -> T:
    """Parse and validate one reply; raises ``ValueError`` whose message says what is wrong.

    A reply that is exactly one fenced code block is unwrapped first; anything else must be JSON as is.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as e:
        raise ValueError(f"the reply is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from e
    try:
        return model_cls.model_validate(data)
    except ValidationError as e:
        raise ValueError(f"the JSON does not fit the {model_cls.__name__} schema: {_short_errors(e)}") from e


def _short_errors(e: ValidationError) -> str:
    parts = []
    for err in e.errors()[:8]:
        loc = ".".join(str(x) for x in err.get("loc", ())) or "(root)"
        parts.append(f"{loc}: {err.get('msg')}")
    more = len(e.errors()) - 8
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _initial_mode(backend: ChatBackend, mode: str) -> str:
    if mode not in STRUCTURED_MODES:
        raise ValueError(f"structured mode must be one of {', '.join(STRUCTURED_MODES)}, got {mode!r}")
    if mode != "auto":
        return mode
    if not backend.supports_response_format:
        return "off"
    # A step down learnt from an earlier rejection by this backend's server.
    return getattr(backend, "_structured_mode", "json_schema")


def _with_instruction(messages: Sequence[Message], instruction: str) -> list[Message]:
    """Append the schema instruction to the system message (or add one), leaving the input untouched."""
    out = [dict(m) for m in messages]
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0]['content']}\n\n{instruction}"
    else:
        out.insert(0, {"role": "system", "content": instruction})
    return out


async def complete_structured(
    backend: ChatBackend,
    messages: Sequence[Message],
    model_cls: type[T],
    *,
    mode: StructuredMode = "auto",
    repair: bool = True,
    **chat_kwargs: Any,
) -> StructuredResult[T]:
    """Ask ``backend`` for a reply that validates as ``model_cls``; repair once if it does not.

    ``chat_kwargs`` go to :meth:`ChatBackend.chat` (temperature, max_tokens, seed, ...); ``n`` must be 1
    and ``response_format`` is set here. Raises :class:`StructuredOutputError` when the reply (after the
    repair, if enabled) still does not validate, and :class:`LLMError` when a request fails.
    """
    if chat_kwargs.get("n", 1) != 1:
        raise ValueError("complete_structured asks for one completion; call it n times for n samples")
    if "response_format" in chat_kwargs:
        raise ValueError("complete_structured sets response_format itself; choose it with mode=")
    chat_kwargs.pop("n", None)
    explicit = mode != "auto"
    current = _initial_mode(backend, mode)
    requests = prompt_tokens = completion_tokens = 0

    async def ask(msgs: Sequence[Message]) -> Completion:
        nonlocal current, requests, prompt_tokens, completion_tokens
        while True:
            prompt = (
                msgs if current == "json_schema" else _with_instruction(msgs, schema_instruction(model_cls))
            )
            try:
                requests += 1
                (completion,) = await backend.chat(
                    prompt, n=1, response_format=response_format_for(model_cls, current), **chat_kwargs
                )
            except LLMError as e:
                if explicit or e.status not in _REJECTED_STATUS or current not in _STEP_DOWN:
                    raise
                current = _STEP_DOWN[current]
                backend._structured_mode = current  # type: ignore[attr-defined]
                continue
            prompt_tokens += completion.prompt_tokens
            completion_tokens += completion.completion_tokens
            return completion

    first = await ask(messages)
    try:
        value = parse_structured(first.text, model_cls)
        return StructuredResult(value, first, False, requests, prompt_tokens, completion_tokens)
    except ValueError as e:
        error = str(e)
    if not repair:
        raise StructuredOutputError(
            f"{backend.model_id}: reply does not fit {model_cls.__name__}: {error}",
            schema_name=model_cls.__name__,
            reply=first.text,
            errors=error,
            attempts=requests,
        )
    shown = first.text if len(first.text) <= _MAX_SHOWN_REPLY else first.text[:_MAX_SHOWN_REPLY] + "…"
    repair_messages = [
        *messages,
        {"role": "assistant", "content": shown},
        {
            "role": "user",
            "content": (
                f"Your reply could not be used: {error}.\n"
                f"Reply again with the corrected JSON object only, valid against the {model_cls.__name__} schema."
            ),
        },
    ]
    second = await ask(repair_messages)
    try:
        value = parse_structured(second.text, model_cls)
    except ValueError as e:
        raise StructuredOutputError(
            f"{backend.model_id}: reply does not fit {model_cls.__name__} after one repair: {e}",
            schema_name=model_cls.__name__,
            reply=second.text,
            errors=str(e),
            attempts=requests,
        ) from None
    return StructuredResult(value, second, True, requests, prompt_tokens, completion_tokens)


class UsageSink(Protocol):
    """What :func:`complete_counted` counts into (:class:`datadojo.runs.UsageLedger` is the one)."""

    def add(
        self,
        role: str,
        *,
        requests: int = 1,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        repaired: int = 0,
        failed: int = 0,
        check: bool = True,
    ) -> None: ...


async def complete_counted(
    usage: UsageSink,
    role: str,
    backend: ChatBackend,
    messages: Sequence[Message],
    model_cls: type[T],
    **kwargs: Any,
) -> T:
    """:func:`complete_structured` with its requests, tokens and repair counted in ``usage`` under ``role``.

    Why here and not in each pipeline: DataMind and sailor both counted structured calls by hand. Raises
    what :func:`complete_structured` raises; a reply still invalid after the repair is counted (its
    requests) before :class:`StructuredOutputError` propagates. Failures are the caller's to count: an
    invalid reply is a failure in one stage (the judge) and a rejection in another (query synthesis).
    """
    try:
        res = await complete_structured(backend, messages, model_cls, **kwargs)
    except StructuredOutputError as exc:
        usage.add(role, requests=exc.attempts, check=False)
        raise
    usage.add(
        role,
        requests=res.requests,
        prompt_tokens=res.prompt_tokens,
        completion_tokens=res.completion_tokens,
        repaired=int(res.repaired),
        check=False,
    )
    return res.value

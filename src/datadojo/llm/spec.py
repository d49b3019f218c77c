"""One model spec string everywhere: ``openai:MODEL@BASE_URL?opts`` or ``hf:PATH?opts``.

Why a string: the same model has to be named on the CLI, in run configs, in trajectory provenance and
in reports; a single string that :func:`parse_model_spec` validates (and :class:`ModelSpec` prints back
canonically) keeps those in agreement. Secrets never appear in it: API keys come from environment
variables named by ``api_key_env``, and a spec that tries to carry one is rejected.

Forms::

    openai:Qwen2.5-Coder-7B-Instruct@http://localhost:8000/v1
    openai:gpt-4o-mini                                  # base URL from $OPENAI_BASE_URL, else api.openai.com
    openai:my-model@http://10.0.0.5:30000/v1?api_key_env=MY_KEY&context_window=32768&max_concurrency=64
    openai:my-model@http://a:8000/v1,http://b:8000/v1   # replicas: fewest in flight, failover
    hf:/path/to/checkpoint?device=cuda&dtype=bfloat16
"""

from __future__ import annotations

import inspect
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, urlsplit

from datadojo.llm.base import DEFAULT_MAX_CONCURRENCY, ChatBackend, ModelSpecError
from datadojo.llm.replicas import split_base_urls

__all__ = [
    "BACKENDS",
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_OPENAI_BASE_URL",
    "ModelSpec",
    "ModelSpecError",
    "load_backend",
    "model_identity",
    "parse_model_spec",
    "requests_in_flight",
]


BACKENDS: tuple[str, ...] = ("openai", "hf")
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
log = logging.getLogger(__name__)
_SECRET_KEYS = frozenset({"api_key", "key", "token", "password", "secret", "authorization"})


def _int(name: str, value: str) -> int:
    try:
        out = int(value)
    except ValueError:
        raise ModelSpecError(f"option {name}={value!r}: expected an integer") from None
    if out < 0:
        raise ModelSpecError(f"option {name}={value!r}: must not be negative")
    return out


def _float(name: str, value: str) -> float:
    try:
        out = float(value)
    except ValueError:
        raise ModelSpecError(f"option {name}={value!r}: expected a number") from None
    if not out >= 0:
        raise ModelSpecError(f"option {name}={value!r}: must be a non-negative number")
    return out


def _bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise ModelSpecError(f"option {name}={value!r}: expected true or false")


def _str(name: str, value: str) -> str:
    if not value:
        raise ModelSpecError(f"option {name}: empty value")
    return value


def _env_name(name: str, value: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
        raise ModelSpecError(f"option {name}={value!r}: expected an environment variable name")
    return value


# option name -> converter; the names are the backends' constructor keywords.
_OPTIONS: dict[str, dict[str, Callable[[str, str], Any]]] = {
    "openai": {
        "api_key_env": _env_name,
        "context_window": _int,
        "max_concurrency": _int,
        "timeout": _float,
        "connect_timeout": _float,
        "max_retries": _int,
        "backoff_base": _float,
        "backoff_max": _float,
        "max_retry_after": _float,
        "tokenizer": _str,
        "split_n": _bool,
        "replica_down_s": _float,
        "http_client": _str,
    },
    "hf": {
        "device": _str,
        "dtype": _str,
        "context_window": _int,
        "max_batch_size": _int,
        "default_max_tokens": _int,
        "batch_wait_s": _float,
        "trust_remote_code": _bool,
    },
}


@dataclass(frozen=True)
class ModelSpec:
    """A parsed model spec. ``model`` is the served model name (openai) or checkpoint path (hf);
    ``options`` holds typed values of the query parameters, keyed by backend constructor keyword."""

    backend: Literal["openai", "hf"]
    model: str
    base_url: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        out = f"{self.backend}:{self.model}"
        if self.base_url:
            out += f"@{self.base_url}"
        if self.options:
            out += "?" + "&".join(
                f"{k}={quote(_fmt(v), safe='/:.-_')}" for k, v in sorted(self.options.items())
            )
        return out

    def identity(self) -> str:
        """The spec as far as it decides *which model answers*: backend, model and the options that change
        what the model sees (``context_window``, ``tokenizer``, ``dtype``, ``trust_remote_code``), without the
        base URL and the transport options. Why: a resumed run on a new port, or with a replica added
        (``@http://a/v1,http://b/v1``), is the same model; a run's identity (eval resume) must not change."""
        kept = {k: v for k, v in self.options.items() if k in _IDENTITY_OPTIONS}
        return str(ModelSpec(self.backend, self.model, None, kept))


#: Options that change what the model sees or computes (see :meth:`ModelSpec.identity`).
_IDENTITY_OPTIONS = frozenset({"context_window", "tokenizer", "dtype", "trust_remote_code"})


def model_identity(spec: str) -> str:
    """:meth:`ModelSpec.identity` of ``spec``; a spec that does not parse is its own identity (the error comes
    when it is loaded)."""
    try:
        return parse_model_spec(spec).identity()
    except ModelSpecError:
        return spec


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return f"{v:g}" if isinstance(v, float) else str(v)


_SCHEME_AT = re.compile(r"@(?=[A-Za-z][A-Za-z0-9+.-]*://)")


def parse_model_spec(spec: str) -> ModelSpec:
    """Parse a model spec string; raise ``ValueError`` saying what is wrong and what the form is."""
    if not isinstance(spec, str) or not spec.strip():
        raise ModelSpecError("empty model spec; expected openai:MODEL[@BASE_URL][?opts] or hf:PATH[?opts]")
    spec = spec.strip()
    backend, sep, rest = spec.partition(":")
    if not sep or backend not in BACKENDS:
        raise ModelSpecError(
            f"model spec {spec!r}: unknown backend {backend!r}; expected one of {', '.join(BACKENDS)} "
            "(e.g. openai:MODEL@http://localhost:8000/v1 or hf:/path/to/checkpoint)"
        )
    body, _, query = rest.partition("?")
    options = _parse_options(spec, backend, query)
    if backend == "hf":
        if not body:
            raise ModelSpecError(f"model spec {spec!r}: missing checkpoint path after 'hf:'")
        return ModelSpec("hf", body, None, options)
    m = _SCHEME_AT.search(body)
    if m:
        model, base_url = body[: m.start()], body[m.end() :]
        try:
            urls = split_base_urls(base_url)
        except ValueError as e:
            raise ModelSpecError(f"model spec {spec!r}: {e}") from None
        for url in urls:
            _check_url(spec, url)
    else:
        model, base_url = body, None
        tail = body.rpartition("@")[2] if "@" in body else ""
        if tail and ("/" in tail or ":" in tail):
            raise ModelSpecError(
                f"model spec {spec!r}: base URL {tail!r} needs a scheme, e.g. openai:MODEL@http://{tail}"
            )
    if not model:
        raise ModelSpecError(f"model spec {spec!r}: missing model name after 'openai:'")
    return ModelSpec("openai", model, base_url, options)


def _check_url(spec: str, url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ModelSpecError(f"model spec {spec!r}: base URL {url!r} must be http(s)://HOST[:PORT]/PATH")
    if parts.username or parts.password:
        raise ModelSpecError(
            f"model spec {spec!r}: do not put credentials in the base URL; set an environment variable "
            "and name it with ?api_key_env=VAR"
        )
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ModelSpecError(f"model spec {spec!r}: bad port in base URL {url!r}") from None


def _parse_options(spec: str, backend: str, query: str) -> dict[str, Any]:
    if not query:
        return {}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise ModelSpecError(
            f"model spec {spec!r}: malformed options {query!r}; expected key=value&key=value"
        ) from None
    allowed = _OPTIONS[backend]
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key.lower() in _SECRET_KEYS:
            raise ModelSpecError(
                f"model spec {spec!r}: never put credentials in a model spec (option {key!r}); "
                "export them in an environment variable and pass ?api_key_env=VAR"
            )
        if key not in allowed:
            raise ModelSpecError(
                f"model spec {spec!r}: unknown option {key!r} for the {backend} backend; "
                f"known: {', '.join(sorted(allowed))}"
            )
        if key in out:
            raise ModelSpecError(f"model spec {spec!r}: option {key!r} given twice")
        try:
            out[key] = allowed[key](key, value)
        except ValueError as e:
            raise ModelSpecError(f"model spec {spec!r}: {e}") from None
    return out


def load_backend(spec: str | ModelSpec, *, concurrency: int | None = None, **overrides: Any) -> ChatBackend:
    """Build the backend a spec names; keyword ``overrides`` win over the spec's options.

    Overrides are the backend constructor's keywords (see :class:`~datadojo.llm.openai_backend.OpenAIBackend`
    and :class:`~datadojo.llm.hf_backend.HFBackend`), so Python callers can pass what a string cannot
    (a tokenizer object, ``extra_body``). For ``openai:MODEL`` without a URL the base URL comes from
    ``$OPENAI_BASE_URL``, else the hosted OpenAI API.

    ``concurrency`` is the caller's work in flight (a command's ``--concurrency``): an OpenAI backend then
    admits at least that many requests at once (:func:`requests_in_flight`). Why: ``rollout -j 128`` keeps
    128 episodes waiting on the model, and the backend's own default of 64 halved what reached the server.
    """
    ms = parse_model_spec(spec) if isinstance(spec, str) else spec
    kwargs = {**ms.options, **overrides}
    if ms.backend == "openai" and concurrency is not None and "max_concurrency" not in overrides:
        kwargs["max_concurrency"] = requests_in_flight(ms, concurrency)
    if ms.backend == "openai":
        from datadojo.llm.openai_backend import OpenAIBackend

        base_url = kwargs.pop("base_url", None) or ms.base_url
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL
        _check_kwargs(OpenAIBackend, kwargs, ms)
        return OpenAIBackend(ms.model, base_url, **kwargs)
    from datadojo.llm.hf_backend import HFBackend

    _check_kwargs(HFBackend, kwargs, ms)
    return HFBackend(ms.model, **kwargs)


def _check_kwargs(cls: type, kwargs: Mapping[str, Any], ms: ModelSpec) -> None:
    params = inspect.signature(cls.__init__).parameters
    valid = {k for k, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    unknown = sorted(set(kwargs) - valid)
    if unknown:
        raise ModelSpecError(
            f"{ms.backend} backend for {ms.model!r}: unknown option(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(valid))}"
        )


def requests_in_flight(spec: str | ModelSpec, concurrency: int) -> int:
    """Requests an OpenAI backend for ``spec`` admits at once under a command running ``concurrency`` units.

    The spec's own ``?max_concurrency=N`` wins (a server that must not see more); when it is below
    ``concurrency`` one warning line says so, since the command then waits on the model and not on its
    own setting. Without one: ``max(concurrency, 64)``.
    """
    ms = parse_model_spec(spec) if isinstance(spec, str) else spec
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ModelSpecError(f"concurrency must be a positive integer, got {concurrency!r}")
    own = ms.options.get("max_concurrency")
    if own is None:
        return max(concurrency, DEFAULT_MAX_CONCURRENCY)
    if own < concurrency:
        log.warning(
            "model %s: its spec's max_concurrency=%d caps the requests in flight below --concurrency %d "
            "(drop ?max_concurrency from the spec to let every unit reach the model)",
            ms.model,
            own,
            concurrency,
        )
    return int(own)

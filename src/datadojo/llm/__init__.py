"""LLM backends behind one small protocol (see :mod:`datadojo.llm.base` and ``docs/llm.md``).

``load_backend("openai:MODEL@http://localhost:8000/v1")`` or ``load_backend("hf:/path/to/ckpt")`` gives a
:class:`ChatBackend`; the loopback test server lives in :mod:`datadojo.testing.server` and the transformers
backend in :mod:`datadojo.llm.hf_backend` (imported lazily: it needs torch).
"""

from datadojo.llm.base import (
    ChatBackend,
    Completion,
    LLMError,
    ModelSpecError,
    SamplingParams,
    TokenLogprob,
    UsageStats,
    apply_stop,
    approx_message_tokens,
    approx_token_count,
    approx_tokenize,
)
from datadojo.llm.openai_backend import OpenAIBackend
from datadojo.llm.spec import ModelSpec, load_backend, parse_model_spec
from datadojo.llm.structured import StructuredOutputError, StructuredResult, complete_structured

__all__ = [
    "ChatBackend",
    "Completion",
    "LLMError",
    "ModelSpec",
    "ModelSpecError",
    "OpenAIBackend",
    "SamplingParams",
    "StructuredOutputError",
    "StructuredResult",
    "TokenLogprob",
    "UsageStats",
    "apply_stop",
    "approx_message_tokens",
    "approx_token_count",
    "approx_tokenize",
    "complete_structured",
    "load_backend",
    "parse_model_spec",
]

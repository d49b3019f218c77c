"""Model-as-judge for answers rules cannot check: a structured verdict, one repair, temperature 0, a disk cache.

DataMind scores DABench/TableBench answers and its RL answer reward with GPT-4o-mini as a judge (§4,
§5.1); SciDataSailor scores meta-information summaries the same way (§5.1, App. B.2). What this module
adds around the prompt (:mod:`datadojo.compare.judge_prompts`):

* **structured output**: the verdict is the B.2 judge schema ``{"score": 0|1, "reason": str}``
  (:class:`VerdictReply`), requested through :func:`datadojo.llm.structured.complete_structured`: the
  request carries ``response_format`` with that JSON Schema (``structured`` mode ``auto``, the default:
  ``json_schema`` for OpenAI-compatible servers, stepping down to ``json_object`` then ``off`` if the
  server rejects it; ``off`` for local models), the reply is parsed with ``json.loads`` and validated, and
  an invalid reply gets **one repair** request showing it the validation error. A reply still invalid
  raises :class:`JudgeError`. JSON is never fished out of prose.
* **deterministic**: temperature 0 (greedy) on every request.
* **cached**: verdicts are appended to a JSONL file keyed by ``(judge model, prompt hash)``, the SHA-256 of
  the rubric's chat messages (before any schema instruction the structured mode adds, so the key does not
  depend on the mode and caches written before structured output are still read and hit), so re-scoring
  the same answers (a resumed run, a second report) costs no requests. The file is append-only (a crash
  loses at most the verdict being written; see :mod:`datadojo.jsonl`); later lines win when a key repeats.
* an empty or missing candidate answer is scored 0 without asking the model.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from datadojo.compare.judge_prompts import JudgeRubric, get_rubric
from datadojo.errors import DataDojoError
from datadojo.jsonl import append_jsonl, iter_jsonl
from datadojo.llm.base import ChatBackend
from datadojo.llm.structured import (
    STRUCTURED_MODES,
    StructuredMode,
    StructuredOutputError,
    complete_structured,
)

__all__ = [
    "JudgeCache",
    "JudgeError",
    "JudgeItem",
    "JudgeVerdict",
    "LLMJudge",
    "VerdictReply",
    "prompt_hash",
]


class JudgeError(DataDojoError, RuntimeError):
    """The judge gave no valid verdict, even after the repair; ``replies`` holds its last reply."""

    def __init__(self, message: str, replies: Sequence[str]) -> None:
        super().__init__(message)
        self.replies = list(replies)


@dataclass(frozen=True)
class JudgeVerdict:
    """One verdict: ``score`` 0/1, the judge's ``reason``, its raw reply, and how it was obtained."""

    score: int
    reason: str
    raw: str
    model: str
    prompt_hash: str
    cached: bool = False
    attempts: int = 1

    @property
    def correct(self) -> bool:
        return self.score == 1


@dataclass(frozen=True)
class JudgeItem:
    """What :meth:`LLMJudge.judge_many` takes: one question, its reference and a candidate answer."""

    question: str
    reference: str
    prediction: str | None


class VerdictReply(BaseModel):
    """The judge's reply: SciDataSailor App. B.2.2's schema ``{"score": 0 or 1, "reason": "short reason"}``.

    The JSON Schema sent as ``response_format`` and the validator of the reply: a score other than 0 or 1
    (``0.5``, ``2``, ``"1"``) or a missing reason is invalid and gets the repair request.
    """

    model_config = ConfigDict(extra="forbid")

    score: Literal[0, 1] = Field(description="1 if the candidate answer is correct, else 0")
    reason: str = Field(description="short reason, under 60 words")


def prompt_hash(messages: Sequence[dict[str, Any]]) -> str:
    """SHA-256 of the chat messages as canonical JSON (the cache key, together with the judge model)."""
    blob = json.dumps(list(messages), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class JudgeCache:
    """Append-only JSONL of verdicts keyed by ``(model, prompt_hash)``; loaded once, appended per verdict."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._entries: dict[tuple[str, str], dict[str, Any]] = {}
        if self.path.exists():
            for lineno, rec in iter_jsonl(self.path):
                if not isinstance(rec, dict) or not {"model", "prompt_hash", "score"} <= rec.keys():
                    raise ValueError(
                        f"{self.path}:{lineno}: not a judge cache record (model, prompt_hash, score)"
                    )
                self._entries[(rec["model"], rec["prompt_hash"])] = rec

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, model: str, phash: str) -> dict[str, Any] | None:
        return self._entries.get((model, phash))

    def put(self, verdict: JudgeVerdict) -> None:
        rec = {
            "model": verdict.model,
            "prompt_hash": verdict.prompt_hash,
            "score": verdict.score,
            "reason": verdict.reason,
            "raw": verdict.raw,
            "attempts": verdict.attempts,
            "created": time.time(),
        }
        append_jsonl(self.path, [rec])
        self._entries[(verdict.model, verdict.prompt_hash)] = rec


class LLMJudge:
    """Judges candidate answers against references with an LLM (module docstring).

    ``rubric`` is ``datamind`` (default), ``sailor_meta``, ``sailor_qa`` or a
    :class:`~datadojo.compare.judge_prompts.JudgeRubric`. ``cache`` is a path or a :class:`JudgeCache`.
    ``model`` names the judge in the cache key (default: the backend's ``model_id``). ``structured`` is the
    structured-output mode (:data:`datadojo.llm.structured.StructuredMode`: ``auto``, ``json_schema``,
    ``json_object`` or ``off``; see that module). Backend failures (:class:`~datadojo.llm.LLMError`)
    propagate unchanged; a reply that is not a valid verdict after the repair raises :class:`JudgeError`.
    """

    def __init__(
        self,
        backend: ChatBackend,
        *,
        rubric: str | JudgeRubric = "datamind",
        cache: JudgeCache | str | Path | None = None,
        max_tokens: int = 512,
        model: str | None = None,
        structured: StructuredMode = "auto",
    ) -> None:
        if structured not in STRUCTURED_MODES:
            raise ValueError(
                f"structured mode must be one of {', '.join(STRUCTURED_MODES)}, got {structured!r}"
            )
        self.backend = backend
        self.rubric = get_rubric(rubric)
        self.cache = cache if isinstance(cache, JudgeCache) or cache is None else JudgeCache(cache)
        self.max_tokens = max_tokens
        self.model = model or backend.model_id
        self.structured: StructuredMode = structured
        self.requests = 0

    async def judge(self, question: str, reference: str, prediction: str | None) -> JudgeVerdict:
        """One verdict on ``prediction`` (see the module docstring for the repair, cache and empty answers)."""
        pred = prediction if prediction is not None else ""
        messages = self.rubric.render(question, reference, pred)
        phash = prompt_hash(messages)
        if not pred.strip():
            return JudgeVerdict(0, "empty answer", "", self.model, phash)
        if self.cache is not None and (hit := self.cache.get(self.model, phash)) is not None:
            return JudgeVerdict(
                int(hit["score"]), str(hit.get("reason", "")), str(hit.get("raw", "")), self.model, phash,
                cached=True, attempts=int(hit.get("attempts", 1)),
            )  # fmt: skip
        try:
            result = await complete_structured(
                self.backend, messages, VerdictReply, mode=self.structured,
                temperature=0.0, max_tokens=self.max_tokens,
            )  # fmt: skip
        except StructuredOutputError as exc:
            self.requests += exc.attempts
            raise JudgeError(
                f"judge {self.model}: no valid verdict after one repair request ({exc.errors})", [exc.reply]
            ) from exc
        self.requests += result.requests
        reply = result.value
        verdict = JudgeVerdict(
            reply.score, reply.reason.strip(), result.completion.text, self.model, phash,
            attempts=result.requests,
        )  # fmt: skip
        if self.cache is not None:
            self.cache.put(verdict)
        return verdict

    async def judge_many(self, items: Sequence[JudgeItem], *, concurrency: int = 8) -> list[JudgeVerdict]:
        """Verdicts for many items, at most ``concurrency`` requests in flight, in the order given."""
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        sem = asyncio.Semaphore(concurrency)

        async def one(item: JudgeItem) -> JudgeVerdict:
            async with sem:
                return await self.judge(item.question, item.reference, item.prediction)

        return list(await asyncio.gather(*(one(it) for it in items)))

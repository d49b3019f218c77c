"""Model-as-judge for answers rules cannot check: strict JSON verdicts, one retry, temperature 0, a disk cache.

DataMind scores DABench/TableBench answers and its RL answer reward with GPT-4o-mini as a judge (§4,
§5.1); SciDataSailor scores meta-information summaries the same way (§5.1, App. B.2). What this module
adds around the prompt (:mod:`datadojo.reward.judge_prompts`):

* **strict JSON, parsed robustly**: the verdict must be ``{"score": 0|1, "reason": str}``; a reply wrapped
  in a Markdown fence, preceded by a ``<think>`` block or by prose is still read, but a score that is not
  0 or 1 is not. An unreadable reply gets **one retry**: the judge is shown its reply and the parse error
  and asked again for the JSON object only. A second failure raises :class:`JudgeError`.
* **deterministic**: temperature 0 (greedy) on every request.
* **cached**: verdicts are appended to a JSONL file keyed by ``(judge model, prompt hash)``, the SHA-256 of
  the rendered chat messages, so re-scoring the same answers (a resumed run, a second report) costs no
  requests. The file is append-only (a crash loses at most the verdict being written; see
  :mod:`datadojo.jsonl`); later lines win when a key repeats.
* an empty or missing candidate answer is scored 0 without asking the model.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datadojo.errors import DataDojoError
from datadojo.jsonl import append_jsonl, iter_jsonl
from datadojo.llm.base import ChatBackend
from datadojo.reward.judge_prompts import JudgeRubric, get_rubric

__all__ = [
    "JudgeCache",
    "JudgeError",
    "JudgeItem",
    "JudgeParseError",
    "JudgeVerdict",
    "LLMJudge",
    "parse_verdict",
    "prompt_hash",
]


class JudgeParseError(DataDojoError, ValueError):
    """A judge reply that is not a ``{"score": 0|1, "reason": ...}`` object."""


class JudgeError(DataDojoError, RuntimeError):
    """The judge gave no readable verdict, even after the retry; ``replies`` holds what it said."""

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


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def _score_of(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip() in ("0", "1", "0.0", "1.0"):
        return int(float(value.strip()))
    raise JudgeParseError(f'"score" must be 0 or 1, got {value!r}')


def parse_verdict(text: str) -> tuple[int, str]:
    """``(score, reason)`` from a judge reply; raises :class:`JudgeParseError` saying what is wrong.

    Tries, in order: the whole reply as JSON, the content of Markdown code fences, then every ``{`` in the
    reply as the start of a JSON object; the first object with a ``score`` key decides. ``<think>`` blocks
    are ignored. ``reason`` may be missing (empty) but must be a string when present.
    """
    body = _THINK.sub("", text).strip()
    if not body:
        raise JudgeParseError("the reply is empty")
    candidates: list[Any] = []
    decoder = json.JSONDecoder()
    for chunk in (body, *(m.group(1).strip() for m in _FENCE.finditer(body))):
        try:
            candidates.append(json.loads(chunk))
        except json.JSONDecodeError:
            continue
    for m in re.finditer(r"\{", body):
        try:
            obj, _ = decoder.raw_decode(body, m.start())
        except json.JSONDecodeError:
            continue
        candidates.append(obj)
    objects = [c for c in candidates if isinstance(c, dict) and "score" in c]
    if not objects:
        raise JudgeParseError('no JSON object with a "score" key in the reply')
    obj = objects[0]
    reason = obj.get("reason", "")
    if not isinstance(reason, str):
        raise JudgeParseError(f'"reason" must be a string, got {type(reason).__name__}')
    return _score_of(obj["score"]), reason.strip()


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


_RETRY = (
    "Your reply could not be read as the required JSON ({error}). Reply again with only the JSON object "
    '{{"score": 0 or 1, "reason": "short reason"}} and nothing else.'
)


class LLMJudge:
    """Judges candidate answers against references with an LLM (module docstring).

    ``rubric`` is ``datamind`` (default), ``sailor_meta``, ``sailor_qa`` or a
    :class:`~datadojo.reward.judge_prompts.JudgeRubric`. ``cache`` is a path or a :class:`JudgeCache`.
    ``model`` names the judge in the cache key (default: the backend's ``model_id``). Backend failures
    (:class:`~datadojo.llm.LLMError`) propagate unchanged.
    """

    def __init__(
        self,
        backend: ChatBackend,
        *,
        rubric: str | JudgeRubric = "datamind",
        cache: JudgeCache | str | Path | None = None,
        max_tokens: int = 512,
        model: str | None = None,
    ) -> None:
        self.backend = backend
        self.rubric = get_rubric(rubric)
        self.cache = cache if isinstance(cache, JudgeCache) or cache is None else JudgeCache(cache)
        self.max_tokens = max_tokens
        self.model = model or backend.model_id
        self.requests = 0

    async def _ask(self, messages: list[dict[str, Any]]) -> str:
        self.requests += 1
        out = await self.backend.chat(messages, n=1, temperature=0.0, max_tokens=self.max_tokens)
        return out[0].text

    async def judge(self, question: str, reference: str, prediction: str | None) -> JudgeVerdict:
        """One verdict on ``prediction`` (see the module docstring for retry, cache and empty answers)."""
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
        replies = [await self._ask(messages)]
        try:
            score, reason = parse_verdict(replies[0])
        except JudgeParseError as first:
            retry = [
                *messages,
                {"role": "assistant", "content": replies[0]},
                {"role": "user", "content": _RETRY.format(error=first)},
            ]
            replies.append(await self._ask(retry))
            try:
                score, reason = parse_verdict(replies[1])
            except JudgeParseError as second:
                raise JudgeError(
                    f"judge {self.model}: no readable verdict after one retry ({first}; then {second})",
                    replies,
                ) from second
        verdict = JudgeVerdict(score, reason, replies[-1], self.model, phash, attempts=len(replies))
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

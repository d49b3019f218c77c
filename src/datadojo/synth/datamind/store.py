"""The output folder of a DataMind run: file names, the rejection log, stage progress markers, usage.

Every file is append-only JSONL (crash-tolerant, see :mod:`datadojo.jsonl`) except the curated SFT sets,
the summary and the report, which are written to a temporary file and renamed. Resume rests on two logs:

* ``progress.jsonl`` — one marker per finished unit of LLM work (a query request, a composition step); a
  rerun skips marked units, so a finished stage makes no request;
* ``rejected.jsonl`` — what a check or filter removed and why, each with a ``key`` so a unit redone after a
  crash does not log the same rejection twice.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from datadojo.jsonl import JsonlAppender, iter_jsonl
from datadojo.llm.base import ChatBackend
from datadojo.llm.structured import StructuredOutputError, complete_structured

__all__ = ["Paths", "ProgressLog", "RejectLog", "StageUsage", "read_usage"]

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class Paths:
    """Where each file of the output contract lives under ``out``."""

    out: Path

    @property
    def corpus(self) -> Path:
        return self.out / "corpus.jsonl"

    @property
    def queries(self) -> Path:
        return self.out / "queries.jsonl"

    @property
    def trajectories(self) -> Path:
        return self.out / "trajectories.jsonl"

    @property
    def verdicts(self) -> Path:
        return self.out / "verdicts.jsonl"

    @property
    def rejected(self) -> Path:
        return self.out / "rejected.jsonl"

    @property
    def progress(self) -> Path:
        return self.out / "progress.jsonl"

    @property
    def usage(self) -> Path:
        return self.out / "usage.jsonl"

    @property
    def sft(self) -> Path:
        return self.out / "sft"

    @property
    def rl_tasks(self) -> Path:
        return self.out / "rl_tasks.jsonl"

    @property
    def summary(self) -> Path:
        return self.out / "summary.json"

    @property
    def report(self) -> Path:
        return self.out / "report.html"


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [rec for _, rec in iter_jsonl(path) if isinstance(rec, dict)]


class ProgressLog:
    """Markers ``{"stage", "key", ...}`` of finished units; ``data`` keeps each marker's extra fields."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[tuple[str, str], dict[str, Any]] = {
            (str(r.get("stage")), str(r.get("key"))): r for r in _records(path)
        }
        self._out: JsonlAppender | None = None

    def done(self, stage: str, key: str) -> bool:
        return (stage, key) in self.data

    def get(self, stage: str, key: str) -> dict[str, Any] | None:
        return self.data.get((stage, key))

    def mark(self, stage: str, key: str, **fields: Any) -> None:
        """Append a marker (flushed at once; the file stays open until :meth:`close`)."""
        rec = {"stage": stage, "key": key, **fields}
        if self._out is None:
            self._out = JsonlAppender(self.path)
        self._out.write(rec)
        self.data[(stage, key)] = rec

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def __enter__(self) -> ProgressLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RejectLog:
    """``rejected.jsonl``: ``{"stage", "key", "reason", "detail", ...}``, each key written once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records = _records(path)
        self._keys = {(str(r.get("stage")), str(r.get("key"))) for r in self.records}
        self._out: JsonlAppender | None = None

    def add(self, stage: str, key: str, reason: str, detail: str = "", **fields: Any) -> bool:
        """Log one rejection; False (and nothing written) when this key was already logged."""
        if (stage, key) in self._keys:
            return False
        rec = {"stage": stage, "key": key, "reason": reason, "detail": detail, **fields}
        if self._out is None:
            self._out = JsonlAppender(self.path)
        self._out.write(rec)
        self._keys.add((stage, key))
        self.records.append(rec)
        return True

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def __enter__(self) -> RejectLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class StageUsage:
    """LLM use of one stage invocation, by role (``teacher`` / ``judge``), and its wall time."""

    stage: str
    started: float = field(default_factory=time.perf_counter)
    roles: dict[str, dict[str, int]] = field(
        default_factory=lambda: defaultdict(
            lambda: {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
        )
    )
    repaired: int = 0
    failed: int = 0

    def add(self, role: str, *, requests: int, prompt_tokens: int, completion_tokens: int) -> None:
        r = self.roles[role]
        r["requests"] += requests
        r["prompt_tokens"] += prompt_tokens
        r["completion_tokens"] += completion_tokens

    async def structured(
        self,
        role: str,
        backend: ChatBackend,
        messages: Sequence[dict[str, Any]],
        model_cls: type[T],
        **kwargs: Any,
    ) -> T:
        """:func:`~datadojo.llm.structured.complete_structured`, with its requests and tokens counted here.

        Raises what it raises: :class:`StructuredOutputError` (counted too) or ``LLMError``.
        """
        try:
            res = await complete_structured(backend, messages, model_cls, **kwargs)
        except StructuredOutputError as exc:
            self.add(role, requests=exc.attempts, prompt_tokens=0, completion_tokens=0)
            raise
        self.add(
            role,
            requests=res.requests,
            prompt_tokens=res.prompt_tokens,
            completion_tokens=res.completion_tokens,
        )
        self.repaired += int(res.repaired)
        return res.value

    @property
    def requests(self) -> int:
        return sum(r["requests"] for r in self.roles.values())

    def record(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "roles": {k: dict(v) for k, v in self.roles.items()},
            "repaired": self.repaired,
            "failed": self.failed,
            "wall_s": round(time.perf_counter() - self.started, 4),
            "finished": time.time(),
        }

    def save(self, paths: Paths) -> dict[str, Any]:
        rec = self.record()
        with JsonlAppender(paths.usage) as out:
            out.write(rec)
        return rec


def read_usage(paths: Paths) -> dict[str, Any]:
    """Totals per stage and role over every invocation recorded in ``usage.jsonl`` (resumed runs add up)."""
    stages: dict[str, dict[str, Any]] = {}
    for rec in _records(paths.usage):
        st = stages.setdefault(
            str(rec.get("stage")), {"roles": {}, "repaired": 0, "failed": 0, "wall_s": 0.0, "invocations": 0}
        )
        st["invocations"] += 1
        st["repaired"] += int(rec.get("repaired", 0))
        st["failed"] += int(rec.get("failed", 0))
        st["wall_s"] = round(st["wall_s"] + float(rec.get("wall_s", 0.0)), 4)
        for role, v in (rec.get("roles") or {}).items():
            tot = st["roles"].setdefault(role, {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0})
            for k in tot:
                tot[k] += int(v.get(k, 0))
    return stages

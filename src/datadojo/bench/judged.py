"""Benchmarks whose official rule is an LLM judge: verdicts are gathered first (async, cached), then scored.

:meth:`Benchmark.score` is synchronous and runs once per (task, trial) inside
:func:`datadojo.eval.scoring.score_predictions`; asking a model from there would serialize every request
and tie the scorer to an event loop. A :class:`JudgedBenchmark` therefore splits the work in two:

1. :meth:`JudgedBenchmark.gather_verdicts` asks the judge about every distinct (task, prediction) pair,
   concurrently, through :class:`datadojo.compare.judge.LLMJudge` (a structured verdict validated against
   its JSON Schema, one repair, temperature 0, the append-only verdict cache, so a rerun or a resumed run
   asks nothing twice). Each task picks its rubric (:meth:`rubric_for`); tasks a subclass scores without
   the judge are skipped (:meth:`wants_verdict`); a pair the judge could not answer even after its repair
   becomes a
   :class:`JudgeFailure` instead of aborting the run (a transport failure, :class:`~datadojo.llm.LLMError`,
   still propagates: the verdicts obtained so far stay in the cache).
2. :meth:`with_verdicts` returns a copy of the benchmark holding those verdicts, whose :meth:`score` reads
   them: the judge's 0/1 is the credit, its reason the reason; a judge failure scores 0 with
   ``parts["judge_error"] = True`` (counted by :meth:`totals` as ``judge_errors``, so it is visible rather
   than silently wrong). Scoring a prediction that has no verdict is an error that says to pass a judge.

A missing prediction scores 0 ("no prediction") and an empty one 0 ("empty answer") without asking.
"""

from __future__ import annotations

import abc
import asyncio
import copy
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from datadojo.bench.base import Benchmark, BenchmarkError, ItemScore, missing_prediction
from datadojo.compare.judge import JudgeCache, JudgeError, JudgeVerdict, LLMJudge
from datadojo.llm.base import ChatBackend
from datadojo.llm.structured import StructuredMode
from datadojo.types import Task

__all__ = ["JudgeFailure", "JudgedBenchmark", "verdict_key"]


@dataclass(frozen=True)
class JudgeFailure:
    """The judge gave no valid verdict for a pair, even after its repair; ``message`` says what it said."""

    message: str


Verdict = JudgeVerdict | JudgeFailure


def verdict_key(task_id: str, prediction: str) -> tuple[str, str]:
    """The key of one verdict: the task id and the SHA-256 of the prediction text."""
    return task_id, hashlib.sha256(prediction.encode("utf-8")).hexdigest()


class JudgedBenchmark(Benchmark):
    """A benchmark scored by an LLM judge (module docstring). Subclasses choose the rubric per task."""

    needs_judge = True

    def __init__(self, verdicts: Mapping[tuple[str, str], Verdict] | None = None) -> None:
        self._verdicts: dict[tuple[str, str], Verdict] = dict(verdicts or {})
        #: Whether a judge has run (verdicts were given), even if it had nothing to judge.
        self.judged = verdicts is not None

    @abc.abstractmethod
    def rubric_for(self, task: Task) -> str:
        """The judge rubric of ``task`` (a name in :data:`datadojo.compare.judge_prompts.JUDGE_RUBRICS`)."""

    def wants_verdict(self, task: Task) -> bool:
        """Whether :meth:`gather_verdicts` asks the judge about ``task`` (default: always)."""
        return True

    def judge_question(self, task: Task) -> str:
        """The question or task text the judge is shown (default: the task's question)."""
        return task.question

    def judge_reference(self, task: Task) -> str:
        """The reference answer the judge is shown (default: the task's answer as text)."""
        return str(task.answer)

    def with_verdicts(self, verdicts: Mapping[tuple[str, str], Verdict]) -> Self:
        """A copy of this benchmark that scores with ``verdicts`` (from :meth:`gather_verdicts`)."""
        new = copy.copy(self)
        new._verdicts = dict(verdicts)
        new.judged = True
        return new

    async def gather_verdicts(
        self,
        pairs: Iterable[tuple[Task, str | None]],
        backend: ChatBackend,
        *,
        cache: JudgeCache | str | Path | None = None,
        concurrency: int = 8,
        model: str | None = None,
        on_verdict: Callable[[int, int], None] | None = None,
        structured: StructuredMode = "auto",
    ) -> dict[tuple[str, str], Verdict]:
        """Verdicts for every distinct non-empty (task, prediction) pair, ``concurrency`` requests at a time.

        ``model`` names the judge in the cache key (default: the backend's model id). ``on_verdict(done,
        total)`` is called as verdicts arrive (progress bars). ``structured`` is the judge's
        structured-output mode (:class:`~datadojo.compare.judge.LLMJudge`).
        """
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        shared = cache if isinstance(cache, JudgeCache) or cache is None else JudgeCache(cache)
        judges: dict[str, LLMJudge] = {}
        todo: dict[tuple[str, str], tuple[Task, str]] = {}
        for task, prediction in pairs:
            if prediction is None or not prediction.strip() or not self.wants_verdict(task):
                continue
            todo.setdefault(verdict_key(task.id, prediction), (task, prediction))
        for task, _ in todo.values():
            rubric = self.rubric_for(task)
            if rubric not in judges:
                try:
                    judges[rubric] = LLMJudge(
                        backend, rubric=rubric, cache=shared, model=model, structured=structured
                    )
                except ValueError as exc:
                    raise BenchmarkError(f"{self.name}: task {task.id!r}: {exc}") from exc
        sem = asyncio.Semaphore(concurrency)
        out: dict[tuple[str, str], Verdict] = {}
        done = 0

        async def one(key: tuple[str, str], task: Task, prediction: str) -> None:
            nonlocal done
            if task.answer is None:
                raise BenchmarkError(
                    f"{self.name}: task {task.id!r} has no reference answer to judge against"
                )
            async with sem:
                judge = judges[self.rubric_for(task)]
                try:
                    out[key] = await judge.judge(
                        self.judge_question(task), self.judge_reference(task), prediction
                    )
                except JudgeError as exc:
                    out[key] = JudgeFailure(str(exc))
            done += 1
            if on_verdict is not None:
                on_verdict(done, len(todo))

        await asyncio.gather(*(one(k, t, p) for k, (t, p) in todo.items()))
        return out

    def score(self, task: Task, prediction: str | None) -> ItemScore:
        rubric = self.rubric_for(task)
        if prediction is None:
            return missing_prediction(rubric)
        if not prediction.strip():
            return ItemScore(0.0, False, "", "empty answer", rubric)
        verdict = self._verdicts.get(verdict_key(task.id, prediction))
        if verdict is None:
            raise BenchmarkError(
                f"{self.name}: task {task.id!r}: no judge verdict for this prediction; {self.name} is scored "
                "by an LLM judge, so gather verdicts first (`datadojo eval ... --judge SPEC`)"
            )
        if isinstance(verdict, JudgeFailure):
            return ItemScore(
                0.0,
                False,
                prediction.strip(),
                f"judge failed: {verdict.message}",
                rubric,
                {"judge_error": True},
            )
        parts: dict[str, Any] = {
            "judge": verdict.model,
            "cached": verdict.cached,
            "attempts": verdict.attempts,
        }
        reason = verdict.reason or ("correct" if verdict.correct else "wrong")
        return ItemScore(float(verdict.score), verdict.correct, prediction.strip(), reason, rubric, parts)

    def totals(self, items: Sequence[tuple[Task, ItemScore]]) -> dict[str, float]:
        """The base totals plus ``judge_errors``: items the judge could not score (counted, not a share)."""
        out = super().totals(items)
        out["judge_errors"] = float(sum(1 for _, s in items if s.parts.get("judge_error")))
        return out

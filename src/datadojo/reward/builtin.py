"""The built-in rewards of the registry (:mod:`datadojo.reward.registry`): datamind, judge, scientific,
benchmark and envlunch, each a sum of named, weighted parts (the registry's docstring gives the formulas).

Why DataMind's R is written as a sum: R = r_length·r_answer when correct, 0 when wrong but well formed,
−0.1 when wrong and malformed (§4) equals ``1·r_answer + 1·r_answer(r_length − 1) + 0.1·(−(1 − r_answer)(1 −
r_format))`` for r_answer, r_format ∈ {0, 1}: the answer part, the length penalty of a correct answer, the
format penalty of a wrong one. Each part moves alone in the logs, and its weight is the paper's constant.
EnvLunch's Eq. 4, (1 + w(1 − t/t_max))·min_k m, is likewise ``1·min_k m + w·(1 − t/t_max)·min_k m``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datadojo.config import ConfigError
from datadojo.reward.answers import predicted_answer
from datadojo.reward.base import RewardResult, RewardSpec, WeightedPart, weighted_result
from datadojo.reward.datamind import (
    MALFORMED_PENALTY,
    AnswerCheck,
    DataMindReward,
    default_answer_check,
)
from datadojo.types import Task, Trajectory

if TYPE_CHECKING:
    from datadojo.bench.base import Benchmark
    from datadojo.reward.envlunch import EnvLunchTaskInfo, ScoreRecord
    from datadojo.reward.programs import ProgramExecutor

__all__ = [
    "DATAMIND_PARTS",
    "ENVLUNCH_PARTS",
    "AnswerPartReward",
    "BenchmarkRuleReward",
    "EnvLunchAgreementReward",
    "judge_for",
    "official_check",
    "scientific_check",
]

#: DataMind §4 as weighted parts (module docstring): the default weight of each.
DATAMIND_PARTS: dict[str, float] = {"answer": 1.0, "length": 1.0, "format": -MALFORMED_PENALTY}
#: EnvLunch Eq. 4 as weighted parts; ``brevity``'s default is the task's w (0.5 in the paper).
ENVLUNCH_PARTS: tuple[str, ...] = ("agreement", "brevity")

Checker = Callable[[Task, str | None], AnswerCheck]


def _check_weights(name: str, spec: RewardSpec, parts: Sequence[str]) -> None:
    unknown = sorted(set(spec.weights) - set(parts))
    if unknown:
        raise ConfigError(
            f"reward {name}: no part named {', '.join(map(repr, unknown))}; its parts: {', '.join(parts)}"
        )


def official_check(benchmark: Benchmark | None) -> Checker:
    """r_answer by the official rule of the benchmark the task's source names, else the tolerant matcher.

    ``benchmark`` (eval's scorer, with the rule and judge verdicts it was given) decides the tasks of its own
    name and those whose source names no registered benchmark (a scidata file's own sources); a task whose
    source names another benchmark keeps that benchmark's rule, so it gets the same reward from every
    consumer whatever benchmark a run was started with (``eval --bench tasks`` included).
    """

    def check(task: Task, prediction: str | None) -> AnswerCheck:
        if benchmark is None or not _decides(benchmark, task):
            return default_answer_check(task, prediction)
        item = benchmark.score(task, prediction)
        return AnswerCheck(item.correct, item.reason, f"bench:{benchmark.name}")

    return check


def _decides(benchmark: Benchmark, task: Task) -> bool:
    from datadojo.bench.registry import benchmark_names

    return task.source == benchmark.name or not task.source or task.source not in benchmark_names()


def scientific_check(task: Task, prediction: str | None) -> AnswerCheck:
    """r_answer by SciDataSailor's scientific QA matcher (numbers with units, tolerances, yes/no)."""
    from datadojo.compare.scientific import match_scientific

    if task.answer is None:
        raise ValueError(f"task {task.id!r}: the scientific reward needs a reference answer")
    reference = task.answer if isinstance(task.answer, str) else json.dumps(task.answer, ensure_ascii=False)
    m = match_scientific(prediction, reference, question=task.question)
    return AnswerCheck(m.correct, m.reason, f"scientific:{m.kind}", m.decisive)


class AnswerPartReward:
    """DataMind's reward as weighted parts: ``answer``, ``length``, ``format`` (module docstring); the
    answer part is decided by ``checker`` on the task's prediction, or by an LLM judge."""

    def __init__(self, name: str, spec: RewardSpec, checker: Checker, *, judge: Any = None) -> None:
        _check_weights(name, spec, list(DATAMIND_PARTS))
        self.name = name
        self.weights = {p: spec.weight(p, w) for p, w in DATAMIND_PARTS.items()}
        self.scorer = DataMindReward(
            checker=checker,
            judge=judge,
            tokenizer=spec.tokenizer,
            l_min=spec.l_min,
            l_max=spec.l_max,
            rule_first=spec.rule_first,
        )

    async def aclose(self) -> None:
        """Close the judge's model backend (its HTTP session), when this reward has a judge."""
        judge = self.scorer.judge
        if judge is not None:
            await judge.backend.aclose()

    async def score(self, pairs: Sequence[tuple[Task, Trajectory]]) -> list[RewardResult]:
        checks = await asyncio.gather(
            *(self.scorer.acheck(task, predicted_answer(task, traj)[0]) for task, traj in pairs)
        )
        return [self.result(traj, check) for (_, traj), check in zip(pairs, checks, strict=True)]

    def result(self, trajectory: Trajectory, check: AnswerCheck) -> RewardResult:
        b = self.scorer.combine(trajectory, check)
        w = self.weights
        parts = [
            WeightedPart("answer", w["answer"], b.answer),
            # r_answer·(r_length − 1) and −(1 − r_answer)(1 − r_format), written out (no −0.0 in the logs)
            WeightedPart("length", w["length"], b.length - 1.0 if b.answer == 1.0 else 0.0),
            WeightedPart("format", w["format"], -1.0 if b.answer == 0.0 and b.format == 0.0 else 0.0),
        ]
        details = {
            "r_answer": b.answer,
            "r_format": b.format,
            "r_length": b.length,
            "answer_tokens": float(b.answer_tokens),
            "answer_decided": float(b.answer_decided),
        }
        return weighted_result(self.name, parts, correct=b.answer == 1.0, details=details)


class BenchmarkRuleReward:
    """One part, ``benchmark``: the credit in [0, 1] the task's benchmark's official rule gives the
    prediction (as ``datadojo eval`` scores it); correct = full credit."""

    def __init__(self, spec: RewardSpec) -> None:
        _check_weights("benchmark", spec, ["benchmark"])
        self.name = "benchmark"
        self.weight = spec.weight("benchmark", 1.0)
        self.benchmark = spec.benchmark

    def _benchmark_of(self, task: Task) -> Benchmark:
        if self.benchmark is not None and _decides(self.benchmark, task):
            return self.benchmark
        from datadojo.bench.registry import benchmark_names, get_benchmark

        if not task.source or task.source not in benchmark_names():
            raise ConfigError(
                f"task {task.id!r}: the benchmark reward needs a task whose source names a benchmark "
                f"(got {task.source!r}; known: {', '.join(benchmark_names())})"
            )
        return get_benchmark(task.source)

    async def score(self, pairs: Sequence[tuple[Task, Trajectory]]) -> list[RewardResult]:
        out = []
        for task, traj in pairs:
            item = self._benchmark_of(task).score(task, predicted_answer(task, traj)[0])
            out.append(
                weighted_result(
                    self.name,
                    [WeightedPart("benchmark", self.weight, float(item.score))],
                    correct=item.correct,
                    details={"credit": float(item.score)},
                )
            )
        return out


class EnvLunchAgreementReward:
    """EnvLunch Eq. 4 as weighted parts ``agreement`` and ``brevity``: the submitted program is run in every
    counterfactual copy (in the sandbox unless ``executor='in_process'``) and compared with the stored
    reference results."""

    def __init__(self, spec: RewardSpec) -> None:
        from datadojo.reward.programs import InProcessExecutor, SandboxExecutor

        _check_weights("envlunch", spec, list(ENVLUNCH_PARTS))
        self.name = "envlunch"
        self.spec = spec
        self.executor: ProgramExecutor = (
            InProcessExecutor()
            if spec.executor == "in_process"
            else SandboxExecutor(concurrency=spec.concurrency)
        )
        self.infos: dict[str, EnvLunchTaskInfo] = {}

    def info(self, task: Task) -> EnvLunchTaskInfo:
        """The task's scoring view (copies, targets, w, t_max), read once."""
        from datadojo.reward.envlunch import EnvLunchTaskInfo, task_info

        if task.id not in self.infos:
            if self.spec.tasks_path is not None:
                self.infos[task.id] = task_info(task, self.spec.tasks_path)
            elif all(os.path.isabs(p) for p in [*task.extra.get("copies", []), task.extra.get("orig", "")]):
                self.infos[task.id] = EnvLunchTaskInfo(task, Path("/"))
            else:
                raise ConfigError(
                    f"task {task.id!r}: the envlunch reward needs the task file (RewardSpec.tasks_path; "
                    "its counterfactual copies live next to it)"
                )
        return self.infos[task.id]

    def records(
        self, pairs: Sequence[tuple[Task, Trajectory]], *, executor: ProgramExecutor | None = None
    ) -> list[ScoreRecord]:
        """Eq. 4's per-submission records (agreement per copy, t, errors): what reports show; ``executor``
        replaces the spec's (a progress-counting one)."""
        from datadojo.reward.envlunch import score_trajectories

        infos = {task.id: self.info(task) for task, _ in pairs}
        return score_trajectories(infos, [traj for _, traj in pairs], executor or self.executor)

    async def score(self, pairs: Sequence[tuple[Task, Trajectory]]) -> list[RewardResult]:
        if self.spec.executor == "in_process":
            records = self.records(pairs)
        else:  # the sandbox executor runs its own event loop: keep it off this one
            records = await asyncio.to_thread(self.records, pairs)
        return [self.result(self.info(task), rec) for (task, _), rec in zip(pairs, records, strict=True)]

    def result(self, info: EnvLunchTaskInfo, rec: ScoreRecord) -> RewardResult:
        m_min = min(rec.m) if rec.m else 0.0
        t = min(max(rec.t, 0), info.t_max)
        parts = [
            WeightedPart("agreement", self.spec.weight("agreement", 1.0), m_min),
            WeightedPart("brevity", self.spec.weight("brevity", info.w), (1.0 - t / info.t_max) * m_min),
        ]
        details = {"m_min": m_min, "t": float(rec.t), "t_max": float(info.t_max), "copies": float(len(rec.m))}
        return weighted_result(self.name, parts, correct=rec.solved, details=details)


def judge_for(spec: RewardSpec) -> Any:
    """The LLM judge ``spec.judge`` names, its verdicts cached in ``cache_dir/judge_cache.jsonl``."""
    if not spec.judge:
        raise ConfigError("the judge reward needs a judge model spec (RewardSpec.judge, --judge SPEC)")
    from datadojo.compare.judge import LLMJudge
    from datadojo.llm import load_backend

    cache = Path(spec.cache_dir or ".") / "judge_cache.jsonl"
    return LLMJudge(load_backend(spec.judge), cache=cache)

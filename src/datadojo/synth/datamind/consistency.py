"""Stage 5: self-consistency of the N final answers — a deterministic pre-check, then the LLM judge.

DataMind §3.2 (Step 3): a judge model M reads the N trajectories and returns {c, s, y} = M({y_i}) — a
chain-of-thought critique *c*, a verdict s ∈ {0, 1} and, when s = 1, the best trajectory *y*; its criteria
(App. I.4, as summarized in the paper): semantic equivalence of descriptive answers, numbers within 3% of
each other after unit conversion, completeness, and which answer "most clearly and accurately represents
the final synthesized answer".

Asking the judge about three identical numbers wastes a request, so :func:`rule_check` runs first:

* any attempt without a final answer → inconsistent (method ``rule``; the critique names the attempts);
* every pair of answers the comparison core (:func:`datadojo.compare.core.compare_answers`, symmetric
  mode) finds equal *and is certain about* → consistent: identical after a normalization that keeps sign,
  decimal point, percent, exponent and identifiers (``-5``/``5``, ``1.5``/``15``, ``12.5%``/``125%``,
  ``3.14e-2``/``3.14e2``, ``Q1``/``Q3``, ``Store_12``/``Store_7`` all differ), or the same words around
  numbers that agree within ``tolerance`` (relative to the larger, default 0.03 = the paper's 3%) after
  sign, percent, exponent, magnitude and unit are parsed, with the same names;
* anything else — numbers that differ, a percent against a bare figure, a hedge or range, a missing or
  different name, differing words (the judge also checks completeness) — is left to the judge (method
  ``llm``). The rule never says "inconsistent" about answers it could read: only the judge does.

Who chooses the best trajectory (``ConsistencyVerdict.chosen_by``; DataMind §3.2: *y* is the judge's choice, and
con-select in §5.4 / Fig. 4 is "best-trajectory selection by a judge model"):

* the rule finds the answers consistent and the N trajectories are identical (same turns and answer): any is
  the best; the lowest sample number is taken (``chosen_by = "rule"``, no request);
* the rule finds them consistent but the trajectories differ: the judge is asked all the same (its verdict
  and its ``best`` count; it also checks completeness, which the rule cannot) — ``chosen_by = "judge"``,
  ``rule`` keeps the rule's reason. ``rule_best = True`` keeps the cheap path instead: the rule's verdict and
  its stand-in best (fewest turns, then shortest answer, then lowest sample; ``chosen_by = "rule"``);
* the rule cannot decide: the judge decides (``chosen_by = "judge"`` when it names a valid best, ``"rule"``
  when its ``best`` was missing or out of range and the stand-in was used).

The judge (a model separate from the teacher, temperature 0) answers a :class:`ConsistencyJudgement` JSON
object (structured output, one repair).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from datadojo.compare.core import compare_answers, within
from datadojo.jsonl import JsonlAppender, read_models, read_trajectories
from datadojo.llm.base import ChatBackend, LLMError
from datadojo.llm.structured import StructuredOutputError, complete_counted
from datadojo.runs import UsageLedger
from datadojo.synth.datamind.config import DataMindConfig
from datadojo.synth.datamind.sampling import FAILED_STOPS, describe_attempts
from datadojo.synth.datamind.store import Paths
from datadojo.types import Task, Trajectory

__all__ = [
    "ConsistencyJudgement",
    "ConsistencyVerdict",
    "RuleOutcome",
    "judge_messages",
    "judge_round",
    "numbers_agree",
    "read_verdicts",
    "rule_best",
    "rule_check",
    "trajectories_by_round",
]

log = logging.getLogger(__name__)


class ConsistencyJudgement(BaseModel):
    """The judge's reply: critique first (its reasoning), then the verdict and the best attempt."""

    model_config = ConfigDict(extra="forbid")

    critique: str = Field(description="step-by-step comparison of the attempts' answers and methods")
    consistent: bool = Field(description="true when every attempt gives the same answer")
    best: int | None = Field(description="1-based number of the best attempt when consistent, else null")


@dataclass(frozen=True)
class RuleOutcome:
    """``consistent`` is True / False when the rule decides, ``None`` when the judge must."""

    consistent: bool | None
    reason: str


def numbers_agree(a: float, b: float, tolerance: float) -> bool:
    """``|a − b| ≤ tolerance · max(|a|, |b|)``, boundary included (exact equality when both are 0)."""
    return within(a, b, tolerance, symmetric=True)


def rule_check(
    answers: Sequence[str | None], tolerance: float = 0.03, *, question: str | None = None
) -> RuleOutcome:
    """The deterministic pre-check of N final answers (module docstring).

    ``question`` accounts for the words the answers repeat from it (the core's ``question``).

    ``consistent`` is ``True`` only when the core is certain every pair agrees, ``False`` only when an
    attempt gave no answer, ``None`` (ask the judge) otherwise. Signature and return type unchanged.
    """
    missing = [i + 1 for i, a in enumerate(answers) if a is None or not a.strip()]
    if missing:
        return RuleOutcome(False, f"attempt(s) {', '.join(map(str, missing))} gave no final answer")
    texts = [str(a) for a in answers]
    reasons: list[str] = []
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            v = compare_answers(
                texts[j], texts[i], question=question, rel_tol=tolerance, abs_tol=0.0, symmetric=True
            )
            if not (v.correct and v.decided):
                return RuleOutcome(None, f"attempts {i + 1} and {j + 1}: {v.reason}; the judge decides")
            reasons.append(v.reason)
    if all(r == "identical after normalization" for r in reasons):
        return RuleOutcome(True, "identical answers after normalization")
    return RuleOutcome(True, f"same words and names, numbers within {tolerance:.0%}")


def rule_best(trajectories: Sequence[Trajectory]) -> Trajectory:
    """Fewest turns, then shortest final answer, then lowest sample number."""
    return min(trajectories, key=lambda t: (len(t.turns), len(t.final_answer or ""), t.sample))


_SYSTEM = (
    "You check whether several independent attempts at the same data-analysis question reached the same "
    "answer. Attempts are consistent when: numbers agree within 3% of each other (convert units, percentages "
    "versus fractions, before comparing); descriptive answers mean the same thing even if worded "
    "differently; and every attempt answers every part of the question. First write a critique that compares "
    "the answers and, where they differ, points out which steps or assumptions are likely wrong. Then give the "
    "verdict. If consistent, name the attempt that most clearly and accurately states the common answer. "
    "Reply with JSON only."
)


def judge_messages(
    question: str, trajectories: Sequence[Trajectory], budget_chars: int
) -> list[dict[str, str]]:
    """The judge request: the question and each attempt's code (within budget) and final answer."""
    user = (
        f"## Question\n{question}\n\n{describe_attempts(trajectories, budget_chars)}\n\n"
        'Reply as JSON: {"critique": "...", "consistent": true or false, "best": attempt number or null}'
    )
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


class ConsistencyVerdict(BaseModel):
    """One line of ``verdicts.jsonl``: the verdict on one query's N attempts of one round."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    round: int
    consistent: bool
    critique: str
    best: int | None  # the best trajectory's sample number
    method: Literal["rule", "llm"]
    samples: list[int]
    answers: list[str | None]
    error: str | None = None
    chosen_by: Literal["rule", "judge"] | None = None  # who picked ``best`` (None when inconsistent)
    rule: str | None = None  # the rule's reason when it found the answers consistent but the judge was asked


def read_verdicts(paths: Paths) -> dict[tuple[str, int], ConsistencyVerdict]:
    """Verdicts by ``(task_id, round)`` (later lines win); a bad line raises :class:`~datadojo.jsonl.JsonlError`
    naming the file, line and field."""
    out: dict[tuple[str, int], ConsistencyVerdict] = {}
    if paths.verdicts.exists():
        for v in read_models(paths.verdicts, ConsistencyVerdict):
            out[(v.task_id, v.round)] = v
    return out


def trajectories_by_round(paths: Paths) -> dict[tuple[str, int], list[Trajectory]]:
    """Trajectories grouped by ``(task_id, extra.round)``, each group sorted by sample number."""
    groups: dict[tuple[str, int], list[Trajectory]] = defaultdict(list)
    if paths.trajectories.exists():
        seen: set[tuple[str, int]] = set()
        for t in read_trajectories(paths.trajectories):
            if t.key in seen:
                continue
            seen.add(t.key)
            groups[(t.task_id, int(t.extra.get("round", 0)))].append(t)
    for g in groups.values():
        g.sort(key=lambda t: t.sample)
    return dict(groups)


async def judge_one(
    query: Task,
    round_: int,
    trajectories: Sequence[Trajectory],
    judge: ChatBackend,
    config: DataMindConfig,
    usage: UsageLedger,
) -> ConsistencyVerdict:
    """The verdict on one group: the rule when it decides, else the judge (errors become an inconsistent verdict)."""
    answers = [t.final_answer for t in trajectories]
    samples = [t.sample for t in trajectories]
    rule = rule_check(answers, config.tolerance, question=query.question or None)
    base: dict[str, Any] = {"task_id": query.id, "round": round_, "samples": samples, "answers": answers}
    if rule.consistent is False:
        return ConsistencyVerdict(**base, consistent=False, critique=rule.reason, best=None, method="rule")
    if rule.consistent and (config.rule_best or len(trajectories) == 1 or _identical(trajectories)):
        best = (
            rule_best(trajectories) if config.rule_best else min(trajectories, key=lambda t: t.sample)
        ).sample
        return ConsistencyVerdict(
            **base, consistent=True, critique=rule.reason, best=best, method="rule", chosen_by="rule"
        )
    if rule.consistent:
        base["rule"] = rule.reason
    messages = judge_messages(query.question, trajectories, config.context_chars)
    try:
        j = await complete_counted(
            usage, "judge", judge, messages, ConsistencyJudgement, mode=config.structured, temperature=0.0,
            max_tokens=config.judge_max_tokens,
        )  # fmt: skip
    except StructuredOutputError as exc:
        usage.add("judge", requests=0, failed=1, check=False)
        return ConsistencyVerdict(
            **base, consistent=False, critique="", best=None, method="llm",
            error=f"judge reply invalid after one repair: {exc}",
        )  # fmt: skip
    best, chosen_by = None, None
    if j.consistent:
        if j.best is not None and 1 <= j.best <= len(trajectories):
            best, chosen_by = trajectories[j.best - 1].sample, "judge"
        else:
            best, chosen_by = rule_best(trajectories).sample, "rule"
    return ConsistencyVerdict(
        **base, consistent=j.consistent, critique=j.critique, best=best, method="llm", chosen_by=chosen_by
    )


def _identical(trajectories: Sequence[Trajectory]) -> bool:
    """Every trajectory has the same turns (thoughts, code, observations) and final answer: nothing to choose."""

    def steps(t: Trajectory) -> list[tuple[str, str | None]]:
        return [(x.raw, x.observation.text if x.observation else None) for x in t.turns]

    first = trajectories[0]
    return all(t.final_answer == first.final_answer and steps(t) == steps(first) for t in trajectories[1:])


async def judge_round(
    queries: Sequence[Task],
    judge: ChatBackend,
    paths: Paths,
    config: DataMindConfig,
    round_: int,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> UsageLedger:
    """Judge every query whose N attempts of round ``round_`` are all in; append to ``verdicts.jsonl``.

    A query already judged for this round is skipped (no request); one with fewer than N trajectories, or
    with an episode that failed outside the teacher's answer (:data:`~.sampling.FAILED_STOPS`, sampled again
    by the next run of the sample stage), is left for a later run. A failed judge request (server down) is
    logged and left for a rerun.
    """
    usage = paths.usage_ledger("judge")
    done = read_verdicts(paths)
    groups = trajectories_by_round(paths)
    todo = []
    for q in queries:
        group = groups.get((q.id, round_), [])[: config.n_samples]
        if (q.id, round_) in done or len(group) < config.n_samples:
            continue
        if any(t.stop_reason in FAILED_STOPS for t in group):
            log.warning("judge %s round %d: left for a rerun (an episode failed; sample again)", q.id, round_)
            continue
        todo.append((q, group))
    sem = asyncio.Semaphore(config.concurrency)
    if on_progress:
        on_progress(0, len(todo))

    async def one(q: Task, trajs: list[Trajectory]) -> ConsistencyVerdict | None:
        async with sem:
            try:
                return await judge_one(q, round_, trajs[: config.n_samples], judge, config, usage)
            except LLMError as exc:
                usage.add("judge", requests=0, failed=1, check=False)
                log.warning("judge %s round %d failed: %s", q.id, round_, exc)
                return None

    finished = 0
    with usage, JsonlAppender(paths.verdicts) as sink:
        for fut in asyncio.as_completed([one(q, t) for q, t in todo]):
            v = await fut
            finished += 1
            if v is not None:
                sink.write(v)
            if on_progress:
                on_progress(finished, len(todo))
    return usage

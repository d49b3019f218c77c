r"""DataMind's trajectory reward: format, answer and length, combined into one scalar (DataMind §4).

The three components and their combination are taken from DataMind §4, "Reward design":

* ``r_format`` ∈ {0, 1}: 1 when the whole trajectory follows the ReAct format (``<think>``, ``<code>``
  answered by ``<interpreter>``, one final ``<answer>``). Checked by the strict validator
  :func:`datadojo.protocol.validate_trajectory`, whose problem list is kept for inspection.
* ``r_answer`` ∈ {0, 1}: the final answer is correct. DataMind asks GPT-4o-mini (numbers within 3%,
  semantic equivalence, completeness); here the checker is pluggable: an LLM judge
  (:class:`~datadojo.compare.judge.LLMJudge`, used by :meth:`DataMindReward.ascore`), the official
  scorer of the task's benchmark, or the tolerant matcher (:func:`~datadojo.compare.matchers.match_task`).
* ``r_length`` ∈ [0.5, 1]: a length penalty against answers padded to hit the right string,

  .. math:: r_{length}(l) = 1 \text{ if } l \le l_{min};\;
            \frac{l_{max}-l}{l_{max}-l_{min}}\cdot 0.5 + 0.5 \text{ if } l_{min} < l \le l_{max};\;
            0.5 \text{ if } l > l_{max}

  with :math:`l` the token length of the final answer, :math:`l_{min}=256`, :math:`l_{max}=1024`.

* the total is :math:`R = r_{length}\cdot r_{answer}` when the answer is right, 0 when it is wrong but
  well formed, and −0.1 when it is wrong and malformed (a correct answer is rewarded whatever its
  format, as in the paper).

Tokens are counted with a pluggable counter (:func:`token_counter`): the policy model's own tokenizer
when given (a transformers tokenizer object, a local tokenizer path, or any ``str -> int`` callable);
otherwise the documented approximation :func:`datadojo.llm.base.approx_token_count` (about one token
per short word, one per digit, one per one or two symbols, close to Qwen's BPE for answers).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from datadojo.compare.matchers import match_task
from datadojo.llm.base import approx_token_count
from datadojo.protocol import validate_trajectory
from datadojo.types import Task, Trajectory

if TYPE_CHECKING:
    from datadojo.compare.judge import LLMJudge

__all__ = [
    "L_MAX",
    "L_MIN",
    "MALFORMED_PENALTY",
    "AnswerCheck",
    "DataMindReward",
    "RewardBreakdown",
    "composite_reward",
    "default_answer_check",
    "format_reward",
    "length_reward",
    "token_counter",
]

#: DataMind §4: answers up to ``L_MIN`` tokens get the full length reward …
L_MIN = 256
#: … decaying linearly to 0.5 at ``L_MAX`` tokens and staying 0.5 beyond.
L_MAX = 1024
#: DataMind §4: reward of a wrong answer in a malformed trajectory.
MALFORMED_PENALTY = -0.1

TokenCounter = Callable[[str], int]


def length_reward(n_tokens: int, l_min: int = L_MIN, l_max: int = L_MAX) -> float:
    """DataMind's r_length for an answer of ``n_tokens`` tokens (module docstring, §4)."""
    if n_tokens < 0:
        raise ValueError(f"n_tokens must be >= 0, got {n_tokens}")
    if not 0 <= l_min < l_max:
        raise ValueError(f"need 0 <= l_min < l_max, got l_min={l_min}, l_max={l_max}")
    if n_tokens <= l_min:
        return 1.0
    if n_tokens <= l_max:
        return (l_max - n_tokens) / (l_max - l_min) * 0.5 + 0.5
    return 0.5


def format_reward(trajectory: Trajectory, dialect: str | None = None) -> tuple[float, list[str]]:
    """DataMind's r_format: 1.0 when the strict validator finds no problem, else 0.0 (and the problems)."""
    problems = validate_trajectory(trajectory, dialect)
    return (0.0 if problems else 1.0), problems


def composite_reward(
    r_format: float, r_answer: float, r_length: float, *, malformed_penalty: float = MALFORMED_PENALTY
) -> float:
    """DataMind's R (§4): r_length·r_answer if correct, 0 if wrong but well formed, −0.1 if wrong and malformed."""
    for name, v in (("r_format", r_format), ("r_answer", r_answer)):
        if v not in (0, 1):
            raise ValueError(f"{name} must be 0 or 1, got {v!r}")
    if not 0 <= r_length <= 1:
        raise ValueError(f"r_length must be in [0, 1], got {r_length!r}")
    if r_answer == 1:
        return r_length * r_answer
    return 0.0 if r_format == 1 else malformed_penalty


def token_counter(tokenizer: Any = None) -> TokenCounter:
    """A ``str -> int`` token counter from a tokenizer spec.

    ``None`` → :func:`~datadojo.llm.base.approx_token_count`; a callable ``str -> int`` → itself; an
    object with ``encode`` (a transformers tokenizer) → the length of its encoding without special
    tokens; a string or path → a transformers tokenizer loaded from that *local* path (never
    downloaded; needs ``pip install 'datadojo[hf]'``).
    """
    if tokenizer is None:
        return approx_token_count
    if isinstance(tokenizer, str | os.PathLike):
        try:
            from transformers import AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                f"tokenizer={tokenizer!s}: needs transformers (pip install 'datadojo[hf]')"
            ) from exc
        tokenizer = AutoTokenizer.from_pretrained(os.fspath(tokenizer), local_files_only=True)
    if hasattr(tokenizer, "encode"):
        tok = tokenizer

        def count(text: str) -> int:
            return len(tok.encode(text, add_special_tokens=False))

        return count
    if callable(tokenizer):
        return tokenizer
    raise TypeError(
        f"tokenizer must be None, a callable, a tokenizer or a path, got {type(tokenizer).__name__}"
    )


@dataclass(frozen=True)
class AnswerCheck:
    """The verdict of an answer checker: ``correct`` and why (the judge's reason, or the rule's).

    ``decided=False``: the rule was not certain (:attr:`datadojo.compare.matchers.MatchResult.decided`);
    with ``rule_first`` a judge decides such answers, without a judge the guess stands and is counted.
    """

    correct: bool
    reason: str
    source: str
    decided: bool = True


AnswerChecker = Callable[[Task, str | None], AnswerCheck]


def default_answer_check(task: Task, prediction: str | None) -> AnswerCheck:
    """The deterministic r_answer: the official scorer of the task's benchmark, else the tolerant matcher.

    A task whose ``source`` names a registered benchmark (``dabench``, ``spider``, …) is scored by that
    benchmark's own rule, so RL on benchmark-style tasks optimizes the metric reported at evaluation.
    """
    from datadojo.bench.registry import benchmark_names, get_benchmark  # bench imports reward: import late

    if task.source and task.source in benchmark_names():
        item = get_benchmark(task.source).score(task, prediction)
        return AnswerCheck(item.correct, item.reason, f"bench:{task.source}")
    if prediction is None or not prediction.strip():
        return AnswerCheck(False, "no final answer", "matcher")
    res = match_task(task, prediction)
    return AnswerCheck(res.correct, res.reason, f"matcher:{res.kind}", res.decided)


@dataclass(frozen=True)
class RewardBreakdown:
    """All parts of one trajectory's reward, with what decided each."""

    format: float
    answer: float
    length: float
    total: float
    answer_tokens: int
    format_problems: tuple[str, ...]
    answer_reason: str
    answer_source: str
    answer_decided: bool = True

    def as_rewards(self) -> dict[str, float]:
        """The numbers for :attr:`Trajectory.rewards` (``format``, ``answer``, ``length``, ``total``)."""
        return {"format": self.format, "answer": self.answer, "length": self.length, "total": self.total}


class DataMindReward:
    """Scores trajectories with DataMind's reward (module docstring).

    ``checker`` decides r_answer synchronously (default :func:`default_answer_check`); with a ``judge``,
    :meth:`ascore` asks the LLM judge instead, as DataMind does; with ``rule_first`` (``rule+judge``) only
    for answers the checker is not certain about (a rule's guess never overrides the judge). ``tokenizer`` is anything
    :func:`token_counter` accepts. ``l_min``, ``l_max`` and ``malformed_penalty`` default to the paper's.
    """

    def __init__(
        self,
        *,
        checker: AnswerChecker | None = None,
        judge: LLMJudge | None = None,
        tokenizer: Any = None,
        l_min: int = L_MIN,
        l_max: int = L_MAX,
        malformed_penalty: float = MALFORMED_PENALTY,
        rule_first: bool = False,
    ) -> None:
        length_reward(0, l_min, l_max)  # validates the bounds once
        self.checker = checker or default_answer_check
        self.judge = judge
        self.count_tokens = token_counter(tokenizer)
        self.l_min, self.l_max = l_min, l_max
        self.malformed_penalty = malformed_penalty
        self.rule_first = rule_first

    def combine(self, trajectory: Trajectory, check: AnswerCheck) -> RewardBreakdown:
        """The three parts and R of ``trajectory`` with r_answer decided by ``check``."""
        r_format, problems = format_reward(trajectory)
        answer = trajectory.final_answer or ""
        n_tokens = self.count_tokens(answer) if answer else 0
        r_length = length_reward(n_tokens, self.l_min, self.l_max)
        r_answer = 1.0 if check.correct else 0.0
        total = composite_reward(r_format, r_answer, r_length, malformed_penalty=self.malformed_penalty)
        return RewardBreakdown(
            format=r_format,
            answer=r_answer,
            length=r_length,
            total=total,
            answer_tokens=n_tokens,
            format_problems=tuple(problems),
            answer_reason=check.reason,
            answer_source=check.source,
            answer_decided=check.decided,
        )

    def _check_task(self, trajectory: Trajectory, task: Task) -> None:
        if trajectory.task_id != task.id:
            raise ValueError(f"trajectory of task {trajectory.task_id!r} scored against task {task.id!r}")

    def score(self, trajectory: Trajectory, task: Task) -> RewardBreakdown:
        """The reward of ``trajectory`` for ``task`` with the synchronous checker."""
        self._check_task(trajectory, task)
        return self.combine(trajectory, self.checker(task, trajectory.final_answer))

    async def ascore(self, trajectory: Trajectory, task: Task) -> RewardBreakdown:
        """The reward with the LLM judge deciding r_answer (the checker when no judge was given)."""
        self._check_task(trajectory, task)
        return self.combine(trajectory, await self.acheck(task, trajectory.final_answer))

    async def acheck(self, task: Task, prediction: str | None) -> AnswerCheck:
        """r_answer's verdict on ``prediction``: the judge's (with ``rule_first`` only where the checker is not
        certain), else the checker's."""
        if self.judge is None:
            return self.checker(task, prediction)
        if self.rule_first:  # rule+judge: the rule decides what it is certain about, the judge the rest
            check = self.checker(task, prediction)
            if check.decided:
                return check
        if task.answer is None:
            raise ValueError(f"task {task.id!r}: no reference answer for the judge")
        reference = (
            task.answer
            if isinstance(task.answer, str)
            else json.dumps(task.answer, ensure_ascii=False, default=str)
        )
        verdict = await self.judge.judge(task.question, reference, prediction)
        return AnswerCheck(verdict.score == 1, verdict.reason, f"judge:{self.judge.model}")

    @staticmethod
    def apply(trajectory: Trajectory, breakdown: RewardBreakdown) -> Trajectory:
        """A copy of ``trajectory`` with the breakdown merged into its ``rewards``."""
        return trajectory.model_copy(update={"rewards": {**trajectory.rewards, **breakdown.as_rewards()}})

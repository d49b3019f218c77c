"""A judge double that disagrees with the rule, for the loopback server (:mod:`datadojo.testing.server`).

Why: a combination of rule and judge (``qa_scoring=rule+judge``, ``DataMindReward(rule_first=True)``, the
DataMind consistency stage) is only tested when the two disagree — with a judge that agrees, a rule's
verdict overriding the judge's is invisible. :class:`DisagreeingJudge` is a script for
:class:`~datadojo.testing.server.ScriptedLLMServer`: it reads the reference and the candidate out of the
judge prompt (the DataMind and SciDataSailor rubrics of :mod:`datadojo.compare.judge_prompts`), asks
``rule(candidate, reference)`` and answers the opposite score. With ``careful=True`` it answers the
careful grader's verdict of :data:`datadojo.testing.answers.ANSWER_PAIRS` for pairs in that table (a judge
that is right where a rule is wrong). A self-consistency request (DataMind §3.2) is answered with
``consistent`` (default ``False``: the judge rejects what the rule would have accepted). Every request
it answered is kept in :attr:`DisagreeingJudge.seen` as ``(kind, reference, candidate)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from datadojo.testing.answers import careful_verdict

__all__ = ["DisagreeingJudge"]

_PAIR = re.compile(
    r"(?:Ground-truth answer|Reference answer): (?P<ref>.*?)\n\n?Candidate answer: (?P<cand>.*?)\n(?:\n|Return|Reply|Respond|Output)",
    re.DOTALL,
)


class DisagreeingJudge:
    """A :class:`~datadojo.testing.server.ScriptedLLMServer` script (module docstring)."""

    def __init__(
        self,
        rule: Callable[[str, str], bool] | None = None,
        *,
        careful: bool = False,
        consistent: bool = False,
    ) -> None:
        if rule is None and not careful:
            raise ValueError("give the rule to disagree with, or careful=True")
        self.rule = rule
        self.careful = careful
        self.consistent = consistent
        self.seen: list[tuple[str, str, str]] = []

    def __call__(self, request: dict[str, Any]) -> str:
        messages = request.get("messages") or []
        user = str(messages[-1].get("content", "")) if messages else ""
        system = str(messages[0].get("content", "")) if messages else ""
        if "several independent attempts" in system or '"consistent"' in user:
            self.seen.append(("consistency", "", ""))
            return json.dumps(
                {
                    "critique": "the double rejects what a rule may accept",
                    "consistent": self.consistent,
                    "best": 1,
                }
                if self.consistent
                else {
                    "critique": "the double rejects what a rule may accept",
                    "consistent": False,
                    "best": None,
                }
            )
        m = _PAIR.search(user)
        if m is None:
            raise ValueError(f"DisagreeingJudge: not a judge prompt: {user[:200]!r}")
        ref, cand = m.group("ref").strip(), m.group("cand").strip()
        self.seen.append(("verdict", ref, cand))
        verdict = careful_verdict(cand, ref) if self.careful else None
        if verdict is None:
            if self.rule is None:
                raise ValueError(f"DisagreeingJudge: {cand!r} vs {ref!r} is not in the answer table")
            verdict = not self.rule(cand, ref)
        return json.dumps(
            {"score": int(verdict), "reason": "the careful grader" if self.careful else "disagrees"}
        )

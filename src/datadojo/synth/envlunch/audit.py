"""Hack-resistance audit: does printing o* as constants pay? (EnvLunch §3, "Counterfactual
Multi-Environment Verification".)

The paper: "this setup is vulnerable to a simple form of reward hacking, where the agent could simply
print the target observation result rather than reconstructing the trajectory", and without the copies
"all of its recovered queries become hardcoded constants". For every task the audit writes the program
that hard-codes o* — ``VALUES (...), (...)`` for SQL, ``result = <value>`` / ``pd.DataFrame(...)`` for
pandas — scores it like any submission, and reports

* ``pass_with_copies``: the fraction of tasks where it reaches full agreement (min_k m = 1) in the
  counterfactual copies — must be 0 (the §3 filter keeps only tasks whose result changes in some copy);
* ``pass_without_copies``: the same, checked in the original environment against o* — should be 1: this
  is the reward a hard-coding agent would collect if the copies were switched off.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from datadojo.reward.envlunch import EnvLunchTaskInfo, ScoreRecord, score_programs
from datadojo.reward.programs import ProgramExecutor
from datadojo.synth.envlunch.sql_actions import sql_literal

__all__ = ["AuditReport", "constant_program", "run_audit"]


def constant_program(info: EnvLunchTaskInfo) -> str:
    """A program that ignores the data and returns o* as literals (o* as shown to the agent)."""
    display: dict[str, Any] = info.task.answer
    cols, rows = display["columns"], display["rows"]
    if info.backend == "sql":
        if len(rows) == 1:
            return "SELECT " + ", ".join(f"{sql_literal(v)} AS c{j}" for j, v in enumerate(rows[0]))
        return "VALUES " + ", ".join("(" + ", ".join(sql_literal(v) for v in r) + ")" for r in rows)
    if len(rows) == 1 and len(cols) == 1:
        return f"result = {rows[0][0]!r}"
    return f"import pandas as pd\nresult = pd.DataFrame({rows!r}, columns={cols!r})"


@dataclass
class AuditReport:
    """Pass rates of the constant-printing answer with and without the copies, overall and by group."""

    with_copies: list[ScoreRecord]
    without_copies: list[ScoreRecord]

    @property
    def n(self) -> int:
        return len(self.with_copies)

    @staticmethod
    def _rate(records: Sequence[ScoreRecord]) -> float:
        return sum(r.solved for r in records) / len(records) if records else 0.0

    @property
    def pass_with_copies(self) -> float:
        return self._rate(self.with_copies)

    @property
    def pass_without_copies(self) -> float:
        return self._rate(self.without_copies)

    def by_backend(self) -> dict[str, tuple[int, float, float]]:
        """backend → (tasks, pass rate with copies, pass rate without copies)."""
        out = {}
        for b in sorted(Counter(r.backend for r in self.with_copies)):
            w = [r for r in self.with_copies if r.backend == b]
            wo = [r for r in self.without_copies if r.backend == b]
            out[b] = (len(w), self._rate(w), self._rate(wo))
        return out

    def leaks(self) -> list[str]:
        """Tasks where the constant answer passes despite the copies (there should be none)."""
        return [r.task_id for r in self.with_copies if r.solved]


def run_audit(infos: Sequence[EnvLunchTaskInfo], executor: ProgramExecutor) -> AuditReport:
    """Score the constant-printing program of every task with the copies on and off."""
    items = [(info, constant_program(info), 0, 0) for info in infos]
    return AuditReport(
        score_programs(items, executor, copies=True), score_programs(items, executor, copies=False)
    )

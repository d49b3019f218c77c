"""A trajectory's prediction, as a benchmark's official rule scores it (moved here from the eval harness).

Why here: the reward registry's benchmark rule and ``datadojo eval`` must read the same prediction from
the same trajectory, or the parity table differs; the reward package sits below ``eval``.

**Predicted SQL** (Spider, BIRD: tasks with ``answer_kind == "sql"``; Spider 2.0-lite: ``"sql_result"``,
whose reference is a result table rather than a query): an agent may state its query in
the final answer (the benchmark's answer format asks for it) or may only have run it. The rule, for an
episode that ended with an answer: the SQL in the final answer when the answer holds one (a fenced ``sql``
block, or text that starts with ``SELECT``/``WITH``); otherwise the last SQL action whose execution
succeeded (status ``ok``); otherwise the final answer as it is (which then fails to execute and scores 0
with the database's error as the reason). An episode without a final answer submitted nothing and has no
prediction, whatever it ran. SQL the agent ran from Python (``sqlite3``, ``pandas.read_sql``) is not
looked at.
"""

from __future__ import annotations

import re

from datadojo.compare.text import extract_sql
from datadojo.types import Task, Trajectory

__all__ = ["SQL_ANSWER_KINDS", "predicted_answer"]

#: Answer kinds whose prediction is a SQL query (scored by running it): the rule below picks the query.
SQL_ANSWER_KINDS: frozenset[str] = frozenset({"sql", "sql_result"})

_SQL_START = re.compile(
    r"^\s*(?:(?:--[^\n]*\n|/\*.*?\*/)\s*)*\(?\s*(?:select|with)\b", re.IGNORECASE | re.DOTALL
)
_SQL_FENCE = re.compile(r"```[ \t]*(?:sql|sqlite)\b", re.IGNORECASE)


def _looks_like_sql(text: str) -> bool:
    return bool(_SQL_FENCE.search(text)) or bool(_SQL_START.match(extract_sql(text)))


def predicted_answer(task: Task, trajectory: Trajectory) -> tuple[str | None, str]:
    """A trajectory's prediction for scoring, and where it came from (module docstring).

    Returns ``(text, source)`` with ``source`` one of ``answer`` (the final answer), ``sql_action`` (the
    last SQL action that ran without an error; SQL tasks only) or ``none`` (the episode ended without an
    answer, so nothing was submitted, whatever it ran).
    """
    answer = trajectory.final_answer
    if answer is None:  # never answered (turn budget, errors): nothing was submitted
        return None, "none"
    if task.answer_kind not in SQL_ANSWER_KINDS or _looks_like_sql(answer):
        return answer, "answer"
    for turn in reversed(trajectory.turns):
        obs = turn.observation
        if turn.action.kind == "sql" and obs is not None and obs.status == "ok" and turn.action.text.strip():
            return turn.action.text, "sql_action"
    return answer, "answer"

"""The DataMind pipeline's fake teacher and judge (loopback scripts), and a sandbox that answers ``42``.

The teacher is keyed on the JSON-schema name each structured request carries (``QueryBatch``: query
synthesis, ``ComposedQuery``: composition; the judge answers ``ConsistencyJudgement``), so a prompt rewrite
does not silently route a request to the wrong reply; requests without a schema are agent turns.

Each synthesized question carries a scenario tag (``[s:NAME]``) chosen by its category; the fake teacher
answers agent episodes by scenario and by sample number (recovered from the per-turn seed the runner sends:
``seed = sample * 1009 + turn`` with ``DataMindConfig.seed = 0``).
"""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any

#: Category → scenario of the question the fake teacher writes for it (others: ``consistent``).
SCENARIOS = {
    "Counting": "rescued",
    "Comparison": "forever",
    "Ranking": "garbled",
    "Arithmetic Calculation": "wording",
    "Correlation Analysis": "toolong",
}
COLUMNS = ["order_date", "region", "units", "price"]


def write_csv(path: Path, rows: int = 30) -> Path:
    lines = [",".join(COLUMNS)]
    for i in range(rows):
        lines.append(
            f"2024-01-{i % 28 + 1:02d},{['North', 'South', 'East'][i % 3]},{i * 3 % 17 + 1},{1.5 + i % 5}"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _system(req: dict[str, Any]) -> str:
    return req["messages"][0]["content"]


def _user(req: dict[str, Any]) -> str:
    return next(m["content"] for m in req["messages"] if m["role"] == "user")


def query_reply(req: dict[str, Any]) -> str:
    user = _user(req)
    category = re.search(r"## Task category: (.+)", user).group(1).strip()
    scenario = SCENARIOS.get(category, "consistent")
    if category == "Distribution Analysis" and not any(m["role"] == "assistant" for m in req["messages"]):
        return "Sure! Here are the questions: {queries: [oops"  # malformed: repaired by the next request
    queries = [
        {
            "question": f"[s:{scenario}] What is the {category.lower()} of units by region?",
            "columns": ["units", "region"],
        }
    ]
    if category == "Fact Checking":
        queries.append(
            {"question": "[s:consistent] Is the total of `revenue` above 100?", "columns": ["revenue"]}
        )
    if category == "Descriptive Analysis":  # the same text as the Aggregation question: a duplicate
        queries = [
            {"question": "[s:consistent] What is the aggregation of units by region?", "columns": ["units"]}
        ]
    return json.dumps({"queries": queries})


def compose_reply(req: dict[str, Any]) -> str:
    user = _user(req)
    category = re.search(r"## Category of the new question: (.+)", user).group(1).strip()
    prev = re.search(r"## Question to build on[^\n]*\n(.+)", user).group(1).strip()
    return json.dumps(
        {
            "question": f"[s:consistent] Taking the answer to ({prev[:60]}), what is its {category.lower()}?",
            "columns": ["units"],
            "builds_on": "uses the previous answer as a filter",
        }
    )


def agent_reply(req: dict[str, Any]) -> str:
    question = _user(req)
    scenario = re.search(r"\[s:(\w+)\]", question).group(1)
    if not any(m["role"] == "assistant" for m in req["messages"]):
        return "<think>Look at the data first.</think><code>print(42)</code>"
    sample = int(req.get("seed") or 0) // 1009
    reflected = "## Feedback on earlier attempts" in _system(req)
    answer = {
        "consistent": "42",
        "wording": ["The total is 42 units", "42 units", "It is 42 units."][sample % 3],
        "rescued": "25" if reflected else str(10 * (sample + 1)),
        "forever": str(100 * (sample + 1)),
        "garbled": "The cafÃ© sold 42",
        "toolong": " ".join(["word"] * 1100),
    }[scenario]
    return f"<think>The output gives the answer.</think><answer>{answer}</answer>"


def schema_name(req: dict[str, Any]) -> str | None:
    """The ``response_format`` JSON-schema name of a structured request (``None``: an agent turn or a
    request in structured mode ``off``/``json_object``)."""
    rf = req.get("response_format") or {}
    return rf["json_schema"]["name"] if rf.get("type") == "json_schema" else None


#: The teacher's replies by schema name; the prompt's first words for modes that send no schema.
TEACHER_REPLIES = {"QueryBatch": "query", "ComposedQuery": "compose"}


def teacher(req: dict[str, Any]) -> Any:
    kind = TEACHER_REPLIES.get(schema_name(req) or "")
    system = _system(req)
    if kind == "query" or (kind is None and system.startswith("You write data-analysis questions")):
        return query_reply(req)
    if kind == "compose" or (kind is None and system.startswith("You compose harder")):
        return compose_reply(req)
    return agent_reply(req)


def judge(req: dict[str, Any]) -> Any:
    user = _user(req)
    if "[s:wording]" in user:
        return json.dumps({"critique": "All three say 42 units.", "consistent": True, "best": 2})
    return json.dumps(
        {
            "critique": "The attempts disagree; check the grouping by region.",
            "consistent": False,
            "best": None,
        }
    )


class FakeSandbox:
    """Answers every code cell with ``42`` (the pipeline tests exercise synthesis, not execution)."""

    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> Any:
        from datadojo.sandbox.result import ExecResult

        return ExecResult(
            output="42\n", status="ok", error=False, timed_out=False, killed=False, truncated=False,
            isolation="test", duration_s=0.0, installed=[],
        )  # fmt: skip


@contextlib.asynccontextmanager
async def fake_sandboxes(task: Any):
    yield FakeSandbox()

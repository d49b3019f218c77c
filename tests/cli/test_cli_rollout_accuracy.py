"""``datadojo rollout`` shows accuracy when its tasks carry answers (the rule of ``score tasks``).

Before: the summary showed turns and stop reasons only, although the tasks carried answers; the user had
to run ``score tasks`` separately to learn whether the agent was right. Expected counts are by hand from
the matcher's documented rules (numbers within 3 %, normalized text).
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.testing.server import ScriptedLLMServer

TASKS = [
    {"id": "rows", "question": "How many rows?", "answer": 120, "answer_kind": "number"},
    {"id": "top", "question": "Which region sells most?", "answer": "North"},
    {"id": "share", "question": "Share of returns?", "answer": "12.5%"},
    {"id": "range", "question": "How many units at most?", "answer": 120},
    {"id": "rock", "question": "Which rock?", "answer": "Gibraltar", "answer_kind": "number"},  # bad reference
    {"id": "free", "question": "Describe the data."},  # no answer: not scored
    {"id": "silent", "question": "Is it seasonal?", "answer": "yes"},
]  # fmt: skip
#: What a model writes, per question: a sentence, other case, a wrong number, two numbers, no answer at all.
REPLIES = {
    "How many rows?": "<answer>There are 121 rows in the file.</answer>",  # within 3 %: right, decided
    "Which region sells most?": "<answer>north</answer>",  # right
    "Share of returns?": "<answer>about 20%</answer>",  # wrong
    "How many units at most?": "<answer>between 100 and 120 units</answer>",  # commits to no value
    "Which rock?": "<answer>Gibraltar</answer>",
    "Describe the data.": "<answer>sales by region</answer>",
    "Is it seasonal?": "I am not sure how to answer.",  # no tags, one turn: no final answer
}


def _reply(req: dict) -> str:
    question = next(q for q in REPLIES if q in req["messages"][1]["content"])
    return REPLIES[question]


def test_rollout_prints_accuracy_against_the_tasks_answers(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    out = tmp_path / "run"
    with ScriptedLLMServer(_reply, strict=False) as srv:
        res = CliRunner().invoke(
            app,
            ["rollout", str(tasks), "--model", f"openai:fake@{srv.base_url}", "--out", str(out),
             "--max-turns", "1"],
            env={"COLUMNS": "400"},
        )  # fmt: skip
    assert res.exit_code == 0, res.output
    answers = json.loads((out / "summary.json").read_text())["answers"]
    # scored: rows, top, share, range, silent (5); right: rows (121 vs 120 within 3 %) and top; range is a
    # range (wrong, and undecided: it commits to no value); answered: 4 (silent submitted nothing)
    assert {k: answers[k] for k in ("trajectories", "correct", "answered", "tasks", "unscorable")} == {
        "trajectories": 5, "correct": 2, "answered": 4, "tasks": 5, "unscorable": ["rock"],
    }  # fmt: skip
    assert answers["accuracy"] == 0.4 and answers["undecided"] == 0.25
    line = next(x for x in res.stderr.splitlines() if x.startswith("accuracy"))
    assert (
        line.startswith("accuracy 40.0% (2 of 5 trajectories") and "undecided 25.0% of the 4 answered" in line
    )
    assert "1 task(s) not scored" in line


def test_rollout_without_answers_prints_no_accuracy(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "free", "question": "Describe the data."}) + "\n")
    out = tmp_path / "run"
    with ScriptedLLMServer(_reply, strict=False) as srv:
        res = CliRunner().invoke(
            app, ["rollout", str(tasks), "--model", f"openai:fake@{srv.base_url}", "--out", str(out)]
        )
    assert res.exit_code == 0, res.output
    assert "accuracy" not in res.stderr and "answers" not in json.loads((out / "summary.json").read_text())

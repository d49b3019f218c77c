"""The small additions DataMind synthesis makes to shared modules (prompt sections, runner numbering, report)."""

from __future__ import annotations

from pathlib import Path

from datadojo.agent import run_rollouts
from datadojo.env.prompts import build_prompt, load_template
from datadojo.fs import write_text_atomic
from datadojo.jsonl import read_trajectories
from datadojo.llm import load_backend
from datadojo.protocol import get_dialect
from datadojo.runs.html import html_page, html_table
from datadojo.synth.datamind import DataMindConfig, load_taxonomy
from datadojo.synth.datamind.sampling import agent_task
from datadojo.testing.datamind_teacher import agent_reply, fake_sandboxes
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import DataFile, Task


def _prompt(task: Task) -> str:
    d = get_dialect("datamind")
    return build_prompt(task, d, max_turns=10, template=load_template(d), profile_chars=500)[0]["content"]


def test_workflow_and_feedback_become_prompt_sections_only_when_given(csv_file):
    plain = Task(id="a", question="q", files=[DataFile.from_path(csv_file)])
    assert "## Suggested workflow" not in _prompt(plain)  # unchanged for every other caller
    with_k = plain.model_copy(update={"extra": {"workflow": "1. load\n2. count", "feedback": "try again"}})
    text = _prompt(with_k)
    assert text.index("## Suggested workflow\n1. load\n2. count") < text.index(
        "## Feedback on earlier attempts\ntry again"
    )


def test_agent_task_switches_the_workflow_and_keeps_the_answer_form():
    tax = load_taxonomy()
    q = Task(id="a", question="q", category="Correlation Analysis", description="d", extra={"chain": ["x"]})
    on = agent_task(q, tax, DataMindConfig())
    assert on.extra["workflow"] == tax.get("Correlation Analysis").workflow_detailed  # hard: step by step
    assert on.extra["answer_format"] == tax.get("Correlation Analysis").answer_form and on.description is None
    assert "workflow" not in agent_task(q, tax, DataMindConfig(use_workflow=False)).extra
    short = agent_task(q, tax, DataMindConfig(detailed_workflow="never")).extra["workflow"]
    assert short == tax.get("Correlation Analysis").workflow


async def test_runner_first_sample_and_extra(tmp_path, csv_file):
    task = Task(id="t", question="[s:consistent] q", files=[DataFile.from_path(csv_file)])
    out = tmp_path / "t.jsonl"
    with ScriptedLLMServer(agent_reply) as srv:
        b = load_backend(f"openai:x@{srv.base_url}")
        await run_rollouts([task], b, out, n_samples=2, sandboxes=fake_sandboxes)
        await run_rollouts(
            [task], b, out, n_samples=2, first_sample=2, extra={"round": 1}, sandboxes=fake_sandboxes
        )
        await b.aclose()
    got = sorted((t.sample, t.extra.get("round")) for t in read_trajectories(out))
    assert got == [(0, None), (1, None), (2, 1), (3, 1)]


def test_report_page_helpers(tmp_path: Path):
    page = html_page("A <title>", html_table(["k", "n"], [["<b>", 3]]))
    assert page.startswith("<!DOCTYPE html>") and "A &lt;title&gt;" in page and "&lt;b&gt;" in page
    assert '<td class="num">3</td>' in page
    write_text_atomic(tmp_path / "r.html", page)
    assert (tmp_path / "r.html").read_text() == page and not list(tmp_path.glob(".*tmp"))


def test_plain_prompt_removes_exactly_the_guidance_sections(csv_file):
    from datadojo.synth.datamind.sampling import plain_prompt

    base = Task(id="a", question="q", files=[DataFile.from_path(csv_file)])
    d = get_dialect("datamind")
    plain = build_prompt(base, d, max_turns=10, template=load_template(d), profile_chars=500)
    guided = build_prompt(
        base.model_copy(update={"extra": {"workflow": "1. load", "feedback": "attempts disagreed"}}),
        d, max_turns=10, template=load_template(d), profile_chars=500,
    )  # fmt: skip
    assert guided != plain and plain_prompt(guided) == plain and plain_prompt(plain) == plain


def test_json_schema_for_is_cached_but_returns_a_fresh_dict():
    from datadojo.llm.structured import json_schema_for
    from datadojo.synth.datamind.consistency import ConsistencyJudgement

    a = json_schema_for(ConsistencyJudgement)
    assert a["additionalProperties"] is False and set(a["required"]) == {"critique", "consistent", "best"}
    a["properties"].clear()
    assert json_schema_for(ConsistencyJudgement)["properties"]  # the cache is not shared with callers

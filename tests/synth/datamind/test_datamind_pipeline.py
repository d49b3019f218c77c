"""The DataMind pipeline end to end against scripted loopback teacher and judge servers.

Scenarios (see conftest): consistent answers (rule verdict), differently worded answers the judge finds
consistent, inconsistent-then-rescued by reflection, inconsistent forever, garbled and over-long answers
removed by the rule filters, a malformed JSON reply repaired, rejected queries; then a rerun that makes no
request, and the CLI over the finished folder.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.jsonl import iter_jsonl, read_tasks, read_trajectories
from datadojo.llm import load_backend
from datadojo.synth.datamind import DataMindConfig, DataMindRun, run_pipeline
from datadojo.testing.datamind_teacher import fake_sandboxes, judge, teacher
from datadojo.testing.server import ScriptedLLMServer


def _lines(path: Path) -> list[dict]:
    return [r for _, r in iter_jsonl(path)]


CFG = DataMindConfig(chains_per_file=2, min_chain=2, max_chain=3, concurrency=4, near_duplicate=0.95)


async def _run(inputs: list[Path], out: Path, ts: ScriptedLLMServer, js: ScriptedLLMServer) -> dict:
    t = load_backend(f"openai:teacher@{ts.base_url}")
    j = load_backend(f"openai:judge@{js.base_url}")
    try:
        return await run_pipeline(DataMindRun(inputs, out, CFG), t, j, sandboxes=fake_sandboxes)
    finally:
        await t.aclose()
        await j.aclose()


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One finished run (module-scoped: several tests read it)."""
    import asyncio

    from datadojo.testing.datamind_teacher import write_csv

    root = tmp_path_factory.mktemp("dm")
    (root / "data").mkdir()
    write_csv(root / "data" / "orders.csv")
    (root / "data" / "tiny.csv").write_text("a,b\n1,2\n")  # < 20 rows: rejected by the corpus filter
    out = root / "out"
    with ScriptedLLMServer(teacher) as ts, ScriptedLLMServer(judge) as js:
        summary = asyncio.run(_run([root / "data"], out, ts, js))
        requests = (list(ts.requests), list(js.requests))
        again = asyncio.run(_run([root / "data"], out, ts, js))
        rerun_requests = (len(ts.requests) - len(requests[0]), len(js.requests) - len(requests[1]))
    return {"out": out, "summary": summary, "again": again, "requests": requests, "rerun": rerun_requests}


def _by_scenario(out: Path) -> dict[str, str]:
    ids: dict[str, str] = {}
    for t in read_tasks(out / "queries.jsonl", resolve_paths=False):
        if t.difficulty == 1:
            ids[t.question.split("]")[0].removeprefix("[s:")] = ids.get(
                t.question.split("]")[0].removeprefix("[s:"), t.id
            )
    return ids


def test_queries_cover_applicable_categories_with_rejections_logged(finished):
    out, s = finished["out"], finished["summary"]
    tasks = list(read_tasks(out / "queries.jsonl", resolve_paths=False))
    assert len({t.id for t in tasks}) == len(tasks)
    base = [t for t in tasks if t.difficulty == 1]
    # 18 categories apply to the file (it has a date column and numbers); Descriptive Analysis repeats the
    # Aggregation question (duplicate) and Fact Checking's second question names a missing column
    assert len(base) == 17 and "Descriptive Analysis" not in {t.category for t in base}
    assert all(t.extra["chain"] == [t.category] and t.extra["parents"] == [] for t in base)
    assert all(t.description and "order_date" in t.description for t in base)  # the profile d
    rejected = _lines(out / "rejected.jsonl")
    reasons = Counter((r["stage"], r["reason"]) for r in rejected)
    assert reasons[("queries", "duplicate")] == 1 and reasons[("queries", "unknown_column")] == 1
    assert reasons[("files", "too_few_rows")] == 1
    assert s["files"] == {"seen": 2, "accepted": 1, "rejected_by_reason": {"too_few_rows": 1}}


def test_structured_requests_and_the_repaired_reply(finished):
    teacher_reqs, judge_reqs = finished["requests"]
    query_reqs = [r for r in teacher_reqs if r.json["messages"][0]["content"].startswith("You write")]
    assert all(r.json["response_format"]["type"] == "json_schema" for r in query_reqs)
    schema = query_reqs[0].json["response_format"]["json_schema"]["schema"]
    assert "queries" in schema["properties"]
    assert len(query_reqs) == 19  # 18 categories + one repair of the malformed reply
    assert finished["summary"]["usage"]["queries"]["repaired"] == 1
    assert all(r.json["response_format"]["type"] == "json_schema" for r in judge_reqs)
    assert all(r.json["temperature"] == 0 for r in judge_reqs)


def test_composition_chains_record_categories_parents_and_difficulty(finished):
    out = finished["out"]
    tasks = {t.id: t for t in read_tasks(out / "queries.jsonl", resolve_paths=False)}
    composed = [t for t in tasks.values() if t.difficulty != 1]
    assert composed and all(2 <= t.difficulty <= 3 for t in composed)
    for t in composed:
        assert len(t.extra["chain"]) == t.difficulty == len(t.extra["parents"]) + 1
        assert t.extra["chain"][-1] == t.category
        parents = [tasks[p] for p in t.extra["parents"]]
        assert parents[0].difficulty == 1 and [p.category for p in parents] == t.extra["chain"][:-1]
    assert finished["summary"]["composed"]["kept"] == len(composed)


def test_sampling_puts_workflow_in_prompt_and_tags_rounds(finished):
    out = finished["out"]
    trajs = list(read_trajectories(out / "trajectories.jsonl"))
    assert len({t.key for t in trajs}) == len(trajs)
    round0 = [t for t in trajs if t.extra["round"] == 0]
    n_queries = sum(1 for _ in read_tasks(out / "queries.jsonl", resolve_paths=False))
    assert len(round0) == 3 * n_queries and {t.sample for t in round0} == {0, 1, 2}
    assert all("## Suggested workflow" in t.prompt[0]["content"] for t in round0)
    reflected = [t for t in trajs if t.extra["round"] == 1]
    # two queries are inconsistent at round 0 (rescued and forever): N = 3 reflected samples each
    assert len(reflected) == 6 and {t.sample for t in reflected} == {3, 4, 5}
    for t in reflected:
        system = t.prompt[0]["content"]
        assert "## Feedback on earlier attempts" in system and "check the grouping by region" in system
        assert "Final answer:" in system  # the earlier attempts {y_i} (Eq. 3)


def test_verdicts_rule_then_judge_and_reflection_rescue(finished):
    out, s = finished["out"], finished["summary"]
    ids = _by_scenario(out)
    v = {(r["task_id"], r["round"]): r for r in _lines(out / "verdicts.jsonl")}
    assert v[(ids["consistent"], 0)]["method"] == "rule" and v[(ids["consistent"], 0)]["consistent"]
    wording = v[(ids["wording"], 0)]
    assert (
        wording["method"] == "llm" and wording["consistent"] and wording["best"] == 1
    )  # judge said attempt 2
    assert v[(ids["rescued"], 0)]["consistent"] is False and v[(ids["rescued"], 0)]["method"] == "llm"
    assert v[(ids["rescued"], 1)]["consistent"] is True and v[(ids["rescued"], 1)]["method"] == "rule"
    assert not v[(ids["forever"], 0)]["consistent"] and not v[(ids["forever"], 1)]["consistent"]
    r = s["reflection"]
    assert r["inconsistent_round0"] == 2 and r["rescued"] == 1 and r["rescued_ids"] == [ids["rescued"]]
    assert r["rescue_rate"] == 0.5
    # the judge is asked only where the rule cannot decide: wording, rescued, forever (round 0), forever (round 1)
    assert len(finished["requests"][1]) == 4


def test_filters_and_curated_sets(finished):
    out, s = finished["out"], finished["summary"]
    ids = _by_scenario(out)
    rejected = [r for r in _lines(out / "rejected.jsonl") if r["stage"] == "filter"]
    assert {r["task_id"] for r in rejected if r["reason"] == "language"} == {ids["garbled"]}
    assert {r["task_id"] for r in rejected if r["reason"] == "length"} == {ids["toolong"]}
    assert all("mojibake" in r["detail"] for r in rejected if r["reason"] == "language")
    sets = {
        name: _lines(out / "sft" / f"{name}.jsonl")
        for name in ("con-select", "random-select", "non-select", "non-con")
    }
    consistent_kept = {r["task_id"] for r in sets["con-select"]}
    assert ids["rescued"] in consistent_kept and ids["forever"] not in consistent_kept
    assert ids["garbled"] not in consistent_kept and ids["toolong"] not in consistent_kept
    assert len(sets["non-select"]) == 3 * len(consistent_kept)
    assert {r["task_id"] for r in sets["random-select"]} == consistent_kept
    assert ids["forever"] in {r["task_id"] for r in sets["non-con"]}  # no consistency filter
    wording = next(r for r in sets["con-select"] if r["task_id"] == ids["wording"])
    assert wording["sample"] == 1 and wording["round"] == 0
    rescued = next(r for r in sets["con-select"] if r["task_id"] == ids["rescued"])
    assert rescued["round"] == 1 and rescued["sample"] in (3, 4, 5)
    rec = sets["non-select"][0]
    assert [m["train"] for m in rec["messages"][:2]] == [False, False]
    assert any(m["role"] == "assistant" and m["train"] for m in rec["messages"])
    assert any(
        m["role"] == "user" and m["content"].startswith("<interpreter>") and not m["train"]
        for m in rec["messages"]
    )
    trajs = list(read_trajectories(out / "sft" / "non-select.trajectories.jsonl"))
    assert [(t.task_id, t.sample) for t in trajs] == [(r["task_id"], r["sample"]) for r in sets["non-select"]]
    # the SFT prompt is the plain agent prompt: no workflow k, no reflection feedback
    systems = [r["messages"][0]["content"] for recs in sets.values() for r in recs]
    assert systems and not any("## Suggested workflow" in x or "## Feedback on earlier" in x for x in systems)
    assert all(x.startswith("You are a data analyst") and "orders.csv" in x for x in systems)
    assert s["kept"] == {k: len(v) for k, v in sets.items()}
    assert (
        s["filters"]["passed"]["format"]
        >= s["filters"]["passed"]["length"]
        >= s["filters"]["passed"]["language"]
    )


def test_rerun_of_a_finished_pipeline_sends_no_request(finished):
    assert finished["rerun"] == (0, 0)
    a, b = finished["summary"], finished["again"]
    for key in ("queries", "composed", "sampled", "consistency", "reflection", "kept"):
        assert a[key] == b[key]


def test_summary_report_and_cli_curate(finished):
    out = finished["out"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["usage"]["sample"]["roles"]["teacher"]["requests"] > 0
    assert summary["usage"]["judge"]["roles"]["judge"]["requests"] == 4
    html = (out / "report.html").read_text()
    assert "<h2>Funnel</h2>" in html and "rescued by reflection" in html
    result = CliRunner().invoke(app, ["synth", "datamind", "curate", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "DataMind funnel" in result.output and "kept: non-select" in result.output
    # the per-category counts and the requests/tokens per stage and role are tables too, not only JSON
    text = " ".join(result.output.split())
    assert "queries per category" in text and "Time-based Calculation" in text
    judge_use = summary["usage"]["judge"]["roles"]["judge"]
    assert f"judge │ judge │ {judge_use['requests']} │ {judge_use['prompt_tokens']} │" in text
    result = CliRunner().invoke(app, ["synth", "datamind", "curate", "--out", str(out), "--json"])
    assert json.loads(result.output)["kept"] == summary["kept"]


def test_cli_queries_stage_against_a_loopback_teacher(tmp_path, csv_file):
    with ScriptedLLMServer(teacher) as ts:
        args = ["synth", "datamind", "queries", str(csv_file.parent), "--teacher", f"openai:t@{ts.base_url}",
                "--out", str(tmp_path / "o"), "--no-progress", "--concurrency", "4"]  # fmt: skip
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        n = len(ts.requests)
        assert CliRunner().invoke(app, args).exit_code == 0
        assert len(ts.requests) == n  # a finished stage sends nothing
    assert "queries kept (difficulty 1)" in result.output
    bad = CliRunner().invoke(
        app,
        [
            "synth",
            "datamind",
            "queries",
            str(tmp_path / "nope"),
            "--teacher",
            "openai:t@http://127.0.0.1:9/v1",
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert bad.exit_code != 0 and "no such file or folder" in bad.output


def test_cli_stages_on_a_finished_folder_send_nothing(finished, tmp_path):
    out = finished["out"]
    with ScriptedLLMServer(teacher) as ts:
        spec = f"openai:t@{ts.base_url}"
        for args in (
            ["compose", "--teacher", spec, "--chains-per-file", "2", "--max-chain", "3"],
            ["judge", "--judge", spec],
            ["judge", "--judge", spec, "--round", "1"],
        ):
            result = CliRunner().invoke(app, ["synth", "datamind", *args, "--out", str(out), "--no-progress"])
            assert result.exit_code == 0, result.output
        assert ts.requests == []
        empty = CliRunner().invoke(
            app, ["synth", "datamind", "sample", "--teacher", spec, "--out", str(tmp_path / "e")]
        )
        assert empty.exit_code == 2 and "run the queries stage first" in empty.output
        early = CliRunner().invoke(
            app, ["synth", "datamind", "sample", "--teacher", spec, "--out", str(out), "--round", "3"]
        )
        assert early.exit_code == 2 and "needs the verdicts of round 2" in early.output


def test_cli_run_with_a_custom_taxonomy_and_real_sandboxes(tmp_path, csv_file):
    from datadojo.synth.datamind import load_taxonomy

    tax = load_taxonomy().model_dump()
    tax["categories"] = [
        c for c in tax["categories"] if c["name"] in ("Aggregation", "Counting", "Time-based Calculation")
    ]
    tax_file = tmp_path / "tax.json"
    tax_file.write_text(json.dumps(tax))
    out = tmp_path / "run"
    with ScriptedLLMServer(teacher) as ts, ScriptedLLMServer(judge) as js:
        args = ["synth", "datamind", "run", str(csv_file), "--teacher", f"openai:t@{ts.base_url}",
                "--judge", f"openai:j@{js.base_url}", "--out", str(out), "-n", "2", "--rounds", "0",
                "--no-compose", "--concurrency", "2", "--taxonomy", str(tax_file), "--no-progress", "--json"]  # fmt: skip
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.index("{") :])
    assert summary["queries"]["per_category"] == {
        "Aggregation": 1,
        "Counting": 1,
        "Time-based Calculation": 1,
    }
    assert summary["sampled"]["trajectories"] == 6 and summary["reflection"]["rounds"] == 0
    # Counting is the "rescued" scenario: inconsistent at round 0 and no reflection round to rescue it
    assert summary["consistency"]["consistent_round0"] == 2 and summary["reflection"]["rescued"] == 0
    trajs = list(read_trajectories(out / "sft" / "non-select.trajectories.jsonl"))
    assert len(trajs) == 4 and all(t.turns[0].observation.text.strip() == "42" for t in trajs)  # ran for real
    assert not any(
        "## Suggested workflow" in t.prompt[0]["content"] for t in trajs
    )  # k steers the teacher only
    sampled = list(read_trajectories(out / "trajectories.jsonl"))
    assert all("## Suggested workflow" in t.prompt[0]["content"] for t in sampled)


def test_curated_sets_feed_the_sft_export(finished, tmp_path):
    from datadojo.train.export.trl import export_trl

    out = finished["out"]
    report = export_trl(
        read_trajectories(out / "sft" / "con-select.trajectories.jsonl"), tmp_path / "trl.jsonl"
    )
    assert report.written == finished["summary"]["kept"]["con-select"] and report.skipped_void == 0

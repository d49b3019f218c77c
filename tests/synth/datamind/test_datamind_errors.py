"""Failures: a reply invalid even after the repair is recorded, a server failure is retried on the next run."""

from __future__ import annotations

import json
from pathlib import Path

from datadojo.jsonl import iter_jsonl
from datadojo.llm import load_backend
from datadojo.runs import UsageLedger
from datadojo.synth.datamind import DataMindConfig, DataMindRun, load_taxonomy, stage_queries
from datadojo.synth.datamind.consistency import judge_one
from datadojo.testing.datamind_teacher import teacher
from datadojo.testing.server import ScriptedLLMServer, Status
from datadojo.types import Action, Task, Trajectory, Turn

CFG = DataMindConfig(concurrency=1, near_duplicate=0.95)


def _one_category_taxonomy(tmp_path):
    tax = load_taxonomy().model_dump()
    tax["categories"] = [c for c in tax["categories"] if c["name"] in ("Aggregation", "Counting")]
    path = tmp_path / "tax.json"
    path.write_text(json.dumps(tax))
    return str(path)


async def test_invalid_replies_are_recorded_and_server_failures_retried(tmp_path, csv_file):
    cfg = CFG.model_copy(update={"taxonomy": _one_category_taxonomy(tmp_path)})
    state = {"down": True}

    def script(req):
        user = next(m["content"] for m in req["messages"] if m["role"] == "user")
        if "## Task category: Aggregation" in user:
            return "still not JSON"  # both the reply and the repair
        if state["down"]:
            return Status(500, message="overloaded")
        return teacher(req)

    out = tmp_path / "out"
    with ScriptedLLMServer(script) as srv:
        b = load_backend(f"openai:t@{srv.base_url}?max_retries=0")
        await stage_queries(DataMindRun([csv_file], out, cfg), b)
        rejected = [r for _, r in iter_jsonl(out / "rejected.jsonl") if r["stage"] == "queries"]
        assert [(r["category"], r["reason"]) for r in rejected] == [("Aggregation", "invalid_reply")]
        assert not (out / "queries.jsonl").exists() or (out / "queries.jsonl").read_text() == ""
        state["down"] = False
        n = len(srv.requests)
        summary = await stage_queries(DataMindRun([csv_file], out, cfg), b)
        assert len(srv.requests) == n + 1  # only the failed Counting request is sent again
        assert summary["queries"]["per_category"] == {"Counting": 1}
        assert summary["usage"]["queries"]["failed"] == 1
        await b.aclose()


async def test_a_judge_reply_invalid_after_repair_becomes_an_inconsistent_verdict_with_the_error():
    trajs = [
        Trajectory(task_id="q", sample=s, final_answer=a, stop_reason="answer",
                   turns=[Turn(raw=f"<think>t</think><answer>{a}</answer>", action=Action(kind="answer", text=a))])
        for s, a in enumerate(["North", "north region", "South"])
    ]  # fmt: skip
    with ScriptedLLMServer(["no json", "still no json"]) as srv:
        j = load_backend(f"openai:j@{srv.base_url}")
        usage = UsageLedger(Path("unused-usage.jsonl"), "judge")
        v = await judge_one(Task(id="q", question="Which region?"), 0, trajs, j, CFG, usage)
        await j.aclose()
    assert v.consistent is False and v.method == "llm" and "invalid after one repair" in v.error
    assert usage.roles["judge"]["requests"] == 2 and usage.total("failed") == 1


def test_a_bad_verdict_line_names_file_line_and_field(tmp_path):
    import pytest

    from datadojo.jsonl import JsonlError
    from datadojo.synth.datamind.consistency import read_verdicts
    from datadojo.synth.datamind.store import Paths

    paths = Paths(tmp_path)
    good = {"task_id": "q", "round": 0, "consistent": True, "critique": "", "best": 0, "method": "rule",
            "samples": [0], "answers": ["1"]}  # fmt: skip
    paths.verdicts.write_text(json.dumps(good) + "\n" + json.dumps({"task_id": "q", "foo": 1}) + "\n")
    with pytest.raises(JsonlError, match=r"verdicts\.jsonl:2: field '(round|consistent|foo)'"):
        read_verdicts(paths)


def test_stages_run_alone_without_their_input_fail_clearly(tmp_path):
    from typer.testing import CliRunner

    from datadojo.cli.app import app

    spec = "openai:m@http://127.0.0.1:9/v1"  # never contacted: each stage fails before any request
    cases = [
        (["compose", "--teacher", spec], "queries.jsonl: not found; run the queries stage"),
        (["sample", "--teacher", spec], "queries.jsonl: not found; run the queries stage"),
        (["judge", "--judge", spec], "trajectories.jsonl: not found; run the sample stage"),
        (["curate"], "trajectories.jsonl: not found; run the sample stage"),
    ]
    for args, message in cases:
        out = tmp_path / args[0]
        res = CliRunner().invoke(app, ["synth", "datamind", *args, "--out", str(out)])
        assert res.exit_code == 2, (args, res.output)
        assert message in " ".join(res.output.split()), (args, res.output)


async def test_episodes_the_server_failed_are_not_judged_and_are_sampled_again_on_rerun(tmp_path, csv_file):
    from datadojo.jsonl import read_trajectories
    from datadojo.synth.datamind import stage_judge, stage_sample
    from datadojo.synth.datamind.consistency import read_verdicts
    from datadojo.synth.datamind.store import Paths
    from datadojo.testing.datamind_teacher import fake_sandboxes, judge

    cfg = CFG.model_copy(update={"taxonomy": _one_category_taxonomy(tmp_path), "chains_per_file": 0})
    state = {"down": False}

    def script(req):
        agent = not req["messages"][0]["content"].startswith("You write")
        if agent and state["down"] and int(req.get("seed") or 0) // 1009 == 1:
            return Status(500, message="overloaded")  # sample 1 of every query fails at the server
        return teacher(req)

    out = tmp_path / "out"
    with ScriptedLLMServer(script) as srv, ScriptedLLMServer(judge) as jsrv:
        t = load_backend(f"openai:t@{srv.base_url}?max_retries=0")
        j = load_backend(f"openai:j@{jsrv.base_url}")
        await stage_queries(DataMindRun([csv_file], out, cfg), t)
        state["down"] = True
        await stage_sample(DataMindRun([], out, cfg), t, sandboxes=fake_sandboxes)
        first = list(read_trajectories(out / "trajectories.jsonl"))
        failed = {x.key for x in first if x.stop_reason == "llm_error"}
        assert failed and all(s == 1 for _, s in failed)
        await stage_judge(DataMindRun([], out, cfg), j)
        assert read_verdicts(Paths(out)) == {}  # no verdict on a group with a failed episode
        state["down"] = False
        n = len(srv.requests)
        await stage_sample(DataMindRun([], out, cfg), t, sandboxes=fake_sandboxes)
        assert len(srv.requests) > n  # the failed episodes were sampled again
        again = list(read_trajectories(out / "trajectories.jsonl"))
        keys = [x.key for x in again]
        assert len(keys) == len(set(keys)) == len(first)
        assert not [x for x in again if x.stop_reason == "llm_error"]
        summary = await stage_judge(DataMindRun([], out, cfg), j)
        assert summary["consistency"]["judged"] == len({k for k, _ in keys})
        n = len(srv.requests)
        await stage_sample(DataMindRun([], out, cfg), t, sandboxes=fake_sandboxes)
        assert len(srv.requests) == n  # nothing failed any more: a finished stage sends no request
        await t.aclose()
        await j.aclose()
    assert len(jsrv.requests) == 1  # only after the rerun: Counting's answers differ, Aggregation's agree

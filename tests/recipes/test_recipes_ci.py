"""All three recipes end to end on CPU: the loopback teacher (each pipeline's scripted fake), the toy student,
a handful of tasks each. Every link is checked to carry real data to the next: the SFT stage trained on the
curated file, RL started from the SFT checkpoint on tasks that have answers and rolled out in the real
sandbox, eval ran on each of the three checkpoints; then a rerun is all cached and sends no request, and an
edit of one training setting plans exactly the stages below it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from recipe_fakes import judge, teacher, write_recipe
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.jsonl import iter_jsonl, read_tasks, read_trajectories
from datadojo.recipes import load_recipe, run
from datadojo.testing.sailor_teacher import FakeSailor
from datadojo.testing.server import ScriptedLLMServer

CHECKPOINT_OF = {"eval_base": None, "eval_sft": "sft", "eval_rl": "rl"}


def _lines(path: str | Path) -> int:
    return sum(1 for _ in iter_jsonl(Path(path)))


def _run(kind: str, root: Path, student: Path, script: Any) -> dict[str, Any]:
    with ScriptedLLMServer(script) as ts, ScriptedLLMServer(judge) as js:
        path = write_recipe(
            kind, root, student, teacher=f"openai:teacher@{ts.base_url}", judge=f"openai:judge@{js.base_url}"
        )
        first = run(load_recipe(path))
        by_server = {"teacher": len(ts.requests), "judge": len(js.requests)}
        requests = len(ts.requests) + len(js.requests)
        again = run(load_recipe(path))
        rerun_requests = len(ts.requests) + len(js.requests) - requests
    return {
        "path": path,
        "first": first,
        "again": again,
        "requests": requests,
        "by_server": by_server,
        "rerun_requests": rerun_requests,
    }


def _manifests_of(result: Any, variant: str) -> dict[str, dict[str, Any]]:
    return {name: e.manifest for name, e in result.entries[variant].items()}


def _manifests(result: Any) -> dict[str, dict[str, Any]]:
    return _manifests_of(result, "base")


def _check_training_and_eval(m: dict[str, dict[str, Any]], student: Path) -> None:
    cur, sft, tasks, rl = m["curation"], m["sft"], m["rl_tasks"], m["rl"]
    # SFT read the curated file, every line of it
    assert sft["data"] == cur["sft_data"] and sft["skipped"] is False
    assert sft["n_examples"] == sft["data_lines"] == _lines(cur["sft_data"]) == cur["kept"] > 0
    assert sft["steps"] == 2 and Path(sft["model_dir"], "config.json").is_file()
    # the RL tasks carry answers, and RL trained from the SFT checkpoint on exactly them
    rl_tasks = list(read_tasks(tasks["tasks"]))
    assert len(rl_tasks) == tasks["n"] == rl["n_tasks"] > 0 and all(str(t.answer).strip() for t in rl_tasks)
    assert rl["from"] == sft["model_dir"] and rl["tasks"] == tasks["tasks"] and rl["steps"] == 1
    scored = [t for f in rl["rollout_files"] for t in read_trajectories(f)]
    assert len(scored) == 4 and {t.task_id for t in scored} <= {t.id for t in rl_tasks}
    assert all("total" in t.rewards for t in scored) and {t.model for t in scored} == {sft["model_dir"]}
    assert Path(rl["model_dir"], "config.json").is_file() and rl["model_dir"] != sft["model_dir"]
    # eval ran on each checkpoint: base, SFT, RL
    for stage, dep in CHECKPOINT_OF.items():
        want = str(student) if dep is None else m[dep]["model_dir"]
        assert m[stage]["model_dir"] == want
        res = m[stage]["results"]["shop-sql"]
        assert res["n_tasks"] == 2 and res["scored_trajectories"] == 2
        trajs = list(read_trajectories(Path(res["summary"]).with_name("trajectories.jsonl")))
        assert len(trajs) == 2 and {t.model for t in trajs} == {want}


def _check_rerun(out: dict[str, Any], did_nothing: set[str]) -> None:
    assert {i.status for i in out["again"].items} == {"cached"} and out["rerun_requests"] == 0
    report = (out["first"].out / "report.md").read_text()
    # where the toy student cannot learn (recipe_fakes.ALLOW_EMPTY) the stage says it did nothing useful, and
    # the report says so, in red, with the cause — where it used to be a silent table of zeros, status "run"
    assert {st for _, st in out["first"].empty} == did_nothing and out["again"].empty == out["first"].empty
    assert all(f"| base | {st} | did nothing |" in report for st in did_nothing)
    assert ("## ⚠ Stages that did nothing useful" in report) == bool(did_nothing)
    # every stage's in → out counts, and a link to each eval's own report (3 checkpoints x 1 benchmark)
    assert "| in → out |" in report and "trials →" in report
    links = re.findall(r"\]\((stages/eval_\w+/[^)]+/report\.html)\)", report)
    assert len(links) == 3 and all((out["first"].out / link).is_file() for link in links)
    assert all(f"| base | {c} |" in report for c in ("base", "+ SFT", "+ RL"))
    assert (out["first"].out / "report.html").read_text().count("<tr>") >= 3


def test_datamind_recipe(tmp_path: Path, toy_ckpt: Path) -> None:
    out = _run("datamind", tmp_path, toy_ckpt, teacher)
    m = _manifests(out["first"])
    assert m["corpus"]["accepted"] == [str(tmp_path / "data" / "orders.csv")]
    syn = m["synthesis"]
    assert syn["queries"] > 0 and syn["trajectories"] >= 3 * syn["queries"] and syn["verdicts"] > 0
    assert out["requests"] > 0 and m["curation"]["strategy"] == "con-select"
    # the stage's usage ledger counted exactly the requests each server answered
    usage = m["synthesis"]["usage"]
    assert usage["teacher"]["requests"] == out["by_server"]["teacher"] and usage["teacher"]["failed"] == 0
    assert usage["judge"]["requests"] == out["by_server"]["judge"] > 0
    # curated = the judge-consistent queries' trajectories, and their queries are the RL tasks: the consistent
    # ones answer 42, the one reflection rescued 25; the query inconsistent forever is not among them
    assert sorted(t.answer for t in read_tasks(m["rl_tasks"]["tasks"])).count("25") == 1
    assert {t.answer for t in read_tasks(m["rl_tasks"]["tasks"])} == {"42", "25"}
    assert m["rl"]["reward"] == "datamind" and m["rl"]["policy_loss"] == "dapo"
    _check_training_and_eval(m, toy_ckpt)
    _check_rerun(out, set())
    # the command over the finished run: every stage cached (the servers are gone: nothing may call them)
    res = CliRunner().invoke(app, ["recipe", "run", str(out["path"])], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert res.output.count("cached") >= 2 * 9 and "report (html):" in res.output
    # an edit of one SFT setting plans exactly the stages below it
    path = out["path"]
    path.write_text(path.read_text().replace("max_steps = 2", "max_steps = 3", 1))
    plan = {i.stage: i.status for i in run(load_recipe(path), dry_run=True).items}
    assert {s for s, st in plan.items() if st != "cached"} == {"sft", "rl", "eval_sft", "eval_rl"}


def test_envlunch_recipe(tmp_path: Path, toy_ckpt: Path) -> None:
    out = _run("envlunch", tmp_path, toy_ckpt, teacher)
    m = _manifests(out["first"])
    assert m["synthesis"]["n_tasks"] == 8 and Path(m["synthesis"]["funnel"]).is_file()
    # the solver's programs right in every hidden copy are the SFT set; the funnel is on disk
    assert (
        0 < m["curation"]["kept"] == m["curation"]["solved"] <= 8 and Path(m["curation"]["funnel"]).is_file()
    )
    # RL trains on the warm-up tasks themselves (their copies beside the file) with the copy reward
    assert m["rl_tasks"]["tasks"] == m["synthesis"]["tasks"]
    assert m["rl"]["reward"] == "envlunch" and m["rl"]["policy_loss"] == "grpo"
    _check_training_and_eval(m, toy_ckpt)
    _check_rerun(out, {"rl"})  # its warm-up tasks' prompts overflow the window
    # warm-up on/off (Fig. 1) as a sweep: "on" is the run above, all cached; "off" skips RL and evaluates the
    # SFT checkpoint as its RL row; nothing upstream is recomputed
    swept = run(load_recipe(out["path"]), sweeps={"stages.rl.enabled": [True, False]})
    status = {(i.variant, i.stage): i.status for i in swept.items}
    assert {s for (v, _), s in status.items() if v == "enabled=True"} == {"cached"}
    assert {st for (v, st), s in status.items() if v == "enabled=False" and s != "cached"} == {
        "rl",
        "eval_rl",
        "downstream",
        "eval_downstream",
    }
    off = _manifests_of(swept, "enabled=False")
    assert off["rl"] == {"skipped": True, "model_dir": m["sft"]["model_dir"]}
    assert off["eval_rl"]["model_dir"] == m["sft"]["model_dir"] and off["eval_rl"]["skipped_training"] is True
    assert "| enabled=False | + RL (skipped) |" in (swept.out / "report.md").read_text()
    assert "<h2>Sweep</h2>" in (swept.out / "report.html").read_text()


def test_sailor_recipe(tmp_path: Path, toy_ckpt: Path) -> None:
    out = _run("sailor", tmp_path, toy_ckpt, FakeSailor())
    m = _manifests(out["first"])
    syn = m["synthesis"]
    assert syn["trajectories"] > 0 and syn["qa"] > 0 and syn["meta"] == 1
    assert (
        syn["usage"]["policy"]["requests"] == out["by_server"]["teacher"] > 0
    )  # policy and judges: one server
    assert all(t.extra["seed_id"] == "L0-map" for t in read_tasks(m["rl_tasks"]["tasks"]))
    # the QC-kept exploration trajectories are the SFT set; RL rolls out in the sailor dialect
    assert m["curation"]["kept"] == syn["trajectories"] and m["rl"]["dialect"] == "sailor"
    _check_training_and_eval(m, toy_ckpt)
    _check_rerun(out, {"rl"})  # every group filtered

"""`datadojo eval scidata` end to end: scripted agent and scripted judge on loopback servers, real sandbox.

What must hold: the agent works in a persistent sandbox over the read-only dataset folder and sees the
paper's head/tail truncation; the judge is asked once per distinct answer with the track's rubric;
Pass@1, success rate, steps, tokens and the behavioural metrics land in summary.json; a rerun asks
neither model again; the final-answer reservation turns a budget-exhausted episode into an answered one.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.eval.harness import EvalConfig, run_eval
from datadojo.jsonl import read_trajectories
from datadojo.llm import load_backend
from datadojo.sandbox.result import ExecResult
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import Task

pytestmark = pytest.mark.timeout(240)

FINAL_NOTE = "This is your last turn"


def _write_tasks(path: Path, tasks: list[dict]) -> Path:
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks), encoding="utf-8")
    return path


def _task(tid: str, track: str, question: str, answer: str, folder: str, level: str) -> dict:
    return {
        "id": tid, "question": question, "files": [{"path": folder, "kind": "dir"}], "answer": answer,
        "answer_kind": f"sailor_{track}", "source": "scidata", "category": track, "difficulty": level,
        "extra": {"track": track, "seed_id": f"seed-{tid}", "intent": question},
    }  # fmt: skip


def _judge(req: dict) -> str:
    """A scripted judge: correct when every reference token (words of 3+ characters) is in the candidate."""
    user = req["messages"][1]["content"]
    reference = user.split("Reference answer: ")[1].split("\nCandidate answer: ")[0]
    candidate = user.split("\nCandidate answer: ")[1].split("\nReturn JSON exactly")[0]
    needed = [w for w in re.findall(r"[\w.\-/]{3,}", reference)]
    ok = all(w in candidate for w in needed)
    return json.dumps({"score": int(ok), "reason": "all reference facts present" if ok else "facts missing"})


def _last_observation(req: dict) -> str:
    return req["messages"][-1]["content"]


def _survey(tmp_path: Path) -> tuple[Path, float]:
    folder = tmp_path / "survey"
    (folder / "data").mkdir(parents=True)
    rows = [("S1", 10.5), ("S2", 12.25), ("S3", 9.0), ("S1", 11.0)]
    with (folder / "data" / "measurements.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["site", "value"])
        w.writerows(rows)
    (folder / "README.md").write_text("# Survey\nFour measurements at three sites.\n", encoding="utf-8")
    return folder, round(sum(v for _, v in rows) / len(rows), 3)


def _agent(req: dict) -> str:
    """QA: load the table (cell 1), use the frame from cell 1 (cell 2, persistent state) and print a long
    output; answer with the value it read. Meta: list the folder, then summarize what it listed."""
    question = req["messages"][1]["content"]
    steps = sum(1 for m in req["messages"] if m["role"] == "assistant")
    if question.startswith("What is the mean"):
        if steps == 0:
            return (
                "<think>load the table</think><python>import pandas as pd\n"
                "df = pd.read_csv('survey/data/measurements.csv')\nprint(len(df))</python>"
            )
        if steps == 1:
            return (
                "<think>mean, then a long dump</think><python>print('MEAN', round(df['value'].mean(), 3))\n"
                "print('x' * 9000)\nprint('END')</python>"
            )
        mean = re.search(r"MEAN (\S+)", _last_observation(req)).group(1)  # type: ignore[union-attr]
        return f"<think>done</think><answer>The mean value is \\boxed{{{mean}}}</answer>"
    if steps == 0:
        return (
            "<think>map the repository</think><python>import os\n"
            "for root, dirs, files in sorted(os.walk('survey')):\n"
            "    for f in sorted(files):\n        print(os.path.join(root, f))</python>"
        )
    listed = " ".join(
        ln.strip() for ln in _last_observation(req).splitlines() if ln.strip().startswith("survey/")
    )
    return f"<think>summarize</think><answer>The repository holds: {listed}</answer>"


def test_cli_eval_scidata_end_to_end(tmp_path: Path) -> None:
    _, mean = _survey(tmp_path)
    tasks = _write_tasks(tmp_path / "tasks.jsonl", [
        _task("qa-mean", "qa", "What is the mean of `value` in data/measurements.csv?", str(mean), "survey", "L1"),
        _task("meta-map", "meta", "Describe the organization of this repository.",
              "survey/README.md survey/data/measurements.csv", "survey", "L0"),
    ])  # fmt: skip
    out = tmp_path / "run"
    with ScriptedLLMServer(_agent) as agent, ScriptedLLMServer(_judge) as judge:
        judge_spec = f"openai:judge@{judge.base_url}"
        args = [
            "eval", "scidata", "--data", str(tasks), "--model", f"openai:agent@{agent.base_url}",
            "--judge", judge_spec, "--max-turns", "12", "-n", "1", "-j", "2",
            "--out", str(out), "--json",
        ]  # fmt: skip
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 0, res.output
        n_agent, n_judge = len(agent.requests), len(judge.requests)
        again = CliRunner().invoke(app, args)  # resume: nothing left to run or to judge
        assert again.exit_code == 0, again.output
        assert (len(agent.requests), len(judge.requests)) == (n_agent, n_judge)
    # QA is scored by the scientific matcher by default (qa_scoring=rule): only the Meta answer is judged.
    assert (n_agent, n_judge) == (3 + 2, 1)
    assert {r.json["temperature"] for r in agent.requests} == {0.6}  # SciDataSailor §5.1
    assert "</python>" in agent.requests[0].json["stop"]
    judge_prompts = {
        r.json["messages"][1]["content"].split("Task type: ")[1].split("\n")[0] for r in judge.requests
    }
    assert judge_prompts == {"meta-information summary"}
    assert judge.requests[0].json["response_format"]["type"] == "json_schema"  # structured verdicts
    scores = {r["id"]: r for r in map(json.loads, (out / "scores.jsonl").read_text().splitlines())}
    assert (
        scores["qa-mean"]["parts"]["rule"]["correct"] and scores["qa-mean"]["parts"]["decided_by"] == "rule"
    )

    summary = json.loads(res.stdout.strip().splitlines()[-1])
    m = summary["metrics"]
    assert (m["pass@1"], m["success_rate"], m["avg_turns"]) == (1.0, 1.0, 2.5)
    assert summary["official"]["qa"] == 1.0 and summary["official"]["meta"] == 1.0
    assert summary["official"]["judge_errors"] == 0 and summary["judge"] == judge_spec
    assert summary["agent_config"]["max_turns"] == 12 and summary["agent_config"]["dialect"] == "sailor"
    b = summary["behaviour"]
    assert (b["n_calls"], b["code_error_rate"], b["error_free_rate"]) == (3, 0.0, 1.0)
    trajs = {t.task_id: t for t in read_trajectories(out / "trajectories.jsonl")}
    assert b["total_tokens"] == sum(
        u.tokens.prompt + u.tokens.completion for t in trajs.values() for u in t.turns
    )
    assert b["total_tokens"] > 0 and m["avg_tokens"] == b["total_tokens"] / 2

    qa = trajs["qa-mean"]
    assert qa.final_answer == str(mean) and [t.observation.status for t in qa.turns[:2]] == ["ok", "ok"]
    long_obs = qa.turns[1].observation.text  # persistent state: `df` from the first cell was still there
    head, _, tail = long_obs.partition("\n... [")
    assert head.startswith(f"MEAN {mean}\n") and len(head) == 4000
    assert tail.endswith("END\n") and len(tail.split("characters truncated] ...\n")[1]) == 1500
    assert "netCDF4 and xarray" in qa.prompt[0]["content"]  # the readers note in the system prompt
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Behaviour (SciDataSailor Table 4)" in report and 'id="behaviour"' in report
    assert (out / "judge_cache.jsonl").exists()


def test_cli_eval_scidata_qa_by_rule_and_judge_with_json_object_verdicts(tmp_path: Path) -> None:
    _, mean = _survey(tmp_path)
    tasks = _write_tasks(tmp_path / "tasks.jsonl", [
        _task("qa-mean", "qa", "What is the mean of `value` in data/measurements.csv?", f"{mean} mg/L", "survey",
              "L1"),
    ])  # fmt: skip
    out = tmp_path / "run"
    with ScriptedLLMServer(_agent) as agent, ScriptedLLMServer(_judge) as judge:
        res = CliRunner().invoke(app, [
            "eval", "scidata", "--data", str(tasks), "--model", f"openai:agent@{agent.base_url}",
            "--judge", f"openai:judge@{judge.base_url}", "--judge-structured", "json_object",
            "--option", "qa_scoring=rule+judge", "-n", "1", "--out", str(out), "--json",
        ])  # fmt: skip
        assert res.exit_code == 0, res.output
        assert len(judge.requests) == 1 and judge.requests[0].json["response_format"] == {
            "type": "json_object"
        }
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    # The answer is the bare mean: read in the reference's unit it matches; the scripted judge wants "mg/L".
    assert summary["official"]["qa"] == 1.0 and summary["official"]["qa_rule"] == 1.0
    assert summary["official"]["qa_judge"] == 0.0 and summary["official"]["qa_rule_judge_agreement"] == 0.0
    (row,) = map(json.loads, (out / "scores.jsonl").read_text().splitlines())
    assert row["metric"] == "sailor_qa/rule+judge" and row["parts"]["decided_by"] == "rule"
    assert (row["parts"]["rule"]["correct"], row["parts"]["judge"]["correct"]) == (True, False)


def test_cli_eval_scidata_needs_a_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATADOJO_JUDGE", raising=False)
    _survey(tmp_path)
    tasks = _write_tasks(tmp_path / "t.jsonl", [_task("q", "qa", "q?", "1", "survey", "L1"),
                                                 _task("m", "meta", "map it", "a map", "survey", "L0")])  # fmt: skip
    for extra in ([], ["--option", "track=qa", "--option", "qa_scoring=judge"]):  # Meta, or QA by judge
        res = CliRunner().invoke(app, [
            "eval", "scidata", "--data", str(tasks), "--model", "openai:m@http://127.0.0.1:9/v1", "--out",
            str(tmp_path / "o"), *extra,
        ])  # fmt: skip
        assert res.exit_code == 2 and "scored by an LLM judge" in res.output and "--judge" in res.output
        assert not (tmp_path / "o" / "trajectories.jsonl").exists()


async def test_qa_by_rule_runs_without_a_judge(tmp_path: Path) -> None:
    _survey(tmp_path)
    tasks = _write_tasks(tmp_path / "t.jsonl", [_task("q", "qa", "How many rows?", "4", "survey", "L1")])
    with ScriptedLLMServer(_explorer) as agent:
        cfg = EvalConfig(
            bench="scidata", data=tasks, out=tmp_path / "run", model=f"openai:agent@{agent.base_url}",
            n_trials=1, max_turns=2, reserve_final_turn=True, report=False,
        )  # fmt: skip
        result = await run_eval(cfg, sandboxes=_fake_sandboxes)
    assert result.summary["metrics"]["pass@1"] == 1.0 and result.summary["official"]["qa_rule"] == 1.0
    assert "judge" not in result.summary


class _FakeSandbox:
    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> ExecResult:
        return ExecResult.make("rows: 4\n", "ok", isolation="test")


@contextlib.asynccontextmanager
async def _fake_sandboxes(task: Task):
    yield _FakeSandbox()


def _explorer(req: dict) -> str:
    """Explores until it is told that this is its last turn (the DeepSeek failure mode of App. C.1)."""
    if FINAL_NOTE in req["messages"][-1]["content"]:
        return "<think>out of steps</think><answer>4</answer>"
    return "<think>one more check</think><python>print('rows:', 4)</python>"


@pytest.mark.parametrize("reserve", [False, True])
async def test_final_answer_reservation(tmp_path: Path, reserve: bool) -> None:
    _survey(tmp_path)
    tasks = _write_tasks(tmp_path / "t.jsonl", [_task("q", "qa", "How many rows?", "4", "survey", "L1")])
    with ScriptedLLMServer(_explorer) as agent, ScriptedLLMServer(_judge) as judge:
        judge_backend = load_backend(f"openai:judge@{judge.base_url}")
        cfg = EvalConfig(
            bench="scidata", data=tasks, out=tmp_path / "run", model=f"openai:agent@{agent.base_url}",
            n_trials=1, max_turns=3, reserve_final_turn=reserve, report=False,
            loader_options={"qa_scoring": "judge"},
        )  # fmt: skip
        result = await run_eval(cfg, sandboxes=_fake_sandboxes, judge_backend=judge_backend)
        await judge_backend.aclose()
        n_judge = len(judge.requests)
    m = result.summary["metrics"]
    if reserve:
        assert result.summary["stop_reasons"] == {"answer": 1} and (m["success_rate"], m["pass@1"]) == (
            1.0,
            1.0,
        )
        assert n_judge == 1
    else:  # all three steps spent exploring: nothing submitted, nothing to judge
        assert result.summary["stop_reasons"] == {"max_turns": 1} and (m["success_rate"], m["pass@1"]) == (
            0.0,
            0.0,
        )
        assert n_judge == 0
    assert m["avg_turns"] == 3.0


def _penguin_rows(csv_path: Path) -> int:
    with csv_path.open(newline="", encoding="utf-8") as fh:
        return sum(1 for _ in csv.DictReader(fh))


def test_cli_eval_scidata_on_real_scirepos(tmp_path: Path, shared_data: Callable[..., Path]) -> None:
    penguins = shared_data("scirepos", "palmerpenguins", "inst", "extdata", "penguins.csv")
    repo = penguins.parents[2]
    n_rows = _penguin_rows(penguins)
    listing = sorted(
        os.path.relpath(os.path.join(root, f), repo.parent) for root, _, files in os.walk(repo) for f in files
    )
    _write_tasks(tmp_path / "qa.jsonl", [
        _task("rows", "qa", "How many penguins are in inst/extdata/penguins.csv?", str(n_rows),
              str(repo.resolve()), "L1"),
    ])  # fmt: skip
    _write_tasks(tmp_path / "meta.jsonl", [
        _task("files", "meta", "Map the files of this repository.", " ".join(listing), str(repo.resolve()), "L0"),
    ])  # fmt: skip

    def agent(req: dict) -> str:
        question = req["messages"][1]["content"]
        steps = sum(1 for m in req["messages"] if m["role"] == "assistant")
        if question.startswith("How many"):
            if steps == 0:
                return (
                    "<think>count</think><python>import pandas as pd\n"
                    "print('N', len(pd.read_csv('palmerpenguins/inst/extdata/penguins.csv')))</python>"
                )
            n = re.search(r"N (\d+)", _last_observation(req)).group(1)  # type: ignore[union-attr]
            return f"<think>done</think><answer>\\boxed{{{n}}}</answer>"
        if steps == 0:
            return (
                "<think>walk</think><python>import os\nfor r, d, fs in os.walk('palmerpenguins'):\n"
                "    for f in fs:\n        print(os.path.join(r, f))</python>"
            )
        seen = [ln.strip() for ln in _last_observation(req).splitlines() if ln.startswith("palmerpenguins/")]
        return f"<think>done</think><answer>Files: {' '.join(seen)}</answer>"

    with ScriptedLLMServer(agent) as srv, ScriptedLLMServer(_judge) as judge:
        res = CliRunner().invoke(app, [
            "eval", "scidata", "--data", str(tmp_path), "--model", f"openai:agent@{srv.base_url}",
            "--judge", f"openai:judge@{judge.base_url}", "-n", "1", "-j", "2", "--out", str(tmp_path / "run"),
            "--json", "--no-report",
        ])  # fmt: skip
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["metrics"]["pass@1"] == 1.0, summary
    trajs = {t.task_id: t for t in read_trajectories(tmp_path / "run" / "trajectories.jsonl")}
    assert trajs["rows"].final_answer == str(n_rows)


def test_sandbox_flags_override_only_what_they_name() -> None:
    from datadojo.bench.scidata import SciData
    from datadojo.cli.eval import _sandbox_override

    base = SciData().sandbox_config()
    cfg = _sandbox_override(base, None, "none", 5.0)
    assert (cfg.mode, cfg.isolation, cfg.limits.wall_s, cfg.limits.cpu_s) == ("persistent", "none", 5.0, 5.0)
    assert (cfg.limits.observation_head_chars, cfg.limits.observation_tail_chars) == (4000, 1500)
    assert _sandbox_override(base, "chunked", None, None).limits == base.limits

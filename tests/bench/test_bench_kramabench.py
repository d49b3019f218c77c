"""KramaBench: the official layout (workload/<domain>.json + data/<domain>/input), and eval end to end."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from datadojo.bench import BenchmarkError, get_benchmark
from datadojo.bench.kramabench import gold_response
from datadojo.eval.harness import EvalConfig, run_eval
from datadojo.llm import load_backend
from datadojo.sandbox.result import ExecResult
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import Task
from helpers.kramabench import LEGAL, WILDFIRE, make_kramabench


def test_loads_the_official_layout(tmp_path: Path) -> None:
    root = make_kramabench(tmp_path)
    tasks = list(get_benchmark("kramabench").load(root))
    assert [t.id for t in tasks] == ["legal-easy-1", "legal-hard-2", "legal-hard-3", "wildfire-easy-1"]
    first = tasks[0]
    assert first.answer == {"answer": 1135291, "accepted": []} and first.answer_kind == "numeric_exact"
    assert (first.category, first.difficulty, first.source) == ("legal", "easy", "kramabench")
    # the whole lake, as the official harness hands it over
    assert [(f.path, f.kind, f.name) for f in first.files] == [
        (str(root / "data" / "legal" / "input"), "dir", "input")
    ]
    assert tasks[3].answer["accepted"] == [["CA", "OR", "WA"]]


def test_options_sources_subtasks_and_domain(tmp_path: Path) -> None:
    root = make_kramabench(tmp_path)
    bench = get_benchmark("kramabench")
    tasks = list(bench.load(root, files="sources", subtasks="true", domain="legal"))
    assert [t.id for t in tasks] == ["legal-easy-1", "legal-easy-1-1", "legal-hard-2", "legal-hard-3"]
    assert [Path(f.path).name for f in tasks[0].files] == ["2024_CSN_Report_Count.csv"]
    sub = tasks[1]
    assert sub.category == "legal/subtask" and sub.extra["parent"] == "legal-easy-1"
    assert sub.files[0].kind == "dir"  # data_sources "./": the lake
    # one workload file given directly: its lake is ../data/<domain>/input
    assert len(list(bench.load(root / "workload" / "wildfire.json"))) == 1


def test_layout_errors_name_the_file_and_the_expected_layout(tmp_path: Path) -> None:
    bench = get_benchmark("kramabench")
    with pytest.raises(BenchmarkError, match=r"no workload/ folder.*expected the KramaBench repository"):
        list(bench.load(tmp_path))
    root = make_kramabench(tmp_path)
    bad = [dict(LEGAL[0], answer_type="numeric_fuzzy")]
    (root / "workload" / "legal.json").write_text(json.dumps(bad))
    with pytest.raises(
        BenchmarkError, match=r"legal\.json task 0 \(id 'legal-easy-1'\): field 'answer_type'"
    ):
        list(bench.load(root))
    (root / "workload" / "legal.json").write_text("[{")
    with pytest.raises(BenchmarkError, match=r"legal\.json: not valid JSON"):
        list(bench.load(root))
    with pytest.raises(BenchmarkError, match="unknown domain"):
        list(bench.load(root, domain="finance"))
    (root / "workload" / "legal.json").write_text(json.dumps(LEGAL))
    with pytest.raises(BenchmarkError, match=r"lake .* is not a folder"):
        import shutil

        shutil.rmtree(root / "data" / "wildfire")
        list(bench.load(root))
    assert len(list(bench.load(root, require_files=False))) == 4  # scoring alone needs no lake


class _FakeSandbox:
    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> ExecResult:
        return ExecResult.make("ok\n", "ok", isolation="test")


@contextlib.asynccontextmanager
async def _fake_sandboxes(task: Task):
    yield _FakeSandbox()


#: what the scripted agent answers per task id: gold (full credit) or a chosen wrong answer
ANSWERS = {
    "legal-easy-1": None,  # gold
    "legal-hard-2": '{"answer": 11.966}',  # rel error 0.0909…: rae 1/1.0909 = 0.9166…
    "legal-hard-3": "Identity theft reports rose every year.",  # the judge accepts
    "wildfire-easy-1": '["CA", "WA"]',  # best over answers: F1 vs [CA, OR, WA] = 0.8
}


def _agent(tasks: list[Task]):
    by_question = {t.question: t for t in tasks}

    def reply(req: dict) -> str:
        user = req["messages"][1]["content"]
        task = next(t for q, t in by_question.items() if q in user)
        answer = ANSWERS[task.id] or gold_response(task)
        return f"<think>done</think><answer>{answer}</answer>"

    return reply


def _judge(req: dict) -> str:
    ok = "rose" in req["messages"][-1]["content"].split("andidate")[-1]
    return json.dumps({"score": int(ok), "reason": "same trend" if ok else "different"})


async def test_eval_end_to_end_with_the_loopback_model_and_a_judge(tmp_path: Path) -> None:
    root = make_kramabench(tmp_path)
    tasks = list(get_benchmark("kramabench").load(root))
    with ScriptedLLMServer(_agent(tasks)) as agent, ScriptedLLMServer(_judge) as judge:
        judge_backend = load_backend(f"openai:judge@{judge.base_url}")
        cfg = EvalConfig(
            bench="kramabench", data=root, out=tmp_path / "run", model=f"openai:agent@{agent.base_url}",
            n_trials=1, max_turns=3, report=False,
        )  # fmt: skip
        result = await run_eval(cfg, sandboxes=_fake_sandboxes, judge_backend=judge_backend)
        await judge_backend.aclose()
        assert len(judge.requests) == 1  # only the string_approximate answer is judged
    official = result.summary["official"]
    rae = 1 / (1 + abs(11.966 - 13.16279420289855) / 13.16279420289855)
    assert official["accuracy"] == pytest.approx((1 + rae + 1 + 0.8) / 4)
    assert official["domain:legal"] == pytest.approx((2 + rae) / 3)
    assert result.summary["metrics"]["pass@1"] == pytest.approx(2 / 4)  # pass@k counts full credit only
    rows = {json.loads(line)["id"]: json.loads(line) for line in (tmp_path / "run" / "scores.jsonl").open()}
    assert rows["legal-hard-3"]["correct"] and rows["wildfire-easy-1"]["score"] == pytest.approx(0.8)


async def test_eval_without_a_judge_needs_paraphrase_rule(tmp_path: Path) -> None:
    from datadojo.eval.harness import EvalError

    root = make_kramabench(tmp_path)
    tasks = list(get_benchmark("kramabench").load(root))
    with ScriptedLLMServer(_agent(tasks)) as agent:
        cfg = EvalConfig(
            bench="kramabench", data=root, out=tmp_path / "run", model=f"openai:agent@{agent.base_url}",
            n_trials=1, max_turns=3, report=False,
        )  # fmt: skip
        with pytest.raises(EvalError, match="--judge"):
            await run_eval(cfg, sandboxes=_fake_sandboxes)
        cfg = cfg.model_copy(update={"loader_options": {"paraphrase": "rule"}, "out": tmp_path / "run2"})
        result = await run_eval(cfg, sandboxes=_fake_sandboxes)
    # without a judge the paraphrase is compared by rule: not equal, so 0
    rae = 1 / (1 + abs(11.966 - 13.16279420289855) / 13.16279420289855)
    assert result.summary["official"]["accuracy"] == pytest.approx((1 + rae + 0 + 0.8) / 4)


def test_export_rl_tasks_scored_by_the_official_rule(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from datadojo.cli.app import app
    from datadojo.jsonl import read_tasks
    from datadojo.reward.datamind import default_answer_check

    root = make_kramabench(tmp_path)
    out = tmp_path / "rl_tasks.jsonl"
    res = CliRunner().invoke(app, ["bench", "export", "kramabench", "--data", str(root), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "3 task(s) with public answers" in res.output
    assert "left out 1 task(s) only an LLM judge can score" in res.output and "legal-hard-3" in res.output
    tasks = list(read_tasks(out))
    assert [t.id for t in tasks] == ["legal-easy-1", "legal-hard-2", "wildfire-easy-1"]
    assert all(t.source == "kramabench" and t.extra["answer_format"] for t in tasks)
    # the RL reward scores an exported task with KramaBench's own rule
    first = tasks[0]
    assert default_answer_check(first, gold_response(first)).correct
    check = default_answer_check(first, "1135292")  # two ints: exact only
    assert not check.correct and check.source == "bench:kramabench"
    # scored by rule, the string_approximate task can be exported too
    res = CliRunner().invoke(app, ["bench", "export", "kramabench", "--data", str(root), "--out", str(out),
                                   "--option", "paraphrase=rule"])  # fmt: skip
    assert res.exit_code == 0 and "4 task(s) with public answers" in res.output


def test_a_repeated_id_gets_a_suffix(tmp_path: Path) -> None:
    # the release names two astronomy subtasks astronomy-easy-4-3; the second stays addressable
    root = make_kramabench(tmp_path)
    sub = {"query": "q", "answer": 1, "answer_type": "numeric_exact", "data_sources": []}
    task = dict(WILDFIRE[0], subtasks=[dict(sub, id="wildfire-easy-1-1"), dict(sub, id="wildfire-easy-1-1")])
    (root / "workload" / "wildfire.json").write_text(json.dumps([task]))
    ids = [t.id for t in get_benchmark("kramabench").load(root, domain="wildfire", subtasks=True)]
    assert ids == ["wildfire-easy-1", "wildfire-easy-1-1", "wildfire-easy-1-1~2"]


def test_sources_resolve_globs_bare_names_and_fall_back_to_the_lake(tmp_path: Path) -> None:
    root = make_kramabench(tmp_path)
    lake = root / "data" / "wildfire" / "input"
    (lake / "noaa").mkdir()
    for name in ("fires_2015.csv", "fires_2016.csv", "fires_2020.csv"):
        (lake / "noaa" / name).write_text("a\n1\n")
    (lake / "report.html").write_text("<html></html>")
    base = {"query": "q", "answer": 1, "answer_type": "numeric_exact"}
    records = [
        dict(base, id="wildfire-easy-1", data_sources=["noaa/fires_201*.csv"]),  # a glob
        dict(base, id="wildfire-easy-2", data_sources=["fires_2020.csv"]),  # a bare name deeper in the lake
        dict(base, id="wildfire-easy-3", data_sources=["noaa/"]),  # a folder
        dict(base, id="wildfire-easy-4", data_sources=["report.html"]),  # no data kind: the lake
        dict(base, id="wildfire-easy-5", data_sources=["missing.csv"]),  # matches nothing: the lake
    ]
    (root / "workload" / "wildfire.json").write_text(json.dumps(records))
    tasks = list(get_benchmark("kramabench").load(root, domain="wildfire", files="sources"))
    given = [([Path(f.path).name for f in t.files], t.extra["files_given"]) for t in tasks]
    assert given == [
        (["fires_2015.csv", "fires_2016.csv"], "sources"),
        (["fires_2020.csv"], "sources"),
        (["noaa"], "sources"),
        (["input"], "lake"),
        (["input"], "lake"),
    ]


def test_a_subtask_is_asked_with_its_main_question(tmp_path: Path) -> None:
    # the official Executor.run_task words a subtask so; the release's subtask queries assume it
    tasks = list(get_benchmark("kramabench").load(make_kramabench(tmp_path), domain="legal", subtasks=True))
    sub = next(t for t in tasks if t.id == "legal-easy-1-1")
    assert sub.question == (
        "Your end goal is to answer this overall question: How many fraud reports were filed in 2024?, "
        "please answer the following question:\n Which file holds the report counts? \n\n"
    )

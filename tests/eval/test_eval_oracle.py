"""The oracle agent: gold SQL through the full agent loop and a real sandbox must score 100% on Spider."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.agent import run_agent
from datadojo.bench.spider import Spider
from datadojo.cli.app import app
from datadojo.eval.harness import EvalConfig, EvalError, run_eval
from datadojo.eval.oracle import OracleBackend
from datadojo.jsonl import iter_jsonl, read_trajectories
from datadojo.llm.base import LLMError
from datadojo.sandbox import Sandbox, SandboxConfig
from datadojo.types import Task

N_RECORDS = 36


@pytest.fixture
def spider(shared_data: Callable[..., Path]) -> Path:
    return shared_data("spider", "dev.json").parent


@pytest.fixture
def dabench(shared_data: Callable[..., Path]) -> Path:
    return shared_data("dabench", "da-dev-questions.jsonl").parent


@pytest.fixture
def spider_subset(tmp_path, spider) -> Path:
    """A Spider folder whose dev.json holds every k-th official record, so that all dev databases appear."""
    records = json.loads((spider / "dev.json").read_text())
    step = max(1, len(records) // N_RECORDS)
    folder = tmp_path / "spider"
    folder.mkdir()
    (folder / "dev.json").write_text(json.dumps(records[::step][:N_RECORDS]))
    (folder / "database").symlink_to((spider / "database").resolve(), target_is_directory=True)
    return folder


async def test_oracle_scores_100_percent_on_spider_dev(spider_subset, tmp_path):
    tasks = list(Spider().load(spider_subset))
    assert len(tasks) == N_RECORDS and len({t.category for t in tasks}) >= 5
    cfg = EvalConfig(bench="spider", data=spider_subset, out=tmp_path / "run", agent="oracle", n_trials=1,
                     concurrency=4)  # fmt: skip
    result = await run_eval(cfg)
    s = result.summary
    assert s["metrics"]["pass@1"] == 1.0, [i.score.reason for i in result.report.items if not i.score.correct]
    assert s["official"]["accuracy"] == 1.0 and s["official"]["gold_errors"] == 0
    assert s["metrics"]["success_rate"] == 1.0 and s["metrics"]["avg_turns"] == 2.0
    assert s["prediction_sources"] == {"sql_action": N_RECORDS}
    gold = {t.id: t.answer for t in tasks}
    trajs = list(read_trajectories(tmp_path / "run" / "trajectories.jsonl"))
    assert len(trajs) == N_RECORDS
    for traj in trajs:
        sql_turn, answer_turn = traj.turns
        # each episode submitted its own task's gold (the binding), and the sandbox really ran it
        assert sql_turn.action.kind == "sql" and sql_turn.action.text.strip() == gold[traj.task_id].strip()
        assert sql_turn.observation.status == "ok" and sql_turn.observation.isolation in ("bwrap", "reduced")
        assert answer_turn.action.kind == "answer" and traj.stop_reason == "answer"
    rows = [r for _, r in iter_jsonl(tmp_path / "run" / "scores.jsonl")]
    assert all(r["metric"] == "EX" and r["parts"]["table_match"] for r in rows)


async def test_the_scorer_executes_the_sql_that_ran(spider_subset, tmp_path):
    """An oracle fed a wrong program for one task: that task, and only that one, scores 0."""
    tasks = list(Spider().load(spider_subset))[:3]
    victim = tasks[1]
    wrong = victim.model_copy(update={"answer": "SELECT 1 WHERE 0"})  # runs fine, returns no rows
    oracle = OracleBackend([tasks[0], wrong, tasks[2]])
    cfg = EvalConfig(bench="spider", data=spider_subset, out=tmp_path / "run", agent="oracle", n_trials=1,
                     limit=3, concurrency=3)  # fmt: skip
    result = await run_eval(cfg, backend=oracle)
    by_id = {i.task.id: i.score for i in result.report.items}
    assert not by_id[victim.id].correct and "different results" in by_id[victim.id].reason
    assert by_id[tasks[0].id].correct and by_id[tasks[2].id].correct
    assert result.summary["metrics"]["pass@1"] == pytest.approx(2 / 3)


async def test_oracle_without_binding_finds_the_task_by_question(spider):
    task = next(Spider().load(spider))
    oracle = OracleBackend([task])
    async with await Sandbox.create(task.files, SandboxConfig(preload=())) as sb:
        traj = await run_agent(task, oracle, sb)
    assert traj.stop_reason == "answer" and traj.turns[0].action.text.strip() == task.answer.strip()
    assert Spider().score(task, traj.turns[0].action.text).correct


async def test_oracle_refuses_what_it_cannot_do():
    a = Task(id="a", question="same?", answer="SELECT 1", answer_kind="sql")
    b = Task(id="b", question="same?", answer="SELECT 2", answer_kind="sql")
    oracle = OracleBackend([a, b])
    with pytest.raises(LLMError, match="share this question"):
        await oracle.chat([{"role": "system", "content": "s"}, {"role": "user", "content": "same?"}])
    with pytest.raises(LLMError, match="none of its tasks"):
        await oracle.chat([{"role": "user", "content": "other"}])
    with pytest.raises(ValueError, match="no gold program"):
        OracleBackend([Task(id="c", question="q", answer={"x": "1"}, answer_kind="dabench")])
    with pytest.raises(ValueError, match="no code tag that runs SQL"):
        OracleBackend([a], dialect="sailor")
    with pytest.raises(ValueError, match="not one of the oracle's tasks"):
        oracle.bind(Task(id="zzz", question="q"))


async def test_oracle_on_a_benchmark_without_gold_programs(tmp_path, dabench):
    with pytest.raises(EvalError, match="no gold program"):
        await run_eval(EvalConfig(bench="dabench", data=dabench, out=tmp_path / "r", agent="oracle", limit=1))


def test_cli_oracle_on_a_benchmark_without_gold_programs(tmp_path, dabench):
    res = CliRunner().invoke(app, ["eval", "dabench", "--data", str(dabench), "--agent", "oracle",
                                   "--out", str(tmp_path / "r2"), "--limit", "1"])  # fmt: skip
    assert res.exit_code == 2 and "no gold program" in res.output

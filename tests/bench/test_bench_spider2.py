"""Spider 2.0-lite end to end: ``datadojo eval spider2-lite`` with a scripted model on a loopback server and
the real sandbox (SQL run on the local database), ``bench export``, and the missing download source.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.bench.download import download_benchmark
from datadojo.cli.app import app
from datadojo.errors import UnknownNameError
from datadojo.jsonl import iter_jsonl, read_tasks
from datadojo.reward.datamind import default_answer_check
from datadojo.testing.server import ScriptedLLMServer
from helpers.spider2 import make_spider2_lite

#: What the scripted agent runs per question: local001 right (columns swapped), local002 wrong (3 rows).
SQL = {
    "Total amount per region": "SELECT SUM(amount), region FROM sales GROUP BY region ORDER BY 1 DESC",
    "Months with sales": "SELECT month FROM sales",
}


@pytest.fixture
def spider2(tmp_path: Path) -> Path:
    return make_spider2_lite(tmp_path / "spider2-lite")


def _agent(req: dict) -> str:
    """Runs its query, then answers in prose: the harness scores the last SQL that ran."""
    msgs = req["messages"]
    question = next(m["content"] for m in msgs if m["role"] == "user")
    sql = next(q for key, q in SQL.items() if key in question)
    if not any(m["role"] == "assistant" for m in msgs):
        return f"<think>query it</think><code>{sql}</code>"
    return "<think>done</think><answer>The table above answers it.</answer>"


def test_cli_eval_end_to_end(tmp_path: Path, spider2: Path) -> None:
    with ScriptedLLMServer(_agent) as server:
        res = CliRunner().invoke(app, [
            "eval", "spider2-lite", "--data", str(spider2), "--model", f"openai:fake@{server.base_url}",
            "-n", "1", "--out", str(tmp_path / "run"), "--json",
        ])  # fmt: skip
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["n_tasks"] == 2 and summary["metrics"]["pass@1"] == 0.5
    assert summary["rule"]["name"] == "official" and summary["prediction_sources"] == {"sql_action": 2}
    rows = {r["id"]: r for _, r in iter_jsonl(tmp_path / "run" / "scores.jsonl")}
    assert rows["local001"]["correct"] and not rows["local002"]["correct"]
    assert rows["local001"]["answer"] == SQL["Total amount per region"]


def test_export_rl_tasks_rewarded_by_the_official_comparison(tmp_path: Path, spider2: Path) -> None:
    res = CliRunner().invoke(app, ["bench", "export", "spider2-lite", "--data", str(spider2), "--out",
                                   str(tmp_path / "rl_tasks.jsonl")])  # fmt: skip
    assert res.exit_code == 0, res.output
    tasks = list(read_tasks(tmp_path / "rl_tasks.jsonl"))
    assert [t.id for t in tasks] == ["local001", "local002"]
    assert all(t.source == "spider2-lite" and t.answer for t in tasks)  # the gold table is the public answer
    assert default_answer_check(tasks[0], f"```sql\n{SQL['Total amount per region']}\n```").correct
    assert not default_answer_check(tasks[1], SQL["Months with sales"]).correct
    assert default_answer_check(tasks[1], "SELECT DISTINCT month FROM sales").correct


def test_no_download_source_says_what_to_fetch(tmp_path: Path) -> None:
    with pytest.raises(UnknownNameError, match=r"xlang-ai/Spider2 .*resource/databases/spider2-localdb/"):
        download_benchmark("spider2-lite", cache_root=tmp_path / "c")


def test_eval_without_data_says_there_is_no_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATADOJO_BENCH_CACHE", str(tmp_path / "cache"))
    res = CliRunner().invoke(
        app,
        ["eval", "spider2-lite", "--model", "openai:m@http://127.0.0.1:9/v1", "-o", str(tmp_path / "o")],
        env={"COLUMNS": "400"},
    )
    assert res.exit_code == 2 and "spider2-lite has no download source (the questions" in res.output

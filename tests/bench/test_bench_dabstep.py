"""DABstep end to end: ``datadojo eval dabstep`` with a scripted model on a loopback server and the real
sandbox, the leaderboard submission of the hidden split, ``bench export`` and ``bench download``.

The fixtures are tiny files in the official layout (``data/tasks/*.jsonl``, ``data/context/``); nothing is
downloaded: the download test serves them from a loopback HTTP server.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.bench import get_benchmark
from datadojo.bench.dabstep import CONTEXT_FILES
from datadojo.bench.download import download_benchmark
from datadojo.cli.app import app
from datadojo.eval.report import official_value
from datadojo.jsonl import iter_jsonl, read_tasks
from datadojo.reward.datamind import default_answer_check
from datadojo.testing.server import ScriptedLLMServer
from helpers.dabstep import DEV, TEST, make_dabstep

#: The code the scripted agent runs for each question, reading the real context file in the sandbox.
CODE = {
    DEV[0][
        "question"
    ]: "print(pd.read_csv('context/payments.csv')['issuing_country'].value_counts().idxmax())",
    DEV[1]["question"]: "print(round(pd.read_csv('context/payments.csv')['eur_amount'].sum(), 2))",
    TEST[0]["question"]: "print(len(pd.read_csv('context/payments.csv')))",
    TEST[1]["question"]: "print(pd.read_csv('context/payments.csv')['merchant'].value_counts().idxmax())",
}


@pytest.fixture
def dabstep(tmp_path: Path) -> Path:
    return make_dabstep(tmp_path / "DABstep")


def _agent(req: dict) -> str:
    """Runs the question's code first, then answers with the last line the code printed."""
    msgs = req["messages"]
    question = next(m["content"] for m in msgs if m["role"] == "user")
    code = next(c for q, c in CODE.items() if q in question)
    if not any(m["role"] == "assistant" for m in msgs):
        return f"<think>read the payments</think><code>import pandas as pd\n{code}</code>"
    printed = re.findall(r"[^\s<>]+", msgs[-1]["content"].replace("</interpreter>", " "))
    return f"<think>done</think><answer>{printed[-1] if printed else ''}</answer>"


def _eval(tmp_path: Path, data: Path, out: str, *extra: str):
    with ScriptedLLMServer(_agent) as server:
        res = CliRunner().invoke(app, [
            "eval", "dabstep", "--data", str(data), "--model", f"openai:fake@{server.base_url}",
            "-n", "1", "--out", str(tmp_path / out), "--json", *extra,
        ])  # fmt: skip
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_cli_eval_dev_end_to_end(tmp_path: Path, dabstep: Path) -> None:
    summary = _eval(tmp_path, dabstep, "dev")
    assert summary["metrics"]["pass@1"] == 1.0 and summary["metrics"]["avg_turns"] == 2.0
    assert summary["rule"]["name"] == "official" and summary["official"]["hidden"] == 0.0
    assert summary["official"]["level:easy"] == 1.0 and summary["official"]["level:hard"] == 1.0
    rows = [r for _, r in iter_jsonl(tmp_path / "dev" / "scores.jsonl")]
    assert {r["id"]: r["answer"] for r in rows} == {"5": "NL", "6": "37.75"}
    assert not (tmp_path / "dev" / "dabstep_submission.jsonl").exists()  # dev answers are scored here


def test_cli_eval_test_split_writes_the_leaderboard_submission(tmp_path: Path, dabstep: Path) -> None:
    summary = _eval(tmp_path, dabstep, "test", "--split", "test")
    assert summary["official"]["hidden"] == 2.0
    assert official_value("hidden", 2.0) == "2"  # a count in the tables, not "200.00%"
    assert "| hidden | 2 |" in (tmp_path / "test" / "report.md").read_text()
    lines = [r for _, r in iter_jsonl(tmp_path / "test" / "dabstep_submission.jsonl")]
    assert [sorted(r) for r in lines] == [["agent_answer", "reasoning_trace", "task_id"]] * 2
    assert [(r["task_id"], r["agent_answer"]) for r in lines] == [("1", "3"), ("2", "Golfclub")]
    assert "pd.read_csv('context/payments.csv')" in lines[0]["reasoning_trace"]


def test_export_dev_as_rl_tasks_scored_by_the_official_rule(tmp_path: Path, dabstep: Path) -> None:
    res = CliRunner().invoke(
        app, ["bench", "export", "dabstep", "--data", str(dabstep), "--out", str(tmp_path / "rl"), "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["written"] == 2
    tasks = list(read_tasks(tmp_path / "rl" / "rl_tasks.jsonl"))
    assert [t.id for t in tasks] == ["5", "6"] and all(t.source == "dabstep" for t in tasks)
    assert (
        Path(tasks[0].files[0].path).is_absolute() and tasks[0].extra["answer_format"] == DEV[0]["guidelines"]
    )
    # the reward is the leaderboard's verdict: one-word subset and rounding rules included
    assert default_answer_check(tasks[0], "The country is NL").correct
    assert (
        default_answer_check(tasks[1], "37.8").correct and not default_answer_check(tasks[1], "37.9").correct
    )
    # the hidden split has nothing to train on
    res = CliRunner().invoke(
        app,
        [
            "bench",
            "export",
            "dabstep",
            "--data",
            str(dabstep),
            "--split",
            "test",
            "--out",
            str(tmp_path / "x"),
        ],
    )
    assert res.exit_code == 2 and "none of the 2 task(s)" in res.stderr


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


def test_download_from_a_loopback_mirror_in_the_official_layout(tmp_path: Path, dabstep: Path) -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(dabstep)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        result = download_benchmark(
            "dabstep", url=f"http://127.0.0.1:{httpd.server_address[1]}", cache_root=tmp_path / "cache"
        )
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert sorted(f.name for f in result.files) == sorted(
        ["data/tasks/dev.jsonl", "data/tasks/all.jsonl", *(f"data/context/{n}" for n in CONTEXT_FILES)]
    )
    assert all(f.status == "downloaded" and len(f.sha256) == 64 for f in result.files)
    bench = get_benchmark("dabstep")
    assert [t.id for t in bench.load(tmp_path / "cache")] == ["5", "6"]
    assert [t.id for t in bench.load(tmp_path / "cache", split="test")] == ["1", "2"]
    assert get_benchmark("dabstep").source.licence == "CC BY 4.0"

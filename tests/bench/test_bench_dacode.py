"""DA-Code: the official da_code/ layout (configs, source, gold), the answer format, eval end to end."""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import threading
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from datadojo.bench import BenchmarkError, get_benchmark
from datadojo.bench.dacode import gold_response
from datadojo.eval.harness import EvalConfig, run_eval
from datadojo.sandbox.result import ExecResult
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import Task
from helpers.dacode import EVALS, TASKS, make_dacode, write_jsonl


def test_loads_the_officialmake_dacode(tmp_path: Path) -> None:
    repo = make_dacode(tmp_path)
    tasks = {t.id: t for t in get_benchmark("dacode").load(repo)}  # the repository root works too
    assert list(tasks) == [t["id"] for t in TASKS]
    text = tasks["di-text-001"]
    assert text.answer["func"] == "compare_text" and text.answer["gold"] == EVALS[0]["result"][0]["number"]
    assert [(Path(f.path).name, f.kind) for f in text.files] == [("di-text-001", "dir")]
    assert (text.category, text.difficulty, text.source) == ("data insight", "Medium", "dacode")
    assert "JSON object" in text.extra["answer_format"]
    csv_task = tasks["dm-csv-001"]
    assert csv_task.answer["outputs"] == ["undefeated.csv"] and "```csv undefeated.csv" in csv_task.extra[
        "answer_format"]  # fmt: skip
    assert tasks["plot-bar-001"].answer["gold"]["data"] == [[5.0, 3.0, 2.0]]
    assert tasks["data-wrangling-038"].answer["gold"]["tables"][0][0] == "company"  # condition_tabs only
    assert len(tasks["data-wrangling-038"].answer["gold"]["tables"]) == 1


def test_gold_answers_score_full_credit(tmp_path: Path) -> None:
    bench = get_benchmark("dacode")
    for task in bench.load(make_dacode(tmp_path)):
        s = bench.score(task, gold_response(task))
        assert s.correct, (task.id, s.reason)


def test_answer_format_variants(tmp_path: Path) -> None:
    bench = get_benchmark("dacode")
    tasks = {t.id: t for t in bench.load(make_dacode(tmp_path))}
    csv_task = tasks["dm-csv-001"]
    # one expected file: an unnamed block, or plain CSV text, is that file; rows in another order
    assert bench.score(csv_task, "```\nweight_class,undefeated\nHeavy,1\nLight,3\n```").correct
    assert bench.score(csv_task, "weight_class,undefeated\nLight,3\nHeavy,1\n").correct
    assert not bench.score(
        csv_task, "```csv undefeated.csv\nweight_class,undefeated\nLight,3\nHeavy,2\n```"
    ).correct
    # the sqlite output: one block per table, named after it
    db = tasks["data-wrangling-038"]
    assert bench.score(db, "```csv company.csv\nsize,name\n250,globex\n10,acme\n```").correct
    assert bench.score(db, "```csv other.csv\nname,size\nacme,10\nglobex,250\n```").score == 0.0
    # a chart: the json chart block; series data wrong → 0 (title alone does not help)
    plot = tasks["plot-bar-001"]
    good = {"data": [[2, 3, 5]], "figsize": [6, 6], "graph_title": "top artists"}
    assert bench.score(plot, "```json chart\n" + json.dumps(good) + "\n```").correct is False  # order inside
    good["data"] = [[5, 3, 2]]
    assert bench.score(plot, "```json chart\n" + json.dumps(good) + "\n```").correct
    assert bench.score(plot, "I made the chart.").score == 0.0
    # ML: a prediction file with 8 of 10 labels right scores its scaled F1
    rows = "".join(f"{i},{'Positive' if (i % 2 or i > 8) else 'Negative'}\n" for i in range(1, 11))
    s = bench.score(tasks["ml-binary-001"], f"```csv result.csv\nid,result\n{rows}```")
    # gold 5 Positive / 5 Negative; predicted Positive for rows 9, 10 too: row 10 is a false positive
    f1_pos, f1_neg = 2 * 5 / (2 * 5 + 1), 2 * 4 / (2 * 4 + 1)
    assert s.score == pytest.approx(((f1_pos + f1_neg) / 2 - 0.6) / 0.3)


def test_layout_errors(tmp_path: Path) -> None:
    bench = get_benchmark("dacode")
    with pytest.raises(BenchmarkError, match=r"no configs/ folder.*expected DA-Code's da_code/ folder"):
        list(bench.load(tmp_path))
    repo = make_dacode(tmp_path)
    (repo / "da_code" / "gold" / "dm-csv-001" / "undefeated.csv").unlink()
    with pytest.raises(
        BenchmarkError, match=r"eval_all\.jsonl:2 \(id 'dm-csv-001'\): gold file .* not found"
    ):
        list(bench.load(repo))
    with pytest.raises(BenchmarkError, match="unknown split"):
        list(bench.load(repo, split="extra"))
    bad = [dict(EVALS[0], func=["compare_magic"])]
    write_jsonl(repo / "da_code" / "configs" / "eval" / "eval_all.jsonl", bad + EVALS[1:])
    with pytest.raises(BenchmarkError, match="field 'func': 'compare_magic'"):
        list(bench.load(repo))


class _FakeSandbox:
    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> ExecResult:
        return ExecResult.make("ok\n", "ok", isolation="test")


@contextlib.asynccontextmanager
async def _fake_sandboxes(task: Task):
    yield _FakeSandbox()


WRONG = {
    "di-text-001": '{"highest country": ["Macao"], "lowest country": ["Mongolia"]}',
    "dm-csv-001": "```csv undefeated.csv\nweight_class,undefeated\nLight,3\n```",  # a row short
}


async def test_eval_end_to_end_with_the_loopback_model(tmp_path: Path) -> None:
    repo = make_dacode(tmp_path)
    tasks = list(get_benchmark("dacode").load(repo))

    def reply(req: dict) -> str:
        user = req["messages"][1]["content"]
        task = next(t for t in tasks if t.question in user)
        return f"<think>done</think><answer>{WRONG.get(task.id) or gold_response(task)}</answer>"

    with ScriptedLLMServer(reply) as agent:
        cfg = EvalConfig(
            bench="dacode", data=repo, out=tmp_path / "run", model=f"openai:agent@{agent.base_url}",
            n_trials=1, max_turns=3, report=False,
        )  # fmt: skip
        result = await run_eval(cfg, sandboxes=_fake_sandboxes)
    official = result.summary["official"]
    assert official["accuracy"] == pytest.approx(3 / 5)
    assert official["big_type:EDA"] == pytest.approx(1 / 3)  # text and csv wrong, the chart right
    assert official["result_type:plot"] == 1.0 and official["task:machine learning"] == 1.0
    rows = {json.loads(line)["id"]: json.loads(line) for line in (tmp_path / "run" / "scores.jsonl").open()}
    assert rows["dm-csv-001"]["score"] == 0.0 and rows["data-wrangling-038"]["correct"]


def _zip_folder(folder: Path, archive: Path) -> None:
    with zipfile.ZipFile(archive, "w") as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(folder.parent).as_posix())


def test_download_from_a_loopback_mirror_checks_digests(tmp_path: Path) -> None:
    from datadojo.bench.download import MANIFEST, DownloadError, download_benchmark

    release = make_dacode(tmp_path / "release") / "da_code"
    mirror = tmp_path / "mirror"
    shutil.copytree(release / "configs", mirror / "configs")
    _zip_folder(release / "source", mirror / "source.zip")  # members source/<id>/…
    _zip_folder(release / "gold", mirror / "gold.zip")
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(mirror))
    handler.log_message = lambda *a: None  # type: ignore[method-assign]
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        cache = tmp_path / "cache"
        result = download_benchmark("dacode", url=url, cache_root=cache)
        assert sorted(f.name for f in result.files) == [
            "configs/eval/eval_all.jsonl", "configs/task/all.jsonl", "gold.zip", "source.zip"
        ]  # fmt: skip
        manifest = json.loads((cache / MANIFEST).read_text())
        assert manifest["complete"] and len(manifest["files"]["gold.zip"]["sha256"]) == 64
        tasks = list(get_benchmark("dacode").load(cache))
        assert [t.id for t in tasks] == [t["id"] for t in TASKS]
        # the release changed under the same name: the digest recorded on first use refuses it
        (mirror / "gold.zip").write_bytes((mirror / "gold.zip").read_bytes() + b"tampered")
        with pytest.raises(DownloadError, match=r"checksum mismatch for gold\.zip"):
            download_benchmark("dacode", url=url, cache_root=cache, force=True)
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_export_rl_tasks_carries_the_gold(tmp_path: Path) -> None:
    from datadojo.bench.export import export_rl_tasks
    from datadojo.jsonl import read_tasks
    from datadojo.reward.datamind import default_answer_check

    repo = make_dacode(tmp_path)
    report = export_rl_tasks(get_benchmark("dacode"), repo, tmp_path / "rl_tasks.jsonl")
    assert report.written == len(TASKS) and not report.skipped and not report.needs_judge
    for task in read_tasks(report.path):  # the gold travels in the file: no gold/ folder needed to score
        assert default_answer_check(task, gold_response(task)).correct, task.id
        assert not default_answer_check(task, "no outputs").correct


class _CountingSandbox:
    def __init__(self, n_files: int) -> None:
        self.n_files = n_files

    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> ExecResult:
        return ExecResult.make(f"files: {self.n_files}\n", "ok", isolation="test")


@contextlib.asynccontextmanager
async def _counting_sandboxes(task: Task):
    yield _CountingSandbox(len(task.files))


async def test_data_blind_audit_runs_on_dacode(tmp_path: Path) -> None:
    """With the data withheld, the scripted agent can still answer the text question (it guesses it from
    the question) but none of the file outputs: the audit reports 1 of 5 items answered blind."""
    repo = make_dacode(tmp_path)
    tasks = list(get_benchmark("dacode").load(repo))

    def reply(req: dict) -> str:
        msgs = req["messages"]
        task = next(t for t in tasks if t.question in msgs[1]["content"])
        if not any(m["role"] == "assistant" for m in msgs):
            return "<think>look</think><code>import os; print(os.listdir())</code>"
        blind = "files: 0" in msgs[-1]["content"]
        answer = WRONG.get(task.id, "no idea") if blind and task.id != "di-text-001" else gold_response(task)
        return f"<think>done</think><answer>{answer}</answer>"

    with ScriptedLLMServer(reply) as agent:
        cfg = EvalConfig(
            bench="dacode", data=repo, out=tmp_path / "run", model=f"openai:agent@{agent.base_url}",
            n_trials=1, max_turns=3, report=False, audit="data-blind",
        )  # fmt: skip
        result = await run_eval(cfg, sandboxes=_counting_sandboxes)
    overall = result.summary["audit"]["overall"]
    assert overall["raw"] == 1.0 and overall["blind"] == pytest.approx(1 / 5)
    assert overall["data_dependent"] == pytest.approx(4 / 5)
    verdicts = {it["id"]: it["verdict"] for it in result.summary["audit"]["items"]}
    assert verdicts["di-text-001"] == "answered blind" and verdicts["dm-csv-001"] == "needs data"

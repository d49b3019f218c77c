"""The HTML and Markdown reports: rendered in headless Chromium, checked for what is on the page."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.bench.dabench import DABench, gold_response
from datadojo.cli.app import app
from datadojo.eval.harness import EvalConfig, run_eval
from datadojo.eval.report import load_run, render_html, render_markdown, write_report
from datadojo.jsonl import iter_jsonl
from datadojo.llm import load_backend
from datadojo.runs.charts import bar_chart_svg, histogram_svg
from datadojo.sandbox.result import ExecResult
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import Task

MARKER = "REPORT_MARKER_4711"
HOSTILE = "</pre><script>document.title='pwned'</script>"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


class _Dom(HTMLParser):
    """Every element with its attributes and its text (nested text included)."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], list[str]]] = []
        self._open: list[tuple[str, dict[str, str], list[str]]] = []

    def handle_starttag(self, tag, attrs):
        el = (tag, {k: v or "" for k, v in attrs}, [])
        self.elements.append(el)
        if tag not in ("meta", "br", "img", "input", "link", "rect", "line"):
            self._open.append(el)

    def handle_endtag(self, tag):
        for i in range(len(self._open) - 1, -1, -1):
            if self._open[i][0] == tag:
                del self._open[i:]
                break

    def handle_data(self, data):
        for el in self._open:
            el[2].append(data)

    def find(self, tag: str, **attrs: str) -> list[tuple[dict[str, str], str]]:
        out = []
        for t, a, text in self.elements:
            if t == tag and all(
                (v in a.get("class", "").split()) if k == "class_" else a.get(k) == v
                for k, v in attrs.items()
            ):
                out.append((a, "".join(text)))
        return out

    def find_class(self, tag: str, cls: str) -> list[str]:
        return [
            "".join(text) for t, a, text in self.elements if t == tag and cls in a.get("class", "").split()
        ]


class _FakeSandbox:
    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> ExecResult:
        return ExecResult.make(f"{HOSTILE}\n", "ok", isolation="test")


@contextlib.asynccontextmanager
async def _sandboxes(task: Task):
    yield _FakeSandbox()


@pytest.fixture
async def run_dir(tmp_path, shared_data) -> Path:
    dabench = shared_data("dabench", "da-dev-questions.jsonl").parent
    tasks = list(DABench().load(dabench))[:3]
    right = {tasks[0].question, tasks[1].question}

    def reply(req: dict) -> str:
        msgs = req["messages"]
        task = next(t for t in tasks if t.question == msgs[1]["content"])
        if not any(m["role"] == "assistant" for m in msgs):
            return f"<think>look at the data</think><code>print('{MARKER}')</code>"
        answer = gold_response(task) if task.question in right else "@x[wrong]"
        return f"<think>conclude</think><answer>{answer}</answer>"

    with ScriptedLLMServer(reply) as server:
        backend = load_backend(f"openai:fake@{server.base_url}")
        cfg = EvalConfig(bench="dabench", data=dabench, out=tmp_path / "run", model="openai:fake", n_trials=2,
                         limit=3, concurrency=3)  # fmt: skip
        await run_eval(cfg, backend=backend, sandboxes=_sandboxes)
        await backend.aclose()
    return tmp_path / "run"


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip(
            "chromium absent: `DATADOJO_CHROMIUM=1 bash scripts/install.sh` (or apt-get install chromium) "
            "installs it; only the tests that render the HTML reports in a browser use it"
        )
    return exe


def _dump_dom(exe: str, page: Path, profile: Path) -> str:
    cmd = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.resolve().as_uri()]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def test_html_report_renders_in_chromium(run_dir, tmp_path):
    exe = _chromium()
    summary, rows, _ = load_run(run_dir)
    dom = _Dom()
    dom.feed(_dump_dom(exe, run_dir / "report.html", tmp_path / "profile"))
    title = dom.find("title")[0][1]
    assert "dabench" in title and "pwned" not in title  # no script ran
    assert not dom.find("script")
    pass1 = dom.find("td", **{"data-metric": "pass@1"})
    assert [t for _, t in pass1] == [f"{summary['metrics']['pass@1'] * 100:.2f}%"]
    assert summary["metrics"]["pass@1"] == pytest.approx(2 / 3)
    turns = dom.find("td", **{"data-metric": "avg_turns"})
    assert [t for _, t in turns] == [f"{summary['metrics']['avg_turns']:.2f}"]
    # the trajectory viewer: one collapsible entry per trial, wrong ones first, with code and observation
    entries = dom.find("details", class_="traj")
    assert len(entries) == len(rows) == 6
    assert [a["data-correct"] for a, _ in entries] == ["false"] * 2 + ["true"] * 4
    codes = dom.find_class("pre", "code")
    assert len(codes) == 6 and all(MARKER in c for c in codes)
    observations = dom.find_class("pre", "obs")
    assert observations and all(HOSTILE in o for o in observations)  # shown as text, not markup
    assert any("look at the data" in t for t in dom.find_class("pre", "thought"))
    assert len(dom.find("svg")) >= 2


def test_markdown_and_report_command(run_dir):
    (run_dir / "report.html").unlink()
    (run_dir / "report.md").unlink()
    res = CliRunner().invoke(app, ["report", str(run_dir)])
    assert res.exit_code == 0, res.output
    md = (run_dir / "report.md").read_text()
    summary, rows, _ = load_run(run_dir)
    assert f"| pass@1 (mean over trials) | {summary['metrics']['pass@1'] * 100:.2f}% |" in md
    wrong = [r for r in rows if not r["correct"]]
    assert f"## Trials not fully correct ({len(wrong)})" in md
    assert all(f"`{r['id']}` trial {r['trial']}" in md for r in wrong)
    assert (run_dir / "report.html").read_text().count('class="traj"') == len(rows)
    assert render_markdown(summary, rows) == md
    # the totals are labelled with the scoring rule and the docs section listing its deviations
    assert summary["rule"]["name"] == "official"
    assert (
        "## Totals under scoring rule `official`" in md and "docs/evaluation.md#rule-dabench-official" in md
    )
    html_text = (run_dir / "report.html").read_text()
    assert "scoring rule" in html_text and "docs/evaluation.md#rule-dabench-official" in html_text


def test_report_command_on_a_folder_without_a_run(tmp_path):
    res = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 2 and "summary.json" in res.output


def test_viewer_limit_and_rebuild(run_dir):
    write_report(run_dir, max_trajectories=2)
    html_text = (run_dir / "report.html").read_text()
    assert html_text.count('class="traj"') == 2 and "Showing 2 of 6" in html_text
    assert len(list(iter_jsonl(run_dir / "scores.jsonl"))) == 6


def test_svg_plots():
    svg = bar_chart_svg([("<b>cat</b>", 0.5), ("full", 1.0), ("over", 3.0)], title="t & u", width=520)
    dom = _Dom()
    dom.feed(svg)
    bars = [float(a["width"]) for a, _ in dom.find("rect", fill="#3b6fd8")]
    track = float(dom.find("rect", fill="#eef0f4")[0][0]["width"])
    assert bars == pytest.approx([track / 2, track, track], abs=0.1)  # clipped at max_value
    assert "&lt;b&gt;cat&lt;/b&gt;" in svg and "t &amp; u" in svg
    hist = histogram_svg([1, 2, 2, 2, 5], title="turns")
    dom = _Dom()
    dom.feed(hist)
    heights = [float(a["height"]) for a, _ in dom.find("rect")]
    assert len(heights) == 5  # bins 1..5, empty ones included
    assert heights[1] == max(heights) and heights[2] == heights[3] == 0.0
    assert heights[0] == pytest.approx(heights[1] / 3, abs=0.1)
    assert "no data" in histogram_svg([], title="x") and "no data" in bar_chart_svg([], title="x")


def test_a_limited_run_says_how_many_of_the_benchmarks_tasks_it_ran(run_dir, shared_data):
    # the fixture ran --limit 3 of DABench's dev questions: one per non-empty line of the benchmark's file
    questions = shared_data("dabench", "da-dev-questions.jsonl")
    total = sum(1 for line in questions.read_text().splitlines() if line.strip())
    assert total > 3
    summary, _, _ = load_run(run_dir)
    assert summary["n_tasks"] == 3 and summary["n_tasks_total"] == total
    assert f"3 of {total} tasks" in (run_dir / "report.md").read_text()
    assert f"3 of {total} tasks" in (run_dir / "report.html").read_text()
    # a run over every task says just "N tasks", not "N of N"
    whole = {**summary, "n_tasks_total": 3}
    assert "3 tasks" in render_markdown(whole, []) and " of 3 tasks" not in render_markdown(whole, [])


def test_trials_are_listed_in_natural_id_order(run_dir):
    # ids as text sort 0, 105, 108, 5; a reader looks for 5 before 105
    summary, _, _ = load_run(run_dir)
    ids = ["105", "5", "0", "108", "q10", "q9"]
    rows = [{"id": i, "trial": 0, "correct": False, "reason": "wrong"} for i in ids]
    md = render_markdown(summary, rows)
    listed = [line.split("`")[1] for line in md.splitlines() if line.startswith("- `")]
    assert listed == ["0", "5", "105", "108", "q9", "q10"]
    html_text = render_html(summary, rows, [])
    shown = [html_text.index(f'data-task="{i}"') for i in ["0", "5", "105", "108", "q9", "q10"]]
    assert shown == sorted(shown)

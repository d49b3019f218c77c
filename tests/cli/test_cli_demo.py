"""``datadojo demo``: the whole pipeline end to end on example data it generates, checked against its files.

One end-to-end run (module fixture) with a small task budget; the checks compare what the command printed
with the files each stage wrote (solver trajectories, scored run folder, evaluation summary, report).
Nothing here depends on the machine's speed: budgets are counts and no check reads a time.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.demo import DemoConfig, DemoError, ensure_example_data, find_examples
from datadojo.demo.examples import EXAMPLE_SOURCES
from datadojo.demo.pipeline import _prepare_out
from datadojo.jsonl import iter_jsonl, read_trajectories

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()
N_TASKS = 6


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append(tag)
        if a.get("href"):
            self.hrefs.append(str(a["href"]))
        if a.get("id"):
            self.ids.add(str(a["id"]))


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """The demo on a copy of ``examples/`` holding only ``make_examples.py`` (so it must generate the data)."""
    base = tmp_path_factory.mktemp("demo")
    examples = base / "examples"
    examples.mkdir()
    shutil.copy(REPO / "examples" / "make_examples.py", examples / "make_examples.py")
    out = base / "out"
    args = ["demo", "--out", str(out), "--examples", str(examples), "--tasks", str(N_TASKS)]
    # seed 5 with these budgets gives tasks the solver solves in every copy (figures depend on the seed only)
    more = ["--candidates", "60", "--workers", "1", "--seed", "5"]
    res = runner.invoke(app, [*args, *more], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output + repr(res.exception)
    return out, examples, res.output


def _files(out: Path) -> dict[str, Path]:
    """The files each stage wrote, as ``demo.json`` records them (each in its engine stage folder)."""
    files = json.loads((out / "demo.json").read_text())["files"]
    return {name: out / rel for name, rel in files.items()}


def test_demo_generates_the_data_and_prints_each_stage(demo_run: tuple[Path, Path, str]) -> None:
    out, examples, printed = demo_run
    for name in EXAMPLE_SOURCES:
        assert (examples / "data" / name).exists()
    for i, label in enumerate(["example data", "profile the files", "EnvLunch warm-up tasks", "reference solver",
                               "run every program in the sandbox", "oracle agent on shop-sql", "HTML report"], 1):  # fmt: skip
        assert f"[{i}/7] {label}" in printed
    assert "generated with make_examples.py" in printed
    assert "What the demo did" in printed and f"report: {out / 'report.html'}" in printed
    assert "datadojo eval shop-sql --data" in printed and "datadojo ask" in printed


def test_printed_figures_match_the_files(demo_run: tuple[Path, Path, str]) -> None:
    out, _, printed = demo_run
    files = _files(out)
    tasks = [r for _, r in iter_jsonl(files["tasks"])]
    assert len(tasks) == N_TASKS
    n_sql = sum(t["extra"]["backend"] == "sql" for t in tasks)
    assert f"{N_TASKS} tasks ({n_sql} SQL, {N_TASKS - n_sql} pandas)" in printed
    copy_dirs = [Path(files["tasks"].parent / c) for t in tasks for c in t["extra"]["copies"]]
    assert copy_dirs and all(d.is_dir() for d in copy_dirs)

    solver = list(read_trajectories(files["solver"]))
    found = sum(t.final_answer is not None for t in solver)
    assert found >= 1  # so the sandbox scoring below ran programs in copies
    assert f"a program for {found}/{N_TASKS} tasks" in printed

    rows = [r for _, r in iter_jsonl(files["scores"])]
    solved = sum(r["correct"] for r in rows)
    mean_r = sum(r["rewards"]["envlunch"] for r in rows) / len(rows)
    runs = sum(len(t["extra"]["copies"]) for t, s in zip(tasks, solver, strict=True) if s.final_answer)
    m = re.search(r"(\d+)/(\d+) solved in every copy \((\d+) sandbox runs\), mean R ([0-9.]+)", printed)
    assert m is not None, printed
    assert (int(m[1]), int(m[2]), int(m[3])) == (solved, N_TASKS, runs)
    assert float(m[4]) == pytest.approx(mean_r, abs=5e-4)

    summary = json.loads((files["eval"] / "summary.json").read_text())
    assert summary["benchmark"] == "shop-sql" and summary["official"]["accuracy"] == 1.0  # the oracle: 100%
    assert summary["metrics"]["success_rate"] == 1.0 and summary["official"]["gold_errors"] == 0
    assert f"execution accuracy 100% on {summary['n_tasks']} questions" in printed

    demo = json.loads((out / "demo.json").read_text())
    assert [s["name"] for s in demo["stages"]] == [
        "examples", "profile", "build", "solve", "score", "text2sql", "report"
    ]  # fmt: skip
    stage = {s["name"]: s for s in demo["stages"]}
    assert stage["score"]["figures"]["solved"] == solved and stage["solve"]["figures"]["found"] == found
    assert stage["text2sql"]["figures"]["execution_accuracy"] == 1.0
    # the stages ran on the recipe engine: one committed stage folder each, with its manifest and counts
    committed = [json.loads(line) for line in (out / "stages" / "stages.jsonl").read_text().splitlines()]
    assert [c["stage"] for c in committed] == ["examples", "profile", "build", "solve", "score", "text2sql"]
    manifests = {
        c["stage"]: json.loads((out / "stages" / c["path"] / "manifest.json").read_text()) for c in committed
    }
    assert manifests["build"]["counts"]["out"] == N_TASKS and manifests["score"]["counts"]["out"] == solved
    assert files["tasks"].parent == out / "stages" / committed[2]["path"]
    assert json.loads((out / "run.json").read_text())["settings"] == {"recipe": "demo"}


def test_report_links_everything(demo_run: tuple[Path, Path, str]) -> None:
    out, _, _ = demo_run
    page = _Links()
    page.feed((out / "report.html").read_text(encoding="utf-8"))
    assert "script" not in page.tags
    files = [h for h in page.hrefs if not h.startswith("#")]
    for href in files:
        assert (out / href).exists(), href
    for href in page.hrefs:
        if href.startswith("#"):
            assert href[1:] in page.ids, href
    where = {k: str(p.relative_to(out)) for k, p in _files(out).items()}
    for needed in (where["scored_report"], where["eval"] + "/report.html", where["tasks"], where["solver"],
                   where["profiles"] + "/shop.sqlite.txt"):  # fmt: skip
        assert needed in files
    assert "Table customers (60 rows" in (out / where["profiles"] / "shop.sqlite.txt").read_text()
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Table customers (60 rows" in html  # the profile text is on the page itself
    solved = [r for _, r in iter_jsonl(out / where["scores"]) if r["correct"]]
    # a task the solver's program solved in every copy is shown with that program
    assert ("One task:" in html) == bool(solved)
    if solved:
        shown = re.search(r"One task: <code>([^<]+)</code>", html)
        assert shown is not None and shown[1] in {r["id"] for r in solved}
    for page in (out / where["scored_report"], out / where["eval"] / "report.html"):
        assert "<details" in page.read_text(encoding="utf-8")


def test_report_renders_in_chromium(demo_run: tuple[Path, Path, str], tmp_path: Path) -> None:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip(
            "chromium absent: `DATADOJO_CHROMIUM=1 bash scripts/install.sh` (or apt-get install chromium) "
            "installs it; only the tests that render the HTML reports in a browser use it"
        )
    out, _, _ = demo_run
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}",
           "--dump-dom", (out / "report.html").resolve().as_uri()]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    dom = _Links()
    dom.feed(res.stdout)
    assert {"stages", "data", "warmup", "text2sql", "warmup-scores"} <= dom.ids


def test_out_folder_rules(tmp_path: Path) -> None:
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    res = runner.invoke(app, ["demo", "--out", str(other)])
    assert res.exit_code == 2 and "not empty and not a previous demo" in res.output
    assert (other / "notes.txt").read_text() == "keep me"
    previous = tmp_path / "previous"
    (previous / "stages" / "build").mkdir(parents=True)
    (previous / "demo.json").write_text("{}")
    (previous / "stages" / "build" / "old.jsonl").write_text("")
    (previous / "plan.json").write_text("{}")
    (previous / "keep.txt").write_text("")
    _prepare_out(
        previous
    )  # a previous demo: its outputs go, anything else stays; the engine's record is made
    assert sorted(p.name for p in previous.iterdir()) == ["keep.txt", "run.json"]
    # a run that stops part-way (here: the examples cannot be generated) leaves a folder a rerun accepts
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "make_examples.py").write_text("raise SystemExit('no disk')\n")
    for _ in range(2):
        res = runner.invoke(app, ["demo", "--out", str(tmp_path / "run"), "--examples", str(broken)])
        assert res.exit_code == 2 and "make_examples.py failed (exit 1): no disk" in res.output, res.output
    interrupted = tmp_path / "interrupted"
    (interrupted / "profiles").mkdir(parents=True)
    (interrupted / "demo.json").write_text('{"status": "running"}')  # written first by every run
    _prepare_out(interrupted)
    assert [p.name for p in interrupted.iterdir()] == ["run.json"]


def test_examples_errors(tmp_path: Path) -> None:
    with pytest.raises(DemoError, match="not a DataDojo examples folder"):
        find_examples(tmp_path)
    (tmp_path / "data").mkdir()
    with pytest.raises(DemoError, match=r"missing .*sales\.csv"):
        ensure_example_data(tmp_path)
    (tmp_path / "make_examples.py").write_text("raise SystemExit('boom: cannot write')\n")
    with pytest.raises(DemoError, match=r"make_examples\.py failed \(exit 1\): boom: cannot write"):
        ensure_example_data(tmp_path)
    assert find_examples(REPO / "examples") == REPO / "examples"
    with pytest.raises(DemoError, match="n_tasks must be >= 1"):
        DemoConfig(n_tasks=0)


def test_without_a_checkout_the_demo_writes_the_examples_with_the_packaged_generator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed from a wheel and run in an empty folder: no ./examples, no checkout beside the package.
    The demo's own folder gets the same files the checkout's script writes (same seed, same bytes)."""
    import datadojo.demo.examples as examples_mod

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(examples_mod, "CHECKOUT_EXAMPLES", tmp_path / "site-packages" / "examples")
    own = tmp_path / "out" / "examples"
    with pytest.raises(DemoError, match="no DataDojo examples folder found"):
        find_examples()
    assert find_examples(fallback=own) == own
    ex = ensure_example_data(own, packaged=True)
    assert ex.generated and ex.data == own / "data"
    for name in EXAMPLE_SOURCES:
        assert (own / "data" / name).exists()
    for name in ("sales.csv", "shop.sqlite", "station_survey/raw/measurements.csv"):
        assert (own / "data" / name).read_bytes() == (REPO / "examples" / "data" / name).read_bytes()
    assert (own / "scidata_tasks.jsonl").read_text() == (
        REPO / "examples" / "scidata_tasks.jsonl"
    ).read_text()
    assert not ensure_example_data(own, packaged=True).generated  # present now: not written again

"""``OUT/report.html`` of ``datadojo demo``: one page that says what each stage did and links to all of it.

The two run folders keep their own reports (:mod:`datadojo.eval.report`: the warm-up scores and the
text-to-SQL evaluation, each with a viewer for every trajectory); this page is the table of contents above
them: the stage table, the profile text the agent's prompt shows for each example source, one warm-up task
with the program that solved it, the text-to-SQL figures, and the commands to try next. Static and
self-contained like the other reports (inline CSS, no script), so the folder can be copied anywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from datadojo.demo.result import DemoResult
from datadojo.fs import write_text_atomic
from datadojo.jsonl import iter_jsonl
from datadojo.runs.html import CSS as _CSS
from datadojo.runs.html import escape as _e
from datadojo.runs.html import pct as _pct
from datadojo.runs.html import table_html as _table

__all__ = ["render_page", "write_page"]

_EXTRA_CSS = """
pre.cmd{background:#1d2330;color:#e8ecf3;white-space:pre;overflow-x:auto;word-break:normal}
pre.cmd .comment{color:#9aa4b8}
#stages td:first-child{white-space:nowrap}
td a,p a{color:#2456b8}
.stage-num{color:#6b7385;font-variant-numeric:tabular-nums}
"""


def _link(href: str | None, text: str | None = None) -> str:
    if not href:
        return ""
    return f'<a href="{_e(href)}">{_e(text or href)}</a>'


def _read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [r for _, r in iter_jsonl(path) if isinstance(r, dict)]


def _example_task(result: DemoResult) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A warm-up task the solver's program solved in every copy (an SQL one when there is one)."""
    out, files = result.out, result.files
    rows = (
        [r for r in _read_rows(out / files.get("scores", "")) if r.get("correct")]
        if files.get("scores")
        else []
    )
    if not rows:
        return None
    rows.sort(key=lambda r: (not str(r.get("category", "")).startswith("sql"), str(r.get("id"))))
    tasks = {str(t.get("id")): t for t in _read_rows(out / files["tasks"])} if files.get("tasks") else {}
    task = tasks.get(str(rows[0].get("id")))
    return (task, rows[0]) if task is not None else None


#: Where each stage is described on this page (the score and text2sql stages link their own reports).
_ANCHORS = {"examples": "#data", "profile": "#data", "build": "#warmup", "solve": "#warmup"}


def _stage_table(result: DemoResult) -> str:
    rows = []
    for i, s in enumerate(result.stages, 1):
        rows.append(
            [
                f'<span class="stage-num">{i}</span> {_e(s.name)}',
                _e(s.title),
                _e(s.headline),
                f"{s.seconds:.1f}",
                _link(_ANCHORS.get(s.name) or s.link, "open"),
            ]
        )
    return _table(["stage", "what it does", "result", "seconds", ""], rows, table_id="stages", num_from=3)


def _profiles(result: DemoResult) -> list[str]:
    stage = result.stage("profile")
    files = stage.figures.get("files", [])
    out = [
        '<h2 id="data">Example data and what the agent sees</h2>',
        f"<p>The agent's system prompt describes each data file with its profile (at most "
        f"{stage.figures.get('budget_chars', '?'):,} characters): tables, column types and roles, "
        "ranges, top values, sample rows. These are the profiles of the example sources "
        f"(<code>{_e(result.stage('examples').figures.get('data'))}</code>).</p>",
        _table(
            ["source", "kind", "tables", "rows", "profile characters", ""],
            [
                [_e(f["name"]), _e(f["kind"]), _e(f["tables"]), _e(f"{f['rows']:,}"), _e(f"{f['chars']:,}"),
                 _link(f["profile"], "text")]
                for f in files
            ],
            table_id="profiles",
            num_from=2,
        ),
    ]  # fmt: skip
    for f in files:
        path = result.out / f["profile"]
        text = path.read_text(encoding="utf-8") if path.is_file() else "(missing)"
        out.append(f'<details class="traj"><summary>{_e(f["name"])}</summary><pre>{_e(text)}</pre></details>')
    return out


def _warmup(result: DemoResult) -> list[str]:
    build, solve, score = result.stage("build"), result.stage("solve"), result.stage("score")
    bf, sf = build.figures, score.figures
    copies = "/".join(str(k) for k in bf.get("copies_per_task", []))
    out = [
        '<h2 id="warmup">EnvLunch warm-up tasks</h2>',
        "<p>Verifiable agent tasks made from the shop database and the sales table with no annotation "
        "(EnvLunch): a random executable program is composed and run, and the task shows its output o*. "
        f"Each task has {copies} hidden counterfactual copies of its data (rows removed, measures rescaled); "
        "a submitted program is rewarded only if it reproduces the hidden program's results in every copy, "
        "so printing o* as constants earns nothing. The reference solver searched for programs "
        f"({solve.figures.get('max_candidates')} candidates per task at most); each program it found ran "
        "in the sandbox once per copy.</p>",
    ]
    rows = []
    for backend, f in (sf.get("by_backend") or {}).items():
        rows.append(
            [_e(backend), _e(f["tasks"]), _e(f["found"]), _e(f["solved"]), _e(f"{f['mean_reward']:.3f}")]
        )
    rows.append(
        ["all", _e(sf.get("tasks")), _e(solve.figures.get("found")), _e(sf.get("solved")),
         _e(f"{sf.get('mean_reward', 0.0):.3f}")]
    )  # fmt: skip
    out.append(
        _table(
            [
                "backend",
                "tasks",
                "program found (gives o* on the original data)",
                "solved in every copy",
                "mean reward R (Eq. 4)",
            ],
            rows,
            table_id="warmup-scores",
        )
    )
    example = _example_task(result)
    if example is not None:
        task, row = example
        out += [
            f"<h3>One task: <code>{_e(task.get('id'))}</code> ({_e(row.get('category'))})</h3>",
            '<div class="label">question (what the agent gets)</div>',
            f"<pre>{_e(task.get('question'))}</pre>",
            '<div class="label">the solver\'s program (reproduces o* in every hidden copy)</div>',
            f'<pre class="code">{_e(row.get("answer"))}</pre>',
        ]
    files = result.files
    shown = [
        ("tasks", "tasks.jsonl", ""),
        ("copies", "tasks.copies/ (original and copies)", "/"),
        ("solver", "solver.jsonl (trajectories)", ""),
        ("scored_report", "the scored run's report (every trajectory)", ""),
    ]
    links = [_link(files[k] + slash, text) for k, text, slash in shown if files.get(k)]
    out.append(
        "<p>Files (each stage's folder, <code>stages/STAGE/KEY/</code>): " + ", ".join(links) + ".</p>"
    )
    return out


def _text2sql(result: DemoResult) -> list[str]:
    stage = result.stage("text2sql")
    f = stage.figures
    out = [
        '<h2 id="text2sql">Text-to-SQL through the agent loop</h2>',
        f"<p>The bundled <code>shop-sql</code> set: {_e(f.get('tasks'))} questions about the shop database "
        "with gold SQL written for it. The oracle agent plays the model: its first turn runs the gold SQL "
        "in the sandbox, its second answers with the result. Everything between a model and a score is "
        "exercised — prompt, tag protocol, sandbox, trajectory recording, prediction extraction and the "
        "execution-accuracy scorer — so anything below 100% is a bug.</p>",
        _table(
            ["figure", "value"],
            [
                ["execution accuracy (EX)", _e(_pct(f.get("execution_accuracy")))],
                ["table match (DataMind)", _e(_pct(f.get("table_match")))],
                ["success rate (answered in budget)", _e(_pct(f.get("success_rate")))],
                ["average turns", _e(f"{f.get('avg_turns') or 0:.2f}")],
                ["gold queries that failed", _e(int(f.get("gold_errors") or 0))],
            ],
            table_id="text2sql-figures",
        ),
    ]
    per = f.get("per_category") or {}
    if per:
        out.append(
            _table(
                ["category", "EX"], [[_e(c), _e(_pct(v))] for c, v in sorted(per.items())], table_id="cats"
            )
        )
    out.append(f"<p>{_link(stage.link, 'The evaluation report')} shows every trajectory turn by turn.</p>")
    return out


def render_page(result: DemoResult) -> str:
    """The page (module docstring) as HTML text."""
    m = result.machine
    load = m.get("load_average")
    machine = f"{m.get('cpus')} CPUs" + (f", load average {load[0]:.2f} at the start" if load else "")
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f"<title>DataDojo demo</title><style>{_CSS}{_EXTRA_CSS}</style></head><body>",
        "<h1>DataDojo demo</h1>",
        f'<p class="muted">The whole pipeline on the bundled example data, with no model and no network: '
        f"{result.seconds:.1f} s on this machine ({_e(machine)}).</p>",
        "<h2>Stages</h2>",
        _stage_table(result),
        *_profiles(result),
        *_warmup(result),
        *_text2sql(result),
        "<h2>Next: the same with a model</h2>",
        "<p>Serve any model behind an OpenAI-compatible endpoint (vLLM, SGLang, Ollama, llama.cpp, a hosted "
        "API; see docs/llm.md), put its name and URL in place of <code>MODEL@http://localhost:8000/v1</code>, "
        "then:</p>",
        '<pre class="cmd">'
        + "\n\n".join(
            f'<span class="comment"># {_e(c["what"])}</span>\n{_e(c["command"])}'
            for c in result.next_commands
        )
        + "</pre>",
        f'<p class="muted">Settings: {_e(", ".join(f"{k}={v}" for k, v in result.config.items()))}. '
        "Generated by DataDojo (<code>datadojo demo</code>).</p>",
        "</body></html>",
    ]
    return "\n".join(parts)


def write_page(result: DemoResult) -> Path:
    """Write ``result.report`` (temp file + rename) and return its path."""
    path = Path(result.report)
    write_text_atomic(path, render_page(result))
    return path

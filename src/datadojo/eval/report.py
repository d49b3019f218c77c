"""Static reports of an evaluation run: one self-contained HTML file and a Markdown summary.

Why static and self-contained: a run folder is copied around (to a cluster's login node, into an issue,
onto a laptop on a train); the report must open from disk with no server, no JavaScript library from a
CDN and no internet. So the HTML carries its CSS inline, its plots as SVG generated here, and its
trajectory viewer as nested ``<details>`` elements (collapsible without any script).

Inputs are the files ``datadojo eval`` writes (``summary.json``, ``scores.jsonl``, ``trajectories.jsonl``;
see :mod:`datadojo.eval.harness`), so ``datadojo report DIR`` can rebuild the reports of any run folder.

* :func:`write_report` — read a run folder, write ``report.html`` and ``report.md`` (temp file + rename);
* :func:`render_html`, :func:`render_markdown` — the same from data in memory;
* the inline plots and the page's tables come from :mod:`datadojo.runs.charts` and :mod:`datadojo.runs.html`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from datadojo.eval.audit_report import audit_headline_rows, audit_html, audit_markdown
from datadojo.fs import write_text_atomic
from datadojo.jsonl import iter_jsonl, read_trajectories
from datadojo.runs.charts import bar_chart_svg, histogram_svg
from datadojo.runs.html import CSS as _CSS
from datadojo.runs.html import escape as _e
from datadojo.runs.html import natural_key
from datadojo.runs.html import pct as _pct
from datadojo.runs.html import table_html as _table
from datadojo.sandbox.result import reduced_isolation_banner
from datadojo.types import Trajectory

__all__ = [
    "COUNT_TOTALS",
    "behaviour_rows",
    "decision_rows",
    "load_run",
    "official_value",
    "render_html",
    "render_markdown",
    "tasks_shown",
    "write_report",
]

#: Trajectories shown in the HTML viewer (failed trials first); the rest are counted, not shown.
MAX_TRAJECTORIES = 1000
#: Longest text of one thought / code / observation shown in the viewer.
MAX_BLOCK_CHARS = 6000


# --- inputs -------------------------------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"{path}: not found; is this a `datadojo eval` output folder?") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data


def load_run(run_dir: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[Trajectory]]:
    """``summary.json``, the ``scores.jsonl`` rows and the trajectories of a run folder.

    The trajectories file is optional (a report can be built from scores alone); trajectories of
    (task, trial) pairs without a score row (other ``--limit``/``-n``) are left out.
    """
    run = Path(run_dir)
    summary = _read_json(run / "summary.json")
    scores_path = run / "scores.jsonl"
    if not scores_path.exists():
        raise FileNotFoundError(f"{scores_path}: not found; is this a `datadojo eval` output folder?")
    rows = [r for _, r in iter_jsonl(scores_path) if isinstance(r, dict)]
    keys = {(str(r.get("id")), int(r.get("trial", 0))) for r in rows}
    trajs: list[Trajectory] = []
    traj_path = run / "trajectories.jsonl"
    if traj_path.exists():
        seen: set[tuple[str, int]] = set()
        for t in read_trajectories(traj_path):
            if t.key in keys and t.key not in seen:
                seen.add(t.key)
                trajs.append(t)
    return summary, rows, trajs


# --- formatting helpers --------------------------------------------------------------------------------


def _rule_label(summary: dict[str, Any]) -> str:
    """``name: title`` of the scoring rule a summary was computed with (older summaries: unknown)."""
    rule = summary.get("rule") or {}
    return f"{rule['name']}: {rule.get('title', '')}" if rule.get("name") else "not recorded"


def _totals_heading(summary: dict[str, Any]) -> str:
    rule = (summary.get("rule") or {}).get("name")
    return (
        f"Totals under scoring rule `{rule}` (averaged over trials)"
        if rule
        else "Totals (averaged over trials)"
    )


def _num(v: Any, digits: int = 2) -> str:
    return "n/a" if v is None else f"{float(v):.{digits}f}"


def _cut(text: str, limit: int = MAX_BLOCK_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit} more characters not shown]"


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


#: Official totals that are counts, not shares.
COUNT_TOTALS = ("gold_errors", "judge_errors", "hidden")


def official_value(key: str, value: Any) -> str:
    """An official total as shown: a count as a number, a share as a percentage."""
    return f"{float(value):g}" if key in COUNT_TOTALS else _pct(value)


def behaviour_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """SciDataSailor Table 4's figures (``summary["behaviour"]``, :mod:`datadojo.eval.behaviour`)."""
    b = summary.get("behaviour") or {}
    if not b:
        return []
    # over no code call at all, an error rate or "100 % error-free" would read as a success
    no_calls = not b.get("n_calls")
    return [
        ("total tokens (prompt + completion)", f"{int(b.get('total_tokens') or 0):,}"),
        ("average steps per trajectory", _num(b.get("avg_steps"))),
        ("code calls", str(b.get("n_calls"))),
        ("code error rate", "no code calls" if no_calls else _pct(b.get("code_error_rate"))),
        ("error-free trajectories", "no code calls" if no_calls else _pct(b.get("error_free_rate"))),
        ("mean length of error chains", _num(b.get("mean_error_chain"))),
        ("AST depth per code block", _num(b.get("ast_depth"))),
        ("branches and loops per code block", _num(b.get("branches_loops"))),
        ("lines of code per code block", _num(b.get("lines_of_code"))),
        ("unique imports per trajectory", _num(b.get("unique_imports"))),
    ]


def _headline(summary: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(key, label, formatted value)`` for the summary table, in reading order."""
    m = summary.get("metrics", {})
    n = summary.get("n_trials")
    rows = [("pass@1", "pass@1 (mean over trials)", _pct(m.get("pass@1")))]
    for k in summary.get("ks", []):
        if k != 1 and f"pass@{k}" in m:
            rows.append((f"pass@{k}", f"pass@{k} (unbiased estimator)", _pct(m[f"pass@{k}"])))
    rows += [
        (
            "any_of_n",
            f"any of {n}" + (f" (DataMind's pass@{n})" if n and n > 1 else ""),
            _pct(m.get("any_of_n")),
        ),
        ("mean_score", "mean credit", _pct(m.get("mean_score"))),
        ("success_rate", "success rate (answered within the turn budget)", _pct(m.get("success_rate"))),
        ("avg_turns", "average turns", _num(m.get("avg_turns"))),
        ("avg_tokens", "average tokens (prompt + completion)", _num(m.get("avg_tokens"), 0)),
    ]
    rewards = summary.get("rewards") or {}
    if rewards.get("mean_total") is not None:
        rows.append(("mean_reward", "mean DataMind reward R", _num(rewards["mean_total"], 3)))
        rows.append(("format_ok", "well-formed trajectories (r_format = 1)", _pct(rewards.get("format_ok"))))
    if rewards.get("mean_envlunch") is not None:  # synth/envlunch/report.py: headline_rows, the CLI's figure
        rows.append(("mean_reward", "mean EnvLunch reward R (Eq. 4)", _num(rewards["mean_envlunch"], 3)))
    rows.append(("missing_trials", "trials without a trajectory", str(summary.get("missing_trials", 0))))
    failed = (summary.get("server_failures") or {}).get("trials")
    if failed:
        rows.append(("server_failures", "trials the model server failed (not in the figures)", str(failed)))
    rows += audit_headline_rows(summary)
    rows += decision_rows(summary)
    return rows


def decision_rows(summary: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Which scorer decided the verdicts (with counts) and the undecided share: the share of verdicts that
    rest on a rule's guess because the rule was not certain and no judge was asked (``summary["decisions"]``,
    :func:`datadojo.eval.harness.decided_by_counts`). Older summaries have none: no rows."""
    d = summary.get("decisions") or {}
    if not d.get("decided_by"):
        return []
    who = ", ".join(f"{k} {v}" for k, v in d["decided_by"].items())
    share = d.get("undecided_share")
    return [
        ("decided_by", "verdicts decided by", who),
        (
            "undecided_share",
            "undecided share (rule guesses, no judge)",
            f"{_pct(share)} ({d.get('undecided', 0)})",
        ),
    ]


def _question(traj: Trajectory | None) -> str:
    if traj is None:
        return ""
    return next((str(m.get("content", "")) for m in traj.prompt if m.get("role") == "user"), "")


def _turn_html(index: int, turn: Any) -> str:
    kind = turn.action.kind
    parts = [
        f'<details class="turn" open><summary>turn {index + 1} · {_e(kind)}'
        + (f" · {_e(turn.observation.status)}" if turn.observation is not None else "")
        + "</summary>"
    ]
    if turn.thought:
        parts.append(
            f'<div class="label">thought</div><pre class="thought">{_e(_cut(turn.thought.strip()))}</pre>'
        )
    if kind in ("code", "sql"):
        lang = "python" if kind == "code" else "sql"
        parts.append(
            f'<div class="label">{lang}</div><pre class="code language-{lang}">{_e(_cut(turn.action.text))}</pre>'
        )
    elif kind == "answer":
        parts.append(
            f'<div class="label">answer</div><pre class="answer">{_e(_cut(turn.action.text.strip()))}</pre>'
        )
    else:
        parts.append(f'<div class="label">malformed turn</div><pre>{_e(_cut(turn.raw))}</pre>')
        if turn.invalid_reason:
            parts.append(f'<div class="muted">{_e(turn.invalid_reason)}</div>')
    if turn.observation is not None:
        cls = "obs error" if turn.observation.error else "obs"
        parts.append(
            f'<div class="label">observation ({_e(turn.observation.status)})</div>'
            f'<pre class="{cls}">{_e(_cut(turn.observation.text.rstrip()) or "(no output)")}</pre>'
        )
    parts.append("</details>")
    return "".join(parts)


def _trajectory_html(row: dict[str, Any], traj: Trajectory | None) -> str:
    ok = bool(row.get("correct"))
    mark = '<span class="ok">✓</span>' if ok else '<span class="bad">✗</span>'
    head = (
        f"{mark} {_e(row.get('id'))} · trial {_e(row.get('trial'))} · score {_num(row.get('score'), 3)} · "
        f"{_e(row.get('stop_reason'))} · {_e(row.get('turns'))} turn(s)"
    )
    rewards = row.get("rewards") or {}
    reward_text = ", ".join(f"{k} {v:g}" for k, v in rewards.items()) if rewards else "n/a"
    parts = [
        f'<details class="traj" data-task="{_e(row.get("id"))}" data-trial="{_e(row.get("trial"))}" '
        f'data-correct="{str(ok).lower()}"><summary>{head}</summary>',
        f'<div class="label">question</div><pre>{_e(_cut(_question(traj)))}</pre>'
        if traj is not None
        else "",
        f'<div class="label">gold</div><pre>{_e(_cut(_as_text(row.get("gold"))))}</pre>',
        f'<div class="label">scored prediction ({_e(row.get("prediction_source"))})</div>'
        f"<pre>{_e(_cut(_as_text(row.get('answer'))) or '(none)')}</pre>",
        f"<div>scorer ({_e(row.get('metric'))}): {_e(row.get('reason'))}</div>",
        f"<div>reward ({_e(row.get('reward') or 'datamind')}): {_e(reward_text)}</div>",
    ]
    if row.get("error"):
        parts.append(f'<div class="bad">error: {_e(row["error"])}</div>')
    if traj is not None:
        parts.extend(_turn_html(i, t) for i, t in enumerate(traj.turns))
    parts.append("</details>")
    return "".join(parts)


def tasks_shown(summary: dict[str, Any]) -> str:
    """``15 of 93 tasks`` for a run limited to the first 15 of the benchmark's 93 (``--limit``), else
    ``93 tasks``: a figure over 15 tasks must not read as the benchmark's."""
    n = summary.get("n_tasks")
    total = summary.get("n_tasks_total")
    if isinstance(total, int) and isinstance(n, int) and total > n:
        return f"{n} of {total} tasks"
    return f"{n} tasks"


def _settings(summary: dict[str, Any]) -> list[tuple[str, Any]]:
    """The run's settings as (label, value); ``None`` where a setting does not apply (e.g. no agent loop)."""
    agent_config = summary.get("agent_config") or {}
    return [
        ("agent", summary.get("agent")),
        ("data", summary.get("data")),
        ("tasks", tasks_shown(summary) if summary.get("n_tasks") is not None else None),
        ("trials per task", summary.get("n_trials")),
        ("turn budget", agent_config.get("max_turns")),
        ("dialect", agent_config.get("dialect")),
        ("metric", summary.get("metric")),
        ("scoring rule", _rule_label(summary) if summary.get("rule") else None),
        ("deviations from the benchmark's code", (summary.get("rule") or {}).get("doc")),
        ("judge", summary.get("judge")),
        ("sandbox isolation (cells per level)", _isolation_label(summary)),
        ("scored at", summary.get("scored_at")),
    ]


def _isolation_label(summary: dict[str, Any]) -> str | None:
    levels = summary.get("isolation") or {}
    return ", ".join(f"{k}: {v}" for k, v in levels.items()) or None


def server_failure_banner(summary: dict[str, Any]) -> str | None:
    """The warning for trials the model server failed (``llm_error``; :func:`~datadojo.eval.harness.score_run`):
    they are not agent failures, so the page shows them apart and says they are out of the figures."""
    sf = summary.get("server_failures") or {}
    n = int(sf.get("trials") or 0)
    if not n:
        return None
    total = int(summary.get("n_tasks") or 0) * int(summary.get("n_trials") or 0)
    what = f"{n} of {total} trials ({sf.get('tasks', '?')} tasks) ended on a model-server failure (llm_error)"
    if sf.get("excluded"):
        return (
            f"{what}: they are not agent failures and are left out of pass@k, the credit, the rewards and the "
            "behaviour figures until rerun. Rerun the same command to sample them again."
        )
    return f"{what}: every trial failed on the server, so the figures below say nothing about the agent."


def _banners(summary: dict[str, Any]) -> list[str]:
    return [
        t for t in (server_failure_banner(summary), reduced_isolation_banner(summary.get("isolation"))) if t
    ]


def _banner_html(summary: dict[str, Any]) -> str:
    return "".join(
        f'<p class="banner" style="background:#fdd;padding:.5em;font-weight:bold">{_e(text)}</p>'
        for text in _banners(summary)
    )


def render_html(
    summary: dict[str, Any],
    rows: Sequence[dict[str, Any]],
    trajectories: Sequence[Trajectory] = (),
    *,
    max_trajectories: int = MAX_TRAJECTORIES,
) -> str:
    """The whole HTML report (module docstring) as a string."""
    bench = str(summary.get("benchmark", "?"))
    model = str(summary.get("model", "?"))
    m = summary.get("metrics", {})
    out = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f"<title>DataDojo evaluation · {_e(bench)} · {_e(model)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(bench)} · {_e(model)}</h1>",
        _banner_html(summary),
        f'<p class="muted">{_e(summary.get("description", ""))}</p>',
        _table(
            ["setting", "value"],
            [
                [_e(k), _e(v)]
                for k, v in _settings(summary)
                if v is not None  # a setting that does not apply to this run is left out, not shown empty
            ],
            num_from=99,
        ),
        "<h2>Summary</h2>",
    ]
    out.append('<table id="summary"><thead><tr><th>figure</th><th>value</th></tr></thead><tbody>')
    for key, label, value in _headline(summary):
        out.append(f'<tr><td>{_e(label)}</td><td class="num" data-metric="{_e(key)}">{_e(value)}</td></tr>')
    out.append("</tbody></table>")

    official = summary.get("official") or {}
    if official:
        out.append(f"<h2>{_e(_totals_heading(summary))}</h2>")
        out.append(_table(["figure", "value"], [
            [_e(k), _e(official_value(k, v))] for k, v in official.items()
        ], table_id="official"))  # fmt: skip
    out.append(audit_html(summary))
    behaviour = behaviour_rows(summary)
    if behaviour:
        out.append("<h2>Behaviour (SciDataSailor Table 4)</h2>")
        out.append(_table(["figure", "value"], [[_e(k), _e(v)] for k, v in behaviour], table_id="behaviour"))

    per_cat = m.get("per_category") or {}
    turns = [int(r.get("turns") or 0) for r in rows if r.get("stop_reason") != "missing"]
    cat_items = sorted(
        ((c, s.get("pass@1", 0.0)) for c, s in per_cat.items()), key=lambda x: (-x[1], natural_key(x[0]))
    )
    out.append('<h2>Plots</h2><div class="plots">')
    if cat_items:
        out.append(bar_chart_svg(cat_items[:40], title="pass@1 by category"))
    stops = Counter(str(r.get("stop_reason")) for r in rows)
    total = sum(stops.values()) or 1
    out.append(bar_chart_svg([(k, v / total) for k, v in stops.most_common()], title="how trials ended"))
    out.append(histogram_svg(turns, title="turns per trial"))
    out.append("</div>")

    if per_cat:
        out.append("<h2>By category</h2>")
        cat_rows = [
            [f'<span title="{_e(c)}">{_e(c)}</span>', _e(s.get("n_tasks")), _e(_pct(s.get("pass@1"))), _e(_pct(s.get("any_of_n"))),
             _e(_pct(s.get("success_rate"))), _e(_num(s.get("avg_turns")))]
            for c, s in sorted(per_cat.items(), key=lambda kv: natural_key(kv[0]))
        ]  # fmt: skip
        out.append(
            _table(
                ["category", "tasks", "pass@1", "any of n", "success", "avg turns"],
                cat_rows,
                table_id="categories",
            )
        )

    sources = summary.get("prediction_sources") or {}
    if sources:
        out.append("<h2>Where predictions came from</h2>")
        out.append(_table(["source", "trials"], [[_e(k), _e(v)] for k, v in sources.items()]))

    by_key = {t.key: t for t in trajectories}
    ordered = sorted(
        rows, key=lambda r: (bool(r.get("correct")), natural_key(r.get("id")), int(r.get("trial", 0)))
    )
    shown = ordered[:max_trajectories]
    n_wrong = sum(1 for r in rows if not r.get("correct"))
    out.append(
        f'<h2>Trajectories</h2><p class="muted">{len(rows)} trial(s), {n_wrong} not fully correct '
        "(listed first). Click a line to open it.</p>"
    )
    if len(ordered) > len(shown):
        out.append(
            f'<p class="muted">Showing {len(shown)} of {len(ordered)}; the others are in scores.jsonl '
            "and trajectories.jsonl.</p>"
        )
    out.append('<div id="trajectories">')
    for r in shown:
        out.append(_trajectory_html(r, by_key.get((str(r.get("id")), int(r.get("trial", 0))))))
    out.append("</div>")
    out.append('<p class="muted">Generated by DataDojo (`datadojo report`).</p></body></html>')
    return "\n".join(out)


# --- Markdown -------------------------------------------------------------------------------------------


def _md_cell(value: Any) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


def render_markdown(
    summary: dict[str, Any], rows: Sequence[dict[str, Any]], *, max_failures: int = 50
) -> str:
    """A Markdown summary: settings, headline figures, official totals, categories, failed trials."""
    m = summary.get("metrics", {})
    lines = [
        f"# {summary.get('benchmark', '?')} · {summary.get('model', '?')}",
        "",
        *[line for banner in _banners(summary) for line in (f"> **{banner}**", "")],
        "- "
        + "; ".join(
            str(v) if k == "tasks" else f"{k}: {v}"  # "15 of 93 tasks" reads whole
            for k, v in _settings(summary)
            if v is not None
            and k
            in (
                "agent",
                "tasks",
                "trials per task",
                "turn budget",
                "dialect",
                "sandbox isolation (cells per level)",
            )
        ),
        f"- data: `{summary.get('data')}`"
        + (f"; judge: `{summary['judge']}`" if summary.get("judge") else ""),
        f"- scored at: {summary.get('scored_at')}",
        f"- scoring rule: {_rule_label(summary)}; deviations from the benchmark's code: "
        f"{(summary.get('rule') or {}).get('doc') or 'n/a'}",
        "",
        "| figure | value |",
        "|---|---:|",
    ]
    lines += [f"| {_md_cell(label)} | {value} |" for _, label, value in _headline(summary)]
    official = summary.get("official") or {}
    if official:
        lines += ["", f"## {_totals_heading(summary)}", "", "| figure | value |", "|---|---:|"]
        lines += [f"| {_md_cell(k)} | {official_value(k, v)} |" for k, v in official.items()]
    lines += audit_markdown(summary)
    behaviour = behaviour_rows(summary)
    if behaviour:
        lines += ["", "## Behaviour (SciDataSailor Table 4)", "", "| figure | value |", "|---|---:|"]
        lines += [f"| {_md_cell(k)} | {v} |" for k, v in behaviour]
    per_cat = m.get("per_category") or {}
    if per_cat:
        lines += [
            "",
            "## By category",
            "",
            "| category | tasks | pass@1 | any of n | success | avg turns |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for c, s in sorted(per_cat.items(), key=lambda kv: natural_key(kv[0])):
            lines.append(
                f"| {_md_cell(c)} | {s.get('n_tasks')} | {_pct(s.get('pass@1'))} | {_pct(s.get('any_of_n'))} | "
                f"{_pct(s.get('success_rate'))} | {_num(s.get('avg_turns'))} |"
            )
    stops = summary.get("stop_reasons") or {}
    if stops:
        lines += ["", "## How trials ended", ""] + [f"- {k}: {v}" for k, v in stops.items()]
    failed = sorted(
        (r for r in rows if not r.get("correct")),
        key=lambda r: (natural_key(r.get("id")), int(r.get("trial", 0))),
    )
    lines += ["", f"## Trials not fully correct ({len(failed)})", ""]
    for r in failed[:max_failures]:
        lines.append(f"- `{_md_cell(r.get('id'))}` trial {r.get('trial')}: {_md_cell(r.get('reason'))}")
    if len(failed) > max_failures:
        lines.append(f"- … and {len(failed) - max_failures} more (see scores.jsonl)")
    if not failed:
        lines.append("None.")
    return "\n".join(lines) + "\n"


# --- files ----------------------------------------------------------------------------------------------


def write_report(run_dir: str | Path, *, max_trajectories: int = MAX_TRAJECTORIES) -> tuple[Path, Path]:
    """Build ``report.html`` and ``report.md`` in ``run_dir`` from its run files; return their paths."""
    run = Path(run_dir)
    summary, rows, trajs = load_run(run)
    html_path, md_path = run / "report.html", run / "report.md"
    write_text_atomic(html_path, render_html(summary, rows, trajs, max_trajectories=max_trajectories))
    write_text_atomic(md_path, render_markdown(summary, rows))
    return html_path, md_path

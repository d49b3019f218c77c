"""The recipe report: every checkpoint (base, SFT, RL) of every variant on every benchmark, in the shape of
the papers' main tables (DataMind Table 1, EnvLunch Table 2, SciDataSailor Table 3: a row per model, a
column per benchmark, pass@1 in percent, and the average), as ``report.md`` and ``report.html``; a sweep
adds the papers' figures (:mod:`datadojo.recipes.figures`).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from datadojo.fs import write_json_atomic, write_text_atomic
from datadojo.recipes.engine import TIMING_FILE, RecipeResult, Variant
from datadojo.recipes.figures import CHECKPOINTS, Figure, benchmark_titles, markdown_table, pct, sweep_figures
from datadojo.recipes.figures import score as _score
from datadojo.recipes.paper import paper_table
from datadojo.runs.html import escape, html_page, html_table, table_html

__all__ = ["CHECKPOINTS", "report_rows", "report_warnings", "stage_counts", "stage_seconds", "write_report"]

PAPER = {
    "datamind": "DataMind (Table 1 shape: pass@1 per benchmark, averaged)",
    "envlunch": "EnvLunch (Table 2 shape: execution accuracy per benchmark)",
    "sailor": "SciDataSailor (Table 3 shape: accuracy per benchmark)",
}


def report_rows(result: RecipeResult, vs: list[Variant]) -> tuple[list[str], list[list[Any]]]:
    """Header and rows: variant, checkpoint, one pass@1 per benchmark, the average, tasks per benchmark."""
    titles = benchmark_titles(result, vs)
    header = ["variant", "checkpoint", *titles, "average"]
    rows = []
    for v in vs:
        for stage, label in CHECKPOINTS:
            entry = result.entries.get(v.label, {}).get(stage)
            if entry is None:
                continue
            res = entry.manifest.get("results") or {}
            scores = [_score(res[t]) if t in res else None for t in titles]
            known = [s for s in scores if s is not None]
            name = label + (" (skipped)" if entry.manifest.get("skipped_training") else "")
            rows.append([v.label, name, *scores, sum(known) / len(known) if known else None])
    return header, rows


def stage_counts(manifest: dict[str, Any]) -> str:
    """A stage's in → out counts as shown (``104 curated trajectories → 47 trained on``; empty if unrecorded)."""
    c = manifest.get("counts")
    if not isinstance(c, dict):
        return "skipped" if manifest.get("skipped") else ""
    return f"{c.get('in')} {c.get('in_what', '')} → {c.get('out')} {c.get('out_what', '')}".strip()


def stage_seconds(result: RecipeResult, variant: str, stage: str) -> str:
    """A stage's wall time as shown: measured in this run, or the time recorded when it ran (``cached``);
    empty for a stage neither ran nor recorded (committed before times were kept, or not reached)."""
    if (variant, stage) in result.elapsed:
        return f"{result.elapsed[(variant, stage)]:.1f}"
    entry = result.entries.get(variant, {}).get(stage)
    timing = entry.path / TIMING_FILE if entry is not None else None
    try:
        recorded = json.loads(timing.read_text(encoding="utf-8")).get("seconds") if timing else None
    except (OSError, ValueError, AttributeError):  # absent (committed before times were kept) or torn
        recorded = None
    return f"{float(recorded):.1f} (cached)" if isinstance(recorded, int | float) else ""


def report_warnings(result: RecipeResult, figures: list[Figure]) -> list[str]:
    """What a reader must not miss though the recipe went on: stages that did nothing useful and were
    allowed to (``allow_empty``), stages whose output count is 0, points of a sweep short of their seeds,
    failed runs of a study. The stage that stopped the run is the report's "Stopped" line, not repeated."""
    out: list[str] = []
    for (v, st), why in result.empty.items():
        if result.stopped is None or not result.stopped.startswith(f"stage {st} ({v}) "):
            out.append(f"stage {st} ({v}) did nothing useful and the recipe went on (allow_empty): {why}")
    for v, entries in result.entries.items():
        for st, entry in entries.items():
            c = entry.manifest.get("counts")
            if (v, st) not in result.empty and isinstance(c, dict) and c.get("out") == 0:
                out.append(
                    f"stage {st} ({v}) produced 0 {c.get('out_what', '')} from {c.get('in')} {c.get('in_what', '')}".rstrip()
                )
    for fig in figures:
        out += [f"sweep point short of seeds: {s}" for s in fig.data.get("short_of_seeds") or []]
    if result.failed:
        out.append(
            f"{len(result.failed)} run(s) of the study failed: see Failed runs (tracebacks: failed.json)"
        )
    return out


def _eval_reports(result: RecipeResult, out: Path) -> list[tuple[str, str, str]]:
    """``(variant, checkpoint · benchmark, relative link)`` of each eval's own report page."""
    links: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for label, entries in result.entries.items():
        for stage, entry in entries.items():
            for title, res in (entry.manifest.get("results") or {}).items():
                summary = res.get("summary") if isinstance(res, dict) else None
                if not summary:
                    continue
                page = Path(str(summary)).with_name("report.html")
                if page.is_file():
                    try:
                        link = str(page.resolve().relative_to(out.resolve()))
                    except ValueError:  # an eval outside the run folder (a stage cache elsewhere)
                        link = str(page)
                    if link not in seen:  # an eval taken over by a later stage (labels = 0): once
                        seen.add(link)
                        links.append((label, f"{stage} · {title}", link))
    return links


def write_report(result: RecipeResult, vs: list[Variant], recipe: str) -> dict[str, Path]:
    """Write ``OUT/report.md``, ``OUT/report.html`` and ``OUT/report.json``; return their paths.

    Besides the table of every checkpoint: the paper's own table with its reported numbers beside this
    run's (:mod:`datadojo.recipes.paper`), the warnings (:func:`report_warnings`), every stage with its status, in → out
    counts and seconds (a cached stage's from when it ran); the stages that did nothing useful (in red, with
    their cause and the setting to change), and links to each eval's own report."""
    out = result.out
    header, rows = report_rows(result, vs)
    shown = [[r[0], r[1], *(pct(x) for x in r[2:])] for r in rows]
    stage_rows = []
    for i in result.items:
        entry = result.entries.get(i.variant, {}).get(i.stage)
        flow = stage_counts(entry.manifest) if entry is not None else ""
        status = "did nothing" if (i.variant, i.stage) in result.empty else i.status
        seconds = stage_seconds(result, i.variant, i.stage)
        stage_rows.append([i.variant, i.stage, status, flow, seconds, i.key[:12]])
    empty = [[v, st, why] for (v, st), why in result.empty.items()]
    md = [f"# Recipe report: {PAPER[recipe]}", "", "pass@1 (%) of each checkpoint.", ""]
    if result.stopped:
        md += [f"**Stopped: {result.stopped}**", ""]
    figures = sweep_figures(result, vs) if len(vs) > 1 else []
    warnings = report_warnings(result, figures)
    if warnings:
        md += ["## ⚠ Warnings", "", *(f"* {w}" for w in warnings), ""]
    md += markdown_table(header, shown)
    paper = paper_table(recipe, result, vs, figures)
    md += ["", f"## The paper's table: {paper.table.title}", "", *markdown_table(paper.header, paper.rows())]
    md += [f"\n{n}" for n in (*paper.table.notes, *paper.notes)]
    if empty:
        md += ["", "## ⚠ Stages that did nothing useful", ""]
        md += markdown_table(["variant", "stage", "cause and setting to change"], empty)
    failed = [[label, why] for label, why in result.failed.items()]
    if failed:
        md += [
            "",
            "## Failed runs",
            "",
            "Rerun the same command to retry them (tracebacks: failed.json).",
            "",
        ]
        md += markdown_table(["variant", "error"], failed)
    stage_header = ["variant", "stage", "status", "in → out", "seconds", "key"]
    md += ["", "## Stages", "", *markdown_table(stage_header, stage_rows)]
    links = _eval_reports(result, out)
    if links:
        md += ["", "## Eval reports", "", *(f"* {v} · {what}: [{link}]({link})" for v, what, link in links)]
    for fig in figures:
        md += ["", f"## {fig.title}", "", *fig.markdown]
    red = [
        [
            escape(c) if j < 2 or r[2] != "did nothing" else f'<span class="bad">{escape(c)}</span>'
            for j, c in enumerate(r)
        ]
        for r in stage_rows
    ]
    body = [
        f"<h1>{html.escape(PAPER[recipe])}</h1>",
        *([f'<p class="bad"><b>Stopped:</b> {html.escape(result.stopped)}</p>'] if result.stopped else []),
        *(
            [
                '<h2 class="bad">Warnings</h2><ul>'
                + "".join(f"<li>{html.escape(w)}</li>" for w in warnings)
                + "</ul>"
            ]
            if warnings
            else []
        ),
        "<p>pass@1 (%) of each checkpoint on each benchmark.</p>",
        html_table(header, shown, num_from=2),
        f"<h2>The paper's table</h2><p>{html.escape(paper.table.title)}</p>",
        html_table(paper.header, paper.rows(), num_from=1),
        *(f"<p>{html.escape(n)}</p>" for n in (*paper.table.notes, *paper.notes)),
        *(
            [
                '<h2 class="bad">Stages that did nothing useful</h2>',
                table_html(
                    ["variant", "stage", "cause and setting to change"],
                    [
                        [escape(v), escape(st), f'<span class="bad">{escape(why)}</span>']
                        for v, st, why in empty
                    ],
                    num_from=3,
                ),
            ]
            if empty
            else []
        ),
        *(["<h2>Sweep</h2>"] if figures else []),
        *(f"<h3>{html.escape(fig.title)}</h3>{fig.html}" for fig in figures),
        *(["<h2>Failed runs</h2>", html_table(["variant", "error"], failed, num_from=2)] if failed else []),
        "<h2>Stages</h2>",
        table_html(stage_header, red, num_from=4),
        *(
            [
                "<h2>Eval reports</h2>",
                "<ul>"
                + "".join(
                    f'<li>{html.escape(v)} · {html.escape(w)}: <a href="{html.escape(link)}">{html.escape(link)}</a></li>'
                    for v, w, link in links
                )
                + "</ul>",
            ]
            if links
            else []
        ),
    ]
    paths = {
        "md": write_text_atomic(out / "report.md", "\n".join(md) + "\n"),
        "html": write_text_atomic(out / "report.html", html_page(f"Recipe: {recipe}", "\n".join(body))),
        "json": write_json_atomic(
            out / "report.json",
            {
                "recipe": recipe,
                "header": header,
                "rows": rows,
                "figures": [fig.data for fig in figures],
                "paper_table": paper.to_dict(),
                "failed": result.failed,
                "stopped": result.stopped,
                "did_nothing": [{"variant": v, "stage": st, "cause": why} for v, st, why in empty],
                "warnings": warnings,
                "stages": [dict(zip(stage_header, r, strict=True)) for r in stage_rows],
            },
        ),
    }
    return paths

"""The recipe report: every checkpoint (base, SFT, RL) of every variant on every benchmark, in the shape of
the papers' main tables (DataMind Table 1, EnvLunch Table 2, SciDataSailor Table 3: a row per model, a
column per benchmark, pass@1 in percent, and the average), as ``report.md`` and ``report.html``; a sweep
adds the papers' figures (:mod:`datadojo.recipes.figures`).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from datadojo.fs import write_json_atomic, write_text_atomic
from datadojo.recipes.engine import RecipeResult, Variant
from datadojo.recipes.figures import CHECKPOINTS, benchmark_titles, markdown_table, pct, sweep_figures
from datadojo.recipes.figures import score as _score
from datadojo.runs.html import html_page, html_table

__all__ = ["CHECKPOINTS", "report_rows", "write_report"]

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


def write_report(result: RecipeResult, vs: list[Variant], recipe: str) -> dict[str, Path]:
    """Write ``OUT/report.md``, ``OUT/report.html`` and ``OUT/report.json``; return their paths."""
    out = result.out
    header, rows = report_rows(result, vs)
    shown = [[r[0], r[1], *(pct(x) for x in r[2:])] for r in rows]
    stage_rows = [
        [i.variant, i.stage, i.status, f"{result.elapsed.get((i.variant, i.stage), 0.0):.1f}", i.key[:12]]
        for i in result.items
    ]
    md = [f"# Recipe report: {PAPER[recipe]}", "", "pass@1 (%) of each checkpoint.", ""]
    md += markdown_table(header, shown)
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
    md += ["", "## Stages", "", *markdown_table(["variant", "stage", "status", "seconds", "key"], stage_rows)]
    figures = sweep_figures(result, vs) if len(vs) > 1 else []
    for fig in figures:
        md += ["", f"## {fig.title}", "", *fig.markdown]
    body = [
        f"<h1>{html.escape(PAPER[recipe])}</h1>",
        "<p>pass@1 (%) of each checkpoint on each benchmark.</p>",
        html_table(header, shown, num_from=2),
        *(["<h2>Sweep</h2>"] if figures else []),
        *(f"<h3>{html.escape(fig.title)}</h3>{fig.html}" for fig in figures),
        *(["<h2>Failed runs</h2>", html_table(["variant", "error"], failed, num_from=2)] if failed else []),
        "<h2>Stages</h2>",
        html_table(["variant", "stage", "status", "seconds", "key"], stage_rows, num_from=3),
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
                "failed": result.failed,
            },
        ),
    }
    return paths

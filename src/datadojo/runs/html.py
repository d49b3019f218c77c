"""HTML building blocks of every report: the shared style, escaping, tables and the page around them.

The eval report, the synthesis funnels, the recipe report and the demo page are all self-contained HTML
pages (inline CSS, no script, no template engine) in one look; this module is the one place that look
lives, below every pipeline (it imports nothing of DataDojo), so a pipeline's report does not import the
eval package for its tables. Charts are in :mod:`datadojo.runs.charts`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

__all__ = ["CSS", "escape", "html_page", "html_table", "natural_key", "pct", "table_html"]

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;
color:#1d2330;padding:0 1rem}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{margin-top:2rem;border-bottom:1px solid #d8dce5;padding-bottom:.2rem}
table{border-collapse:collapse;margin:.6rem 0}th,td{border:1px solid #d8dce5;padding:.25rem .6rem;text-align:left;
overflow-wrap:anywhere}
td.num{text-align:right;font-variant-numeric:tabular-nums}th{background:#f2f4f8}
.muted{color:#6b7385}.ok{color:#137333}.bad{color:#b3261e}
.plots{display:flex;flex-wrap:wrap;gap:1.5rem}
details.traj{border:1px solid #d8dce5;border-radius:6px;margin:.4rem 0;padding:.3rem .6rem}
details.traj>summary{cursor:pointer;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.9rem}
details.turn{margin:.4rem 0 .4rem 1rem;border-left:3px solid #d8dce5;padding-left:.6rem}
pre{background:#f6f8fa;padding:.5rem;overflow-x:auto;white-space:pre-wrap;word-break:break-word;margin:.3rem 0}
pre.code{background:#eef3fb}pre.obs{background:#fbf8ee}pre.obs.error{background:#fbeeee}pre.answer{background:#eefbf0}
.label{font-size:.8rem;text-transform:uppercase;letter-spacing:.04em;color:#6b7385;margin-top:.4rem}
"""


def escape(value: Any) -> str:
    """HTML-escaped text of ``value`` (``None`` as empty), quotes included: safe in text and attributes."""
    return html.escape("" if value is None else str(value), quote=True)


_DIGITS = re.compile(r"(\d+)")


def natural_key(value: Any) -> tuple[tuple[int, int | str], ...]:
    """Sort key reading the digit runs of ``value`` as numbers: ids ``0, 5, 105, 108`` in that order, not
    ``0, 105, 108, 5`` (task and trajectory ids are numbers as text in most benchmarks: DABench's ``0``,
    ``5``, Spider's ``dev_12``). Each part is tagged so a number never compares with text; a missing id
    (``None``) comes first."""
    if value is None:
        return ()
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(str(value)) if part != ""
    )


def pct(v: Any) -> str:
    """A fraction as a percentage with two decimals (``None``: ``n/a``)."""
    return "n/a" if v is None else f"{float(v) * 100:.2f}%"


def table_html(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, table_id: str = "", num_from: int = 1
) -> str:
    """Rows are already-escaped HTML cells; columns from ``num_from`` on are right-aligned numbers."""
    tid = f' id="{table_id}"' if table_id else ""
    out = [
        f"<table{tid}><thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr></thead><tbody>"
    ]
    for r in rows:
        cells = "".join(
            f'<td class="num">{c}</td>' if i >= num_from else f"<td>{c}</td>" for i, c in enumerate(r)
        )
        out.append(f"<tr>{cells}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def html_table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, num_from: int = 1) -> str:
    """A table in the report's style from plain values (escaped here); for other stages' pages."""
    return table_html(header, [[escape(c) for c in r] for r in rows], num_from=num_from)


def html_page(title: str, body: str) -> str:
    """A self-contained page in the report's style (inline CSS, no script) around ``body`` HTML."""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{CSS}</style></head><body>\n{body}\n</body></html>"
    )

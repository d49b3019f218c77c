"""How the data-blind audit (:mod:`datadojo.eval.audit`) reads in a report and in the ``datadojo eval`` tables.

One place for the labels and the section, so the HTML report, the Markdown report and the terminal show the
same figures under the same names. Everything here reads ``summary["audit"]``; a run without an audit gets no
rows and no section.
"""

from __future__ import annotations

from typing import Any

from datadojo.runs.html import escape as _e
from datadojo.runs.html import natural_key
from datadojo.runs.html import pct as _pct
from datadojo.runs.html import table_html as _table

__all__ = [
    "MAX_ITEMS",
    "audit_category_rows",
    "audit_headline_rows",
    "audit_html",
    "audit_markdown",
]

#: Items listed in the report's audit table (those answered without the data first).
MAX_ITEMS = 1000

_DEFINITION = (
    "The same items were run again with the data withheld: an empty workspace, and no file profile, folder "
    "tree or data description in the system prompt (the question, the instructions and the file names are "
    "unchanged); answers are scored by the benchmark's rule. Per item, r = share of raw trials correct and "
    "b = share of blind trials correct. Data-dependent score = mean of r·(1−b): the items answered "
    "correctly with the data and not without it. Relative drop = (raw − blind) / raw."
)


def _audit(summary: dict[str, Any]) -> dict[str, Any] | None:
    audit = summary.get("audit")
    return audit if isinstance(audit, dict) and audit.get("overall") else None


def _official(key: str, v: Any) -> str:
    """An official total: a count (``gold_errors``, ``judge_errors``) as a number, a share as a percentage."""
    if v is None:
        return "n/a"
    return f"{float(v):g}" if key.endswith("_errors") else _pct(v)


def _drop(v: Any) -> str:
    return "n/a (raw is 0)" if v is None else _pct(v)


def audit_headline_rows(summary: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(key, label, value)`` of the audit's figures for a summary table (none without an audit)."""
    audit = _audit(summary)
    if audit is None:
        return []
    o = audit["overall"]
    return [
        ("audit_blind", "data-blind pass@1 (data withheld)", _pct(o["blind"])),
        (
            "audit_data_dependent",
            "data-dependent score (right with the data, not without)",
            _pct(o["data_dependent"]),
        ),
        (
            "audit_relative_drop",
            "relative drop without the data ((raw − blind) / raw)",
            _drop(o["relative_drop"]),
        ),
        (
            "audit_answered_blind",
            "items answered without the data",
            f"{o['answered_blind']} of {o['n_tasks']}",
        ),
    ]


def audit_category_rows(summary: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(category, figures)`` in natural order (none without an audit)."""
    audit = _audit(summary)
    if audit is None:
        return []
    return sorted((audit.get("per_category") or {}).items(), key=lambda kv: natural_key(kv[0]))


def _figure_rows(audit: dict[str, Any]) -> list[tuple[str, str, str]]:
    o = audit["overall"]
    return [
        ("raw", "raw pass@1 (with the data)", _pct(o["raw"])),
        ("blind", "data-blind pass@1 (data withheld)", _pct(o["blind"])),
        ("data_dependent", "data-dependent score: right with the data, not without", _pct(o["data_dependent"])),
        ("both", "right with and without the data", _pct(o["both"])),
        ("blind_only", "right only without the data", _pct(o["blind_only"])),
        ("neither", "right neither way", _pct(o["neither"])),
        ("relative_drop", "relative drop (raw − blind) / raw (DSGym)", _drop(o["relative_drop"])),
        ("answered_blind", "items answered without the data (≥ 1 blind trial right)",
         f"{o['answered_blind']} of {o['n_tasks']}"),
    ]  # fmt: skip


def _items(audit: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(audit.get("items") or [], key=lambda it: (not it["blind_correct"], natural_key(it["id"])))


def audit_html(summary: dict[str, Any]) -> str:
    """The report's "Data-blind audit" section (empty without an audit)."""
    audit = _audit(summary)
    if audit is None:
        return ""
    out = [
        '<h2 id="audit">Data-blind audit</h2>',
        f'<p class="muted">{_e(_DEFINITION)} Blind run: <code>{_e(audit.get("blind_dir", "blind"))}/</code>.</p>',
        '<table id="audit-figures"><thead><tr><th>figure</th><th>value</th></tr></thead><tbody>',
    ]
    for key, label, value in _figure_rows(audit):
        out.append(f'<tr><td>{_e(label)}</td><td class="num" data-metric="{_e(key)}">{_e(value)}</td></tr>')
    out.append("</tbody></table>")
    official = audit.get("official") or {}
    if official:
        out.append("<h3>Official totals, with and without the data</h3>")
        out.append(_table(["figure", "raw", "blind"], [
            [_e(k), _e(_official(k, v.get("raw"))), _e(_official(k, v.get("blind")))] for k, v in official.items()
        ], table_id="audit-official"))  # fmt: skip
    cats = audit_category_rows(summary)
    if cats:
        out.append("<h3>By category</h3>")
        out.append(_table(["category", "tasks", "raw", "blind", "data-dependent", "relative drop", "answered blind"], [
            [_e(c), _e(f["n_tasks"]), _e(_pct(f["raw"])), _e(_pct(f["blind"])), _e(_pct(f["data_dependent"])),
             _e(_drop(f["relative_drop"])), _e(f["answered_blind"])]
            for c, f in cats
        ], table_id="audit-categories"))  # fmt: skip
    items = _items(audit)
    shown = items[:MAX_ITEMS]
    out.append(
        f'<h3>Items</h3><p class="muted">{sum(1 for it in items if it["blind_correct"])} of {len(items)} '
        "answered correctly in at least one blind trial (listed first)."
        + (f" Showing {len(shown)}." if len(shown) < len(items) else "")
        + "</p>"
    )
    out.append(_table(["item", "category", "raw right", "blind right", "verdict"], [
        [_e(it["id"]), _e(it.get("category") or ""), _e(f"{it['raw_correct']}/{it['raw_trials']}"),
         _e(f"{it['blind_correct']}/{it['blind_trials']}"), _e(it["verdict"])]
        for it in shown
    ], table_id="audit-items", num_from=2))  # fmt: skip
    if audit.get("not_compared"):
        out.append(
            f'<p class="muted">Not compared (no counted trial on one side): {_e(", ".join(audit["not_compared"]))}</p>'
        )
    return "\n".join(out)


def _md(value: Any) -> str:
    return " ".join(str(value).split()).replace("|", "\\|")


def audit_markdown(summary: dict[str, Any], *, max_items: int = 50) -> list[str]:
    """The Markdown report's "Data-blind audit" lines (none without an audit)."""
    audit = _audit(summary)
    if audit is None:
        return []
    lines = ["", "## Data-blind audit", "", _DEFINITION, "", "| figure | value |", "|---|---:|"]
    lines += [f"| {_md(label)} | {value} |" for _, label, value in _figure_rows(audit)]
    cats = audit_category_rows(summary)
    if cats:
        lines += ["", "| category | tasks | raw | blind | data-dependent | relative drop | answered blind |",
                  "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        lines += [
            f"| {_md(c)} | {f['n_tasks']} | {_pct(f['raw'])} | {_pct(f['blind'])} | {_pct(f['data_dependent'])} | "
            f"{_drop(f['relative_drop'])} | {f['answered_blind']} |"
            for c, f in cats
        ]
    blind_right = [it for it in _items(audit) if it["blind_correct"]]
    lines += ["", f"Answered without the data ({len(blind_right)}):", ""]
    lines += [
        f"- `{_md(it['id'])}` ({_md(it.get('category') or '')}): blind {it['blind_correct']}/{it['blind_trials']}, "
        f"raw {it['raw_correct']}/{it['raw_trials']} — {it['verdict']}"
        for it in blind_right[:max_items]
    ]
    if len(blind_right) > max_items:
        lines.append(f"- … and {len(blind_right) - max_items} more (summary.json `audit.items`)")
    if not blind_right:
        lines.append("None.")
    return lines

"""``report.html`` of a ``synth sailor`` run: every tree drawn as nested boxes, with QC outcomes.

Read from the output files only (``tree.jsonl``, ``qc.jsonl``, ``qa.jsonl``, ``summary.json``), so it can be
redrawn for any run folder. It opens with what was run — the folders, the policy and judge models, every
setting of ``summary.json`` — then the run's totals, a per-level table (units, probes, trajectories, kept,
QA, meta and each QC removal reason) and the QA pairs (question, answer, evidence, tree node). Each node shows its strategy, ρ, Q̂, N, the post-execution score and status; its code and
observation excerpt fold out. Nodes on a kept trajectory are green, on a removed one red (with the QC reason).
A unit that kept nothing says why (:func:`unit_outcome`): an empty tree (the strategy proposal stayed
invalid, every strategy scored under τ_pre, every probe a duplicate, a budget spent), no path deep enough, or
the QC reasons that removed its trajectories.
"""

from __future__ import annotations

import html
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from datadojo.fs import write_text_atomic
from datadojo.jsonl import iter_jsonl

__all__ = ["removal_reasons", "render_report", "unit_outcome", "write_report"]

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}
ul.tree{list-style:none;padding-left:1.2em;border-left:1px dashed #bbb}
.node{display:inline-block;border:1px solid #999;border-radius:4px;padding:2px 6px;margin:2px 0;background:#fafafa}
.kept{border-color:#2a2;background:#efe}.removed{border-color:#c33;background:#fee}
.err{color:#c33}pre{white-space:pre-wrap;max-width:70em;background:#f4f4f4;padding:4px;margin:2px 0}
summary{cursor:pointer}
"""


def _fmt(value: Any) -> str:
    return "–" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))


_LEVEL_COLUMNS = ("units", "nodes", "probes_run", "trajectories", "kept", "qa", "meta")


def _level_table(per_level: dict[str, dict[str, Any]]) -> str:
    """Per seed level: the counts of the terminal summary and every QC removal reason that occurred."""
    levels = {lv: row for lv, row in per_level.items() if row.get("units")}
    if not levels:
        return ""
    reasons = sorted({r for row in levels.values() for r in row.get("reasons", {}) if r != "kept"})
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ("level", *_LEVEL_COLUMNS, *reasons))
    body = "".join(
        f"<tr><th>{html.escape(lv)}</th>"
        + "".join(f"<td>{html.escape(_fmt(row.get(c, 0)))}</td>" for c in _LEVEL_COLUMNS)
        + "".join(f"<td>{row.get('reasons', {}).get(r, 0)}</td>" for r in reasons)
        + "</tr>"
        for lv, row in sorted(levels.items())
    )
    return f"<h2>Per level</h2><table><tr>{head}</tr>{body}</table>"


def _qa_list(out: Path) -> str:
    """The synthesized QA pairs (question, answer, evidence, the tree node holding the evidence)."""
    path = out / "qa.jsonl"
    if not path.exists():
        return ""
    rows = []
    for _, rec in iter_jsonl(path):
        extra = rec.get("extra") or {}
        evidence = "; ".join(str(e) for e in extra.get("evidence") or [])
        rows.append(
            "<tr>"
            + "".join(
                f"<td style='text-align:left'>{html.escape(str(v))}</td>"
                for v in (
                    rec.get("difficulty") or "",
                    extra.get("seed_id", ""),
                    rec.get("question", ""),
                    rec.get("answer", ""),
                    evidence,
                    extra.get("tree_node", ""),
                )
            )
            + "</tr>"
        )
    if not rows:
        return ""
    head = "".join(f"<th>{c}</th>" for c in ("level", "seed", "question", "answer", "evidence", "node"))
    return f"<h2>QA pairs ({len(rows)})</h2><table><tr>{head}</tr>{''.join(rows)}</table>"


def unit_outcome(record: dict[str, Any], root_expansion: dict[str, Any] | None = None) -> str | None:
    """Why a finished unit (its ``units.jsonl`` record) kept no trajectory; ``None`` when it kept some.

    ``root_expansion`` is the root node's ``expansion`` record from ``tree.jsonl`` (the first strategy
    proposal), which names the error of a tree that never grew.
    """
    if int(record.get("kept", 0)):
        return None
    stop = record.get("stop") or "?"
    if not int(record.get("nodes", 0)):
        error = (root_expansion or {}).get("error")
        if error:
            return f"empty tree: {error}"
        if int(record.get("structured_failures", 0)):
            return f"empty tree: {record['structured_failures']} structured reply(ies) stayed invalid"
        if int(record.get("strategies_dropped", 0)):
            return f"empty tree: every proposed strategy scored under tau_pre ({record['strategies_dropped']} dropped)"
        if int(record.get("duplicates_merged", 0)):
            return "empty tree: every probe duplicated one already run"
        return f"empty tree: no probe was added (search stopped: {stop})"
    if not int(record.get("trajectories", 0)):
        return f"no trajectory: no executed leaf (search stopped: {stop})"
    reasons = {k: v for k, v in (record.get("reasons") or {}).items() if k != "kept"}
    listed = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1]))
    return f"QC removed all {record['trajectories']} trajectory(ies): {listed or 'no reason recorded'}"


def removal_reasons(out: str | Path) -> list[tuple[str, int]]:
    """Why trajectories and units came to nothing, most frequent first: QC reasons, QA drops, empty trees."""
    out = Path(out)
    counts: Counter[str] = Counter()
    roots = _root_expansions(out)
    if (out / "units.jsonl").exists():
        for _, rec in iter_jsonl(out / "units.jsonl"):
            if not isinstance(rec, dict):
                continue
            counts.update({k: v for k, v in (rec.get("reasons") or {}).items() if k != "kept"})
            counts.update({f"qa: {k}": v for k, v in (rec.get("qa_dropped") or {}).items()})
            why = unit_outcome(rec, roots.get(str(rec.get("unit"))))
            if why is not None and why.startswith(("empty tree", "no trajectory")):
                counts[why] += 1
    return counts.most_common()


def _root_expansions(out: Path) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    if (out / "tree.jsonl").exists():
        for _, rec in iter_jsonl(out / "tree.jsonl"):
            if isinstance(rec, dict) and rec.get("type") == "node" and rec.get("parent") is None:
                found[str(rec.get("unit"))] = rec.get("expansion") or {}
    return found


def _run_header(summary: dict[str, Any]) -> str:
    """Folders, models, seeds and every setting of the run."""
    rows = [
        ("folders", ", ".join(summary.get("folders") or [])),
        ("seeds", ", ".join(summary.get("seeds") or [])),
    ]
    rows += [(f"{role} model", str(m)) for role, m in (summary.get("models") or {}).items()]
    rows.append(("structured output", str(summary.get("structured_mode", ""))))
    head = "".join(
        f"<tr><th>{html.escape(k)}</th><td style='text-align:left'>{html.escape(v)}</td></tr>"
        for k, v in rows
    )
    cfg = summary.get("config") or {}
    settings = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(json.dumps(v))}</td></tr>"
        for k, v in cfg.items()
    )
    return (
        f"<h2>Run</h2><table>{head}</table>"
        f"<details><summary>settings ({len(cfg)})</summary><table>{settings}</table></details>"
    )


def _unit_records(out: Path) -> dict[str, dict[str, Any]]:
    recs: dict[str, dict[str, Any]] = {}
    if (out / "units.jsonl").exists():
        for _, rec in iter_jsonl(out / "units.jsonl"):
            if isinstance(rec, dict) and isinstance(rec.get("unit"), str):
                recs[rec["unit"]] = rec
    return recs


def render_report(out: str | Path) -> str:
    """The HTML text of the report for a run folder."""
    out = Path(out)
    nodes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if (out / "tree.jsonl").exists():
        for _, rec in iter_jsonl(out / "tree.jsonl"):
            if isinstance(rec, dict) and rec.get("type") == "node":
                nodes[rec["unit"]].append(rec)
    marks: dict[str, tuple[str, str]] = {}
    qc_by_unit: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if (out / "qc.jsonl").exists():
        for _, rec in iter_jsonl(out / "qc.jsonl"):
            qc_by_unit[rec["unit"]].append(rec)
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    parts = [f"<!doctype html><meta charset=utf-8><title>synth sailor report</title><style>{_CSS}</style>"]
    parts.append("<h1>SciDataSailor synthesis</h1>")
    units = _unit_records(out)
    roots = _root_expansions(out)
    if summary:
        parts.append(_run_header(summary))
        rows = "".join(
            f"<tr><th>{html.escape(k)}</th><td>{html.escape(_fmt(summary.get(k)))}</td></tr>"
            for k in ("units", "nodes", "probes_run", "requests", "trajectories", "kept", "qa", "meta")
        )
        parts.append(f"<table>{rows}</table>")
        removed = summary.get("removed", {})
        if removed:
            parts.append(
                "<p>Removed by QC: " + ", ".join(f"{html.escape(k)} {v}" for k, v in removed.items()) + "</p>"
            )
        parts.append(_level_table(summary.get("per_level") or {}))
    empty = [(u, why) for u, rec in units.items() if (why := unit_outcome(rec, roots.get(u))) is not None]
    if empty:
        items = "".join(f"<li><b>{html.escape(u)}</b>: {html.escape(why)}</li>" for u, why in empty)
        parts.append(f"<h2>Units that kept nothing ({len(empty)})</h2><ul>{items}</ul>")
    parts.append(_qa_list(out))
    for unit, recs in nodes.items():
        by_parent: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
        by_id = {r["id"]: r for r in recs}
        for r in recs:
            by_parent[r["parent"]].append(r)
        marks.clear()
        for q in qc_by_unit.get(unit, []):
            leaf = q.get("leaf")
            cls = "kept" if q["kept"] else "removed"
            while leaf is not None and leaf in by_id:
                if marks.get(leaf, ("", ""))[0] != "kept":
                    marks[leaf] = (cls, q["reason"])
                leaf = by_id[leaf]["parent"]
        parts.append(f"<h2>{html.escape(unit)}</h2>")
        why = unit_outcome(units[unit], roots.get(unit)) if unit in units else None
        if why:
            parts.append(f"<p class=err>kept nothing: {html.escape(why)}</p>")

        def draw(
            node_id: str | None,
            by_parent: dict[str | None, list[dict[str, Any]]] = by_parent,
            marks: dict[str, tuple[str, str]] = marks,
        ) -> str:
            items = []
            for r in by_parent.get(node_id, []):
                cls, reason = marks.get(r["id"], ("", ""))
                status = r.get("status")
                label = (
                    f"<b>{html.escape(str(r.get('strategy') or 'root'))}</b> ρ={_fmt(r.get('rho'))} "
                    f"Q̂={_fmt(r.get('q'))} N={r.get('n')} post={_fmt(r.get('post'))} "
                    + (
                        f"<span class=err>{html.escape(str(status))}</span>"
                        if status not in (None, "ok")
                        else ""
                    )
                    + (f" <i>{html.escape(reason)}</i>" if cls == "removed" else "")
                )
                body = ""
                if r.get("code"):
                    body = (
                        f"<details><summary>code / observation</summary><pre>{html.escape(r['code'])}</pre>"
                        f"<pre>{html.escape(r.get('excerpt') or '')}</pre></details>"
                    )
                items.append(f"<li><div class='node {cls}'>{label}{body}</div>{draw(r['id'])}</li>")
            return f"<ul class=tree>{''.join(items)}</ul>" if items else ""

        parts.append(draw(None))
    return "\n".join(parts)


def write_report(out: str | Path) -> Path:
    """Write ``report.html`` into the run folder (temp file + rename)."""
    out = Path(out)
    return write_text_atomic(out / "report.html", render_report(out))

"""The funnel of a DataMind run — files → queries → composed → sampled → consistent → rescued → filtered →
kept — as ``summary.json``, a terminal table and a small self-contained HTML page (``report.html``).

Everything is recomputed from the files in the output folder, so the numbers are right after any mix of
resumed and separately run stages. It also reports the figures the paper leaves out (§3.2): the round-0
consistency rate, how many queries reflection rescued (with their ids), and requests and tokens per stage
and role.
"""

from __future__ import annotations

import html
from collections import Counter
from typing import Any

from datadojo.fs import write_json_atomic, write_text_atomic
from datadojo.jsonl import iter_jsonl
from datadojo.runs.charts import bar_chart_svg
from datadojo.runs.html import html_page, html_table
from datadojo.synth.datamind.config import STRATEGIES
from datadojo.synth.datamind.consistency import read_verdicts, trajectories_by_round
from datadojo.synth.datamind.curation import CurationResult
from datadojo.synth.datamind.queries import load_queries
from datadojo.synth.datamind.report import read_models, report_sections
from datadojo.synth.datamind.store import Paths, read_usage

__all__ = [
    "DEFAULT_TITLE",
    "USAGE_COLUMNS",
    "build_summary",
    "funnel_rows",
    "render_report",
    "usage_rows",
    "write_summary",
]


def _rejections(paths: Paths) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    if paths.rejected.exists():
        for _, r in iter_jsonl(paths.rejected):
            out.setdefault(str(r.get("stage")), Counter())[str(r.get("reason"))] += 1
    return out


def build_summary(
    paths: Paths, *, files_seen: int, files_accepted: int, curation: CurationResult | None, rounds: int
) -> dict[str, Any]:
    """The funnel and usage of the run in ``paths.out`` (module docstring)."""
    rej = _rejections(paths)
    queries = load_queries(paths)
    base = [q for q in queries if q.difficulty == 1]
    composed = [q for q in queries if q.difficulty != 1]
    groups = trajectories_by_round(paths)
    verdicts = read_verdicts(paths)
    rounds = max([rounds, *(r for _, r in verdicts)])  # a stage run alone may not know how many there were
    r0 = [v for (_, r), v in verdicts.items() if r == 0]
    inconsistent0 = {v.task_id for v in r0 if not v.consistent}
    rescued_by_round: dict[str, int] = {}
    rescued: list[str] = []
    for tid in sorted(inconsistent0):
        for r in range(1, rounds + 1):
            v = verdicts.get((tid, r))
            if v is not None and v.consistent:
                rescued.append(tid)
                rescued_by_round[str(r)] = rescued_by_round.get(str(r), 0) + 1
                break
    round0 = [t for (_, r), ts in groups.items() if r == 0 for t in ts]
    reflected = [t for (_, r), ts in groups.items() if r > 0 for t in ts]
    usage = read_usage(paths)
    return {
        "out": str(paths.out),
        "models": read_models(paths),
        "files": {
            "seen": files_seen,
            "accepted": files_accepted,
            "rejected_by_reason": dict(rej.get("files", Counter())),
        },
        "queries": {
            "kept": len(base),
            "per_category": dict(Counter(str(q.category) for q in base).most_common()),
            "rejected_by_reason": dict(rej.get("queries", Counter())),
        },
        "composed": {
            "kept": len(composed),
            "by_difficulty": {
                str(k): v for k, v in sorted(Counter(int(q.difficulty or 0) for q in composed).items())
            },
            "rejected_by_reason": dict(rej.get("compose", Counter())),
        },
        "sampled": {
            "queries": len({t.task_id for t in round0}),
            "trajectories": len(round0),
            "stop_reasons": dict(Counter(t.stop_reason for t in round0)),
            "reflection_trajectories": len(reflected),
        },
        "consistency": {
            "judged": len(r0),
            "consistent_round0": sum(1 for v in r0 if v.consistent),
            "by_method": dict(Counter(v.method for v in r0)),
            "judge_errors": sum(1 for v in verdicts.values() if v.error),
        },
        "reflection": {
            "rounds": rounds,
            "inconsistent_round0": len(inconsistent0),
            "rescued": len(rescued),
            "rescued_by_round": rescued_by_round,
            "rescue_rate": round(len(rescued) / len(inconsistent0), 4) if inconsistent0 else None,
            "rescued_ids": rescued,
        },
        "filters": curation.to_dict() if curation is not None else None,
        "kept": dict(curation.kept) if curation is not None else {},
        "usage": usage,
        "requests": {
            "total": sum(r["requests"] for st in usage.values() for r in st["roles"].values()),
            "wall_s": round(sum(st["wall_s"] for st in usage.values()), 3),
        },
    }


def funnel_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The funnel as (step, count) rows for the terminal table and the HTML page."""
    f, q, c, s = summary["files"], summary["queries"], summary["composed"], summary["sampled"]
    k, r = summary["consistency"], summary["reflection"]
    rows = [
        ("files seen", str(f["seen"])),
        ("files accepted", str(f["accepted"])),
        ("queries kept (difficulty 1)", str(q["kept"])),
        ("queries rejected", str(sum(q["rejected_by_reason"].values()))),
        ("composed queries kept (difficulty 2-5)", str(c["kept"])),
        ("queries sampled (round 0)", str(s["queries"])),
        ("trajectories sampled (round 0)", str(s["trajectories"])),
        ("consistent at round 0", f"{k['consistent_round0']} of {k['judged']}"),
        ("rescued by reflection", f"{r['rescued']} of {r['inconsistent_round0']}"),
    ]
    flt = summary.get("filters")
    if flt:
        for name, n in flt["passed"].items():
            rows.append((f"trajectories passing {name} filter", f"{n} of {flt['filtered']}"))
    for name in STRATEGIES:
        if name in summary.get("kept", {}):
            rows.append((f"kept: {name}", str(summary["kept"][name])))
    rows.append(("LLM requests (all stages)", str(summary["requests"]["total"])))
    rows.append(("stage wall time (s)", f"{summary['requests']['wall_s']:.1f}"))
    return rows


#: Column titles of :func:`usage_rows`.
USAGE_COLUMNS: tuple[str, ...] = ("stage", "role", "requests", "prompt tokens", "completion tokens", "wall s")


def usage_rows(summary: dict[str, Any]) -> list[tuple[str, str, int, int, int, float]]:
    """Requests and tokens per stage and role, with each stage's wall time (terminal table and HTML page)."""
    return [
        (stage, role, v["requests"], v["prompt_tokens"], v["completion_tokens"], st["wall_s"])
        for stage, st in summary["usage"].items()
        for role, v in (
            st["roles"].items() or [("-", {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0})]
        )
    ]


#: The page's title when a run does not name its own (a synthesis folder; a recipe's curation stage names
#: itself, :attr:`~datadojo.synth.datamind.pipeline.DataMindRun.title`).
DEFAULT_TITLE = "DataMind synthesis"


def render_report(summary: dict[str, Any], paths: Paths | None = None, *, title: str = DEFAULT_TITLE) -> str:
    """The HTML page: funnel, per-category counts, rejections and usage per stage and role; with ``paths``
    also models and settings, sample queries and rejections, the trajectory viewer and links to the outputs
    (:mod:`.report`)."""
    q = summary["queries"]
    total = max(q["per_category"].values(), default=0)
    reasons = [
        (stage, reason, n)
        for stage, key in (("files", "files"), ("queries", "queries"), ("compose", "composed"))
        for reason, n in summary[key]["rejected_by_reason"].items()
    ]
    if summary.get("filters"):
        reasons += [("filter", name, n) for name, n in summary["filters"]["rejected_by_filter"].items()]
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="muted">{summary["out"]}</p>',
        "<h2>Funnel</h2>",
        html_table(["step", "count"], funnel_rows(summary)),
        "<h2>Queries per category</h2>",
        bar_chart_svg(
            list(q["per_category"].items()),
            title="difficulty-1 queries",
            max_value=float(total or 1),
            percent=False,
        ),
        "<h2>Rejections</h2>",
        html_table(["stage", "reason", "count"], reasons, num_from=2),
        "<h2>Requests and tokens</h2>",
        html_table(
            list(USAGE_COLUMNS),
            usage_rows(summary),
            num_from=2,
        ),
    ]
    if paths is not None:
        body[2:2] = report_sections(paths, summary.get("models") or {})
    return html_page(title, "\n".join(body))


def write_summary(paths: Paths, summary: dict[str, Any], *, title: str = DEFAULT_TITLE) -> None:
    """``summary.json`` and ``report.html`` (titled ``title``), each via a temporary file and a rename."""
    write_json_atomic(paths.summary, summary, default=str)
    write_text_atomic(paths.report, render_report(summary, paths, title=title))

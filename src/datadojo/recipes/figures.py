"""A sweep's figures in the papers' shape, drawn from the sweep's own results (docs/recipes.md "Sweeps").

Which figure a sweep gets follows from what was swept:

* a **numeric** key (a label budget, a γ value) → curves: x = the swept value (log-x over ≥ 2 decades, a
  0 budget at the left edge), y = each benchmark's pass@1 at the last checkpoint, one series per arm (the
  combination of the other keys' values) — EnvLunch Fig. 1. With exactly two arms, the first value of the
  arm key is the method and the second the baseline, and EnvLunch §4's curve-level gain and matching
  budget (:mod:`datadojo.recipes.curves`) stand in a table beside the plots (Table 1/2's Δ and Match);
* only **categorical** keys (curation strategies, DF-FPU on/off, branching) → grouped bars: one chart per
  checkpoint whose eval differs between variants, a group per benchmark (and the average), a bar per
  variant, values written on the bars — DataMind Fig. 4, SciDataSailor's ablations;
* a sweep that changes the **RL stage** (a γ schedule) so that at least two RL runs differ → also the
  training dynamics of each variant's RL run, read from the ``metrics.jsonl`` the trainer wrote: answer reward, reward and entropy per step, and
  γ itself, one series per variant — DataMind Figs. 6 (answer reward) and 7 (entropy).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from datadojo.jsonl import iter_jsonl
from datadojo.recipes.curves import curve_gain, matching_budget
from datadojo.recipes.engine import RecipeResult, Variant
from datadojo.runs.charts import grouped_bar_chart_svg, line_chart_svg
from datadojo.runs.html import html_table

__all__ = ["CHECKPOINTS", "DYNAMICS", "Figure", "score", "sweep_figures"]

#: Eval stages and their row labels, in order; a recipe without one of them (only EnvLunch has the
#: downstream fine-tuning on labelled examples, Fig. 1) has no row for it.
CHECKPOINTS = (
    ("eval_base", "base"),
    ("eval_sft", "+ SFT"),
    ("eval_rl", "+ RL"),
    ("eval_downstream", "+ labels"),
)

#: The RL metrics drawn per step (DataMind Fig. 6: answer reward; Fig. 7: entropy), with their titles.
DYNAMICS = (
    ("accuracy", "answer reward (fraction of rollouts answered right)"),
    ("reward_mean", "reward (mean over rollouts)"),
    ("entropy", "policy entropy"),
    ("gamma", "γ (SFT weight)"),
)


@dataclass
class Figure:
    """One section of the report: its title, HTML (charts, tables), Markdown lines and JSON data."""

    title: str
    html: str
    markdown: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)


def score(res: dict[str, Any]) -> float | None:
    """pass@1 of one benchmark's eval result (``None`` when it has none)."""
    m = res.get("metrics") or {}
    v = m.get("pass@1")
    return float(v) if isinstance(v, int | float) else None


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _short(key: str) -> str:
    return key.split(".")[-1]


def _setting(key: str, value: Any) -> str:
    """``rl on`` / ``rl off`` for an ``enabled`` switch (EnvLunch's warm-up on/off), else ``name=value``."""
    parts = key.split(".")
    if parts[-1] == "enabled" and isinstance(value, bool) and len(parts) > 1:
        return f"{parts[-2]} {'on' if value else 'off'}"
    return f"{parts[-1]}={value}"


def pct(v: float | None) -> str:
    """A score as a percentage with one decimal, as the report's tables show it (``None``: –)."""
    return "–" if v is None else f"{100 * v:.1f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """The lines of a Markdown table."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(str(c) for c in r) + " |" for r in rows),
    ]


def benchmark_titles(result: RecipeResult, vs: Sequence[Variant]) -> list[str]:
    """Every benchmark any checkpoint of ``vs`` was evaluated on, in first-seen order."""
    titles: list[str] = []
    for v in vs:
        for stage, _ in CHECKPOINTS:
            entry = result.entries.get(v.label, {}).get(stage)
            for t in (entry.manifest.get("results") or {}) if entry else {}:
                if t not in titles:
                    titles.append(t)
    return titles


def _scores(result: RecipeResult, v: Variant, stage: str, titles: Sequence[str]) -> list[float | None]:
    entry = result.entries.get(v.label, {}).get(stage)
    res = (entry.manifest.get("results") or {}) if entry else {}
    return [score(res[t]) if t in res else None for t in titles]


def _varies(result: RecipeResult, vs: Sequence[Variant], stage: str) -> bool:
    keys = {result.entries[v.label][stage].key for v in vs if stage in result.entries.get(v.label, {})}
    return len(keys) > 1


def sweep_figures(result: RecipeResult, vs: Sequence[Variant]) -> list[Figure]:
    """The figures of a sweep (module docstring); none for a single variant."""
    if len(vs) < 2:
        return []
    keys = list(vs[0].values)
    titles = benchmark_titles(result, vs)
    checkpoints = [
        (st, label) for st, label in CHECKPOINTS if all(st in result.entries.get(v.label, {}) for v in vs)
    ]
    figures: list[Figure] = []
    if checkpoints and titles:
        numeric = [k for k in keys if all(_is_num(v.values[k]) for v in vs)]
        if numeric:
            figures.append(_curves(result, vs, keys, numeric[0], checkpoints[-1], titles))
        else:
            figures += _bars(result, vs, checkpoints, titles)
    dynamics = _dynamics(result, vs)
    if dynamics is not None:
        figures.append(dynamics)
    return figures


def _curves(
    result: RecipeResult,
    vs: Sequence[Variant],
    keys: Sequence[str],
    xkey: str,
    checkpoint: tuple[str, str],
    titles: Sequence[str],
) -> Figure:
    stage, label = checkpoint
    others = [k for k in keys if k != xkey]
    arms: dict[str, list[tuple[float, Variant]]] = {}
    for v in vs:
        name = ", ".join(_setting(k, v.values[k]) for k in others) or label
        arms.setdefault(name, []).append((float(v.values[xkey]), v))
    curves: dict[str, dict[str, dict[float, float]]] = {}
    charts = []
    for j, bench in enumerate(titles):
        per_arm: dict[str, dict[float, float]] = {}
        for arm, points in arms.items():
            per_arm[arm] = {}
            for x, v in points:
                y = _scores(result, v, stage, titles)[j]
                if y is not None:
                    per_arm[arm][x] = y
        curves[bench] = per_arm
        charts.append(
            line_chart_svg(
                {arm: sorted(c.items()) for arm, c in per_arm.items()},
                title=f"{bench}: pass@1 ({label}) over {_short(xkey)}",
                x_label=_short(xkey),
                y_label="pass@1 (%)",
            )
        )
    points = [
        [bench, arm, f"{x:g}", pct(y)]
        for bench, per_arm in curves.items()
        for arm, c in per_arm.items()
        for x, y in sorted(c.items())
    ]
    md = markdown_table([_short(xkey) + " →", "arm", "x", "pass@1 (%)"], points)
    data: dict[str, Any] = {
        "kind": "curves",
        "x": xkey,
        "checkpoint": stage,
        "series": {b: {a: sorted(c.items()) for a, c in pa.items()} for b, pa in curves.items()},
    }
    table = ""
    if len(arms) == 2:
        method, baseline = list(arms)
        header = ["benchmark", method, baseline, "Δ (points)", "match"]
        rows, gains = [], {}
        for bench, per_arm in curves.items():
            m, b = per_arm[method], per_arm[baseline]
            shared = [n for n in m if n in b and n > 0]
            gain = curve_gain(m, b)
            match = matching_budget(m, b)
            rows.append(
                [
                    bench,
                    pct(sum(m[n] for n in shared) / len(shared)) if shared else "–",
                    pct(sum(b[n] for n in shared) / len(shared)) if shared else "–",
                    "–" if gain is None else f"{100 * gain:+.1f}",
                    "–" if match is None else str(match),
                ]
            )
            gains[bench] = {
                "curve_level_gain": gain,
                "matching_budget": None if match is None else match.multiple,
                "matching_budget_text": None if match is None else str(match),
            }
        data["method"], data["baseline"], data["gain"] = method, baseline, gains
        table = (
            '<div class="gain"><p>EnvLunch §4: Δ = curve-level gain (mean pass@1 difference over the '
            "positive budgets), match = smallest baseline budget reaching the method's pass@1 at its "
            f"smallest budget, as a multiple of it. Method: {html.escape(method)}; baseline: "
            f"{html.escape(baseline)}.</p>{html_table(header, rows, num_from=1)}</div>"
        )
        md += ["", "Curve-level gain and matching budget (EnvLunch §4):", "", *markdown_table(header, rows)]
    body = (
        '<div class="figure" style="display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start">'
        + "".join(charts)
        + table
        + "</div>"
    )
    return Figure(f"pass@1 over {_short(xkey)} (EnvLunch Fig. 1 shape)", body, md, data)


def _bars(
    result: RecipeResult,
    vs: Sequence[Variant],
    checkpoints: Sequence[tuple[str, str]],
    titles: Sequence[str],
) -> list[Figure]:
    shown = [c for c in checkpoints if _varies(result, vs, c[0])] or [checkpoints[-1]]
    out = []
    for stage, label in shown:
        series: dict[str, list[float | None]] = {}
        for v in vs:
            scores = _scores(result, v, stage, titles)
            known = [s for s in scores if s is not None]
            series[v.label] = [*scores, sum(known) / len(known) if known else None]
        groups = [*titles, "average"]
        svg = grouped_bar_chart_svg(groups, series, title=f"{label}: pass@1 per benchmark and variant")
        md = markdown_table(["variant", *groups], [[v, *(pct(x) for x in s)] for v, s in series.items()])
        data = {"kind": "bars", "checkpoint": stage, "groups": groups, "series": series}
        out.append(Figure(f"{label}: pass@1 per variant (DataMind Fig. 4 shape)", svg, md, data))
    return out


def _metrics(path: Any) -> list[dict[str, Any]]:
    """Per-step records of a training log; a step logged twice (a resumed run) keeps its last record."""
    if not path.is_file():
        return []
    by_step: dict[float, dict[str, Any]] = {}
    for _, rec in iter_jsonl(path):
        if isinstance(rec, dict) and _is_num(rec.get("step")):
            by_step[float(rec["step"])] = rec
    return [by_step[s] for s in sorted(by_step)]


def _dynamics(result: RecipeResult, vs: Sequence[Variant]) -> Figure | None:
    if not _varies(result, vs, "rl"):
        return None
    logs: dict[str, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for v in vs:
        entry = result.entries.get(v.label, {}).get("rl")
        if entry is None or entry.manifest.get("skipped") or entry.key in seen:
            continue
        seen.add(entry.key)
        path = entry.manifest.get("metrics")
        recs = _metrics(entry.path / "run" / "metrics.jsonl" if not path else type(entry.path)(path))
        if recs:
            logs[v.label] = recs
    if len(logs) < 2:  # one RL run (warm-up on vs off) has nothing to compare step by step
        return None
    charts, data = [], {}
    for key, name in DYNAMICS:
        series = {
            label: [
                (float(r["step"]), float(r[key]))
                for r in recs
                if _is_num(r.get(key)) and math.isfinite(r[key])
            ]
            for label, recs in logs.items()
        }
        series = {k: pts for k, pts in series.items() if pts}
        if not series:
            continue
        data[key] = series
        charts.append(
            line_chart_svg(series, title=f"{name} per RL step", x_label="step", percent=False, x_log=False)
        )
    if not charts:
        return None
    md = [f"Per-step RL metrics of {len(logs)} runs ({', '.join(logs)}): see report.html."]
    body = '<div class="figure" style="display:flex;flex-wrap:wrap;gap:16px">' + "".join(charts) + "</div>"
    return Figure(
        "RL training dynamics per variant (DataMind Figs. 6–7 shape)",
        body,
        md,
        {"kind": "dynamics", "series": data},
    )

"""A sweep's figures in the papers' shape, drawn from the sweep's own results (docs/recipes.md "Sweeps").

Which figure a sweep gets follows from what was swept:

* a **numeric** key (a label budget, a γ value) → curves: x = the swept value (log-x over ≥ 2 decades, a
  0 budget at the left edge), y = each benchmark's pass@1 at the last checkpoint, one series per arm (the
  combination of the other keys' values) — EnvLunch Fig. 1. With ``[study] seeds``, each point is the mean
  over its seeds, drawn with a min–max band, and the report counts the seeds each point has (flagging those
  short of the asked number). The recipe's ``[study]`` names the method and the baseline arm, and EnvLunch
  §4's curve-level gain and matching budget (:mod:`datadojo.recipes.curves`, on the means) stand in a table
  beside the plots (Table 1/2's Δ and Match); the series are ordered by role, not by the ``--sweep``
  order, so the figure is the same whatever that order. Without a ``[study]`` there is no Δ: which arm is
  the method is not something the order of the values can say;
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
from datadojo.recipes.config import StudyConfig
from datadojo.recipes.curves import SeedBand, compare, seed_bands
from datadojo.recipes.engine import RecipeResult, Variant, same_value
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
    ran = [v for v in vs if v.label not in result.failed] or vs  # a failed replicate has no last checkpoint
    checkpoints = [
        (st, label) for st, label in CHECKPOINTS if all(st in result.entries.get(v.label, {}) for v in ran)
    ]
    figures: list[Figure] = []
    if checkpoints and titles:
        arm = vs[0].config.study.arm if vs[0].config.study else None
        numeric = [k for k in keys if k != arm and all(_is_num(v.values[k]) for v in vs)]
        if numeric:
            figures.append(_curves(result, vs, keys, numeric[0], checkpoints[-1], titles))
        else:
            figures += _bars(result, vs, checkpoints, titles)
    dynamics = _dynamics(result, vs)
    if dynamics is not None:
        figures.append(dynamics)
    return figures


def _role(study: StudyConfig | None, v: Variant) -> int:
    """0 for the method arm, 1 for the baseline, 2 for any other value of the arm key (or without a study)."""
    if study is None or study.arm not in v.values:
        return 2
    value = v.values[study.arm]
    return 0 if same_value(value, study.method) else 1 if same_value(value, study.baseline) else 2


def _series(v: Variant, others: Sequence[str], label: str) -> str:
    """The series a variant's point belongs to: its values of the keys other than the x (``rl on``)."""
    return ", ".join(_setting(k, v.values[k]) for k in others) or label


def _seed(v: Variant) -> int:
    return 0 if v.seed is None else v.seed


def _band_text(band: SeedBand | None, asked: int) -> list[str]:
    """Mean, min, max (%) and ``n/asked`` seeds of one point; a point short of seeds is marked ⚠."""
    if band is None:
        return ["–", "–", "–", f"0/{asked} ⚠"]
    n = f"{band.n}/{asked}" + (" ⚠" if band.n < asked else "")
    return [pct(band.mean), pct(band.lo), pct(band.hi), n]


def _curves(
    result: RecipeResult,
    vs: Sequence[Variant],
    keys: Sequence[str],
    xkey: str,
    checkpoint: tuple[str, str],
    titles: Sequence[str],
) -> Figure:
    stage, label = checkpoint
    study = vs[0].config.study
    seeds = (study.seed_list if study else None) or [0]
    others = [k for k in keys if k != xkey]
    context = [k for k in others if study is None or k != study.arm]
    # One series per combination of the other keys; with a [study], the method arm first, then the baseline,
    # then any other arm value, each group by name, so the figure does not follow the --sweep order.
    names = {_series(v, others, label): _role(study, v) for v in vs}
    order = sorted(names, key=lambda n: (names[n], n)) if study is not None else list(names)
    xs = sorted({float(v.values[xkey]) for v in vs})
    curves: dict[str, dict[str, dict[float, SeedBand]]] = {}
    charts = []
    for j, bench in enumerate(titles):
        raw: dict[str, dict[float, dict[int, float | None]]] = {n: {} for n in order}
        for v in vs:
            raw[_series(v, others, label)].setdefault(float(v.values[xkey]), {})[_seed(v)] = _scores(
                result, v, stage, titles
            )[j]
        per_arm = {n: seed_bands(raw[n]) for n in order}
        curves[bench] = per_arm
        charts.append(
            line_chart_svg(
                {n: [(x, b.mean) for x, b in c.items()] for n, c in per_arm.items()},
                title=f"{bench}: pass@1 ({label}) over {_short(xkey)}"
                + (f", mean of {len(seeds)} seeds, band min–max" if len(seeds) > 1 else ""),
                x_label=_short(xkey),
                y_label="pass@1 (%)",
                bands={n: [(x, b.lo, b.hi) for x, b in c.items()] for n, c in per_arm.items()}
                if len(seeds) > 1
                else None,
            )
        )
    points = [
        [bench, n, f"{x:g}", *_band_text(c.get(x), len(seeds))]
        for bench, per_arm in curves.items()
        for n, c in per_arm.items()
        for x in xs
    ]
    short = []
    for bench, per_arm in curves.items():
        for n, c in per_arm.items():
            for x in xs:
                missing = [s for s in seeds if x not in c or s not in c[x].scores]
                if missing:
                    short.append(
                        f"{bench} · {n} @ {x:g}: {len(seeds) - len(missing)} of {len(seeds)} "
                        f"(no score for seed {', '.join(map(str, missing))})"
                    )
    header = ["benchmark", "arm", _short(xkey), "pass@1 (%) mean", "min", "max", "seeds"]
    md = markdown_table(header, points)
    data: dict[str, Any] = {
        "kind": "curves",
        "x": xkey,
        "checkpoint": stage,
        "seeds": seeds,
        "series": {
            b: {a: [[x, band.mean] for x, band in c.items()] for a, c in pa.items()}
            for b, pa in curves.items()
        },
        "bands": {
            b: {
                a: [
                    {"x": x, "mean": band.mean, "min": band.lo, "max": band.hi, "seeds": sorted(band.scores)}
                    for x, band in c.items()
                ]
                for a, c in pa.items()
            }
            for b, pa in curves.items()
        },
        "short_of_seeds": short,
    }
    notes = []
    if short:
        notes.append(
            f"Points with fewer than the {len(seeds)} seeds asked (a failed run or a missing score): "
            + "; ".join(short)
            + "."
        )
    table = ""
    pairs = _pairs(study, vs, others, context, label)
    if study is None and len(order) == 2:
        notes.append(
            "Δ and the matching budget need the arms named: add a [study] section (arm, method, baseline) "
            "to the recipe (docs/recipes.md)."
        )
    if pairs:
        header_g = [
            "benchmark",
            "method",
            "baseline",
            "method pass@1",
            "baseline pass@1",
            "Δ (points)",
            "match",
        ]
        rows, gains = [], {}
        for bench, per_arm in curves.items():
            for ctx, (method, baseline) in pairs.items():
                m, b = per_arm.get(method, {}), per_arm.get(baseline, {})
                cmp = compare(m, b)
                shared = [x for x in m if x > 0 and x in b]
                delta = "–" if cmp.gain is None else f"{100 * cmp.gain:+.1f}"
                if cmp.gain_std is not None:
                    delta += f" ± {100 * cmp.gain_std:.1f}"
                rows.append(
                    [
                        bench,
                        method,
                        baseline,
                        pct(sum(m[x].mean for x in shared) / len(shared)) if shared else "–",
                        pct(sum(b[x].mean for x in shared) / len(shared)) if shared else "–",
                        delta,
                        "–" if cmp.match is None else str(cmp.match),
                    ]
                )
                gains[bench if not ctx else f"{bench} ({ctx})"] = {
                    "method": method,
                    "baseline": baseline,
                    "curve_level_gain": cmp.gain,
                    "curve_level_gain_std": cmp.gain_std,
                    "paired_runs": cmp.paired_runs,
                    "matching_budget": None if cmp.match is None else cmp.match.multiple,
                    "matching_budget_text": None if cmp.match is None else str(cmp.match),
                }
        assert study is not None
        data["study"] = {"arm": study.arm, "method": study.method, "baseline": study.baseline}
        if len(pairs) == 1:
            data["method"], data["baseline"] = next(iter(pairs.values()))
        data["gain"] = gains
        seeds_text = (
            f" on the mean over {len(seeds)} seeds (± the sample std of Δ over runs paired by seed)"
            if len(seeds) > 1
            else ""
        )
        table = (
            '<div class="gain"><p>EnvLunch §4: Δ = curve-level gain (mean pass@1 difference over the '
            "positive budgets), match = smallest baseline budget reaching the method's pass@1 at its "
            f"smallest budget, as a multiple of it{seeds_text}. Arms named by [study]: "
            f"{html.escape(study.arm)} = {html.escape(repr(study.method))} (method) vs "
            f"{html.escape(repr(study.baseline))} (baseline).</p>{html_table(header_g, rows, num_from=3)}</div>"
        )
        md += ["", "Curve-level gain and matching budget (EnvLunch §4):", "", *markdown_table(header_g, rows)]
    md += ["", *notes] if notes else []
    body = (
        '<div class="figure" style="display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start">'
        + "".join(charts)
        + table
        + "</div>"
        + "".join(f'<p class="note">{html.escape(n)}</p>' for n in notes)
    )
    return Figure(f"pass@1 over {_short(xkey)} (EnvLunch Fig. 1 shape)", body, md, data)


def _pairs(
    study: StudyConfig | None,
    vs: Sequence[Variant],
    others: Sequence[str],
    context: Sequence[str],
    label: str,
) -> dict[str, tuple[str, str]]:
    """``{context: (method series, baseline series)}``: per combination of the keys other than the x and the
    arm, the series of the [study]'s method value and of its baseline value (none without a study)."""
    if study is None:
        return {}
    found: dict[str, list[str | None]] = {}
    for v in vs:
        role = _role(study, v)
        if role == 2:
            continue
        ctx = ", ".join(_setting(k, v.values[k]) for k in context)
        found.setdefault(ctx, [None, None])[role] = (
            ", ".join(_setting(k, v.values[k]) for k in others) or label
        )
    return {ctx: (m, b) for ctx, (m, b) in sorted(found.items()) if m is not None and b is not None}


def _bars(
    result: RecipeResult,
    vs: Sequence[Variant],
    checkpoints: Sequence[tuple[str, str]],
    titles: Sequence[str],
) -> list[Figure]:
    shown = [c for c in checkpoints if _varies(result, vs, c[0])] or [checkpoints[-1]]
    out = []
    seeded = any(v.seed is not None for v in vs)
    for stage, label in shown:
        # a bar per sweep point: with [study] seeds, the mean over the seeds that scored (n in the table)
        runs: dict[str, list[list[float | None]]] = {}
        for v in vs:
            runs.setdefault(v.point, []).append(_scores(result, v, stage, titles))
        series: dict[str, list[float | None]] = {}
        counts: dict[str, list[int]] = {}
        for point, per_seed in runs.items():
            cols = [[r[j] for r in per_seed if r[j] is not None] for j in range(len(titles))]
            means = [sum(c) / len(c) if c else None for c in cols]
            known = [m for m in means if m is not None]
            series[point] = [*means, sum(known) / len(known) if known else None]
            counts[point] = [len(c) for c in cols]
        groups = [*titles, "average"]
        title = f"{label}: pass@1 per benchmark and variant" + (", mean over seeds" if seeded else "")
        svg = grouped_bar_chart_svg(groups, series, title=title)
        rows = [[v, *(pct(x) for x in s)] for v, s in series.items()]
        header = ["variant", *groups]
        if seeded:
            asked = len(vs[0].config.study.seed_list or []) if vs[0].config.study else 1
            header.append("seeds per benchmark")
            for row, point in zip(rows, series, strict=True):
                row.append(" ".join(f"{n}/{asked}" + (" ⚠" if n < asked else "") for n in counts[point]))
        md = markdown_table(header, rows)
        data = {"kind": "bars", "checkpoint": stage, "groups": groups, "series": series}
        if seeded:
            data["seeds"] = counts
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

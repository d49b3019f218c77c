"""The table of each paper that its recipe reproduces, with the paper's reported numbers beside this run's.

Why: a recipe run is only worth its numbers next to the ones it sets out to reproduce. The report shows,
per recipe, the paper's own table — DataMind's benchmark accuracy by model (Table 1), EnvLunch's warm-up
vs no-warm-up comparison (curve-level gain and matching budget, §5.1 and §5.3), SciDataSailor's QA
benchmark table with its behavioural columns (Table 3: Pass@1, success rate, average ReAct steps) — with
this run's rows under the same columns, wherever the run evaluated the same benchmark.

The reported numbers are copied from the papers' text as we hold it (``shared/papers``), each row with
the table or section it comes from; none is computed here. Where a paper's table is not in that text
(EnvLunch's per-benchmark Tables 1–2), only the figures its prose states are shown, and the report says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from datadojo.recipes.engine import RecipeResult, Variant, same_value
from datadojo.recipes.figures import CHECKPOINTS, Figure

__all__ = ["PAPER_TABLES", "PaperTable", "paper_table"]


@dataclass(frozen=True)
class PaperTable:
    """One paper table: its title (with the table's reference), its columns, the paper's rows (label, values
    as printed in the paper, ``None`` where the text gives none), and the notes under it."""

    recipe: str
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str | None, ...]], ...]
    notes: tuple[str, ...] = ()


#: DataMind (arXiv 2509.25084) §5.2, Table 1: pass@1 (%) over three trials, by model. The values are those
#: quoted from Table 1 in the paper's text (shared/papers/000_…: §"Headline Benchmark Performance (Table 1)",
#: and the per-claim discussion); a value the text does not quote is None.
DATAMIND_TABLE = PaperTable(
    "datamind",
    "DataMind (arXiv 2509.25084) §5.2, Table 1: pass@1 (%) by model",
    ("DABench", "TableBench", "BIRD", "average"),
    (
        ("Qwen2.5-Coder-7B, ReAct (paper)", ("15.05", None, "7.02", "11.26")),
        ("Qwen-2.5-72B (paper)", ("75.33", "65.44", "60.30", "67.02")),
        ("DeepSeek-V3.1 (paper)", ("81.32", "72.52", "57.89", "70.58")),
        ("GPT-5 (paper)", (None, None, None, "69.44")),
        ("DataMind-7B (paper)", ("77.30", "67.60", "59.41", "68.10")),
        ("DataMind-14B (paper)", ("80.29", "70.95", "62.23", "71.16")),
    ),
    ("– : not quoted in the text of the paper we hold (DataMind's Table 1 has every cell).",),
)

#: The DataDojo benchmark of each DataMind column (the average is over the three).
DATAMIND_BENCHES = ("dabench", "tablebench", "bird")

#: EnvLunch (arXiv 2610.33817): warm-up (the method) against no warm-up (the baseline). Its Tables 1–2 give Δ
#: and the matching budget per benchmark and model; their cells are not in the text we hold, so the rows are
#: what the prose states: §5.3 (Alternative Explanations) "+9.6 and +9.3 for EnvLunch" (the curve-level gain
#: averaged over the six data-analysis benchmarks, at 4 B and 9 B), and §5.1 on Table 1's matching budgets.
ENVLUNCH_TABLE = PaperTable(
    "envlunch",
    "EnvLunch (arXiv 2610.33817) warm-up vs no warm-up: curve-level gain Δ (pass@1 points) and matching budget "
    "(§4; Tables 1–2, §5.1, §5.3)",
    ("curves", "Δ (warm-up − no warm-up)", "matching budget"),
    (
        ("Qwen3.5-4B, mean of 6 data-analysis benchmarks (paper §5.3)", ("6", "+9.6", None)),
        ("Qwen3.5-9B, mean of 6 data-analysis benchmarks (paper §5.3)", ("6", "+9.3", None)),
        (
            "both models, each data-analysis benchmark (paper §5.1, Table 1)",
            ("12", None, "8× to 32× (median 16×); not reached on the 2 DSEval curves"),
        ),
    ),
    (
        "The per-benchmark cells of Tables 1–2 (Spider among Table 2's) are not in the text of the paper we "
        "hold; the rows above are the figures its prose states.",
    ),
)

#: SciDataSailor (arXiv 2607.28098) §5, Table 3: SciDataSailor-Bench-QA under ReAct-step budgets of 12 and
#: 24; Pass@1 and success rate (SR) in %, average ReAct steps. Copied from the paper's Table 3 (its SFT row's
#: arrows, the change from Qwen3.5-9B, left out).
SAILOR_TABLE = PaperTable(
    "sailor",
    "SciDataSailor (arXiv 2607.28098) §5, Table 3: SciDataSailor-Bench-QA, Pass@1 (%), success rate SR (%) and "
    "average ReAct steps under step budgets of 12 and 24",
    ("Pass@1 @12", "SR @12", "Avg. Steps @12", "Pass@1 @24", "SR @24", "Avg. Steps @24"),
    (
        ("GPT-5.4 (paper)", ("61.95", "97.78", "5.16", "62.97", "99.66", "5.27")),
        ("Gemini-3.1-Pro (paper)", ("60.58", "86.01", "6.75", "60.92", "92.66", "7.82")),
        ("Claude-Opus-4-7-Thinking (paper)", ("64.16", "94.71", "5.34", "66.04", "99.15", "5.55")),
        ("GLM-5.1 (paper)", ("58.02", "79.52", "7.94", "63.82", "92.66", "9.48")),
        ("Kimi-K2.6 (paper)", ("56.66", "62.46", "9.01", "64.85", "87.54", "11.49")),
        ("DeepSeek-V4-Pro (paper)", ("61.43", "81.74", "7.58", "65.53", "94.20", "8.37")),
        ("DeepSeek-V4-Flash (paper)", ("56.66", "74.40", "8.64", "61.77", "91.81", "10.46")),
        ("GPT-OSS-120B (paper)", ("40.61", "77.13", "7.48", "25.77", "98.63", "5.98")),
        ("Qwen3.5-27B (paper)", ("56.66", "77.82", "8.24", "63.31", "95.56", "9.63")),
        ("Qwen3.5-35B-A3B (paper)", ("52.05", "74.91", "8.45", "59.04", "92.83", "10.14")),
        ("Qwen3-32B (paper)", ("7.34", "82.59", "5.54", "7.85", "84.30", "6.72")),
        ("GPT-OSS-20B (paper)", ("20.48", "70.14", "7.88", "31.23", "89.93", "10.85")),
        ("Qwen3.5-9B (paper)", ("42.32", "71.50", "7.91", "48.12", "85.49", "9.45")),
        ("Qwen3.5-9B-SFT (paper)", ("48.81", "82.76", "7.27", "51.19", "93.17", "7.68")),
    ),
    (
        "This run fills the columns of its scidata benchmark's max_turns (12 or 24): Pass@1 of its QA tasks, "
        "SR = the share of trials that ended with an answer, Avg. Steps = turns per trial.",
    ),
)

PAPER_TABLES: dict[str, PaperTable] = {t.recipe: t for t in (DATAMIND_TABLE, ENVLUNCH_TABLE, SAILOR_TABLE)}


@dataclass
class FilledTable:
    """A paper table with this run's rows added (``run_rows``), ready to render; ``notes`` adds what this
    run could not fill and why."""

    table: PaperTable
    run_rows: list[tuple[str, list[str | None]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def header(self) -> list[str]:
        return ["", *self.table.columns]

    def rows(self) -> list[list[str]]:
        """Every row as shown: the paper's, then this run's; – for an empty cell."""
        out = [[label, *(v if v is not None else "–" for v in values)] for label, values in self.table.rows]
        out += [[label, *(v if v is not None else "–" for v in values)] for label, values in self.run_rows]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.table.title,
            "columns": list(self.table.columns),
            "paper": [{"row": label, "values": list(v)} for label, v in self.table.rows],
            "run": [{"row": label, "values": list(v)} for label, v in self.run_rows],
            "notes": [*self.table.notes, *self.notes],
        }


def _pct(v: Any) -> str | None:
    return f"{100 * float(v):.2f}" if isinstance(v, int | float) and not isinstance(v, bool) else None


def _row_label(v: Variant, label: str, many: bool) -> str:
    return f"this run · {v.label} · {label}" if many else f"this run · {label}"


def _checkpoint_results(result: RecipeResult, vs: Sequence[Variant]) -> list[tuple[str, dict[str, Any]]]:
    """``(row label, {bench name: its eval result})`` per variant and evaluated checkpoint."""
    out = []
    for v in vs:
        for stage, label in CHECKPOINTS:
            entry = result.entries.get(v.label, {}).get(stage)
            if entry is None:
                continue
            res = entry.manifest.get("results") or {}
            by_bench = {str(r.get("bench", t)).lower(): r for t, r in res.items() if isinstance(r, dict)}
            out.append((_row_label(v, label, len(vs) > 1), by_bench))
    return out


def _datamind(result: RecipeResult, vs: Sequence[Variant]) -> FilledTable:
    filled = FilledTable(DATAMIND_TABLE)
    for label, by_bench in _checkpoint_results(result, vs):
        values = [_pct((by_bench.get(b) or {}).get("metrics", {}).get("pass@1")) for b in DATAMIND_BENCHES]
        known = [float(x) for x in values if x is not None]
        if not known:
            continue
        average = f"{sum(known) / len(known):.2f}" if len(known) == len(DATAMIND_BENCHES) else None
        filled.run_rows.append((label, [*values, average]))
    if not filled.run_rows:
        filled.notes.append(
            "This run evaluated none of the table's benchmarks (dabench, tablebench, bird): its numbers are in "
            "the table above."
        )
    elif any(r[1][-1] is None for r in filled.run_rows):
        filled.notes.append(
            "This run's average is shown only when it has all three of the table's benchmarks."
        )
    return filled


def _sailor(result: RecipeResult, vs: Sequence[Variant]) -> FilledTable:
    filled = FilledTable(SAILOR_TABLE)
    for label, by_bench in _checkpoint_results(result, vs):
        res = by_bench.get("scidata")
        if res is None:
            continue
        metrics = res.get("metrics") or {}
        qa = (metrics.get("per_category") or {}).get("qa") or metrics
        steps = qa.get("avg_turns")
        cells = [_pct(qa.get("pass@1")), _pct(qa.get("success_rate")), f"{steps:.2f}" if steps else None]
        budget = _max_turns(vs, res)
        values: list[str | None] = [None] * 6
        if budget in (12, 24):
            at = 0 if budget == 12 else 3
            values[at : at + 3] = cells
            filled.run_rows.append((label, values))
        else:
            filled.notes.append(
                f"{label}: evaluated with a budget of {budget} turns, not 12 or 24: Pass@1 "
                f"{cells[0] or '–'}, SR {cells[1] or '–'}, Avg. Steps {cells[2] or '–'}"
            )
    if not filled.run_rows and not filled.notes:
        filled.notes.append("This run evaluated no scidata benchmark: its numbers are in the table above.")
    return filled


def _max_turns(vs: Sequence[Variant], res: dict[str, Any]) -> int | None:
    """The turn budget the scidata eval ran under: its ``[[benchmarks]]`` entry's, else the benchmark's."""
    from datadojo.bench.registry import get_benchmark

    for v in vs:
        for spec in v.config.benchmarks:
            if spec.bench.lower() == "scidata":
                return spec.max_turns or get_benchmark("scidata").defaults.max_turns
    return None


def _envlunch(result: RecipeResult, vs: Sequence[Variant], figures: Sequence[Figure]) -> FilledTable:
    filled = FilledTable(ENVLUNCH_TABLE)
    for fig in figures:
        for bench, gain in (fig.data.get("gain") or {}).items():
            delta = gain.get("curve_level_gain")
            shown = None if delta is None else f"{100 * delta:+.1f}"
            if shown is not None and gain.get("curve_level_gain_std") is not None:
                shown += f" ± {100 * gain['curve_level_gain_std']:.1f}"
            series = (fig.data.get("series") or {}).get(bench) or {}
            budgets = {
                x for points in series.values() for x, _ in points if isinstance(x, int | float) and x > 0
            }
            curves = f"{len(budgets)} budgets" if budgets else None
            filled.run_rows.append((f"this run · {bench}", [curves, shown, gain.get("matching_budget_text")]))
    if filled.run_rows:
        return filled
    # one budget, warm-up on and off (a sweep of stages.rl.enabled): Δ at that budget, per benchmark
    on = [v for v in vs if same_value(v.values.get("stages.rl.enabled"), True)]
    off = [v for v in vs if same_value(v.values.get("stages.rl.enabled"), False)]
    if on and off:
        for bench in sorted({b for v in vs for b in _last_scores(result, v)}):
            a = [s for v in on if (s := _last_scores(result, v).get(bench)) is not None]
            b = [s for v in off if (s := _last_scores(result, v).get(bench)) is not None]
            if a and b:
                delta = 100 * (sum(a) / len(a) - sum(b) / len(b))
                filled.run_rows.append(
                    (f"this run · {bench}, one budget", ["1 budget", f"{delta:+.1f}", None])
                )
        filled.notes.append(
            "This run compares warm-up on and off at one label budget: sweep stages.downstream.labels too for "
            "the curve-level gain and the matching budget (docs/recipes.md)."
        )
        return filled
    filled.notes.append(
        "This run has no warm-up-off arm: run it with --sweep stages.rl.enabled=true,false (and "
        "--sweep stages.downstream.labels=0,16,64,256 for the curves) to fill this table."
    )
    return filled


def _last_scores(result: RecipeResult, v: Variant) -> dict[str, float]:
    """pass@1 per benchmark of the variant's last evaluated checkpoint."""
    for stage, _ in reversed(CHECKPOINTS):
        entry = result.entries.get(v.label, {}).get(stage)
        if entry is not None:
            res = entry.manifest.get("results") or {}
            return {
                t: float(r["metrics"]["pass@1"])
                for t, r in res.items()
                if isinstance(r, dict) and isinstance((r.get("metrics") or {}).get("pass@1"), int | float)
            }
    return {}


def paper_table(
    recipe: str, result: RecipeResult, vs: Sequence[Variant], figures: Sequence[Figure] = ()
) -> FilledTable:
    """The paper table of ``recipe`` with this run's rows (module docstring)."""
    if recipe == "datamind":
        return _datamind(result, vs)
    if recipe == "sailor":
        return _sailor(result, vs)
    return _envlunch(result, vs, figures)

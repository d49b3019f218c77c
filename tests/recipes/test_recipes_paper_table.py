"""The paper's table in the recipe report: the reported numbers are the papers' own (checked against their
text in ``../shared/papers``, never invented), and this run's rows fill the paper's columns with its own
numbers (hand-computed expectations from made-up eval results)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from datadojo.recipes import load_recipe
from datadojo.recipes.engine import RecipeResult, Variant
from datadojo.recipes.figures import Figure
from datadojo.recipes.paper import DATAMIND_TABLE, ENVLUNCH_TABLE, SAILOR_TABLE, paper_table
from datadojo.runs import CacheEntry

PAPERS = Path(__file__).resolve().parents[2].parent / "shared" / "papers"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "recipes"


def _paper(arxiv: str) -> str:
    """The text of the paper whose file names ``arxiv`` (skips when the shared papers are absent)."""
    if not PAPERS.is_dir():
        pytest.skip(f"shared papers absent: {PAPERS}")
    for path in sorted(PAPERS.glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        if arxiv in text[:2000]:
            return text
    pytest.skip(f"no paper {arxiv} in {PAPERS}")


def test_sailor_rows_are_the_papers_table_3() -> None:
    text = _paper("2607.28098")
    table3 = text.split("Table 3:", 1)[1].split("Models and agent scaffold", 1)[0]
    for label, values in SAILOR_TABLE.rows:
        model = label.removesuffix(" (paper)")
        line = next(ln for ln in table3.splitlines() if ln.startswith(f"| {model} |"))
        cells = [re.sub(r"\s*\$.*", "", c).strip() for c in line.strip("| \n").split("|")[1:]]
        assert tuple(cells) == values, model
    assert len(SAILOR_TABLE.rows) == 14  # every model row of Table 3


def test_datamind_values_are_quoted_from_its_table_1() -> None:
    text = _paper("2509.25084")
    quoted = {v for _, values in DATAMIND_TABLE.rows for v in values if v is not None}
    for v in quoted:
        assert f"{v}%" in text, v
    # the rows are the model each value is quoted for (spot checks of the sentences they come from)
    assert "77.30% (DABench), 67.60% (TableBench), 59.41% (BIRD) for the 7B version" in text
    assert "across three benchmarks (71.16% vs. DeepSeek-V3.1 at 70.58%, GPT-5 at 69.44%)" in text
    assert (
        "Qwen-2.5-72B at 67.02%" in text
        and "(vs. 75.33% for Qwen-72B), 67.60% on TableBench (vs. 65.44%)" in text
    )
    assert (
        "DeepSeek-V3.1 outperforms DATAMIND-14B on DABench (81.32% vs. 80.29%) and TableBench (72.52% vs. 70.95%)"
        in text
    )


def test_envlunch_figures_are_the_ones_its_prose_states() -> None:
    text = _paper("Label-efficiency curves")
    assert "against +9.6 and +9.3 for EnvLunch" in text
    assert "between 8\\times and 32\\times as many examples" in text and "median of 16\\times" in text
    assert "on the two DSEval curves, it does not reach the target" in text
    assert [v[1] for _, v in ENVLUNCH_TABLE.rows[:2]] == ["+9.6", "+9.3"]


def _result(tmp_path: Path, per_variant: dict[str, dict[str, dict[str, Any]]]) -> RecipeResult:
    """A result whose variants evaluated their RL checkpoint: ``{variant: {bench title: eval result}}``."""
    entries = {
        v: {"eval_rl": CacheEntry("eval_rl", f"k{v}", tmp_path, {"results": res})}
        for v, res in per_variant.items()
    }
    return RecipeResult(tmp_path, [], entries, {})


def _res(bench: str, pass1: float, **metrics: Any) -> dict[str, Any]:
    return {"bench": bench, "metrics": {"pass@1": pass1, **metrics}}


def test_datamind_run_rows_fill_the_papers_columns(tmp_path: Path) -> None:
    cfg = load_recipe(EXAMPLES / "datamind.toml")
    all3 = {"DABench": _res("dabench", 0.5), "TB": _res("tablebench", 0.25), "bird": _res("bird", 0.75)}
    filled = paper_table("datamind", _result(tmp_path, {"base": all3}), [Variant("base", {}, cfg)])
    assert filled.run_rows == [("this run · + RL", ["50.00", "25.00", "75.00", "50.00"])]
    assert filled.rows()[-1] == ["this run · + RL", "50.00", "25.00", "75.00", "50.00"]
    # two of the three: no average (the paper's is over the three); none of them: a note, no row
    two = {"DABench": _res("dabench", 0.5), "databench": _res("databench", 0.9)}
    filled = paper_table("datamind", _result(tmp_path, {"base": two}), [Variant("base", {}, cfg)])
    assert filled.run_rows == [("this run · + RL", ["50.00", None, None, None])]
    assert filled.rows()[-1] == ["this run · + RL", "50.00", "–", "–", "–"]
    shop = {"shop-sql": _res("shop-sql", 1.0)}
    filled = paper_table("datamind", _result(tmp_path, {"base": shop}), [Variant("base", {}, cfg)])
    assert filled.run_rows == [] and "evaluated none of the table's benchmarks" in filled.notes[0]


def test_sailor_run_rows_go_under_their_step_budget(tmp_path: Path) -> None:
    cfg = load_recipe(EXAMPLES / "sailor.toml")  # scidata with max_turns = 12
    qa = {"pass@1": 0.4, "success_rate": 0.8, "avg_turns": 6.25}
    res = {"scidata": _res("scidata", 0.1, per_category={"qa": qa})}  # the QA track's figures, not overall
    filled = paper_table("sailor", _result(tmp_path, {"base": res}), [Variant("base", {}, cfg)])
    assert filled.run_rows == [("this run · + RL", ["40.00", "80.00", "6.25", None, None, None])]
    at24 = cfg.model_copy(update={"benchmarks": [cfg.benchmarks[0].model_copy(update={"max_turns": 24})]})
    filled = paper_table("sailor", _result(tmp_path, {"base": res}), [Variant("base", {}, at24)])
    assert filled.run_rows == [("this run · + RL", [None, None, None, "40.00", "80.00", "6.25"])]


def test_envlunch_run_rows_are_the_warm_up_gain(tmp_path: Path) -> None:
    cfg = load_recipe(EXAMPLES / "envlunch.toml")
    on, off = (
        Variant("enabled=True", {"stages.rl.enabled": True}, cfg),
        Variant("enabled=False", {"stages.rl.enabled": False}, cfg),
    )
    result = _result(
        tmp_path,
        {"enabled=True": {"spider": _res("spider", 0.6)}, "enabled=False": {"spider": _res("spider", 0.45)}},
    )
    filled = paper_table("envlunch", result, [on, off])
    assert filled.run_rows == [("this run · spider, one budget", ["1 budget", "+15.0", None])]
    # a study's curves: Δ and the matching budget as the curve figure computed them, per benchmark
    data = {
        "series": {"spider": {"rl on": [[0, 0.1], [16, 0.5], [64, 0.6]], "rl off": [[0, 0.1], [16, 0.3]]}},
        "gain": {
            "spider": {"curve_level_gain": 0.125, "curve_level_gain_std": 0.02, "matching_budget_text": "4×"}
        },
    }
    filled = paper_table("envlunch", result, [on, off], [Figure("curves", "", [], data)])
    assert filled.run_rows == [("this run · spider", ["2 budgets", "+12.5 ± 2.0", "4×"])]
    alone = paper_table("envlunch", result, [on])
    assert alone.run_rows == [] and "--sweep stages.rl.enabled=true,false" in alone.notes[0]

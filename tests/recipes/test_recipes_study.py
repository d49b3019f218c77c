"""A label-efficiency study as EnvLunch Fig. 1 draws it, on stages that return known scores (no training):
the arms named by ``[study]``, several seeds per point, the mean with a min–max band, Δ and the matching
budget on the means, the seeds each point has — and the same figure whatever the order of ``--sweep``.

The worked example (pass@1 of the fine-tuned checkpoint per seed 0, 1, 2; ``rl on`` = warm-up on, the
method; ``rl off`` the baseline):

    labels   rl on (method)        mean   min–max      rl off (baseline)     mean
    0        .30  .30  .30         .30    .30–.30      .30  .30  .30         .30
    8        .40  .50  .60         .50    .40–.60      .30  .35  .40         .35
    16       .50  .56  .62         .56    .50–.62      .40  .42  .44         .42
    32       .58  .60  .62         .60    .58–.62      .50  .52  .54         .52

* Δ on the means over the positive budgets: (.15 + .14 + .08) / 3 = .37 / 3 = +12.3 points. Paired by seed:
  seed 0 (.10 + .10 + .08) / 3 = .0933, seed 1 .1233, seed 2 (.20 + .18 + .08) / 3 = .1533 → mean .1233,
  sample std sqrt((.03² + 0 + .03²) / 2) = .03 → "+12.3 ± 3.0".
* matching budget: the target is the method's mean at its smallest budget 8 (.50); the baseline's means
  .35, .42, .52 first reach it at 32 → 32 / 8 = 4×. (Seed 0 alone would say 2×: target .40, reached at 16;
  the arms the other way round would say Δ = −12.3 and 1×.)
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import datadojo.recipes
from datadojo.cli.app import app
from datadojo.recipes import load_recipe, parse_sweeps, run, variants
from datadojo.recipes.engine import RecipeError, Stage, StageContext

NS = "{http://www.w3.org/2000/svg}"
SCORES: dict[tuple[bool, int], list[float]] = {
    (True, 0): [0.30, 0.30, 0.30],
    (True, 8): [0.40, 0.50, 0.60],
    (True, 16): [0.50, 0.56, 0.62],
    (True, 32): [0.58, 0.60, 0.62],
    (False, 0): [0.30, 0.30, 0.30],
    (False, 8): [0.30, 0.35, 0.40],
    (False, 16): [0.40, 0.42, 0.44],
    (False, 32): [0.50, 0.52, 0.54],
}
CALLS: Counter[str] = Counter()
SEEN: list[tuple[bool, int, int | None]] = []
NO_SCORE: set[tuple[bool, int, int]] = set()  # (warm-up, labels, seed) whose eval reports no pass@1
CRASH: set[tuple[bool, int, int]] = set()  # (warm-up, labels, seed) whose fine-tuning crashes


def _rl(ctx: StageContext) -> dict[str, Any]:
    CALLS["rl"] += 1
    return {"warmed_up": bool(ctx.config.stage("rl").get("enabled", True))}


def _downstream(ctx: StageContext) -> dict[str, Any]:
    section = ctx.config.stage("downstream")
    SEEN.append((ctx.dep("rl")["warmed_up"], section["labels"], section.get("seed")))
    if SEEN[-1] in CRASH:
        raise RuntimeError("loss is nan at step 3")
    return {"warmed_up": ctx.dep("rl")["warmed_up"], "labels": section["labels"], "seed": section.get("seed")}


def _eval(ctx: StageContext) -> dict[str, Any]:
    d = ctx.dep("downstream")
    point = (d["warmed_up"], d["labels"], d["seed"])
    metrics = {} if point in NO_SCORE else {"pass@1": SCORES[point[:2]][d["seed"] or 0]}
    return {"checkpoint": "downstream", "results": {"toy": {"metrics": metrics}}}


FAKE_STAGES = (
    Stage("rl", "warm-up (or not)", _rl, settings=lambda cfg: cfg.stage("rl")),
    Stage("downstream", "fine-tune", _downstream, deps=("rl",), settings=lambda cfg: cfg.stage("downstream")),
    Stage("eval_downstream", "eval", _eval, deps=("downstream",)),
)

STUDY = """
[study]
arm = "stages.rl.enabled"
method = true
baseline = false
seeds = 3
"""


@pytest.fixture(autouse=True)
def _fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    import datadojo.recipes.envlunch as envlunch

    monkeypatch.setattr(envlunch, "STAGES", FAKE_STAGES)  # what `datadojo recipe run` runs for envlunch
    # the fake stages read no checkpoint and no labelled file: the pre-run checks of the real ones do not apply
    monkeypatch.setattr(datadojo.recipes, "check_recipe", lambda cfg: [])
    CALLS.clear()
    SEEN.clear()
    NO_SCORE.clear()
    CRASH.clear()


def _recipe(root: Path, study: str = STUDY, labels: int = 0) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "envlunch.toml"
    path.write_text(
        f'recipe = "envlunch"\nout = "out"\ninputs = []\n[models]\nstudent = "ckpt"\n{study}'
        f"[stages.downstream]\nlabels = {labels}\n",
        encoding="utf-8",
    )
    return path


def _cli(path: Path, *sweeps: str) -> dict[str, Any]:
    args = ["recipe", "run", str(path)] + [a for s in sweeps for a in ("--sweep", s)]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    (fig,) = json.loads((path.parent / "out" / "report.json").read_text())["figures"]
    return fig


def _chart(path: Path) -> str:
    html = (path.parent / "out" / "report.html").read_text()
    (svg,) = re.findall(r"<svg .*?</svg>", html, flags=re.S)
    return svg


def test_the_figure_is_the_same_whatever_the_sweep_order(tmp_path: Path) -> None:
    a = _recipe(tmp_path / "a")
    b = _recipe(tmp_path / "b")
    fig_a = _cli(a, "stages.downstream.labels=0,8,16,32", "stages.rl.enabled=true,false")
    fig_b = _cli(b, "stages.rl.enabled=false,true", "stages.downstream.labels=32,16,8,0")
    assert fig_a == fig_b  # gain, matching budget, curves, bands, seeds: all of it
    assert _chart(a) == _chart(b)  # the chart too, legend order included
    gain = fig_a["gain"]["toy"]
    assert gain["method"] == "rl on" and gain["baseline"] == "rl off"
    assert gain["curve_level_gain"] == pytest.approx(0.37 / 3)
    assert gain["curve_level_gain_std"] == pytest.approx(0.03)
    assert gain["paired_runs"] == 3
    assert gain["matching_budget"] == 4 and gain["matching_budget_text"] == "4×"


def test_each_point_runs_once_per_seed_and_the_curve_is_the_mean_with_a_min_max_band(tmp_path: Path) -> None:
    path = _recipe(tmp_path)
    fig = _cli(path, "stages.downstream.labels=0,8,16,32")  # the [study] arm is swept over method, baseline
    # the seed reaches the downstream stage: each (arm, budget) fine-tuned once per seed 0, 1, 2 ...
    assert sorted(SEEN) == sorted((w, n, s) for w in (True, False) for n in (0, 8, 16, 32) for s in (0, 1, 2))
    assert CALLS["rl"] == 2  # ... while the warm-up (not reseeded by default) runs once per arm
    assert fig["seeds"] == [0, 1, 2] and fig["short_of_seeds"] == []
    on8 = fig["bands"]["toy"]["rl on"][1]
    assert on8["x"] == 8 and on8["seeds"] == [0, 1, 2]
    assert (on8["mean"], on8["min"], on8["max"]) == pytest.approx((0.50, 0.40, 0.60))
    off = fig["series"]["toy"]["rl off"]
    assert [x for x, _ in off] == [0, 8, 16, 32]
    assert [y for _, y in off] == pytest.approx([0.30, 0.35, 0.42, 0.52])
    # the chart draws the mean line and the min–max band of each arm
    svg = ET.fromstring(_chart(path))
    bands = {p.get("data-series"): p.get("data-band") for p in svg.iter(f"{NS}polygon")}
    assert bands["rl on"] == "0:0.3:0.3 8:0.4:0.6 16:0.5:0.62 32:0.58:0.62"
    assert bands["rl off"] == "0:0.3:0.3 8:0.3:0.4 16:0.4:0.44 32:0.5:0.54"
    dots = {(c.get("data-series"), c.get("data-x")): float(c.get("data-y")) for c in svg.iter(f"{NS}circle")}
    assert dots[("rl on", "16")] == pytest.approx(0.56)
    md = (path.parent / "out" / "report.md").read_text()
    assert "| toy | rl on | 8 | 50.0 | 40.0 | 60.0 | 3/3 |" in md
    assert "| toy | rl on | rl off | 55.3 | 43.0 | +12.3 ± 3.0 | 4× |" in md


def test_a_point_short_of_seeds_is_flagged_and_the_statistics_use_the_seeds_it_has(tmp_path: Path) -> None:
    path = _recipe(tmp_path)
    NO_SCORE.add((True, 16, 2))  # seed 2 of rl on @ 16 reports no score
    fig = _cli(path, "stages.downstream.labels=0,8,16,32")
    on16 = fig["bands"]["toy"]["rl on"][2]
    assert on16["seeds"] == [0, 1] and on16["mean"] == pytest.approx((0.50 + 0.56) / 2)
    assert fig["short_of_seeds"] == ["toy · rl on @ 16: 2 of 3 (no score for seed 2)"]
    gain = fig["gain"]["toy"]
    # on the means: (.15 + (.53 − .42) + .08) / 3 = .34 / 3; no paired std (the seeds differ at 16)
    assert gain["curve_level_gain"] == pytest.approx(0.34 / 3)
    assert gain["curve_level_gain_std"] is None and gain["paired_runs"] == 0
    assert gain["matching_budget_text"] == "4×"
    md = (path.parent / "out" / "report.md").read_text()
    assert "| toy | rl on | 16 | 53.0 | 50.0 | 56.0 | 2/3 ⚠ |" in md
    assert "fewer than the 3 seeds asked" in md and "toy · rl on @ 16: 2 of 3" in md


def test_a_failed_replicate_leaves_the_others_their_figure_and_the_rerun_retries_it(tmp_path: Path) -> None:
    path = _recipe(tmp_path)
    CRASH.add((True, 16, 2))
    args = ["recipe", "run", str(path), "--sweep", "stages.downstream.labels=0,8,16,32"]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 1, res.output  # a RuntimeError: a bug's status, not success
    assert (
        "1 of 24 runs of the study failed: labels=16, enabled=True, seed=2: stage downstream: " in res.output
    )
    assert len(SEEN) == 24  # every other replicate ran
    out = path.parent / "out"
    report = json.loads((out / "report.json").read_text())
    (fig,) = report["figures"]
    assert fig["short_of_seeds"] == ["toy · rl on @ 16: 2 of 3 (no score for seed 2)"]
    assert fig["gain"]["toy"]["curve_level_gain"] == pytest.approx(0.34 / 3)  # on the means it has
    assert report["failed"] == {
        "labels=16, enabled=True, seed=2": "stage downstream: RuntimeError: loss is nan at step 3"
    }
    (failure,) = json.loads((out / "failed.json").read_text())["failed"]
    assert failure["stage"] == "downstream" and "loss is nan" in failure["traceback"]
    assert "## Failed runs" in (out / "report.md").read_text()
    # the rerun runs exactly the failed replicate's stages and completes the figure
    CRASH.clear()
    SEEN.clear()
    fig = _cli(path, "stages.downstream.labels=0,8,16,32")
    assert SEEN == [(True, 16, 2)]
    assert fig["short_of_seeds"] == [] and fig["gain"]["toy"]["curve_level_gain_std"] == pytest.approx(0.03)
    assert json.loads((out / "failed.json").read_text()) == {"failed": []}


def test_without_seeds_a_failure_stops_the_run(tmp_path: Path) -> None:
    path = _recipe(tmp_path, STUDY.replace("seeds = 3\n", ""))
    CRASH.add((True, 8, None))
    with pytest.raises(RuntimeError, match="loss is nan"):
        run(load_recipe(path), sweeps=parse_sweeps(["stages.downstream.labels=0,8,16,32"]))


def test_a_study_without_a_numeric_sweep_draws_a_bar_per_arm_at_the_mean_over_seeds(tmp_path: Path) -> None:
    path = _recipe(tmp_path, labels=8)
    res = CliRunner().invoke(app, ["recipe", "run", str(path)])  # the [study] arm alone is swept
    assert res.exit_code == 0, res.output
    (fig,) = json.loads((tmp_path / "out" / "report.json").read_text())["figures"]
    # budget 8: rl on (.40 + .50 + .60) / 3 = .50, rl off (.30 + .35 + .40) / 3 = .35
    assert fig["kind"] == "bars" and list(fig["series"]) == ["enabled=True", "enabled=False"]
    assert fig["series"]["enabled=True"] == pytest.approx([0.50, 0.50])
    assert fig["series"]["enabled=False"] == pytest.approx([0.35, 0.35])
    assert fig["seeds"] == {"enabled=True": [3], "enabled=False": [3]}
    assert "| enabled=False | 35.0 | 35.0 | 3/3 |" in (tmp_path / "out" / "report.md").read_text()


def test_the_arms_named_must_be_among_the_swept_values(tmp_path: Path) -> None:
    cfg = load_recipe(_recipe(tmp_path))
    with pytest.raises(RecipeError, match=r"\[study\] method = True: not among the --sweep values of "):
        variants(cfg, parse_sweeps(["stages.rl.enabled=false"]))
    with pytest.raises(RecipeError, match=r"\[study\] baseline = False: .*stages\.rl\.enabled \(True, 0\)"):
        variants(cfg, parse_sweeps(["stages.rl.enabled=true,0"]))  # 0 is not false as TOML reads it
    res = CliRunner().invoke(
        app, ["recipe", "plan", str(tmp_path / "envlunch.toml"), "--sweep", "stages.rl.enabled=false"]
    )
    assert res.exit_code == 2 and "[study] method = True" in res.output and "Traceback" not in res.output
    # seeds and arms of a study: one variant per (budget, arm, seed), the seed written to the seed settings
    vs = variants(cfg, parse_sweeps(["stages.downstream.labels=0,8"]))
    assert len(vs) == 2 * 2 * 3
    assert {(v.values["stages.rl.enabled"], v.seed, v.config.stage("downstream")["seed"]) for v in vs} == {
        (w, s, s) for w in (True, False) for s in (0, 1, 2)
    }
    assert vs[0].label == "labels=0, enabled=True, seed=0"


def test_study_settings_are_checked_when_the_file_is_read(tmp_path: Path) -> None:
    from datadojo.config import ConfigError

    for bad, msg in (
        ("seeds = 0", "≥ 1"),
        ("seeds = [1, 1]", "distinct"),
        ("seeds = true", "number of runs"),
    ):
        path = _recipe(tmp_path / bad.replace(" ", ""), STUDY.replace("seeds = 3", bad))
        with pytest.raises(ConfigError, match=rf"envlunch\.toml: .*\[study\] seeds: .*{msg}"):
            load_recipe(path)
    path = _recipe(tmp_path / "noarm", "[study]\nmethod = true\nbaseline = false\n")
    with pytest.raises(ConfigError, match="arm"):
        load_recipe(path)


def test_without_named_arms_there_is_no_gain_to_read_the_wrong_way(tmp_path: Path) -> None:
    path = _recipe(tmp_path, "")
    fig = _cli(path, "stages.downstream.labels=0,8", "stages.rl.enabled=true,false")
    assert "gain" not in fig
    assert "add a [study] section" in (path.parent / "out" / "report.md").read_text()


@pytest.mark.parametrize("recipe", ["datamind", "envlunch", "sailor"])
def test_the_seed_reaches_the_training_configs_of_the_example_recipes(recipe: str) -> None:
    """Each seed is written to the recipe's seed settings, which the library classes accept and the trainers
    receive (EnvLunch: the downstream GRPO run; DataMind, SciDataSailor: SFT and RL)."""
    from datadojo.recipes import recipe_sections
    from datadojo.recipes.envlunch import _downstream_config
    from datadojo.recipes.stages import _rl_config, _sft_config

    examples = Path(__file__).resolve().parents[2] / "examples" / "recipes"
    base = load_recipe(examples / f"{recipe}.toml")
    study = {"arm": "stages.rl.enabled", "method": True, "baseline": False, "seeds": [7, 11]}
    cfg = type(base).model_validate({**base.model_dump(), "study": study})
    sweeps = {"stages.downstream.labels": [16]} if recipe == "envlunch" else {}
    vs = variants(cfg, sweeps)
    assert sorted((v.values["stages.rl.enabled"], v.seed) for v in vs) == [
        (False, 7),
        (False, 11),
        (True, 7),
        (True, 11),
    ]
    from datadojo.recipes.checks import section_value_problems

    for v in vs:
        assert section_value_problems(v.config, recipe_sections(recipe)) == []  # every section builds
        if recipe == "envlunch":
            assert _downstream_config(v.config)[0].seed == v.seed
            assert _rl_config(v.config)[0].seed == 0  # the warm-up runs once, not per seed
        else:
            assert _sft_config(v.config).seed == _rl_config(v.config)[0].seed == v.seed

"""The stage-graph engine on small stages that count their calls: keys, exact reruns, resume after a kill,
sweeps computing shared stages once, the dry-run's reasons, and config errors that name their place."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from datadojo.config import ConfigError
from datadojo.errors import ResumeError
from datadojo.recipes import load_recipe, parse_sweeps, run
from datadojo.recipes.config import model_identity, parse_value
from datadojo.recipes.engine import RecipeError, Stage, StageContext, run_recipe
from datadojo.recipes.report import write_report

CALLS: Counter[str] = Counter()
CRASH: set[str] = set()


def _read(ctx: StageContext) -> dict[str, Any]:
    CALLS["read"] += 1
    text = ctx.config.path(ctx.config.inputs[0]).read_text()
    return {"rows": len(text.splitlines())}


def _double(ctx: StageContext) -> dict[str, Any]:
    CALLS["double"] += 1
    factor = ctx.config.stage("double").get("factor", 2)
    (ctx.out / "half.txt").write_text("started")  # what a killed run leaves behind
    if "double" in CRASH:
        CRASH.discard("double")
        raise KeyboardInterrupt
    return {"rows": ctx.dep("read")["rows"] * factor, "resumed_from_partial": (ctx.out / "half.txt").exists()}


def _score(name: str, dep: str) -> Any:
    def run_(ctx: StageContext) -> dict[str, Any]:
        CALLS[name] += 1
        rows = ctx.dep(dep)["rows"]
        return {"checkpoint": name, "results": {"toy": {"metrics": {"pass@1": rows / 100}}}}

    return run_


STAGES = (
    Stage("read", "read the input", _read, inputs=lambda cfg: [cfg.path(cfg.inputs[0])]),
    Stage("double", "double it", _double, deps=("read",), settings=lambda cfg: cfg.stage("double")),
    Stage("eval_base", "score read", _score("eval_base", "read"), deps=("read",)),
    Stage("eval_sft", "score double", _score("eval_sft", "double"), deps=("double",)),
)


def _config(tmp_path: Path, factor: int = 2) -> Path:
    (tmp_path / "in.csv").write_text("a\n1\n2\n3\n")
    path = tmp_path / "r.toml"
    path.write_text(
        f'recipe = "datamind"\nout = "out"\ninputs = ["in.csv"]\n[models]\nstudent = "ckpt"\n'
        f"[stages.double]\nfactor = {factor}\n"
    )
    return path


def _go(path: Path, **kw: Any) -> Any:
    cfg = load_recipe(path)
    return run_recipe(STAGES, cfg, finish=lambda r, vs: write_report(r, vs, "datamind"), **kw)


@pytest.fixture(autouse=True)
def _reset() -> None:
    CALLS.clear()
    CRASH.clear()


def test_rerun_is_cached_and_an_edit_reruns_exactly_downstream(tmp_path: Path) -> None:
    path = _config(tmp_path)
    first = _go(path)
    assert CALLS == {"read": 1, "double": 1, "eval_base": 1, "eval_sft": 1}
    assert first.entries["base"]["eval_sft"].manifest["results"]["toy"]["metrics"]["pass@1"] == 0.08
    _go(path)
    assert sum(CALLS.values()) == 4  # nothing ran again
    path.write_text(path.read_text().replace("factor = 2", "factor = 3"))
    plan = _go(path, dry_run=True)
    status = {i.stage: (i.status, i.why) for i in plan.items}
    assert status["read"][0] == status["eval_base"][0] == "cached"
    assert status["double"] == ("rerun", ["settings changed"])
    assert status["eval_sft"] == ("rerun", ["upstream changed"])
    assert sum(CALLS.values()) == 4  # a dry run runs nothing
    _go(path)
    assert CALLS == {"read": 1, "double": 2, "eval_base": 1, "eval_sft": 2}
    # the input's content (not its time or path) reaches the first stage and everything below it
    (tmp_path / "in.csv").write_text("a\n1\n2\n3\n4\n")
    why = {i.stage: i.why for i in _go(path, dry_run=True).items}
    assert why["read"] == ["inputs changed"] and why["eval_base"] == ["upstream changed"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| base | + SFT | 12.0 | 12.0 |" in report and "| base | base | 4.0 | 4.0 |" in report


def test_a_killed_stage_resumes_in_its_own_folder(tmp_path: Path) -> None:
    path = _config(tmp_path)
    CRASH.add("double")
    with pytest.raises(KeyboardInterrupt):
        _go(path)
    assert CALLS == {"read": 1, "double": 1}
    result = _go(
        path
    )  # rerun: read is committed, double reruns in the same folder and finds its partial file
    assert CALLS == {"read": 1, "double": 2, "eval_base": 1, "eval_sft": 1}
    assert result.entries["base"]["double"].manifest["resumed_from_partial"] is True
    statuses = {i.stage: i.status for i in result.items}
    assert statuses == {"read": "cached", "double": "run", "eval_base": "run", "eval_sft": "run"}


def test_sweep_computes_shared_stages_once_and_plots(tmp_path: Path) -> None:
    path = _config(tmp_path)
    result = _go(path, sweeps=parse_sweeps(["stages.double.factor=2,5"]))
    assert CALLS == {"read": 1, "double": 2, "eval_base": 1, "eval_sft": 2}
    shared = [i for i in result.items if i.variant == "factor=5" and i.stage in ("read", "eval_base")]
    assert {i.status for i in shared} == {"shared"}
    scores = {
        v: e["eval_sft"].manifest["results"]["toy"]["metrics"]["pass@1"] for v, e in result.entries.items()
    }
    assert scores == {"factor=2": 0.08, "factor=5": 0.2}
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<h2>Sweep</h2>" in html and "<svg" in html
    # a numeric key is a curve over its values: the last checkpoint's pass@1 at factor 2 and 5
    assert 'data-series="+ SFT" data-x="5" data-y="0.2"' in html
    rows = json.loads((tmp_path / "out" / "report.json").read_text())["rows"]
    assert ["factor=5", "+ SFT", 0.2, 0.2] in rows


def test_parse_sweeps_and_values() -> None:
    assert parse_sweeps(["stages.rl.gamma_mode=cosine,linear", "stages.rl_tasks.labels=0,4"]) == {
        "stages.rl.gamma_mode": ["cosine", "linear"],
        "stages.rl_tasks.labels": [0, 4],
    }
    assert (
        parse_value("0.5") == 0.5
        and parse_value("true") is True
        and parse_value("con-select") == "con-select"
    )
    with pytest.raises(RecipeError, match="KEY=V1,V2"):
        parse_sweeps(["stages.rl.gamma_mode"])


def test_model_identity_drops_the_url_only() -> None:
    assert model_identity("openai:qwen@http://h:8000/v1") == model_identity("openai:qwen@http://other:1/v1")
    assert model_identity("openai:qwen@http://h:8000/v1?timeout=5") == "openai:qwen?timeout=5"
    assert model_identity("openai:qwen@http://h/v1") != model_identity("openai:llama@http://h/v1")


def test_config_errors_name_the_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('recipe = "datamind"\ninputs = []\n[models]\nstudent = "x"\nbogus = 1\n')
    with pytest.raises(ConfigError, match=r"bad\.toml.*bogus"):
        load_recipe(bad)
    bad.write_text("recipe = [")
    with pytest.raises(ConfigError, match=r"bad\.toml: not valid TOML"):
        load_recipe(bad)
    # a misspelt stage key is found at plan time against the library's own configuration class
    path = _config(tmp_path)
    path.write_text(path.read_text() + "[stages.sft]\nmax_stepz = 2\n")
    problems = [str(p) for p in run(load_recipe(path), dry_run=True).problems]
    assert (
        "[stages.sft] max_stepz: unknown key; did you mean max_steps? (SFTConfig keys + enabled)" in problems
    )


def test_an_output_folder_of_something_else_is_refused(tmp_path: Path) -> None:
    path = _config(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "mine.txt").write_text("x")
    with pytest.raises(ResumeError, match="not empty"):
        _go(path)


def test_a_stage_killed_under_a_sweep_resumes_without_the_sweep(tmp_path: Path) -> None:
    """The stage folder is keyed by what the stage computes, not by the variant that first asked for it."""
    path = _config(tmp_path)
    CRASH.add("double")
    with pytest.raises(KeyboardInterrupt):
        _go(path, sweeps=parse_sweeps(["stages.double.factor=2,5"]))
    result = _go(path)  # the base config is the factor=2 variant: same key, same folder, resumed
    assert result.entries["base"]["double"].manifest == {"rows": 8, "resumed_from_partial": True}


def test_executor_and_progress_reach_the_stages_that_take_them(tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def fan_out(ctx: StageContext) -> dict[str, Any]:
        seen["fan_out"] = ctx.executor
        ctx.progress(1, 2)
        ctx.progress(2, 2)
        return {"rows": 1}

    def local(ctx: StageContext) -> dict[str, Any]:
        seen["local"] = ctx.executor
        return {}

    stages = (
        Stage("fan_out", "fans out", fan_out, executor=True),
        Stage("local", "runs here", local, deps=("fan_out",)),
    )
    marker = object()
    ticks: list[tuple[str, int, int]] = []
    result = run_recipe(
        stages,
        load_recipe(_config(tmp_path)),
        executor=marker,
        progress=lambda s, d, t: ticks.append((s, d, t)),
    )
    assert seen == {"fan_out": marker, "local": None}
    assert ticks == [("fan_out", 1, 2), ("fan_out", 2, 2)]
    assert [i.executor for i in result.items] == [True, False]

"""The documented example recipes stay valid: every stage section is accepted by its library class, every
documented sweep makes valid variants, and what they lack on this machine is only what a user must provide
(the base checkpoint, the shared benchmark data), each named with how; and the ``datadojo recipe`` command
plans, explains and fails clearly."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from recipe_fakes import write_recipe
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.recipes import check_recipe, load_recipe, parse_sweeps, variants

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "recipes"
SWEEPS = {
    "datamind": ["stages.curation.strategy=con-select,non-con", "stages.rl.gamma_mode=cosine,linear"],
    "envlunch": ["stages.downstream.labels=0,16", "stages.rl.enabled=true,false"],
    "sailor": ["stages.synthesis.fpu_reduction=0.0,0.1", "stages.synthesis.k_max=1,3"],
}
runner = CliRunner()


@pytest.mark.parametrize("name", ["datamind", "envlunch", "sailor"])
def test_example_recipes_are_valid(name: str) -> None:
    cfg = load_recipe(EXAMPLES / f"{name}.toml")
    assert cfg.recipe == name and cfg.benchmarks
    vs = variants(cfg, parse_sweeps(SWEEPS[name]))
    seeds = 3 if name == "envlunch" else 1  # the EnvLunch example's [study] runs 3 seeds per point (Fig. 1)
    assert len(vs) == 4 * seeds  # two settings x two values each, once per seed
    for v in vs:
        # every section, key and value is valid: what is left is what the user provides, each with the how
        for p in check_recipe(v.config):
            provide = ("no checkpoint folder at", "no data at", "does not exist")
            assert any(w in p.what for w in provide), str(p)
            if p.where == "models.student":
                assert "huggingface-cli download" in p.what


def test_cli_plan_explains_and_run_help(tmp_path: Path, toy_ckpt: Path) -> None:
    from datadojo.testing.server import ScriptedLLMServer

    with ScriptedLLMServer(lambda req: "ok") as server:  # the teacher answers the plan's probe
        path = write_recipe("datamind", tmp_path, toy_ckpt, teacher=f"openai:t@{server.base_url}")
        res = runner.invoke(
            app, ["recipe", "plan", str(path), "--out", str(tmp_path / "out")], env={"COLUMNS": "200"}
        )
    assert res.exit_code == 0, res.output
    assert "9 stage runs to do, 0 cached" in res.output and "not run before" in res.output
    assert "fans out on" in res.output  # the stages that fan out on --executor ray are marked
    res = runner.invoke(app, ["recipe", "run", "--help"])
    assert res.exit_code == 0 and "--sweep" in res.output and "--dry-run" in res.output
    assert "--allow-empty" in res.output


def test_cli_errors_list_every_missing_path_at_once(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('recipe = "datamind"\ninputs = ["nowhere.csv"]\n[models]\nstudent = "x"\n')
    res = runner.invoke(app, ["recipe", "plan", str(bad)])
    assert res.exit_code == 2, res.output
    assert "2 problems before the first stage" in res.output
    assert f"inputs: {tmp_path / 'nowhere.csv'} does not exist" in res.output
    assert f"models.student: no checkpoint folder at {tmp_path / 'x'}" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(app, ["recipe", "run", str(bad), "--sweep", "stages.rl.gamma_mode"])
    assert res.exit_code == 2 and "KEY=V1,V2" in res.output


def test_cli_ctrl_c_exits_130_and_the_rerun_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toy_ckpt: Path
) -> None:
    import datadojo.recipes.datamind as dm

    path = write_recipe("datamind", tmp_path, toy_ckpt)

    def interrupted(ctx: object) -> dict:
        raise KeyboardInterrupt

    stages = (dm.STAGES[0], dataclasses.replace(dm.STAGES[1], run=interrupted))  # Ctrl-C during synthesis
    monkeypatch.setattr(dm, "STAGES", stages)
    res = runner.invoke(app, ["recipe", "run", str(path)])
    assert res.exit_code == 130 and "rerun the same command to resume" in res.output
    plan = runner.invoke(app, ["recipe", "plan", str(path)], env={"COLUMNS": "200"})
    assert plan.exit_code == 0 and "1 stage runs to do, 1 cached" in plan.output  # corpus committed


def _doc_studies() -> list[tuple[str, list[str]]]:
    """The commands of docs/recipes.md "Reproducing the papers' studies": (recipe, its --sweep values)."""
    import re

    doc = (EXAMPLES.parents[1] / "docs" / "recipes.md").read_text(encoding="utf-8")
    section = doc.split("## Reproducing the papers' studies", 1)[1].split("\n## ", 1)[0]
    out = []
    for name, args in re.findall(
        r"`datadojo recipe run examples/recipes/(\w+)\.toml ((?:--sweep \S+ ?)+)`", section
    ):
        out.append((name, re.findall(r"--sweep (\S+)", args)))
    return out


def test_the_documented_studies_plan_on_the_ci_sized_configs(tmp_path: Path, toy_ckpt: Path) -> None:
    studies = _doc_studies()
    assert sorted(n for n, _ in studies) == ["datamind", "datamind", "envlunch", "sailor"]
    from datadojo.jsonl import write_jsonl_atomic
    from datadojo.recipes import run
    from datadojo.types import Task

    labelled = tmp_path / "labelled.jsonl"
    write_jsonl_atomic(labelled, [Task(id=f"l{i}", question="q", answer="1") for i in range(300)])
    for i, (name, sweeps) in enumerate(studies):
        extra = f'[stages.downstream]\nlabelled = "{labelled}"\n' if name == "envlunch" else ""
        path = write_recipe(
            name, tmp_path / str(i), toy_ckpt, teacher="openai:t@http://127.0.0.1:9", extra=extra
        )
        path.write_text(path.read_text().replace("total_steps = 1\n", "total_steps = 1\ngamma_value = 0.2\n"))
        result = run(load_recipe(path), sweeps=parse_sweeps(sweeps), dry_run=True)
        n = 1
        for s in sweeps:
            n *= len(s.split("=", 1)[1].split(","))
        assert len({i.variant for i in result.items}) == n

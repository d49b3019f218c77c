"""The bundled examples' small variants (``examples/recipes/*-small.toml``) run as shipped: through the real
``datadojo recipe run`` command, with the teacher the command serves itself (``loopback:NAME``) and the toy
student the recipe writes (``student = "toy"``), every stage runs, carries data to the next, and none does
nothing; the report is written with no warning; a rerun (on another loopback port) is all cached.

The expected counts come from the settings in the files and from the scripted fakes
(:mod:`datadojo.testing.datamind_teacher`): its three categories answer ``consistent`` (Aggregation),
``rescued`` by reflection (Counting) and ``forever`` inconsistent (Comparison); the one composed chain is
consistent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.jsonl import read_tasks
from datadojo.recipes import RECIPES, load_recipe, recipe_stages, run
from datadojo.recipes.checks import student_window
from datadojo.recipes.toy_student import TOY_FOLDER, TOY_WINDOW, is_toy_student, with_toy_student
from datadojo.testing.loopback import serve_loopback

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "recipes"
runner = CliRunner()


def _small(name: str) -> Path:
    return EXAMPLES / f"{name}-small.toml"


def _command(*args: str) -> Any:
    return runner.invoke(app, ["recipe", *args], env={"COLUMNS": "200"})


def _manifests(out: Path) -> dict[str, dict[str, Any]]:
    """Each stage's committed manifest, by stage name (one variant: the base configuration)."""
    found: dict[str, dict[str, Any]] = {}
    for line in (out / "stages" / "stages.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        path = out / "stages" / rec["path"] / "manifest.json"
        found[rec["stage"]] = json.loads(path.read_text(encoding="utf-8"))
    return found


def _flow(m: dict[str, Any]) -> tuple[int, int]:
    return m["counts"]["in"], m["counts"]["out"]


@pytest.mark.slow
@pytest.mark.parametrize("name", RECIPES)
def test_small_example_runs_end_to_end_through_the_command(name: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = _command("run", str(_small(name)), "--out", str(out))
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    # nothing stopped, nothing did nothing, nothing to warn about: the small variant is honest as shipped
    assert report["stopped"] is None and report["did_nothing"] == [] and report["warnings"] == []
    names = [s.name for s in recipe_stages(name)]
    assert [s["stage"] for s in report["stages"]] == names and {s["status"] for s in report["stages"]} == {
        "run"
    }
    assert (out / "report.md").is_file() and (out / "report.html").is_file()
    m = _manifests(out)
    assert set(m) == set(names) and not any(x.get("empty") for x in m.values())

    # the toy student was written into the run folder, with the window the bundled prompts need
    toy = out / TOY_FOLDER
    assert student_window(toy) == TOY_WINDOW and m["eval_base"]["model_dir"] == str(toy)
    # SFT trained on every curated trajectory, from the toy; RL from SFT: 2 tasks x 2 rollouts, 1 update
    assert _flow(m["sft"]) == (m["curation"]["kept"], m["curation"]["kept"]) and m["sft"]["steps"] == 2
    assert m["rl"]["from"] == m["sft"]["model_dir"] and _flow(m["rl"]) == (4, 1)
    assert "context_limit" not in m["rl"]["stop_reasons"]
    # every checkpoint evaluated on every trial the file asks for (limit x n_trials), none at context_limit
    trials = 3 if name == "sailor" else 2
    for stage in ("eval_base", "eval_sft", "eval_rl"):
        assert _flow(m[stage]) == (trials, trials)
        assert all("context_limit" not in (r["stop_reasons"] or {}) for r in m[stage]["results"].values())
    assert [r[1] for r in report["rows"]][:3] == ["base", "+ SFT", "+ RL"]
    # the paper's table, with its reference, is in the report (this run's benchmarks are not the paper's)
    ref = {"datamind": "§5.2, Table 1", "envlunch": "Tables 1–2", "sailor": "§5, Table 3"}[name]
    assert ref in report["paper_table"]["title"] and report["paper_table"]["paper"]
    assert "## The paper's table: " in (out / "report.md").read_text(encoding="utf-8")

    if name == "datamind":  # 3 categories + 1 composed chain, 3 samples each, 2 queries reflected once
        assert _flow(m["synthesis"]) == (4, 4 * 3 + 2 * 3) and _flow(m["curation"]) == (18, 3)
        answers = sorted(str(t.answer) for t in read_tasks(m["rl_tasks"]["tasks"]))
        assert answers == ["25", "42", "42"]  # the consistent two, and the one reflection rescued
        usage = m["synthesis"]["usage"]
        assert usage["teacher"]["requests"] > 0 and usage["judge"]["requests"] > 0
        assert usage["teacher"]["failed"] == usage["judge"]["failed"] == 0
        # the same command again, on new loopback ports: every stage cached, nothing sent
        again = _command("run", str(_small(name)), "--out", str(out))
        assert again.exit_code == 0, again.output
        assert again.output.count("cached") >= len(names) and "ran " not in again.output
    elif name == "envlunch":
        assert _flow(m["synthesis"])[1] == 8 and 0 < m["curation"]["kept"] <= 8
        assert m["rl"]["reward"] == "envlunch" and m["rl_tasks"]["tasks"] == m["synthesis"]["tasks"]
    else:
        assert m["synthesis"]["trajectories"] == 2 and m["rl"]["dialect"] == "sailor"
        assert m["synthesis"]["usage"]["policy"]["requests"] > 0


@pytest.mark.parametrize("name", RECIPES)
def test_small_example_plans_with_no_problem(name: str, tmp_path: Path) -> None:
    """The command serves the loopback teacher for the plan's reachability probe too; nothing is missing."""
    res = _command("plan", str(_small(name)), "--out", str(tmp_path / "out"))
    assert res.exit_code == 0, res.output
    assert "problem" not in res.output and "stage runs to do, 0 cached" in res.output


def test_a_loopback_model_outside_the_command_is_named_with_how_to_serve_it(tmp_path: Path) -> None:
    result = run(
        load_recipe(_small("datamind"), out=str(tmp_path / "out")), dry_run=True, probe_servers=False
    )
    shown = [str(p) for p in result.problems]
    assert len(shown) == 2 and all("serve_loopback" in s for s in shown)
    assert shown[0].startswith("models.teacher: 'loopback:datamind-teacher' is a scripted loopback model")
    with serve_loopback(load_recipe(_small("datamind"), out=str(tmp_path / "out"))) as served:
        assert served.models.teacher.startswith("openai:loopback-datamind-teacher@http://127.0.0.1:")
        assert run(served, dry_run=True).problems == []  # the probe reached both servers


def test_serve_loopback_shares_one_server_per_model_and_refuses_unknown_names(tmp_path: Path) -> None:
    from datadojo.config import ConfigError

    with serve_loopback(load_recipe(_small("sailor"))) as served:
        assert served.models.teacher == served.models.judge  # policy and judges: one FakeSailor
    plain = load_recipe(_small("envlunch"))
    with serve_loopback(plain) as same:
        assert same is plain
    bad = plain.model_copy(update={"models": plain.models.model_copy(update={"teacher": "loopback:gpt"})})
    with (
        pytest.raises(ConfigError, match="no loopback model 'gpt'; one of loopback:datamind-teacher"),
        serve_loopback(bad),
    ):
        pass


def test_toy_student_is_written_once_into_the_run_folder(tmp_path: Path) -> None:
    from datadojo.runs import content_hash

    assert is_toy_student("toy") and is_toy_student("hf:toy") and not is_toy_student("models/toy-7b")
    cfg = load_recipe(_small("envlunch"))
    first = with_toy_student(cfg, tmp_path)
    toy = tmp_path / TOY_FOLDER
    assert first.models.student == str(toy) and student_window(toy) == TOY_WINDOW
    before = content_hash(toy)
    (toy / "config.json").touch()  # reused as it is, not rewritten
    assert with_toy_student(cfg, tmp_path).models.student == str(toy) and content_hash(toy) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no half-written sibling left
    real = cfg.model_copy(update={"models": cfg.models.model_copy(update={"student": "/ckpt"})})
    assert with_toy_student(real, tmp_path) is real


def test_a_relative_taxonomy_is_read_against_the_recipe_file() -> None:
    """It was read against the working directory: the small DataMind example failed at synthesis with
    ``small-taxonomy.json: cannot read the taxonomy``. Its categories are the bundled taxonomy's, unchanged."""
    from datadojo.recipes.datamind import STAGES, _dm_config

    cfg = load_recipe(_small("datamind"))
    taxonomy = Path(_dm_config(cfg).taxonomy)
    assert taxonomy == EXAMPLES / "small-taxonomy.json"
    synthesis = next(s for s in STAGES if s.name == "synthesis")
    assert synthesis.inputs(cfg) == [taxonomy]  # an edit of it reruns synthesis
    bundled = json.loads((EXAMPLES.parents[1] / "src/datadojo/synth/datamind/taxonomy.json").read_text())
    small = json.loads(taxonomy.read_text(encoding="utf-8"))
    by_name = {c["name"]: c for c in bundled["categories"]}
    assert [c["name"] for c in small["categories"]] == ["Aggregation", "Counting", "Comparison"]
    assert all(c == by_name[c["name"]] for c in small["categories"])


def test_toy_student_without_torch_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from datadojo.recipes import RecipeError

    monkeypatch.setitem(sys.modules, "torch", None)  # a base install: no train extra
    with pytest.raises(RecipeError, match=r"toy checkpoint needs torch and transformers .*datadojo\[train\]"):
        with_toy_student(load_recipe(_small("envlunch")), tmp_path)
    assert not any(tmp_path.iterdir())

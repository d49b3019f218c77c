"""Issue 40: a recipe is checked as a whole before its first stage, and a stage that did nothing useful
cannot end a recipe with exit 0 unnoticed.

* every problem of a file at once (a misspelt section or nested key naming the closest valid name, a wrong
  benchmark, a wrong curation strategy, a study arm not swept), under the plan; ``run`` refuses the same;
* the student's context window against each stage's reply budget (the toy student's 4,096 tokens against
  RL's default ``max_new_tokens`` = 8192: every rollout would end at ``context_limit``);
* an unreachable served model: the stage commands' one line and exit 3, from ``plan`` and ``run``;
* a stage that did nothing stops the recipe (its cause, its setting), unless allowed; the report shows it.
"""

from __future__ import annotations

import socket
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from recipe_fakes import write_recipe
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.recipes import EmptyStage, load_recipe, run
from datadojo.recipes.engine import Stage, StageContext, run_recipe
from datadojo.recipes.report import write_report
from datadojo.recipes.stages import eval_verdict, expert_verdict, rl_verdict, sft_verdict

runner = CliRunner()


def _plan(path: Path, *args: str) -> Any:
    return runner.invoke(app, ["recipe", "plan", str(path), *args], env={"COLUMNS": "250"})


def _committed(out: Path) -> list[str]:
    ledger = out / "stages" / "stages.jsonl"
    return ledger.read_text().splitlines() if ledger.exists() else []


def test_plan_lists_every_problem_of_the_file_at_once_and_run_refuses(tmp_path: Path, toy_ckpt: Path) -> None:
    path = write_recipe(
        "datamind",
        tmp_path,
        toy_ckpt,
        extra=(
            "[stages.sftt]\nepochs = 1.0\n"  # a misspelt section: was ignored, SFT ran on defaults
            "[stages.rl.optim]\nlrr = 1e-6\n"  # a misspelt key two levels down
            '[[benchmarks]]\nbench = "spyder"\ndata = "nowhere"\n'  # a wrong benchmark name
        ),
    )
    path.write_text(path.read_text().replace('strategy = "con-select"', 'strategy = "con-selct"'))
    res = _plan(path, "--out", str(tmp_path / "out"))
    assert res.exit_code == 2, res.output
    assert "9 stage runs to do" in res.output  # the rest of the plan is shown anyway
    out = res.output
    assert f"{path}: 5 problems before the first stage" in out
    assert "[stages.sftt]: no stage 'sftt' in the datamind recipe; did you mean sft?" in out
    assert "[stages.rl] optim.lrr: unknown key; did you mean optim.lr?" in out
    assert "[[benchmarks]] #1 (spyder): unknown benchmark 'spyder'; did you mean spider?" in out
    assert f"[[benchmarks]] #1 (spyder): no data at {tmp_path / 'nowhere'}" in out
    assert (
        "strategy 'con-selct' is not one of con-select, random-select, non-select, non-con; did you mean con-select?"
        in out
    )
    # `recipe run` refuses with the same list, before any stage
    res = runner.invoke(app, ["recipe", "run", str(path), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2 and "5 problems before the first stage" in res.output
    assert "did you mean sft?" in res.output and _committed(tmp_path / "out") == []


def test_allow_empty_names_stages_of_the_recipe(tmp_path: Path, toy_ckpt: Path) -> None:
    path = write_recipe("datamind", tmp_path, toy_ckpt, allow_empty=False)
    path.write_text('allow_empty = ["rl", "sftt"]\n' + path.read_text())
    shown = [str(p) for p in run(load_recipe(path), dry_run=True).problems]
    assert len(shown) == 1 and shown[0].startswith("allow_empty: no stage 'sftt'; did you mean sft?")


def test_top_level_and_section_problems_are_listed_together(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('recipe = "datamind"\ninputs = []\n[models]\nstudnt = "x"\n[stages.sft]\nmax_stepz = 2\n')
    res = _plan(bad)
    assert res.exit_code == 2, res.output
    assert "models.studnt: unknown key; did you mean models.student?" in res.output
    assert "ModelsConfig.student: field required" in res.output
    assert "[stages.sft] max_stepz: unknown key; did you mean max_steps?" in res.output


def test_a_study_arm_not_swept_is_listed_with_the_rest(tmp_path: Path, toy_ckpt: Path) -> None:
    path = write_recipe(
        "envlunch",
        tmp_path,
        toy_ckpt,
        extra='[study]\narm = "stages.rl.enabled"\nmethod = true\nbaseline = false\n[stages.rl_tasks]\nlimt = 2\n',
    )
    result = run(load_recipe(path), sweeps={"stages.rl.enabled": [True, True]}, dry_run=True)
    shown = [str(p) for p in result.problems]
    assert "[study] baseline = False: not among the --sweep values of stages.rl.enabled (True, True)" in shown
    assert "[stages.rl_tasks] limt: unknown key; did you mean limit? (limit, labels, labelled)" in shown
    assert result.items  # the base config is planned


def test_a_reply_budget_over_the_student_window_is_refused_at_plan(tmp_path: Path, toy_ckpt: Path) -> None:
    """Finding 2: the toy student's 4,096-token window and RL's default max_new_tokens = 8192."""
    path = write_recipe("envlunch", tmp_path, toy_ckpt)
    text = path.read_text().replace("max_new_tokens = 6\n", "")  # RL's default: 8192
    path.write_text(
        text.replace("max_tokens = 8\n", "max_tokens = 4090\n")
    )  # eval: fits alone, not with a prompt
    problems = {p.where: p.what for p in run(load_recipe(path), dry_run=True).problems}
    rl = problems["[stages.rl] max_new_tokens (the preset's default)"]
    assert rl.startswith("8192 reply tokens") and "4096-token context window" in rl and "context_limit" in rl
    bench = problems["[[benchmarks]] #1 (shop-sql) max_tokens"]
    # the system prompt alone is more than 6 tokens of the toy tokenizer: 4090 + the prompt cannot fit
    floor = int(bench.split("a first prompt of at least ")[1].split()[0])
    assert floor > 6 and "set it to at most" in bench
    assert len(problems) == 2
    path.write_text(text)  # RL alone wrong: the eval's 8 tokens fit
    assert [p.where for p in run(load_recipe(path), dry_run=True).problems] == [
        "[stages.rl] max_new_tokens (the preset's default)"
    ]


def _closed_port() -> int:
    with socket.socket() as s:  # bound then closed: nothing listens there, the connection is refused at once
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_teacher_is_the_stage_commands_line_and_exit_3(tmp_path: Path, toy_ckpt: Path) -> None:
    """Finding 4: was a progress bar, then "no trajectory was sampled (see rejected.jsonl)", exit 2."""
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    path = write_recipe("datamind", tmp_path, toy_ckpt, teacher=f"openai:t@{url}")
    res = _plan(path)
    assert res.exit_code == 3, res.output
    assert "9 stage runs to do" in res.output
    assert f"error: {path}: models.teacher: cannot reach the model server for 't' at {url}" in res.output
    res = runner.invoke(app, ["recipe", "run", str(path)])
    assert res.exit_code == 3 and "cannot reach the model server for 't'" in res.output
    assert "rejected.jsonl" not in res.output and _committed(tmp_path / "runs" / "recipe") == []


# --- honest outcomes ---------------------------------------------------------------------------------------

CALLS: Counter[str] = Counter()


def _stage(name: str, empty: str | None = None) -> Stage:
    def run_(ctx: StageContext) -> dict[str, Any]:
        CALLS[name] += 1
        return {"empty": empty, "counts": {"in": 4, "in_what": "tasks", "out": 0, "out_what": "updates"}}

    return Stage(name, name, run_)


STAGES = (
    _stage("synthesis"),
    Stage(
        "rl",
        "rl",
        _stage("rl", "0 optimizer updates over 8 rollouts: every group was filtered").run,
        deps=("synthesis",),
    ),
    Stage("eval_rl", "eval", _stage("eval_rl").run, deps=("rl",)),
)


def _config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "r.toml"
    path.write_text(f'recipe = "datamind"\nout = "out"\ninputs = []\n{extra}[models]\nstudent = "ckpt"\n')
    return path


def _go(path: Path, **kw: Any) -> Any:
    return run_recipe(STAGES, load_recipe(path), finish=lambda r, vs: write_report(r, vs, "datamind"), **kw)


def test_a_stage_that_did_nothing_stops_the_recipe_unless_allowed(tmp_path: Path) -> None:
    CALLS.clear()
    path = _config(tmp_path)
    with pytest.raises(EmptyStage) as err:
        _go(path)
    msg = str(err.value)
    assert msg.startswith("stage rl (base) did nothing useful: 0 optimizer updates over 8 rollouts")
    assert 'allow_empty = ["rl"]' in msg and "--allow-empty" in msg and err.value.exit_code == 2
    assert CALLS == {"synthesis": 1, "rl": 1}  # eval of a checkpoint that did not change: not run
    report = (tmp_path / "out" / "report.md").read_text()
    assert "**Stopped: stage rl (base) did nothing useful" in report
    assert "| base | rl | did nothing | 4 tasks → 0 updates |" in report
    html = (tmp_path / "out" / "report.html").read_text()
    assert '<span class="bad">0 optimizer updates over 8 rollouts' in html
    # the rerun finds the stage committed and stops again without redoing it
    with pytest.raises(EmptyStage):
        _go(path)
    assert CALLS == {"synthesis": 1, "rl": 1}
    # allowed (the command's --allow-empty, or the recipe's allow_empty): goes on, the report keeps it red
    _go(path, allow_empty=True)
    assert CALLS == {"synthesis": 1, "rl": 1, "eval_rl": 1}
    assert "## ⚠ Stages that did nothing useful" in (tmp_path / "out" / "report.md").read_text()
    result = _go(_config(tmp_path, 'allow_empty = ["rl"]\n'))
    assert result.stopped is None and result.empty == {("base", "rl"): STAGES[1].run(None)["empty"]}


def test_the_report_warns_of_what_went_on_though_empty_and_keeps_each_stages_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    from types import SimpleNamespace

    from datadojo.recipes import engine

    ticks = iter(range(0, 1000, 5))  # a clock that advances 5 s per reading: each stage "takes" 5 s
    monkeypatch.setattr(engine, "time", SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    CALLS.clear()
    path = _config(tmp_path, 'allow_empty = ["rl"]\n')
    result = _go(path)
    assert result.stopped is None and ("base", "rl") in result.empty
    out = tmp_path / "out"
    md = (out / "report.md").read_text()
    went_on = "stage rl (base) did nothing useful and the recipe went on (allow_empty): 0 optimizer updates"
    assert "## ⚠ Warnings" in md and f"* {went_on}" in md
    # a stage not flagged empty whose output is 0 is a warning too (the fake synthesis: 4 tasks → 0)
    assert "* stage synthesis (base) produced 0 updates from 4 tasks" in md
    html = (out / "report.html").read_text()
    assert '<h2 class="bad">Warnings</h2>' in html and went_on in html
    assert json.loads((out / "report.json").read_text())["warnings"][0].startswith("stage rl (base)")
    assert "| base | synthesis | run | 4 tasks → 0 updates | 5.0 |" in md
    # the rerun finds every stage cached: each keeps the time it took when it ran, not 0.0
    _go(path)
    stages = json.loads((out / "report.json").read_text())["stages"]
    assert [(s["stage"], s["seconds"]) for s in stages] == [
        ("synthesis", "5.0 (cached)"),
        ("rl", "5.0 (cached)"),
        ("eval_rl", "5.0 (cached)"),
    ]


def test_cli_allow_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toy_ckpt: Path) -> None:
    import datadojo.recipes.datamind as dm

    monkeypatch.setattr(dm, "STAGES", STAGES)
    path = tmp_path / "r.toml"
    path.write_text(
        f'recipe = "datamind"\nout = "out"\ninputs = []\n[models]\nstudent = "{toy_ckpt}"\n'
        "[stages.rl]\nmax_new_tokens = 64\n"
    )
    res = runner.invoke(app, ["recipe", "run", str(path)])
    assert (
        res.exit_code == 2 and "error: stage rl (base) did nothing useful: 0 optimizer updates" in res.output
    )
    res = runner.invoke(app, ["recipe", "run", str(path), "--allow-empty"])
    assert res.exit_code == 0, res.output


def test_verdicts_name_the_cause_and_the_setting() -> None:
    # finding 5: SFT trained on 47 of 104 examples and said so only in manifest.json
    why = sft_verdict(104, 47, 0, 57, 2, 4096)
    assert why is not None and why.startswith("trained on 47 of 104 curated trajectories: 57 have no agent")
    assert why.endswith("raise [stages.sft] max_length")
    assert sft_verdict(104, 60, 0, 44, 2, 4096) is None  # most trained on: fine
    assert (
        sft_verdict(4, 4, 0, 0, 0, 4096)
        == "0 optimizer updates on 4 examples: set [stages.sft] epochs or max_steps"
    )
    # finding 2: every RL rollout at context_limit, 0 updates
    why = rl_verdict(0, {"context_limit": 8}, 8192, "[stages.rl]")
    assert why is not None and why.startswith(
        "8 of 8 rollouts ended at context_limit: lower [stages.rl] max_new_tokens (8192)"
    )
    why = rl_verdict(0, {"answer": 6, "max_turns": 2}, 64, "[stages.rl]")
    assert why is not None and "every group was filtered" in why and "dynamic_sampling = false" in why
    assert rl_verdict(3, {"answer": 6, "context_limit": 2}, 64, "[stages.rl]") is None
    assert rl_verdict(3, {"answer": 4, "context_limit": 4}, 64, "[stages.rl]") is None  # half is not most
    why = eval_verdict("dabench", {"context_limit": 5, "answer": 1})
    assert why is not None and why.startswith("5 of 6 trials of dabench ended at context_limit")


def test_rl_names_experts_dropped_for_max_length(toy_tok: Any) -> None:
    """Finding 5: "needs expert trajectories; pass experts" when 104 were passed and all dropped."""
    from datadojo.train.toy import synthetic_trajectory

    long_prompt = [{"role": "system", "content": "S"}, {"role": "user", "content": "word " * 400}]
    experts = [synthetic_trajectory(f"t{i}").model_copy(update={"prompt": long_prompt}) for i in range(3)]
    ids = {t.task_id for t in experts}
    why = expert_verdict(experts, ids, toy_tok, 64, None)
    assert why is not None
    assert why.startswith(
        "none of the 3 expert trajectories can be trained on: 3 have no agent token within max_length = 64"
    )
    assert "raise [stages.rl] max_length" in why
    assert expert_verdict(experts, ids, toy_tok, 8192, None) is None
    why = expert_verdict(experts, {"other"}, toy_tok, 8192, None)
    assert why is not None and "3 are not of an RL task" in why


def test_sft_max_length_against_the_curated_set_already_made(tmp_path: Path, toy_ckpt: Path) -> None:
    """When curation is cached, the plan tokenizes its set as the trainer will and says how many would be
    dropped (finding 5: SFT trained on 47 of 104 examples and said so only in manifest.json)."""
    from datadojo.jsonl import write_jsonl_atomic
    from datadojo.recipes.stages import sft_stage
    from datadojo.train.toy import synthetic_trajectory

    long_prompt = [{"role": "system", "content": "S"}, {"role": "user", "content": "word " * 400}]
    trajs = [synthetic_trajectory(f"t{i}") for i in range(2)]
    trajs += [synthetic_trajectory(f"l{i}").model_copy(update={"prompt": long_prompt}) for i in range(3)]

    def curate(ctx: StageContext) -> dict[str, Any]:
        write_jsonl_atomic(ctx.out / "sft.jsonl", trajs)
        return {"sft_data": str(ctx.out / "sft.jsonl")}

    curation = Stage("curation", "curate", curate)
    path = tmp_path / "r.toml"
    path.write_text(
        f'recipe = "datamind"\nout = "out"\ninputs = []\n[models]\nstudent = "{toy_ckpt}"\n'
        "[stages.sft]\nmax_length = 64\n"
    )
    before = run_recipe((curation, sft_stage()), load_recipe(path), dry_run=True)
    assert before.problems == []  # nothing curated yet: nothing to say
    run_recipe((curation,), load_recipe(path))  # the curated set is made
    after = run_recipe((curation, sft_stage()), load_recipe(path), dry_run=True)
    assert [str(p) for p in after.problems] == [
        "[stages.sft] max_length: on the curated set already made: trained on 2 of 5 curated trajectories: "
        "3 have no agent token within max_length = 64 (their prompt alone fills it), 0 have a void turn; "
        "raise [stages.sft] max_length"
    ]
    path.write_text(path.read_text().replace("max_length = 64", "max_length = 8192"))
    assert run_recipe((curation, sft_stage()), load_recipe(path), dry_run=True).problems == []


def test_a_teacher_down_after_the_plan_ends_synthesis_with_the_same_line(
    tmp_path: Path, toy_ckpt: Path
) -> None:
    """Finding 4 at run time (the server went down between the plan's probe and the stage): the stage's
    backends probe before their first request, so the run ends with the stage commands' line and exit 3 —
    it ended with "no queries to sample (… see rejected.jsonl)", exit 2, after every request's retries."""
    from datadojo.llm.base import ServerUnreachableError

    url = f"http://127.0.0.1:{_closed_port()}/v1"
    path = write_recipe("datamind", tmp_path, toy_ckpt, teacher=f"openai:t@{url}")
    with pytest.raises(
        ServerUnreachableError, match=f"cannot reach the model server for 't' at {url}"
    ) as err:
        run(load_recipe(path), probe_servers=False)  # the plan's probe skipped: as if it had answered then
    assert err.value.exit_code == 3


def test_rl_reward_choices_are_the_registry_names() -> None:
    from datadojo.recipes.engine import RecipeError
    from datadojo.recipes.stages import check_choices
    from datadojo.reward.registry import reward_names

    for name in ("auto", *reward_names()):
        check_choices("[stages.rl]", {"reward": name})
    with pytest.raises(RecipeError, match=r"reward = 'f1': not one of auto, benchmark, datamind, envlunch"):
        check_choices("[stages.rl]", {"reward": "f1"})

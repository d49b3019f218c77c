"""Curation against the adversarial teacher and judge of :mod:`datadojo.testing.datamind` (issue 21: 2, 6, 7).

* the judge, not the pre-check, chooses con-select's trajectory whenever consistent trajectories differ, and
  every record says who chose (``rule_best`` keeps the cheap fewest-turns path);
* answers that differ only in sign / scale / percent / exponent / entity / identifier never reach con-select
  or ``rl_tasks.jsonl``, whatever the rule pre-check says (the trajectories differ, so the judge is asked);
* ``rl_tasks.jsonl`` is read by ``train rl``'s task reader and scored by its reward function;
* the plain SFT prompt is the prompt the agent loop (eval, RL rollouts) sends for that RL task, without the
  workflow or the category's answer-form hint.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from datadojo.jsonl import iter_jsonl, write_jsonl_atomic
from datadojo.llm import load_backend
from datadojo.synth.datamind import DataMindConfig, DataMindRun
from datadojo.synth.datamind.pipeline import stage_curate, stage_judge, stage_sample
from datadojo.testing import datamind as adv
from datadojo.testing.datamind_teacher import fake_sandboxes
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import Trajectory


def _csv(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "sales.csv"
    rows = ["day,v"] + [f"2024-01-{i % 28 + 1:02d},{i}" for i in range(30)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def _synth(root: Path, scenarios: tuple[str, ...], **cfg) -> tuple[Path, dict, int, list]:
    """Write the scenario queries, sample, judge and curate; returns (out, summary, judge requests, requests)."""
    csv = _csv(root / "data")
    out = root / "out"
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl_atomic(out / "queries.jsonl", [adv.query_task(csv, s) for s in scenarios])
    config = DataMindConfig(concurrency=4, rounds=0, **cfg)

    async def go(ts: ScriptedLLMServer, js: ScriptedLLMServer) -> dict:
        t = load_backend(f"openai:teacher@{ts.base_url}")
        j = load_backend(f"openai:judge@{js.base_url}")
        try:
            run = DataMindRun([], out, config)
            await stage_sample(run, t, sandboxes=fake_sandboxes)
            await stage_judge(run, j)
            return stage_curate(run)
        finally:
            await t.aclose()
            await j.aclose()

    with ScriptedLLMServer(adv.teacher) as ts, ScriptedLLMServer(adv.judge) as js:
        summary = asyncio.run(go(ts, js))
        return out, summary, len(js.requests), list(js.requests)


def _records(path: Path) -> list[dict]:
    return [r for _, r in iter_jsonl(path)]


def _scenario_of(record: dict) -> str:
    user = next(m["content"] for m in record["messages"] if m["role"] == "user")
    return user.split("]")[0].removeprefix("[s:")


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> tuple[Path, dict, int, list]:
    return _synth(tmp_path_factory.mktemp("cur"), tuple(adv.SCENARIOS))


def test_the_judge_chooses_the_best_of_differing_consistent_trajectories(judged) -> None:
    out, _summary, _n, requests = judged
    con = {_scenario_of(r): r for r in _records(out / "sft" / "con-select.jsonl")}
    # `paths`: all three answer 42 but take 3, 1 and 2 cells. The pre-check alone would keep sample 1 (fewest
    # turns); the judge was asked and chose attempt 1 = sample 0, the one that checks its result.
    assert con["paths"]["sample"] == 0 and con["paths"]["chosen_by"] == "judge"
    verdicts = {v["task_id"]: v for _, v in iter_jsonl(out / "verdicts.jsonl")}
    paths_task = next(r for r in _records(out / "rl_tasks.jsonl") if "[s:paths]" in r["question"])
    v = verdicts[paths_task["id"]]
    assert v["method"] == "llm" and v["chosen_by"] == "judge" and v["best"] == 0
    # identical trajectories: nothing to choose, no request; the record says the rule chose
    assert con["identical"]["chosen_by"] == "rule"
    assert not any("[s:identical]" in str(r.json) for r in requests)
    # the other strategies say how they chose
    assert {r["chosen_by"] for r in _records(out / "sft" / "random-select.jsonl")} == {"random"}
    assert {r["chosen_by"] for r in _records(out / "sft" / "non-select.jsonl")} == {"all"}


def test_rule_best_keeps_the_cheap_fewest_turns_path(tmp_path: Path) -> None:
    out, _summary, n_judge, _ = _synth(tmp_path, ("paths",), rule_best=True)
    (con,) = _records(out / "sft" / "con-select.jsonl")
    assert con["sample"] == 1 and con["chosen_by"] == "rule" and n_judge == 0


def test_answers_differing_in_sign_scale_percent_entity_or_identifier_are_never_consistent(judged) -> None:
    out, summary, _n, _ = judged
    assert summary["filters"]["rl_tasks"] == 2 and summary["filters"]["best_chosen_by"] == {
        "judge": 1,
        "rule": 1,
    }
    kept = {_scenario_of(r) for r in _records(out / "sft" / "con-select.jsonl")}
    assert kept == set(adv.AGREEING)
    rl = _records(out / "rl_tasks.jsonl")
    assert sorted(r["question"].split("]")[0][3:] for r in rl) == sorted(adv.AGREEING)
    # non-con (default: the paper's reading) keeps every round-0 trajectory, the inconsistent ones included
    non_con = _records(out / "sft" / "non-con.jsonl")
    assert len(non_con) == 3 * len(adv.SCENARIOS) and {r["chosen_by"] for r in non_con} == {"all"}


def test_rl_tasks_feed_train_rl(judged) -> None:
    from datadojo.cli.inputs import load_tasks
    from datadojo.reward.registry import spec_for_cli
    from datadojo.train.rewards import registry_reward_fn

    out, *_ = judged
    tasks = load_tasks(out / "rl_tasks.jsonl", "--tasks")  # what `datadojo train rl --tasks` calls
    assert len(tasks) == 2
    for t in tasks:
        assert t.answer == "42" and t.files and Path(t.files[0].path).is_file()
        assert t.extra["reference"]["chosen_by"] in ("judge", "rule")
        assert t.description is None and "answer_format" not in t.extra and "workflow" not in t.extra
    reward = registry_reward_fn(spec_for_cli("datamind"))  # `train rl --reward datamind`

    def traj(task, answer: str) -> Trajectory:
        raw = f"<think>Summed.</think><answer>{answer}</answer>"
        return Trajectory.model_validate(
            {"task_id": task.id, "sample": 0, "dialect": "datamind", "prompt": [],
             "turns": [{"raw": raw, "thought": "Summed.", "action": {"kind": "answer", "text": answer}}],
             "final_answer": answer, "stop_reason": "answer"}
        )  # fmt: skip

    right, wrong = reward([(tasks[0], traj(tasks[0], "42")), (tasks[0], traj(tasks[0], "-42"))])
    assert right.correct and right.total > wrong.total and not wrong.correct


def test_plain_sft_prompt_is_what_the_agent_loop_sends_for_the_rl_task(judged, tmp_path: Path) -> None:
    from datadojo.agent.runner import run_rollouts
    from datadojo.cli.inputs import load_tasks
    from datadojo.synth.datamind.prompts import agent_config

    out, *_ = judged
    task = next(t for t in load_tasks(out / "rl_tasks.jsonl") if "[s:identical]" in t.question)
    record = next(r for r in _records(out / "sft" / "non-select.jsonl") if r["task_id"] == task.id)
    system = record["messages"][0]["content"]
    assert "Format of the final answer" not in system and "## Suggested workflow" not in system
    # the teacher saw both (as sampled)
    sampled = next(t for _, t in iter_jsonl(out / "trajectories.jsonl") if t["task_id"] == task.id)["prompt"][
        0
    ]["content"]
    assert "Format of the final answer" in sampled and "## Suggested workflow" in sampled

    async def episode(url: str) -> None:
        b = load_backend(f"openai:policy@{url}")
        try:
            await run_rollouts([task], b, tmp_path / "ro", config=agent_config(DataMindConfig()),
                               sandboxes=fake_sandboxes)  # fmt: skip
        finally:
            await b.aclose()

    with ScriptedLLMServer(adv.teacher) as ps:
        asyncio.run(episode(ps.base_url))
        first = ps.requests[0].json["messages"]
    assert first[0]["content"] == system and first[1]["content"] == record["messages"][1]["content"]


def test_a_stage_whose_settings_differ_from_its_input_refuses_naming_both(tmp_path: Path) -> None:
    from datadojo.synth.datamind.errors import DataMindError

    out, *_ = _synth(tmp_path, ("identical",), n_samples=3)
    verdicts = (out / "verdicts.jsonl").read_bytes()
    # `judge -n 2` on trajectories sampled with -n 3 used to judge 2 of 3 silently
    run = DataMindRun([], out, DataMindConfig(n_samples=2))
    with pytest.raises(DataMindError, match=r"judge stage would run with n_samples = 2, but the sample stage "
                                            r"of this run used n_samples = 3"):  # fmt: skip
        asyncio.run(stage_judge(run, load_backend("openai:j@http://127.0.0.1:9/v1")))
    # a resumed sample stage with another turn budget would mix two runs
    run = DataMindRun([], out, DataMindConfig(n_samples=3, max_turns=4))
    with pytest.raises(DataMindError, match=r"max_turns = 4.*max_turns = 10"):
        asyncio.run(stage_sample(run, load_backend("openai:t@http://127.0.0.1:9/v1")))
    assert (out / "verdicts.jsonl").read_bytes() == verdicts  # nothing was written
    # the same from the command line: one line naming both settings, exit 2
    from typer.testing import CliRunner

    from datadojo.cli.app import app

    res = CliRunner().invoke(app, ["synth", "datamind", "judge", "--judge", "openai:j@http://127.0.0.1:9/v1",
                                   "-n", "2", "--out", str(out), "--no-progress"])  # fmt: skip
    assert res.exit_code == 2 and "n_samples = 2" in res.output and "n_samples = 3" in res.output, res.output
    # curation may change its own settings freely
    stage_curate(DataMindRun([], out, DataMindConfig(non_con="one")))


def test_report_shows_models_settings_samples_trajectories_and_links(judged) -> None:
    out, summary, *_ = judged
    assert summary["models"] == {"teacher": "teacher", "judge": "judge"}
    page = (out / "report.html").read_text(encoding="utf-8")
    for text in (
        "Models and settings", "teacher", "judge", "n_samples", "rule_best",  # models and every setting
        "Sample queries", "[s:paths] What is the total of v?",  # sample queries
        "Sample rejections", "Trajectories (first",  # rejections and the trajectory viewer
        "kept as best", "chosen by judge", "check the result",  # a verdict, who chose, an attempt's code
        'href="sft/con-select.jsonl"', 'href="rl_tasks.jsonl"',  # links to the outputs
    ):  # fmt: skip
        assert text in page, text


def test_a_recipes_curation_stage_reports_as_curation_with_the_models_of_its_input(judged, tmp_path) -> None:
    """The recipe's curation stage curates a synthesis folder of its own; its page must not read as a
    synthesis run, nor say "(none recorded)" for the teacher and judge that made the trajectories."""
    from datadojo.recipes.config import load_recipe
    from datadojo.recipes.datamind import STAGES
    from datadojo.recipes.engine import StageContext
    from datadojo.runs.cache import CacheEntry

    src, *_ = judged
    path = tmp_path / "r.toml"
    path.write_text('recipe = "datamind"\nout = "out"\ninputs = []\n[models]\nstudent = "ckpt"\n')
    stage = next(s for s in STAGES if s.name == "curation")
    synthesis = CacheEntry("synthesis", "k", src, {"folder": str(src)})
    out = tmp_path / "curation"
    out.mkdir()
    manifest = stage.run(
        StageContext(load_recipe(path), stage, out, {"synthesis": synthesis}, lambda d, t: None)
    )
    assert manifest["kept"] > 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<h1>DataMind curation (con-select)" in page and "<h1>DataMind synthesis</h1>" not in page
    assert "(none recorded)" not in page
    assert (
        '<td>teacher</td><td class="num">teacher</td>' in page
        and '<td>judge</td><td class="num">judge</td>' in page
    )
    assert (src / "report.html").read_text(encoding="utf-8").count("<h1>DataMind synthesis</h1>") == 1

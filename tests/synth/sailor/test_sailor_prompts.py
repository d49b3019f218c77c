"""SciDataSailor synthesis, SFT records, RL tasks and ``eval scidata`` agree on the prompt (issue 21: 6, 7;
issue 25: the benchmark prompt must not give answers away)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from datadojo.bench.scidata import SciData
from datadojo.env.prompts import build_prompt, load_template
from datadojo.eval.harness import EvalConfig
from datadojo.jsonl import iter_jsonl, read_trajectories
from datadojo.llm.spec import load_backend
from datadojo.protocol import get_dialect
from datadojo.synth.sailor import SailorConfig, load_seeds, run_sailor
from datadojo.testing.sailor_teacher import FakeSailor
from datadojo.testing.server import ScriptedLLMServer

SMALL = SailorConfig(max_nodes=4, max_depth=3, min_depth=2, trajectories_per_seed=2, k_max=2, logprobs=False)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("sp")
    dataset = root / "lake"
    (dataset / "data").mkdir(parents=True)
    (dataset / "README.md").write_text("# Lake chemistry\nMonthly pH of one lake.\n")
    rows = "\n".join(f"2020-{m:02d},{6.5 + m / 10:.2f}" for m in range(1, 13))
    (dataset / "data" / "ph.csv").write_text("month,ph\n" + rows + "\n")
    out = root / "run"
    with ScriptedLLMServer(FakeSailor()) as srv:

        async def go() -> None:
            backend = load_backend(f"openai:fake@{srv.base_url}")
            try:
                await run_sailor(
                    [dataset], load_seeds(only=["L0-map"]), policy=backend, out=out, config=SMALL
                )
            finally:
                await backend.aclose()

        asyncio.run(go())
    return dataset, out


def _eval_prompt(task_file: Path, out: Path) -> tuple[list[dict], list]:
    bench = SciData()
    tasks = list(bench.load(task_file))
    cfg = EvalConfig(
        bench="scidata", data=str(task_file), out=str(out), model="openai:x@http://127.0.0.1:9/v1"
    )
    agent = cfg.agent_config(bench)
    dialect = get_dialect(agent.dialect)
    # exactly what the agent loop (datadojo.env.run_agent) opens an `eval scidata` episode with
    prompt = build_prompt(tasks[0], dialect, max_turns=agent.max_turns, template=load_template(dialect),
                          profile_chars=agent.profile_chars)  # fmt: skip
    return prompt, tasks


def test_sft_prompt_is_the_eval_scidata_prompt(run, tmp_path: Path) -> None:
    _, out = run
    (traj,) = list(read_trajectories(out / "trajectories.jsonl"))[:1]
    prompt, _ = _eval_prompt(out / "meta.jsonl", tmp_path / "e")
    assert traj.prompt == prompt
    assert "at most 12 replies" in prompt[0]["content"]  # the benchmark's budget, not max_depth + 1 = 4
    (sft,) = [r for _, r in iter_jsonl(out / "sft.jsonl") if r["sample"] == traj.sample][:1]
    assert sft["messages"][0]["content"] == prompt[0]["content"]


def test_sft_turns_carry_their_strategy(run) -> None:
    _, out = run
    for _, rec in iter_jsonl(out / "sft.jsonl"):
        assistant = [m for m in rec["messages"] if m["role"] == "assistant"]
        assert rec["turn_strategies"][-1] is None and len(rec["turn_strategies"]) == len(assistant)
        for m, strategy in zip(assistant, rec["turn_strategies"], strict=True):
            if strategy is not None:
                assert f"Strategy: {strategy} (" in m["content"]
        assert rec["strategies"] and all(rec["strategies"])


def test_the_scidata_prompt_does_not_give_the_statistics_away(run, tmp_path: Path) -> None:
    _, out = run
    prompt, _ = _eval_prompt(out / "qa.jsonl", tmp_path / "e")
    system = prompt[0]["content"]
    assert "ph.csv" in system and "README.md" in system  # the tree is listed
    for leak in ("7.1", "7.7", "6.6", "Monthly pH"):  # the pH values (range) and the README text are not
        assert leak not in system, leak


def test_sailor_rl_tasks_feed_train_rl(run) -> None:
    from datadojo.cli.inputs import load_tasks
    from datadojo.reward import default_answer_check

    _, out = run
    tasks = load_tasks(out / "rl_tasks.jsonl", "--tasks")  # what `datadojo train rl --tasks` calls
    qa = [r for _, r in iter_jsonl(out / "qa.jsonl")]
    assert tasks and len(tasks) == len(qa)
    for t in tasks:
        assert t.answer and t.extra["reference"]["chosen_by"] == "qa_synthesis" and t.description
        assert default_answer_check(t, str(t.answer)).correct  # train rl's default r_answer
        assert not default_answer_check(t, "no idea").correct


def test_the_bundled_scidata_task_prompt_does_not_hold_its_answer(tmp_path: Path) -> None:
    # examples/scidata_tasks.jsonl asks for the mean pH (6.93); the folder profile used to print "mean 6.93"
    examples = Path(__file__).resolve().parents[3] / "examples" / "scidata_tasks.jsonl"
    prompt, tasks = _eval_prompt(examples, tmp_path / "e")
    system = prompt[0]["content"]
    assert tasks[0].answer == "6.93" and "measurements.csv" in system
    assert "6.93" not in system and "mean" not in system.lower().split("## about the data")[0]

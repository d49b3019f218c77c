"""The four benchmarks of issue 41 (DABstep, Spider 2.0-lite local, KramaBench, DA-Code) through the environment
interface: their official-layout fixtures loaded as an adapter loads them (``load_env_source``, what
``vf-eval datadojo`` and ``datadojo env serve`` call) and as ``train rl`` reads ``datadojo bench export``'s
``rl_tasks.jsonl``, one scripted right and one scripted wrong episode played through ``DataEnv.reset`` /
``Episode.step``, and ``Episode.reward()`` checked twice: its answer part against the benchmark's own scorer
for the same answer text (the official verdict), its total against DataMind's R by hand (DataMind §4: a right
answer of l ≤ l_min = 256 tokens gets r_length = 1, so R = 1; a wrong answer in a well-formed trajectory 0).

What cannot go through, and why: KramaBench's ``string_approximate`` answers are decided by an LLM judge
(``llm_paraphrase``); without a judge the environment's reward has no verdict to give, so
``load_env_source`` refuses such tasks up front in one line (pass ``judge=SPEC`` or
``options={"paraphrase": "rule"}``), and ``bench export`` leaves them out (``needs_judge``). DA-Code's file
outputs go through: its answer format carries each output file as a named fenced block in the final answer,
which the reward scores as ``datadojo eval`` does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from datadojo.bench import get_benchmark
from datadojo.bench.export import export_rl_tasks
from datadojo.env import DataEnv, EnvConfig
from datadojo.integrations.source import AdapterError, load_env_source
from datadojo.jsonl import read_tasks
from datadojo.reward.registry import RewardResult, RewardSpec
from datadojo.testing.env import runner_factory
from datadojo.types import Task
from helpers.dabstep import make_dabstep
from helpers.dacode import make_dacode
from helpers.kramabench import make_kramabench
from helpers.spider2 import make_spider2_lite


@dataclass(frozen=True)
class Case:
    """One benchmark's fixture, the task played, and a right and a wrong final answer (as a model writes)."""

    bench: str
    make: Callable[[Path], Path]
    task_id: str
    right: str
    wrong: str
    #: loader options for the adapter (KramaBench's fixture holds a judge-only answer: compared by rule here)
    options: dict[str, str] = field(default_factory=dict)


CASES = [
    Case("dabstep", lambda tmp: make_dabstep(tmp / "DABstep"), "5", "NL", "BE"),
    Case(
        "spider2-lite",
        lambda tmp: make_spider2_lite(tmp / "spider2-lite"),
        "local001",  # row order counts (ignore_order false): the same rows ascending are wrong
        "SELECT region, SUM(amount) AS total FROM sales GROUP BY region ORDER BY total DESC",
        "SELECT region, SUM(amount) AS total FROM sales GROUP BY region ORDER BY total ASC",
    ),
    Case(
        "kramabench",
        make_kramabench,
        "legal-easy-1",
        '{"answer": 1135291}',
        '{"answer": 1135290}',
        {"paraphrase": "rule"},
    ),
    Case(
        "dacode",
        make_dacode,
        "dm-csv-001",  # compare_csv on columns 0 and 1, order ignored: a wrong count in column 1 is wrong
        "```csv undefeated.csv\nweight_class,undefeated,note\nHeavy,1,b\nLight,3,a\n```",
        "```csv undefeated.csv\nweight_class,undefeated,note\nHeavy,1,b\nLight,4,a\n```",
    ),
]
IDS = [c.bench for c in CASES]


async def _play(task: Task, config: EnvConfig, reward: RewardSpec | None, answer: str) -> RewardResult:
    """One scripted episode: a code turn (run by the sandbox double), then the final answer."""
    env = DataEnv(config, sandboxes=runner_factory(), reward=reward)
    async with env, await env.reset(task) as episode:
        await episode.step("<think>Look at the data.</think>\n<code>\nprint('looked')\n</code>")
        result = await episode.step(f"<think>Done.</think>\n<answer>{answer}</answer>")
        assert result.done and episode.stop_reason == "answer"
        assert episode.trajectory().final_answer == answer
        return await episode.reward()


def _check(case: Case, task: Task, right: RewardResult, wrong: RewardResult) -> None:
    bench = get_benchmark(case.bench)
    official = (bench.score(task, case.right).correct, bench.score(task, case.wrong).correct)
    assert official == (True, False)  # the fixture's gold, by hand
    assert (right.parts["answer"], wrong.parts["answer"]) == (float(official[0]), float(official[1]))
    assert (right.reward, right.correct, wrong.correct) == ("datamind", True, False)
    # DataMind's R by hand: 1 for a right short answer, 0 for a wrong one in a well-formed trajectory
    assert right.total == pytest.approx(1.0, abs=1e-12) and wrong.total == pytest.approx(0.0, abs=1e-12)
    assert right.parts == pytest.approx({"answer": 1.0, "length": 0.0, "format": 0.0}, abs=1e-12)


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_an_adapter_source_gives_the_official_verdict(tmp_path: Path, case: Case) -> None:
    source = load_env_source(case.bench, data=case.make(tmp_path), options=case.options, work_dir=tmp_path)
    task = source.task(case.task_id)
    right = await _play(task, source.config, source.reward, case.right)
    wrong = await _play(task, source.config, source.reward, case.wrong)
    _check(case, task, right, wrong)


@pytest.mark.parametrize("case", CASES, ids=IDS)
async def test_the_exported_rl_tasks_give_the_official_verdict(tmp_path: Path, case: Case) -> None:
    exported = export_rl_tasks(get_benchmark(case.bench), case.make(tmp_path), tmp_path / "rl")
    (task,) = [t for t in read_tasks(exported.path) if t.id == case.task_id]  # as `train rl --tasks` reads it
    right = await _play(task, EnvConfig(), None, case.right)
    wrong = await _play(task, EnvConfig(), None, case.wrong)
    _check(case, task, right, wrong)


def test_judge_only_kramabench_answers_are_refused_without_a_judge(tmp_path: Path) -> None:
    root = make_kramabench(tmp_path)
    with pytest.raises(AdapterError, match=r"legal-hard-3: .*LLM judge.*judge=.*paraphrase=rule") as info:
        load_env_source("kramabench", data=root)
    assert "\n" not in str(info.value)
    # with the rule (a case-insensitive comparison, a lower bound) or a judge, it is served
    by_rule = load_env_source("kramabench", data=root, options={"paraphrase": "rule"})
    judged = load_env_source("kramabench", data=root, judge="openai:judge@http://127.0.0.1:9/v1")
    assert "legal-hard-3" in by_rule.tasks and "legal-hard-3" in judged.tasks

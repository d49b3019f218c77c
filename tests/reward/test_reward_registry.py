"""The reward registry: weighted parts by hand, the one chooser's decisions, and the registry's errors.

Expected values are computed by hand from DataMind §4 (R = r_length·r_answer if correct, 0 if wrong but
well formed, −0.1 if wrong and malformed; r_length = (l_max − l)/(l_max − l_min)·0.5 + 0.5 between
256 and 1024 tokens) and EnvLunch Eq. 4 (R = (1 + w(1 − t/t_max))·min_k m, w = 0.5, t_max = 16 for SQL).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from datadojo.config import ConfigError
from datadojo.errors import UnknownNameError
from datadojo.reward.canon import canonical_rows
from datadojo.reward.registry import (
    RewardResult,
    RewardSpec,
    aclose_rewards,
    choose_reward_name,
    register_reward,
    reward_for_task,
    reward_names,
    reward_problems,
    score_pairs,
    score_pairs_sync,
    spec_for_cli,
)
from datadojo.types import Action, Task, Trajectory, Turn


def _traj(task_id: str, raw_answer: str, *, thought: str = "Done.", turns_before: int = 0) -> Trajectory:
    """A well-formed trajectory: ``turns_before`` code turns, then ``<think>…</think><answer>…</answer>``."""
    code = Turn(
        raw="<think>Look.</think>\n<code>SELECT 1</code>",
        thought="Look.",
        action=Action(kind="sql", text="SELECT 1"),
    )
    raw = f"<think>{thought}</think>\n<answer>{raw_answer}</answer>"
    ans = Turn(raw=raw, thought=thought, action=Action(kind="answer", text=raw_answer))
    return Trajectory(
        task_id=task_id, dialect="datamind", turns=[code] * turns_before + [ans],
        final_answer=raw_answer, stop_reason="answer",
    )  # fmt: skip


def _malformed(task_id: str, answer: str) -> Trajectory:
    """An answer with no <think> block: the strict validator refuses the format (r_format = 0)."""
    raw = f"<answer>{answer}</answer>"
    turn = Turn(raw=raw, action=Action(kind="answer", text=answer))
    return Trajectory(
        task_id=task_id, dialect="datamind", turns=[turn], final_answer=answer, stop_reason="answer"
    )


# ---- DataMind as weighted parts ------------------------------------------------------------------


def test_datamind_parts_by_hand() -> None:
    task = Task(id="q", question="Total?", answer=7)
    words = 512  # the approximation counts one token per short word and per digit: l = 1 + 512
    long_answer = "7 " + " ".join(["so"] * words)
    right, long_right, wrong, malformed = score_pairs_sync(
        [
            (task, _traj("q", "7")),
            (task, _traj("q", long_answer)),
            (task, _traj("q", "17")),
            (task, _malformed("q", "17")),
        ]
    )
    assert right == RewardResult(
        1.0, True, {"answer": 1.0, "length": 0.0, "format": 0.0},
        {"r_answer": 1.0, "r_format": 1.0, "r_length": 1.0, "answer_tokens": 1.0, "answer_decided": 1.0},
        "datamind",
    )  # fmt: skip
    # l = 513: r_length = (1024 − 513)/(1024 − 256)·0.5 + 0.5 = 511/1536 + 0.5 = 0.83268229…
    r_length = 511 / 1536 + 0.5
    assert long_right.details["answer_tokens"] == 513
    assert long_right.parts["answer"] == 1.0
    assert long_right.parts["length"] == pytest.approx(r_length - 1.0, abs=1e-12)
    assert long_right.total == pytest.approx(r_length, abs=1e-12) and long_right.correct
    assert wrong.total == 0.0 and wrong.parts == {"answer": 0.0, "length": 0.0, "format": 0.0}
    assert not wrong.correct
    assert malformed.total == pytest.approx(-0.1) and malformed.parts["format"] == pytest.approx(-0.1)
    assert malformed.details["r_format"] == 0.0
    for r in (right, long_right, wrong, malformed):
        assert sum(r.parts.values()) == pytest.approx(r.total, abs=1e-15)


def test_a_weight_moves_its_part_and_only_it() -> None:
    task = Task(id="q", question="Total?", answer=240)
    spec = RewardSpec(weights={"format": 0.25, "answer": 2.0})
    (malformed,) = score_pairs_sync([(task, _malformed("q", "17"))], spec)
    (right,) = score_pairs_sync([(task, _traj("q", "240"))], spec)
    assert malformed.total == pytest.approx(-0.25) and malformed.parts["format"] == pytest.approx(-0.25)
    assert right.total == 2.0 and right.parts == {"answer": 2.0, "length": 0.0, "format": 0.0}
    with pytest.raises(ConfigError, match="no part named 'agreement'"):
        score_pairs_sync([(task, _traj("q", "240"))], RewardSpec(weights={"agreement": 1.0}))


def test_length_bounds_are_options() -> None:
    # l_min = 0, l_max = 10, l = 5 tokens: (10 − 5)/10·0.5 + 0.5 = 0.75
    task = Task(id="q", question="Total?", answer=7)
    (r,) = score_pairs_sync([(task, _traj("q", "7 a b c d"))], RewardSpec(l_min=0, l_max=10))
    assert r.details["answer_tokens"] == 5 and r.total == pytest.approx(0.75)


# ---- EnvLunch as weighted parts ------------------------------------------------------------------

COPIES = {
    "copy1": [("N", 10), ("N", 20), ("S", 5)],
    "copy2": [("N", 10), ("S", 5), ("S", 7), ("E", 1)],
}
TARGETS = {"copy1": [("N", 30), ("S", 5)], "copy2": [("N", 10), ("S", 12), ("E", 1)]}
SQL_RIGHT = "SELECT region, SUM(amount) AS total FROM sales GROUP BY region"
SQL_PARTIAL = "SELECT region, SUM(amount) FROM sales WHERE region != 'E' GROUP BY region"


def _envlunch_task(root: Path) -> tuple[Task, Path]:
    """An SQL EnvLunch task with two counterfactual copies, written beside its task file."""
    for name, rows in COPIES.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(root / name / "shop.sqlite") as con:
            con.execute("CREATE TABLE sales (region TEXT, amount INTEGER)")
            con.executemany("INSERT INTO sales VALUES (?, ?)", rows)
        con.close()
    targets = [canonical_rows(["region", "total"], TARGETS[c]).to_json() for c in COPIES]
    task = Task(
        id="el-sql", question="Target value: ...", answer_kind="envlunch", source="envlunch",
        extra={"backend": "sql", "copies": list(COPIES), "orig": "copy1", "copy_targets": targets,
               "target": targets[0], "db_name": "shop.sqlite", "level": 1, "program": SQL_RIGHT},
    )  # fmt: skip
    path = root / "tasks.jsonl"
    path.write_text(json.dumps(task.model_dump(mode="json")) + "\n", encoding="utf-8")
    return task, path


def test_envlunch_parts_by_hand(tmp_path: Path) -> None:
    task, path = _envlunch_task(tmp_path)
    spec = RewardSpec(tasks_path=str(path), executor="in_process")
    right, partial = score_pairs_sync(
        [
            (task, _traj(task.id, SQL_RIGHT, turns_before=4)),
            (task, _traj(task.id, SQL_PARTIAL, turns_before=2)),
        ],
        spec,
    )
    # right: m = (1, 1), t = 4: agreement 1, brevity 0.5·(1 − 4/16)·1 = 0.375; (1 + 0.375)·1 = 1.375
    assert right.reward == "envlunch" and right.correct
    assert right.parts == pytest.approx(
        {"agreement": 1.0, "brevity": 0.375}
    ) and right.total == pytest.approx(1.375)
    # partial: copy 1 exact, copy 2 row overlap |{N10, S12}| / |{N10, S12, E1}| = 2/3; t = 2:
    # agreement 2/3, brevity 0.5·(14/16)·(2/3) = 0.2916…; (1 + 0.5·14/16)·2/3 = 23/24
    assert not partial.correct
    assert partial.parts["agreement"] == pytest.approx(2 / 3)
    assert partial.parts["brevity"] == pytest.approx(0.5 * 14 / 16 * 2 / 3)
    assert partial.total == pytest.approx(23 / 24) and partial.details["m_min"] == pytest.approx(2 / 3)
    # the brevity weight is EnvLunch's w: w = 1 gives (1 + 14/16)·2/3 = 1.25
    (w1,) = score_pairs_sync(
        [(task, _traj(task.id, SQL_PARTIAL, turns_before=2))], spec.replace(weights={"brevity": 1.0})
    )
    assert w1.total == pytest.approx(1.25)


def test_envlunch_without_its_task_file_is_a_clear_error(tmp_path: Path) -> None:
    task, _ = _envlunch_task(tmp_path)
    with pytest.raises(ConfigError, match=r"el-sql.*needs the task file"):
        score_pairs_sync([(task, _traj(task.id, SQL_RIGHT))])
    assert reward_problems([task]) and "needs the task file" in reward_problems([task])[0]
    assert reward_problems([Task(id="n", question="?")]) == [
        "n: no answer to reward against (reward datamind)"
    ]


# ---- the chooser ---------------------------------------------------------------------------------


def test_the_chooser(tmp_path: Path) -> None:
    envlunch, _ = _envlunch_task(tmp_path)
    bench = Task(id="b", question="q", answer={"mean": "1.50"}, answer_kind="dabench", source="dabench")
    plain = Task(id="p", question="q", answer=240)
    assert choose_reward_name(envlunch) == "envlunch"
    assert choose_reward_name(bench) == "datamind" and choose_reward_name(plain) == "datamind"
    assert choose_reward_name(plain, RewardSpec(judge="openai:j@http://127.0.0.1:9/v1")) == "judge"
    assert choose_reward_name(envlunch, RewardSpec(name="benchmark")) == "benchmark"  # a name wins
    assert set(reward_names()) >= {"benchmark", "datamind", "envlunch", "judge", "scientific"}


def test_a_benchmark_task_is_rewarded_by_its_official_rule() -> None:
    # DABench's rule wants the @name[value] format and 1e-6 closeness; the tolerant matcher allows 3 %
    task = Task(id="b", question="q", answer={"mean": "1.50"}, answer_kind="dabench", source="dabench")
    ok, off = score_pairs_sync([(task, _traj("b", "@mean[1.5]")), (task, _traj("b", "@mean[1.51]"))])
    assert (ok.total, ok.correct, off.total, off.correct) == (1.0, True, 0.0, False)
    # the benchmark reward: one part, the rule's credit
    bench_ok, bench_off = score_pairs_sync(
        [(task, _traj("b", "@mean[1.5]")), (task, _traj("b", "@mean[1.51]"))], RewardSpec(name="benchmark")
    )
    assert bench_ok.parts == {"benchmark": 1.0} and bench_off.parts == {"benchmark": 0.0}
    # without a benchmark the tolerant matcher decides: 1.51 is within 3 % of 1.50
    plain = Task(id="b", question="q", answer=1.5)
    (near,) = score_pairs_sync([(plain, _traj("b", "1.51"))])
    assert near.correct


def test_the_scientific_reward_reads_units() -> None:
    task = Task(id="s", question="How far, in km?", answer="1.5 km")
    (metres,) = score_pairs_sync([(task, _traj("s", "1500 m"))], RewardSpec(name="scientific"))
    (wrong,) = score_pairs_sync([(task, _traj("s", "15 km"))], RewardSpec(name="scientific"))
    assert metres.correct and metres.total == 1.0 and not wrong.correct


async def test_the_judge_decides_the_answer_part(tmp_path: Path) -> None:
    from datadojo.testing.server import ScriptedLLMServer

    task = Task(id="j", question="Which region sells most?", answer="North")
    with ScriptedLLMServer(['{"score": 1, "reason": "same region"}']) as server:
        spec = spec_for_cli(None, judge=f"openai:judge@{server.base_url}?max_retries=0", cache_dir=tmp_path)
        (r,) = await score_pairs([(task, _traj("j", "The northern one"))], spec)
    assert r.reward == "judge" and r.correct and r.total == 1.0
    assert (tmp_path / "judge_cache.jsonl").is_file()
    await aclose_rewards(spec)


def _open_judge_clients(reward: object) -> list:
    backend = reward.scorer.judge.backend  # type: ignore[attr-defined]
    return [c for clients in backend._clients.values() for c in clients]


async def test_closing_the_rewards_closes_the_judge_backend(tmp_path: Path) -> None:
    """A judge's model backend (an HTTP client session) is opened by the registry, so the registry closes it:
    left open, aiohttp warns "Unclosed client session" when the process ends."""
    from datadojo.testing.server import ScriptedLLMServer

    task = Task(id="j", question="Which region sells most?", answer="North")
    with ScriptedLLMServer(['{"score": 1, "reason": "same region"}']) as server:
        spec = spec_for_cli(None, judge=f"openai:judge@{server.base_url}?max_retries=0", cache_dir=tmp_path)
        (r,) = await score_pairs([(task, _traj("j", "The northern one"))], spec)
        reward = reward_for_task(task, spec)
        clients = _open_judge_clients(reward)
        assert r.correct and clients and not any(c.is_closed() for c in clients)
        await aclose_rewards(spec)
    assert all(c.is_closed() for c in clients)
    assert reward_for_task(task, spec) is not reward  # forgotten: the next use builds a fresh one


def test_score_pairs_sync_closes_the_judge_it_opened_on_its_own_loop(tmp_path: Path) -> None:
    """``score_pairs_sync`` runs its own event loop; a judge session opened on it is dead once it returns,
    so it is closed on that loop before it ends."""
    from datadojo.testing.server import ScriptedLLMServer

    task = Task(id="j", question="Which region sells most?", answer="North")
    with ScriptedLLMServer(['{"score": 1, "reason": "same region"}']) as server:
        spec = spec_for_cli(None, judge=f"openai:judge@{server.base_url}?max_retries=0", cache_dir=tmp_path)
        reward = reward_for_task(task, spec)
        (r,) = score_pairs_sync([(task, _traj("j", "The northern one"))], spec)
    assert r.correct and reward.scorer.judge.backend._clients == {}  # type: ignore[attr-defined]


# ---- the registry --------------------------------------------------------------------------------


def test_unknown_names_and_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    import copy

    from datadojo.reward import registry

    # a registration of this test's own must not outlive it (other tests list the known names)
    monkeypatch.setattr(registry, "_REWARDS", copy.deepcopy(registry._REWARDS))
    monkeypatch.setattr(registry, "_BUILT", {})
    with pytest.raises(UnknownNameError, match="unknown reward 'nope'; known: benchmark, datamind"):
        spec_for_cli("nope")
    with pytest.raises(UnknownNameError):
        reward_for_task(Task(id="x", question="?"), RewardSpec(name="nope"))
    with pytest.raises(ValueError, match="already registered"):
        register_reward("datamind", lambda spec: None)  # type: ignore[arg-type, return-value]

    class Constant:
        name = "constant"

        async def score(self, pairs):  # type: ignore[no-untyped-def]
            return [RewardResult(0.5, False, {"constant": 0.5}, reward=self.name) for _ in pairs]

    register_reward("constant", lambda spec: Constant(), replace=True)
    task = Task(id="c", question="?", answer=1)
    (r,) = score_pairs_sync([(task, _traj("c", "1"))], RewardSpec(name="constant"))
    assert r.total == 0.5 and "constant" in reward_names()


def test_pairs_must_match_and_sync_refuses_a_running_loop() -> None:
    import asyncio

    with pytest.raises(ValueError, match="scored against task"):
        score_pairs_sync([(Task(id="a", question="?", answer=1), _traj("b", "1"))])

    async def inside() -> None:
        score_pairs_sync([])

    with pytest.raises(RuntimeError, match="await score_pairs"):
        asyncio.run(inside())


def test_eval_scorer_decides_its_own_tasks_only() -> None:
    """eval passes its scorer (RewardSpec.benchmark): it decides its own tasks and tasks of no registered
    benchmark, never a task another benchmark owns (that one's reward must not depend on the consumer)."""
    from datadojo.bench.base import ItemScore

    class Lenient:  # an eval scorer that calls everything right (as a judge's verdicts might)
        name = "lenient"

        def score(self, task: Task, prediction: str | None) -> ItemScore:
            return ItemScore(1.0, True, prediction, "lenient", "EM")

    spec = RewardSpec(benchmark=Lenient())
    own = Task(id="o", question="q", answer=240, source="lenient")
    unregistered = Task(id="u", question="q", answer=240, source="my-sailor-file")
    dabench = Task(id="d", question="q", answer={"mean": "1.50"}, answer_kind="dabench", source="dabench")
    r_own, r_unreg, r_dab = score_pairs_sync(
        [(own, _traj("o", "17")), (unregistered, _traj("u", "17")), (dabench, _traj("d", "@mean[1.51]"))],
        spec,
    )
    assert (r_own.correct, r_unreg.correct, r_dab.correct) == (True, True, False)

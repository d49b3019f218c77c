"""The reference query-by-output solver: a real search, scored through the reward path (and the sandbox)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from datadojo.jsonl import read_tasks
from datadojo.reward.envlunch import score_trajectories, task_info
from datadojo.reward.programs import InProcessExecutor, SandboxExecutor
from datadojo.synth.envlunch.build import BuildConfig, build_tasks, load_environments
from datadojo.synth.envlunch.solver import SolverConfig, solve, solver_trajectory

REPO = Path(__file__).resolve().parents[2]
SHOP = REPO / "examples" / "data" / "shop.sqlite"


@pytest.fixture(scope="module")
def solved(tmp_path_factory: pytest.TempPathFactory, shared_data: Callable[..., Path]):
    spider = shared_data("spider", "database")
    names = ["wine_1", "inn_1", "dorm_1", "activity_1", "college_3"]
    envs = load_environments([spider / n / f"{n}.sqlite" for n in names] + [SHOP])
    out = tmp_path_factory.mktemp("solver") / "tasks.jsonl"
    build_tasks(envs, out, BuildConfig(n=40, seed=1, workers=2))
    infos = [task_info(t, out) for t in read_tasks(out)]
    # a candidate budget, no wall clock: the same programs are found on a loaded machine
    results = solve(infos, SolverConfig(max_candidates=60, time_limit_s=None))
    trajs = [solver_trajectory(i, r) for i, r in zip(infos, results, strict=True)]
    return infos, results, trajs


def test_solver_finds_programs_and_reports_a_rate_per_level(solved) -> None:
    infos, results, trajs = solved
    records = score_trajectories({i.task.id: i for i in infos}, trajs, InProcessExecutor())
    per_level: dict[tuple[str, int], list[bool]] = defaultdict(list)
    for info, rec in zip(infos, records, strict=True):
        per_level[(info.backend, info.level)].append(rec.solved)
    rates = {k: sum(v) / len(v) for k, v in per_level.items()}
    assert all(0.0 <= r <= 1.0 for r in rates.values())
    assert sum(rec.solved for rec in records) >= 6  # a real baseline, not a stub
    for res, traj, rec in zip(results, trajs, records, strict=True):
        if res.program is None:
            assert traj.stop_reason == "max_turns" and rec.reward == 0.0
        else:
            # its trajectory: one turn per action, then the answer; t = number of actions
            assert traj.turns[-1].action.kind == "answer" and rec.t == len(traj.turns) - 1
            assert res.candidates >= 1
        if rec.solved:
            assert rec.reward > 1.0  # brevity bonus: t < t_max
    # a program that matches o* on E can still fail a copy (an instance-equivalent program)
    found = sum(r.program is not None for r in results)
    assert found >= sum(rec.solved for rec in records)


def test_solver_submissions_go_through_the_sandbox(solved) -> None:
    infos, results, trajs = solved
    picked = [(i, t) for i, r, t in zip(infos, results, trajs, strict=True) if r.program is not None][:3]
    assert picked
    here = score_trajectories({i.task.id: i for i, _ in picked}, [t for _, t in picked], InProcessExecutor())
    there = score_trajectories({i.task.id: i for i, _ in picked}, [t for _, t in picked], SandboxExecutor())
    assert [r.reward for r in here] == [r.reward for r in there]


def test_candidate_budget_is_deterministic_and_reported(tmp_path: Path) -> None:
    out = tmp_path / "tasks.jsonl"
    build_tasks(load_environments([SHOP]), out, BuildConfig(n=6, seed=3, workers=1))
    infos = [task_info(t, out) for t in read_tasks(out)]
    config = SolverConfig(max_candidates=8, time_limit_s=None)
    first, second = solve(infos, config), solve(infos, config)
    # no wall clock in the loop: the same draws, the same programs, whatever the machine's load
    assert [(r.program, r.candidates) for r in first] == [(r.program, r.candidates) for r in second]
    assert all(r.candidates <= 8 and r.budget == "8 candidates" for r in first)
    for info, res in zip(infos, first, strict=True):
        traj = solver_trajectory(info, res)
        if res.program is None:
            assert traj.extra["outcome"] == "no program found within the budget (8 candidates)"
        else:
            assert "outcome" not in traj.extra
    assert SolverConfig(time_limit_s=2.0).budget_text() == "400 candidates / 2 s"
    for bad in ({"max_candidates": 0}, {"time_limit_s": 0.0}, {"time_limit_s": -1.0}):
        with pytest.raises(ValueError):
            SolverConfig(**bad)  # type: ignore[arg-type]

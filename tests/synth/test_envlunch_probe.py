"""The §6 uncertainty-reduction probe: 64 hidden worlds, 6 domains × 25 tasks, log2(#consistent) per action."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from datadojo.synth.envlunch import probe as P
from datadojo.types import Action, Observation, Trajectory, Turn


def test_probe_tasks_and_worlds(tmp_path: Path) -> None:
    tasks = P.make_probe_tasks(tmp_path / "probe.jsonl", seed=0, per_domain=25)
    assert len(tasks) == 150 and len(P.DOMAINS) == 6 and len(P.WORLDS) == 64
    assert len({t.id for t in tasks}) == 150
    for task in tasks[::37]:
        meta = task.extra["probe"]
        assert tuple(meta["world"]) != (0, 0, 0)  # never the documented version
        assert "legacy codes" in (task.description or "") and meta["town"] in task.question
        frames = {w: P.probe_frame(meta, w) for w in P.WORLDS}
        # same rows and amounts everywhere; only the target town's strings differ
        base = frames[(0, 0, 0)]
        assert all((f["amount"] == base["amount"]).all() for f in frames.values())
        assert len({f.to_csv() for f in frames.values()}) == 64
        # the first rows shown are never the target town's
        assert not any(P._is_target(v, meta["town"]) for v in base["town"].head(5))
        assert Path(tmp_path / task.files[0].path).is_file()
    for town in P.TOWNS:
        assert len(set(P._town_encodings(town))) == 4
    all_codes = [e for town in P.TOWNS for e in P._town_encodings(town)]
    assert len(set(all_codes)) == len(all_codes)  # no encoding names two towns


def _trajectory(task, actions: list[str]) -> Trajectory:
    """A trajectory whose observations are what the true world prints (as the rollout runner records)."""
    meta = task.extra["probe"]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "true"
        d.mkdir()
        P.probe_frame(meta, tuple(meta["world"])).to_csv(d / "sales.csv", index=False)
        outs = P._replay(tmp, ["true"], actions, 2048, in_process=True)["true"]
    turns = [
        Turn(
            raw="",
            action=Action(kind="code", text=a),
            observation=Observation(text=o, status="ok" if ok else "error"),
        )
        for a, (ok, o) in zip(actions, outs, strict=True)
    ]
    return Trajectory(task_id=task.id, turns=turns, stop_reason="max_turns")


def test_uncertainty_worked_example(tmp_path: Path) -> None:
    """Reading the file tells nothing (6 bits); listing towns fixes the town encoding (4 bits left), then
    statuses (2), then products (0). An action that fails the same way everywhere tells nothing."""
    task = P.make_probe_tasks(tmp_path / "p.jsonl", per_domain=1)[0]
    actions = [
        "import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(df.shape)",
        "print(sorted(df['town'].unique()))",
        "df['no_such_column']",
        "print(sorted(df['status'].unique()))",
        "sorted(df['product'].unique())",
    ]
    curve = P.uncertainty_curves({task.id: task}, [_trajectory(task, actions)], in_process=True)[0]
    assert curve.bits == [6.0, 4.0, 4.0, 2.0, 0.0]
    assert curve.unmatched == 0
    w = task.extra["probe"]["world"]
    assert curve.consistent[-1] == [f"w{w[0]}{w[1]}{w[2]}"]


def test_unreproducible_observation_filters_nothing(tmp_path: Path) -> None:
    task = P.make_probe_tasks(tmp_path / "p.jsonl", per_domain=1)[0]
    traj = _trajectory(
        task, ["import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(sorted(df['town'].unique()))"]
    )
    traj.turns[0].observation = Observation(text="something the replay cannot print", status="ok")
    curve = P.uncertainty_curves({task.id: task}, [traj], in_process=True)[0]
    assert curve.bits == [6.0] and curve.unmatched == 1
    with pytest.raises(ValueError, match="not a probe task"):
        P.uncertainty_curves({}, [traj], in_process=True)


def test_probe_replay_in_the_sandbox_matches(tmp_path: Path) -> None:
    task = P.make_probe_tasks(tmp_path / "p.jsonl", per_domain=1)[3]
    actions = ["import pandas as pd\ndf = pd.read_csv('sales.csv')", "print(sorted(df['status'].unique()))"]
    traj = _trajectory(task, actions)
    here = P.uncertainty_curves({task.id: task}, [traj], in_process=True)[0]
    there = P.uncertainty_curves({task.id: task}, [traj])[0]
    assert here.bits == there.bits == [6.0, 4.0]

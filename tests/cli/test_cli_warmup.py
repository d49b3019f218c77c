"""``datadojo warmup``: build → solve → score → audit on the example data, the §6 probe, and errors."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.jsonl import read_tasks, read_trajectories, write_jsonl_atomic
from datadojo.types import Action, Observation, Trajectory, Turn

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "examples" / "data"
runner = CliRunner()


def test_build_solve_score_audit(tmp_path: Path) -> None:
    out = tmp_path / "tasks.jsonl"
    res = runner.invoke(
        app,
        [
            "warmup",
            "build",
            str(DATA / "shop.sqlite"),
            str(DATA / "sales.csv"),
            "--n",
            "16",
            "--out",
            str(out),
            "--workers",
            "1",
            "--seed",
            "4",
            "--solve-sample",
            "4",
            "--solve-candidates",
            "30",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "Tasks by backend and level" in res.output and "Tasks by operator" in res.output
    assert "16 tasks" in res.output
    # issue 39: the summary says how the questions were kept apart and what the solver made of a sample
    assert "visible questions: every task asks its own;" in res.output
    assert "a seeded sample of 4 of 16 tasks, 30 candidates each" in res.output
    funnel = json.loads((tmp_path / "tasks.funnel.json").read_text())
    assert funnel["solver"]["tried"] == 4 and f"solved {funnel['solver']['solved']}/4 tasks" in res.output
    tasks = list(read_tasks(out))
    assert len(tasks) == 16 and (tmp_path / "tasks.copies").is_dir()

    trajs = tmp_path / "traj.jsonl"
    # a candidate budget and no wall clock: the same trajectories on a busy machine
    solve = ["warmup", "solve", str(out), "--out", str(trajs), "--time-limit", "0", "--max-candidates", "5"]
    res = runner.invoke(app, solve)
    assert res.exit_code == 0, res.output
    assert len(list(read_trajectories(trajs))) == 16

    scored = tmp_path / "scored.jsonl"
    report = tmp_path / "report"
    res = runner.invoke(
        app,
        [
            "warmup",
            "score",
            str(out),
            str(trajs),
            "--in-process",
            "--out",
            str(scored),
            "--report",
            str(report),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "EnvLunch rewards" in res.output
    records = list(read_trajectories(scored))
    for t in records:
        assert "envlunch" in t.rewards and t.extra["envlunch"]["task_id"] == t.task_id
    # the run folder renders like an evaluation run: pass@1 = share of tasks solved in every copy
    summary = json.loads((report / "summary.json").read_text())
    solved = sum(t.extra["envlunch"]["solved"] for t in records)
    assert summary["n_tasks"] == 16 and abs(summary["metrics"]["pass@1"] - solved / 16) < 1e-9
    html = (report / "report.html").read_text()
    assert (
        "envlunch" in html
        and len([ln for ln in (report / "scores.jsonl").read_text().splitlines() if ln]) == 16
    )
    # unsolved tasks say what happened; settings rows show what applies (t_max, the trajectories' dialect)
    unsolved = [t for t in records if t.final_answer is None]
    assert unsolved, "5 candidates should leave some task without a program"
    said = "no program found within the budget (5 candidates) · 0 turn(s)"
    assert html.count(said) == len(unsolved) and "max_turns · 0 turn(s)" not in html
    assert "<td>turn budget</td><td>16 (sql) · 48 (pandas)</td>" in html
    assert "<td>dialect</td><td>datamind</td>" in html
    md = (report / "report.md").read_text()
    assert "turn budget: 16 (sql) · 48 (pandas); dialect: datamind" in md

    res = runner.invoke(app, ["warmup", "audit", str(out)])
    assert res.exit_code == 0, res.output
    assert "no retained task rewards the constant answer" in res.output


def test_score_rejects_a_trajectory_of_an_unknown_task(tmp_path: Path) -> None:
    out = tmp_path / "tasks.jsonl"
    assert (
        runner.invoke(
            app,
            [
                "warmup",
                "build",
                str(DATA / "shop.sqlite"),
                "--n",
                "2",
                "--out",
                str(out),
                "--workers",
                "1",
                "--solve-sample",
                "0",
            ],
        ).exit_code
        == 0
    )
    bad = tmp_path / "bad.jsonl"
    write_jsonl_atomic(bad, [Trajectory(task_id="nope", stop_reason="answer", final_answer="SELECT 1")])
    res = runner.invoke(app, ["warmup", "score", str(out), str(bad), "--in-process"])
    assert res.exit_code != 0 and "nope" in res.output
    res = runner.invoke(app, ["warmup", "audit", str(tmp_path / "missing.jsonl")])
    assert res.exit_code != 0 and "no such task file" in res.output


def test_build_with_no_usable_source_fails_clearly(tmp_path: Path) -> None:
    (tmp_path / "empty.csv").write_text("a,b\n")
    res = runner.invoke(
        app, ["warmup", "build", str(tmp_path / "empty.csv"), "--n", "3", "--out", str(tmp_path / "t.jsonl")]
    )
    assert res.exit_code != 0


def test_probe_commands(tmp_path: Path) -> None:
    probe = tmp_path / "probe.jsonl"
    res = runner.invoke(app, ["warmup", "probe-tasks", "--out", str(probe), "--per-domain", "1"])
    assert res.exit_code == 0, res.output
    task = next(iter(read_tasks(probe)))
    act = "import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(sorted(df['status'].unique()))"
    # the observation as the true world prints it (statuses of the 20 towns, in the hidden encoding)
    from datadojo.synth.envlunch.probe import probe_frame

    frame = probe_frame(task.extra["probe"], tuple(task.extra["probe"]["world"]))
    text = str(sorted(frame["status"].unique())) + "\n"
    turn = Turn(raw="", action=Action(kind="code", text=act), observation=Observation(text=text))
    trajs = tmp_path / "t.jsonl"
    write_jsonl_atomic(trajs, [Trajectory(task_id=task.id, turns=[turn], stop_reason="max_turns")])
    curves = tmp_path / "curves.jsonl"
    res = runner.invoke(
        app, ["warmup", "probe", str(probe), str(trajs), "--in-process", "--out", str(curves)]
    )
    assert res.exit_code == 0, res.output
    assert "Remaining uncertainty" in res.output
    rec = json.loads(curves.read_text().splitlines()[0])
    assert rec["bits"] == [4.0] and rec["unmatched"] == 0

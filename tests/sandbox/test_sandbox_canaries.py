"""Answers out of the agent's reach (issue 27, part 3), the level in every record, and RL's refusal.

A rollout whose (scripted) model reads, through computed paths, the reference answers planted beside the
task file, a token in ``$HOME`` and the run folder's config: at the bubblewrap and Landlock levels it
reads nothing; at reduced isolation it reads them (which is why ``train rl`` refuses that level unless told).
The folders are readable by every user, so that file permissions (cells run under a uid of their own) do
not stop the reads: what contains them is the level alone.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.agent import run_rollouts
from datadojo.cli.app import app
from datadojo.eval.report import render_markdown
from datadojo.jsonl import read_trajectories
from datadojo.llm import load_backend
from datadojo.sandbox import PolicyConfig, SandboxConfig
from datadojo.sandbox import isolation as isolation_mod
from datadojo.sandbox.result import isolation_counts, reduced_isolation_banner
from datadojo.testing.sandbox import canary_reader_model
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import DataFile, Task

pytestmark = pytest.mark.timeout(180)

HAS_BWRAP = shutil.which("bwrap") is not None and isolation_mod.bwrap_available()[0]
LANDLOCK, WHY_NOT = isolation_mod.landlock_available()
LEVELS = [
    pytest.param("bwrap", marks=pytest.mark.skipif(not HAS_BWRAP, reason="bwrap unusable")),
    pytest.param("landlock", marks=pytest.mark.skipif(not LANDLOCK, reason=f"no Landlock here: {WHY_NOT}")),
    "none",
    # a pool's fork server under bubblewrap (one bwrap for the pool, Landlock per cell)
    pytest.param(
        "bwrap+fork",
        marks=pytest.mark.skipif(not (HAS_BWRAP and LANDLOCK), reason="needs bwrap and Landlock"),
    ),
]


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder every user may read (pytest's tmp_path is below a 0700 folder)."""
    folder = Path(tempfile.mkdtemp(prefix="datadojo-canaries-"))
    os.chmod(folder, 0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("iso", LEVELS)
async def test_rollout_cannot_read_the_answers(
    open_folder: Path, iso: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp_path = open_folder
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (home / ".netrc").write_text("HOME-CANARY-7d1f\n")
    taskset = tmp_path / "taskset"
    taskset.mkdir()
    data = taskset / "sales.csv"
    data.write_text("region,units\nnorth,3\n")
    answers = taskset / "answers.jsonl"
    answers.write_text("TASK-CANARY-93ab\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.toml").write_text("RUN-CANARY-55c0\n")
    tasks_file = taskset / "tasks.jsonl"
    task = Task(id="t1", question="What is the answer?", files=[DataFile.from_path(data)])
    tasks_file.write_text(json.dumps(task.to_dict()) + "\n")  # the task file the answers sit beside
    targets = [str(answers), str(home / ".netrc"), str(run / "config.toml")]
    base, fork = iso.removesuffix("+fork"), iso.endswith("+fork")
    cfg = SandboxConfig(
        isolation=base,  # type: ignore[arg-type]
        mode="persistent",
        preload=(),
        policy=PolicyConfig(enabled=False),
        fork_server=fork,
    )
    with ScriptedLLMServer(canary_reader_model(targets)) as server:
        backend = load_backend(f"openai:fake@{server.base_url}")
        summary = await run_rollouts(
            [task], backend, run / "trajectories.jsonl", sandbox_config=cfg, concurrency=1
        )
        await backend.aclose()
    (traj,) = list(read_trajectories(run / "trajectories.jsonl"))
    level = "reduced" if base == "none" else base
    # The level is in every observation and in the run summary.
    observed = [t.observation for t in traj.turns if t.observation is not None]
    assert observed and all(o.isolation == level for o in observed)
    assert summary.to_dict()["isolation"] == {level: len(observed)} == isolation_counts([traj])
    if level == "reduced":  # the reason RL refuses this level: the answers are read
        assert "TASK-CANARY-93ab" in (traj.final_answer or ""), traj.turns[0].observation.text
        assert reduced_isolation_banner(summary.to_dict()["isolation"])
    else:
        assert traj.final_answer == "nothing", traj.turns[0].observation.text
        assert reduced_isolation_banner(summary.to_dict()["isolation"]) is None


def test_report_banner_for_reduced_isolation() -> None:
    summary = {"benchmark": "b", "model": "m", "metrics": {}, "isolation": {"reduced": 3}}
    assert "reduced sandbox isolation" in render_markdown(summary, [])
    assert "reduced sandbox isolation" not in render_markdown({**summary, "isolation": {"landlock": 3}}, [])


def test_train_rl_refuses_reduced_isolation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the command looks for the training extra first (scripts/test_unprivileged.sh installs only [dev])
    pytest.importorskip("torch", reason="datadojo train rl needs the [train] extra before it gets this far")
    monkeypatch.setattr(isolation_mod, "bwrap_available", lambda: (False, "bwrap failed here: stand-in"))
    monkeypatch.setattr(isolation_mod, "landlock_available", lambda: (False, "the kernel has no Landlock"))
    csv = tmp_path / "sales.csv"
    csv.write_text("a\n1\n")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        json.dumps({"id": "t1", "question": "q", "answer": "1", "files": [{"path": str(csv), "kind": "csv"}]})
        + "\n"
    )
    model = tmp_path / "model"  # a folder: the refusal comes before the model is loaded
    model.mkdir()
    args = [
        "train",
        "rl",
        "--tasks",
        str(tasks),
        "--model",
        str(model),
        "--out",
        str(tmp_path / "o"),
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 4, res.output
    assert (
        "refuses to run at reduced sandbox isolation" in res.output
        and "--allow-reduced-isolation" in res.output
    )
    res = CliRunner().invoke(app, [*args, "--allow-reduced-isolation"])
    assert "refuses to run at reduced" not in res.output

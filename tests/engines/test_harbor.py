"""Harbor (pinned): the folders ``datadojo export harbor`` writes, read by Harbor's own task loader.

* a pandas task written here and the fixtures' Spider dev tasks are exported; Harbor's ``Task`` loads every
  folder (its config model, its instruction, the Dockerfile environment, ``tests/test.sh``, the solution)
  and its ``is_valid_dir`` accepts it;
* each folder's verifier (``tests/test.sh``) runs on the host, without Docker, after the reference solution
  (``solution/solve.sh``): the reward file is one Harbor's ``VerifierResult`` accepts, and its reward equals
  the registry's reward of DataDojo's own episode with that answer — for Spider, the oracle agent's
  trajectory from ``datadojo eval spider --agent oracle`` (the official execution rule on the database);
* the parity fixture (``datadojo.testing.parity``): each case's answer (what an agent would write to the
  answer file) through the exported verifier gives the papers' reward by hand, and the rows join the parity
  table as the ``harbor`` consumer; the malformed cases and the EnvLunch task are declared not covered, with
  the reason (docs/environment.md, "Harbor": what the adapter could not carry over);
* with a Docker daemon, ``harbor run --agent oracle`` builds the images and runs the verifier in them (the
  CI machine has the docker client but no daemon: the test says so and skips that part).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _fixtures import FX
from harbor.models.task.task import Task as HarborTask
from harbor.models.verifier.result import VerifierResult

from datadojo.integrations.harbor.export import export_harbor
from datadojo.jsonl import read_tasks, read_trajectories
from datadojo.reward.registry import score_pairs_sync
from datadojo.types import DataFile, Task

ROOT = Path(__file__).resolve().parents[2]
SALES = ROOT / "examples" / "data" / "sales.csv"


def _tasks() -> list[Task]:
    sales = Task(
        id="sales/x6",
        question="How many rows does sales.csv have, times six?",
        files=[DataFile.from_path(SALES)],
        answer=1440,
        answer_kind="number",
    )
    return [sales, *read_tasks(FX / "spider" / "tasks.jsonl")]


def _verify(folder: Path, tmp: Path, answer: str | None = None) -> dict[str, float]:
    """The verifier as Harbor runs it in the container, here on the host: after the reference solution, or
    on ``answer`` written to the answer file."""
    root = tmp / folder.name / "app"
    root.mkdir(parents=True)
    os.symlink(folder / "environment" / "data", root / "data")
    logs = tmp / folder.name / "logs"
    env = {
        **os.environ,
        "DATADOJO_TASK_ROOT": str(root),
        "DATADOJO_VERIFIER_LOGS": str(logs),
        "DATADOJO_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT / "src"),
    }
    scripts = ["solution/solve.sh", "tests/test.sh"]
    if answer is not None:
        (root / "answer.txt").write_text(answer, encoding="utf-8")
        scripts = ["tests/test.sh"]
    for script in scripts:
        proc = subprocess.run(
            ["bash", str(folder / script)], env=env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, (script, proc.stderr[-2000:])
    return json.loads((logs / "reward.json").read_text())


def test_harbor_loads_the_exported_folders_and_their_verifier_gives_datadojos_reward(tmp_path: Path) -> None:
    tasks = _tasks()
    report = export_harbor(tasks, tmp_path / "harbor")
    assert len(report.folders) == len(tasks) and not report.without_solution
    oracle = {t.task_id: t for t in read_trajectories(FX / "spider" / "run" / "trajectories.jsonl")}
    by_id = {t.id: t for t in tasks}
    for task, folder in zip(tasks, report.folders, strict=True):
        assert HarborTask.is_valid_dir(folder), folder
        loaded = HarborTask(folder)
        assert loaded.name == folder.name
        assert task.question.strip() in loaded.instruction
        assert loaded.config.verifier.timeout_sec == 600.0 and loaded.config.agent.timeout_sec == 1800.0
        assert loaded.config.metadata["datadojo_task_id"] == task.id
        assert loaded.paths.solve_path.is_file() and loaded.paths.environment_dir.is_dir()
        assert (loaded.paths.environment_dir / "Dockerfile").is_file()
        rewards = _verify(folder, tmp_path / "runs")
        assert VerifierResult(rewards=rewards).rewards == rewards
        if task.id in oracle:  # Spider: the oracle episode's own reward (registry, official rule)
            [expected] = score_pairs_sync([(by_id[task.id], oracle[task.id])])
            assert rewards["reward"] == pytest.approx(expected.total, abs=1e-9), task.id
            assert rewards["correct"] == float(expected.correct)
            for part, value in expected.parts.items():
                assert rewards[part] == pytest.approx(value, abs=1e-9), (task.id, part)
        else:  # the gold answer of a number task, short: DataMind's full reward (§4)
            assert rewards["reward"] == pytest.approx(1.0, abs=1e-12)
    # the gold SQL of every Spider task passed the official rule: the oracle episodes were right too
    assert sum(1 for t in tasks if t.id in oracle) >= 1


def test_parity_rows_through_the_exported_verifier(tmp_path: Path) -> None:
    from datadojo.protocol import get_dialect
    from datadojo.testing.parity import parity_row, write_parity_fixture, write_rows

    fixture = write_parity_fixture(tmp_path / "parity")
    dialect = get_dialect("datamind")
    exportable = [t for t in fixture.tasks if t.answer_kind != "envlunch"]
    folders = dict(
        zip([t.id for t in exportable], export_harbor(exportable, tmp_path / "harbor").folders, strict=True)
    )
    rows, not_covered = {}, {}
    for task in fixture.tasks:
        key = f"{task.id}/0"
        if task.answer_kind == "envlunch":
            not_covered[key] = (
                "export harbor refuses EnvLunch tasks (their counterfactual copies are not carried)"
            )
            continue
        if task.id.endswith(".malformed"):
            not_covered[key] = (
                "a Harbor agent leaves only its answer: the verifier cannot see a malformed trajectory (-0.1)"
            )
            continue
        answer = dialect.extract_answer(fixture.replies[task.id][-1])  # what the agent writes to answer.txt
        rewards = _verify(folders[task.id], tmp_path / "runs", answer)
        assert rewards["reward"] == pytest.approx(fixture.expected_total(task.id), abs=1e-12), task.id
        rows[key] = parity_row(rewards["reward"], rewards)
    assert len(rows) == 12 and len(not_covered) == 8
    write_rows(
        os.environ.get("DATADOJO_PARITY_DIR") or tmp_path / "table", "harbor", rows, not_covered=not_covered
    )


def test_harbor_runs_the_oracle_in_docker_where_there_is_a_daemon(tmp_path: Path) -> None:
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True, timeout=60).returncode != 0:
        pytest.skip("no Docker daemon here (the CI machine has the docker client only): harbor run not tried")
    [folder] = export_harbor(_tasks()[:1], tmp_path / "harbor").folders
    harbor = str(Path(sys.executable).with_name("harbor"))
    proc = subprocess.run(
        [harbor, "run", "-p", str(folder), "-a", "oracle", "-o", str(tmp_path / "jobs")],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = list((tmp_path / "jobs").rglob("reward.json"))
    assert results and json.loads(results[0].read_text())["reward"] == pytest.approx(1.0)

"""``datadojo export harbor``: one Harbor task folder per task, whose tests compute DataDojo's reward.

The folders are checked here as files (Harbor's own loader reads them in the engine job,
tests/engines/test_harbor.py, where a Python >= 3.12 exists), and the exported ``tests/test.sh`` is run
without Docker, on the host, against the reference solution and against scripted answers: the reward it
writes must be the registry's reward of a DataDojo episode ending with the same answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.env import run_agent
from datadojo.errors import DataDojoError
from datadojo.integrations.harbor.export import export_harbor, folder_name
from datadojo.reward.registry import score_pairs
from datadojo.sandbox import Sandbox
from datadojo.testing.env import ScriptedChat
from datadojo.types import DataFile, Task

ROOT = Path(__file__).resolve().parents[2]
SALES = ROOT / "examples" / "data" / "sales.csv"
runner = CliRunner()


def _sales(task_id: str = "sales/rows x6", answer: object = 1440) -> Task:
    return Task(
        id=task_id,
        question="How many rows does sales.csv have, times six?",
        files=[DataFile.from_path(SALES)],
        answer=answer,
        answer_kind="number" if answer is not None else None,
    )


def _run_test_sh(folder: Path, answer: str | None, tmp: Path) -> dict[str, float]:
    """Run the folder's tests/test.sh as Harbor would, but on the host: the answer file and data in ``root``."""
    root = tmp / "app"
    root.mkdir(parents=True)
    os.symlink(folder / "environment" / "data", root / "data")
    if answer is not None:
        (root / "answer.txt").write_text(answer, encoding="utf-8")
    logs = tmp / "logs"
    env = {
        **os.environ,
        "DATADOJO_TASK_ROOT": str(root),
        "DATADOJO_VERIFIER_LOGS": str(logs),
        "DATADOJO_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT / "src"),
    }
    proc = subprocess.run(
        ["bash", str(folder / "tests" / "test.sh")], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((logs / "reward.json").read_text())


def test_folders_have_harbors_layout(tmp_path: Path) -> None:
    tasks = [_sales(), _sales("sales again")]
    report = export_harbor(tasks, tmp_path / "out")
    assert [f.name for f in report.folders] == ["sales-rows-x6", "sales-again"]
    assert report.without_solution == []
    folder = report.folders[0]
    instruction = (folder / "instruction.md").read_text()
    assert tasks[0].question in instruction
    assert "/app/data/sales.csv" in instruction and "/app/answer.txt" in instruction
    config = tomllib.loads((folder / "task.toml").read_text())
    assert config["metadata"]["datadojo_task_id"] == "sales/rows x6"
    assert config["verifier"]["timeout_sec"] == 600.0 and config["agent"]["timeout_sec"] == 1800.0
    assert (folder / "environment" / "data" / "sales.csv").read_bytes() == SALES.read_bytes()
    dockerfile = (folder / "environment" / "Dockerfile").read_text()
    assert (
        "COPY data/ /app/data/" in dockerfile and "pip install --no-cache-dir /tmp/datadojo-src" in dockerfile
    )
    vendored = folder / "environment" / "datadojo-src"
    assert (vendored / "datadojo" / "integrations" / "harbor" / "verify.py").is_file()
    assert "dependencies" in tomllib.loads((vendored / "pyproject.toml").read_text())["project"]
    for script in ("tests/test.sh", "solution/solve.sh"):
        assert os.access(folder / script, os.X_OK), script
    spec = json.loads((folder / "tests" / "task.json").read_text())
    assert spec["task"]["id"] == "sales/rows x6" and spec["dialect"] == "datamind"


def test_tasks_the_verifier_cannot_reward_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    envlunch = _sales("warm", answer=None).model_copy(update={"answer_kind": "envlunch"})
    open_question = _sales("open", answer=None)
    with pytest.raises(DataDojoError) as err:
        export_harbor([_sales(), envlunch, open_question], tmp_path / "out")
    message = str(err.value)
    assert "2 task(s)" in message and "warm: reward envlunch" in message and "open: no answer" in message
    with pytest.raises(DataDojoError, match="reward judge"):
        export_harbor([_sales()], tmp_path / "out", reward="judge")
    assert not (tmp_path / "out").exists()


def test_wheel_or_requirement_replaces_the_vendored_copy(tmp_path: Path) -> None:
    wheel = tmp_path / "datadojo-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    [folder] = export_harbor([_sales()], tmp_path / "a", install=str(wheel)).folders
    assert (folder / "environment" / wheel.name).read_bytes() == b"PK"
    assert f"COPY {wheel.name} /tmp/{wheel.name}" in (folder / "environment" / "Dockerfile").read_text()
    assert not (folder / "environment" / "datadojo-src").exists()
    [folder] = export_harbor(
        [_sales()], tmp_path / "b", install="datadojo @ git+https://example.org/dd"
    ).folders
    assert (
        "pip install --no-cache-dir 'datadojo @ git+https://example.org/dd'"
        in (folder / "environment" / "Dockerfile").read_text()
    )
    with pytest.raises(DataDojoError, match="no such wheel"):
        export_harbor([_sales()], tmp_path / "c", install=str(tmp_path / "missing.whl"))


def test_names_are_safe_and_unique_and_existing_folders_are_not_overwritten(tmp_path: Path) -> None:
    taken: set[str] = set()
    assert [folder_name(i, taken) for i in ("a/b", "A b", "../..", "")] == ["a-b", "a-b-2", "task", "task-2"]
    export_harbor([_sales()], tmp_path)
    with pytest.raises(DataDojoError, match="exists"):
        export_harbor([_sales()], tmp_path)


def test_the_solution_script_keeps_an_answer_holding_its_delimiter(tmp_path: Path) -> None:
    answer = "line one\nDATADOJO_ANSWER\n$HOME `x`"
    [folder] = export_harbor([_sales(answer=answer)], tmp_path / "out").folders
    root = tmp_path / "app"
    root.mkdir()
    env = {**os.environ, "DATADOJO_TASK_ROOT": str(root)}
    subprocess.run(["bash", str(folder / "solution" / "solve.sh")], env=env, check=True, timeout=60)
    assert (root / "answer.txt").read_text() == answer + "\n"


def test_cli_exports_and_reports(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(_sales().to_dict()) + "\n")
    res = runner.invoke(app, ["export", "harbor", str(tasks), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["tasks"] == 1
    assert (tmp_path / "out" / "sales-rows-x6" / "tests" / "test.sh").is_file()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    res = runner.invoke(app, ["export", "harbor", str(bad), "--out", str(tmp_path / "out2")])
    assert res.exit_code != 0 and "bad.jsonl" in res.output


CORRECT = [
    "<think>Count.</think>\n<code>\nimport pandas as pd\nn = len(pd.read_csv('sales.csv'))\nprint(n)\n</code>",
    "<think>Times six.</think>\n<answer>1440</answer>",
]
PADDED = [
    "<think>Explain at length.</think>\n<answer>1440 "
    + "because the table has that many rows " * 80
    + "</answer>"
]
WRONG = ["<think>Guess.</think>\n<answer>7</answer>"]
MALFORMED_WRONG = ["the answer is 7", "<think>Guess.</think>\n<answer>7</answer>"]


async def _datadojo_episode(task: Task, replies: list[str]) -> tuple[str | None, dict[str, float]]:
    """A real DataDojo episode (sandbox included) on scripted replies: its answer and registry reward."""
    async with await Sandbox.create(task.files) as sandbox:
        traj = await run_agent(task, ScriptedChat(replies), sandbox)
    [result] = await score_pairs([(task, traj)])
    return traj.final_answer, {"reward": result.total, "correct": float(result.correct), **result.parts}


@pytest.mark.parametrize("replies", [CORRECT, PADDED, WRONG], ids=["correct", "padded", "wrong"])
async def test_the_exported_verifier_gives_datadojos_reward_for_the_same_answer(
    replies: list[str], tmp_path: Path
) -> None:
    task = _sales()
    answer, expected = await _datadojo_episode(task, replies)
    [folder] = export_harbor([task], tmp_path / "out").folders
    got = _run_test_sh(folder, answer, tmp_path)
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=1e-9), key


async def test_what_harbor_cannot_carry_over_the_malformed_episode_and_no_answer(tmp_path: Path) -> None:
    task = _sales()
    answer, expected = await _datadojo_episode(task, MALFORMED_WRONG)
    assert expected["reward"] == pytest.approx(-0.1)  # DataMind §4: wrong and malformed
    [folder] = export_harbor([task], tmp_path / "out").folders
    # the verifier sees the answer only, given in one well-formed turn: wrong is 0, not -0.1
    assert _run_test_sh(folder, answer, tmp_path / "a")["reward"] == pytest.approx(0.0, abs=1e-12)
    silent = _run_test_sh(folder, None, tmp_path / "b")  # the agent wrote no answer file
    assert silent["correct"] == 0.0 and silent["answer"] == 0.0


def test_the_reference_solution_earns_the_full_reward(tmp_path: Path) -> None:
    [folder] = export_harbor([_sales()], tmp_path / "out").folders
    root = tmp_path / "app"
    root.mkdir()
    env = {**os.environ, "DATADOJO_TASK_ROOT": str(root)}
    subprocess.run(["bash", str(folder / "solution" / "solve.sh")], env=env, check=True, timeout=60)
    rewards = _run_test_sh(folder, (root / "answer.txt").read_text(), tmp_path / "v")
    assert rewards["reward"] == pytest.approx(1.0, abs=1e-12) and rewards["correct"] == 1.0

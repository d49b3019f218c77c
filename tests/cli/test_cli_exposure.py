"""`rollout` and `eval` name a task set that a Landlock-level cell could stat() (issue 38), before the run."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.sandbox.isolation import landlock_available


@pytest.fixture
def open_folder() -> Iterator[Path]:
    # pytest's tmp_path sits under a 0700 folder, which already closes it to other users
    base = Path(tempfile.mkdtemp(prefix="dd-cli-exposure-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base)


@pytest.mark.skipif(not landlock_available()[0], reason="no Landlock on this kernel")
def test_rollout_names_a_task_file_that_cells_could_stat_at_landlock(open_folder: Path) -> None:
    tasks = open_folder / "tasks.jsonl"
    tasks.write_text('{"id": "t1", "question": "How many rows?", "answer": "3"}\n')
    res = CliRunner().invoke(
        app, ["rollout", str(tasks), "--isolation", "landlock", "--out", str(open_folder / "out")]
    )
    assert "can stat()" in res.output and str(tasks) in res.output, res.output
    # closed to other users: no line
    tasks.parent.chmod(0o750)
    res = CliRunner().invoke(
        app, ["rollout", str(tasks), "--isolation", "landlock", "--out", str(open_folder / "out2")]
    )
    assert "can stat()" not in res.output, res.output

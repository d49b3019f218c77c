"""`rollout` and `eval` name a task set that a Landlock-level cell could stat() (issue 38), before the run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.sandbox.isolation import landlock_available
from helpers.folders import open_folder


@pytest.fixture
def open_base() -> Iterator[Path]:
    with open_folder("dd-cli-exposure-") as base:
        yield base


@pytest.mark.skipif(not landlock_available()[0], reason="no Landlock on this kernel")
def test_rollout_names_a_task_file_that_cells_could_stat_at_landlock(open_base: Path) -> None:
    tasks = open_base / "tasks.jsonl"
    tasks.write_text('{"id": "t1", "question": "How many rows?", "answer": "3"}\n')
    res = CliRunner().invoke(
        app, ["rollout", str(tasks), "--isolation", "landlock", "--out", str(open_base / "out")]
    )
    assert "can stat()" in res.output and str(tasks) in res.output, res.output
    # closed to other users: no line
    tasks.parent.chmod(0o750)
    res = CliRunner().invoke(
        app, ["rollout", str(tasks), "--isolation", "landlock", "--out", str(open_base / "out2")]
    )
    assert "can stat()" not in res.output, res.output

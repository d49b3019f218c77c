"""Temporary siblings: a killed writer's leftovers are removed, a live writer's are not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from datadojo.tmpfiles import remove_stale_temps, temp_sibling


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid  # reaped: no process has this pid now (until the kernel reuses it)


def test_stale_temps_of_dead_processes_are_removed(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    dead = _dead_pid()
    stale_file = tmp_path / f".out.jsonl.{dead}.tmp"
    stale_file.write_text("half a file")
    stale_dir = tmp_path / f".out.jsonl.{dead + 0}.tmp.d"  # not our pattern: kept
    stale_dir.mkdir()
    live = tmp_path / f".out.jsonl.{os.getppid()}.tmp"  # a live process (our parent): kept
    live.write_text("being written")
    other = tmp_path / f".other.jsonl.{dead}.tmp"  # another target's: kept
    other.write_text("x")
    assert remove_stale_temps(target) == [stale_file]
    assert not stale_file.exists() and live.exists() and other.exists() and stale_dir.exists()


def test_temp_sibling_names_this_process_and_cleans_folders(tmp_path: Path) -> None:
    root = tmp_path / "tasks.copies"
    stale = tmp_path / f".tasks.copies.{_dead_pid()}.tmp"
    (stale / "env").mkdir(parents=True)
    (stale / "env" / "t.parquet").write_bytes(b"x")
    tmp = temp_sibling(root)
    assert tmp == tmp_path / f".tasks.copies.{os.getpid()}.tmp"
    assert not stale.exists()
    assert remove_stale_temps(tmp_path / "missing-folder" / "x") == []

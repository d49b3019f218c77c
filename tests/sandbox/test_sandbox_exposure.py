"""Which host paths a Landlock-level cell could stat(): every folder above them searchable by others."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from datadojo.sandbox.exposure import exposure_line, searchable_by_others
from helpers.folders import open_folder


@pytest.fixture
def open_base() -> Iterator[Path]:
    with open_folder("dd-exposure-") as base:
        yield base


def test_a_path_is_exposed_only_while_every_folder_above_it_lets_others_search(open_base: Path) -> None:
    tasks = open_base / "project" / "tasks.jsonl"
    tasks.parent.mkdir(mode=0o755)
    tasks.parent.chmod(0o755)
    tasks.write_text("{}\n")
    tasks.chmod(0o600)  # unreadable by others, yet stat() needs only search on the folders above
    assert searchable_by_others(tasks)
    tasks.parent.chmod(0o750)  # o-x on one ancestor closes it
    assert not searchable_by_others(tasks)
    tasks.parent.chmod(0o751)  # o+x alone (no listing) still lets stat() through
    assert searchable_by_others(tasks)
    assert not searchable_by_others(open_base / "missing.jsonl")


def test_the_warning_names_the_exposed_paths_at_landlock_and_reduced_only(open_base: Path) -> None:
    exposed = open_base / "answers.jsonl"
    exposed.write_text("{}\n")
    closed_dir = open_base / "closed"
    closed_dir.mkdir(mode=0o700)
    closed_dir.chmod(0o700)
    hidden = closed_dir / "tasks.jsonl"
    hidden.write_text("{}\n")
    line = exposure_line([exposed, hidden], "landlock")
    assert line is not None and str(exposed) in line and str(hidden) not in line
    assert exposure_line([exposed], "reduced") is not None
    assert exposure_line([exposed], "bwrap") is None  # the host's folders are not in a bubblewrap sandbox
    assert exposure_line([hidden], "landlock") is None

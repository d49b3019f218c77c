"""Workspaces: files placed as read-only views or copies, bad names refused, originals never touched."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from datadojo.sandbox.workspace import INPUTS_MOUNT, Workspace, as_data_file
from datadojo.types import DataFile
from helpers.digests import tree_digest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(EXAMPLES / "sales.csv", src / "sales.csv")
    shutil.copytree(EXAMPLES / "station_survey", src / "station_survey")
    return src


def test_copy_placement_is_read_only_and_independent(tmp_path: Path, data: Path) -> None:
    before = tree_digest(data)
    ws = Workspace.create(placement="copy", parent=tmp_path / "root")
    placed = ws.add_files(
        [data / "sales.csv", DataFile(path=str(data / "station_survey"), kind="dir", name="survey")]
    )
    assert [df.visible_name for df in placed] == ["sales.csv", "survey"]
    copy = ws.path / "sales.csv"
    assert copy.read_bytes() == (data / "sales.csv").read_bytes()
    assert not copy.is_symlink() and os.stat(copy).st_ino != os.stat(data / "sales.csv").st_ino
    assert copy.stat().st_mode & 0o777 == 0o444
    assert (ws.path / "survey").is_dir() and (ws.path / "survey").stat().st_mode & 0o777 == 0o555
    os.chmod(copy, 0o644)  # whatever happens to the copy, the original stays as it was
    copy.write_text("changed")
    assert tree_digest(data) == before
    ws.cleanup()
    assert not ws.root.exists()
    ws.cleanup()  # twice is fine


def test_view_placement_links_into_the_inputs_mount(tmp_path: Path, data: Path) -> None:
    ws = Workspace.create(placement="view", parent=tmp_path)
    ws.add_files([data / "sales.csv", data / "station_survey"])
    link = ws.path / "sales.csv"
    assert link.is_symlink() and os.readlink(link) == f"{INPUTS_MOUNT}/sales.csv"
    assert (ws.inputs / "sales.csv").read_bytes() == (data / "sales.csv").read_bytes()
    assert sorted(p.name for p in (ws.inputs / "station_survey").iterdir()) == sorted(
        p.name for p in (data / "station_survey").iterdir()
    )
    ws.cleanup()
    assert not ws.root.exists() and (data / "sales.csv").exists()


def test_keep_leaves_the_workspace(tmp_path: Path, data: Path) -> None:
    ws = Workspace.create(placement="copy", parent=tmp_path, keep=True)
    ws.add_files([data / "sales.csv"])
    ws.cleanup()
    assert (ws.path / "sales.csv").exists()


@pytest.mark.parametrize(
    ("name", "message"),
    [("a/b.csv", "plain file name"), ("..", "plain file name"), (" x.csv", "plain file name")],
)
def test_bad_visible_names(tmp_path: Path, data: Path, name: str, message: str) -> None:
    ws = Workspace.create(placement="copy", parent=tmp_path)
    with pytest.raises(ValueError, match=message):
        ws.add_files([DataFile(path=str(data / "sales.csv"), kind="csv", name=name)])
    ws.cleanup()


def test_duplicate_missing_and_wrong_kind(tmp_path: Path, data: Path) -> None:
    ws = Workspace.create(placement="copy", parent=tmp_path)
    with pytest.raises(ValueError, match="used by two data files"):
        ws.add_files(
            [data / "sales.csv", DataFile(path=str(data / "station_survey"), kind="dir", name="sales.csv")]
        )
    assert ws.files == {}  # nothing placed when the list is bad
    with pytest.raises(FileNotFoundError, match=r"nope\.csv"):
        ws.add_files([DataFile(path=str(data / "nope.csv"), kind="csv")])
    with pytest.raises(ValueError, match="kind is 'dir'"):
        ws.add_files([DataFile(path=str(data / "sales.csv"), kind="dir")])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        as_data_file(data / "missing.csv")
    with pytest.raises(TypeError):
        as_data_file(42)  # type: ignore[arg-type]
    ws.cleanup()


def test_cleanup_copes_with_read_only_trees(tmp_path: Path, data: Path) -> None:
    ws = Workspace.create(placement="copy", parent=tmp_path)
    ws.add_files([data / "station_survey"])
    locked = ws.path / "locked"
    (locked / "inner").mkdir(parents=True)
    (locked / "inner" / "f").write_text("x")
    os.chmod(locked / "inner", 0o500)
    os.chmod(locked, 0o500)
    ws.cleanup()
    assert not ws.root.exists()

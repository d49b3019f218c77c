"""datadojo.fs: whole-file writes replace the target only when complete and leave no temporary file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datadojo.fs import atomic_path, temp_path, write_bytes_atomic, write_json_atomic, write_text_atomic


def test_writes_create_the_folder_and_leave_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b.json"
    write_json_atomic(target, {"k": "é", "n": 1})
    assert json.loads(target.read_text(encoding="utf-8")) == {"k": "é", "n": 1}
    assert "é" in target.read_text(encoding="utf-8")  # not escaped unless asked
    assert target.read_text(encoding="utf-8").endswith("}\n")
    write_text_atomic(tmp_path / "t.txt", "x\ny")
    write_bytes_atomic(tmp_path / "b.bin", b"\x00\x01")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.rglob(".*")) == []


def test_failure_keeps_the_old_file_and_removes_the_temp(tmp_path: Path) -> None:
    target = tmp_path / "summary.json"
    write_json_atomic(target, {"old": True})
    with pytest.raises(TypeError):
        write_json_atomic(target, {"bad": object()})  # not JSON: fails while writing
    assert json.loads(target.read_text(encoding="utf-8")) == {"old": True}
    assert not temp_path(target).exists()
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half", encoding="utf-8")
        raise RuntimeError("killed mid-write")
    assert json.loads(target.read_text(encoding="utf-8")) == {"old": True}
    assert list(tmp_path.iterdir()) == [target]


def test_json_options_reach_dumps(tmp_path: Path) -> None:
    target = write_json_atomic(tmp_path / "m.json", {"b": 1, "a": "é"}, sort_keys=True, ensure_ascii=True)
    assert target.read_text(encoding="utf-8") == '{\n  "a": "\\u00e9",\n  "b": 1\n}\n'

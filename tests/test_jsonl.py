"""Streaming JSONL: append and read, crash tolerance, errors with line numbers, path resolution, atomic writes."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from datadojo.jsonl import (
    JsonlAppender,
    JsonlError,
    append_jsonl,
    iter_jsonl,
    read_models,
    read_tasks,
    read_trajectories,
    repair_tail,
    write_jsonl_atomic,
)
from datadojo.types import Action, Task, Trajectory, Turn


def _traj(i: int) -> Trajectory:
    return Trajectory(
        task_id=f"t{i}",
        turns=[Turn(raw="<answer>1</answer>", action=Action(kind="answer", text="1"))],
        stop_reason="answer",
    )


def test_append_and_read_models(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "traj.jsonl"
    assert append_jsonl(path, [_traj(0), _traj(1)]) == 2
    assert append_jsonl(path, [_traj(2)]) == 1
    got = list(read_trajectories(path))
    assert [t.task_id for t in got] == ["t0", "t1", "t2"]
    assert got[0] == _traj(0).model_copy(update={"provenance": got[0].provenance})
    assert path.read_bytes().count(b"\n") == 3


def test_appender_writes_dicts_and_flushes_each_line(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    with JsonlAppender(path, fsync=True) as out:
        out.write({"x": "é"})
        # visible to a reader before close: each record is flushed at once
        assert [v for _, v in iter_jsonl(path)] == [{"x": "é"}]
        out.write({"x": 2})
        assert out.count == 2
    assert path.read_text(encoding="utf-8") == '{"x": "é"}\n{"x": 2}\n'


def test_crash_partial_last_line_then_append(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "run.jsonl"
    append_jsonl(path, [{"i": 0}, {"i": 1}])
    with path.open("ab") as fh:  # a process killed mid-write
        fh.write(b'{"i": 2, "text": "half a rec')
    with caplog.at_level(logging.WARNING):
        assert [v["i"] for _, v in iter_jsonl(path)] == [0, 1]  # readable: the tail is skipped
    assert "unterminated last line" in caplog.text
    with pytest.raises(JsonlError, match=r"run\.jsonl:3: not valid JSON"):
        list(iter_jsonl(path, skip_partial_tail=False))
    append_jsonl(path, [{"i": 3}])
    assert [(n, v["i"]) for n, v in iter_jsonl(path)] == [(1, 0), (2, 1), (3, 3)]


def test_repair_tail(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    assert repair_tail(path) == 0  # missing file
    path.write_bytes(b"")
    assert repair_tail(path) == 0
    path.write_bytes(b'{"a": 1}\n')
    assert repair_tail(path) == 0
    path.write_bytes(b'{"a": 1}\n{"b": ')
    assert repair_tail(path) == 6 and path.read_bytes() == b'{"a": 1}\n'
    path.write_bytes(b'{"only": "partial')  # no newline at all
    assert repair_tail(path) == 17 and path.read_bytes() == b""
    big = b'{"a": 1}\n{"b": "' + b"x" * 200_000  # a tail longer than the 64 KiB read block
    path.write_bytes(big)
    assert repair_tail(path) == len(big) - 9 and path.read_bytes() == b'{"a": 1}\n'


def test_complete_unterminated_last_record_is_kept(tmp_path: Path) -> None:
    """A hand-written file without a final newline: appending must not destroy its last record."""
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}')
    assert [v for _, v in iter_jsonl(path)] == [{"a": 1}, {"b": 2}]
    append_jsonl(path, [{"c": 3}])
    assert [v for _, v in iter_jsonl(path)] == [{"a": 1}, {"b": 2}, {"c": 3}]


def test_bad_middle_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n\n{"a": oops}\n{"a": 3}\n')
    with pytest.raises(JsonlError) as info:
        list(iter_jsonl(path))
    assert info.value.line == 3 and info.value.path == str(path)
    assert str(info.value).startswith(f"{path}:3: not valid JSON")
    path.write_bytes(b'{"a": 1}\n{"a": "\xff"}\n')
    with pytest.raises(JsonlError, match=":2: not valid JSON"):
        list(iter_jsonl(path))


def test_invalid_record_names_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"id": "a", "question": "q"}) + "\n" + json.dumps({"id": "b"}) + "\n")
    with pytest.raises(JsonlError, match=r"tasks\.jsonl:2: field 'question': Field required") as info:
        list(read_models(path, Task))
    assert info.value.line == 2


def test_read_tasks_resolves_relative_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "bench"
    (data / "survey").mkdir(parents=True)
    records = [
        {"id": "a", "question": "q", "files": [{"path": "sales.csv"}, {"path": "/abs/shop.sqlite"}]},
        {"id": "b", "question": "q", "files": [{"path": "survey"}]},  # a folder: kind inferred as dir
    ]
    write_jsonl_atomic(data / "tasks.jsonl", records)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # resolution must not depend on the current directory
    a, b = read_tasks(data / "tasks.jsonl")
    assert a.files[0].path == str(data.resolve() / "sales.csv") and a.files[0].kind == "csv"
    assert a.files[1].path == "/abs/shop.sqlite"
    assert b.files[0].path == str(data.resolve() / "survey") and b.files[0].kind == "dir"
    raw = read_tasks(data / "tasks.jsonl", resolve_paths=False)
    assert next(raw).files[0].path == "sales.csv"
    with pytest.raises(JsonlError, match=r":2: field 'files\.0'.*survey: cannot tell the data kind"):
        next(raw)  # unresolved, the folder is looked up in the current directory and not found


def test_write_jsonl_atomic(tmp_path: Path) -> None:
    path = tmp_path / "out" / "all.jsonl"
    assert write_jsonl_atomic(path, [{"i": i} for i in range(3)]) == 3
    assert [v["i"] for _, v in iter_jsonl(path)] == [0, 1, 2]
    assert write_jsonl_atomic(path, [_traj(9)]) == 1  # replaces the whole file
    assert [t.task_id for t in read_trajectories(path)] == ["t9"]

    def failing():
        yield {"i": 0}
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write_jsonl_atomic(path, failing())
    assert [t.task_id for t in read_trajectories(path)] == ["t9"]  # the old file is intact
    assert sorted(os.listdir(path.parent)) == ["all.jsonl"]  # no temporary file left behind


def test_a_lone_surrogate_from_a_model_does_not_lose_the_record(tmp_path):
    """A server may send "\\ud800" in a reply; the record must still be written and read back intact."""
    from datadojo.jsonl import JsonlAppender, iter_jsonl
    from datadojo.types import Action, Trajectory, Turn

    raw = "<think>odd \ud800 text</think><answer>1</answer>"
    traj = Trajectory(
        task_id="s", stop_reason="answer", turns=[Turn(raw=raw, action=Action(kind="answer", text="1"))]
    )
    path = tmp_path / "t.jsonl"
    with JsonlAppender(path) as w:
        w.write(traj)
        w.write({"id": "plain", "text": "\udcff"})
    rows = [v for _, v in iter_jsonl(path)]
    assert rows[0]["turns"][0]["raw"] == raw and rows[1]["text"] == "\udcff"
    assert Trajectory.model_validate(rows[0]).turns[0].raw == raw


def test_input_reading_is_strict_about_a_torn_tail_and_long_lines(tmp_path: Path) -> None:
    from datadojo.jsonl import iter_jsonl

    p = tmp_path / "in.jsonl"
    p.write_bytes(b'{"a": 1}\n{"a": 2')
    assert [v for _, v in iter_jsonl(p)] == [{"a": 1}]  # resuming its own output: the tail is skipped
    with pytest.raises(JsonlError, match=r"in\.jsonl:2: not valid JSON"):
        list(iter_jsonl(p, skip_partial_tail=False))  # an input: a lost record is an error
    p.write_bytes(b'{"a": 1}\n' + b"x" * 5000)
    with pytest.raises(JsonlError, match=r"in\.jsonl:2: line longer than 1,000 bytes"):
        list(iter_jsonl(p, max_line_bytes=1000))


def test_appender_names_its_file_when_a_write_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    out = JsonlAppender(tmp_path / "o.jsonl")

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(out._fh, "flush", full)
    with pytest.raises(OSError, match=r"No space left on device: '.*o\.jsonl'"):
        out.write({"a": 1})
    monkeypatch.undo()
    out.close()

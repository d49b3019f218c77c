"""Streaming JSONL: read record by record, append record by record, survive crashes.

Every DataDojo stage writes its output as JSONL so that a run can be stopped and resumed and a file can
be inspected with ordinary tools. Two guarantees matter:

* **Appending never loads the file.** :class:`JsonlAppender` opens in append mode and writes one line per
  record, flushed (and optionally fsync'ed) at once, so a crash loses at most the record being written.
* **A crash leaves a readable file.** A record is one line; a process killed mid-write leaves an
  unterminated last line. Readers skip (and report) such a tail; :class:`JsonlAppender` cuts it off
  before appending so the file never holds a line glued to the next record.

A malformed line anywhere but the unterminated tail is a real error and is reported with its file and
line number.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from datadojo.errors import DataDojoError
from datadojo.fs import atomic_path
from datadojo.types import Task, Trajectory

__all__ = [
    "JsonlAppender",
    "JsonlError",
    "append_jsonl",
    "iter_jsonl",
    "read_models",
    "read_tasks",
    "read_trajectories",
    "repair_tail",
    "write_jsonl_atomic",
]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


class JsonlError(DataDojoError, ValueError):
    """A JSONL file holds a line that is not a valid record; the message names the file and line."""

    def __init__(self, path: str | Path, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path = str(path)
        self.line = line


#: Longest line read as one record. Far beyond any real task or trajectory, it bounds the memory a wrong
#: file (a binary blob, a huge file with no newline) can take before it is reported.
MAX_LINE_BYTES = 64 * 1024 * 1024


def iter_jsonl(
    path: str | Path, *, skip_partial_tail: bool = True, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, value)`` for each non-blank line of a JSONL file, without loading it whole.

    An unterminated, unparsable last line (what a crash mid-write leaves) is skipped with a warning when
    ``skip_partial_tail`` is true (resuming a run's own output); a file given as *input* is read with
    ``skip_partial_tail=False``, so a truncated last record is an error rather than silently lost. Any
    other bad line, and a line longer than ``max_line_bytes``, raises :class:`JsonlError`.
    """
    path = Path(path)
    with path.open("rb") as fh:
        lineno = 0
        while raw := fh.readline(max_line_bytes + 1):
            lineno += 1
            if len(raw) > max_line_bytes:
                raise JsonlError(
                    path, lineno, f"line longer than {max_line_bytes:,} bytes: not a JSONL record"
                )
            terminated = raw.endswith(b"\n")
            text = raw.strip()
            if not text:
                continue
            try:
                value = json.loads(text)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                if not terminated and skip_partial_tail:
                    log.warning("%s:%d: skipping an unterminated last line (interrupted write)", path, lineno)
                    return
                raise JsonlError(path, lineno, f"not valid JSON ({exc})") from exc
            yield lineno, value


def read_models(
    path: str | Path,
    model: type[M],
    *,
    prepare: Callable[[Any], Any] | None = None,
    skip_partial_tail: bool = True,
) -> Iterator[M]:
    """Stream a JSONL file as pydantic models; a record that does not validate names file, line and field.

    ``prepare`` rewrites each raw JSON value before validation (e.g. resolving relative paths, which
    must happen before a validator inspects the file system). ``skip_partial_tail``: see :func:`iter_jsonl`.
    """
    for lineno, value in iter_jsonl(path, skip_partial_tail=skip_partial_tail):
        try:
            yield model.model_validate(prepare(value) if prepare is not None else value)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "(record)"
            raise JsonlError(
                path, lineno, f"field {field!r}: {first['msg']} ({exc.error_count()} error(s) in this record)"
            ) from exc


def read_tasks(
    path: str | Path, *, resolve_paths: bool = True, skip_partial_tail: bool = True
) -> Iterator[Task]:
    """Stream tasks from a JSONL file; relative data-file paths are resolved against the file's folder.

    Paths are resolved in the raw record, before validation, because :class:`~datadojo.types.DataFile`
    infers a missing ``kind`` by looking at the path (a suffix-less folder is ``dir`` only if it exists),
    and a relative path must be looked up next to the task file, not in the current directory.
    """
    base = Path(path).resolve().parent

    def resolve(value: Any) -> Any:
        if not isinstance(value, dict) or not isinstance(value.get("files"), list):
            return value
        files = []
        for f in value["files"]:
            if isinstance(f, dict) and isinstance(f.get("path"), str) and not Path(f["path"]).is_absolute():
                f = {**f, "path": str(base / f["path"])}
            files.append(f)
        return {**value, "files": files}

    return read_models(
        path, Task, prepare=resolve if resolve_paths else None, skip_partial_tail=skip_partial_tail
    )


def read_trajectories(path: str | Path, *, skip_partial_tail: bool = True) -> Iterator[Trajectory]:
    """Stream trajectories from a JSONL file."""
    return read_models(path, Trajectory, skip_partial_tail=skip_partial_tail)


def repair_tail(path: str | Path) -> int:
    """Cut an unterminated last line off a JSONL file (left by a crash); return the bytes removed.

    Only the tail after the last newline is inspected, so this is O(1) in the file size. A tail that is a
    complete JSON value (a file written without a final newline) is kept and given its newline instead:
    a record cut mid-write is never valid JSON, since every record is an object and loses its ``}``.
    """
    path = Path(path)
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("rb+") as fh:
        block = 1 << 16
        pos = size
        while pos > 0:
            start = max(0, pos - block)
            fh.seek(start)
            chunk = fh.read(pos - start)
            if pos == size and chunk.endswith(b"\n"):
                return 0
            idx = chunk.rfind(b"\n")
            if idx >= 0:
                cut = start + idx + 1
                break
            pos = start
        else:
            cut = 0
        fh.seek(cut)
        if _is_json(fh.read()):
            # A complete record that merely lacks its newline (a hand-written file): keep it.
            fh.write(b"\n")
            return 0
        fh.truncate(cut)
    removed = size - cut
    if removed:
        log.warning("%s: removed an unterminated last line of %d bytes (interrupted write)", path, removed)
    return removed


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return True


def _dumps(record: Any) -> str:
    if isinstance(record, BaseModel):
        try:
            return record.model_dump_json()
        except (ValueError, PydanticSerializationError):
            # Text with a lone surrogate (a server that sent "\ud800") cannot be written as UTF-8; an
            # ASCII-escaped JSON line keeps it, and reads back to the same string.
            return json.dumps(record.model_dump(mode="python"), ensure_ascii=True, default=str)
    try:
        return json.dumps(record, ensure_ascii=False, default=str).encode("utf-8").decode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(record, ensure_ascii=True, default=str)


class JsonlAppender:
    """Append records to a JSONL file one line at a time, each flushed as soon as it is written.

    Opening repairs an unterminated tail left by an earlier crash. ``fsync=True`` also forces each line to
    disk (slower; use when the machine itself may die).
    """

    def __init__(self, path: str | Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_tail(self.path)
        self._fh = self.path.open("a", encoding="utf-8")
        self.count = 0
        self._failed = False

    def write(self, record: Any) -> None:
        """Append one record; an OS error (a full disk) is raised naming this file.

        What reached the disk before the error is at worst an unterminated last line, which the next
        :class:`JsonlAppender` on this file cuts off, so a rerun after freeing space resumes cleanly.
        """
        line = _dumps(record)
        if "\n" in line:  # json.dumps never emits raw newlines; guard against custom encoders
            raise ValueError("a JSONL record must serialize to a single line")
        try:
            self._fh.write(line + "\n")
            self._fh.flush()
            if self.fsync:
                os.fsync(self._fh.fileno())
        except OSError as exc:
            self._failed = True
            raise OSError(exc.errno, exc.strerror or str(exc), str(self.path)) from exc
        self.count += 1

    def close(self) -> None:
        if self._fh.closed:
            return
        try:
            self._fh.close()
        except OSError:
            if not self._failed:  # the failed write was already reported; its buffer cannot be saved
                raise

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def append_jsonl(path: str | Path, records: Iterable[Any], *, fsync: bool = False) -> int:
    """Append records (dicts or pydantic models) to a JSONL file; return how many were written."""
    with JsonlAppender(path, fsync=fsync) as out:
        for r in records:
            out.write(r)
        return out.count


def write_jsonl_atomic(path: str | Path, records: Iterable[Any]) -> int:
    """Write a whole JSONL file via a temporary file and a rename, so readers never see half of it."""
    n = 0
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as fh:
        for r in records:
            fh.write(_dumps(r) + "\n")
            n += 1
        fh.flush()
        os.fsync(fh.fileno())
    return n

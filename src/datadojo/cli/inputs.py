"""Reading a command's input files, with one clear error per bad input (exit code 2, no traceback).

Every command that takes a JSONL file of tasks, trajectories or records reads it through here, so a
missing path, a folder, an empty file, a truncated last record, a record of the wrong type, a binary or
non-UTF-8 file and an absurdly long line are all reported the same way: ``PATH[:LINE]: what is wrong``,
before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import typer

from datadojo.jsonl import JsonlError, iter_jsonl, read_tasks, read_trajectories
from datadojo.types import Task, Trajectory

__all__ = [
    "check_data_file",
    "check_input_file",
    "load_jsonl",
    "load_records",
    "load_tasks",
    "load_trajectories",
    "read_text_input",
]

T = TypeVar("T")


def check_input_file(path: Path, what: str, hint: str | None = None) -> None:
    """``BadParameter`` unless ``path`` is an existing, non-empty regular file."""
    if not path.exists():
        raise typer.BadParameter(f"{path}: no such file", param_hint=hint)
    if path.is_dir():
        raise typer.BadParameter(f"{path}: is a folder; expected a {what} file", param_hint=hint)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise typer.BadParameter(f"{path}: cannot read ({exc.strerror})", param_hint=hint) from None
    if size == 0:
        raise typer.BadParameter(f"{path}: empty file; expected {what}", param_hint=hint)


def load_records(
    path: Path, read: Callable[[Path], Iterable[T]], what: str, hint: str | None = None
) -> list[T]:
    """All records of an input JSONL file, or ``BadParameter`` naming the file (and line) of the problem.

    ``read(path)`` must read strictly (a truncated last record is an error, not a skipped tail).
    """
    check_input_file(path, f"{what} JSONL", hint)
    try:
        records = list(read(path))
    except JsonlError as exc:
        raise typer.BadParameter(f"{exc}{_looks_like(path, exc.line, what)}", param_hint=hint) from None
    except OSError as exc:
        raise typer.BadParameter(f"{path}: cannot read ({exc.strerror or exc})", param_hint=hint) from None
    if not records:
        raise typer.BadParameter(f"{path}: holds no {what} (blank lines only)", param_hint=hint)
    return records


#: Keys that tell the record types apart, to say what a record of the wrong type looks like.
_SIGNATURES = {
    "a task": {"id", "question"},
    "a trajectory": {"task_id", "stop_reason"},
    "a corpus record": {"path", "kind", "accepted"},
}

_OWN = {"tasks": "a task", "trajectories": "a trajectory"}


def _looks_like(path: Path, line: int, what: str) -> str:
    """`` — this looks like a trajectory, not tasks`` when the bad record is of another known type."""
    import json

    try:
        with path.open("rb") as fh:
            for i, raw in enumerate(fh, 1):
                if i == line:
                    keys = set(json.loads(raw)) if len(raw) < 1 << 20 else set()
                    break
            else:
                return ""
    except (OSError, ValueError, TypeError):
        return ""
    for name, signature in _SIGNATURES.items():
        if signature <= keys and name != _OWN.get(what):
            return f" — this looks like {name}, not {what}"
    return ""


def load_tasks(path: Path, hint: str | None = "TASKS.jsonl") -> list[Task]:
    """Tasks of an input file (:func:`datadojo.jsonl.read_tasks`, strict)."""
    return load_records(path, lambda p: read_tasks(p, skip_partial_tail=False), "tasks", hint)


def load_trajectories(path: Path, hint: str | None = "TRAJECTORIES.jsonl") -> list[Trajectory]:
    """Trajectories of an input file (:func:`datadojo.jsonl.read_trajectories`, strict)."""
    return load_records(path, lambda p: read_trajectories(p, skip_partial_tail=False), "trajectories", hint)


def load_jsonl(path: Path, what: str, hint: str | None = None) -> list[tuple[int, Any]]:
    """``(line, value)`` of each record of an input JSONL file of plain JSON values (strict)."""
    return load_records(path, lambda p: iter_jsonl(p, skip_partial_tail=False), what, hint)


#: Sniffed kinds that are never a data file an agent can analyse.
_NOT_DATA = ("missing", "empty", "special", "binary")


def check_data_file(path: Path, hint: str | None = None) -> None:
    """``BadParameter`` for a data input (a table, a database, a dataset folder) that cannot be one.

    A folder is fine (a dataset folder); a missing path, an empty file, a FIFO or device, and binary content
    that no reader takes (NUL bytes in what claims to be text) are refused, naming the file.
    """
    from datadojo.corpus.sniff import sniff

    found = sniff(path)
    if found.kind in _NOT_DATA:
        raise typer.BadParameter(f"{path}: {found.detail}; not a data file", param_hint=hint)


def read_text_input(path: Path, what: str, hint: str | None = None) -> str:
    """The UTF-8 text of an input file (code, a prompt), or ``BadParameter`` naming the file."""
    from datadojo.corpus.sniff import sniff

    check_input_file(path, what, hint)
    found = sniff(path)
    if found.kind == "binary":
        raise typer.BadParameter(f"{path}: {found.detail}; expected {what}", param_hint=hint)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise typer.BadParameter(
            f"{path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})",
            param_hint=hint,
        ) from None
    except OSError as exc:
        raise typer.BadParameter(f"{path}: cannot read ({exc.strerror or exc})", param_hint=hint) from None

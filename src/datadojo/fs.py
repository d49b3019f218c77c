"""Whole-file writes that a reader never sees half of: a temporary sibling, then a rename.

Every file DataDojo writes whole (summaries, reports, manifests, exported datasets, copies of
environments) goes through :func:`atomic_path`: the content is written to ``.NAME.PID.tmp`` beside the
target and renamed over it with :func:`os.replace` (atomic on POSIX within one file system). If writing
fails the temporary file is removed and the target is left as it was, so an error never leaves a torn
file or litter behind. Append-only JSONL (resumable logs) is :mod:`datadojo.jsonl`'s job, not this one.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from datadojo.tmpfiles import temp_sibling

__all__ = [
    "atomic_path",
    "close_to_others",
    "temp_path",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_text_atomic",
]


def temp_path(path: str | Path) -> Path:
    """The temporary sibling this process writes ``path`` through: ``.NAME.PID.tmp``.

    Siblings left by a process that is gone (killed mid-write) are removed first
    (:func:`datadojo.tmpfiles.temp_sibling`), so reruns after a SIGKILL leave no orphans.
    """
    return temp_sibling(path)


@contextmanager
def atomic_path(path: str | Path, *, mkdir: bool = True) -> Iterator[Path]:
    """Yield a temporary path to write; on a clean exit it replaces ``path``, on an error it is removed.

    For writers that want a path rather than text (``pyarrow``, ``sqlite3``, an open file with ``fsync``).
    ``mkdir`` creates the target's folder first.
    """
    path = Path(path)
    if mkdir:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomic(path: str | Path, text: str, *, newline: str | None = None) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; ``newline`` as for :func:`open`."""
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8", newline=newline) as fh:
        fh.write(text)
    return Path(path)


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_json_atomic(path: str | Path, data: Any, *, indent: int | None = 2, **dumps: Any) -> Path:
    """Write ``data`` as JSON plus a final newline, atomically.

    Non-ASCII text is kept as is unless ``ensure_ascii=True``; other keywords go to :func:`json.dumps`
    (``default=str`` for values JSON has no type for, ``sort_keys=True`` for stable diffs).
    """
    dumps.setdefault("ensure_ascii", False)
    return write_text_atomic(path, json.dumps(data, indent=indent, **dumps) + "\n")


def close_to_others(folder: str | Path) -> None:
    """Remove the other users' rights from ``folder`` (owner and group keep theirs).

    Why: a sandbox cell at the Landlock level runs under a uid of its own and Landlock has no right for
    ``stat()``; only the host's permissions keep it from learning which files a run folder holds and
    their sizes (``datadojo.sandbox.exposure``). DataDojo closes the run folders it creates this way.
    """
    p = Path(folder)
    mode = stat.S_IMODE(p.stat().st_mode)
    if mode & stat.S_IRWXO:
        p.chmod(mode & ~stat.S_IRWXO)

"""Temporary siblings for write-then-rename, and the clean-up of those a killed process left behind.

Every file DataDojo writes whole is written to ``.NAME.PID.tmp`` beside its target and renamed into place,
so a reader never sees half of it. A process killed mid-write (SIGKILL, OOM, power loss) cannot remove
its temporary file; the rerun has another PID, so without clean-up the orphan would stay forever. Before
a writer takes its own temporary name it removes the siblings whose PID is no longer a running process
(those of a live process — another writer — are left alone).
"""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

__all__ = ["remove_stale_temps", "temp_sibling"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def remove_stale_temps(path: str | Path) -> list[Path]:
    """Remove ``.NAME.PID.tmp`` siblings of ``path`` (files or folders) whose process is gone; return them."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    removed = []
    prefix = f".{path.name}."
    for stale in path.parent.glob(f"{glob.escape(prefix)}*.tmp"):
        pid = stale.name[len(prefix) : -len(".tmp")]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)
        removed.append(stale)
    return removed


def temp_sibling(path: str | Path) -> Path:
    """This process's temporary name for ``path`` (``.NAME.PID.tmp``), after removing stale ones."""
    path = Path(path)
    remove_stale_temps(path)
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")

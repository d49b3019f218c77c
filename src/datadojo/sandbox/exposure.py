"""Which host paths a cell could still ``stat()`` at the Landlock level.

Why: Landlock (the level used where containers forbid namespaces) governs reading, writing and listing,
but has no right for ``stat()`` or for walking a path. A cell there runs under a uid of its own (as root;
``docs/sandbox.md``, "Cells never run as root"), so what stops it from learning that a file exists, and
its size (a task set's answer file, a run's scores), is the host's own permissions: a cell may ``stat()``
a path only when every folder above it lets *other users* search it (``o+x``). Under bubblewrap the
host's folders are not in the sandbox at all, so none of this applies there.

:func:`searchable_by_others` tells the harness whether a path is exposed that way, so ``rollout`` and
``eval`` can say so in one line before the run; :func:`datadojo.fs.close_to_others` is how DataDojo makes the run
folders it creates (``datadojo.runs.folder.RunFolder``): group and owner keep their rights, other users
(the cells' uid among them) lose theirs.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["exposure_line", "searchable_by_others"]


def searchable_by_others(path: str | Path) -> bool:
    """True when a user who is neither the owner nor in the group of each folder above ``path`` can
    ``stat()`` it: every ancestor folder grants ``o+x``. A path that does not exist is not exposed."""
    p = Path(os.path.abspath(path))
    if not p.exists():
        return False
    for folder in p.parents:
        try:
            mode = folder.stat().st_mode
        except OSError:
            return False
        if not mode & stat.S_IXOTH:
            return False
    return True


def exposure_line(paths: list[Path], level: str) -> str | None:
    """One warning line naming the ``paths`` that a cell at ``level`` could ``stat()``, or ``None``.

    Only the Landlock and reduced levels see the host's folders; under bubblewrap nothing is exposed.
    """
    if level not in ("landlock", "reduced"):
        return None
    exposed = [str(p) for p in paths if searchable_by_others(p)]
    if not exposed:
        return None
    return (
        f"at the {level} isolation level a cell can stat() {', '.join(exposed)} (every folder above it is "
        "searchable by other users): it can learn that the file exists and its size, not read it; keep task "
        "sets in a folder closed to others (chmod o-x FOLDER) or use bubblewrap (docs/sandbox.md)"
    )

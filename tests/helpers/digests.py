"""Digests of files and folders, to assert that something stayed byte-identical (or to compare two trees)."""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["file_digest", "tree_digest"]


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, in hex."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tree_digest(root: Path, *, modes: bool = False) -> dict[str, str]:
    """``{relative POSIX path: SHA-256}`` of every file under ``root`` (symlinks to files followed).

    A file that changes, appears or vanishes changes the result. With ``modes`` each value also carries
    the file's mode in octal (``"<sha256> 100444"``), so a ``chmod`` shows too.
    """
    digests = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            digest = file_digest(path)
            digests[path.relative_to(root).as_posix()] = (
                f"{digest} {path.stat().st_mode:o}" if modes else digest
            )
    return digests

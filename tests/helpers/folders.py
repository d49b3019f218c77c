"""A folder every user may search, for tests of what a Landlock-level cell could ``stat()``.

pytest's ``tmp_path`` sits under a 0700 folder, which already closes everything below it to other users,
so these tests need a folder of their own directly under ``/tmp`` with mode 0755.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def open_folder(prefix: str) -> Iterator[Path]:
    """A new folder under ``/tmp`` that other users may search (0755), removed afterwards with all below it."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        for root, dirs, _files in os.walk(base):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
        shutil.rmtree(base)

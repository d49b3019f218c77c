"""The one check every pipeline makes on its input folders: is there any data in them at all?

Why one check, made first: without it ``synth sailor EMPTY`` sends some hundred requests about nothing and
exits 0, ``synth datamind run EMPTY`` blames the queries, and ``corpus scan EMPTY`` exits 0 with an empty
``corpus.jsonl`` (issue 25, "Empty inputs"). :func:`require_data_files` refuses such an input up front
with ``no data files in …`` (:class:`NoDataFilesError`, exit status 2, bad input).

A *data file* is any file with content: what :func:`~datadojo.corpus.sniff.sniff` does not call
``empty``, ``missing`` (broken links), ``special`` (FIFOs, devices) or a plain folder; a Zarr store or a
Parquet dataset counts. Hidden files are left out as the scans leave them out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from datadojo.corpus.sniff import sniff, store_kind
from datadojo.errors import DataDojoError

__all__ = ["NoDataFilesError", "has_data_files", "require_data_files"]

_NOT_DATA = ("empty", "missing", "special", "dir")


class NoDataFilesError(DataDojoError, ValueError):
    """An input folder (or file) holds no file with content; exit status 2."""


def has_data_files(path: str | Path, *, include_hidden: bool = False) -> bool:
    """True when ``path`` is a file with content, a store, or a folder with one such file beneath it.

    Stops at the first data file found, so a large folder costs one directory read.
    """
    p = Path(path)
    if not p.is_dir() or store_kind(p) is not None:
        return sniff(p).kind not in _NOT_DATA
    for dirpath, dirnames, filenames in os.walk(p):
        if not include_hidden:
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for d in dirnames:
            if store_kind(Path(dirpath) / d) is not None:
                return True
        for f in filenames:
            if not include_hidden and f.startswith("."):
                continue
            if sniff(Path(dirpath) / f).kind not in _NOT_DATA:
                return True
    return False


def require_data_files(paths: Iterable[str | Path], *, include_hidden: bool = False) -> None:
    """Raise :class:`NoDataFilesError` naming the inputs when none of ``paths`` holds a data file.

    Each input is checked on its own: one empty folder among good ones is named too, because it is
    almost always a wrong path (``--out`` of another run, a mount that is not there).
    """
    empty = [str(p) for p in paths if not has_data_files(p, include_hidden=include_hidden)]
    if empty:
        what = ", ".join(empty)
        raise NoDataFilesError(
            f"no data files in {what}: every file there is empty (or there are none); "
            "give a folder with data files"
        )

"""Folder scan: the tree of a dataset folder with sizes and kinds, and a short profile of each file.

SciDataSailor (§1, §4.1) starts from whole scientific repositories — nested folders of raw measurements,
sequences, metadata and documentation — and its agents begin by "navigat[ing] directories, interpret[ing]
implicit schemas, align[ing] related artifacts"; its benchmark spans "flat repositories and deeply nested
scientific data layouts" (§4.3). :func:`profile_folder` gives an agent (or a seed generator) that first
view in one call: every entry with its size and detected kind, counts per kind, and a profile of the most
informative files (documentation and metadata first, then tables, then sequences and arrays).

Walking never follows symbolic links to directories (no cycles) and skips hidden entries unless asked;
broken links are listed with kind ``missing``. The walk stops after ``max_entries`` entries and says so.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from datadojo.corpus.profile import FileProfile, profile_file
from datadojo.corpus.sniff import Sniffed, sniff, store_kind
from datadojo.corpus.tables import ReadOptions

__all__ = ["FolderProfile", "TreeEntry", "profile_folder", "walk_folder"]

#: Which kinds are profiled first when a folder has more files than ``max_profiled``.
_PRIORITY = {
    "readme": 0,
    "metadata": 1,
    "csv": 2,
    "xlsx": 2,
    "sqlite": 2,
    "parquet": 2,
    "json": 3,
    "netcdf": 4,
    "hdf5": 4,
    "zarr": 4,
    "npy": 4,
    "npz": 4,
    "fits": 4,
    "parquet_dataset": 2,
    "fasta": 5,
    "genbank": 5,
    "text": 6,
    "archive": 7,
    "image": 8,
}
_SKIP_DIRS = {".git", "__pycache__", ".hg", ".svn", ".ipynb_checkpoints"}


class TreeEntry(BaseModel):
    """One entry of the tree; ``path`` is relative to the root, with ``/`` separators."""

    model_config = ConfigDict(extra="forbid")

    path: str
    kind: str
    size: int = 0
    depth: int = 0
    is_dir: bool = False
    is_symlink: bool = False
    detail: str | None = None


class FolderProfile(BaseModel):
    """A folder: its entries (directories carry the total size beneath them), kind counts, file profiles."""

    model_config = ConfigDict(extra="forbid")

    root: str
    name: str
    n_files: int
    n_dirs: int
    total_bytes: int
    kinds: dict[str, int]
    entries: list[TreeEntry]
    files: list[FileProfile] = Field(default_factory=list)
    truncated: bool = False
    warnings: list[str] = Field(default_factory=list)


def walk_folder(
    root: str | Path, *, include_hidden: bool = False, max_entries: int | None = None
) -> tuple[list[tuple[TreeEntry, Sniffed | None]], bool]:
    """Depth-first listing of ``root`` (files before subfolders, each sorted by name).

    Returns ``(entries, truncated)``; each entry comes with its :class:`Sniffed` (``None`` for folders).
    """
    base = Path(root)
    out: list[tuple[TreeEntry, Sniffed | None]] = []

    def rel(p: Path) -> str:
        return p.relative_to(base).as_posix()

    def visit(folder: Path, depth: int) -> bool:
        try:
            with os.scandir(folder) as it:
                children = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            out.append(
                (TreeEntry(path=rel(folder) or ".", kind="missing", depth=depth, detail=str(exc)), None)
            )
            return True
        files = []
        dirs = []
        for e in children:
            if not include_hidden and e.name.startswith("."):
                continue
            if e.is_dir(follow_symlinks=False):
                if e.name not in _SKIP_DIRS:
                    dirs.append(e)
            else:
                files.append(e)
        for e in files:
            if max_entries is not None and len(out) >= max_entries:
                return False
            p = Path(e.path)
            sn = sniff(p)
            if sn.kind == "dir":  # a symbolic link to a directory: listed, not followed
                entry = TreeEntry(
                    path=rel(p),
                    kind="dir",
                    depth=depth,
                    is_dir=True,
                    is_symlink=True,
                    detail=f"symbolic link to {os.readlink(p)!r}, not followed",
                )
                out.append((entry, None))
                continue
            out.append(
                (
                    TreeEntry(
                        path=rel(p),
                        kind=sn.kind,
                        size=sn.size,
                        depth=depth,
                        is_symlink=sn.is_symlink,
                        detail=sn.detail,
                    ),
                    sn,
                )
            )
        for e in dirs:
            if max_entries is not None and len(out) >= max_entries:
                return False
            p = Path(e.path)
            if store_kind(p) is not None:  # one dataset stored as a folder: one entry, not walked into
                sn = sniff(p)
                entry = TreeEntry(path=rel(p), kind=sn.kind, size=sn.size, depth=depth, detail=sn.detail)
                out.append((entry, sn))
                continue
            out.append((TreeEntry(path=rel(p), kind="dir", depth=depth, is_dir=True), None))
            if not visit(p, depth + 1):
                return False
        return True

    complete = visit(base, 0)
    return out, not complete


def profile_folder(
    root: str | Path,
    *,
    max_entries: int = 20_000,
    max_profiled: int = 40,
    include_hidden: bool = False,
    options: ReadOptions | None = None,
) -> FolderProfile:
    """Profile a dataset folder: tree with sizes and kinds, and up to ``max_profiled`` file profiles.

    Tables are read with ``options`` (default: statistics over the first 1,000 rows, counting stops past
    100,000) so that a folder of large files is still profiled quickly.
    """
    base = Path(root)
    if not base.is_dir():
        raise NotADirectoryError(f"{base}: not a directory")
    listing, truncated = walk_folder(base, include_hidden=include_hidden, max_entries=max_entries)
    entries = [e for e, _ in listing]
    sizes: Counter[str] = Counter()
    for e in entries:
        if not e.is_dir:
            parts = e.path.split("/")
            for i in range(1, len(parts)):
                sizes["/".join(parts[:i])] += e.size
    for e in entries:
        if e.is_dir and not e.is_symlink:
            e.size = sizes.get(e.path, 0)
    files = [(e, sn) for e, sn in listing if sn is not None]
    kinds = Counter(e.kind for e, _ in files)
    order = sorted(files, key=lambda item: (_PRIORITY.get(item[0].kind, 9), item[0].depth, item[0].path))
    opts = options or ReadOptions(max_rows=1000, count_limit=100_000)
    profiles = []
    for _, sn in order[:max_profiled]:
        if sn is None or sn.kind in ("missing", "special", "empty"):
            continue
        fp = profile_file(sn.path, options=opts, sniffed=sn)
        fp.path = sn.path.relative_to(base).as_posix()
        profiles.append(fp)
    warnings = []
    if truncated:
        warnings.append(f"listing stopped after {max_entries:,} entries")
    if len(order) > max_profiled:
        warnings.append(f"{len(order) - max_profiled} files not profiled (max_profiled={max_profiled})")
    return FolderProfile(
        root=str(base),
        name=base.resolve().name or str(base),
        n_files=len(files),
        n_dirs=sum(1 for e in entries if e.is_dir),
        total_bytes=sum(e.size for e, _ in files),
        kinds=dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
        entries=entries,
        files=profiles,
        truncated=truncated,
        warnings=warnings,
    )

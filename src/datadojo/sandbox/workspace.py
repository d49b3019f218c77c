"""A trajectory's workspace: a fresh directory with copies or read-only views of its data files.

Layout on the host (``<root>`` is a new temporary directory per sandbox)::

    <root>/workspace/   the agent's working directory (writable, owned by the sandbox uid)
    <root>/inputs/      the data files (bubblewrap only): bound read-only into the sandbox

Two placements, one guarantee (the original files can never be changed through the sandbox):

* ``view`` (bubblewrap, Landlock): each file is hard-linked (when the original is world-readable and on
  the same file system) or copied into ``inputs/``, which the sandbox can only read (bubblewrap binds it
  read-only at :data:`INPUTS_MOUNT`; Landlock grants read access to nothing else of the host's files but
  this folder, at its host path). The workspace holds a *mirror* of each input: a data file is a symlink
  ``name -> <inputs>/name``; a folder is a real, read-only directory tree whose files are symlinks into
  ``<inputs>``. A hard link shares the inode with the original, which is safe only because the sandbox
  reaches it through a path it cannot write; that is why views are never used in reduced isolation.

  Why a real tree and not one symlink per folder: ``os.walk`` and ``Path.rglob`` do not descend into a
  symlinked *directory* (SciDataSailor's first probe of a repository is ``os.walk('.')``, which saw
  nothing), but they do list symlinked *files*, as do ``glob``, ``os.scandir``, ``find`` and ``ls -R``;
  ``Path.is_file()``/``os.path.isfile`` follow the link. (``find -type f`` tests the link itself; use
  ``find -L`` or ``-xtype f``.) Bind-mounting each folder at its own place in the workspace is not an
  option: a pool starts the worker before it knows the files, and mounts are fixed at start.
* ``copy`` (reduced isolation): each file is copied into the workspace and made read-only. The copy may
  be deleted or renamed by the agent (it owns the directory) but the original is never touched.

Files can be added after the worker has started (the pool pre-warms workers with an empty workspace and
fills it when a trajectory takes one), because a bind mount shows later changes of its source directory.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from datadojo.types import DataFile

__all__ = ["INPUTS_MOUNT", "WORKSPACE_MOUNT", "Placement", "Workspace", "as_data_file"]

#: Where the workspace and the inputs appear inside a bubblewrap sandbox.
WORKSPACE_MOUNT = "/workspace"
INPUTS_MOUNT = "/inputs"

Placement = Literal["view", "copy"]


def as_data_file(item: DataFile | str | os.PathLike[str]) -> DataFile:
    """Accept a :class:`DataFile` or a plain path (kind inferred from the suffix, or ``dir``)."""
    if isinstance(item, DataFile):
        return item
    if isinstance(item, str | os.PathLike):
        path = Path(item)
        if not path.exists():
            raise FileNotFoundError(f"data file {str(path)!r} does not exist")
        return DataFile.from_path(path)
    raise TypeError(f"a data file must be a DataFile, str or Path, got {type(item).__name__}")


def _check_visible_name(name: str, source: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\0" in name or name != name.strip():
        raise ValueError(
            f"data file {source!r}: visible name {name!r} must be a plain file name "
            "(no '/', not '.' or '..', no surrounding spaces)"
        )


class Workspace:
    """One sandbox's directories on the host, and the data files placed in them."""

    def __init__(
        self,
        root: Path,
        *,
        placement: Placement,
        uid: int | None,
        keep: bool = False,
        link_root: str | None = None,
    ) -> None:
        self.root = root
        self.path = root / "workspace"
        self.inputs = root / "inputs"
        self.placement: Placement = placement
        self.uid = uid
        self.keep = keep
        # Where the sandbox sees ``inputs/`` (view placement): the bubblewrap mount point by default.
        self.link_root = link_root or INPUTS_MOUNT
        self.files: dict[str, DataFile] = {}
        self._closed = False

    @classmethod
    def create(
        cls,
        *,
        placement: Placement,
        uid: int | None = None,
        parent: str | os.PathLike[str] | None = None,
        keep: bool = False,
        link_root: str | None = None,
    ) -> Workspace:
        """Make the directories; ``uid`` (when running as root) becomes the owner of the workspace.

        ``link_root``: where the sandbox sees ``inputs/`` (view placement); ``None`` means the bubblewrap
        mount point :data:`INPUTS_MOUNT`, ``"host"`` the folder's own path (Landlock: no mount namespace).
        """
        if parent is not None:
            Path(parent).mkdir(parents=True, exist_ok=True)
        root = Path(tempfile.mkdtemp(prefix="datadojo-sb-", dir=parent)).resolve()
        os.chmod(root, 0o711)  # the sandbox uid traverses it (reduced mode); other users cannot list it
        seen_as = str(root / "inputs") if link_root == "host" else link_root
        ws = cls(root, placement=placement, uid=uid, keep=keep, link_root=seen_as)
        ws.path.mkdir(mode=0o755)
        ws.inputs.mkdir(mode=0o755)
        if uid is not None and os.geteuid() == 0:
            os.chown(ws.path, uid, uid)
        return ws

    # ------------------------------------------------------------------ placing files
    def add_files(self, files: Iterable[DataFile | str | os.PathLike[str]]) -> list[DataFile]:
        """Place data files under their visible names; raises ``ValueError`` naming a bad file."""
        data_files = [as_data_file(item) for item in files]
        seen: set[str] = set(self.files)
        for df in data_files:
            name = df.visible_name
            _check_visible_name(name, df.path)
            if name in seen:
                raise ValueError(f"data file {df.path!r}: visible name {name!r} is used by two data files")
            seen.add(name)
            source = Path(df.path)
            if not source.exists():
                raise FileNotFoundError(f"data file {df.path!r} does not exist")
            if df.kind == "dir" and not source.is_dir():
                raise ValueError(f"data file {df.path!r}: kind is 'dir' but the path is not a directory")
            if df.kind != "dir" and source.is_dir():
                raise ValueError(f"data file {df.path!r}: is a directory but its kind is {df.kind!r}")
        for df in data_files:
            self._place(df)
            self.files[df.visible_name] = df
        return data_files

    def _place(self, df: DataFile) -> None:
        source = Path(df.path)
        name = df.visible_name
        if self.placement == "view":
            target = self.inputs / name
            if source.is_dir():
                shutil.copytree(source, target, symlinks=False, copy_function=_link_or_copy)
                self._mirror_tree(target, self.path / name, f"{self.link_root}/{name}")
            else:
                _link_or_copy(str(source), str(target))
                self._symlink(f"{self.link_root}/{name}", self.path / name)
            _make_read_only(target, chmod_files=False)
        else:
            target = self.path / name
            if source.is_dir():
                shutil.copytree(source, target, symlinks=False)
            else:
                shutil.copyfile(source, target)
            _make_read_only(target, chmod_files=True)

    def _symlink(self, target: str, link: Path) -> None:
        link.symlink_to(target)
        if self.uid is not None and os.geteuid() == 0:
            os.lchown(link, self.uid, self.uid)

    def _mirror_tree(self, source: Path, mirror: Path, seen_as: str) -> None:
        """Real directories for the folders of ``source``, symlinks (to ``seen_as/...``) for its files.

        The directories are made read-only (0555) once filled: the agent cannot add to or rename within
        the dataset it was given, as with the reduced mode's copy. Owned by the harness, not the cells.
        """
        made: list[Path] = []
        for dirpath, dirnames, filenames in os.walk(source):
            dirnames.sort()
            rel = os.path.relpath(dirpath, source)
            here = mirror if rel == "." else mirror / rel
            there = seen_as if rel == "." else f"{seen_as}/{Path(rel).as_posix()}"
            here.mkdir(mode=0o755)
            made.append(here)
            for fn in sorted(filenames):
                (here / fn).symlink_to(f"{there}/{fn}")
        for folder in reversed(made):
            os.chmod(folder, 0o555)

    def sqlite_names(self) -> list[str]:
        """Visible names of the placed SQLite files (the default database of an SQL cell)."""
        return sorted(name for name, df in self.files.items() if df.kind == "sqlite")

    def reset(self) -> None:
        """Empty the workspace, the inputs and the sandbox's temp dir, for the next trajectory.

        The directories themselves stay: the running sandbox has them bind-mounted, and a new directory
        at the same path would not be what it sees.
        """
        for folder in (self.path, self.inputs, self.root / "tmp"):
            if not folder.is_dir():
                continue
            with os.scandir(folder) as entries:
                for entry in entries:
                    target = Path(entry.path)
                    if entry.is_dir(follow_symlinks=False):
                        remove_tree(target)
                    else:
                        target.unlink(missing_ok=True)
        self.files.clear()

    # ------------------------------------------------------------------ cleanup
    def cleanup(self) -> None:
        """Remove the directories unless ``keep``; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if not self.keep:
            remove_tree(self.root)


def _link_or_copy(src: str, dst: str) -> str:
    """Hard-link a world-readable file (no copy for large inputs), else copy it."""
    try:
        st = os.stat(src)
        if st.st_mode & stat.S_IROTH and stat.S_ISREG(st.st_mode):
            os.link(src, dst)
            return dst
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EACCES, errno.EMLINK, errno.ENOTSUP):
            raise
    shutil.copyfile(src, dst)
    return dst


def _make_read_only(path: Path, *, chmod_files: bool) -> None:
    """Files 0444 and directories 0555 (hard links are left alone: their mode is the original's)."""
    if path.is_dir():
        for dirpath, _dirnames, filenames in os.walk(path):
            if chmod_files:
                for fn in filenames:
                    os.chmod(os.path.join(dirpath, fn), 0o444)
            os.chmod(dirpath, 0o555)
    elif chmod_files or path.stat().st_nlink == 1:
        os.chmod(path, 0o444)


def remove_tree(path: Path) -> None:
    """``rm -rf`` that also copes with read-only directories the agent (or we) left behind."""

    def _onerror(func, failed, _exc_info):  # type: ignore[no-untyped-def]
        parent = os.path.dirname(failed)
        try:
            os.chmod(parent, 0o700)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, 0o700)
            func(failed)
        except FileNotFoundError:
            pass

    if path.exists() or path.is_symlink():
        shutil.rmtree(path, onerror=_onerror)

"""The harness reading and writing a sandbox's files by the names the agent's code uses.

Why this exists: harnesses built around a container (inspect_ai's ``SandboxEnvironment.read_file`` /
``write_file``, a verifier collecting an answer file) move files in and out of the sandbox from the host.
The host process is not confined, so a name the agent controls must never lead it outside the sandbox:
the agent's code can make symlinks (``ln -s /etc secrets``) and folders, and its names are as it sees them
(``/workspace/x`` under bubblewrap, the host path under Landlock).

A name resolves component by component, each symlink read and followed *as the sandbox would see it*
(its target is a path inside the sandbox's view: the working directory or the read-only inputs), and the
walk refuses (``PermissionError``) as soon as a path leaves those two places. Writes go to the working
directory only, never through a symlink, never into a read-only folder (a data folder's mirror) and never
over a data file's view; they are atomic (a temporary file renamed into place) and, when the harness runs
as root, owned by the sandbox's uid so that the agent's code can change them.
"""

from __future__ import annotations

import os
import posixpath
import stat
import tempfile
from pathlib import Path

__all__ = ["SandboxFiles"]

_MAX_LINKS = 40  # as the kernel's ELOOP limit


class SandboxFiles:
    """The files of one workspace as seen by its sandbox (``seen_as``: where the sandbox sees the workspace).

    ``views`` maps each folder the sandbox can see, by the path it sees it at, to its host folder; the
    first one is the working directory (relative names start there), the only writable one.
    """

    def __init__(self, views: list[tuple[str, Path]], uid: int | None) -> None:
        if not views:
            raise ValueError("a sandbox shows at least its working directory")
        self.views = [(posixpath.normpath(seen), Path(host)) for seen, host in views]
        self.uid = uid

    @property
    def cwd(self) -> str:
        return self.views[0][0]

    def _match(self, view_path: str, file: str) -> tuple[str, Path]:
        for seen, host in sorted(self.views, key=lambda v: -len(v[0])):
            if view_path == seen or view_path.startswith(seen.rstrip("/") + "/"):
                return seen, host
        raise PermissionError(f"{file}: outside the sandbox's files (its working directory is {self.cwd})")

    def host_path(self, file: str) -> Path:
        """The host path of ``file`` (relative to the working directory, or absolute in the sandbox's view).

        Every symlink on the way is followed as the sandbox sees it; ``PermissionError`` when the name
        leads outside the working directory and the inputs, or through more than 40 links.
        """
        if not isinstance(file, str) or not file or "\x00" in file:
            raise ValueError(f"a file name must be a non-empty string, got {file!r}")
        view_path = file if posixpath.isabs(file) else posixpath.join(self.cwd, file)
        for _ in range(_MAX_LINKS):
            view_path = posixpath.normpath(view_path)
            seen, host = self._match(view_path, file)
            rest = [c for c in view_path[len(seen) :].split("/") if c]
            for i, part in enumerate(rest):
                host = host / part
                if host.is_symlink():
                    target = os.readlink(host)
                    parent = posixpath.join(seen, *rest[:i])
                    base = target if posixpath.isabs(target) else posixpath.join(parent, target)
                    view_path = posixpath.join(base, *rest[i + 1 :])
                    break
            else:
                return host
        raise PermissionError(f"{file}: more than {_MAX_LINKS} symbolic links")

    def read(self, file: str, *, max_bytes: int | None = None) -> bytes:
        """The bytes of ``file``; ``FileNotFoundError``, ``IsADirectoryError`` or ``PermissionError`` as named."""
        path = self.host_path(file)
        if path.is_dir():
            raise IsADirectoryError(f"{file}: is a directory")
        if not path.exists():
            raise FileNotFoundError(f"{file}: no such file in the sandbox")
        size = path.stat().st_size
        if max_bytes is not None and size > max_bytes:
            raise PermissionError(f"{file}: {size} bytes, more than the {max_bytes} a read may take")
        return path.read_bytes()

    def write(self, file: str, contents: bytes) -> Path:
        """Write ``file`` in the working directory (parents made as needed), atomically; its host path."""
        name = file if posixpath.isabs(file) else posixpath.join(self.cwd, file)
        name = posixpath.normpath(name)
        parent_view, leaf = posixpath.split(name)
        if not leaf or leaf in (".", ".."):
            raise IsADirectoryError(f"{file}: not a file name")
        parent = self._make_dirs(parent_view, file)
        work = self.views[0][1].resolve()
        if parent.resolve() != work and work not in parent.resolve().parents:
            raise PermissionError(f"{file}: only the working directory ({self.cwd}) can be written")
        if not parent.stat().st_mode & stat.S_IWUSR:
            raise PermissionError(f"{file}: its folder is read-only (a data folder)")
        target = parent / leaf
        if target.is_symlink():
            raise PermissionError(f"{file}: is a symbolic link (a data file's view, or one the code made)")
        if target.is_dir():
            raise IsADirectoryError(f"{file}: is a directory")
        fd, tmp = tempfile.mkstemp(prefix=f".{leaf}.", dir=parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(contents)
            os.chmod(tmp, 0o644)
            self._own(Path(tmp))
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target

    def _make_dirs(self, view_dir: str, file: str) -> Path:
        """The host folder of ``view_dir``, made (owned by the sandbox uid) where missing."""
        missing: list[str] = []
        current = view_dir
        while True:
            try:
                host = self.host_path(current)
            except PermissionError as exc:
                raise PermissionError(f"{file}: {exc}") from exc
            if host.exists() or host.is_symlink():
                break
            current, part = posixpath.split(current)
            missing.append(part)
        if not host.is_dir():
            raise NotADirectoryError(f"{file}: {current} is not a directory")
        for part in reversed(missing):
            host = host / part
            host.mkdir()
            self._own(host)
        return host

    def _own(self, path: Path) -> None:
        if self.uid is not None and os.geteuid() == 0:
            os.lchown(path, self.uid, self.uid)

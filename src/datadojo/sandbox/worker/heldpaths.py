"""Reach a Python installation other users cannot read through directory handles the worker holds.

Why: at the Landlock and reduced levels (no mount namespace of our own) cells must run under a dedicated
uid, not the host's uid 0: as uid 0 (even without capabilities) a cell owns root's files, so it could
``stat()`` anything under ``/root`` (the run folder, the task set's answers), ``connect()`` to root's
sockets, and ``RLIMIT_NPROC`` does not apply. But a Python installed under a folder other users cannot
traverse (pyenv under ``/root``, mode 0700) cannot be imported from by that uid. Granting the cells' uid
search permission on ``/root`` would let them ``stat()`` every name there; copying the installation is
heavy and goes stale.

Instead the worker, still root, opens each such tree once as an ``O_PATH`` directory handle at a fixed
descriptor number (:data:`FIRST_HELD_FD` up) that every forked cell process inherits, and rewrites the
interpreter's view of the tree to ``/proc/self/fd/N/...``: ``sys.path``, ``sys.prefix`` & co., and every
imported module's ``__file__``, ``__path__``, spec and loader path. A path through ``/proc/self/fd/N``
starts at the held directory without walking its ancestors, so permission is checked only below it (the
tree itself is world-readable; only an ancestor is not), and Landlock still checks the real location
against its rules. The cell's uid can then import and read the installation, and nothing else under
``/root``. Modules imported later get paths under the handle too (their finder is on the rewritten
``sys.path``); tracebacks still name the original paths (code objects keep them) and show their source
lines (``linecache`` asks the rewritten loader).

What it does not give: a *new* interpreter started from a cell (``subprocess`` of ``sys.executable``,
``multiprocessing``'s ``spawn``/``forkserver`` start methods, joblib's ``loky`` backend) resolves the
original path, which the cell's uid cannot traverse (``PermissionError``). The default ``fork`` start
method works. Make the installation world-readable (or use one outside such a folder) when cells need that.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import os
import sys
from typing import Any

__all__ = ["FIRST_HELD_FD", "hold_paths"]

#: Handles sit at FIRST_HELD_FD, FIRST_HELD_FD + 1, ...: above every fd a cell process is given
#: (:mod:`.child`), below the temporary copies it makes while moving them (64 up).
FIRST_HELD_FD = 40
MAX_HELD = 16


def _alias(path: str, mapping: list[tuple[str, str]]) -> str:
    for real, alias in mapping:
        if path == real:
            return alias
        if path.startswith(real + "/"):
            return alias + path[len(real) :]
    return path


def _rewrite_list(items: Any, mapping: list[tuple[str, str]]) -> None:
    """Rewrite a mutable sequence of paths in place (``__path__`` lists, a namespace path's ``_path``)."""
    with contextlib.suppress(Exception):
        for i, item in enumerate(list(items)):
            if isinstance(item, str):
                items[i] = _alias(item, mapping)


def _rewrite_module(module: Any, mapping: list[tuple[str, str]]) -> None:
    attrs = getattr(module, "__dict__", None)
    if not isinstance(attrs, dict):
        return
    for name in ("__file__", "__cached__"):
        value = attrs.get(name)
        if isinstance(value, str):
            attrs[name] = _alias(value, mapping)
    path = attrs.get("__path__")
    if isinstance(path, list):
        _rewrite_list(path, mapping)
    elif path is not None and isinstance(getattr(path, "_path", None), list):  # a namespace package
        _rewrite_list(path._path, mapping)
    spec = attrs.get("__spec__")
    if spec is not None:
        with contextlib.suppress(Exception):
            if isinstance(spec.origin, str):
                spec.origin = _alias(spec.origin, mapping)
            if isinstance(spec.cached, str):
                spec.cached = _alias(spec.cached, mapping)
            locations = spec.submodule_search_locations
            if isinstance(locations, list) and locations is not path:
                _rewrite_list(locations, mapping)
    loader = attrs.get("__loader__")
    if isinstance(getattr(loader, "path", None), str):
        with contextlib.suppress(Exception):
            loader.path = _alias(loader.path, mapping)


def hold_paths(paths: list[str]) -> list[int]:
    """Open each of ``paths`` (directories) at a fixed fd and rewrite the interpreter's view to it.

    Runs once in the worker (which holds the permission the cells lack), before it forks any cell
    process. Returns the descriptors, which every cell process must keep open.
    """
    if len(paths) > MAX_HELD:
        raise OSError(0, f"more than {MAX_HELD} Python trees to hold: {paths}")
    mapping: list[tuple[str, str]] = []
    held: list[int] = []
    for i, path in enumerate(paths):
        fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        target = FIRST_HELD_FD + i
        if fd != target:
            with contextlib.suppress(OSError):
                fcntl.fcntl(target, fcntl.F_GETFD)
                os.close(fd)
                raise OSError(0, f"fd {target} is in use; cannot hold {path} there")
            os.dup2(fd, target, inheritable=False)
            os.close(fd)
        held.append(target)
        mapping.append((path.rstrip("/") or "/", f"/proc/self/fd/{target}"))
    # Longest first, so that a tree inside another held one maps to its own handle.
    mapping.sort(key=lambda pair: len(pair[0]), reverse=True)
    sys.path[:] = [_alias(p, mapping) if isinstance(p, str) else p for p in sys.path]
    for name in ("prefix", "exec_prefix", "base_prefix", "base_exec_prefix"):
        setattr(sys, name, _alias(getattr(sys, name), mapping))
    for module in list(sys.modules.values()):
        _rewrite_module(module, mapping)
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
    return held

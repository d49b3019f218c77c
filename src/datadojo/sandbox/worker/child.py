"""The forked child: how every execution process is set up, and the one-request program of a chunked/SQL child.

:class:`Forker` forks a process with exactly the file descriptors it needs and sets it up (its own
session, resource limits, the cell uid, ``PR_SET_PDEATHSIG``, one stream for stdout and stderr) before
it runs its body: either :func:`child_main` (a chunked cell or an SQL statement: replay the kept chunks,
wait for the request, run it, report) or the persistent kernel's loop (:mod:`.kernel`). :func:`fork_child`
starts a *spare* child, the handle :class:`Child` is what the worker keeps of it.

This is the fork/exec hot path (``benchmarks/sandbox.py`` measures it): it imports nothing at run time
but the SQL tool, which only an SQL child needs.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import math
import os
import random
import resource
import signal
import sys
import time
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from datadojo.sandbox.landlock import build_ruleset, drop_capabilities, restrict_self
from datadojo.sandbox.protocol import read_frame_fd, write_frame_fd
from datadojo.sandbox.seccomp import install as install_seccomp
from datadojo.sandbox.worker.execution import (
    chunk_list,
    flush_std,
    install_std_streams,
    new_main_module,
    run_code,
    warm_up,
)
from datadojo.sandbox.worker.procfs import PR_SET_PDEATHSIG, end_own_processes, prctl

__all__ = ["Child", "Forker", "child_main", "confine", "fork_child", "seed_random"]

STATUS_FD = 3  # in a chunked/SQL child: where the status frame goes
SPARE_FD = 4  # in a chunked/SQL child: a copy of the capture pipe (fds 1/2 are silenced during replay)
REQUEST_FD = 5  # in a chunked/SQL child: where its one request arrives
_FIRST_FREE_FD = 64  # above every fd a child is given: temporary copies go here while fds are moved

#: Compiled silent versions of chunks that already ran, keyed by ``(filename, code)`` (see Zygote.compiled).
Compiled = dict[tuple[str, str], types.CodeType]


@dataclass(frozen=True)
class Forker:
    """Forks execution processes and sets each one up the same way.

    ``parent`` is the worker's pid: a child whose parent is already gone when it starts exits at once
    (``PR_SET_PDEATHSIG`` only covers a death after it is set).
    """

    limits: dict[str, Any]
    cell_uid: int | None
    is_root: bool
    parent: int
    seed: int
    devnull: int
    #: Landlock level: the trees every child confines itself to, first thing (see :func:`confine`).
    landlock: dict[str, list[str]] | None = None
    #: Whether a persistent kernel runs the pandas warm-up before its first cell (see kernel_loop).
    warm_kernel: bool = True
    #: The seccomp filter every child installs first (:mod:`datadojo.sandbox.seccomp`): ``None`` for
    #: none, else ``{"deny_unix_sockets": bool}``. No System V or POSIX mq IPC crosses a trajectory.
    seccomp: dict[str, bool] | None = None
    #: Directory handles of a Python tree the cell uid cannot reach by its path (:mod:`.heldpaths`):
    #: kept open in every child, at these numbers.
    held_fds: tuple[int, ...] = ()

    def fork(self, body: Callable[[], None], *, cpu_hard: bool, fds: dict[int, int]) -> int:
        """Fork a child with fds 0=/dev/null and ``fds`` (target: source), all others closed."""
        pid = os.fork()
        if pid == 0:  # child
            code = 70
            try:
                if self.landlock is not None:  # before anything else; a failure ends the child
                    confine(self.landlock)
                if self.seccomp is not None:
                    install_seccomp(deny_unix_sockets=bool(self.seccomp.get("deny_unix_sockets")))
                os.dup2(self.devnull, 0)
                # Move the fds into place (via fresh copies, so that no source is clobbered first).
                moved = {
                    target: fcntl.fcntl(src, fcntl.F_DUPFD, _FIRST_FREE_FD) for target, src in fds.items()
                }
                for target, src in moved.items():
                    os.dup2(src, target)
                if self.held_fds:  # every fd but the moved ones and the held Python trees
                    os.closerange(max(moved) + 1, self.held_fds[0])
                    os.closerange(self.held_fds[-1] + 1, 1 << 20)
                else:
                    os.closerange(max(moved) + 1, 1 << 20)
                self.setup(cpu_hard=cpu_hard)
                body()
                code = 0
            except BaseException:
                with contextlib.suppress(BaseException):
                    traceback.print_exc()
            finally:
                with contextlib.suppress(BaseException):
                    flush_std()
                os._exit(code)
        return pid

    def setup(self, *, cpu_hard: bool) -> None:
        """In a freshly forked child: session, limits, uid, signals, then Python-level streams."""
        os.setsid()
        lim = self.limits
        mb = 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (lim["memory_mb"] * mb, lim["memory_mb"] * mb))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim["max_file_mb"] * mb, lim["max_file_mb"] * mb))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        cpu = max(1, math.ceil(lim["cpu_s"]))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1) if cpu_hard else (cpu, resource.RLIM_INFINITY))
        if not (self.is_root and self.cell_uid is None):  # NPROC is not enforced for root anyway
            resource.setrlimit(resource.RLIMIT_NPROC, (lim["max_procs"], lim["max_procs"]))
        if self.cell_uid is not None and self.is_root:
            os.setgroups([])
            os.setresgid(self.cell_uid, self.cell_uid, self.cell_uid)
            os.setresuid(self.cell_uid, self.cell_uid, self.cell_uid)
        elif self.landlock is not None:
            # a forked worker's cell without root: nothing of what its worker holds in its own user
            # namespace (as root, cells always have a uid of their own: see .heldpaths)
            drop_capabilities()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
        if os.getppid() != self.parent:
            os._exit(1)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(signum, signal.SIG_DFL)
        install_std_streams()
        sys.argv = [""]
        seed_random(self.seed)


def seed_random(seed: int) -> None:
    """Seed the trajectory's random streams: ``random`` and, when imported, numpy's global generator.

    Called before any agent code of the process runs (a chunked child: before it re-runs the kept chunks;
    a kernel: before its first cell), with the trajectory's seed from the request (issue 38: a pool's
    worker used one seed per sandbox, so every trajectory of a pool drew the same "random" rows).
    """
    random.seed(seed)
    np = sys.modules.get("numpy")
    if np is not None:
        with contextlib.suppress(Exception):
            np.random.seed(seed % (2**32))


def confine(paths: dict[str, list[str]]) -> None:
    """Confine this (freshly forked) process with Landlock to ``paths`` plus its own ``/proc/<pid>``.

    The ruleset is built here, per process, because it names this process's own ``/proc`` entry (which
    :func:`.procfs.end_own_processes` reads for its children); ``/proc`` as a whole is never granted, so
    a cell cannot list the host's processes or read their command lines.
    """
    fd, _coverage = build_ruleset(
        read_exec=paths["read_exec"], read=[*paths["read"], "/proc/self"], read_write=paths["read_write"]
    )
    try:
        restrict_self(fd)
    finally:
        os.close(fd)


@dataclass
class Child:
    """A forked child waiting for (or running) one request: chunked cell or SQL statement."""

    pid: int
    req_w: int
    out_r: int
    st_r: int
    prereplayed: list[tuple[str, str]] | None = None  # the chunks it re-ran ahead of its request
    swept: bool = False  # what its replay ahead started has been killed
    seed: int | None = None  # the seed its replay ahead drew with


def fork_child(
    forker: Forker, body: Callable[[], None], prereplay: list[tuple[str, str]] | None = None
) -> Child:
    """A child that sets itself up now (and re-runs ``prereplay``), then waits for one request.

    ``body`` is its program, normally :func:`child_main` bound to the worker's compiled chunks.
    """
    out_r, out_w = os.pipe()
    st_r, st_w = os.pipe()
    rq_r, rq_w = os.pipe()
    fds = {1: out_w, 2: out_w, STATUS_FD: st_w, SPARE_FD: out_w, REQUEST_FD: rq_r}
    try:
        pid = forker.fork(body, cpu_hard=True, fds=fds)
    finally:
        for fd in (out_w, st_w, rq_r):
            os.close(fd)
    child = Child(pid=pid, req_w=rq_w, out_r=out_r, st_r=st_r)
    if prereplay:
        with contextlib.suppress(OSError):  # if it died, the request finds out
            write_frame_fd(
                rq_w, {"op": "prereplay", "chunks": [list(c) for c in prereplay], "seed": forker.seed}
            )
        child.prereplayed = list(prereplay)
        child.seed = forker.seed
    return child


# ---------------------------------------------------------------------------------- in the child process
def child_main(compiled: Compiled, sql: dict[str, Any]) -> None:
    """Runs in a forked child: (replay the kept chunks ahead,) wait for the request, run it, report."""
    warm_up(pandas=False)
    msg = read_frame_fd(REQUEST_FD)
    replayed: tuple[dict[str, Any], list[tuple[str, str]]] | None = None
    if msg is not None and msg.get("seed") is not None:
        seed_random(int(msg["seed"]))  # before the replay: it draws what the first run drew
    if msg is not None and msg.get("op") == "prereplay":
        namespace = new_main_module()
        replayed = (namespace, _replay(namespace, chunk_list(msg), compiled))
        end_own_processes()
        write_frame_fd(STATUS_FD, {"op": "replayed"})  # the worker sweeps whatever is left
        msg = read_frame_fd(REQUEST_FD)
    if msg is None:
        return
    os.close(REQUEST_FD)
    if msg.get("invalidate_caches"):
        importlib.invalidate_caches()
    status = _sql_body(msg, sql) if msg.get("op") == "sql" else _python_body(msg, replayed, compiled)
    flush_std()
    write_frame_fd(STATUS_FD, status)
    # Wait to be killed rather than exit: tearing down a copy of the worker's address space takes
    # milliseconds of CPU that would compete with the worker sending the reply.
    while True:
        time.sleep(3600)


def _replay(
    namespace: dict[str, Any], chunks: list[tuple[str, str]], compiled: Compiled
) -> list[tuple[str, str]]:
    """Run the kept chunks silently in ``namespace``; the ``(chunk, exception)`` of those that failed."""
    failed: list[tuple[str, str]] = []
    if not chunks:
        return failed
    flush_std()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)
    try:
        for chunk_file, chunk_code in chunks:
            code = compiled.get((chunk_file, chunk_code))
            replay = run_code(chunk_code, chunk_file, namespace, silent=True, compiled=code)
            if not replay["ok"]:
                failed.append((chunk_file, str(replay["exc"])))
    finally:
        flush_std()
        os.dup2(SPARE_FD, 1)
        os.dup2(SPARE_FD, 2)
    return failed


def _python_body(
    msg: dict[str, Any], replayed: tuple[dict[str, Any], list[tuple[str, str]]] | None, compiled: Compiled
) -> dict[str, Any]:
    """Chunked mode: replay the kept chunks silently (unless done ahead), then run the new one."""
    if replayed is None:
        namespace = new_main_module()
        failed = _replay(namespace, chunk_list(msg), compiled)
    else:  # the worker checked that these are the chunks of this request
        namespace, failed = replayed
    already_reported = set(msg.get("reported_failures", []))
    new = [f"{name} ({exc})" for name, exc in failed if name not in already_reported]
    status = run_code(str(msg["code"]), str(msg.get("filename") or "<cell>"), namespace, silent=False)
    status["replay_failed"] = [name for name, _exc in failed]
    if new:
        # Said once per chunk: the harness passes back the chunks it has already told the model about. A
        # harness note, so it travels in the status frame, not in the cell's stream (see reply.build_reply).
        status["replay_note"] = (
            f"[note: re-running earlier cells raised errors this time: {', '.join(new)}; "
            "variables they define may be missing]\n"
        )
    return status


def _sql_body(msg: dict[str, Any], sql: dict[str, Any]) -> dict[str, Any]:
    from datadojo.sandbox.sql import run_sql

    result = run_sql(
        str(msg["db"]),
        str(msg["query"]),
        row_limit=int(sql.get("row_limit", 200)),
        timeout_s=float(sql.get("timeout_s", 30.0)),
        save_csv=msg.get("save_csv"),
    )
    text = result.text
    sys.stdout.write(text if not text or text.endswith("\n") else text + "\n")
    return {"ok": result.error is None, "exc": "SqlError" if result.error else None, "missing": None}

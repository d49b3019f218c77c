"""Processes as the worker sees them: ``/proc`` reads, the process tree, killing, reaping, the sweep.

The worker (a child subreaper, PID 1's child inside bubblewrap's PID namespace) uses these to enforce the
process limit, to notice that a child ended, and after every execution to kill whatever the code left
running. Tests and benchmarks use :func:`live_descendants` to prove that a run left no process behind.
Only the standard library: this runs inside the sandbox, between forks.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Callable

__all__ = [
    "PR_SET_CHILD_SUBREAPER",
    "PR_SET_DUMPABLE",
    "PR_SET_PDEATHSIG",
    "all_pids",
    "count_session",
    "descendants",
    "end_own_processes",
    "exited",
    "kill_everything_now",
    "kill_session",
    "live_descendants",
    "own_children",
    "prctl",
    "proc_stat",
    "quick_clean",
    "reap_all",
    "reap_pid",
    "sweep",
]

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
_CLK_TCK = os.sysconf("SC_CLK_TCK")

try:
    _libc: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - no libc?
    _libc = None


def prctl(option: int, arg: int) -> bool:
    """``prctl(option, arg)`` through libc; ``False`` when it failed or there is no libc."""
    if _libc is None:
        return False
    return _libc.prctl(option, arg, 0, 0, 0) == 0


# ---------------------------------------------------------------------------------------------- reading
def proc_stat(pid: int | str) -> tuple[str, int, int, int, float] | None:
    """``(state, ppid, pgrp, session, cpu_seconds)`` of a process from ``/proc``, or ``None`` if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    rest = data[data.rfind(b")") + 2 :].split()
    try:
        state = rest[0].decode()
        ppid, pgrp, session = int(rest[1]), int(rest[2]), int(rest[3])
        cpu = (int(rest[11]) + int(rest[12])) / _CLK_TCK
    except (IndexError, ValueError):
        return None
    return state, ppid, pgrp, session, cpu


def all_pids() -> list[int]:
    """Every pid in ``/proc`` now (every process of the PID namespace we are in)."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def descendants(root: int, table: dict[int, tuple[str, int]]) -> list[int]:
    """Every process below ``root`` in a ``{pid: (state, ppid)}`` table."""
    children: dict[int, list[int]] = {}
    for pid, (_state, ppid) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _children_files() -> bool:
    """Whether ``/proc/<pid>/task/<tid>/children`` exists here (``CONFIG_PROC_CHILDREN``)."""
    me = os.getpid()
    return os.path.exists(f"/proc/{me}/task/{me}/children")


_HAVE_CHILDREN = _children_files()


def subtree_table(root: int) -> dict[int, tuple[str, int]] | None:
    """``{pid: (state, ppid)}`` of every process below ``root``, walking the kernel's children lists.

    Reads only the subtree's own ``/proc`` entries, where a scan of every pid reads the whole host's
    (hundreds of processes when many sandboxes share the PID namespace: the pool's fork server). ``None``
    when the kernel has no children lists (then scan, :func:`all_pids`).
    """
    if not _HAVE_CHILDREN:
        return None
    table: dict[int, tuple[str, int]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                    kids = [int(k) for k in f.read().split()]
            except (OSError, ValueError):
                continue
            for kid in kids:
                if kid in table:
                    continue
                st = proc_stat(kid)
                if st is not None:
                    table[kid] = (st[0], st[1])
                    todo.append(kid)
    return table


def live_descendants(root: int) -> set[int]:
    """Every live (not zombie) process below ``root`` now, from ``/proc``.

    What tests and benchmarks use to prove a run left no process behind (count before, count after).
    """
    table: dict[int, tuple[str, int]] = {}
    for pid in all_pids():
        stat = proc_stat(pid)
        if stat is not None and stat[0] not in ("Z", "X"):
            table[pid] = (stat[0], stat[1])
    return set(descendants(root, table))


def exited(pid: int) -> bool:
    """True when ``pid`` is gone or a zombie (it ran its last instruction)."""
    st = proc_stat(pid)
    return st is None or st[0] in ("Z", "X")


def count_session(session: int) -> int:
    """How many live processes are in ``session`` (what the process limit counts)."""
    count = 0
    for p in all_pids():
        st = proc_stat(p)
        if st is not None and st[3] == session and st[0] not in ("Z", "X"):
            count += 1
    return count


# ------------------------------------------------------------------------------------- killing, reaping
def kill_everything_now(me: int, *, pidns: bool) -> None:
    """SIGKILL every process :func:`sweep` would end, without waiting for any of them to go.

    Once a process has a SIGKILL pending it never runs its own code again, so what a trajectory left
    running is stopped the moment this returns; reaping them (the slow part: a process with a large address
    space takes milliseconds to tear down) can come later, in :func:`sweep`.
    """
    for p in _candidates(me, pidns=pidns)[1]:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)


def _candidates(me: int, *, pidns: bool) -> tuple[dict[int, tuple[str, int]], list[int]]:
    """(state and parent of each process seen, the processes a sweep of ``me`` would end, kept ones included).

    Inside the PID namespace, every process but PID 1 (bubblewrap's init, or us under unshare) and ``me``;
    outside it, every descendant of ``me`` (its own children lists where it may read them, else a scan).
    """
    subtree = None if pidns else subtree_table(me)
    if subtree is not None:
        return subtree, list(subtree)
    table = {}
    for p in all_pids():
        st = proc_stat(p)
        if st is not None:
            table[p] = (st[0], st[1])
    return table, [p for p in table if p not in (1, me)] if pidns else descendants(me, table)


def kill_session(pid: int, session: int) -> None:
    """SIGKILL the process group ``session`` and ``pid`` itself (which may have left it)."""
    with contextlib.suppress(OSError):
        os.killpg(session, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def reap_pid(pid: int, *, block: bool = False) -> int | None:
    """``waitpid`` one child: its wait status, or ``None`` if it is still running (or not ours)."""
    try:
        wpid, status = os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        return None
    return status if wpid == pid else None


def reap_all(on_reaped: Callable[[int, int], None]) -> None:
    """Reap every child that has ended, without blocking; ``on_reaped(pid, status)`` for each."""
    while True:
        try:
            wpid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if wpid == 0:
            return
        on_reaped(wpid, status)


def end_own_processes() -> None:
    """In a child, after a replay ahead: kill the processes the replay started, and reap our children.

    Only we can reap our own children (the worker's sweep would leave them as zombies under a live
    parent); grandchildren that outlive their parents go to the worker, which reaps them.
    """
    me = os.getpid()
    for _ in range(50):
        victims = []
        try:
            pids = all_pids()
        except PermissionError:  # Landlock: only our own /proc entry is readable
            # Our children by definition (their own /proc entries are not readable: no stat to check);
            # one that is a zombie already is reaped below.
            victims = [p for p in own_children() if p != me]
        else:
            for p in pids:
                st = proc_stat(p)
                if p != me and st is not None and st[0] not in ("Z", "X") and (st[1] == me or st[3] == me):
                    victims.append(p)
        for p in victims:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        while True:
            try:
                if os.waitpid(-1, 0 if victims else os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if not victims:
            return


def own_children() -> list[int]:
    """This process's children, from ``/proc/self/task/*/children`` (no listing of ``/proc`` needed).

    Their own children are not included: once a child dies they are reparented to the worker (a
    subreaper), whose sweep ends them.
    """
    found: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children") as fh:
                found += [int(x) for x in fh.read().split()]
        except OSError:
            continue
    return found


def quick_clean(session: int) -> bool:
    """True when a forked child provably left nothing behind (no scan of ``/proc`` needed).

    Its session is empty and we have no children: any survivor would have been reparented to us.
    """
    try:
        os.killpg(session, 0)
        return False
    except ProcessLookupError:
        pass
    except PermissionError:
        return False
    while True:
        try:
            wpid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if wpid == 0:
            return False


def sweep(
    me: int,
    *,
    pidns: bool,
    keep: set[int],
    sessions: set[int],
    on_reaped: Callable[[int, int], None],
) -> None:
    """Kill every process a cell left behind, and reap them (keep ``keep``: the live kernel, the spare).

    Inside the PID namespace that is every process but PID 1 (bubblewrap's init), ``me`` (the worker)
    and ``keep``; outside it, every descendant of ``me`` but ``keep`` (as a subreaper the worker inherits
    the orphans of a cell, whatever session it moved them to, so all of them stay in its subtree).
    ``on_reaped(pid, status)`` for every child reaped on the way.
    """
    for _ in range(500):
        for sid in sessions - keep:
            with contextlib.suppress(OSError):
                os.killpg(sid, signal.SIGKILL)
        table, candidates = _candidates(me, pidns=pidns)
        victims, pending = [], False
        for p in candidates:
            if p in keep:
                continue
            state, ppid = table[p]
            if state in ("Z", "X"):
                # A zombie whose parent is being killed comes to us to be reaped; one whose parent is
                # kept (the kernel) holds nothing but its pid.
                pending = pending or (ppid != me and ppid not in keep)
            else:
                victims.append(p)
        for p in victims:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        reap_all(on_reaped)
        if not victims and not pending:
            return
        time.sleep(0.002)

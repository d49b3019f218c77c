"""Counting processes and waiting for them to go, for tests that prove nothing is left running.

Built on :mod:`datadojo.sandbox.worker.procfs`, the ``/proc`` reading the sandbox worker itself uses to
enforce limits and sweep up after a cell, so tests check processes the way the worker sees them.
Waits poll with a bound that only ends a broken test (about a minute); no verdict rests on the clock.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from datadojo.sandbox.worker import live_descendants
from datadojo.sandbox.worker.procfs import all_pids, exited

__all__ = [
    "alive",
    "leftover_descendants",
    "live_descendants",
    "pids_of_uid",
    "pids_with_cmdline",
    "wait_until",
]

POLL_S = 0.05
POLLS = 1200  # 1,200 polls of 50 ms: a minute, far beyond any reap on a busy machine


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    return not exited(pid)


def pids_of_uid(uid: int) -> list[int]:
    """Every process (zombies included) owned by ``uid``, e.g. a sandbox's dedicated cell uid."""
    found = []
    for pid in all_pids():
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                found.append(pid)
        except OSError:
            continue
    return found


def pids_with_cmdline(needle: bytes) -> list[int]:
    """Every process whose ``/proc/PID/cmdline`` (arguments separated by NUL bytes) contains ``needle``."""
    found = []
    for pid in all_pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if needle in fh.read():
                    found.append(pid)
        except OSError:
            continue
    return found


async def wait_until(predicate: Callable[[], bool], *, polls: int = POLLS) -> bool:
    """Poll ``predicate`` until it holds (``True``) or ``polls`` polls have passed (its last value)."""
    for _ in range(polls):
        if predicate():
            return True
        await asyncio.sleep(POLL_S)
    return predicate()


async def leftover_descendants(
    baseline: set[int], *, root: int | None = None, polls: int = POLLS
) -> set[int]:
    """Wait for every live descendant of ``root`` (default: this process) not in ``baseline`` to go.

    Returns those still alive when the wait ends: empty when nothing was left behind. Take ``baseline``
    with :func:`live_descendants` before starting what must clean up after itself.
    """
    root = os.getpid() if root is None else root
    await wait_until(lambda: not (live_descendants(root) - baseline), polls=polls)
    return live_descendants(root) - baseline

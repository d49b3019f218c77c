"""Watching one execution: collect its output and status frame, and stop it at the first limit it breaks.

:func:`supervise` polls the process's output pipe, its status pipe and (where the kernel has them) a
pidfd that becomes readable when it ends. Each readable descriptor has one handler, and after every poll
the *stop checks* run in a fixed order — output over the cap, a status reported, the process ended, CPU
time over the limit (a persistent kernel), too many processes in its session — the first that holds ends
the watch. The wall-clock deadline bounds the whole. The result is an :class:`CellOutcome`; turning it into
the observation the model sees is :mod:`.reply`'s job.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from datadojo.sandbox.protocol import ProtocolError, decode_frame
from datadojo.sandbox.worker.procfs import count_session, exited, kill_session, proc_stat, reap_pid

__all__ = ["CellOutcome", "drain", "supervise"]

_TICK_S = 0.05  # how often CPU time / process counts are checked while a cell runs
_READ_CHUNK = 1 << 16


@dataclass
class CellOutcome:
    """What supervising one execution observed."""

    output: bytearray = field(default_factory=bytearray)
    status: dict[str, Any] | None = None
    wait_status: int | None = None  # from waitpid, when the process ended
    reason: str | None = None  # why we killed it: "wall" | "cpu" | "output" | "procs"
    duration_s: float = 0.0


class _FrameBuffer:
    """Incremental parser of length-prefixed frames read from a non-blocking pipe."""

    def __init__(self) -> None:
        self.data = bytearray()

    def feed(self, chunk: bytes) -> dict[str, Any] | None:
        """Add ``chunk``; return the first complete *status* frame, skipping ``replayed`` notices."""
        self.data += chunk
        while len(self.data) >= 4:
            length = int.from_bytes(self.data[:4], "big")
            if len(self.data) < 4 + length:
                return None
            body = bytes(self.data[4 : 4 + length])
            del self.data[: 4 + length]
            frame = decode_frame(body)
            if frame.get("op") != "replayed":
                return frame
        return None


def drain(fd: int, limit: int) -> bytes:
    """Read what is available on ``fd`` now, without blocking (up to ``limit`` bytes)."""
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    got = 0
    try:
        while got < limit:
            try:
                data = os.read(fd, min(_READ_CHUNK, max(1, limit - got)))
            except BlockingIOError:
                break
            if not data:
                break
            chunks.append(data)
            got += len(data)
    finally:
        os.set_blocking(fd, True)
    return b"".join(chunks)


def supervise(
    pid: int,
    out_r: int,
    status_r: int,
    *,
    limits: dict[str, Any],
    session: int,
    count_procs: bool,
    cpu_base: float | None = None,
) -> CellOutcome:
    """Collect output until ``pid`` reports a status frame or ends; kill it (and ``session``) on a limit.

    ``cpu_base``: measure the CPU time of ``pid`` against ``cpu_s`` (a persistent kernel, which cannot
    have a hard ``RLIMIT_CPU`` per cell); a forked child has a hard ``RLIMIT_CPU`` instead.
    ``count_procs``: count the processes of ``session`` against ``max_procs`` (when ``RLIMIT_NPROC``
    cannot do it).
    """
    return _Watch(pid, out_r, status_r, limits, session, count_procs, cpu_base).run()


class _Watch:
    """The state of one :func:`supervise` call: a handler per readable fd, and the stop checks."""

    def __init__(
        self,
        pid: int,
        out_r: int,
        status_r: int,
        limits: dict[str, Any],
        session: int,
        count_procs: bool,
        cpu_base: float | None,
    ) -> None:
        self.pid, self.out_r, self.status_r, self.session = pid, out_r, status_r, session
        self.limits = limits
        self.cap = int(limits["max_output_bytes"])
        self.cpu_base = cpu_base
        self.outcome = CellOutcome()
        self.frames = _FrameBuffer()
        self.ended = False  # the pidfd said so during the last poll
        try:
            self.pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.pidfd = None
        self.poller = select.poll()
        self.handlers: dict[int, Callable[[], None]] = {out_r: self._on_output, status_r: self._on_status}
        if self.pidfd is not None:
            self.handlers[self.pidfd] = self._on_pidfd
        for fd in self.handlers:
            self.poller.register(fd, select.POLLIN)
        # In this order; the first check that holds ends the watch.
        self.checks: list[Callable[[], bool]] = [self._over_output_cap, self._reported, self._ended]
        if cpu_base is not None:
            self.checks.append(self._over_cpu)
        if count_procs:
            self.checks.append(self._over_procs)
        # Without a pidfd the end is noticed by polling /proc, so the poll needs a short timeout too.
        self.tick = cpu_base is not None or count_procs or self.pidfd is None

    def run(self) -> CellOutcome:
        outcome = self.outcome
        start = time.monotonic()
        deadline = start + float(self.limits["wall_s"])
        try:
            while True:
                now = time.monotonic()
                if now >= deadline:
                    outcome.reason = "wall"
                    break
                timeout = min(deadline - now, _TICK_S) if self.tick else deadline - now
                self.ended = False
                for fd, _event in self.poller.poll(max(1, math.ceil(timeout * 1000))):
                    self.handlers[fd]()
                if any(check() for check in self.checks):
                    break
            if outcome.reason is not None:
                kill_session(self.pid, self.session)
                if outcome.wait_status is None:
                    outcome.wait_status = reap_pid(self.pid, block=True)
            self._collect_rest()
        finally:
            if self.pidfd is not None:
                os.close(self.pidfd)
        outcome.duration_s = time.monotonic() - start
        return outcome

    def _collect_rest(self) -> None:
        """What is still in the pipes was written before the process reported or ended."""
        outcome = self.outcome
        outcome.output += drain(self.out_r, self.cap + 1 - len(outcome.output))
        if outcome.status is None and outcome.reason is None:
            with contextlib.suppress(ProtocolError):
                outcome.status = self.frames.feed(drain(self.status_r, 1 << 20))

    # ------------------------------------------------------------------ fd handlers
    def _on_pidfd(self) -> None:
        self.ended = True

    def _on_output(self) -> None:
        data = os.read(self.out_r, _READ_CHUNK)
        if data:
            self.outcome.output += data
        else:
            self.poller.unregister(self.out_r)

    def _on_status(self) -> None:
        data = os.read(self.status_r, _READ_CHUNK)
        if not data:  # the status pipe closed: wait for the exit (or the deadline)
            self.poller.unregister(self.status_r)
        elif self.outcome.status is None:
            try:
                self.outcome.status = self.frames.feed(data)
            except ProtocolError:
                self.frames = _FrameBuffer()

    # ------------------------------------------------------------------ stop checks
    def _over_output_cap(self) -> bool:
        if len(self.outcome.output) > self.cap:
            self.outcome.reason = "output"
            return True
        return False

    def _reported(self) -> bool:
        return self.outcome.status is not None

    def _ended(self) -> bool:
        if self.ended or (self.pidfd is None and exited(self.pid)):
            self.outcome.wait_status = reap_pid(self.pid, block=True)
            return True
        return False

    def _over_cpu(self) -> bool:
        assert self.cpu_base is not None
        st = proc_stat(self.pid)
        if st is not None and st[4] - self.cpu_base > float(self.limits["cpu_s"]) + 1:
            self.outcome.reason = "cpu"
            return True
        return False

    def _over_procs(self) -> bool:
        if count_session(self.session) > int(self.limits["max_procs"]):
            self.outcome.reason = "procs"
            return True
        return False

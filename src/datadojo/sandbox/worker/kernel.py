"""The persistent kernel: a long-lived forked interpreter that holds the namespace across cells.

:func:`start_kernel` forks it (set up like every execution process, but with a soft ``RLIMIT_CPU`` that
:func:`kernel_loop` moves on before each cell, since the worker measures a cell's CPU time itself);
:class:`Kernel` is the worker's handle on it. After a crash, a kill or a timeout the worker replaces it
with a fresh fork and the observation says the state is lost.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import math
import os
import resource
import signal
from dataclasses import dataclass

from datadojo.sandbox.protocol import read_frame_fd, write_frame_fd
from datadojo.sandbox.worker.child import Forker, seed_random
from datadojo.sandbox.worker.execution import flush_std, new_main_module, run_code, warm_up

__all__ = ["Kernel", "kernel_loop", "start_kernel"]

KERNEL_IN_FD = 3  # in a kernel: requests from the worker
KERNEL_OUT_FD = 4  # in a kernel: status messages to the worker


@dataclass
class Kernel:
    """The worker's handle on a persistent interpreter."""

    pid: int
    out_r: int
    req_w: int
    st_r: int
    wait_status: int | None = None
    closed: bool = False

    def alive(self) -> bool:
        if self.wait_status is not None:
            return False
        try:
            wpid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        if wpid == self.pid:
            self.wait_status = status
            return False
        return True

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        if self.wait_status is None:
            try:
                wpid, status = os.waitpid(self.pid, 0)
                if wpid == self.pid:
                    self.wait_status = status
            except ChildProcessError:
                pass

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            for fd in (self.out_r, self.req_w, self.st_r):
                with contextlib.suppress(OSError):
                    os.close(fd)


def start_kernel(forker: Forker) -> Kernel:
    """Fork a kernel running :func:`kernel_loop`; its stdout+stderr, request and status pipes."""
    out_r, out_w = os.pipe()
    req_r, req_w = os.pipe()
    st_r, st_w = os.pipe()
    fds = {1: out_w, 2: out_w, KERNEL_IN_FD: req_r, KERNEL_OUT_FD: st_w}
    try:
        pid = forker.fork(functools.partial(kernel_loop, warm=forker.warm_kernel), cpu_hard=False, fds=fds)
    finally:
        for fd in (out_w, req_r, st_w):
            os.close(fd)
    return Kernel(pid=pid, out_r=out_r, req_w=req_w, st_r=st_r)


def kernel_loop(*, warm: bool = True) -> None:
    """The persistent interpreter: run each requested cell in one namespace, report after each.

    ``warm``: run the pandas warm-up first (pre-faults the pages a first pandas cell would copy; about
    70 ms of CPU per kernel, i.e. per trajectory). Off for workers of the pool's fork server, which trade
    that first-cell latency for CPU and memory per sandbox (see ``Zygote.prepare``).
    """
    warm_up(pandas=warm)
    namespace = new_main_module()
    seeded: int | None = None
    while True:
        msg = read_frame_fd(KERNEL_IN_FD)
        if msg is None:
            return
        if msg.get("seed") is not None and msg["seed"] != seeded:
            # The trajectory's seed, once (then the stream runs on from cell to cell, as in a notebook).
            seeded = int(msg["seed"])
            seed_random(seeded)
        if msg.get("invalidate_caches"):
            importlib.invalidate_caches()
        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = used.ru_utime + used.ru_stime
        soft = math.ceil(spent + float(msg.get("cpu_s", 30.0)))
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))
        status = run_code(str(msg["code"]), str(msg["filename"]), namespace, silent=False)
        flush_std()
        write_frame_fd(KERNEL_OUT_FD, status)

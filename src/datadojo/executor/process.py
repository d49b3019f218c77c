"""Run CPU-bound work on worker processes of this machine (:class:`ProcessExecutor`).

The corpus scan (reading and profiling files) and the EnvLunch build (executing generated SQL and pandas
programs in every counterfactual copy) spend their time in Python code, so asyncio cannot overlap them;
they need processes. This executor is the one way DataDojo does that: each process builds the worker from
the :class:`~datadojo.executor.base.WorkerSpec` once (loading what it owns: environments, readers) and then
runs items one at a time, exactly as a CPU-bound Ray worker does on a node. Results come back to the driver,
which alone writes outputs, so resume rules are those of a local run. The pool belongs to the executor
object (made on the first ``map_unordered``, shut down by :meth:`ProcessExecutor.aclose`), never to a module.

Start method: ``fork`` (the children start at once and share the driver's imported modules) when the
driver runs no other Python thread, else ``spawn`` (forking a process with threads can copy a lock held by
one of them); ``start_method`` fixes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import util as mp_util
from typing import Any

from datadojo.executor.base import Executor, ExecutorError, Outcome, Worker, WorkerSpec

__all__ = ["ProcessExecutor"]

START_METHODS = ("auto", "fork", "spawn", "forkserver")

# State of a *child* process: its worker and event loop (set by the pool's initializer, in the child).
_child_worker: Worker | None = None
_child_loop: asyncio.AbstractEventLoop | None = None


def _child_init(spec: WorkerSpec) -> None:
    """Build the worker once per process; close it when the process exits (multiprocessing finalizer)."""
    global _child_worker, _child_loop
    # A forked child inherits the driver's "running loop" and signal wake-up fd (Python < 3.12 does not
    # reset them at fork); this process runs its own loop.
    asyncio.events._set_running_loop(None)
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)
    _child_loop = asyncio.new_event_loop()
    _child_worker = _child_loop.run_until_complete(spec.build())
    mp_util.Finalize(None, _child_close, exitpriority=10)


def _child_close() -> None:
    if _child_worker is not None and _child_loop is not None:
        with contextlib.suppress(Exception):
            _child_loop.run_until_complete(_child_worker.close())
        _child_loop.close()


def _child_run(item: Any) -> tuple[Any, float, int]:
    """One item in the child: (result, seconds, pid)."""
    assert _child_worker is not None and _child_loop is not None, "worker process not initialized"
    t0 = time.perf_counter()
    result = _child_loop.run_until_complete(_child_worker.run(item))
    return result, time.perf_counter() - t0, os.getpid()


class ProcessExecutor(Executor):
    """``workers`` processes on this machine, one item at a time each (CPU-bound work only).

    ``in_flight`` items are queued per process (one queued item hides the hand-over). A worker process
    that dies (killed, out of memory) ends the run with an :class:`ExecutorError` naming the work; items
    already yielded stay yielded, so a rerun resumes after them.
    """

    name = "process"

    def __init__(self, workers: int | None = None, *, in_flight: int = 2, start_method: str = "auto") -> None:
        super().__init__()
        workers = workers if workers is not None else (os.cpu_count() or 1)
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if in_flight < 1:
            raise ValueError(f"in_flight must be >= 1, got {in_flight}")
        if start_method not in START_METHODS:
            raise ValueError(f"start_method must be one of {', '.join(START_METHODS)}, got {start_method!r}")
        self.workers = workers
        self.in_flight = in_flight
        self.start_method = start_method
        self.node = f"{socket.gethostname()} (processes)"
        self._pool: ProcessPoolExecutor | None = None
        self._pool_spec: WorkerSpec | None = None

    @property
    def remote(self) -> bool:
        return True  # the work runs outside this process: workers travel as a WorkerSpec

    def _method(self) -> str:
        if self.start_method != "auto":
            return self.start_method
        return "fork" if threading.active_count() == 1 else "spawn"

    def _pool_for(self, spec: WorkerSpec) -> ProcessPoolExecutor:
        if self._pool is not None and self._pool_spec == spec:
            return self._pool
        self._shutdown()
        ctx = multiprocessing.get_context(self._method())
        self._pool = ProcessPoolExecutor(
            max_workers=self.workers, mp_context=ctx, initializer=_child_init, initargs=(spec,)
        )
        self._pool_spec = spec
        stats = self._stats(self.node)
        stats.workers = max(stats.workers, self.workers)
        return self._pool

    async def map_unordered(
        self, worker: WorkerSpec | Worker, items: Iterable[Any]
    ) -> AsyncIterator[Outcome]:
        worker = self._spec(worker, to="another process")
        if not worker.cpu_bound:
            raise ExecutorError(
                f"{worker.label}: the process executor runs CPU-bound work one item at a time per process; "
                "work that waits on a model server runs with --executor local or ray"
            )
        pool = self._pool_for(worker)
        stats = self._stats(self.node)
        limit = self.workers * self.in_flight
        source = iter(items)
        in_flight: dict[asyncio.Future[tuple[Any, float, int]], Any] = {}
        exhausted = False
        try:
            while True:
                while not exhausted and len(in_flight) < limit:
                    try:
                        item = next(source)
                    except StopIteration:
                        exhausted = True
                        break
                    fut: Future[tuple[Any, float, int]] = pool.submit(_child_run, item)
                    in_flight[asyncio.wrap_future(fut)] = item
                if not in_flight:
                    break
                finished, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                for done in finished:
                    item = in_flight.pop(done)
                    try:
                        result, seconds, _pid = done.result()
                    except BrokenProcessPool as exc:
                        stats.lost_workers += 1
                        self._shutdown()
                        raise ExecutorError(
                            f"{worker.label}: a worker process died (killed or out of memory); rerun to resume"
                        ) from exc
                    stats.done += 1
                    stats.busy_s += seconds
                    yield Outcome(item, result, self.node, seconds)
        finally:
            for fut in in_flight:
                fut.cancel()

    def _shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
            self._pool_spec = None

    async def aclose(self) -> None:
        """Stop the worker processes (each closes its worker first)."""
        self._shutdown()

    def close(self) -> None:
        """Synchronous :meth:`aclose`, for callers outside an event loop."""
        self._shutdown()

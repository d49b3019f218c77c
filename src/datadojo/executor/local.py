"""Run the work in this process, ``max_in_flight`` items at a time on the running asyncio loop.

This is the behaviour DataDojo always had: while one episode waits for the model, others run code in
their sandboxes (DataMind §4, asynchronous rollout). Nothing is pickled, so the worker may be a ready
object holding a backend and a sandbox factory.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

from datadojo.executor.base import Executor, Outcome, Worker, WorkerSpec

__all__ = ["LocalExecutor"]


class LocalExecutor(Executor):
    """In-process executor: at most ``max_in_flight`` items run at once."""

    name = "local"

    def __init__(self, max_in_flight: int = 8) -> None:
        super().__init__()
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self.node = f"{socket.gethostname()} (local)"

    async def map_unordered(
        self, worker: WorkerSpec | Worker, items: Iterable[Any]
    ) -> AsyncIterator[Outcome]:
        own = isinstance(worker, WorkerSpec)
        runner: Worker = await worker.build() if isinstance(worker, WorkerSpec) else worker
        stats = self._stats(self.node)
        stats.workers = max(stats.workers, 1)

        async def one(item: Any) -> Outcome:
            t0 = time.perf_counter()
            result = await runner.run(item)
            return Outcome(item, result, self.node, time.perf_counter() - t0)

        source = iter(items)
        in_flight: set[asyncio.Task[Outcome]] = set()
        exhausted = False
        try:
            while True:
                while not exhausted and len(in_flight) < self.max_in_flight:
                    try:
                        item = next(source)
                    except StopIteration:
                        exhausted = True
                        break
                    in_flight.add(asyncio.ensure_future(one(item)))
                if not in_flight:
                    break
                finished, in_flight = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                for fut in finished:
                    outcome = fut.result()
                    stats.done += 1
                    stats.busy_s += outcome.seconds
                    yield outcome
        finally:
            for fut in in_flight:
                fut.cancel()
            if in_flight:
                with contextlib.suppress(BaseException):
                    await asyncio.gather(*in_flight, return_exceptions=True)
            if own:
                await runner.close()

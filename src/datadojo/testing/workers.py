"""Executor test doubles: a CPU-bound worker that records where it was built, ran and closed.

Importable by path (``datadojo.testing.workers:RecordingWorker``) so that a worker process started with
``spawn`` can build it, as the executors require of every :class:`~datadojo.executor.WorkerSpec`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["DIE", "NICE", "RecordingWorker"]

DIE = "die"  # the item that kills the worker process (a process lost to the OOM killer, say)
NICE = "nice"  # the item that returns the worker process's niceness instead of a square


class RecordingWorker:
    """``run(n)`` returns ``(n * n, pid)``; ``run(DIE)`` ends the process without cleanup; ``run(NICE)``
    returns ``(niceness, pid)``.

    Each build writes ``built-<pid>`` and each close ``closed-<pid>`` under ``marks``, so a test sees how
    many times each process built its worker and that it was closed.
    """

    def __init__(self, marks: str) -> None:
        self.marks = Path(marks)
        self.marks.mkdir(parents=True, exist_ok=True)
        with open(self.marks / f"built-{os.getpid()}", "a") as fh:
            fh.write("x")

    async def run(self, item: Any) -> tuple[Any, int]:
        if item == DIE:
            os._exit(3)
        if item == NICE:
            return os.getpriority(os.PRIO_PROCESS, 0), os.getpid()
        return item * item, os.getpid()

    async def close(self) -> None:
        (self.marks / f"closed-{os.getpid()}").write_text("closed")

"""Where work runs: in this process (:class:`LocalExecutor`), on worker processes of this machine for CPU-bound
work (:class:`ProcessExecutor`), or on a Ray cluster (:class:`RayExecutor`).

See :mod:`datadojo.executor.base` for the contract and ``docs/scaling.md`` for how a stage plugs in.
"""

from __future__ import annotations

from datadojo.executor.base import (
    Executor,
    ExecutorError,
    NodeStats,
    Outcome,
    Worker,
    WorkerSpec,
    require_spec,
)
from datadojo.executor.local import LocalExecutor
from datadojo.executor.process import ProcessExecutor

__all__ = [
    "EXECUTORS",
    "Executor",
    "ExecutorError",
    "LocalExecutor",
    "NodeStats",
    "Outcome",
    "ProcessExecutor",
    "Worker",
    "WorkerSpec",
    "make_executor",
    "require_spec",
]

EXECUTORS: tuple[str, ...] = ("local", "ray")


def make_executor(name: str, *, address: str | None = None, in_flight: int = 8) -> Executor:
    """The executor a ``--executor`` flag names. ``in_flight`` bounds items in flight per worker.

    ``local``: ``in_flight`` items at once in this process. ``ray``: one actor per node of the cluster
    at ``address`` (``None``: start or join a local Ray), ``in_flight`` items per actor.
    """
    if name == "local":
        if address:
            raise ExecutorError("--ray-address is only used with --executor ray")
        return LocalExecutor(max_in_flight=in_flight)
    if name == "ray":
        from datadojo.executor.ray_executor import RayExecutor, import_ray

        import_ray()  # fail early, with the install hint
        return RayExecutor(address, in_flight_per_worker=in_flight)
    raise ExecutorError(f"unknown executor {name!r}; expected one of {', '.join(EXECUTORS)}")

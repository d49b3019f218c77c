"""Run the work on a Ray cluster: actors on every node own the expensive state, the driver writes.

Layout (see ``docs/scaling.md``):

* on each alive node, ``workers_per_node`` actors (default: one, or one per CPU for ``cpu_bound`` work)
  pinned there with a hard node-affinity strategy; each builds its :class:`~datadojo.executor.base.Worker`
  from the :class:`~datadojo.executor.base.WorkerSpec` on first use (e.g. a sandbox pool of
  ``in_flight_per_worker`` pre-warmed bubblewrap sandboxes and one model client);
* back-pressure: at most ``in_flight_per_worker`` items are handed to an actor at once, and the next item
  goes to the actor with the fewest in flight, so a slow node simply receives less work;
* results come back through the object store to the driver, which alone appends them to the output file;
* a worker (or node) that dies takes its in-flight items with it: they are handed to another worker, up to
  ``max_attempts`` times, so the run finishes the set. If the driver dies, the output file holds every
  result it had written, and a rerun skips them (the usual resume rule).

Actors reserve no Ray CPUs (``num_cpus=0``): the work they do happens in sandbox processes and model
servers that Ray does not schedule, and the in-flight bound is what limits load. Pass ``num_cpus`` to
change that.

Niceness: Ray starts its worker processes at niceness 15 (``RAY_worker_niceness``), so that CPU-heavy
tasks leave its daemons responsive. A node actor here is the opposite kind of work: it waits on the model
and drives sandboxes, and at 15 it (and every sandbox it starts) yields the CPU to anything else on the node
(a model server, the driver), so each turn waits. ``worker_nice`` (default 0, a local run's niceness) is
set by the actor on itself before it builds anything; lowering niceness needs ``CAP_SYS_NICE`` (root in
most containers), so where that is refused the actor keeps Ray's, and when this executor starts a local
Ray itself it also asks the raylet for it. ``None`` keeps Ray's. ``benchmarks/scale.py`` measured on one
2-core node: Ray 1.51 x the local wall at 15, 1.17 x at 0 (median of three alternating pairs each).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datadojo.executor.base import Executor, ExecutorError, Outcome, Worker, WorkerSpec

__all__ = ["RayExecutor", "import_ray"]


def import_ray() -> Any:
    """``ray``, or an :class:`ExecutorError` that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ExecutorError(
            "--executor ray needs Ray: pip install 'datadojo[ray]' (on the driver and every node)"
        ) from exc
    return ray


class _NodeWorker:
    """The Ray actor: builds the worker once (lazily, under a lock) and runs items on it."""

    def __init__(self, spec: WorkerSpec, nice: int | None = None) -> None:
        self._spec = spec
        self._worker: Worker | None = None
        self._lock: asyncio.Lock | None = None
        if nice is not None and os.getpriority(os.PRIO_PROCESS, 0) > nice:
            # before the worker exists: the sandboxes and clients it starts inherit it (module docstring)
            with contextlib.suppress(PermissionError):  # no CAP_SYS_NICE: Ray's niceness stays
                os.setpriority(os.PRIO_PROCESS, 0, nice)

    async def _get(self) -> Worker:
        if self._worker is None:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                if self._worker is None:
                    self._worker = await self._spec.build()
        return self._worker

    async def start(self) -> bool:
        await self._get()
        return True

    async def run(self, item: Any) -> tuple[Any, float]:
        worker = await self._get()
        t0 = time.perf_counter()
        result = await worker.run(item)
        return result, time.perf_counter() - t0

    async def close(self) -> bool:
        if self._worker is not None:
            worker, self._worker = self._worker, None
            await worker.close()
        return True

    def pid(self) -> int:
        return os.getpid()


@dataclass
class _Slot:
    actor: Any
    node: str
    in_flight: int = 0
    alive: bool = True


@contextlib.contextmanager
def _environment_default(values: dict[str, str]) -> Iterator[None]:
    """``values`` in ``os.environ`` for the block, where the user has not set them; then as before."""
    added = [k for k in values if k not in os.environ]
    for key in added:
        os.environ[key] = values[key]
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def _package_root() -> str:
    import datadojo

    return str(Path(datadojo.__file__).resolve().parents[1])


class RayExecutor(Executor):
    """Executor on a Ray cluster (``address``: ``None`` starts or joins a local Ray, or ``ray://…``/``HOST:PORT``)."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        in_flight_per_worker: int = 8,
        workers_per_node: int | None = None,
        max_attempts: int = 3,
        num_cpus: float = 0,
        init_kwargs: dict[str, Any] | None = None,
        worker_nice: int | None = 0,
    ) -> None:
        super().__init__()
        if in_flight_per_worker < 1:
            raise ValueError(f"in_flight_per_worker must be >= 1, got {in_flight_per_worker}")
        if workers_per_node is not None and workers_per_node < 1:
            raise ValueError(f"workers_per_node must be >= 1, got {workers_per_node}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        self.address = address
        self.in_flight_per_worker = in_flight_per_worker
        self.workers_per_node = workers_per_node
        self.max_attempts = max_attempts
        self.num_cpus = num_cpus
        self.init_kwargs = dict(init_kwargs or {})
        self.worker_nice = worker_nice
        self._started_ray = False
        self.slots: list[_Slot] = []

    @property
    def remote(self) -> bool:
        return True

    def connect(self) -> Any:
        """Start or join Ray (a no-op when this process is already connected)."""
        ray = import_ray()
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, **self.init_kwargs}
            # A Ray started here starts its workers at worker_nice (the raylet reads this variable);
            # one joined keeps its own setting, and the actors lower theirs where allowed.
            env = {} if self.worker_nice is None else {"RAY_worker_niceness": str(self.worker_nice)}
            try:
                with _environment_default(env):
                    ray.init(address=self.address, **kwargs)
            except Exception as exc:  # ConnectionError, ValueError: which cluster, and why
                where = self.address or "a local Ray"
                raise ExecutorError(f"cannot start or join {where}: {exc}") from exc
            self._started_ray = True
        return ray

    def _nodes(self, ray: Any) -> list[tuple[str, str, float]]:
        """(node id, display name, CPUs) of every alive node that has CPUs."""
        out = []
        for n in ray.nodes():
            cpus = float(n.get("Resources", {}).get("CPU", 0))
            if n.get("Alive") and cpus > 0:
                out.append((n["NodeID"], f"{n.get('NodeManagerAddress', '?')} ({n['NodeID'][:8]})", cpus))
        if not out:
            raise ExecutorError("the Ray cluster has no alive node with CPUs")
        return sorted(out, key=lambda t: t[1])

    def _start_actors(self, ray: Any, spec: WorkerSpec) -> list[_Slot]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        remote_cls = ray.remote(_NodeWorker)
        root = _package_root()
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
        per = self._per_worker(spec)
        slots: list[_Slot] = []
        for node_id, label, cpus in self._nodes(ray):
            count = self.workers_per_node or (max(1, int(cpus)) if spec.cpu_bound else 1)
            stats = self._stats(label)
            stats.workers += count
            for _ in range(count):
                actor = remote_cls.options(
                    num_cpus=self.num_cpus,
                    max_concurrency=per + 2,  # + start/close calls beside the work
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                    runtime_env={"env_vars": {"PYTHONPATH": path}},
                ).remote(spec, self.worker_nice)
                actor.start.remote()  # warm up now (sandbox pool, client); errors surface on first run
                slots.append(_Slot(actor, label))
        return slots

    def _per_worker(self, spec: WorkerSpec) -> int:
        # A CPU-bound worker runs one item at a time; one queued item hides the round trip.
        return min(self.in_flight_per_worker, 2) if spec.cpu_bound else self.in_flight_per_worker

    async def map_unordered(
        self, worker: WorkerSpec | Worker, items: Iterable[Any]
    ) -> AsyncIterator[Outcome]:
        worker = self._spec(worker, to="other machines")
        ray = self.connect()
        lost_errors = tuple(
            getattr(ray.exceptions, name)
            for name in ("RayActorError", "WorkerCrashedError", "NodeDiedError", "ActorUnavailableError")
            if hasattr(ray.exceptions, name)
        )
        slots = self._start_actors(ray, worker)
        self.slots.extend(slots)
        per = self._per_worker(worker)
        source = iter(items)
        retry: deque[tuple[Any, int]] = deque()
        in_flight: dict[asyncio.Future[Any], tuple[_Slot, Any, int, Any]] = {}
        exhausted = False

        def pick() -> _Slot | None:
            alive = [s for s in slots if s.alive and s.in_flight < per]
            return min(alive, key=lambda s: s.in_flight) if alive else None

        try:
            while True:
                while True:
                    slot = pick()
                    if slot is None:
                        break
                    if retry:
                        item, attempt = retry.popleft()
                    elif not exhausted:
                        try:
                            item, attempt = next(source), 1
                        except StopIteration:
                            exhausted = True
                            continue
                    else:
                        break
                    ref = slot.actor.run.remote(item)
                    slot.in_flight += 1
                    in_flight[asyncio.wrap_future(ref.future())] = (slot, item, attempt, ref)
                if not in_flight:
                    if retry:
                        raise ExecutorError(f"{worker.label}: every Ray worker died; rerun to resume")
                    break
                finished, _ = await asyncio.wait(list(in_flight), return_when=asyncio.FIRST_COMPLETED)
                for fut in finished:
                    slot, item, attempt, _ref = in_flight.pop(fut)
                    slot.in_flight -= 1
                    stats = self._stats(slot.node)
                    try:
                        result, seconds = fut.result()
                    except lost_errors as exc:
                        if slot.alive:
                            slot.alive = False
                            stats.lost_workers += 1
                        if attempt >= self.max_attempts:
                            raise ExecutorError(
                                f"{worker.label}: an item was lost with its worker {attempt} times "
                                f"(last on {slot.node}: {type(exc).__name__}); rerun to resume"
                            ) from exc
                        stats.retried += 1
                        retry.append((item, attempt + 1))
                        continue
                    stats.done += 1
                    stats.busy_s += seconds
                    yield Outcome(item, result, slot.node, seconds, attempt)
        finally:
            for fut, (_slot, _item, _attempt, ref) in in_flight.items():
                with contextlib.suppress(Exception):
                    ray.cancel(ref)
                fut.cancel()
            await self._stop(ray, slots)

    async def _stop(self, ray: Any, slots: list[_Slot]) -> None:
        closing = [s.actor.close.remote() for s in slots if s.alive]
        if closing:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.gather(*closing, return_exceptions=True), timeout=30)
        for s in slots:
            with contextlib.suppress(Exception):
                ray.kill(s.actor)
            if s in self.slots:
                self.slots.remove(s)

    async def aclose(self) -> None:
        if self._started_ray:
            ray = import_ray()
            if ray.is_initialized():
                ray.shutdown()
            self._started_ray = False

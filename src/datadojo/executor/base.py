"""The executor contract: units of work run somewhere, results come back to the driver, the driver writes.

Every long stage of DataDojo (rollouts, evaluation trials, warm-up synthesis jobs, corpus files, and the
synthesis pipelines) has the same shape: a list of independent *items*, a *worker* that turns one item
into one result (and owns expensive state: a sandbox pool, a model client, loaded environments), and a
driver that appends each result to an append-only JSONL file as it arrives. An :class:`Executor` runs
that shape in one process (:class:`~datadojo.executor.local.LocalExecutor`) or on a Ray cluster
(:class:`~datadojo.executor.ray_executor.RayExecutor`). Only the driver ever writes outputs, so resume
rules (skip keys already in the file) stay exactly those of a local run.

A worker is described by a :class:`WorkerSpec`: an importable factory (``"package.module:callable"``)
plus keyword arguments that can be pickled. Naming the factory by import path rather than shipping a
closure is what lets a Ray node build the same worker: it imports the installed ``datadojo`` there.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib
import inspect
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from datadojo.errors import DataDojoError

__all__ = [
    "Executor",
    "ExecutorError",
    "NodeStats",
    "Outcome",
    "Worker",
    "WorkerSpec",
    "require_spec",
]


class ExecutorError(DataDojoError, RuntimeError):
    """The executor cannot run the work (no worker left, Ray missing or unreachable, a bad spec)."""


@runtime_checkable
class Worker(Protocol):
    """Turns one item into one result. ``close`` releases what the worker owns (sandboxes, clients).

    ``run`` should not raise for a failure that belongs to one item (return a record saying so, as
    :func:`datadojo.agent.run_agent` does); an exception it raises ends the whole run.
    """

    async def run(self, item: Any) -> Any: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class WorkerSpec:
    """How to build a worker wherever the work runs: ``factory`` is ``"module:callable"``.

    ``kwargs`` must be picklable (they travel to Ray nodes). ``cpu_bound`` work (corpus files, warm-up
    synthesis) gets one Ray worker per CPU of a node instead of one asynchronous worker per node.
    ``label`` names the work in progress bars and errors.
    """

    factory: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    cpu_bound: bool = False
    label: str = "work"

    def __post_init__(self) -> None:
        module, sep, name = self.factory.partition(":")
        if not sep or not module or not name:
            raise ExecutorError(f"worker factory {self.factory!r}: expected 'package.module:callable'")

    def resolve(self) -> Any:
        module, _, name = self.factory.partition(":")
        try:
            obj: Any = importlib.import_module(module)
            for part in name.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as exc:
            raise ExecutorError(f"worker factory {self.factory!r} cannot be imported: {exc}") from exc
        return obj

    async def build(self) -> Worker:
        """Call the factory (awaiting it when it is a coroutine function) and check the result."""
        made = self.resolve()(**dict(self.kwargs))
        if inspect.isawaitable(made):
            made = await made
        if not isinstance(made, Worker):
            raise ExecutorError(
                f"worker factory {self.factory!r} returned {type(made).__name__}, not a Worker"
            )
        return made


@dataclass
class Outcome:
    """One finished item: its result, the node that ran it and how long it took there."""

    item: Any
    result: Any
    node: str
    seconds: float
    attempts: int = 1


@dataclass
class NodeStats:
    """Per-node figures for the run summary."""

    node: str
    workers: int = 0
    done: int = 0
    retried: int = 0
    busy_s: float = 0.0
    lost_workers: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "workers": self.workers,
            "done": self.done,
            "retried": self.retried,
            "busy_s": round(self.busy_s, 3),
            "lost_workers": self.lost_workers,
        }


class Executor(abc.ABC):
    """Runs items through workers and yields outcomes as they finish (in any order).

    ``worker`` is a :class:`WorkerSpec`, or (for :class:`LocalExecutor` only) a ready :class:`Worker`
    object, which lets in-process callers hand over objects that cannot be pickled (a backend, a sandbox
    factory). Cancelling the iteration cancels the work in flight.
    """

    name: str = "executor"

    def __init__(self) -> None:
        self.nodes: dict[str, NodeStats] = {}

    @property
    def remote(self) -> bool:
        """True when work runs outside this process (workers must be given as a :class:`WorkerSpec`)."""
        return False

    @abc.abstractmethod
    def map_unordered(self, worker: WorkerSpec | Worker, items: Iterable[Any]) -> AsyncIterator[Outcome]:
        """Run every item; yield an :class:`Outcome` per item as it finishes."""

    def _spec(self, worker: WorkerSpec | Worker, *, to: str) -> WorkerSpec:
        """``worker`` as a :class:`WorkerSpec`, or the error saying a ready object cannot travel ``to``."""
        if not isinstance(worker, WorkerSpec):
            raise ExecutorError(
                f"the {self.name} executor needs a WorkerSpec (an importable factory and picklable arguments): "
                f"a ready {type(worker).__name__} object cannot be sent to {to}"
            )
        return worker

    def node_stats(self) -> list[NodeStats]:
        return sorted(self.nodes.values(), key=lambda s: s.node)

    def snapshot(self) -> dict[str, NodeStats]:
        """The per-node figures now, for :meth:`node_stats_since` (an executor may serve several stages)."""
        return {k: dataclasses.replace(v) for k, v in self.nodes.items()}

    def node_stats_since(self, before: Mapping[str, NodeStats]) -> list[NodeStats]:
        """Per-node figures of the work done since ``before`` (:meth:`snapshot`): what one stage did on an
        executor that a recipe shares between stages. ``workers`` are those started since (a local
        executor reuses its one: then the current count)."""
        out = []
        for cur in self.node_stats():
            b = before.get(cur.node) or NodeStats(cur.node)
            if (cur.workers, cur.done, cur.retried, cur.lost_workers) == (
                b.workers,
                b.done,
                b.retried,
                b.lost_workers,
            ):
                continue  # this node took no part since
            out.append(
                NodeStats(
                    cur.node,
                    workers=(cur.workers - b.workers) or cur.workers,
                    done=cur.done - b.done,
                    retried=cur.retried - b.retried,
                    busy_s=cur.busy_s - b.busy_s,
                    lost_workers=cur.lost_workers - b.lost_workers,
                )
            )
        return out

    def _stats(self, node: str) -> NodeStats:
        if node not in self.nodes:
            self.nodes[node] = NodeStats(node)
        return self.nodes[node]

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release what the executor holds (Ray actors); a no-op locally."""

    async def __aenter__(self) -> Executor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def require_spec(model: Any, executor: Executor, role: str = "model") -> str:
    """``model`` as the spec string a remote ``executor``'s nodes build their own backend from.

    Why: a backend object (an HTTP client with its connections, a loaded checkpoint, a test's scripted
    backend) lives in this process and cannot be sent to another machine; a spec string
    (``openai:MODEL@URL``) can, and every node then makes its own client. Raises :class:`ExecutorError`
    (exit 2) naming the role and the object's type when ``model`` is not a string.
    """
    if isinstance(model, str) and model.strip():
        return model
    raise ExecutorError(
        f"--executor {executor.name}: the {role} must be given as a model spec string "
        f"(openai:MODEL@URL), which each node loads itself; an in-process {type(model).__name__} object "
        "cannot travel to other machines"
    )

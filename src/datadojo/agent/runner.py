"""Many episodes at once: concurrent, resumable rollouts written to JSONL as they finish.

DataMind §4 ("Agentic Code-based Multi-turn Rollout") decouples generation from execution across samples
so that GPU (generation) and CPU (code execution) peaks do not coincide. Here every episode is an asyncio
task: while one waits for the model, others run code in their sandboxes. Two bounds apply: the number of
episodes in flight (``concurrency``, which is also the number of live sandboxes) and the backend's own
request concurrency.

Resumability: each finished trajectory is appended (one flushed line) to ``trajectories.jsonl``; a rerun
reads the keys ``(task_id, sample)`` already there and skips them. Ctrl-C or a kill leaves a valid file (an
interrupted last line is cut off on the next run). A failure in one episode — a crashed sandbox, a failed
request — ends that trajectory with the matching stop reason and never the run, with one exception: when
:data:`STOP_AFTER_LLM_ERRORS` episodes in a row end with ``llm_error`` the model server is down, not
unlucky, and the run stops (:class:`RolloutStopped`, exit 3) instead of spending every remaining task's
retries on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datadojo.env import AgentConfig, DataEnv, EventHook, SandboxFactory, default_sandboxes, run_episode
from datadojo.env.deferred import deferred_sessions
from datadojo.executor import Executor, ExecutorError, LocalExecutor, Worker, WorkerSpec, require_spec
from datadojo.jsonl import JsonlAppender, iter_jsonl, write_jsonl_atomic
from datadojo.llm.base import ChatBackend, LLMError
from datadojo.sandbox.result import isolation_counts
from datadojo.types import Task, Trajectory

__all__ = [
    "STOP_AFTER_LLM_ERRORS",
    "EpisodeWorker",
    "RolloutStopped",
    "RolloutSummary",
    "SandboxFactory",
    "episode_worker",
    "finished_keys",
    "model_name",
    "rollout_worker_spec",
    "run_rollouts",
]

log = logging.getLogger(__name__)


def model_name(model: ChatBackend | str) -> str:
    """The model id a backend reports, or the one a spec string names (``openai:NAME@URL`` → ``NAME``;
    ``hf:PATH`` → ``PATH``: what :func:`datadojo.llm.load_backend` would set as ``model_id``), so records
    made from a spec on a remote executor name the model as a local run does."""
    if not isinstance(model, str):
        return str(getattr(model, "model_id", "") or type(model).__name__)
    from datadojo.llm.spec import parse_model_spec

    return parse_model_spec(model).model


def finished_keys(path: str | Path) -> set[tuple[str, int]]:
    """``(task_id, sample)`` of every trajectory already in ``path`` (empty if it does not exist)."""
    path = Path(path)
    if not path.exists():
        return set()
    keys: set[tuple[str, int]] = set()
    for _lineno, rec in iter_jsonl(path):
        if isinstance(rec, dict) and "task_id" in rec:
            keys.add((str(rec["task_id"]), int(rec.get("sample", 0))))
    return keys


#: Stop reasons a rerun tries again: the model server was away, not the task's fault.
RETRY_STOP_REASONS: tuple[str, ...] = ("llm_error",)

#: Episodes in a row ending with ``llm_error`` (each after the backend's own retries) after which a
#: rollout stops: one such episode is a lost request, five in a row a server that is down or refusing the
#: model. Without the stop, a run of 100 tasks against a dead server spends every task's retries (minutes
#: and hundreds of retry lines) before it can say so. ``0`` never stops.
STOP_AFTER_LLM_ERRORS = 5


def drop_retryable(
    path: str | Path, reasons: Iterable[str] = RETRY_STOP_REASONS, samples: range | None = None
) -> int:
    """Remove from ``path`` the trajectories that ended with one of ``reasons``; return how many.

    Called when a run resumes, so that episodes lost to a transient failure (a model server that was
    down) are run again instead of being skipped as done. Only episodes whose sample number is in
    ``samples`` (the samples this run will make; all when None) are removed: a record this run would not
    make again is kept, so a later round of sampling into the same file (DataMind's reflection) never
    loses an earlier round's record. The file is rewritten atomically (temporary file + rename), and only
    when there is something to drop; other records are kept as they are.
    """
    path = Path(path)
    reasons = frozenset(reasons)
    if not reasons or not path.exists():
        return 0

    def retry(rec: Any) -> bool:
        return (
            isinstance(rec, dict)
            and rec.get("stop_reason") in reasons
            and (samples is None or rec.get("sample", 0) in samples)
        )

    dropped = sum(1 for _, rec in iter_jsonl(path) if retry(rec))
    if dropped:
        write_jsonl_atomic(path, (rec for _, rec in iter_jsonl(path) if not retry(rec)))
        log.info("%s: %d trajectories ended with %s; running them again", path, dropped, sorted(reasons))
    return dropped


@dataclass
class RolloutSummary:
    """What a run did: counts by stop reason, turns, tokens, errors and throughput."""

    path: str
    skipped: int = 0
    finished: int = 0
    turns: int = 0
    invalid_turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    stop_reasons: Counter[str] = field(default_factory=Counter)
    retried: int = 0  # earlier trajectories dropped to be run again (see drop_retryable)
    elapsed_s: float = 0.0
    interrupted: bool = False
    #: Why the run stopped early (consecutive model-server failures), ``None`` when it did not.
    stopped: str | None = None
    executor: str = "local"
    nodes: list[dict[str, Any]] = field(default_factory=list)
    #: Observations by the sandbox isolation level they ran at (bwrap / landlock / reduced).
    isolation: Counter[str] = field(default_factory=Counter)

    def add(self, traj: Trajectory) -> None:
        self.finished += 1
        self.isolation.update(isolation_counts([traj]))
        self.turns += len(traj.turns)
        self.invalid_turns += sum(1 for t in traj.turns if t.action.kind == "invalid")
        self.prompt_tokens += sum(t.tokens.prompt for t in traj.turns)
        self.completion_tokens += sum(t.tokens.completion for t in traj.turns)
        self.stop_reasons[traj.stop_reason] += 1

    @property
    def errors(self) -> int:
        return sum(self.stop_reasons[k] for k in ("llm_error", "env_error"))

    @property
    def trajectories_per_s(self) -> float:
        return self.finished / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def turns_per_s(self) -> float:
        return self.turns / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "skipped": self.skipped,
            "finished": self.finished,
            "retried": self.retried,
            "turns": self.turns,
            "invalid_turns": self.invalid_turns,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "stop_reasons": dict(self.stop_reasons),
            "elapsed_s": round(self.elapsed_s, 3),
            "trajectories_per_s": round(self.trajectories_per_s, 3),
            "turns_per_s": round(self.turns_per_s, 3),
            "interrupted": self.interrupted,
            "stopped": self.stopped,
            "executor": self.executor,
            "nodes": self.nodes,
            "isolation": dict(sorted(self.isolation.items())),
        }


class RolloutStopped(LLMError):
    """A rollout stopped because ``STOP_AFTER_LLM_ERRORS`` episodes in a row failed on the model server.

    Exit 3 like every model-server failure. ``summary`` is what the run did up to then (its trajectories,
    the failed ones included, are in the output file; the failed ones run again on the next run).
    """

    def __init__(self, message: str, summary: RolloutSummary) -> None:
        super().__init__(message, retryable=True)
        self.summary = summary

    def __reduce__(self) -> tuple[Any, ...]:
        return (RolloutStopped, (str(self), self.summary))


def _jobs(
    tasks: Iterable[Task], samples: range, done: set[tuple[str, int]], summary: RolloutSummary
) -> Iterator:
    for task in tasks:
        for sample in samples:
            if (task.id, sample) in done:
                summary.skipped += 1
                continue
            yield task, sample


class EpisodeWorker:
    """Runs one episode per item ``(task, sample)``: the unit of work of every rollout, local or on Ray.

    Holds the backend and a :class:`~datadojo.env.DataEnv` over the sandbox factory; each item is an
    episode of the environment played to its end by :func:`~datadojo.env.run_episode`. ``closers`` are
    called by :meth:`close` (what this worker created itself: a sandbox pool, a model client).
    """

    def __init__(
        self,
        backend: ChatBackend,
        sandboxes: SandboxFactory,
        config: AgentConfig,
        *,
        seed: int | None = None,
        on_event: EventHook | None = None,
        closers: tuple[Callable[[], Any], ...] = (),
    ) -> None:
        self.backend = backend
        # Each episode's sandbox opens beside its first model request (datadojo.env.deferred): a pool's
        # warm-up then runs while the model works instead of before the first request.
        self.env = DataEnv(config, sandboxes=deferred_sessions(sandboxes))
        self.config = config
        self.seed = seed
        self.on_event = on_event
        self._closers = closers

    async def run(self, item: tuple[Task, int]) -> Trajectory:
        task, sample = item
        backend = self.backend
        traj_seed = None if self.seed is None else self.seed * 1_000_003 + sample * 1_009
        try:
            episode = await self.env.reset(
                task, sample=sample, seed=traj_seed, model=backend.model_id, on_event=self.on_event
            )
            async with episode:
                trajectory = await run_episode(episode, backend)
        except Exception as exc:  # the sandbox could not be made (or closed): this trajectory only
            return self.env.failed_trajectory(
                task, exc, sample=sample, seed=traj_seed, model=backend.model_id
            )
        failure = getattr(episode.sandbox, "failure", None)
        if failure is not None:  # its sandbox could not be made: the same record as when that is known first
            return self.env.failed_trajectory(
                task, failure, sample=sample, seed=traj_seed, model=backend.model_id
            )
        return trajectory

    async def close(self) -> None:
        for close in self._closers:
            with contextlib.suppress(Exception):
                await close()


async def episode_worker(
    *,
    model: str,
    config: AgentConfig,
    sandbox: Any = None,
    pool_size: int = 8,
    seed: int | None = None,
) -> EpisodeWorker:
    """Build an :class:`EpisodeWorker` from picklable settings (what a Ray node calls, see
    :func:`rollout_worker_spec`): the model spec's backend and a pool of ``pool_size`` sandboxes."""
    from datadojo.llm import load_backend

    backend = load_backend(model, concurrency=pool_size)
    sandboxes, close_pool = default_sandboxes(pool_size, sandbox)
    return EpisodeWorker(backend, sandboxes, config, seed=seed, closers=(close_pool, backend.aclose))


def rollout_worker_spec(
    model: str, config: AgentConfig, *, sandbox: Any = None, pool_size: int = 8, seed: int | None = None
) -> WorkerSpec:
    """The :class:`~datadojo.executor.WorkerSpec` of a rollout: every node builds its own backend for
    ``model`` and a pool of ``pool_size`` sandboxes with ``sandbox`` (a :class:`SandboxConfig`)."""
    return WorkerSpec(
        "datadojo.agent.runner:episode_worker",
        {"model": model, "config": config, "sandbox": sandbox, "pool_size": pool_size, "seed": seed},
        label="rollout",
    )


async def run_rollouts(
    tasks: Iterable[Task],
    backend: ChatBackend | str,
    out: str | Path,
    *,
    n_samples: int = 1,
    config: AgentConfig | None = None,
    concurrency: int = 8,
    sandboxes: SandboxFactory | None = None,
    sandbox_config: Any = None,
    seed: int | None = None,
    on_event: EventHook | None = None,
    on_trajectory: Callable[[Trajectory, RolloutSummary], None] | None = None,
    executor: Executor | None = None,
    worker: WorkerSpec | None = None,
    first_sample: int = 0,
    extra: Mapping[str, Any] | None = None,
    retry_stop_reasons: Iterable[str] = RETRY_STOP_REASONS,
    stop_after_llm_errors: int = STOP_AFTER_LLM_ERRORS,
    summary: RolloutSummary | None = None,
) -> RolloutSummary:
    """Run ``n_samples`` episodes of every task, ``concurrency`` at a time, appending to ``out``.

    Episodes already in ``out`` are skipped (resume), except those that ended with one of
    ``retry_stop_reasons`` (by default ``llm_error``: the server was down), which are run again.

    ``out`` is a JSONL file of trajectories. ``backend`` is a backend object or a model spec string (then
    loaded here, and closed at the end). ``sandboxes`` makes a sandbox for a task (an async context
    manager); by default a :class:`datadojo.sandbox.SandboxPool` of ``concurrency`` pre-warmed workers
    with ``sandbox_config``. ``seed`` (when given) makes sampling reproducible per (task, sample, turn) on
    backends that honour seeds.

    ``executor``: where episodes run (default: this process). A remote one (Ray) needs ``backend`` as a
    model spec string and no ``sandboxes``/``on_event`` (objects cannot travel; else :class:`ExecutorError`,
    exit 2): each node builds its own
    backend and a pool of ``concurrency`` sandboxes, so ``concurrency`` is per node. ``worker`` replaces
    the episode worker (:func:`rollout_worker_spec`) for callers that build their own (the oracle agent).
    Only this process writes ``out``, whatever the executor, so the resume rule is the same.

    ``first_sample`` numbers the samples ``first_sample … first_sample + n_samples - 1`` (a later round of
    sampling, e.g. DataMind's reflection, continues the numbering of the same task); ``extra`` is merged into
    every trajectory's ``extra`` (e.g. ``{"round": 1}``).

    ``stop_after_llm_errors``: after that many episodes in a row (in the order they finish) ended with
    ``llm_error``, the episodes in flight are cancelled and :class:`RolloutStopped` is raised (``0``: never).
    ``summary``: a :class:`RolloutSummary` to fill in place (its ``path`` is replaced), so that a caller
    still has the counts when the run is interrupted (Ctrl-C reaches the caller as ``KeyboardInterrupt``,
    and the summary with it is otherwise lost).
    """
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if first_sample < 0:
        raise ValueError(f"first_sample must be >= 0, got {first_sample}")
    if stop_after_llm_errors < 0:
        raise ValueError(f"stop_after_llm_errors must be >= 0, got {stop_after_llm_errors}")
    cfg = config or AgentConfig()
    out = Path(out)
    summary = summary if summary is not None else RolloutSummary(path=str(out))
    summary.path = str(out)
    summary.retried = drop_retryable(out, retry_stop_reasons, range(first_sample, first_sample + n_samples))
    done = finished_keys(out)
    executor = executor or LocalExecutor(max_in_flight=concurrency)
    summary.executor = executor.name
    before = executor.snapshot()  # the executor may have served earlier stages: count this run's work
    closers: list[Callable[[], Any]] = []
    runner: WorkerSpec | Worker
    if executor.remote:
        if sandboxes is not None or on_event is not None:
            raise ExecutorError(
                f"--executor {executor.name} builds sandboxes on its nodes and cannot call back into this "
                "process: pass sandbox_config, not a sandboxes factory or an on_event hook"
            )
        if worker is not None:
            runner = worker
        else:
            spec = require_spec(backend, executor, "model")
            runner = rollout_worker_spec(spec, cfg, sandbox=sandbox_config, pool_size=concurrency, seed=seed)
    else:
        if isinstance(backend, str):
            from datadojo.llm import load_backend

            backend = load_backend(backend, concurrency=concurrency)
            closers.append(backend.aclose)
        if sandboxes is None:
            sandboxes, close_pool = default_sandboxes(concurrency, sandbox_config)
            closers.insert(0, close_pool)
        runner = EpisodeWorker(backend, sandboxes, cfg, seed=seed, on_event=on_event)
    started = time.perf_counter()
    jobs = _jobs(tasks, range(first_sample, first_sample + n_samples), done, summary)
    failures_in_a_row = 0
    try:
        stream = executor.map_unordered(runner, jobs)
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            with JsonlAppender(out) as writer:
                async for outcome in stream:
                    traj = outcome.result
                    if executor.remote:  # the command that made the record is this one, not a Ray worker's
                        traj.provenance.argv = list(sys.argv)
                    if extra:
                        traj.extra.update(extra)
                    writer.write(traj)
                    summary.add(traj)
                    summary.elapsed_s = time.perf_counter() - started
                    if on_trajectory is not None:
                        on_trajectory(traj, summary)
                    failures_in_a_row = failures_in_a_row + 1 if traj.stop_reason == "llm_error" else 0
                    if stop_after_llm_errors and failures_in_a_row >= stop_after_llm_errors:
                        summary.stopped = f"{failures_in_a_row} episodes in a row failed on the model server; last: {traj.error}"
                        raise RolloutStopped(
                            f"stopped: {summary.stopped}. The {summary.finished} trajectories finished so far "
                            "are kept (the failed ones run again); is the server up? Rerun the same command "
                            "to resume.",
                            summary,
                        )
    except RolloutStopped:
        raise
    except BaseException as exc:  # interrupted, or the output cannot be written (a full disk)
        # the executor's stream is closed by aclosing above, which cancels the episodes in flight
        summary.interrupted = isinstance(exc, asyncio.CancelledError | KeyboardInterrupt)
        raise
    finally:
        summary.elapsed_s = time.perf_counter() - started
        summary.nodes = [s.to_dict() for s in executor.node_stats_since(before)]
        for close in closers:
            with contextlib.suppress(Exception):
                await close()
    return summary

"""Many episodes at once: concurrent, resumable rollouts written to JSONL as they finish.

DataMind §4 ("Agentic Code-based Multi-turn Rollout") decouples generation from execution across samples
so that GPU (generation) and CPU (code execution) peaks do not coincide. Here every episode is an asyncio
task: while one waits for the model, others run code in their sandboxes. Two bounds apply: the number of
episodes in flight (``concurrency``, which is also the number of live sandboxes) and the backend's own
request concurrency.

Resumability: each finished trajectory is appended (one flushed line) to ``trajectories.jsonl``; a rerun
reads the keys ``(task_id, sample)`` already there and skips them. Ctrl-C or a kill leaves a valid file (an
interrupted last line is cut off on the next run). A failure in one episode — a crashed sandbox, a failed
request — ends that trajectory with the matching stop reason and never the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datadojo.agent.config import AgentConfig
from datadojo.agent.loop import CodeRunner, EventHook, run_agent
from datadojo.jsonl import JsonlAppender, iter_jsonl, write_jsonl_atomic
from datadojo.llm.base import ChatBackend
from datadojo.types import Provenance, Task, Trajectory, config_hash

__all__ = ["RolloutSummary", "SandboxFactory", "finished_keys", "run_rollouts"]

log = logging.getLogger(__name__)

SandboxFactory = Callable[[Task], AbstractAsyncContextManager[CodeRunner]]


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


def drop_retryable(path: str | Path, reasons: Iterable[str] = RETRY_STOP_REASONS) -> int:
    """Remove from ``path`` the trajectories that ended with one of ``reasons``; return how many.

    Called when a run resumes, so that episodes lost to a transient failure (a model server that was
    down) are run again instead of being skipped as done. The file is rewritten atomically (temporary
    file + rename), and only when there is something to drop; other records are kept as they are.
    """
    path = Path(path)
    reasons = frozenset(reasons)
    if not reasons or not path.exists():
        return 0
    dropped = sum(
        1 for _, rec in iter_jsonl(path) if isinstance(rec, dict) and rec.get("stop_reason") in reasons
    )
    if dropped:
        kept = (
            rec
            for _, rec in iter_jsonl(path)
            if not (isinstance(rec, dict) and rec.get("stop_reason") in reasons)
        )
        write_jsonl_atomic(path, kept)
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

    def add(self, traj: Trajectory) -> None:
        self.finished += 1
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
        }


def _jobs(
    tasks: Iterable[Task], n_samples: int, done: set[tuple[str, int]], summary: RolloutSummary
) -> Iterator:
    for task in tasks:
        for sample in range(n_samples):
            if (task.id, sample) in done:
                summary.skipped += 1
                continue
            yield task, sample


def _default_sandboxes(concurrency: int) -> tuple[SandboxFactory, Callable[[], Any]]:
    from datadojo.sandbox import SandboxConfig, SandboxPool

    pool = SandboxPool(SandboxConfig(), size=concurrency)
    return (lambda task: pool.session(task.files)), pool.close


async def run_rollouts(
    tasks: Iterable[Task],
    backend: ChatBackend,
    out: str | Path,
    *,
    n_samples: int = 1,
    config: AgentConfig | None = None,
    concurrency: int = 8,
    sandboxes: SandboxFactory | None = None,
    seed: int | None = None,
    on_event: EventHook | None = None,
    on_trajectory: Callable[[Trajectory, RolloutSummary], None] | None = None,
    retry_stop_reasons: Iterable[str] = RETRY_STOP_REASONS,
) -> RolloutSummary:
    """Run ``n_samples`` episodes of every task, ``concurrency`` at a time, appending to ``out``.

    Episodes already in ``out`` are skipped (resume), except those that ended with one of
    ``retry_stop_reasons`` (by default ``llm_error``: the server was down), which are run again.

    ``out`` is a JSONL file of trajectories. ``sandboxes`` makes a sandbox for a task (an async context
    manager); by default a :class:`datadojo.sandbox.SandboxPool` of ``concurrency`` pre-warmed workers.
    ``seed`` (when given) makes sampling reproducible per (task, sample, turn) on backends that honour seeds.
    """
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    cfg = config or AgentConfig()
    out = Path(out)
    summary = RolloutSummary(path=str(out))
    summary.retried = drop_retryable(out, retry_stop_reasons)
    done = finished_keys(out)
    close_pool: Callable[[], Any] | None = None
    if sandboxes is None:
        sandboxes, close_pool = _default_sandboxes(concurrency)
    chash = config_hash(cfg.to_dict())
    started = time.perf_counter()

    async def one(task: Task, sample: int) -> Trajectory:
        traj_seed = None if seed is None else seed * 1_000_003 + sample * 1_009
        try:
            async with sandboxes(task) as sandbox:
                return await run_agent(
                    task, backend, sandbox, cfg, sample=sample, seed=traj_seed, on_event=on_event
                )
        except Exception as exc:  # the sandbox could not be made (or closed): this trajectory only
            log.warning("task %s sample %d: environment failure: %s", task.id, sample, exc)
            return Trajectory(
                task_id=task.id,
                sample=sample,
                dialect=cfg.dialect,
                stop_reason="env_error",
                error=f"{type(exc).__name__}: {exc}",
                model=backend.model_id,
                provenance=Provenance(config_hash=chash, seed=traj_seed),
            )

    jobs = _jobs(tasks, n_samples, done, summary)
    in_flight: set[asyncio.Task[Trajectory]] = set()
    try:
        with JsonlAppender(out) as writer:
            exhausted = False
            while True:
                while not exhausted and len(in_flight) < concurrency:
                    try:
                        task, sample = next(jobs)
                    except StopIteration:
                        exhausted = True
                        break
                    in_flight.add(asyncio.create_task(one(task, sample)))
                if not in_flight:
                    break
                finished, in_flight = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                for fut in finished:
                    traj = fut.result()
                    writer.write(traj)
                    summary.add(traj)
                    summary.elapsed_s = time.perf_counter() - started
                    if on_trajectory is not None:
                        on_trajectory(traj, summary)
    except BaseException as exc:  # interrupted, or the output cannot be written (a full disk)
        summary.interrupted = isinstance(exc, asyncio.CancelledError | KeyboardInterrupt)
        for fut in in_flight:
            fut.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*in_flight, return_exceptions=True)
        raise
    finally:
        summary.elapsed_s = time.perf_counter() - started
        if close_pool is not None:
            with contextlib.suppress(Exception):
                await close_pool()
    return summary

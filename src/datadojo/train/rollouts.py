"""Where the RL trainer's rollouts come from: the agent runtime, with the policy served in process or by a server.

:class:`AgentRollouts` runs G episodes of each task through :func:`datadojo.agent.run_rollouts` — the ReAct
loop with a sandbox per trajectory, generation and code execution overlapped across episodes (DataMind §4,
asynchronous rollout) — and appends them to a per-step JSONL file, so a crashed step resumes where it
stopped. The generator is any :class:`~datadojo.llm.ChatBackend`:

* ``hf`` — :func:`in_process_sampler` loads the checkpoint with the transformers backend on the trainer's
  device; after every RL step :meth:`AgentRollouts.sync` copies the trained weights into it (gathered from
  DDP / FSDP / DeepSpeed by accelerate), so rollouts always come from the current policy;
* ``openai:NAME@URL`` — a vLLM / SGLang server. Its weights are whatever it serves: the trainer publishes
  the policy to ``<run>/policy`` every ``publish_every`` steps for the server to reload, and until then
  rollouts come from an older policy (the trainer's recomputed old log-probs are then only an approximation
  of the behaviour policy; see ``docs/training.md``).

Any object with ``generate`` / ``sync`` / ``close`` (the :class:`RolloutSource` protocol) can replace it,
e.g. to replay scripted trajectories in tests.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from datadojo.agent import AgentConfig, run_rollouts
from datadojo.agent.runner import SandboxFactory
from datadojo.jsonl import read_trajectories
from datadojo.llm.base import ChatBackend, SamplingParams
from datadojo.types import Task, Trajectory

__all__ = ["AgentRollouts", "RolloutSource", "in_process_sampler", "read_groups"]


class RolloutSource(Protocol):
    """Produces ``group_size`` trajectories per task for one RL step."""

    def generate(self, tasks: Sequence[Task], group_size: int, out: Path, *, seed: int) -> list[Trajectory]:
        """Trajectories for ``tasks`` (``group_size`` each, samples 0..G-1), also appended to ``out``."""
        ...

    def sync(self, accelerator: Any, model: Any) -> None:
        """Make the generator use the trainer's current weights (no-op when it cannot)."""
        ...

    def close(self) -> None: ...


def read_groups(path: Path, tasks: Sequence[Task], group_size: int) -> list[Trajectory]:
    """The trajectories of ``tasks`` in ``path`` in task order then sample order (first record per key).

    Raises ``ValueError`` naming the task when a group is incomplete.
    """
    found: dict[tuple[str, int], Trajectory] = {}
    for traj in read_trajectories(path):
        found.setdefault(traj.key, traj)
    out: list[Trajectory] = []
    for task in tasks:
        for sample in range(group_size):
            traj = found.get((task.id, sample))
            if traj is None:
                raise ValueError(f"{path}: no rollout for task {task.id!r} sample {sample}")
            out.append(traj)
    return out


def in_process_sampler(path: str, device: str, *, max_batch_size: int = 64) -> ChatBackend:
    """The transformers backend on ``device`` for a local checkpoint (the trainer's initial policy)."""
    from datadojo.llm.hf_backend import HFBackend

    return HFBackend(path, device=device, max_batch_size=max_batch_size)


class AgentRollouts:
    """Rollouts through the agent runtime (module docstring).

    ``sandboxes`` overrides the sandbox factory (default: a :class:`~datadojo.sandbox.SandboxPool` of
    ``concurrency`` pre-warmed workers per step).
    """

    def __init__(
        self,
        backend: ChatBackend,
        *,
        max_turns: int = 10,
        dialect: str = "datamind",
        sampling: SamplingParams | None = None,
        concurrency: int = 8,
        sandboxes: SandboxFactory | None = None,
    ) -> None:
        self.backend = backend
        self.agent_config = AgentConfig(
            max_turns=max_turns,
            dialect=dialect,
            sampling=sampling or SamplingParams(temperature=1.0, top_p=1.0),
        )
        self.concurrency = concurrency
        self.sandboxes = sandboxes

    def generate(self, tasks: Sequence[Task], group_size: int, out: Path, *, seed: int) -> list[Trajectory]:
        asyncio.run(
            run_rollouts(
                tasks,
                self.backend,
                out,
                n_samples=group_size,
                config=self.agent_config,
                concurrency=self.concurrency,
                sandboxes=self.sandboxes,
                seed=seed,
            )
        )
        return read_groups(out, tasks, group_size)

    def sync(self, accelerator: Any, model: Any) -> None:
        target = getattr(self.backend, "model", None)
        if target is None:  # a server: it reloads published weights itself
            return
        # Collective under FSDP / DeepSpeed: every rank runs the same backend kind, so every rank calls it.
        target.load_state_dict(accelerator.get_state_dict(model))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            asyncio.run(self.backend.aclose())

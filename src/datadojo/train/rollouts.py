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

from datadojo.agent import run_rollouts
from datadojo.env import AgentConfig, DataEnv, SandboxFactory
from datadojo.jsonl import read_trajectories
from datadojo.llm.base import ChatBackend, SamplingParams
from datadojo.types import Task, Trajectory

__all__ = [
    "AgentRollouts",
    "RolloutSource",
    "TokenRollouts",
    "in_process_sampler",
    "parse_server_spec",
    "read_groups",
    "rollout_source",
    "server_rollouts",
]


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


class TokenRollouts:
    """Token-exact rollouts from a generation server (``train rl --sampler openai:NAME@URL``).

    Each episode is a :class:`~datadojo.env.DataEnv` episode played token-in / token-out
    (:func:`datadojo.env.tokens.play_token_episode`): the server gets token-id
    prompts and returns sampled ids with their log-probs, so the trainer trains on exactly the sampled
    tokens and its truncated-IS weights compare its old log-probs with the *server's* (EnvLunch §4). Each
    trajectory keeps its tokens in ``extra["tokens"]``; the step's JSONL is appended as episodes finish and
    a rerun of the step only runs the missing ones. ``weights`` (a :class:`~datadojo.train.weight_sync.WeightSync`)
    loads the trained policy into the server in place; :attr:`policy_lag` is logged by the trainer.
    """

    def __init__(
        self,
        generate: Any,
        tokenizer: Any,
        *,
        max_turns: int = 10,
        dialect: str = "datamind",
        sampling: SamplingParams | None = None,
        concurrency: int = 8,
        sandboxes: SandboxFactory | None = None,
        weights: Any = None,
        max_context: int | None = None,
        model_id: str = "server",
    ) -> None:
        self.generate_fn = generate
        self.tokenizer = tokenizer
        self.agent_config = AgentConfig(
            max_turns=max_turns,
            dialect=dialect,
            sampling=sampling or SamplingParams(temperature=1.0, top_p=1.0),
        )
        self.concurrency = concurrency
        self.sandboxes = sandboxes
        self.weights = weights
        self.max_context = max_context
        self.model_id = model_id

    @property
    def policy_lag(self) -> int | None:
        return None if self.weights is None else self.weights.policy_lag

    async def _run(self, tasks: Sequence[Task], group_size: int, out: Path, seed: int) -> None:
        from datadojo.env.tokens import TokenEpisodeBackend, play_token_episode
        from datadojo.jsonl import append_jsonl

        done = {t.key for t in read_trajectories(out)} if out.exists() else set()
        # a pool per step when no factory is given: it lives on this step's event loop
        env = DataEnv(self.agent_config, sandboxes=self.sandboxes, pool_size=self.concurrency)
        sem = asyncio.Semaphore(self.concurrency)

        async def one(task: Task, sample: int) -> None:
            async with sem:
                traj_seed = seed * 1_000_003 + sample * 1_009
                try:
                    episode = await env.reset(task, sample=sample, seed=traj_seed, model=self.model_id)
                    async with episode:
                        backend = TokenEpisodeBackend(
                            self.generate_fn,
                            self.tokenizer,
                            model_id=self.model_id,
                            max_context=self.max_context,
                        )
                        traj = (await play_token_episode(episode, backend)).trajectory
                except Exception as exc:  # the sandbox could not be made: an infra failure of this episode
                    traj = env.failed_trajectory(
                        task, exc, sample=sample, seed=traj_seed, model=self.model_id
                    )
                append_jsonl(out, [traj])

        jobs = [one(t, s) for t in tasks for s in range(group_size) if (t.id, s) not in done]
        try:
            await asyncio.gather(*jobs)
        finally:
            with contextlib.suppress(Exception):
                await env.aclose()

    def generate(self, tasks: Sequence[Task], group_size: int, out: Path, *, seed: int) -> list[Trajectory]:
        asyncio.run(self._run(tasks, group_size, out, seed))
        return read_groups(out, tasks, group_size)

    def sync(self, accelerator: Any, model: Any) -> None:
        if self.weights is not None:
            self.weights.step(accelerator, model, self.tokenizer)

    def close(self) -> None:
        """Nothing held between steps (each step's sandbox pool is closed with it)."""


def parse_server_spec(spec: str) -> tuple[str, str]:
    """``openai:NAME@URL`` → ``(NAME, URL)`` (a query string after the URL is dropped)."""
    body = spec[len("openai:") :] if spec.startswith("openai:") else ""
    name, sep, url = body.partition("@")
    url = url.split("?", 1)[0]
    if not sep or not name or not url.startswith(("http://", "https://")):
        raise ValueError(f"sampler {spec!r}: expected openai:NAME@http://HOST:PORT/v1")
    return name, url


def server_rollouts(config: Any, tokenizer: Any, sampling: SamplingParams) -> TokenRollouts:
    """The :class:`TokenRollouts` of an :class:`~datadojo.train.config.RLConfig` whose ``sampler`` is a server:
    token-id prompts to its ``/v1/completions``, weights pushed per ``weight_update`` / ``max_policy_lag``."""
    from datadojo.env.tokens import openai_completions_generate
    from datadojo.train.weight_sync import WeightSync, server_root

    name, url = parse_server_spec(config.sampler)
    weights = None
    if config.weight_update != "none":
        kind = "sglang" if config.weight_update == "auto" else config.weight_update
        weights = WeightSync(
            server_root(url), kind, Path(config.output_dir) / "policy", max_lag=config.max_policy_lag
        )
    return TokenRollouts(
        openai_completions_generate(url, name),
        tokenizer,
        max_turns=config.max_turns,
        dialect=config.dialect,
        sampling=sampling,
        concurrency=config.concurrency,
        weights=weights,
        max_context=config.max_length,
        model_id=config.sampler,
    )


def rollout_source(config: Any, accelerator: Any) -> RolloutSource:
    """The rollout generator ``config.sampler`` names, for :class:`~datadojo.train.rl.RLTrainer`.

    ``openai:MODEL@URL`` — a vLLM / SGLang server, token-in / token-out with the server's log-probs
    (:func:`server_rollouts`); ``hf`` — the policy itself, sampled in process on the trainer's device; any
    other model spec — a chat backend through the agent runtime (:class:`AgentRollouts`). Called by the
    trainer once its accelerator exists (the in-process sampler needs its device).
    """
    sampling = SamplingParams(
        temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_new_tokens
    )
    if config.sampler.startswith("openai:"):
        from transformers import AutoTokenizer

        path = config.model[3:] if config.model.startswith("hf:") else config.model
        return server_rollouts(config, AutoTokenizer.from_pretrained(path), sampling)
    if config.sampler == "hf":
        backend = in_process_sampler(config.model, str(accelerator.device))
    else:
        from datadojo.llm import load_backend

        backend = load_backend(config.sampler)
    return AgentRollouts(
        backend,
        max_turns=config.max_turns,
        dialect=config.dialect,
        sampling=sampling,
        concurrency=config.concurrency,
    )

"""The DataDojo environment: tasks in, episodes out, each with its own sandbox session.

Why one object: the sandbox session, the dialect, the stop strings, the turn budget and the confinement
level are what make two runs comparable. Before issue 37 every consumer (the evaluation harness, ``rollout``,
``train rl``, the verl agent loop, TRL's ``rollout_func``) assembled them itself; now each asks a
:class:`DataEnv` for an :class:`~datadojo.env.episode.Episode` and plays it, so an episode means the same
thing whoever drives it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from datadojo.env.config import AgentConfig
from datadojo.env.episode import CodeRunner, Episode, EventHook, stop_strings
from datadojo.protocol import Dialect, get_dialect
from datadojo.reward.registry import RewardSpec, aclose_rewards, reward_for_task
from datadojo.types import Provenance, Task, Trajectory, config_hash

__all__ = ["DataEnv", "SandboxFactory", "default_sandboxes"]

log = logging.getLogger(__name__)

#: ``task -> async context manager giving a sandbox`` (e.g. ``lambda t: pool.session(t.files)``).
SandboxFactory = Callable[[Task], AbstractAsyncContextManager[CodeRunner]]


def default_sandboxes(pool_size: int, config: Any = None) -> tuple[SandboxFactory, Callable[[], Any]]:
    """A :class:`~datadojo.sandbox.SandboxPool` of ``pool_size`` pre-warmed workers with ``config`` (a
    :class:`~datadojo.sandbox.SandboxConfig`; None: the defaults): its session factory and its ``close``."""
    from datadojo.sandbox import SandboxConfig, SandboxPool

    pool = SandboxPool(config or SandboxConfig(), size=pool_size)
    return (lambda task: pool.session(task.files)), pool.close


class DataEnv:
    """The environment (module docstring).

    ``config`` — the episode settings (:class:`~datadojo.env.EnvConfig`: dialect, turn budget, sampling
    with its stop strings and per-reply ``max_tokens``, invalid-turn rule, final-turn note, prompt).
    ``sandboxes`` — ``task -> async context manager giving a sandbox`` for each episode; when None, a
    :class:`~datadojo.sandbox.SandboxPool` of ``pool_size`` workers is made from ``sandbox_config`` (its
    ``isolation`` is the confinement level, :attr:`confinement`) on the first :meth:`reset` and closed by
    :meth:`aclose`. ``reward`` — which reward :meth:`Episode.reward` uses: a registered name or a
    :class:`~datadojo.reward.registry.RewardSpec` (None: the one :func:`~datadojo.reward.registry.reward_for_task`
    chooses per task).
    """

    def __init__(
        self,
        config: AgentConfig | None = None,
        *,
        sandboxes: SandboxFactory | None = None,
        sandbox_config: Any = None,
        pool_size: int = 8,
        reward: RewardSpec | str | None = None,
    ) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be >= 1, got {pool_size}")
        self.config = config or AgentConfig()
        self.sandbox_config = sandbox_config
        self.pool_size = pool_size
        self.reward_spec = RewardSpec(name=reward) if isinstance(reward, str) else reward
        if self.reward_spec is not None and self.reward_spec.name:
            # an unknown name fails here, naming the known ones, not after the first episode
            reward_for_task(Task(id="reward-check", question=""), self.reward_spec)
        self._sandboxes = sandboxes
        self._close_pool: Callable[[], Any] | None = None
        self._chash = config_hash(self.config.to_dict())

    @property
    def dialect(self) -> Dialect:
        """The tag protocol of the episodes (``datamind``: ``<code>``/``<answer>``; ``sailor``: ``<python>``)."""
        return get_dialect(self.config.dialect)

    @property
    def stop(self) -> tuple[str, ...]:
        """The stop strings every model call of these episodes must use (:attr:`Episode.stop`)."""
        return stop_strings(self.config)

    @property
    def max_turns(self) -> int:
        """The turn budget T of an episode."""
        return self.config.max_turns

    @property
    def confinement(self) -> str | None:
        """The sandbox isolation level asked for (``auto``, ``bwrap``, ``landlock``, ``none``…); None when
        the sandboxes come from a caller's factory (its own business). The level each cell really ran at
        is recorded per observation (``Observation.isolation``)."""
        if self._sandboxes is not None and self._close_pool is None:
            return None
        from datadojo.sandbox import SandboxConfig

        return str((self.sandbox_config or SandboxConfig()).isolation)

    def _factory(self) -> SandboxFactory:
        if self._sandboxes is None:
            self._sandboxes, self._close_pool = default_sandboxes(self.pool_size, self.sandbox_config)
        return self._sandboxes

    async def reset(
        self,
        task: Task,
        *,
        sample: int = 0,
        seed: int | None = None,
        model: str | None = None,
        on_event: EventHook | None = None,
    ) -> Episode:
        """Open a sandbox session for ``task`` and start an episode in it (its :attr:`Episode.messages` are
        the opening messages). ``sample`` numbers repeated samples of the task; ``seed`` makes the
        sandbox's random stream and the per-turn sampling seeds reproducible; ``model`` is recorded in the
        trajectory. Close the episode (``async with``, or :meth:`Episode.close`) to return the session.
        Raises when the sandbox cannot be made (:meth:`failed_trajectory` records that as ``env_error``).
        """
        stack = contextlib.AsyncExitStack()
        try:
            sandbox = await stack.enter_async_context(self._factory()(task))
            return await Episode.start(
                task, sandbox, self.config, sample=sample, seed=seed, model=model, on_event=on_event,
                on_close=stack.aclose, reward=self.reward_spec,
            )  # fmt: skip
        except BaseException:
            await stack.aclose()
            raise

    def failed_trajectory(
        self,
        task: Task,
        exc: BaseException,
        *,
        sample: int = 0,
        seed: int | None = None,
        model: str | None = None,
    ) -> Trajectory:
        """The ``env_error`` trajectory of an episode whose sandbox could not be made or closed: that
        trajectory fails, never the run."""
        log.warning("task %s sample %d: environment failure: %s", task.id, sample, exc)
        return Trajectory(
            task_id=task.id,
            sample=sample,
            dialect=self.config.dialect,
            stop_reason="env_error",
            error=f"{type(exc).__name__}: {exc}",
            model=model,
            provenance=Provenance(config_hash=self._chash, seed=seed),
        )

    async def aclose(self) -> None:
        """Close the sandbox pool this environment made (a caller's factory is the caller's to close) and
        what its reward opened (a judge's model backend: :func:`~datadojo.reward.registry.aclose_rewards`)."""
        close, self._close_pool = self._close_pool, None
        try:
            if close is not None:
                self._sandboxes = None
                await close()
        finally:
            await aclose_rewards(self.reward_spec)

    async def __aenter__(self) -> DataEnv:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

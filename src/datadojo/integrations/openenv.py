"""DataDojo as an OpenEnv environment server: ``datadojo env serve TASKS`` (openenv-core's own server app).

OpenEnv (meta-pytorch/OpenEnv, PyPI ``openenv-core``) defines an environment as a Gym-style object with
``reset`` / ``step`` / ``state`` served over HTTP and a WebSocket (``/ws``) by
``openenv.core.env_server.create_app``; clients (``GenericEnvClient``, TRL, SkyRL, verifiers' OpenEnv
taskset) hold one WebSocket session per episode. This module gives that server a DataDojo environment:

* **reset** (``task_id``: which task, default the next one in file order; ``sample``: the sample index
  that seeds the sandbox, default 0; ``seed``) opens an :class:`~datadojo.env.Episode` and returns its
  opening ``messages`` with the ``stop`` strings and ``max_tokens`` the model call must use;
* **step** takes ``{"reply": <the model's text>, "finish_reason": "stop" | "length"}`` and returns the
  ``observation`` text (the next user message) and ``done``; on the last step ``reward`` is the registry's
  reward (:func:`~datadojo.integrations.source.episode_reward`, the one ``datadojo eval`` reports), and
  ``reward_parts`` / ``correct`` / ``stop_reason`` say why;
* **state** reports the task, sample, turn count, stop reason and reward so far.

Every WebSocket session has its own :class:`DataDojoOpenEnv` (its own episode and sandbox session); all of
them share one :class:`~datadojo.env.DataEnv` and its sandbox pool. openenv-core's stateless HTTP
``/reset`` and ``/step`` make a new environment for every request (their design): a multi-turn DataDojo
episode needs the WebSocket session, and an HTTP ``/step`` says so.

openenv-core is optional: :func:`create_openenv_app` raises one line naming the extra to install.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import threading
from typing import Any

from datadojo.env import DataEnv, Episode
from datadojo.integrations.source import AdapterError, EnvSource, episode_reward

__all__ = ["EXTRA_HINT", "create_openenv_app", "serve_openenv"]

EXTRA_HINT = "`datadojo env serve` needs openenv-core: pip install 'datadojo[openenv]'"


def _openenv() -> Any:
    try:
        from openenv.core import env_server
    except ImportError as exc:
        raise AdapterError(EXTRA_HINT) from exc
    return env_server


class _Shared:
    """What every session of one server shares: the tasks, the one DataEnv (made on the server's loop)."""

    def __init__(self, source: EnvSource, pool_size: int) -> None:
        self.source, self.pool_size = source, pool_size
        self._env: DataEnv | None = None
        self._order = itertools.cycle(list(source.tasks))
        self._lock = threading.Lock()

    def data_env(self) -> DataEnv:
        if self._env is None:
            self._env = DataEnv(
                self.source.config,
                sandbox_config=self.source.sandbox,
                pool_size=self.pool_size,
                reward=self.source.reward,
            )
        return self._env

    def next_task_id(self) -> str:
        with self._lock:
            return next(self._order)

    async def aclose(self) -> None:
        if self._env is not None:
            await self._env.aclose()
            self._env = None


@functools.cache
def _types() -> tuple[type, type, type, type]:
    """The action, observation, state and environment classes, built on first use (optional dependency)."""
    es = _openenv()
    from pydantic import Field

    class DataDojoReply(es.Action):  # type: ignore[misc,name-defined]
        """One model reply: its text and why generation stopped (``length``: cut by the token limit)."""

        reply: str = Field(..., description="the model's reply, as generated (stop string cut or kept)")
        finish_reason: str | None = Field("stop", description="stop (a stop string or end of text) or length")
        stop_sequence: str | None = Field(
            None, description="the stop string that ended it, when the server says"
        )

    class DataDojoObservation(es.Observation):  # type: ignore[misc,name-defined]
        """What the agent sees: the opening messages after reset, the next user message after a step."""

        task_id: str = ""
        sample: int = 0
        messages: list[dict[str, str]] = Field(default_factory=list, description="opening messages (reset)")
        text: str = Field("", description="the observation to send as the next user message")
        stop: list[str] = Field(default_factory=list, description="stop strings the model call must use")
        max_tokens: int | None = None
        turn: int = 0
        stop_reason: str | None = None
        correct: bool | None = None
        reward_parts: dict[str, float] = Field(default_factory=dict)

    class DataDojoEnvState(es.State):  # type: ignore[misc,name-defined]
        task_id: str | None = None
        sample: int = 0
        done: bool = False
        stop_reason: str | None = None
        reward: float | None = None
        reward_parts: dict[str, float] = Field(default_factory=dict)

    class DataDojoOpenEnv(es.Environment):  # type: ignore[misc,name-defined]
        """One session's environment: one DataDojo episode at a time (module docstring)."""

        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self, shared: _Shared) -> None:
            super().__init__()
            self._shared = shared
            self._episode: Episode | None = None
            self._loop: asyncio.AbstractEventLoop | None = None
            self._state = DataDojoEnvState()

        def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Any:
            raise AdapterError("DataDojo's OpenEnv environment is asynchronous: the server calls reset_async")

        def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
            raise AdapterError("DataDojo's OpenEnv environment is asynchronous: the server calls step_async")

        async def reset_async(
            self,
            seed: int | None = None,
            episode_id: str | None = None,
            task_id: str | None = None,
            sample: int = 0,
            **kwargs: Any,
        ) -> Any:
            await self._close_episode()
            self._loop = asyncio.get_running_loop()
            tid = task_id if task_id is not None else self._shared.next_task_id()
            task = self._shared.source.task(tid)
            episode = await self._shared.data_env().reset(task, sample=sample, seed=seed)
            self._episode = episode
            self._state = DataDojoEnvState(episode_id=episode_id, task_id=task.id, sample=sample)
            return DataDojoObservation(
                task_id=task.id,
                sample=sample,
                messages=[dict(m) for m in episode.messages],
                stop=list(episode.stop),
                max_tokens=episode.max_tokens,
            )

        async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
            episode = self._episode
            if episode is None:
                raise AdapterError(
                    "no episode: reset first, in the same WebSocket session (openenv-core's HTTP /step "
                    "starts a new environment per request and cannot continue an episode)"
                )
            if episode.done:
                raise AdapterError(
                    f"the episode of {episode.task.id} has ended ({episode.stop_reason}): reset"
                )
            result = await episode.step(
                action.reply, finish_reason=action.finish_reason, stop_sequence=action.stop_sequence
            )
            self._state.step_count += 1
            obs = DataDojoObservation(
                task_id=episode.task.id,
                sample=episode.sample,
                text=result.observation,
                stop=list(episode.stop),
                max_tokens=episode.max_tokens,
                turn=self._state.step_count,
                done=result.done,
            )
            if result.done:
                reward = await episode_reward(self._shared.source, episode)
                obs.reward, obs.correct, obs.reward_parts = reward.total, reward.correct, dict(reward.parts)
                obs.stop_reason = episode.stop_reason
                self._state.done, self._state.stop_reason = True, episode.stop_reason
                self._state.reward, self._state.reward_parts = reward.total, dict(reward.parts)
                await self._close_episode(keep=True)
            return obs

        @property
        def state(self) -> Any:
            return self._state

        async def _close_episode(self, *, keep: bool = False) -> None:
            if self._episode is not None:
                await self._episode.close()
                if not keep:
                    self._episode = None

        def close(self) -> None:
            """openenv-core calls this from a worker thread (a session's end) or on the loop (HTTP routes)."""
            episode, loop = self._episode, self._loop
            self._episode = None
            if episode is None or loop is None or loop.is_closed():
                return
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                loop.create_task(episode.close())
            else:
                asyncio.run_coroutine_threadsafe(episode.close(), loop).result(timeout=60)

    return DataDojoReply, DataDojoObservation, DataDojoEnvState, DataDojoOpenEnv


def create_openenv_app(source: EnvSource, *, pool_size: int = 8, max_sessions: int = 64) -> Any:
    """openenv-core's FastAPI app serving ``source``'s tasks, at most ``max_sessions`` episodes at once."""
    es = _openenv()
    reply_cls, obs_cls, _, env_cls = _types()
    shared = _Shared(source, pool_size)
    app = es.create_app(
        lambda: env_cls(shared),
        reply_cls,
        obs_cls,
        env_name="datadojo",
        max_concurrent_envs=max_sessions,
    )
    app.router.on_shutdown.append(shared.aclose)
    return app


def serve_openenv(
    source: EnvSource,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    pool_size: int = 8,
    max_sessions: int = 64,
) -> None:
    """Serve ``source`` with uvicorn until interrupted (``datadojo env serve``)."""
    app = create_openenv_app(source, pool_size=pool_size, max_sessions=max_sessions)
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="info")

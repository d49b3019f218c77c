"""The one ReAct driver: ask the model for a reply, step the episode, until it ends.

:func:`run_episode` plays an :class:`~datadojo.env.episode.Episode` with a :class:`~datadojo.llm.ChatBackend`;
:func:`run_agent` does the same for a task and a sandbox the caller holds. Everything a turn does is the
episode's (:meth:`Episode.step`); the driver only owns what concerns the model: the prompt is never truncated
silently (a request that would not fit the context window ends the episode with ``context_limit``), and a
failed request ends it with ``llm_error`` (``context_limit`` when the server says the prompt overflowed).
Neither function raises for a model or sandbox failure.
"""

from __future__ import annotations

import time

from datadojo.env.config import AgentConfig
from datadojo.env.episode import CodeRunner, Episode, EventHook
from datadojo.llm.base import ChatBackend, LLMError
from datadojo.types import Task, TokenUsage, Trajectory

__all__ = ["run_agent", "run_episode"]


async def run_episode(episode: Episode, backend: ChatBackend) -> Trajectory:
    """Play ``episode`` to its end with ``backend`` and return its trajectory (the sandbox stays open)."""
    while not episode.done:
        max_tokens = episode.max_tokens or 0
        if not backend.fits(episode.messages, max_tokens):
            episode.end(
                "context_limit",
                f"the next request ({backend.count_tokens(episode.messages)} prompt tokens + {max_tokens} for "
                f"the reply) exceeds the context window of {backend.context_window}",
            )
            break
        t0 = time.perf_counter()
        try:
            completions = await backend.chat(
                episode.messages,
                params=episode.config.sampling,
                n=1,
                stop=episode.stop,
                seed=episode.turn_seed,
            )
        except LLMError as exc:
            episode.end("context_limit" if exc.context_overflow else "llm_error", str(exc))
            break
        llm_s = time.perf_counter() - t0
        completion = completions[0]
        await episode.step(
            completion.text,
            finish_reason=completion.finish_reason,
            stop_sequence=completion.stop_sequence,
            tokens=TokenUsage(prompt=completion.prompt_tokens, completion=completion.completion_tokens),
            llm_s=llm_s,
        )
    return episode.trajectory()


async def run_agent(
    task: Task,
    backend: ChatBackend,
    sandbox: CodeRunner,
    config: AgentConfig | None = None,
    *,
    sample: int = 0,
    seed: int | None = None,
    on_event: EventHook | None = None,
) -> Trajectory:
    """Run one episode of ``task`` in ``sandbox`` (kept open; the caller owns it) and return its trajectory
    (never raises for model/environment failures)."""
    episode = await Episode.start(
        task, sandbox, config, sample=sample, seed=seed, model=backend.model_id, on_event=on_event
    )
    return await run_episode(episode, backend)

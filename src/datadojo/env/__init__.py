"""The DataDojo environment: one interface every trainer, harness and adapter drives (issue 37).

A task in, the opening messages out; a model reply in, an observation and whether the episode ended out::

    from datadojo.env import DataEnv

    async with DataEnv(config) as env:
        async with await env.reset(task) as episode:
            while not episode.done:
                reply = await my_model(episode.messages, stop=episode.stop, max_tokens=episode.max_tokens)
                result = await episode.step(reply)
            trajectory = episode.trajectory()

:class:`DataEnv` owns the sandbox sessions (a pool it makes, or a caller's factory), the dialect, the stop
strings, the turn budget and the confinement level; :class:`Episode` is the ReAct turn, written once;
:func:`run_agent` / :func:`run_episode` are the driver over a :class:`~datadojo.llm.ChatBackend`. The
token-exact mode (:mod:`datadojo.env.tokens`) keeps the ids a sampler generated: :class:`TokenStepper` steps
an episode with token ids, :func:`run_token_episode` drives one against a token generator. See
``docs/environment.md``.
"""

from __future__ import annotations

from datadojo.env.config import AgentConfig, EnvConfig
from datadojo.env.drive import run_agent, run_episode
from datadojo.env.environment import DataEnv, SandboxFactory, default_sandboxes
from datadojo.env.episode import AgentEvent, CodeRunner, EnvUsageError, Episode, EventHook, StepResult
from datadojo.env.tokens import (
    EpisodeResult,
    GenOutput,
    TokenEpisode,
    TokenEpisodeBackend,
    TokenStep,
    TokenStepper,
    run_token_episode,
)

__all__ = [
    "AgentConfig",
    "AgentEvent",
    "CodeRunner",
    "DataEnv",
    "EnvConfig",
    "EnvUsageError",
    "Episode",
    "EpisodeResult",
    "EventHook",
    "GenOutput",
    "SandboxFactory",
    "StepResult",
    "TokenEpisode",
    "TokenEpisodeBackend",
    "TokenStep",
    "TokenStepper",
    "default_sandboxes",
    "run_agent",
    "run_episode",
    "run_token_episode",
]

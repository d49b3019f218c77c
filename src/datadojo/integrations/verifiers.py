"""DataDojo as a verifiers environment: ``vf-eval datadojo -a '{"tasks": "tasks.jsonl"}'``.

verifiers (PrimeIntellect-ai/verifiers, pinned at 0.3.1: see docs/environment.md) finds an environment by
its id: ``vf.load_environment("datadojo")`` imports the module named by the id (``-`` → ``_``, the part after
the last ``/``) and calls its ``load_environment(**env_args)``. ``datadojo.load_environment`` is this
module's :func:`load_environment`, so installing ``datadojo[verifiers]`` is installing the environment.

The environment is a ``MultiTurnEnv`` over :class:`datadojo.env.DataEnv`:

* ``setup_state`` opens an :class:`~datadojo.env.Episode` (its sandbox session) for the row's task and
  makes the episode's opening messages, stop strings and reply budget the rollout's (a sandbox that cannot
  be made ends that rollout as ``env_error``, rewarded as ``datadojo eval`` rewards one, never the run);
* every model reply is stepped through ``Episode.step`` as soon as it arrives (``add_model_response``),
  not in ``env_response``: verifiers asks for an environment response only before the *next* model call,
  so a reply after which verifiers stops on its own (its turn cap, a timeout) would otherwise never reach
  the sandbox or the reward. ``env_response`` returns the observation of that step, and the episode's end
  (answer, turn budget, malformed turns, sandbox failure) is verifiers' stop condition;
* the rubric's reward is the registry's (:func:`~datadojo.integrations.source.episode_reward`, the reward
  ``datadojo eval`` reports), with each named part as a metric, so verifiers' results show which part moved.

verifiers is imported when :func:`load_environment` runs: the rest of DataDojo never needs it.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from datadojo.env import DataEnv, Episode
from datadojo.integrations.source import (
    AdapterError,
    EnvSource,
    episode_reward,
    load_env_source,
    trajectory_reward,
)
from datadojo.reward.registry import RewardResult
from datadojo.types import Task, Trajectory

__all__ = ["EXTRA_HINT", "load_environment"]

EXTRA_HINT = "the verifiers adapter needs verifiers: pip install 'datadojo[verifiers]'"

#: verifiers' state keys this adapter writes (plain JSON values: the state crosses verifiers' env server).
TASK_KEY = "datadojo_task_id"
STOP_KEY = "datadojo_stop_reason"


@dataclass
class _Live:
    """The open episodes of one environment, by verifiers' trajectory id (states must stay JSON)."""

    episodes: dict[str, Episode] = field(default_factory=dict)
    failed: dict[str, tuple[Task, Trajectory]] = field(default_factory=dict)  # no sandbox: env_error
    rewards: dict[str, RewardResult] = field(default_factory=dict)
    samples: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def _vf() -> Any:
    try:
        import verifiers as vf
    except ImportError as exc:
        raise AdapterError(EXTRA_HINT) from exc
    return vf


@functools.cache
def _classes() -> tuple[type, type]:
    """The environment and rubric classes, built on first use (verifiers is an optional dependency)."""
    vf = _vf()
    from verifiers.utils.message_utils import normalize_messages

    class DataDojoRubric(vf.Rubric):  # type: ignore[misc,name-defined]
        """The registry's reward (weight 1), with its named parts added to the rollout's metrics."""

        def __init__(self, source: EnvSource, live: _Live) -> None:
            super().__init__()
            self._source, self._live = source, live
            self.add_reward_func(self.reward, weight=1.0)

        async def reward(self, state: Any, **_: Any) -> float:
            return float((await self._result(state)).total)

        async def _result(self, state: Any) -> RewardResult:
            key = state["trajectory_id"]
            cached = self._live.rewards.get(key)
            if cached is None:
                episode = self._live.episodes.pop(key, None)
                if episode is not None:
                    cached = await episode_reward(self._source, episode)
                elif key in self._live.failed:
                    cached = await trajectory_reward(self._source, *self._live.failed.pop(key))
                else:
                    raise AdapterError(f"no DataDojo episode for verifiers trajectory {key}")
                self._live.rewards[key] = cached
            return cached

        async def _add_parts(self, state: Any) -> None:
            result = self._live.rewards.pop(state["trajectory_id"], None)
            if result is not None:
                state["metrics"] = {
                    **(state.get("metrics") or {}),
                    **result.parts,
                    "correct": float(result.correct),
                }

        async def score_rollout(self, state: Any) -> None:
            await super().score_rollout(state)
            await self._add_parts(state)

        async def score_group(self, states: list[Any]) -> None:
            await super().score_group(states)
            for state in states:
                await self._add_parts(state)

    class DataDojoVerifiersEnv(vf.MultiTurnEnv):  # type: ignore[misc,name-defined]
        """A verifiers ``MultiTurnEnv`` whose turns are DataDojo episode steps (module docstring)."""

        def __init__(self, source: EnvSource, data_env: DataEnv, live: _Live, **kwargs: Any) -> None:
            self.source, self.data_env, self.live = source, data_env, live
            super().__init__(max_turns=-1, **kwargs)  # the episode owns the turn budget

        async def setup_state(self, state: Any) -> Any:
            task = self.source.task(state["info"]["task_id"])
            sample = self.live.samples[task.id]
            self.live.samples[task.id] += 1
            state[TASK_KEY] = task.id
            try:
                episode = await self.data_env.reset(task, sample=sample)
            except Exception as exc:  # no sandbox for it: this rollout is an env_error, never the run's end
                traj = self.data_env.failed_trajectory(task, exc, sample=sample)
                self.live.failed[state["trajectory_id"]] = (task, traj)
                state[STOP_KEY] = "env_error"
                return state
            self.live.episodes[state["trajectory_id"]] = episode
            state["prompt"] = normalize_messages(
                [dict(m) for m in episode.messages], field_name="datadojo.prompt"
            )
            sampling = dict(state.get("sampling_args") or {})
            sampling["stop"] = list(episode.stop)
            if episode.max_tokens is not None:
                sampling["max_tokens"] = episode.max_tokens
            state["sampling_args"] = sampling
            return state

        async def add_model_response(self, state: Any, prompt_messages: Any, response: Any) -> None:
            await super().add_model_response(state, prompt_messages, response)
            episode = self.live.episodes[state["trajectory_id"]]
            message = response.message
            finish = "length" if message.finish_reason == "length" or message.is_truncated else "stop"
            result = await episode.step(str(message.content or ""), finish_reason=finish)
            state["datadojo_observation"] = result.observation
            if result.done:
                state[STOP_KEY] = episode.stop_reason

        async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
            return [vf.UserMessage(content=state["datadojo_observation"])]

        @vf.stop(priority=50)
        async def datadojo_episode_done(self, state: Any) -> bool:
            return state.get(STOP_KEY) is not None

        @vf.cleanup
        async def datadojo_close_episode(self, state: Any) -> None:
            episode = self.live.episodes.get(state["trajectory_id"])
            if episode is None:
                return
            if not episode.done:
                # verifiers stopped it: the model call failed, or the prompt outgrew the model's window
                reason = "context_limit" if state.get("prompt_too_long") else "llm_error"
                error = state.get("error")
                episode.end(reason, None if error is None else str(error))
                state[STOP_KEY] = reason
            await episode.close()

        @vf.teardown
        async def datadojo_close_pool(self) -> None:
            await self.data_env.aclose()

    return DataDojoVerifiersEnv, DataDojoRubric


def load_environment(
    tasks: str,
    data: str | None = None,
    limit: int | None = None,
    max_turns: int | None = None,
    dialect: str | None = None,
    max_tokens: int | None = None,
    reward: str | None = None,
    judge: str | None = None,
    isolation: str | None = None,
    options: dict[str, Any] | None = None,
    pool_size: int = 8,
) -> Any:
    """The verifiers environment serving ``tasks`` (a task file or a benchmark name) with DataDojo's sandbox.

    ``data``, ``limit``, ``max_turns``, ``dialect``, ``max_tokens``, ``isolation`` and ``options`` mean what
    they mean to ``datadojo eval``; ``reward`` names a registered reward (default: the one the registry chooses per
    task) and ``judge`` its judge's model spec; verifiers reports the reward's named parts as metrics.
    """
    env_cls, rubric_cls = _classes()
    from datasets import Dataset  # a dependency of verifiers

    source = load_env_source(
        tasks, data=data, limit=limit, options=options, max_turns=max_turns, dialect=dialect, max_tokens=max_tokens,
        isolation=isolation, reward=reward, judge=judge,
    )  # fmt: skip
    data_env = DataEnv(
        source.config, sandbox_config=source.sandbox, pool_size=pool_size, reward=source.reward
    )
    rows = [
        {"prompt": [{"role": "user", "content": task.question}], "info": {"task_id": task.id}, "answer": ""}
        for task in source.tasks.values()
    ]
    live = _Live()
    rubric = rubric_cls(source, live)
    return env_cls(
        source,
        data_env,
        live,
        eval_dataset=Dataset.from_list(rows),
        rubric=rubric,
    )  # env_id / env_args: verifiers sets them to what it was given (its env server reloads from them)

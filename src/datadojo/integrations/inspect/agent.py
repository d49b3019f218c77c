"""The inspect_ai solver that plays a DataDojo episode, and the scorer that returns the registry's reward.

The solver drives :class:`datadojo.env.Episode` — the one ReAct loop's state machine — with inspect's own
model (``get_model()``: whatever ``--model`` names, e.g. ``openai-api/NAME/MODEL`` for an OpenAI-compatible
server): the episode's messages go out with its stop strings and reply budget, each reply goes back
through ``Episode.step`` (dialect parsing, the cell in the sample's DataDojo sandbox, the turn budget).
The trajectory is kept in the sample's store; the scorer rebuilds it and asks
:func:`datadojo.reward.registry.score_pairs` for the reward — the same function every other consumer
calls — and reports the parts as the score's metadata, so inspect's log shows which part moved.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import asynccontextmanager
from typing import Any

from datadojo.env import DataEnv, EnvConfig
from datadojo.integrations.inspect.samples import task_from_metadata
from datadojo.integrations.inspect.sandbox import sandbox_environment_class
from datadojo.reward.registry import RewardSpec, score_pairs
from datadojo.types import Task, TokenUsage, Trajectory

__all__ = [
    "TRAJECTORY_KEY",
    "datadojo_scorer",
    "datadojo_solver",
    "finish_reason",
    "generate_config",
    "raw_reply",
]

#: The sample-store key of the episode's trajectory (its JSON form).
TRAJECTORY_KEY = "datadojo_trajectory"


def finish_reason(stop_reason: str | None) -> str:
    """inspect's ``ModelOutput.stop_reason`` as the OpenAI finish reason the dialect expects.

    A reply cut by the token limit stays unclosed (an invalid turn, as in ``datadojo eval``); every other
    ending is a stop, whose cut closing tag the dialect re-appends.
    """
    return "length" if stop_reason in ("max_tokens", "model_length") else "stop"


def raw_reply(output: Any, response: Any = None) -> str:
    """The model's reply exactly as the server sent it.

    Why not ``output.completion``: inspect's OpenAI-compatible providers lift a ``<think>…</think>`` block
    out of the text into a reasoning part (stripped), and DataDojo's dialect needs the block where the model
    wrote it (its format part, the trajectory kept for training). The raw response is in the model call
    inspect records (``response``: its JSON); without it (a provider that records none) the reply is rebuilt
    from the reasoning parts and the text, which keeps the tags but not the exact whitespace between them.
    """
    if isinstance(response, dict):
        choices = response.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            content = (choices[0].get("message") or {}).get("content")
            if isinstance(content, str):
                return content
    message = output.choices[0].message if output.choices else None
    if message is None or isinstance(message.content, str):
        return output.completion
    parts = []
    for item in message.content:
        if getattr(item, "type", None) == "reasoning" and not getattr(item, "redacted", False):
            parts.append(f"<think>{item.reasoning}</think>\n")
        elif getattr(item, "type", None) == "text":
            parts.append(item.text)
    return "".join(parts)


def _last_response(output: Any) -> Any:
    """The raw JSON response of the model call that produced ``output`` (inspect's transcript), or None."""
    from inspect_ai.event import ModelEvent
    from inspect_ai.log import transcript

    event = transcript().history.find_last(lambda e: isinstance(e, ModelEvent) and e.output is output)
    call = getattr(event, "call", None)
    return getattr(call, "response", None)


def generate_config(config: EnvConfig, stop: Sequence[str], max_tokens: int | None) -> Any:
    """What each model call asks inspect for: the episode's stop strings and reply budget, and the
    environment's sampling (DataMind §5.1's temperature 0.7 / top-p 0.95, or the benchmark's, as
    ``datadojo eval`` samples) unless inspect's own ``--temperature`` / ``--top-p`` were given."""
    from inspect_ai.model import GenerateConfig

    try:  # the eval's generate config (inspect's command line); not public, hence the fallback
        from inspect_ai.model._generate_config import active_generate_config

        active = active_generate_config()
    except ImportError:
        active = GenerateConfig()
    sampling = config.sampling
    return GenerateConfig(
        stop_seqs=list(stop),
        max_tokens=max_tokens,
        temperature=active.temperature if active.temperature is not None else sampling.temperature,
        top_p=active.top_p if active.top_p is not None else sampling.top_p,
    )


def _chat_messages(messages: list[dict[str, str]]) -> list[Any]:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    out = []
    for i, m in enumerate(messages):
        kind = kinds.get(m["role"])
        if kind is None:
            raise ValueError(f"episode message {i}: role {m['role']!r} has no inspect message type")
        out.append(kind(content=m["content"]))
    return out


def datadojo_solver(config: EnvConfig, reward: RewardSpec | str | None = None) -> Any:
    """An inspect solver playing each sample's DataDojo task in the sample's ``datadojo`` sandbox."""
    from inspect_ai.model import get_model
    from inspect_ai.solver import solver
    from inspect_ai.util import sandbox

    env_class = sandbox_environment_class()

    @solver(name="datadojo_agent")
    def _factory() -> Any:
        async def solve(state: Any, generate: Any) -> Any:
            task = task_from_metadata(state.metadata)
            session = sandbox().as_type(env_class).session

            @asynccontextmanager
            async def this_sample(_task: Task) -> Any:
                yield session  # inspect's sample_cleanup closes it

            env = DataEnv(config, sandboxes=this_sample, reward=reward)
            model = get_model()
            try:
                sample = max(state.epoch - 1, 0)  # inspect counts epochs from 1, DataDojo samples from 0
                async with await env.reset(task, sample=sample, model=str(model)) as episode:
                    gen = generate_config(config, episode.stop, episode.max_tokens)
                    while not episode.done:
                        t0 = time.perf_counter()
                        try:
                            output = await model.generate(_chat_messages(episode.messages), config=gen)
                        except Exception as exc:  # the model call failed: the episode ends, unscored as eval
                            episode.end("llm_error", f"{type(exc).__name__}: {exc}")
                            break
                        usage = output.usage
                        tokens = TokenUsage(
                            prompt=usage.input_tokens if usage else None,
                            completion=usage.output_tokens if usage else None,
                        )
                        await episode.step(
                            raw_reply(output, _last_response(output)),
                            finish_reason=finish_reason(output.stop_reason),
                            tokens=tokens,
                            llm_s=time.perf_counter() - t0,
                        )
                        state.output = output
                    trajectory = episode.trajectory()
            finally:
                await env.aclose()
            state.messages = _chat_messages(episode.messages)
            state.store.set(TRAJECTORY_KEY, trajectory.to_dict())
            state.completed = True
            return state

        return solve

    return _factory()


def datadojo_scorer(reward: RewardSpec | str | None = None) -> Any:
    """An inspect scorer: the registry's reward of the sample's trajectory, its parts as metadata."""
    from inspect_ai.scorer import Score, mean, scorer, stderr

    spec = RewardSpec(name=reward) if isinstance(reward, str) else reward

    @scorer(name="datadojo_reward", metrics=[mean(), stderr()])
    def _factory() -> Any:
        async def score(state: Any, target: Any) -> Any:
            task = task_from_metadata(state.metadata)
            data = state.store.get(TRAJECTORY_KEY)
            if data is None:
                raise ValueError(
                    f"sample {task.id}: no DataDojo trajectory (run it with the datadojo solver)"
                )
            trajectory = Trajectory.model_validate(data)
            [result] = await score_pairs([(task, trajectory)], spec)
            return Score(
                value=result.total,
                answer=trajectory.final_answer,
                explanation=f"stop reason {trajectory.stop_reason}; parts {result.parts}",
                metadata={
                    "parts": dict(result.parts),
                    "correct": result.correct,
                    "stop_reason": trajectory.stop_reason,
                    "turns": len(trajectory.turns),
                },
            )

        return score

    return _factory()

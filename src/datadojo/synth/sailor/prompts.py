"""The one prompt builder of the ``sailor`` dialect: synthesis, the SFT records and ``eval scidata`` agree.

A policy trained on SciDataSailor trajectories is evaluated by ``datadojo eval scidata`` (and rolled out by
``train rl`` on ``rl_tasks.jsonl``) through the agent loop, whose opening messages come from
:func:`datadojo.env.prompts.episode_prompt` under :meth:`datadojo.eval.harness.EvalRun.agent_config` for
:class:`~datadojo.bench.scidata.SciData`: the benchmark's turn budget (12 replies, §5.1), the ``sailor``
template, the readers note as the description of a task without one. Synthesis opens its trees with the same
call (:func:`policy_prompt`), so the SFT records carry exactly the prompt evaluation shows — not a budget of
``max_depth + 1`` replies the policy never meets again. The folder is listed by its tree only
(:func:`datadojo.env.prompts.describe_files`): per-file statistics in the prompt would give away the
answers of the QA tasks (the mean pH a question asks for).

Each probe turn states its strategy in the thought (:func:`probe_turn`): the policy wrote the probe for an
instruction naming the strategy, which evaluation never sends, so the SFT turn carries the strategy itself —
the paper's "intermediate action-type supervision" (§4.1) — and the policy's own history during synthesis
uses the same text.
"""

from __future__ import annotations

from typing import Any

from datadojo.env.config import AgentConfig
from datadojo.env.prompts import episode_prompt
from datadojo.llm.base import SamplingParams
from datadojo.protocol import get_dialect
from datadojo.types import Action, Task

__all__ = ["agent_config", "policy_prompt", "policy_task", "probe_thought", "probe_turn"]


def agent_config(profile_chars: int = AgentConfig().profile_chars) -> AgentConfig:
    """The agent loop settings ``eval scidata`` uses (its benchmark defaults), for synthesis prompts too."""
    from datadojo.bench.scidata import SciData

    d = SciData.defaults
    return AgentConfig(
        max_turns=d.max_turns,
        dialect=d.dialect,
        language=d.language,
        sampling=SamplingParams(temperature=d.temperature, top_p=d.top_p),
        profile_chars=profile_chars,
    )


def policy_task(task: Task) -> Task:
    """``task`` as ``eval scidata`` loads it: the readers note as its description when it has none."""
    from datadojo.bench.scidata import READERS_NOTE

    return task if task.description else task.model_copy(update={"description": READERS_NOTE})


def policy_prompt(task: Task, profile_chars: int = AgentConfig().profile_chars) -> list[dict[str, Any]]:
    """The opening messages of an episode of ``task`` — in synthesis, in SFT records and in evaluation."""
    return episode_prompt(policy_task(task), agent_config(profile_chars))


def probe_thought(strategy: str | None, thought: str) -> str:
    """The thought of a probe turn with its strategy label and what the strategy does, first."""
    from datadojo.synth.sailor.strategies import STRATEGIES

    if not strategy:
        return thought
    what = STRATEGIES.get(strategy)
    label = f"Strategy: {strategy}" + (f" ({what})." if what else ".")
    return f"{label} {thought}".strip()


def probe_turn(strategy: str | None, thought: str, code: str) -> str:
    """The assistant text of one probe: ``<think>strategy + thought</think><python>code</python>``."""
    return get_dialect("sailor").format_turn(probe_thought(strategy, thought), Action(kind="code", text=code))

"""The one prompt builder of the ``datamind`` dialect for synthesis, SFT export, RL tasks and evaluation.

DataMind §3.2: the procedural knowledge *k* (and, in reflection, the earlier attempts and the critique *c*)
steer the **teacher** only; the trained agent is prompted with the question and the files. Everything the
policy sees is therefore built from one task, :func:`policy_task` — the query without its profile *d* in
``description`` (the file list already profiles every file), without *k*, the reflection feedback or the
category's answer-form hint — through :func:`datadojo.env.prompts.episode_prompt`, the builder the agent loop
itself uses (``eval``, ``train rl`` rollouts). Sampling adds the guidance to that same task
(:func:`sampling_task`), so the plain SFT prompt is exactly the sampled prompt minus the guidance, and equal
to what evaluation and RL show for the task written to ``rl_tasks.jsonl``.
"""

from __future__ import annotations

from typing import Any

from datadojo.env.config import AgentConfig
from datadojo.env.prompts import episode_prompt
from datadojo.llm.base import SamplingParams
from datadojo.synth.datamind.config import DataMindConfig
from datadojo.synth.datamind.taxonomy import Taxonomy
from datadojo.types import Task

__all__ = ["GUIDANCE_KEYS", "agent_config", "policy_prompt", "policy_task", "sampling_task"]

#: ``Task.extra`` keys only the teacher sees (rendered by :func:`datadojo.env.prompts.build_prompt`).
GUIDANCE_KEYS: tuple[str, ...] = ("workflow", "feedback", "answer_format")


def agent_config(config: DataMindConfig) -> AgentConfig:
    """The agent loop settings of the teacher's episodes (T turns, DataMind's sampling defaults)."""
    return AgentConfig(
        max_turns=config.max_turns,
        dialect="datamind",
        sampling=SamplingParams(
            temperature=config.temperature, top_p=config.top_p, max_tokens=config.max_tokens
        ),
    )


def policy_task(query: Task) -> Task:
    """The task as the trained policy meets it: no *d* duplicate, no guidance keys in ``extra``."""
    extra = {k: v for k, v in query.extra.items() if k not in GUIDANCE_KEYS}
    return query.model_copy(update={"description": None, "extra": extra})


def sampling_task(
    query: Task, taxonomy: Taxonomy, config: DataMindConfig, feedback: str | None = None
) -> Task:
    """:func:`policy_task` plus what steers the teacher: *k*, the category's answer form, reflection feedback."""
    task = policy_task(query)
    extra: dict[str, Any] = dict(task.extra)
    try:
        category = taxonomy.get(str(query.category))
    except KeyError:
        category = None
    if config.use_workflow and category is not None:
        extra["workflow"] = category.knowledge(config.detailed_workflow)
    form = query.extra.get("answer_form") or (category.answer_form if category is not None else None)
    if form:
        extra["answer_format"] = form
    if feedback:
        extra["feedback"] = feedback
    return task.model_copy(update={"extra": extra})


def policy_prompt(query: Task, config: DataMindConfig) -> list[dict[str, Any]]:
    """The plain SFT prompt of ``query``: what ``eval`` / ``train rl`` show for :func:`policy_task` (query)."""
    return episode_prompt(policy_task(query), agent_config(config))

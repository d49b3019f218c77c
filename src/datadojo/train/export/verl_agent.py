"""DataDojo's ReAct loop as a verl agent loop (``agent_name: datadojo``), token-in / token-out.

verl (0.9) runs multi-turn rollouts through *agent loops*: ``AgentLoopBase`` subclasses registered by name
(``verl.experimental.agent_loop.agent_loop.register``, or a YAML list named by
``actor_rollout_ref.rollout.agent.agent_loop_config_path``: :func:`datadojo.train.export.verl.agent_loop_config`
writes it, ``export_verl`` beside the parquet files) and picked
per row by the dataset's ``agent_name`` column. :class:`DataDojoAgentLoop` runs
an episode of :class:`datadojo.env.DataEnv` token-in / token-out (:func:`datadojo.env.tokens.play_token_episode`)
against verl's ``server_manager.generate`` (token ids in,
token ids and log-probs out): DataDojo's dialect parsing, stop strings and invalid-turn feedback, and one
persistent sandbox per trajectory (state and files kept across turns). Its :class:`AgentLoopOutput` is the
exact token record — the sampled ids with mask 1 and their log-probs (verl's ``rollout_log_probs``, for its
rollout-correction IS), the environment's ids with mask 0 — cut to ``rollout.response_length``.

``reward_score`` is DataDojo's reward on the real trajectory (not on scraped text), as the reward registry
chooses and computes it (:func:`datadojo.reward.registry.score_pairs`): DataMind's format / answer / length
reward, or for an EnvLunch task the agreement reward replayed in every counterfactual copy (the copies
under ``extra_info["tasks_dir"]``); its weighted parts go to ``reward_extra_info``.

Infrastructure failures (the server or the sandbox failed: ``llm_error`` / ``env_error``) get a response
mask of zeros — no loss term — and ``extra_fields["datadojo_infra_failure"] = 1``; the advantage estimator
:func:`compute_datadojo_grpo_advantage` (``algorithm.adv_estimator=datadojo_grpo``) leaves rows whose mask
is empty out of their group's mean and standard deviation, so a crash is neither scored 0 nor a signal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from uuid import uuid4

from datadojo.env import AgentConfig, DataEnv
from datadojo.env.tokens import GenOutput, TokenEpisodeBackend, play_token_episode
from datadojo.llm.base import SamplingParams
from datadojo.train.export.verl import AGENT_NAME
from datadojo.types import Task

__all__ = [
    "ADV_ESTIMATOR",
    "compute_datadojo_grpo_advantage",
    "register",
    "score_trajectory",
    "task_from_row",
]

ADV_ESTIMATOR = "datadojo_grpo"


def _get(cfg: Any, path: str, default: Any = None) -> Any:
    cur = cfg
    for part in path.split("."):
        if cur is None:
            return default
        cur = cur.get(part, None) if hasattr(cur, "get") else getattr(cur, part, None)
    return default if cur is None else cur


def task_from_row(data_source: str, ground_truth: Any, extra_info: dict[str, Any] | None) -> Task:
    """The task a parquet row describes: ``extra_info["task"]`` (what ``export_verl`` writes), else a minimal
    one from ``ground_truth`` (a row written by hand: no files, so no sandbox data)."""
    info = extra_info or {}
    raw = info.get("task")
    if raw:
        return Task.model_validate(json.loads(raw) if isinstance(raw, str) else raw)
    answer = ground_truth
    if isinstance(ground_truth, str):
        try:
            answer = json.loads(ground_truth)
        except json.JSONDecodeError:
            answer = ground_truth
    return Task(
        id=str(info.get("task_id", info.get("index", "verl"))), question="", answer=answer, source=data_source
    )


async def score_trajectory(task: Any, traj: Any, info: dict[str, Any]) -> tuple[float, dict[str, float]]:
    """DataDojo's reward of one trajectory, from the reward registry; the flat numbers (total, weighted parts,
    details) and ``acc`` (correct) for ``reward_extra_info``. An EnvLunch row's copies lie under
    ``extra_info["tasks_dir"]``."""
    from datadojo.reward.registry import RewardSpec, score_pairs

    tasks_dir = info.get("tasks_dir")
    spec = RewardSpec(tasks_path=str(Path(tasks_dir) / "tasks.jsonl") if tasks_dir else None)
    (result,) = await score_pairs([(task, traj)], spec)
    return float(result.total), {**result.as_rewards(), "acc": float(result.correct)}


def _make_class() -> type:
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopBase,
        AgentLoopMetrics,
        AgentLoopOutput,
    )

    class DataDojoAgentLoop(AgentLoopBase):  # type: ignore[misc, valid-type]
        """The ReAct loop with a sandbox per trajectory against verl's server manager (module docstring)."""

        def __init__(self, *args: Any, sandbox_factory: Any = None, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            rollout = self.rollout_config
            self.response_length = int(_get(rollout, "response_length", 4096))
            self.prompt_length = int(_get(rollout, "prompt_length", 4096))
            self.max_turns = int(_get(rollout, "multi_turn.max_assistant_turns", 0) or 10)
            self.sandbox_factory = sandbox_factory

        @contextlib.asynccontextmanager
        async def _sandbox(self, task: Any) -> AsyncIterator[Any]:
            """One sandbox for the trajectory (``sandbox_factory(task)``, else a fresh one), closed after it."""
            if self.sandbox_factory is not None:
                sandbox = self.sandbox_factory(task)
            else:
                from datadojo.sandbox import Sandbox, SandboxConfig

                sandbox = await Sandbox.create(list(task.files), SandboxConfig())
            try:
                yield sandbox
            finally:
                close = getattr(sandbox, "close", None)
                if close is not None:
                    maybe = close()
                    if asyncio.iscoroutine(maybe):
                        await maybe

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
            info = dict(kwargs.get("extra_info") or {})
            reward_model = kwargs.get("reward_model") or {}
            task = task_from_row(
                str(kwargs.get("data_source", "datadojo")), reward_model.get("ground_truth"), info
            )
            dialect = str(info.get("dialect", "datamind"))
            max_turns = int(info.get("max_turns") or self.max_turns)
            request_id = uuid4().hex
            server = self.server_manager
            t_gen = 0.0

            async def generate(prompt_ids: list[int], sampling: dict[str, Any]) -> GenOutput:
                nonlocal t_gen
                params = {**sampling_params}
                if sampling.get("stop"):
                    params["stop"] = sampling["stop"]
                room = self.prompt_length + self.response_length - len(prompt_ids)
                params["max_tokens"] = max(1, min(int(sampling.get("max_tokens") or room), room))
                params["logprobs"] = True
                t0 = time.perf_counter()
                out = await server.generate(
                    request_id=request_id, prompt_ids=prompt_ids, sampling_params=params
                )
                t_gen += time.perf_counter() - t0
                return GenOutput(
                    list(out.token_ids),
                    None if out.log_probs is None else list(out.log_probs),
                    getattr(out, "stop_reason", None),
                )

            cfg = AgentConfig(
                max_turns=max_turns,
                dialect=dialect,
                sampling=SamplingParams(
                    temperature=float(sampling_params.get("temperature", 1.0)) or 1.0,
                    top_p=float(sampling_params.get("top_p", 1.0)),
                ),
            )
            t0 = time.perf_counter()
            env = DataEnv(cfg, sandboxes=self._sandbox)
            backend = TokenEpisodeBackend(
                generate,
                self.tokenizer,
                model_id="verl",
                max_context=self.prompt_length + self.response_length,
            )
            async with await env.reset(task, model="verl") as episode:
                res = await play_token_episode(episode, backend)
            wall = time.perf_counter() - t0
            ep, traj = res.episode, res.trajectory
            n = self.response_length
            mask = list(ep.response_mask[:n])
            extra: dict[str, Any] = {
                "datadojo_infra_failure": int(res.infra_failure),
                "datadojo_stop_reason": traj.stop_reason,
                # DataMind §4 void-turn filtering: the γ-mixed loss masks the row out of both terms
                "datadojo_void": int(traj.has_void_turn),
                "datadojo_trajectory": traj.model_dump_json(),
            }
            if res.infra_failure:
                mask = [0] * len(mask)
                score, parts = 0.0, {}
            else:
                score, parts = await score_trajectory(task, traj, info)
            extra["reward_extra_info"] = parts
            return AgentLoopOutput(
                prompt_ids=ep.prompt_ids,
                response_ids=ep.response_ids[:n],
                response_mask=mask,
                response_logprobs=ep.response_logprobs[:n] if ep.has_logprobs else None,
                reward_score=score,
                num_turns=2 * len(ep.turns) + 1,
                metrics=AgentLoopMetrics(generate_sequences=t_gen, tool_calls=max(0.0, wall - t_gen)),
                extra_fields=extra,
            )

    return DataDojoAgentLoop


_CLASS: type | None = None


def register() -> type:
    """Register :class:`DataDojoAgentLoop` under :data:`AGENT_NAME`, the advantage under :data:`ADV_ESTIMATOR`
    and the ``datadojo_dapo`` policy loss (idempotent; Ray's ``worker_process_setup_hook``);
    returns the class. Import-time in the module ``DataDojoAgentLoop`` attribute for Hydra's ``_target_``."""
    global _CLASS
    if _CLASS is None:
        from verl.experimental.agent_loop.agent_loop import register as register_loop
        from verl.trainer.ppo import core_algos

        cls = _make_class()
        cls.__module__ = __name__
        cls.__qualname__ = "DataDojoAgentLoop"
        _CLASS = register_loop(AGENT_NAME)(cls)
        if ADV_ESTIMATOR not in core_algos.ADV_ESTIMATOR_REGISTRY:
            core_algos.register_adv_est(ADV_ESTIMATOR)(compute_datadojo_grpo_advantage)
        from datadojo.train.export.verl_loss import register as register_loss

        register_loss()  # datadojo_dapo too: one setup hook for the workers
        from datadojo.train.export.verl_mixed import register as register_mixed

        register_mixed()  # the datadojo_expert loop and the datadojo_mixed trainer mode
    return _CLASS


def __getattr__(name: str) -> Any:  # Hydra instantiates "datadojo.train.export.verl_agent.DataDojoAgentLoop"
    if name == "DataDojoAgentLoop":
        return register()
    raise AttributeError(name)


def compute_datadojo_grpo_advantage(
    token_level_rewards: Any,
    response_mask: Any,
    index: Any,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """verl's GRPO outcome advantage, except that rows with an empty response mask (infrastructure
    failures) take no part in their group's statistics and get advantage 0."""
    import torch

    scores = token_level_rewards.sum(dim=-1)
    live = response_mask.sum(dim=-1) > 0
    adv = torch.zeros_like(scores)
    groups: dict[Any, list[int]] = {}
    for i, g in enumerate(index):
        if bool(live[i]):
            groups.setdefault(g, []).append(i)
    for rows in groups.values():
        vals = scores[rows]
        if len(rows) < 2:
            continue
        centred = vals - vals.mean()
        if norm_adv_by_std_in_grpo:
            centred = centred / (vals.std() + epsilon)
        adv[rows] = centred
    adv = adv.unsqueeze(-1) * response_mask
    return adv, adv

"""TRL's ``GRPOTrainer`` on DataDojo tasks: multi-turn sandboxed rollouts as a ``rollout_func``, token-exact.

TRL (1.16) offers two hooks for rollouts it does not generate itself. ``environment_factory`` exposes an
object's methods as *tool calls*: the chat template renders the tool schema, TRL parses the model's tool-call
JSON with the tokenizer's response schema, and re-renders the conversation through the chat template after
every tool result — DataDojo's dialects (``<code>`` / ``<answer>`` blocks, stop strings, invalid-turn
feedback) are not tool calls, and the re-rendering is a re-tokenization. ``rollout_func(prompts, trainer)``
hands the rollout over whole and takes back ``prompt_ids``, ``completion_ids``, ``logprobs``, an ``env_mask``
(1 = a token the policy sampled, 0 = an environment token) and any extra per-row fields, which TRL forwards
to the reward functions. This module is that ``rollout_func``.

:class:`DataDojoRollouts` runs each prompt's episode with :mod:`datadojo.env.tokens` — DataDojo's ReAct
loop, dialect parsing, stop strings and one persistent sandbox per trajectory (state and files kept across
turns), token-in / token-out: every generation call is sent the ids accumulated so far, the sampled ids come
back unchanged with their sampler log-probs (``env_mask`` 1), and only the environment's part (the closing of
the turn, the ``<interpreter>`` observation, the next assistant header) is tokenized, once (``env_mask`` 0).
TRL then trains on exactly these ids: its loss mask is ``completion_mask × env_mask``.

Rewards are DataDojo's, on the real trajectory, as the reward registry chooses and computes them
(:func:`datadojo.reward.registry.score_pairs`): DataMind's format / answer / length reward (§4) or, for an
EnvLunch task, EnvLunch's agreement reward over the counterfactual copies (§3 Eq. 4). They are computed in the rollout and returned through
the reward function :attr:`DataDojoRollouts.reward_func` (logged by TRL as ``rewards/datadojo``).

Infrastructure failures (the generation server or the sandbox failed: ``llm_error`` / ``env_error``) are not
scored 0: their reward is ``None`` — TRL counts a row whose every reward is ``None`` as *unscorable*, keeps it
out of its group's mean and standard deviation and sets its advantage to 0 — and their ``env_mask`` is all
zeros, so they add no loss term. Trajectories with a void turn get a zero ``env_mask`` too (DataMind §4,
"Void Turn Filtering"; :attr:`~DataDojoRollouts.void_masking`) but keep their reward in the group statistics,
as DataDojo's own trainer does.

Generation, picked per call from the trainer (or ``generate=`` for any other engine):

* ``GRPOConfig(use_vllm=True, vllm_mode="server")`` — TRL's vLLM server (``trl vllm-serve``), which TRL
  updates in place with the new weights before each rollout; token-id prompts, the sampled ids and log-probs
  back (:func:`vllm_client_generate`);
* otherwise the policy in this process (``transformers`` ``generate`` on TRL's unwrapped model,
  :func:`datadojo.env.tokens.hf_generate`): on-policy by construction, slow, for small runs and tests;
* ``vllm_mode="colocate"`` is refused: TRL's colocated engine has no token-id entry point for a caller.

``max_completion_length`` is the budget of the whole multi-turn response (sampled and environment tokens):
every generation is capped to what is left, and an episode that cannot fit another turn stops with
``context_limit``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datadojo.env.tokens import (
    INFRA_STOP_REASONS,
    EpisodeResult,
    Generate,
    GenOutput,
    TokenEpisode,
    TokenEpisodeBackend,
    play_token_episode,
)
from datadojo.errors import DataDojoError
from datadojo.llm.base import Message
from datadojo.types import Task, Trajectory

__all__ = [
    "REWARD_FUNC_NAME",
    "DataDojoRollouts",
    "TRLRolloutError",
    "TRLSample",
    "collate_samples",
    "grpo_trainer",
    "to_trl_sample",
    "trajectory_tokens",
    "vllm_client_generate",
]

#: The name TRL logs the reward under (``rewards/datadojo/mean``).
REWARD_FUNC_NAME = "datadojo"

#: Stop reasons of trajectories that ended by themselves (their completion gets the end-of-turn token).
_FINISHED = frozenset({"answer", "max_turns", "invalid"})


class TRLRolloutError(DataDojoError, ValueError):
    """A rollout request the adapter cannot serve: an unknown task id as prompt, a task set with duplicate
    ids or without answers, or a generation backend it cannot drive. The message names the task or setting."""


def _require_trl(what: str) -> None:
    """TRL (and its ``datasets``) are the user's engine, not a DataDojo extra: say what to install."""
    import importlib.util

    from datadojo.errors import MissingExtraError

    missing = [m for m in ("trl", "datasets") if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(
            f"{what} needs {', '.join(missing)}, not installed here: pip install 'trl==1.16.0' "
            "(the version DataDojo is tested with; docs/engines/trl.md)"
        )


# --------------------------------------------------------------------------------------------- samples


@dataclass
class TRLSample:
    """One row of a ``rollout_func`` reply: the token record TRL trains on plus DataDojo's verdicts.

    ``env_mask[i]`` is 1 for a token the policy sampled and 0 for an environment token (and for every
    token of a masked row); ``logprobs[i]`` is the sampler's log-prob of a sampled token, 0.0 on environment
    tokens, ``None`` where the sampler gave none (TRL reads it as NaN: no importance correction there).
    ``reward`` is ``None`` for an infrastructure failure.
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float | None]
    reward: float | None
    correct: bool
    infra_failure: bool
    void: bool
    truncated: bool
    stop_reason: str
    turns: int
    parts: dict[str, float] = field(default_factory=dict)


def to_trl_sample(
    episode: TokenEpisode,
    trajectory: Trajectory,
    *,
    max_completion_length: int,
    eos_token_id: int,
    pad_token_id: int,
    reward: float | None = None,
    correct: bool = False,
    parts: dict[str, float] | None = None,
    void_masking: bool = True,
) -> TRLSample:
    """The TRL row of one episode.

    The completion is the episode's response (sampled and environment ids, in order) cut to
    ``max_completion_length``. An episode that ended by itself (answer, turn budget, invalid turns) and is
    not cut gets the end-of-turn token appended as an environment token (mask 0) unless it sampled one
    itself: the chat template closes the reply with it, and TRL takes a completion whose last id is not an
    end token for a truncated one (``mask_truncated_completions``, ``completions/clipped_ratio``).
    An infrastructure failure gets a zero mask and no reward; a void trajectory a zero mask (``void_masking``).
    """
    n = max_completion_length
    infra = trajectory.stop_reason in INFRA_STOP_REASONS
    void = trajectory.has_void_turn
    ids = list(episode.response_ids[:n])
    mask = list(episode.response_mask[:n])
    lps: list[float | None] = (
        [float(x) for x in episode.response_logprobs[:n]]
        if episode.has_logprobs
        else [None if m else 0.0 for m in mask]
    )
    cut = len(episode.response_ids) > n
    truncated = cut or trajectory.stop_reason == "context_limit"
    if not truncated and trajectory.stop_reason in _FINISHED and len(ids) < n and ids[-1:] != [eos_token_id]:
        ids.append(eos_token_id)
        mask.append(0)
        lps.append(0.0)
    if not ids:  # nothing was generated (the first request failed): TRL needs one id per completion
        ids, mask, lps = [eos_token_id], [0], [0.0]
    if infra or (void and void_masking):
        mask = [0] * len(ids)
    prompt = list(episode.prompt_ids) or [pad_token_id]
    return TRLSample(
        prompt_ids=prompt,
        completion_ids=ids,
        env_mask=mask,
        logprobs=lps,
        reward=None if infra else reward,
        correct=bool(correct) and not infra,
        infra_failure=infra,
        void=void,
        truncated=truncated,
        stop_reason=trajectory.stop_reason,
        turns=len(trajectory.turns),
        parts=dict(parts or {}),
    )


def collate_samples(samples: Sequence[TRLSample]) -> dict[str, Any]:
    """The ``rollout_func`` reply: TRL's three required lists, ``env_mask``, and per-row DataDojo fields
    (``datadojo_*``) that TRL passes to the reward functions by row."""
    return {
        "prompt_ids": [s.prompt_ids for s in samples],
        "completion_ids": [s.completion_ids for s in samples],
        "logprobs": [s.logprobs for s in samples],
        "env_mask": [s.env_mask for s in samples],
        "datadojo_reward": [s.reward for s in samples],
        "datadojo_correct": [int(s.correct) for s in samples],
        "datadojo_infra_failure": [int(s.infra_failure) for s in samples],
        "datadojo_void": [int(s.void) for s in samples],
        "datadojo_stop_reason": [s.stop_reason for s in samples],
        "datadojo_turns": [s.turns for s in samples],
    }


# --------------------------------------------------------------------------------------------- episodes


class _BudgetBackend(TokenEpisodeBackend):
    """A token-episode backend whose response (sampled + environment tokens) stays within ``max_completion``.

    One position is kept free for the end-of-turn token :func:`to_trl_sample` closes a finished reply with.
    """

    def __init__(self, generate: Generate, tokenizer: Any, *, max_completion: int, model_id: str) -> None:
        super().__init__(self._budgeted, tokenizer, model_id=model_id)
        self._inner = generate
        self.max_completion = max_completion

    def _used(self, total: int) -> int:
        return total - len(self.episode.prompt_ids)

    async def _budgeted(self, prompt_ids: list[int], sampling: dict[str, Any]) -> GenOutput:
        room = self.max_completion - 1 - self._used(len(prompt_ids))
        asked = sampling.get("max_tokens")
        return await self._inner(
            prompt_ids, {**sampling, "max_tokens": max(1, min(int(asked or room), room))}
        )

    def fits(self, messages: Sequence[Message], max_tokens: int = 0) -> bool:
        if not self._sent:
            return True
        return self._used(self.count_tokens(messages)) + 1 < self.max_completion


# --------------------------------------------------------------------------------------------- generators


def vllm_client_generate(
    client: Any,
    *,
    top_k: int = 0,
    min_p: float = 0.0,
    repetition_penalty: float = 1.0,
) -> Generate:
    """A generator over TRL's :class:`trl.generation.vllm_client.VLLMClient` (``trl vllm-serve``).

    The prompt goes as token ids; the stop strings go with ``include_stop_str_in_output`` so the ids that
    spell a stop string come back (the policy did sample them); the log-prob of each sampled token is the
    first of vLLM's per-token list (``logprobs=0``: the sampled token's only).
    """

    def call(prompt_ids: list[int], sampling: dict[str, Any]) -> GenOutput:
        extra: dict[str, Any] = {}
        if sampling.get("stop"):
            extra["stop"] = list(sampling["stop"])
            extra["include_stop_str_in_output"] = True
        if sampling.get("seed") is not None:
            extra["seed"] = int(sampling["seed"])
        max_tokens = int(sampling.get("max_tokens") or 1024)
        out = client.generate(
            prompts=[list(prompt_ids)],
            n=1,
            temperature=float(sampling.get("temperature", 1.0)),
            top_p=float(sampling.get("top_p", 1.0)),
            top_k=top_k,
            min_p=min_p,
            repetition_penalty=repetition_penalty,
            max_tokens=max_tokens,
            logprobs=0,
            generation_kwargs=extra,
        )
        ids = [int(t) for t in out["completion_ids"][0]]
        raw = out.get("logprobs")
        lps = None
        if raw is not None and raw[0] is not None:
            lps = [float("nan") if not pos or pos[0] is None else float(pos[0]) for pos in raw[0]]
            if len(lps) != len(ids):
                lps = None
        return GenOutput(ids, lps, "length" if len(ids) >= max_tokens else "completed")

    async def generate(prompt_ids: list[int], sampling: dict[str, Any]) -> GenOutput:
        return await asyncio.to_thread(call, prompt_ids, sampling)

    return generate


# --------------------------------------------------------------------------------------------- the adapter


def _nan_to_none(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


class DataDojoRollouts:
    """``rollout_func`` and reward function for TRL's ``GRPOTrainer`` over a DataDojo task set.

    The training dataset (:meth:`dataset`) has one row per task whose ``prompt`` is the task id; TRL's
    sampler repeats each row ``num_generations`` times, and :meth:`__call__` runs one episode per row.

    * ``tasks`` — the tasks (ids unique; every non-EnvLunch task needs an answer to be rewarded against);
    * ``tasks_path`` — the task file, needed for EnvLunch tasks (their counterfactual copies live next to it);
    * ``dialect``, ``max_turns``, ``max_tokens_per_turn`` — the agent loop (:class:`datadojo.env.EnvConfig`);
      temperature and top-p are the trainer's (``GRPOConfig.temperature`` / ``top_p``);
    * ``concurrency`` — episodes run at once (sandboxes from a pool of this size);
    * ``sandboxes`` — a :data:`datadojo.env.SandboxFactory` (default: a pool per call);
    * ``generate`` — ``(trainer) -> Generate`` to use another generation engine (module docstring);
    * ``void_masking`` — zero the loss mask of trajectories with a void turn (DataMind §4);
    * ``rollouts_path`` — append every trajectory (with its tokens and reward) to this JSONL.
    """

    def __init__(
        self,
        tasks: Iterable[Task],
        *,
        tasks_path: str | Path | None = None,
        dialect: str = "datamind",
        max_turns: int = 10,
        max_tokens_per_turn: int | None = None,
        concurrency: int = 4,
        sandboxes: Any = None,
        generate: Callable[[Any], Generate] | None = None,
        void_masking: bool = True,
        rollouts_path: str | Path | None = None,
    ) -> None:
        self.tasks: dict[str, Task] = {}
        for task in tasks:
            if task.id in self.tasks:
                raise TRLRolloutError(
                    f"task id {task.id!r} appears twice: the dataset's prompts are task ids"
                )
            self.tasks[task.id] = task
        if not self.tasks:
            raise TRLRolloutError("no tasks to train on")
        from datadojo.reward.registry import RewardSpec, reward_problems

        problems = reward_problems(
            list(self.tasks.values()), RewardSpec(tasks_path=None if tasks_path is None else str(tasks_path))
        )
        if problems:
            raise TRLRolloutError(f"{len(problems)} tasks cannot be rewarded (first: {problems[0]})")
        self.tasks_path = None if tasks_path is None else Path(tasks_path)
        self.dialect = dialect
        self.max_turns = max_turns
        self.max_tokens_per_turn = max_tokens_per_turn
        self.concurrency = max(1, int(concurrency))
        self.sandboxes = sandboxes
        self.generate_factory = generate
        self.void_masking = void_masking
        self.rollouts_path = None if rollouts_path is None else Path(rollouts_path)
        self.__name__ = "datadojo_rollouts"  # TRL's warnings name the callable

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> DataDojoRollouts:
        """The tasks of a JSONL task file (``rl_tasks.jsonl`` of ``datadojo synth ... run``, an EnvLunch
        ``tasks.jsonl``); relative data paths resolve against its folder."""
        from datadojo.jsonl import read_tasks

        return cls(list(read_tasks(path)), tasks_path=path, **kwargs)

    # ------------------------------------------------------------------ dataset and reward

    def rows(self) -> list[dict[str, Any]]:
        """The training rows: ``{"prompt": task id}`` (plain strings: TRL treats them as non-chat prompts)."""
        return [{"prompt": task_id} for task_id in self.tasks]

    def dataset(self) -> Any:
        """:meth:`rows` as a ``datasets.Dataset``."""
        _require_trl("DataDojoRollouts.dataset")
        from datasets import Dataset

        return Dataset.from_list(self.rows())

    @property
    def reward_func(self) -> Callable[..., list[float | None]]:
        """TRL's reward function: the reward each row's rollout computed, ``None`` for infra failures."""

        def datadojo(
            prompts: Sequence[Any],
            completions: Sequence[Any],
            datadojo_reward: Sequence[float | None] | None = None,
            **kwargs: Any,
        ) -> list[float | None]:
            if datadojo_reward is None:
                raise TRLRolloutError(
                    "the datadojo reward needs DataDojoRollouts as the trainer's rollout_func "
                    "(no datadojo_reward field came with the rows)"
                )
            rewards = [_nan_to_none(r) for r in datadojo_reward]
            log = kwargs.get("log_metric")
            if log is not None and rewards:
                n = len(rewards)
                infra = kwargs.get("datadojo_infra_failure") or []
                log("datadojo/infra_failure_rate", sum(infra) / n)
                log("datadojo/accuracy", sum(kwargs.get("datadojo_correct") or []) / n)
                log("datadojo/void_rate", sum(kwargs.get("datadojo_void") or []) / n)
                log("datadojo/turns_mean", sum(kwargs.get("datadojo_turns") or []) / n)
            return rewards

        datadojo.__name__ = REWARD_FUNC_NAME
        return datadojo

    def _score(
        self, results: Sequence[EpisodeResult], tasks: Sequence[Task]
    ) -> list[tuple[float, bool, dict]]:
        """DataDojo's reward of each live trajectory, from the reward registry (batched per reward: EnvLunch
        runs programs); the flat numbers (total, weighted parts, details) go with each row."""
        from datadojo.reward.registry import RewardSpec, score_pairs_sync

        out: list[tuple[float, bool, dict]] = [(0.0, False, {})] * len(results)
        live = [i for i, res in enumerate(results) if not res.infra_failure]
        spec = RewardSpec(tasks_path=str(self.tasks_path) if self.tasks_path is not None else None)
        scored = score_pairs_sync([(tasks[i], results[i].trajectory) for i in live], spec)
        for i, r in zip(live, scored, strict=True):
            out[i] = (float(r.total), bool(r.correct), r.as_rewards())
        return out

    # ------------------------------------------------------------------ rollouts

    def tasks_for(self, prompts: Sequence[Any]) -> list[Task]:
        """The task of each prompt (a task id), with a clear error for anything else."""
        out = []
        for i, p in enumerate(prompts):
            task = self.tasks.get(p) if isinstance(p, str) else None
            if task is None:
                shown = p if isinstance(p, str) else type(p).__name__
                raise TRLRolloutError(
                    f"prompt {i} ({str(shown)[:80]!r}) is not a task id of this task set; train on "
                    "DataDojoRollouts.dataset() (its prompts are task ids)"
                )
            out.append(task)
        return out

    def collect(
        self,
        prompts: Sequence[Any],
        generate: Generate,
        tokenizer: Any,
        *,
        max_completion_length: int,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int = 0,
        step: int | None = None,
    ) -> dict[str, Any]:
        """Run one episode per prompt with ``generate`` and return the ``rollout_func`` reply.

        Independent of TRL (the trainer's part is picking ``generate`` and the settings, :meth:`__call__`).
        Rows sharing a task are its group: they get samples 0, 1, … and distinct seeds.
        """
        from datadojo.env import AgentConfig
        from datadojo.llm.base import SamplingParams

        tasks = self.tasks_for(prompts)
        cfg = AgentConfig(
            max_turns=self.max_turns,
            dialect=self.dialect,
            sampling=SamplingParams(
                temperature=temperature, top_p=top_p, max_tokens=self.max_tokens_per_turn
            ),
        )
        seen: dict[str, int] = {}
        samples = []
        for t in tasks:
            samples.append(seen.get(t.id, 0))
            seen[t.id] = samples[-1] + 1
        results = asyncio.run(
            self._episodes(tasks, samples, generate, tokenizer, cfg, seed, max_completion_length)
        )
        scores = self._score(results, tasks)
        rows = [
            to_trl_sample(
                res.episode,
                res.trajectory,
                max_completion_length=max_completion_length,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id
                if tokenizer.pad_token_id is not None
                else tokenizer.eos_token_id,
                reward=score,
                correct=correct,
                parts=parts,
                void_masking=self.void_masking,
            )
            for res, (score, correct, parts) in zip(results, scores, strict=True)
        ]
        if self.rollouts_path is not None:
            self._record(results, rows, step)
        return collate_samples(rows)

    async def _episodes(
        self,
        tasks: Sequence[Task],
        samples: Sequence[int],
        generate: Generate,
        tokenizer: Any,
        cfg: Any,
        seed: int,
        max_completion: int,
    ) -> list[EpisodeResult]:
        from datadojo.env import DataEnv
        from datadojo.sandbox.protocol import ProtocolError
        from datadojo.sandbox.session import SandboxError

        # the environment makes a pool of ``concurrency`` sandboxes per call when no factory is given
        env = DataEnv(cfg, sandboxes=self.sandboxes, pool_size=self.concurrency)
        sem = asyncio.Semaphore(self.concurrency)

        async def one(row: int, task: Task, sample: int) -> EpisodeResult:
            async with sem:
                ep_seed = seed * 1_000_003 + row * 1_009  # distinct per row: tasks do not share a stream
                try:
                    episode = await env.reset(task, sample=sample, seed=ep_seed, model="trl")
                    async with episode:
                        backend = _BudgetBackend(
                            generate, tokenizer, max_completion=max_completion, model_id="trl"
                        )
                        return await play_token_episode(episode, backend)
                except (SandboxError, ProtocolError, OSError) as exc:
                    # this episode's sandbox could not be made or died: its infra failure, not a score
                    # (IsolationUnavailable is not caught: no episode can run, the run must stop)
                    traj = env.failed_trajectory(task, exc, sample=sample, seed=ep_seed, model="trl")
                return EpisodeResult(traj, TokenEpisode())

        try:
            jobs = (one(i, t, s) for i, (t, s) in enumerate(zip(tasks, samples, strict=True)))
            return list(await asyncio.gather(*jobs))
        finally:
            with contextlib.suppress(Exception):
                await env.aclose()

    def _record(self, results: Sequence[EpisodeResult], rows: Sequence[TRLSample], step: int | None) -> None:
        from datadojo.jsonl import append_jsonl

        trajs = []
        for res, row in zip(results, rows, strict=True):
            # the reward TRL got, and the registry's total, weighted parts and their details beside it
            rewards = {} if row.reward is None else {REWARD_FUNC_NAME: row.reward, **row.parts}
            extra = {**res.trajectory.extra, "trl_step": step, "trl_env_mask": row.env_mask}
            trajs.append(res.trajectory.model_copy(update={"rewards": rewards, "extra": extra}))
        assert self.rollouts_path is not None
        self.rollouts_path.parent.mkdir(parents=True, exist_ok=True)
        append_jsonl(self.rollouts_path, trajs)

    def generator_for(self, trainer: Any) -> tuple[Generate, Any]:
        """The generator for this call and a context manager to hold around the rollouts (module docstring)."""
        if self.generate_factory is not None:
            return self.generate_factory(trainer), contextlib.nullcontext()
        args = trainer.args
        if getattr(trainer, "use_vllm", False):
            if getattr(args, "vllm_mode", "server") != "server":
                raise TRLRolloutError(
                    "vllm_mode='colocate' has no token-id entry point for a rollout_func; use vllm_mode='server' "
                    "(trl vllm-serve) or pass generate="
                )
            client = trainer.vllm_generation.vllm_client
            return (
                vllm_client_generate(
                    client,
                    top_k=int(getattr(args, "top_k", 0) or 0),
                    min_p=float(getattr(args, "min_p", 0.0) or 0.0),
                    repetition_penalty=float(getattr(args, "repetition_penalty", 1.0)),
                ),
                contextlib.nullcontext(),
            )
        holder = _InProcess(trainer)
        return holder.generate, holder

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        """TRL's ``rollout_func``: one DataDojo episode per prompt (a task id)."""
        args = trainer.args
        tokenizer = getattr(trainer, "_tokenizer", None) or trainer.processing_class
        generate, hold = self.generator_for(trainer)
        step = int(trainer.state.global_step)
        with hold:
            return self.collect(
                prompts,
                generate,
                tokenizer,
                max_completion_length=int(args.max_completion_length),
                temperature=float(args.temperature),
                top_p=float(args.top_p),
                seed=int(args.seed) * 100_003 + step * 7_919 + int(trainer.accelerator.process_index),
                step=step,
            )


class _InProcess:
    """The trainer's policy, unwrapped for generation (TRL's own context manager) while the rollouts run."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.model: Any = None
        self._ctx: Any = None
        self._gen: Generate | None = None

    def __enter__(self) -> _InProcess:
        from trl.models import unwrap_model_for_generation

        from datadojo.env.tokens import hf_generate

        t = self.trainer
        self._ctx = unwrap_model_for_generation(
            t.model_wrapped,
            t.accelerator,
            gather_deepspeed3_params=t.args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=t.args.gradient_checkpointing_kwargs,
        )
        self.model = self._ctx.__enter__()
        tok = getattr(t, "_tokenizer", None) or t.processing_class
        self._gen = hf_generate(self.model, eos_token_id=tok.eos_token_id)
        return self

    def __exit__(self, *exc: Any) -> None:
        ctx, self._ctx, self._gen = self._ctx, None, None
        ctx.__exit__(*exc)

    async def generate(self, prompt_ids: list[int], sampling: dict[str, Any]) -> GenOutput:
        if self._gen is None:
            raise TRLRolloutError("the in-process generator is used outside its rollout")
        return await self._gen(prompt_ids, sampling)


def grpo_trainer(
    model: Any,
    tasks: str | Path | DataDojoRollouts,
    args: Any = None,
    *,
    processing_class: Any = None,
    reward_funcs: Sequence[Any] = (),
    **kwargs: Any,
) -> Any:
    """A ``trl.GRPOTrainer`` that trains ``model`` on DataDojo tasks (a task file or a :class:`DataDojoRollouts`).

    ``kwargs`` not taken by ``GRPOTrainer`` go to :meth:`DataDojoRollouts.from_file` (``dialect``,
    ``max_turns``, ``concurrency``, ...). ``reward_funcs`` are added to DataDojo's reward (TRL sums them).
    """
    _require_trl("grpo_trainer")
    from trl import GRPOConfig, GRPOTrainer

    trainer_keys = {"eval_dataset", "callbacks", "optimizers", "peft_config", "reward_processing_classes"}
    trainer_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in trainer_keys}
    rollouts = tasks if isinstance(tasks, DataDojoRollouts) else DataDojoRollouts.from_file(tasks, **kwargs)
    if isinstance(tasks, DataDojoRollouts) and kwargs:
        raise TRLRolloutError(f"settings {sorted(kwargs)} go to DataDojoRollouts(...) when one is passed")
    if args is None:
        args = GRPOConfig(output_dir="datadojo-grpo")
    return GRPOTrainer(
        model=model,
        reward_funcs=[rollouts.reward_func, *reward_funcs],
        args=args,
        train_dataset=rollouts.dataset(),
        processing_class=processing_class,
        rollout_func=rollouts,
        **trainer_kwargs,
    )


def trajectory_tokens(trajectory: Trajectory) -> TokenEpisode:
    """The token record a rollout kept in ``extra["tokens"]`` (for checking what TRL trained on)."""
    raw = trajectory.extra.get("tokens")
    if not raw:
        raise TRLRolloutError(f"trajectory {trajectory.task_id}#{trajectory.sample} carries no tokens")
    return TokenEpisode.from_dict(json.loads(raw) if isinstance(raw, str) else raw)

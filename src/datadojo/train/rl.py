r"""Online RL with the mixed objective (``datadojo train rl``): rollouts → rewards → γ·SFT + (1−γ)·policy loss.

One RL step (DataMind §4, §5.1; EnvLunch §4):

1. take the step's ``tasks_per_step`` tasks (a seeded permutation of the task file, one pass per epoch) and
   roll out ``group_size`` G episodes of each through the agent runtime and sandbox
   (:mod:`datadojo.train.rollouts`; generation and code execution overlap across episodes);
2. score every rollout (:mod:`datadojo.train.rewards`), normalize rewards within each group into
   advantages, and apply dynamic sampling: a group is kept for the policy term only when
   0 < #correct < G; rollouts with a void turn are masked out of every term;
3. tokenize rollouts with the chat template (environment tokens and prompts masked) and compute their old
   log-probs — and, for a KL term, the initial policy's — with the training model before any update;
4. split the step's tasks into ``updates_per_step`` mini-batches of whole groups; for each, one optimizer
   update on :math:`\gamma\,\mathcal L_{SFT}(\text{expert trajectories of these tasks}) + (1-\gamma)\,
   \mathcal L_{policy}(\text{kept rollouts})`, both normalized over the whole mini-batch and accumulated
   over micro-batches; tasks whose group was filtered out contribute the SFT term alone;
5. copy the new weights into the in-process sampler, log the step's metrics, checkpoint.

γ follows :class:`~datadojo.train.schedules.GammaSchedule` over RL steps; the policy loss is looked up by
name in :mod:`datadojo.train.registry` (``dapo``, ``grpo``, or a user's own). EnvLunch's GRPO warm-up is
``RLConfig.envlunch()``: γ ≡ 0, no experts, no dynamic sampling, KL and entropy terms on.

The run folder holds ``config.json``, ``metrics.jsonl`` (γ, SFT loss, policy loss, reward mean and the mean
of each reward part as ``reward_<part>``, entropy, fraction of groups filtered, void-turn rate, clip
fraction, …), ``curves.svg``, ``rollouts/step_N.rankR.jsonl``
(raw, resumable) and ``.scored.jsonl`` (with each rollout's reward, its weighted parts and their details, and advantages), ``checkpoints/``, ``final/``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from datadojo.env.tokens import INFRA_STOP_REASONS, TokenEpisode
from datadojo.fs import write_json_atomic
from datadojo.jsonl import write_jsonl_atomic
from datadojo.reward.registry import BUILTIN_PARTS, RewardResult
from datadojo.train.checkpoint import CheckpointManager, save_hf_model
from datadojo.train.config import RLConfig
from datadojo.train.losses import (
    dynamic_sampling_keep,
    group_advantages,
    mixed_objective,
    normalization_count,
    normalization_weights,
    sft_loss,
)
from datadojo.train.metrics import MetricsLog
from datadojo.train.modeling import (
    TokenBatch,
    TrainingError,
    begin_run,
    build_optimizer,
    collate,
    forward_logprobs,
    load_model_and_tokenizer,
    make_accelerator,
    pad_stack,
)
from datadojo.train.plots import DEFAULT_RL_KEYS, write_curves
from datadojo.train.registry import LossSpec, PolicyInputs, get_policy_loss
from datadojo.train.rewards import RewardFn
from datadojo.train.rollouts import RolloutSource
from datadojo.train.tokenize import TemplateError, TokenizedTrajectory, tokenize_trajectory
from datadojo.types import Task, Trajectory

__all__ = ["RLSummary", "RLTrainer", "Rollout"]

log = logging.getLogger(__name__)


@dataclass
class Rollout:
    """One scored rollout of a step, with what the trainer derived from it."""

    task: Task
    traj: Trajectory
    group: int
    reward: RewardResult
    advantage: float = 0.0
    kept: bool = True
    example: TokenizedTrajectory | None = None
    old_logp: torch.Tensor | None = None
    ref_logp: torch.Tensor | None = None
    weights: torch.Tensor | None = None

    rollout_logp: torch.Tensor | None = None

    @property
    def void(self) -> bool:
        return self.traj.has_void_turn

    @property
    def infra(self) -> bool:
        """Ended on a server or sandbox failure (:data:`~datadojo.env.tokens.INFRA_STOP_REASONS`)."""
        return self.traj.stop_reason in INFRA_STOP_REASONS

    @property
    def target_tokens(self) -> int:
        return 0 if self.example is None else sum(self.example.loss_mask[1:])


@dataclass
class RLSummary:
    """What a run did."""

    run_dir: str
    steps: int
    resumed_from: int
    updates: int
    elapsed_s: float
    model_dir: str
    last_metrics: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _chunks(items: Sequence[Any], size: int) -> list[list[Any]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)]


def _split(n: int, parts: int) -> list[range]:
    """``range(n)`` cut into ``parts`` contiguous pieces differing in length by at most one."""
    base, extra = divmod(n, parts)
    out, start = [], 0
    for i in range(parts):
        size = base + (1 if i < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


class RLTrainer:
    """The online RL loop (module docstring).

    Args:
        config: the run's :class:`RLConfig`.
        tasks: the training tasks (the trainer draws ``tasks_per_step`` per step).
        reward_fn: scores rollouts (:mod:`datadojo.train.rewards`).
        source: where rollouts come from (:class:`~datadojo.train.rollouts.AgentRollouts`, or a test double),
            or a function of the ``Accelerator`` returning one (an in-process sampler must live on the
            trainer's device, known only once the accelerator exists).
        experts: expert trajectories for the SFT term, matched to tasks by ``task_id`` (needed when γ > 0).
        model / tokenizer: the policy (default: loaded from ``config.model``).
    """

    def __init__(
        self,
        config: RLConfig,
        tasks: Sequence[Task],
        reward_fn: RewardFn,
        source: RolloutSource | Callable[[Any], RolloutSource],
        *,
        experts: Iterable[Trajectory] = (),
        model: Any = None,
        tokenizer: Any = None,
    ) -> None:
        self.config = config
        self.spec: LossSpec = get_policy_loss(config.policy_loss)
        self.normalization = self.spec.normalization_for(config)
        self.gamma = config.gamma_schedule()
        self.run_dir = Path(config.output_dir)
        self.accelerator = make_accelerator(config.mixed_precision, seed=config.seed)
        self.tasks = list(tasks)
        ids = [t.id for t in self.tasks]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise TrainingError(f"task id {dup!r} appears more than once in the task list")
        if len(self.tasks) < config.tasks_per_step:
            raise TrainingError(
                f"tasks_per_step ({config.tasks_per_step}) exceeds the number of tasks ({len(self.tasks)})"
            )
        world = self.accelerator.num_processes
        if config.tasks_per_step % world or config.tasks_per_step // world < config.updates_per_step:
            raise TrainingError(
                f"tasks_per_step ({config.tasks_per_step}) must be a multiple of the number of processes ({world}) "
                f"giving each at least updates_per_step ({config.updates_per_step}) tasks"
            )
        self.reward_fn = reward_fn
        self.source: RolloutSource = source if hasattr(source, "generate") else source(self.accelerator)  # type: ignore[operator]
        if model is None or tokenizer is None:
            if not config.model:
                raise TrainingError(
                    "RLConfig.model must name a local checkpoint (or pass model and tokenizer)"
                )
            model, tokenizer = load_model_and_tokenizer(
                config.model, gradient_checkpointing=config.gradient_checkpointing
            )
        self.model, self.tokenizer = model, tokenizer
        self.ref_model = None
        if self.spec.needs_ref(config):
            # The initial policy, frozen: EnvLunch §4's KL is "against the initial policy".
            import copy

            self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        self.experts = self._tokenize_experts(experts)
        if config.uses_sft and not self.experts:
            raise TrainingError(
                "the mixed objective (γ > 0) needs expert trajectories for its SFT term; pass experts, "
                "or use a fixed γ of 0 (gamma_mode='fixed', gamma_value=0)"
            )

    # ------------------------------------------------------------------ data

    def _tokenize(self, traj: Trajectory) -> TokenizedTrajectory | None:
        try:
            return tokenize_trajectory(
                traj, self.tokenizer, max_length=self.config.max_length, end_of_turn=self.config.end_of_turn
            )
        except TemplateError as exc:
            if "no assistant turn" in str(exc):
                return None
            raise

    def _example(self, r: Rollout) -> TokenizedTrajectory | None:
        """The rollout's tokens: the sampler's own when it recorded them (token-exact, with its log-probs
        as ``rollout_logp`` for truncated IS), else the chat template's rendering of the trajectory."""
        tokens = r.traj.extra.get("tokens")
        if not tokens:
            return self._tokenize(r.traj)
        ep = TokenEpisode.from_dict(tokens)
        ids, mask, lps = ep.input_ids, ep.loss_mask, ep.rollout_logprobs
        limit = self.config.max_length
        truncated = limit is not None and len(ids) > limit
        if truncated:
            ids, mask, lps = ids[:limit], mask[:limit], lps[: limit - 1]
        if ep.has_logprobs:
            r.rollout_logp = torch.tensor(lps, dtype=torch.float32)
        return TokenizedTrajectory(ids, mask, void=r.traj.has_void_turn, truncated=truncated, key=r.traj.key)

    def _tokenize_experts(self, experts: Iterable[Trajectory]) -> dict[str, list[TokenizedTrajectory]]:
        known = {t.id for t in self.tasks}
        out: dict[str, list[TokenizedTrajectory]] = {}
        for traj in experts:
            if traj.task_id not in known or traj.has_void_turn:  # void experts are masked out (§4)
                continue
            ex = self._tokenize(traj)
            if ex is not None and sum(ex.loss_mask[1:]) > 0:
                out.setdefault(traj.task_id, []).append(ex)
        return out

    def tasks_for_step(self, step: int) -> list[Task]:
        """The global task list of RL step ``step``: consecutive slices of one seeded permutation per epoch."""
        n, per = len(self.tasks), self.config.tasks_per_step
        steps_per_epoch = n // per
        epoch, index = divmod(step, steps_per_epoch)
        order = list(range(n))
        random.Random(self.config.seed * 1_000_003 + epoch).shuffle(order)
        return [self.tasks[i] for i in order[index * per : (index + 1) * per]]

    # ------------------------------------------------------------------ one step

    def score(self, tasks: Sequence[Task], trajs: Sequence[Trajectory]) -> list[Rollout]:
        """Rewards, group advantages and the dynamic-sampling decision for a step's rollouts."""
        cfg = self.config
        by_id = {t.id: i for i, t in enumerate(tasks)}
        pairs = [(tasks[by_id[tr.task_id]], tr) for tr in trajs]
        rewards = self.reward_fn(pairs)
        if len(rewards) != len(pairs):
            raise ValueError(f"the reward function returned {len(rewards)} results for {len(pairs)} rollouts")
        rollouts = [Rollout(t, tr, by_id[t.id], r) for (t, tr), r in zip(pairs, rewards, strict=True)]
        # Infrastructure failures (server or sandbox) are not the policy's doing: they take no part in
        # their group's reward statistics nor in any loss term (scoring them 0 would punish the policy).
        live = [r for r in rollouts if not r.infra]
        for r in rollouts:
            if r.infra:
                r.advantage, r.kept = 0.0, False
        if not live:
            return rollouts
        groups = torch.tensor([r.group for r in live])
        adv = group_advantages(
            torch.tensor([r.reward.total for r in live], dtype=torch.float32),
            groups,
            eps=cfg.advantage_eps,
        )
        correct = torch.tensor([r.reward.correct for r in live])
        keep = dynamic_sampling_keep(correct, groups) if cfg.dynamic_sampling else torch.ones_like(correct)
        for r, a, k in zip(live, adv.tolist(), keep.tolist(), strict=True):
            r.advantage, r.kept = a, bool(k)
        return rollouts

    def _policy_rows(self, rollouts: Sequence[Rollout]) -> list[Rollout]:
        """Rollouts that enter the policy term: kept groups, not void (§4 masking), some agent token."""
        rows = []
        for r in rollouts:
            if not r.kept or (self.config.void_masking and r.void):
                continue
            r.example = r.example or self._example(r)
            if r.target_tokens > 0:
                rows.append(r)
        return rows

    @torch.no_grad()
    def _old_logprobs(self, rows: Sequence[Rollout]) -> None:
        model, acc = self.model, self.accelerator
        model.eval()
        pad = self.tokenizer.pad_token_id
        for chunk in _chunks(rows, self.config.micro_batch_size):
            tb = collate([r.example for r in chunk], pad).to(acc.device)  # type: ignore[misc]
            with acc.autocast():
                logp, _ = forward_logprobs(model, tb)
                ref = forward_logprobs(self.ref_model, tb)[0] if self.ref_model is not None else None
            for i, r in enumerate(chunk):
                n = len(r.example.input_ids) - 1  # type: ignore[union-attr]
                r.old_logp = logp[i, :n].float()
                r.ref_logp = None if ref is None else ref[i, :n].float()

    def _null_backward(self) -> None:
        """Join the gradient all-reduce with a zero loss when this process has nothing to train on."""
        acc = self.accelerator
        ids = torch.full((1, 2), self.tokenizer.pad_token_id, dtype=torch.long, device=acc.device)
        out = self.model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
        acc.backward(out.logits.sum() * 0.0)

    def _global_sum(self, value: float) -> float:
        t = torch.tensor(float(value), device=self.accelerator.device)
        return float(self.accelerator.reduce(t, reduction="sum").item())

    def _update(
        self, experts: list[TokenizedTrajectory], rows: list[Rollout], gamma: float
    ) -> dict[str, float] | None:
        """One optimizer update on a mini-batch (experts for SFT, kept rollouts for the policy term)."""
        cfg, acc, model = self.config, self.accelerator, self.model
        world = acc.num_processes
        use_sft = gamma > 0 and bool(experts)
        sft_mode = cfg.sft_normalization
        sft_total = (
            self._global_sum(
                sum(sum(e.loss_mask[1:]) for e in experts)
                if sft_mode == "token"
                else sum(1 for e in experts if sum(e.loss_mask[1:]) > 0)
            )
            if gamma > 0
            else 0.0
        )
        local_pol = sum(r.target_tokens for r in rows) if self.normalization == "token" else 0.0
        if self.normalization != "token" and rows:
            mask = pad_stack(
                [torch.tensor(r.example.loss_mask[1:], dtype=torch.float32) for r in rows],  # type: ignore[union-attr]
                max(len(r.example.input_ids) for r in rows) - 1,  # type: ignore[union-attr]
            )
            groups = torch.tensor([r.group for r in rows])
            local_pol = normalization_count(mask, self.normalization, group_ids=groups)
        pol_total = self._global_sum(local_pol) if gamma < 1 else 0.0
        if sft_total == 0 and pol_total == 0:
            return None
        if rows and pol_total > 0:
            self._row_weights(rows, pol_total)
        pad = self.tokenizer.pad_token_id
        jobs: list[tuple[str, list[Any]]] = []
        if use_sft and sft_total > 0:
            jobs += [("sft", c) for c in _chunks(experts, cfg.micro_batch_size)]
        if gamma < 1 and pol_total > 0:
            jobs += [("policy", c) for c in _chunks(rows, cfg.micro_batch_size)]
        model.train()
        sums = {
            "sft_loss": 0.0,
            "policy_loss": 0.0,
            "clip_frac_tok": 0.0,
            "kl": 0.0,
            "tis_clip_frac_tok": 0.0,
        }
        ent_sum = ent_n = tok = 0.0
        if not jobs:
            self._null_backward()
        for j, (kind, chunk) in enumerate(jobs):
            sync = j == len(jobs) - 1
            with contextlib.nullcontext() if sync else acc.no_sync(model), acc.autocast():
                if kind == "sft":
                    tb = collate(chunk, pad).to(acc.device)
                    logp, _ = forward_logprobs(model, tb)
                    mask = tb.target_mask
                    w = normalization_weights(mask, sft_mode, total=sft_total)
                    part = sft_loss(logp, mask, weights=w)
                    loss = mixed_objective(part, torch.zeros_like(part), gamma) * world
                    sums["sft_loss"] += float(part.detach())
                else:
                    loss, stats = self._policy_micro(chunk, pad, gamma)
                    sums["policy_loss"] += stats["policy_loss"]
                    sums["clip_frac_tok"] += stats["clip_frac"] * stats["tokens"]
                    sums["tis_clip_frac_tok"] += stats["tis_clip_frac"] * stats["tokens"]
                    sums["kl"] += stats.get("kl", 0.0)
                    ent_sum += stats["entropy_sum"]
                    ent_n += stats["tokens"]
                    tok += stats["tokens"]
            acc.backward(loss)
        grad_norm = None
        if cfg.optim.max_grad_norm > 0:
            grad_norm = acc.clip_grad_norm_(model.parameters(), cfg.optim.max_grad_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        out = {k: self._global_sum(v) for k, v in sums.items()}
        out["tokens"] = self._global_sum(tok)
        out["entropy_sum"], out["entropy_n"] = self._global_sum(ent_sum), self._global_sum(ent_n)
        out["grad_norm"] = float(grad_norm) if grad_norm is not None else float("nan")
        out["has_sft"], out["has_policy"] = (
            float(sft_total > 0 and gamma > 0),
            float(pol_total > 0 and gamma < 1),
        )
        return out

    def _row_weights(self, rows: Sequence[Rollout], total: float) -> None:
        """Each row's normalization weights over the whole update (a group may span micro-batches)."""
        width = max(len(r.example.input_ids) for r in rows) - 1  # type: ignore[union-attr]
        mask = pad_stack(
            [torch.tensor(r.example.loss_mask[1:], dtype=torch.float32) for r in rows],  # type: ignore[union-attr]
            width,
        )
        groups = torch.tensor([r.group for r in rows])
        weights = normalization_weights(mask, self.normalization, group_ids=groups, total=total)
        for r, w in zip(rows, weights, strict=True):
            r.weights = w[: len(r.example.input_ids) - 1]  # type: ignore[union-attr]

    def _policy_micro(
        self, chunk: list[Rollout], pad: int, gamma: float
    ) -> tuple[torch.Tensor, dict[str, float]]:
        cfg, acc = self.config, self.accelerator
        tb: TokenBatch = collate([r.example for r in chunk], pad).to(acc.device)  # type: ignore[misc]
        logp, ent = forward_logprobs(
            self.model, tb, entropy=True, entropy_grad=self.spec.needs_entropy_grad(cfg)
        )
        width = logp.shape[1]
        mask = tb.target_mask
        groups = torch.tensor([r.group for r in chunk], device=acc.device)
        inputs = PolicyInputs(
            logp=logp,
            old_logp=pad_stack([r.old_logp for r in chunk], width).to(acc.device),  # type: ignore[misc]
            advantages=torch.tensor([r.advantage for r in chunk], dtype=torch.float32, device=acc.device),
            mask=mask,
            weights=pad_stack([r.weights for r in chunk], width).to(acc.device),  # type: ignore[misc]
            group_ids=groups,
            ref_logp=(
                pad_stack([r.ref_logp for r in chunk], width).to(acc.device)  # type: ignore[misc]
                if self.ref_model is not None
                else None
            ),
            rollout_logp=(
                pad_stack([r.rollout_logp for r in chunk], width).to(acc.device)  # type: ignore[misc]
                if all(r.rollout_logp is not None for r in chunk)
                else None
            ),
            entropy=ent,
        )
        out = self.spec.fn(inputs, cfg)
        loss = mixed_objective(torch.zeros_like(out.loss), out.loss, gamma) * acc.num_processes
        n_tok = float(mask.sum().item())
        stats = {
            "policy_loss": float(out.loss.detach()),
            "clip_frac": float(out.metrics.get("clip_frac", torch.zeros(()))),
            "tis_clip_frac": float(out.metrics.get("tis_clip_frac", torch.zeros(()))),
            "tokens": n_tok,
            "entropy_sum": float((ent.detach() * mask).sum()) if ent is not None else 0.0,
        }
        if "kl" in out.metrics:
            stats["kl"] = float(out.metrics["kl"])
        return loss, stats

    def _write_scored(self, path: Path, rollouts: Sequence[Rollout]) -> None:
        records = []
        for r in rollouts:
            rewards = {**r.traj.rewards, **r.reward.as_rewards()}  # total, weighted parts, their details
            extra = {**r.traj.extra, "advantage": r.advantage, "kept": r.kept, "correct": r.reward.correct}
            records.append(r.traj.model_copy(update={"rewards": rewards, "extra": extra}))
        write_jsonl_atomic(path, records)

    # ------------------------------------------------------------------ the loop

    def train(self, *, resume: bool = True) -> RLSummary:
        """Run ``total_steps`` RL steps (resuming from the newest checkpoint when ``resume``)."""
        cfg, acc = self.config, self.accelerator
        started = time.perf_counter()
        world, rank = acc.num_processes, acc.process_index
        total_updates = cfg.total_steps * cfg.updates_per_step
        self.optimizer, self.scheduler = build_optimizer(self.model, cfg.optim, total_updates)
        self.model, self.optimizer = acc.prepare(self.model, self.optimizer)
        acc.register_for_checkpointing(self.scheduler)
        if self.ref_model is not None:
            self.ref_model.to(acc.device)
        ckpt = CheckpointManager(self.run_dir, keep=cfg.keep_checkpoints)
        metrics = MetricsLog(self.run_dir / "metrics.jsonl")
        cfg_dict = json.loads(json.dumps(cfg.to_dict()))
        start, state = begin_run(acc, ckpt, self.run_dir, cfg_dict, metrics, resume=resume)
        updates = 0
        if state is not None:
            updates = int(state.get("updates", 0))
            self.source.sync(acc, self.model)
        rollout_dir = self.run_dir / "rollouts"
        rollout_dir.mkdir(parents=True, exist_ok=True)
        last: dict[str, Any] = {}

        for step in range(start, cfg.total_steps):
            gamma = self.gamma(step)
            t0 = time.perf_counter()
            local_tasks = self.tasks_for_step(step)[rank::world]
            raw = rollout_dir / f"step_{step + 1:06d}.rank{rank}.jsonl"
            trajs = self.source.generate(local_tasks, cfg.group_size, raw, seed=cfg.seed * 1_000_003 + step)
            t1 = time.perf_counter()
            rollouts = self.score(local_tasks, trajs)
            t2 = time.perf_counter()
            rows = self._policy_rows(rollouts)
            self._old_logprobs(rows)
            pieces = _split(len(local_tasks), cfg.updates_per_step)
            agg: dict[str, float] = {}
            n_sft = n_pol = n_upd = 0
            for piece in pieces:
                groups = set(piece)
                ex = [e for i in piece for e in self.experts.get(local_tasks[i].id, [])]
                res = self._update(ex, [r for r in rows if r.group in groups], gamma)
                if res is None:
                    continue
                updates += 1
                n_upd += 1
                n_sft += int(res.pop("has_sft"))
                n_pol += int(res.pop("has_policy"))
                for k, v in res.items():
                    agg[k] = agg.get(k, 0.0) + v
            self.source.sync(acc, self.model)
            t3 = time.perf_counter()
            self._write_scored(rollout_dir / f"step_{step + 1:06d}.rank{rank}.scored.jsonl", rollouts)
            counts = (n_sft, n_pol, n_upd)
            record = self._step_metrics(step, gamma, rollouts, agg, counts, (t1 - t0, t2 - t1, t3 - t2))
            record["updates"] = updates
            last = record
            if acc.is_main_process:
                metrics.append(record)
            done = step + 1
            if cfg.publish_every and done % cfg.publish_every == 0:
                save_hf_model(acc, self.model, self.tokenizer, self.run_dir / "policy")
            if (cfg.save_every and done % cfg.save_every == 0) or done == cfg.total_steps:
                ckpt.save(acc, self.model, self.tokenizer, done, {"config": cfg_dict, "updates": updates})
                if acc.is_main_process:
                    write_curves(metrics.read(), self.run_dir / "curves.svg", DEFAULT_RL_KEYS, title="RL")

        final_dir = save_hf_model(acc, self.model, self.tokenizer, self.run_dir / "final")
        summary = RLSummary(
            run_dir=str(self.run_dir),
            steps=cfg.total_steps,
            resumed_from=start,
            updates=updates,
            elapsed_s=round(time.perf_counter() - started, 3),
            model_dir=str(final_dir),
            last_metrics=last,
        )
        if acc.is_main_process:
            write_curves(metrics.read(), self.run_dir / "curves.svg", DEFAULT_RL_KEYS, title="RL")
            write_json_atomic(self.run_dir / "summary.json", summary.to_dict(), indent=1, ensure_ascii=True)
        return summary

    def _step_metrics(
        self,
        step: int,
        gamma: float,
        rollouts: Sequence[Rollout],
        agg: dict[str, float],
        counts: tuple[int, int, int],
        times: tuple[float, float, float],
    ) -> dict[str, Any]:
        """The step's record: sums over processes, then means (``counts``: updates with an SFT term, with a
        policy term, in all)."""
        g = self._global_sum
        n_sft, n_pol, n_upd = counts
        n = g(len(rollouts))
        groups = {r.group for r in rollouts}
        kept_groups = {r.group for r in rollouts if r.kept}
        n_groups, n_kept = g(len(groups)), g(len(kept_groups))
        reward_sum = g(sum(r.reward.total for r in rollouts))
        reward_sq = g(sum(r.reward.total**2 for r in rollouts))
        mean = reward_sum / n if n else float("nan")
        tokens = agg.get("tokens", 0.0)
        # every process reduces the same names in the same order (a collective per name): the built-ins' parts
        parts = {
            name: g(sum(r.reward.parts.get(name, 0.0) for r in rollouts)) / n if n else None
            for name in BUILTIN_PARTS
        }

        def per(key: str, count: int) -> float | None:
            return agg[key] / count if count and key in agg else None

        return {
            "step": step + 1,
            "gamma": gamma,
            "sft_loss": per("sft_loss", n_sft),
            "policy_loss": per("policy_loss", n_pol),
            "loss": (
                (gamma * (per("sft_loss", n_sft) or 0.0) + (1 - gamma) * (per("policy_loss", n_pol) or 0.0))
                if (n_sft or n_pol)
                else None
            ),
            "reward_mean": mean,
            "reward_std": math.sqrt(max(0.0, reward_sq / n - mean**2)) if n else None,
            **{f"reward_{k}": v for k, v in parts.items() if any(k in r.reward.parts for r in rollouts)},
            "accuracy": g(sum(r.reward.correct for r in rollouts)) / n if n else None,
            "entropy": agg["entropy_sum"] / agg["entropy_n"] if agg.get("entropy_n") else None,
            "frac_groups_filtered": 1.0 - n_kept / n_groups if n_groups else None,
            "void_rate": g(sum(r.void for r in rollouts)) / n if n else None,
            "infra_failures": int(g(sum(r.infra for r in rollouts))),
            "policy_lag": getattr(self.source, "policy_lag", None),
            "clip_frac": agg["clip_frac_tok"] / tokens if tokens else None,
            "tis_clip_frac": agg["tis_clip_frac_tok"] / tokens if tokens else None,
            "kl": per("kl", n_pol) if self.ref_model is not None else None,
            "grad_norm": per("grad_norm", n_upd),
            "lr": self.scheduler.get_last_lr()[0],
            "rollouts": int(n),
            "policy_tokens": int(tokens),
            "turns_mean": g(sum(r.traj.n_turns for r in rollouts)) / n if n else None,
            "time_rollout_s": round(times[0], 3),
            "time_reward_s": round(times[1], 3),
            "time_train_s": round(times[2], 3),
        }

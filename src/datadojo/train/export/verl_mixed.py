r"""DataMind's γ·SFT + (1−γ)·DAPO inside verl (0.9): the whole-batch loss hook, an expert stream, no fork.

verl's policy-loss registry (``datadojo_dapo``, :mod:`~datadojo.train.export.verl_loss`) only sees
rollout tensors; DataMind's objective also needs expert trajectories and per-term normalization over the
mini-batch. verl's engine workers take a *whole-batch* loss instead — ``TrainingWorker.set_loss_fn(fn)``,
called per micro-batch as ``fn(model_output=..., data=<micro-batch TensorDict>, dp_group=...)``
(``verl/workers/engine/fsdp/transformer_impl.py:forward_step``) — and verl's v1 trainer is chosen by name
from ``verl.trainer.ppo.v1.register_trainer``. This module plugs in through those documented extension
points only:

* **expert stream** — :func:`export_verl_mixed` writes verl parquet rows whose ``agent_name`` is
  ``datadojo_expert`` next to the task rows; :class:`DataDojoExpertAgentLoop` replays the row's expert
  trajectory (from DataDojo's SFT data: oracle / synthesized trajectories) as tokens — the chat template's
  rendering with prompts and observations masked — instead of generating, with
  ``extra_fields["datadojo_expert"] = 1``. Expert rows thus reach the actor in the same batch as the
  rollouts, through verl's own data path.
* **trainer** ``trainer.v1.trainer_mode=datadojo_mixed`` (:class:`DataDojoMixedTrainer`, verl's sync
  trainer) puts γ of the step (:class:`~datadojo.train.schedules.GammaSchedule`, settings under the
  ``+datadojo`` config section) into the actor update's ``extra_info`` and runs the actor in
  :class:`DataDojoActorRolloutRefWorker`.
* **worker** — :class:`DataDojoActorRolloutRefWorker` is verl's ``ActorRolloutRefWorker`` with its
  ``actor_worker_cls`` extension point set to :class:`DataDojoTrainingWorker` and the loss set with
  ``set_loss_fn`` to :func:`datadojo_mixed_loss`. The training worker (1) per step, tags each row as expert /
  void / kept by dynamic sampling (groups by verl's ``uid``, gathered over the data-parallel ranks, so a group
  split across ranks is judged whole) and (2) per mini-batch, all-reduces the counts the loss normalizes by
  (:func:`datadojo.train.verl_mixed.mixed_counts`) and sums each rollout group's DAPO tokens over the ranks
  (:func:`datadojo.train.verl_mixed.policy_group_tokens`), for ``query_token_mean``.
* **loss** — :func:`datadojo_mixed_loss` is :func:`datadojo.train.verl_mixed.gamma_mixed_loss` on verl's
  tensors: each micro-batch's exact share of the mini-batch's γ·L_SFT + (1−γ)·L_DAPO, the DAPO term
  aggregated as ``+datadojo.loss_aggregation`` says (``query_token_mean``, DataMind §4 and the default, or
  ``batch_token_mean``) — the setting ``datadojo train rl`` reads as ``loss_aggregation``.

Dynamic sampling happens in the loss (filtered groups leave the DAPO term and its token count, DataMind
§4); do **not** also enable verl's ``algorithm.filter_groups``, which would drop the expert rows' groups
(their G copies are identical). verl repeats every row ``rollout.n`` times, the expert rows too: the SFT
token mean is unchanged by the copies (each counts n times in numerator and denominator).
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch

from datadojo.train.config import DEFAULT_LOSS_AGGREGATION
from datadojo.train.export import ExportError, ExportReport
from datadojo.train.losses import aggregation_normalization
from datadojo.train.schedules import GammaSchedule
from datadojo.train.verl_mixed import (
    MixedCounts,
    gamma_mixed_loss,
    group_keep,
    mixed_counts,
    policy_group_tokens,
    row_group_tokens,
    term_masks,
)
from datadojo.types import Task, Trajectory

log = logging.getLogger(__name__)

__all__ = [
    "EXPERT_AGENT",
    "TRAINER_MODE",
    "aggregation_of",
    "annotate_mini_batch",
    "annotate_step_batch",
    "datadojo_mixed_loss",
    "export_verl_mixed",
    "gamma_for_step",
    "register",
]

EXPERT_AGENT = "datadojo_expert"
TRAINER_MODE = "datadojo_mixed"

#: Keys the worker adds to verl's batch (per-row tensors) and to each mini-batch (non-tensor counts).
EXPERT_KEY, VOID_KEY, KEEP_KEY = "datadojo_expert", "datadojo_void", "datadojo_keep"
SFT_TOKENS_KEY, POLICY_TOKENS_KEY = "datadojo_sft_tokens", "datadojo_policy_tokens"
POLICY_GROUPS_KEY, GROUP_TOKENS_KEY = "datadojo_policy_groups", "datadojo_group_tokens"
GAMMA_KEY, DYNAMIC_KEY = "datadojo_gamma", "datadojo_dynamic_sampling"
AGGREGATION_KEY = "datadojo_loss_aggregation"


def _cfg(cfg: Any, name: str, default: Any = None) -> Any:
    if cfg is None:
        return default
    value = cfg.get(name, None) if hasattr(cfg, "get") else getattr(cfg, name, None)
    return default if value is None else value


def gamma_for_step(settings: Any, step: int, total_steps: int) -> float:
    """γ at 0-based ``step`` from the ``datadojo.gamma`` config section (DataMind §4 defaults: cosine 0.9 → 0.05
    over the run's ``total_steps``)."""
    g = _cfg(settings, "gamma", {}) or {}
    mode = str(_cfg(g, "mode", "cosine"))
    if mode == "fixed":
        return GammaSchedule.fixed(float(_cfg(g, "value", 0.0)))(step)
    schedule = GammaSchedule(
        mode=mode,  # type: ignore[arg-type]
        start=float(_cfg(g, "start", 0.9)),
        end=float(_cfg(g, "end", 0.05)),
        total_steps=int(_cfg(g, "total_steps", total_steps) or total_steps),
        warmup_steps=int(_cfg(g, "warmup_steps", 0)),
    )
    return schedule(max(0, step))


def aggregation_of(settings: Any) -> str:
    """``datadojo.loss_aggregation`` of the config (default: DataMind §4's ``query_token_mean``), checked."""
    name = str(_cfg(settings, "loss_aggregation", DEFAULT_LOSS_AGGREGATION))
    try:
        aggregation_normalization(name)
    except ValueError as exc:
        raise ValueError(f"datadojo.loss_aggregation: {exc}") from None
    return name


# --------------------------------------------------------------------------- tensors in verl's batch


def _padded(t: torch.Tensor) -> torch.Tensor:
    return t.to_padded_tensor(0) if t.is_nested else t


def _extra_fields(data: Any) -> list[dict[str, Any]] | None:
    from verl.utils import tensordict_utils as tu

    rows = tu.get(data, "extra_fields", None)
    if rows is None:
        return None
    return [r if isinstance(r, dict) else {} for r in rows]


def _flag(rows: list[dict[str, Any]] | None, key: str, n: int) -> torch.Tensor:
    if rows is None:
        return torch.zeros(n, dtype=torch.bool)
    return torch.tensor([bool(r.get(key)) for r in rows], dtype=torch.bool)


def _correct(rows: list[dict[str, Any]] | None, n: int) -> torch.Tensor:
    """A row is correct when DataDojo's reward says so (``acc``, :func:`verl_agent.score_trajectory`)."""
    if rows is None:
        return torch.zeros(n, dtype=torch.bool)
    out = []
    for r in rows:
        info = r.get("reward_extra_info") or {}
        out.append(float(info.get("acc", 0.0) or 0.0) > 0.5)
    return torch.tensor(out, dtype=torch.bool)


def annotate_step_batch(data: Any, dp_group: Any = None, *, dynamic_sampling: bool = True) -> None:
    """Tag every row of this rank's step batch: ``datadojo_expert`` / ``datadojo_void`` / ``datadojo_keep``.

    ``keep`` is DAPO's dynamic sampling over verl's prompt ``uid`` groups, judged on the groups gathered from
    all data-parallel ranks (``dp_group``; ``None`` = one process).
    """
    from verl.utils import tensordict_utils as tu

    n = data.shape[0]
    rows = _extra_fields(data)
    expert = _flag(rows, EXPERT_KEY, n)
    void = _flag(rows, VOID_KEY, n)
    if dynamic_sampling:
        uids = [str(u) for u in (tu.get(data, "uid", None) or range(n))]
        correct = _correct(rows, n)
        local = list(zip(uids, correct.tolist(), expert.tolist(), strict=True))
        everything = local
        if dp_group is not None and torch.distributed.is_initialized():
            parts: list[Any] = [None] * torch.distributed.get_world_size(dp_group)
            torch.distributed.all_gather_object(parts, local, group=dp_group)
            everything = [x for p in parts for x in p]
        keep_all = group_keep(
            [u for u, _, _ in everything],
            torch.tensor([c for _, c, _ in everything], dtype=torch.bool),
            torch.tensor([e for _, _, e in everything], dtype=torch.bool),
        )
        verdict = {u: bool(k) for (u, _, e), k in zip(everything, keep_all.tolist(), strict=True) if not e}
        keep = torch.tensor([True if e else verdict[u] for u, _, e in local], dtype=torch.bool)
    else:
        keep = torch.ones(n, dtype=torch.bool)
    data[EXPERT_KEY], data[VOID_KEY], data[KEEP_KEY] = expert, void, keep


def annotate_mini_batch(data: Any, dp_group: Any = None) -> MixedCounts:
    """Put the mini-batch's counts (all ranks) into its non-tensor data, and each row's whole-group DAPO
    token count (``datadojo_group_tokens``, groups by ``uid`` summed over the ranks) into its tensors."""
    from verl.utils import tensordict_utils as tu

    mask = _padded(data["response_mask"]).float()
    local = mixed_counts(mask, data[EXPERT_KEY], void=data[VOID_KEY], keep=data[KEEP_KEY])
    sums = torch.tensor([local.sft_tokens, local.policy_tokens], dtype=torch.float64)
    distributed = dp_group is not None and torch.distributed.is_initialized()
    if distributed:
        from verl.utils.device import get_device_id

        sums = sums.to(get_device_id())
        torch.distributed.all_reduce(sums, op=torch.distributed.ReduceOp.SUM, group=dp_group)
    n_groups = 0.0
    uids = tu.get(data, "uid", None)
    if uids is not None:
        uids = [str(u) for u in uids]
        _, policy = term_masks(mask, data[EXPERT_KEY], void=data[VOID_KEY], keep=data[KEEP_KEY])
        totals = policy_group_tokens(uids, policy)
        if distributed:
            parts: list[Any] = [None] * torch.distributed.get_world_size(dp_group)
            torch.distributed.all_gather_object(parts, totals, group=dp_group)
            totals = {}
            for part in parts:
                for u, n in part.items():
                    totals[u] = totals.get(u, 0.0) + n
        data[GROUP_TOKENS_KEY] = row_group_tokens(uids, totals)
        n_groups = float(sum(1 for n in totals.values() if n > 0))
    counts = MixedCounts(float(sums[0].item()), float(sums[1].item()), n_groups)
    tu.assign_non_tensor(
        data,
        **{
            SFT_TOKENS_KEY: counts.sft_tokens,
            POLICY_TOKENS_KEY: counts.policy_tokens,
            POLICY_GROUPS_KEY: counts.policy_groups,
        },
    )
    return counts


def datadojo_mixed_loss(
    config: Any, model_output: dict[str, Any], data: Any, dp_group: Any = None
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl's whole-batch loss signature (``set_loss_fn``): this micro-batch's share of γ·L_SFT + (1−γ)·L_DAPO.

    Reads γ (``datadojo_gamma``), the loss aggregation (``datadojo_loss_aggregation``, set by the trainer from
    ``+datadojo.loss_aggregation``) and the mini-batch counts from the micro-batch's non-tensor data, the
    row tags and whole-group token counts from its tensors, the clip range from the actor ``config`` (``clip_ratio_low`` /
    ``clip_ratio_high``, DataMind's 0.2 / 0.28).
    """
    from verl.utils import tensordict_utils as tu
    from verl.utils.metric import AggregationType, Metric
    from verl.workers.utils.padding import no_padding_2_padding

    if _cfg(config, "use_kl_loss", False) or float(_cfg(config, "entropy_coeff", 0.0)) != 0.0:
        raise ValueError(
            "the datadojo_mixed loss is DataMind's γ·SFT + (1−γ)·DAPO, which has no KL or entropy term: set "
            "actor_rollout_ref.actor.use_kl_loss=False and actor_rollout_ref.actor.entropy_coeff=0"
        )
    gamma = tu.get(data, GAMMA_KEY, None)
    if gamma is None:
        raise ValueError(
            f"the micro-batch carries no {GAMMA_KEY}: run with trainer.v1.trainer_mode={TRAINER_MODE}"
        )
    sft_tokens = tu.get(data, SFT_TOKENS_KEY, None)
    policy_tokens = tu.get(data, POLICY_TOKENS_KEY, None)
    if sft_tokens is None or policy_tokens is None:
        raise ValueError(
            "the micro-batch carries no token counts: the actor must run in DataDojoTrainingWorker"
        )
    aggregation = str(tu.get(data, AGGREGATION_KEY, None) or DEFAULT_LOSS_AGGREGATION)
    group_tokens = data.get(GROUP_TOKENS_KEY, None)
    if aggregation_normalization(aggregation) == "group" and group_tokens is None:
        raise ValueError(
            f"loss_aggregation {aggregation} needs verl's prompt uid on every row of the mini-batch "
            "(set +datadojo.loss_aggregation=batch_token_mean to average over all tokens instead)"
        )
    log_prob = no_padding_2_padding(model_output["log_probs"], data)
    fields = ["response_mask", "old_log_probs", "advantages"]
    if "rollout_is_weights" in data:
        fields.append("rollout_is_weights")
    dense = data.select(*fields).to_padded_tensor()
    clip = _cfg(config, "clip_ratio", None)
    out = gamma_mixed_loss(
        log_prob,
        dense["old_log_probs"],
        dense["advantages"],
        dense["response_mask"].float(),
        gamma=float(gamma),
        counts=MixedCounts(
            float(sft_tokens), float(policy_tokens), float(tu.get(data, POLICY_GROUPS_KEY, 0.0) or 0.0)
        ),
        expert=data[EXPERT_KEY],
        void=data[VOID_KEY],
        keep=data[KEEP_KEY],
        rollout_is_weights=dense.get("rollout_is_weights", None),
        eps_low=float(_cfg(config, "clip_ratio_low", clip if clip is not None else 0.2)),
        eps_high=float(_cfg(config, "clip_ratio_high", clip if clip is not None else 0.28)),
        dp_size=int(tu.get(data, "dp_size", 1) or 1),
        aggregation=aggregation,
        group_tokens=group_tokens,
    )
    m = out.metrics
    metrics: dict[str, Any] = {
        "actor/pg_loss": Metric(value=m["pg_loss"], aggregation=AggregationType.SUM),
        "actor/sft_loss": Metric(value=m["sft_loss"], aggregation=AggregationType.SUM),
        "actor/pg_clipfrac": Metric(value=float(m["clip_frac"]), aggregation=AggregationType.MEAN),
        "actor/ppo_kl": Metric(value=float(m["ppo_kl"]), aggregation=AggregationType.MEAN),
        "actor/datadojo_gamma": Metric(value=float(gamma), aggregation=AggregationType.MEAN),
    }
    return out.loss, metrics


# --------------------------------------------------------------------------- the expert stream (export)


def _expert_row(task_row: dict[str, Any], traj: Trajectory, index: int) -> dict[str, Any]:
    row = json.loads(json.dumps(task_row))
    row["agent_name"] = EXPERT_AGENT
    row["extra_info"]["index"] = index
    row["extra_info"]["expert"] = traj.model_dump_json()
    return row


def export_verl_mixed(
    tasks: Iterable[Task],
    experts: Iterable[Trajectory],
    out_dir: str | Path,
    *,
    agent_name: str = "datadojo",
    seed: int = 0,
    **kwargs: Any,
) -> ExportReport:
    """verl data for the mixed objective: ``train.parquet`` with the task rows (``agent_name``) and one
    ``datadojo_expert`` row per usable expert trajectory of those tasks (void ones dropped, DataMind §4),
    shuffled together with ``seed``; the rest as :func:`~datadojo.train.export.verl.export_verl`."""
    import pyarrow.parquet as pq

    from datadojo.train.export.verl import _write_parquet, export_verl, task_to_verl_row

    items = list(tasks)
    report = export_verl(items, out_dir, seed=seed, **kwargs)
    path = Path(out_dir) / "train.parquet"
    rows = pq.read_table(path).to_pylist()  # the train split export_verl chose
    for row in rows:
        row["agent_name"] = agent_name
    train_ids = {r["extra_info"]["task_id"] for r in rows}
    by_id = {t.id: t for t in items if t.id in train_ids}
    row_kw = {k: kwargs[k] for k in ("max_turns", "dialect", "profile_chars") if k in kwargs}
    tasks_path = kwargs.get("tasks_path")
    tasks_dir = str(Path(tasks_path).resolve().parent) if tasks_path is not None else None
    n_tasks = len(rows)
    for traj in report.trainable(experts):
        task = by_id.get(traj.task_id)
        if task is None:  # an expert of a validation task, or of no task here
            report.skipped_other += 1
            continue
        rows.append(_expert_row(task_to_verl_row(task, 0, "train", tasks_dir=tasks_dir, **row_kw), traj, 0))
    if len(rows) == n_tasks:
        raise ExportError("no expert trajectory matches a training task: the SFT term would be empty")
    random.Random(seed).shuffle(rows)
    for i, row in enumerate(rows):
        row["extra_info"]["index"] = i
    _write_parquet(rows, path)
    report.format = "verl_mixed"
    report.written += len(rows) - n_tasks
    report.notes.append(
        f"{n_tasks} task rows ({agent_name}), {len(rows) - n_tasks} expert rows ({EXPERT_AGENT})"
    )
    return report


# --------------------------------------------------------------------------- verl classes (need verl)


def _expert_loop_class() -> type:
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

    from datadojo.train.tokenize import tokenize_trajectory

    class DataDojoExpertAgentLoop(AgentLoopBase):  # type: ignore[misc, valid-type]
        """Replays the row's expert trajectory as tokens (prompt and observations masked); no generation."""

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
            info = dict(kwargs.get("extra_info") or {})
            raw = info.get("expert")
            if not raw:
                raise ValueError(
                    f"row {info.get('task_id')!r}: a {EXPERT_AGENT} row needs extra_info['expert']"
                )
            traj = Trajectory.model_validate_json(raw)
            ex = tokenize_trajectory(traj, self.tokenizer)
            start = next((i for i, m in enumerate(ex.loss_mask) if m), len(ex.loss_mask))
            n = int(_cfg(self.rollout_config, "response_length", 4096))
            response = ex.input_ids[start : start + n]
            mask = ex.loss_mask[start : start + n]
            return AgentLoopOutput(
                prompt_ids=ex.input_ids[:start],
                response_ids=response,
                response_mask=[0] * len(mask) if ex.void else mask,
                response_logprobs=None,
                reward_score=0.0,
                num_turns=2 * traj.n_turns + 1,
                metrics=AgentLoopMetrics(generate_sequences=0.0, tool_calls=0.0),
                extra_fields={
                    EXPERT_KEY: 1,
                    VOID_KEY: int(ex.void),
                    "datadojo_infra_failure": 0,
                    "reward_extra_info": {"acc": 0.0},
                },
            )

    return DataDojoExpertAgentLoop


def _worker_classes() -> tuple[type, type]:
    from verl.single_controller.base.decorator import Dispatch
    from verl.single_controller.base.decorator import register as verl_register
    from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker

    class DataDojoTrainingWorker(TrainingWorker):  # type: ignore[misc, valid-type]
        """verl's ``TrainingWorker`` that tags rows per step and counts tokens per mini-batch (module doc)."""

        def train_mini_batch(self, data: Any) -> Any:
            from verl.utils import tensordict_utils as tu

            dynamic = bool(tu.get(data, DYNAMIC_KEY, True))
            annotate_step_batch(data, self.engine.get_data_parallel_group(), dynamic_sampling=dynamic)
            return super().train_mini_batch(data)

        def train_batch(self, data: Any) -> Any:
            annotate_mini_batch(data, self.engine.get_data_parallel_group())
            return super().train_batch(data)

    class DataDojoActorRolloutRefWorker(ActorRolloutRefWorker):  # type: ignore[misc, valid-type]
        """verl's hybrid worker with :class:`DataDojoTrainingWorker` and :func:`datadojo_mixed_loss`."""

        actor_worker_cls = DataDojoTrainingWorker

        @verl_register(dispatch_mode=Dispatch.ONE_TO_ALL)  # as verl's own init_model
        def init_model(self) -> None:
            super().init_model()
            if self.actor is not None:
                actor_config = self.loss_fn.keywords["config"]  # verl's partial(ppo_loss, config=...)
                self.loss_fn = partial(datadojo_mixed_loss, actor_config)
                self.actor.set_loss_fn(self.loss_fn)

    return DataDojoTrainingWorker, DataDojoActorRolloutRefWorker


def _trainer_class(actor_worker: type) -> type:
    import ray
    from verl.trainer.ppo.v1 import PPOTrainerSync
    from verl.workers.engine_workers import ActorRolloutRefWorker

    class DataDojoMixedTrainer(PPOTrainerSync):  # type: ignore[misc, valid-type]
        """verl's synchronous v1 trainer with γ per step and DataDojo's actor worker (module docstring)."""

        def _init_resource_pool_mgr(self) -> None:
            super()._init_resource_pool_mgr()
            for role, cls in list(self.role_worker_mapping.items()):
                if getattr(cls, "__ray_actor_class__", None) is ActorRolloutRefWorker:
                    self.role_worker_mapping[role] = ray.remote(actor_worker)

        def _update_actor(self, batch: Any, metrics: dict) -> Any:
            settings = self.config.get("datadojo", None)
            total = int(
                getattr(self, "total_training_steps", 0) or self.config.trainer.total_training_steps or 1
            )
            gamma = gamma_for_step(settings, int(self.global_steps) - 1, total)
            batch.extra_info[GAMMA_KEY] = gamma
            batch.extra_info[DYNAMIC_KEY] = bool(_cfg(settings, "dynamic_sampling", True))
            batch.extra_info[AGGREGATION_KEY] = aggregation_of(settings)
            metrics["datadojo/gamma"] = gamma
            return super()._update_actor(batch, metrics)

    return DataDojoMixedTrainer


_REGISTERED: dict[str, type] = {}


def register() -> dict[str, type]:
    """Register the expert agent loop (``datadojo_expert``) and the trainer mode ``datadojo_mixed`` in verl
    (idempotent; run in every Ray process, e.g. from ``verl_agent.register`` as the worker setup hook)."""
    if _REGISTERED:
        return _REGISTERED
    from verl.experimental.agent_loop.agent_loop import register as register_loop

    loop = _expert_loop_class()
    loop.__module__, loop.__qualname__ = __name__, "DataDojoExpertAgentLoop"
    register_loop(EXPERT_AGENT)(loop)
    training, actor = _worker_classes()
    for cls, name in ((training, "DataDojoTrainingWorker"), (actor, "DataDojoActorRolloutRefWorker")):
        cls.__module__, cls.__qualname__ = __name__, name
    try:  # verl's v1 trainers need TransferQueue, an optional dependency of verl's wheel
        from verl.trainer.ppo.v1 import register_trainer
        from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY
    except ImportError as exc:
        log.warning(
            "verl's v1 trainer is not importable (%s): trainer mode %s not registered", exc, TRAINER_MODE
        )
    else:
        trainer = TRAINER_REGISTRY.get(TRAINER_MODE) or register_trainer(TRAINER_MODE)(_trainer_class(actor))
        trainer.__module__, trainer.__qualname__ = __name__, "DataDojoMixedTrainer"
        _REGISTERED["DataDojoMixedTrainer"] = trainer
    _REGISTERED.update(
        {
            "DataDojoExpertAgentLoop": loop,
            "DataDojoTrainingWorker": training,
            "DataDojoActorRolloutRefWorker": actor,
        }
    )
    return _REGISTERED


def __getattr__(name: str) -> Any:  # Hydra / Ray / pickle find the classes by module attribute
    if name in (
        "DataDojoExpertAgentLoop",
        "DataDojoTrainingWorker",
        "DataDojoActorRolloutRefWorker",
        "DataDojoMixedTrainer",
    ):
        found = register().get(name)
        if found is not None:
            return found
    raise AttributeError(name)


def expert_rows(rows: Sequence[dict[str, Any]]) -> int:
    """How many rows of a verl parquet are expert rows (for reports and tests)."""
    return sum(1 for r in rows if r.get("agent_name") == EXPERT_AGENT)

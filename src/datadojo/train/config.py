"""Typed training configurations with the papers' defaults: :class:`SFTConfig` and :class:`RLConfig`.

Each field's default is either a number a paper states (cited in the class docstring) or our choice where
the papers are silent (marked "ours"). A configuration round-trips through a dict / JSON / TOML file
(:func:`load_config`); an unknown key is an error naming the key and the file, so a typo never silently
leaves a default in place. Nothing here imports torch: the CLI can build and validate configurations
before paying for it.

Both are :class:`datadojo.config.Settings` (frozen pydantic models, validated on construction and on
:meth:`~RunConfig.replace`); the settings they share are declared once, in :class:`RunConfig`, with their
help text (which ``datadojo train`` shows for its flags). A subclass that needs another default for a shared
setting takes the field from :class:`RunConfig` with :func:`_default` (same type, checks and help).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import Field, model_validator
from pydantic.fields import FieldInfo

from datadojo.config import ConfigError, Settings
from datadojo.train.schedules import GAMMA_END, GAMMA_START, GammaSchedule

#: How the DAPO term of DataMind's γ-mixed objective averages its per-token losses — one setting read by
#: ``datadojo train rl`` (``RLConfig.loss_aggregation``) and by the loss inside verl
#: (``+datadojo.loss_aggregation``), so both compute the same number on the same mini-batch.
#: ``query_token_mean``: DataMind §4 ("Reinforcement Learning Loss Design (DAPO)") as written — the
#: 1/Σ_i|y*_i| is inside the expectation over queries: a token mean within each query's group of rollouts,
#: then the mean over the mini-batch's kept queries. ``batch_token_mean``: the token mean over every kept
#: rollout token of the mini-batch (DAPO's reference code, verl's ``token-mean``), which weighs each query
#: by how many tokens its rollouts wrote.
LossAggregation = Literal["query_token_mean", "batch_token_mean"]
LOSS_AGGREGATIONS: tuple[str, ...] = ("query_token_mean", "batch_token_mean")
DEFAULT_LOSS_AGGREGATION: LossAggregation = "query_token_mean"

__all__ = ["ConfigError", "OptimConfig", "RLConfig", "RunConfig", "SFTConfig", "load_config"]

C = TypeVar("C", bound="RunConfig")

MixedPrecision = Literal["auto", "no", "bf16", "fp16"]
LrScheduler = Literal["constant", "constant_with_warmup", "cosine", "linear"]


class OptimConfig(Settings):
    """AdamW settings shared by both trainers.

    EnvLunch §4 trains with Adam at lr 1e-6, β = (0.9, 0.98), weight decay 0.01 (our RL defaults, see
    :meth:`RLConfig.envlunch`). DataMind does not state its optimizer; the SFT defaults (lr 1e-5, cosine with
    3% warm-up, β = (0.9, 0.999), no weight decay, gradient clipping at 1.0) are ours, the usual full-parameter
    SFT settings of LLaMA-Factory recipes for 7B coder models.
    """

    lr: float = Field(1e-5, description="Peak learning rate.")
    betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW β1, β2.")
    weight_decay: float = Field(0.0, description="AdamW weight decay.")
    eps: float = Field(1e-8, description="AdamW epsilon")
    scheduler: LrScheduler = Field("cosine", description="Learning-rate schedule.")
    warmup_ratio: float = Field(0.03, description="Share of the steps spent warming up.")
    max_grad_norm: float = Field(1.0, description="Gradient clipping norm (0 = no clipping).")

    @model_validator(mode="after")
    def _check(self) -> OptimConfig:
        if not self.lr > 0:
            raise ConfigError(f"optim.lr must be > 0, got {self.lr}")
        if not all(0 <= b < 1 for b in self.betas):
            raise ConfigError(f"optim.betas must be two numbers in [0, 1), got {self.betas}")
        if self.weight_decay < 0:
            raise ConfigError(f"optim.weight_decay must be >= 0, got {self.weight_decay}")
        if not 0 <= self.warmup_ratio < 1:
            raise ConfigError(f"optim.warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.max_grad_norm < 0:
            raise ConfigError(f"optim.max_grad_norm must be >= 0 (0 = no clipping), got {self.max_grad_norm}")
        return self


class RunConfig(Settings):
    """What every training run has: the model, the run folder, batching, the optimizer, checkpoints, precision.

    ``micro_batch_size`` — trajectories per forward pass per device (a memory knob only: the loss is
    normalized over the whole batch, so the result does not depend on it). ``max_length`` — tokens per
    trajectory; longer ones are cut at the tail. ``end_of_turn`` — the text that ends an assistant turn in
    the chat template, when it cannot be found from the tokenizer.
    """

    model: str = Field("", description="Local checkpoint folder (or hf:PATH).")
    output_dir: str = Field("runs/run", description="Run folder (config, metrics, checkpoints, final model).")
    micro_batch_size: int = Field(1, description="Trajectories per forward pass per device.")
    max_length: int | None = Field(16384, description="Tokens per trajectory (longer: cut at the tail).")
    optim: OptimConfig = Field(default_factory=OptimConfig, description="AdamW settings.")
    seed: int = Field(0, description="Random seed (data order, sampling, initialization).")
    save_every: int = Field(500, description="Checkpoint every N steps (0: at the end).")
    keep_checkpoints: int = Field(2, description="Checkpoints kept (older ones are deleted).")
    mixed_precision: MixedPrecision = Field(
        "auto", description="Mixed precision (auto: bf16 where supported)."
    )
    gradient_checkpointing: bool = Field(False, description="Recompute activations to save memory.")
    end_of_turn: str | None = Field(None, description="Text that ends an assistant turn (default: found).")

    @model_validator(mode="after")
    def _check_run(self) -> RunConfig:
        if self.micro_batch_size < 1:
            raise ConfigError(f"micro_batch_size must be >= 1, got {self.micro_batch_size}")
        if self.max_length is not None and self.max_length < 2:
            raise ConfigError(f"max_length must be >= 2, got {self.max_length}")
        if self.save_every < 0:
            raise ConfigError(f"save_every must be >= 0 (0 = only at the end), got {self.save_every}")
        if self.keep_checkpoints < 1:
            raise ConfigError(f"keep_checkpoints must be >= 1, got {self.keep_checkpoints}")
        return self

    @classmethod
    def from_dict(cls: type[C], data: dict[str, Any], *, where: str = "config") -> C:
        """A configuration from a dict (a parsed file): strict keys, ``optim`` merged over its default."""
        known = cls.model_fields
        kwargs: dict[str, Any] = {}
        try:
            for key, value in data.items():
                if key not in known:
                    raise ConfigError(f"unknown key {key!r}; known keys: {', '.join(sorted(known))}")
                if key == "optim":
                    if not isinstance(value, dict):
                        raise ConfigError("'optim' must be a table of optimizer settings")
                    okeys = OptimConfig.model_fields
                    bad = sorted(set(value) - set(okeys))
                    if bad:
                        raise ConfigError(f"unknown key optim.{bad[0]}; known: {', '.join(sorted(okeys))}")
                    default = known["optim"].get_default(call_default_factory=True)
                    value = default.replace(**{k: tuple(v) if k == "betas" else v for k, v in value.items()})
                kwargs[key] = value
            return cls(**kwargs)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None

    def replace(self: C, **changes: Any) -> C:
        """A copy with ``changes`` applied (``None`` values are ignored: unset CLI flags), validated."""
        return super().replace(**{k: v for k, v in changes.items() if v is not None})


def _default(name: str, default: Any = None, *, factory: Any = None) -> Any:
    """:class:`RunConfig`'s field ``name`` (type, checks, help) with another default, for a subclass."""
    base = RunConfig.model_fields[name]
    if factory is not None:
        return FieldInfo.merge_field_infos(base, default_factory=factory)
    return FieldInfo.merge_field_infos(base, default=default)


class SFTConfig(RunConfig):
    """Supervised fine-tuning (the cold start, DataMind §4 / §5.4) with environment tokens masked.

    * ``epochs`` — DataMind sweeps 0–3 cold-start epochs (§5.4, Figure 8); we default to 3. ``max_steps``
      overrides it.
    * ``batch_size`` — trajectories per optimizer step over all devices (ours: 32, DataMind's RL batch);
      ``micro_batch_size`` — trajectories per forward pass per device (memory knob only: the loss is
      normalized over the whole batch, so the result does not depend on it).
    * ``normalization`` — ``token`` (mean over the batch's agent tokens; ours) or ``sequence_sum`` (§4's
      formula literally), see :func:`datadojo.train.losses.sft_loss`.
    * ``max_length`` — tokens per trajectory; longer ones are cut at the tail (ours: 16384).
    * void trajectories are always dropped (DataMind §4), and counted in the run summary.
    """

    output_dir: str = _default("output_dir", "runs/sft")
    epochs: float = Field(3.0, description="Epochs over the data (DataMind §5.4 sweeps 0-3).")
    max_steps: int | None = Field(None, description="Optimizer steps (overrides epochs).")
    batch_size: int = Field(32, description="Trajectories per optimizer step (all devices).")
    normalization: Literal["token", "sequence_sum"] = Field(
        "token", description="SFT loss normalization: mean over agent tokens, or §4's per-sequence sum."
    )

    @model_validator(mode="after")
    def _check(self) -> SFTConfig:
        if self.batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.max_steps is None and not self.epochs > 0:
            raise ConfigError(f"epochs must be > 0 (or give max_steps), got {self.epochs}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError(f"max_steps must be >= 1, got {self.max_steps}")
        return self


def _rl_optim() -> OptimConfig:
    return OptimConfig(lr=1e-6, betas=(0.9, 0.98), weight_decay=0.01, scheduler="constant", warmup_ratio=0.0)


class RLConfig(RunConfig):
    """Online RL with rollouts through the agent runtime: DataMind's mixed SFT + DAPO, or EnvLunch's GRPO.

    Defaults are DataMind's (§4, §5.1): ``policy_loss="dapo"`` with ε_low = 0.2 / ε_high = 0.28, groups of
    ``group_size`` G = 4, ``tasks_per_step`` = 32 (RL batch 32) split into ``updates_per_step`` = 8 optimizer
    updates (mini-batch 4), dynamic sampling (keep a group only when 0 < #correct < G), void-turn masking,
    γ cosine-annealed 0.9 → 0.05 over ``gamma_steps`` (default: ``total_steps``), at most ``max_turns`` = 10
    rounds. :meth:`envlunch` gives EnvLunch §4's GRPO warm-up instead. Ours where the papers are silent:
    rollout temperature 1.0 (EnvLunch's; DataMind only states its evaluation temperature), ``lr`` 1e-6 and
    AdamW β = (0.9, 0.98), wd 0.01 (EnvLunch's), ``max_length`` 32768 training tokens per trajectory.

    ``loss_aggregation`` is how the DAPO term averages its tokens (:data:`LossAggregation`; the same setting
    as ``+datadojo.loss_aggregation`` in verl); ``normalization`` is another policy loss's (``None`` = the
    loss's own, ``sequence`` for GRPO; refused with ``dapo``, whose setting is ``loss_aggregation``).
    Both, and ``sft_normalization``, are described in :func:`datadojo.train.losses.normalization_weights`.
    ``kl_coef`` / ``entropy_coef`` / ``tis_low`` / ``tis_high`` are read by the GRPO loss only.
    ``publish_every`` > 0 saves the current policy to ``<output_dir>/policy`` every that many steps, for an
    external generation server (vLLM) to reload; ``sampler`` names the generator: ``hf`` (the training model
    itself, in process) or ``openai:NAME@URL``, a vLLM / SGLang server driven token-in / token-out
    (:mod:`datadojo.env.tokens`) whose sampled log-probs become the rollout log-probs of the IS
    correction (``tis_mode``), and which loads the trained weights in place (``weight_update``) every
    ``max_policy_lag`` + 1 steps.
    """

    output_dir: str = _default("output_dir", "runs/rl")
    micro_batch_size: int = _default("micro_batch_size", 2)
    max_length: int | None = _default("max_length", 32768)
    optim: OptimConfig = _default("optim", factory=_rl_optim)
    save_every: int = _default("save_every", 10)
    policy_loss: str = Field("dapo", description="Policy loss: dapo (DataMind) or grpo (EnvLunch).")
    total_steps: int = Field(100, description="RL steps.")
    tasks_per_step: int = Field(32, description="Tasks rolled out per step (DataMind's RL batch: 32).")
    group_size: int = Field(4, description="Rollouts per task (G).")
    updates_per_step: int = Field(8, description="Optimizer updates per step (each takes whole groups).")
    gamma_mode: Literal["cosine", "linear", "fixed"] = Field(
        "cosine", description="Schedule of γ, the SFT weight."
    )
    gamma_start: float = Field(GAMMA_START, description="γ at the start of the schedule (DataMind §4: 0.9)")
    gamma_end: float = Field(GAMMA_END, description="γ at the last step (DataMind §4: 0.05)")
    gamma_steps: int | None = Field(None, description="steps over which γ anneals (None: total_steps)")
    gamma_warmup: int = Field(0, description="steps γ is held at gamma_start before it anneals")
    gamma_value: float | None = Field(None, description="γ for gamma_mode fixed.")
    dynamic_sampling: bool = Field(
        True, description="keep a group only when 0 < #correct < G (DAPO's dynamic sampling)"
    )
    void_masking: bool = Field(True, description="mask void turns (no code, no answer) out of the loss")
    eps_low: float = Field(0.2, description="lower clip ε_low of the policy ratio (DAPO: 0.2)")
    eps_high: float = Field(0.28, description="upper clip ε_high of the policy ratio (DAPO: 0.28)")
    tis_low: float = Field(0.5, description="lower bound of the truncated importance weight (GRPO loss only)")
    tis_high: float = Field(
        1.5, description="upper bound of the truncated importance weight (GRPO loss only)"
    )
    tis_mode: Literal["truncate", "mask"] = Field(
        "truncate", description="Rollout IS correction: truncate (TIS, EnvLunch §4) or mask (MIS)."
    )
    kl_coef: float = Field(0.0, description="weight of the KL term to the reference policy (GRPO loss only)")
    entropy_coef: float = Field(0.0, description="weight of the entropy bonus (GRPO loss only)")
    loss_aggregation: LossAggregation = Field(
        DEFAULT_LOSS_AGGREGATION,
        description="how the DAPO term averages tokens: query_token_mean (DataMind §4) or batch_token_mean",
    )
    normalization: Literal["token", "group", "sequence"] | None = Field(
        None,
        description="how a non-DAPO policy loss averages tokens: token, group or sequence (None: its own)",
    )
    sft_normalization: Literal["token", "sequence_sum"] = Field(
        "token", description="how the SFT term is averaged: token or sequence_sum"
    )
    advantage_eps: float = Field(
        1e-6, description="ε of the group-normalized advantage (R − mean) / (std + ε)"
    )
    max_turns: int = Field(10, description="Rounds per episode (T).")
    dialect: str = Field("datamind", description="tag protocol of the rollouts: datamind or sailor")
    temperature: float = Field(1.0, description="rollout sampling temperature (ours: 1.0, EnvLunch's)")
    top_p: float = Field(1.0, description="rollout nucleus sampling top-p")
    max_new_tokens: int = Field(8192, description="Tokens per action turn.")
    concurrency: int = Field(8, description="Episodes (sandboxes) in flight.")
    sampler: str = Field(
        "hf", description="hf (the training model, in process) or openai:NAME@URL (a vLLM server)."
    )
    publish_every: int = Field(
        0, description="Save the policy for a generation server every N steps (0: never)."
    )
    weight_update: Literal["auto", "sglang", "vllm", "none"] = Field(
        "auto",
        description="How a server sampler loads new weights in place: sglang, vllm, none (auto: sglang).",
    )
    max_policy_lag: int = Field(
        0, description="Steps a server sampler may lag the trainer (0: new weights after every step)."
    )

    @model_validator(mode="after")
    def _check(self) -> RLConfig:
        for name in ("total_steps", "tasks_per_step", "updates_per_step", "max_turns", "max_new_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ConfigError(
                f"group_size must be >= 2 (advantages are relative to the group), got {self.group_size}"
            )
        if self.updates_per_step > self.tasks_per_step:
            raise ConfigError(
                f"updates_per_step ({self.updates_per_step}) cannot exceed tasks_per_step ({self.tasks_per_step}): "
                "each update takes whole groups"
            )
        if self.concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.normalization is not None and self.policy_loss.lower() == "dapo":
            raise ConfigError(
                f"normalization={self.normalization!r} with policy_loss dapo: set loss_aggregation instead "
                "(query_token_mean = group, batch_token_mean = token)"
            )
        if not 0 <= self.eps_low < 1 or self.eps_high < 0:
            raise ConfigError(f"need 0 <= eps_low < 1 and eps_high >= 0, got {self.eps_low}, {self.eps_high}")
        if not 0 < self.tis_low <= 1 <= self.tis_high:
            raise ConfigError(f"need 0 < tis_low <= 1 <= tis_high, got {self.tis_low}, {self.tis_high}")
        if self.kl_coef < 0 or self.entropy_coef < 0:
            raise ConfigError("kl_coef and entropy_coef must be >= 0")
        if not self.temperature > 0 or not 0 < self.top_p <= 1:
            raise ConfigError(
                f"rollout sampling needs temperature > 0 and top_p in (0, 1], got {self.temperature}, {self.top_p}"
            )
        if self.publish_every < 0:
            raise ConfigError(f"publish_every must be >= 0, got {self.publish_every}")
        if self.max_policy_lag < 0:
            raise ConfigError(f"max_policy_lag must be >= 0, got {self.max_policy_lag}")
        try:
            self.gamma_schedule()
        except ValueError as exc:
            raise ConfigError(f"gamma: {exc}") from None
        return self

    def gamma_schedule(self) -> GammaSchedule:
        """The γ schedule these fields describe (``gamma_steps`` defaults to ``total_steps``)."""
        return GammaSchedule(
            mode=self.gamma_mode,
            start=self.gamma_start,
            end=self.gamma_end,
            total_steps=None if self.gamma_mode == "fixed" else (self.gamma_steps or self.total_steps),
            warmup_steps=self.gamma_warmup,
            value=self.gamma_value,
        )

    @property
    def uses_sft(self) -> bool:
        """Whether the objective has an SFT term at all (γ is not identically 0)."""
        return not (self.gamma_mode == "fixed" and self.gamma_value == 0)

    @classmethod
    def datamind(cls, **overrides: Any) -> RLConfig:
        """DataMind §4 / §5.1: γ·SFT + (1−γ)·DAPO, G = 4, batch 32 / mini-batch 4, T = 10 (the defaults)."""
        return cls().replace(**overrides)

    @classmethod
    def envlunch(cls, **overrides: Any) -> RLConfig:
        """EnvLunch §4 warm-up: GRPO, 8 rollouts per task, 4 updates of 32 trajectories per step (16 tasks),
        ε = 0.2 / 0.28, truncated IS in [0.5, 1.5], KL 0.01 to the initial policy, entropy 0.001, no SFT term,
        no dynamic sampling, rollouts at temperature 1.0 with at most 8192 tokens per action turn."""
        base = cls(
            policy_loss="grpo",
            group_size=8,
            tasks_per_step=16,
            updates_per_step=4,
            gamma_mode="fixed",
            gamma_value=0.0,
            dynamic_sampling=False,
            kl_coef=0.01,
            entropy_coef=0.001,
        )
        return base.replace(**overrides)


def load_config(path: str | Path, cls: type[C], *, base: C | None = None) -> C:
    """Read a configuration from a ``.json`` or ``.toml`` file (strict keys, errors name the file).

    Keys the file does not set keep the class defaults, or ``base``'s values when given (a preset such as
    :meth:`RLConfig.envlunch`); an ``optim`` table is merged key by key the same way.
    """
    path = Path(path)
    try:
        if path.suffix.lower() == ".toml":
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        elif path.suffix.lower() == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
        else:
            raise ConfigError(f"{path}: configuration files must be .json or .toml")
    except (OSError, json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the configuration: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the configuration must be a table / object")
    if base is not None:
        defaults = base.to_dict()
        optim = data.get("optim", {})
        data = {**defaults, **data}
        if isinstance(optim, dict):
            data["optim"] = {**defaults["optim"], **optim}
    return cls.from_dict(data, where=str(path))

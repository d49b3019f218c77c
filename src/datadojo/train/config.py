"""Typed training configurations with the papers' defaults: :class:`SFTConfig` and :class:`RLConfig`.

Each field's default is either a number a paper states (cited in the class docstring) or our choice where
the papers are silent (marked "ours"). A configuration round-trips through a dict / JSON / TOML file
(:func:`load_config`); an unknown key is an error naming the key and the file, so a typo never silently
leaves a default in place. Nothing here imports torch: the CLI can build and validate configurations
before paying for it.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar

from datadojo.errors import DataDojoError
from datadojo.train.schedules import GAMMA_END, GAMMA_START, GammaSchedule

__all__ = ["ConfigError", "OptimConfig", "RLConfig", "SFTConfig", "load_config"]

C = TypeVar("C", bound="_Config")

MixedPrecision = Literal["auto", "no", "bf16", "fp16"]
LrScheduler = Literal["constant", "constant_with_warmup", "cosine", "linear"]


class ConfigError(DataDojoError, ValueError):
    """A configuration value or file that cannot be used; the message names the field (and file)."""


@dataclass
class OptimConfig:
    """AdamW settings shared by both trainers.

    EnvLunch §4 trains with Adam at lr 1e-6, β = (0.9, 0.98), weight decay 0.01 (our RL defaults, see
    :meth:`RLConfig.envlunch`). DataMind does not state its optimiser; the SFT defaults (lr 1e-5, cosine with
    3% warm-up, β = (0.9, 0.999), no weight decay, gradient clipping at 1.0) are ours, the usual full-parameter
    SFT settings of LLaMA-Factory recipes for 7B coder models.
    """

    lr: float = 1e-5
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    eps: float = 1e-8
    scheduler: LrScheduler = "cosine"
    warmup_ratio: float = 0.03
    max_grad_norm: float = 1.0

    def validate(self) -> None:
        if not self.lr > 0:
            raise ConfigError(f"optim.lr must be > 0, got {self.lr}")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ConfigError(f"optim.betas must be two numbers in [0, 1), got {self.betas}")
        if self.weight_decay < 0:
            raise ConfigError(f"optim.weight_decay must be >= 0, got {self.weight_decay}")
        if self.scheduler not in ("constant", "constant_with_warmup", "cosine", "linear"):
            raise ConfigError(f"optim.scheduler {self.scheduler!r} is not constant, cosine or linear")
        if not 0 <= self.warmup_ratio < 1:
            raise ConfigError(f"optim.warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.max_grad_norm < 0:
            raise ConfigError(f"optim.max_grad_norm must be >= 0 (0 = no clipping), got {self.max_grad_norm}")


class _Config:
    """Dict / file round-trips with strict keys (shared by the two configurations)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[C], data: dict[str, Any], *, where: str = "config") -> C:
        known = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            if key not in known:
                raise ConfigError(f"{where}: unknown key {key!r}; known keys: {', '.join(sorted(known))}")
            if key == "optim":
                if not isinstance(value, dict):
                    raise ConfigError(f"{where}: 'optim' must be a table of optimiser settings")
                okeys = {f.name for f in fields(OptimConfig)}
                bad = sorted(set(value) - okeys)
                if bad:
                    raise ConfigError(
                        f"{where}: unknown key optim.{bad[0]}; known: {', '.join(sorted(okeys))}"
                    )
                default = known["optim"].default_factory()  # type: ignore[misc]
                value = dataclasses.replace(
                    default, **{k: tuple(v) if k == "betas" else v for k, v in value.items()}
                )
            kwargs[key] = value
        try:
            obj = cls(**kwargs)
            obj.validate()  # type: ignore[attr-defined]
        except (TypeError, ConfigError) as exc:
            raise ConfigError(f"{where}: {exc}") from None
        return obj

    def replace(self: C, **changes: Any) -> C:
        """A copy with ``changes`` applied (``None`` values are ignored: unset CLI flags), validated."""
        changes = {k: v for k, v in changes.items() if v is not None}
        obj = dataclasses.replace(self, **changes)  # type: ignore[type-var]
        obj.validate()  # type: ignore[attr-defined]
        return obj


def _common_checks(cfg: SFTConfig | RLConfig) -> None:
    if cfg.micro_batch_size < 1:
        raise ConfigError(f"micro_batch_size must be >= 1, got {cfg.micro_batch_size}")
    if cfg.max_length is not None and cfg.max_length < 2:
        raise ConfigError(f"max_length must be >= 2, got {cfg.max_length}")
    if cfg.save_every < 0:
        raise ConfigError(f"save_every must be >= 0 (0 = only at the end), got {cfg.save_every}")
    if cfg.keep_checkpoints < 1:
        raise ConfigError(f"keep_checkpoints must be >= 1, got {cfg.keep_checkpoints}")
    if cfg.mixed_precision not in ("auto", "no", "bf16", "fp16"):
        raise ConfigError(f"mixed_precision must be auto, no, bf16 or fp16, got {cfg.mixed_precision!r}")
    cfg.optim.validate()


@dataclass
class SFTConfig(_Config):
    """Supervised fine-tuning (the cold start, DataMind §4 / §5.4) with environment tokens masked.

    * ``epochs`` — DataMind sweeps 0–3 cold-start epochs (§5.4, Figure 8); we default to 3. ``max_steps``
      overrides it.
    * ``batch_size`` — trajectories per optimiser step over all devices (ours: 32, DataMind's RL batch);
      ``micro_batch_size`` — trajectories per forward pass per device (memory knob only: the loss is
      normalised over the whole batch, so the result does not depend on it).
    * ``normalization`` — ``token`` (mean over the batch's agent tokens; ours) or ``sequence_sum`` (§4's
      formula literally), see :func:`datadojo.train.losses.sft_loss`.
    * ``max_length`` — tokens per trajectory; longer ones are cut at the tail (ours: 16384).
    * void trajectories are always dropped (DataMind §4), and counted in the run summary.
    """

    model: str = ""
    output_dir: str = "runs/sft"
    epochs: float = 3.0
    max_steps: int | None = None
    batch_size: int = 32
    micro_batch_size: int = 1
    max_length: int | None = 16384
    normalization: Literal["token", "sequence_sum"] = "token"
    optim: OptimConfig = field(default_factory=OptimConfig)
    seed: int = 0
    save_every: int = 500
    keep_checkpoints: int = 2
    mixed_precision: MixedPrecision = "auto"
    gradient_checkpointing: bool = False
    end_of_turn: str | None = None

    def validate(self) -> None:
        _common_checks(self)
        if self.batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.max_steps is None and not self.epochs > 0:
            raise ConfigError(f"epochs must be > 0 (or give max_steps), got {self.epochs}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError(f"max_steps must be >= 1, got {self.max_steps}")
        if self.normalization not in ("token", "sequence_sum"):
            raise ConfigError(f"normalization must be token or sequence_sum, got {self.normalization!r}")


@dataclass
class RLConfig(_Config):
    """Online RL with rollouts through the agent runtime: DataMind's mixed SFT + DAPO, or EnvLunch's GRPO.

    Defaults are DataMind's (§4, §5.1): ``policy_loss="dapo"`` with ε_low = 0.2 / ε_high = 0.28, groups of
    ``group_size`` G = 4, ``tasks_per_step`` = 32 (RL batch 32) split into ``updates_per_step`` = 8 optimiser
    updates (mini-batch 4), dynamic sampling (keep a group only when 0 < #correct < G), void-turn masking,
    γ cosine-annealed 0.9 → 0.05 over ``gamma_steps`` (default: ``total_steps``), at most ``max_turns`` = 10
    rounds. :meth:`envlunch` gives EnvLunch §4's GRPO warm-up instead. Ours where the papers are silent:
    rollout temperature 1.0 (EnvLunch's; DataMind only states its evaluation temperature), ``lr`` 1e-6 and
    AdamW β = (0.9, 0.98), wd 0.01 (EnvLunch's), ``max_length`` 32768 training tokens per trajectory.

    ``normalization`` (``None`` = the policy loss's own: ``group`` for DAPO, ``sequence`` for GRPO) and
    ``sft_normalization`` are described in :func:`datadojo.train.losses.normalization_weights`.
    ``kl_coef`` / ``entropy_coef`` / ``tis_low`` / ``tis_high`` are read by the GRPO loss only.
    ``publish_every`` > 0 saves the current policy to ``<output_dir>/policy`` every that many steps, for an
    external generation server (vLLM) to reload; ``sampler`` names the generator: ``hf`` (the training model
    itself, in process) or a model spec (``openai:NAME@URL``).
    """

    model: str = ""
    output_dir: str = "runs/rl"
    policy_loss: str = "dapo"
    total_steps: int = 100
    tasks_per_step: int = 32
    group_size: int = 4
    updates_per_step: int = 8
    micro_batch_size: int = 2
    gamma_mode: Literal["cosine", "linear", "fixed"] = "cosine"
    gamma_start: float = GAMMA_START
    gamma_end: float = GAMMA_END
    gamma_steps: int | None = None
    gamma_warmup: int = 0
    gamma_value: float | None = None
    dynamic_sampling: bool = True
    void_masking: bool = True
    eps_low: float = 0.2
    eps_high: float = 0.28
    tis_low: float = 0.5
    tis_high: float = 1.5
    kl_coef: float = 0.0
    entropy_coef: float = 0.0
    normalization: Literal["token", "group", "sequence"] | None = None
    sft_normalization: Literal["token", "sequence_sum"] = "token"
    advantage_eps: float = 1e-6
    max_turns: int = 10
    dialect: str = "datamind"
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 8192
    max_length: int | None = 32768
    concurrency: int = 8
    sampler: str = "hf"
    publish_every: int = 0
    optim: OptimConfig = field(
        default_factory=lambda: OptimConfig(
            lr=1e-6, betas=(0.9, 0.98), weight_decay=0.01, scheduler="constant", warmup_ratio=0.0
        )
    )
    seed: int = 0
    save_every: int = 10
    keep_checkpoints: int = 2
    mixed_precision: MixedPrecision = "auto"
    gradient_checkpointing: bool = False
    end_of_turn: str | None = None

    def validate(self) -> None:
        _common_checks(self)
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
        if not 0 <= self.eps_low < 1 or self.eps_high < 0:
            raise ConfigError(f"need 0 <= eps_low < 1 and eps_high >= 0, got {self.eps_low}, {self.eps_high}")
        if not 0 < self.tis_low <= 1 <= self.tis_high:
            raise ConfigError(f"need 0 < tis_low <= 1 <= tis_high, got {self.tis_low}, {self.tis_high}")
        if self.kl_coef < 0 or self.entropy_coef < 0:
            raise ConfigError("kl_coef and entropy_coef must be >= 0")
        if self.normalization not in (None, "token", "group", "sequence"):
            raise ConfigError(f"normalization must be token, group or sequence, got {self.normalization!r}")
        if self.sft_normalization not in ("token", "sequence_sum"):
            raise ConfigError(
                f"sft_normalization must be token or sequence_sum, got {self.sft_normalization!r}"
            )
        if not self.temperature > 0 or not 0 < self.top_p <= 1:
            raise ConfigError(
                f"rollout sampling needs temperature > 0 and top_p in (0, 1], got {self.temperature}, {self.top_p}"
            )
        if self.publish_every < 0:
            raise ConfigError(f"publish_every must be >= 0, got {self.publish_every}")
        try:
            self.gamma_schedule()
        except ValueError as exc:
            raise ConfigError(f"gamma: {exc}") from None

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

"""Policy losses by name (``RLConfig.policy_loss``), the point where users plug in their own objective.

Like TRL's ``loss_type`` and verl's ``register_policy_loss``: a loss is a function of a
:class:`PolicyInputs` bundle and the :class:`~datadojo.train.config.RLConfig`, returning a
:class:`~datadojo.train.losses.PolicyLossOutput`. The trainer never branches on the name; it asks the
registered :class:`LossSpec` what it needs (reference log-probs for a KL term, entropies with gradient) and
which normalization is its own. Built in: ``dapo`` (DataMind §4) and ``grpo`` (EnvLunch §4).

Register your own::

    @register_policy_loss("my_loss", normalization="token")
    def my_loss(inputs: PolicyInputs, config: RLConfig) -> PolicyLossOutput: ...
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from datadojo.registry import Registry
from datadojo.train.losses import (
    Normalization,
    PolicyLossOutput,
    aggregation_normalization,
    dapo_loss,
    grpo_loss,
)

if TYPE_CHECKING:
    from datadojo.train.config import RLConfig

__all__ = [
    "LossSpec",
    "PolicyInputs",
    "PolicyLossFn",
    "get_policy_loss",
    "policy_loss_names",
    "register_policy_loss",
]


@dataclass
class PolicyInputs:
    """Per-token tensors ``(B, T)`` of one micro-batch of rollouts, aligned with the predicted tokens.

    ``advantages`` is ``(B,)``; ``weights`` are the normalization weights computed over the whole update
    (:func:`~datadojo.train.losses.normalization_weights`); ``ref_logp`` / ``rollout_logp`` / ``entropy``
    are present when the loss asked for them.
    """

    logp: torch.Tensor
    old_logp: torch.Tensor
    advantages: torch.Tensor
    mask: torch.Tensor
    weights: torch.Tensor
    group_ids: torch.Tensor
    ref_logp: torch.Tensor | None = None
    rollout_logp: torch.Tensor | None = None
    entropy: torch.Tensor | None = None


PolicyLossFn = Callable[[PolicyInputs, "RLConfig"], PolicyLossOutput]


@dataclass(frozen=True)
class LossSpec:
    """A registered loss: the function, its own normalization, and what it needs from the trainer."""

    name: str
    fn: PolicyLossFn
    normalization: Normalization
    uses_kl: bool = False
    uses_entropy: bool = False

    def normalization_for(self, config: RLConfig) -> Normalization:
        """How the trainer averages this loss's tokens under ``config``: for ``dapo`` the shared
        ``loss_aggregation`` (the same setting as in verl), otherwise ``normalization`` or the loss's own."""
        if self.name == "dapo":
            return aggregation_normalization(config.loss_aggregation)
        return config.normalization or self.normalization

    def needs_ref(self, config: RLConfig) -> bool:
        return self.uses_kl and config.kl_coef > 0

    def needs_entropy_grad(self, config: RLConfig) -> bool:
        return self.uses_entropy and config.entropy_coef > 0


_REGISTRY: Registry[LossSpec] = Registry("policy loss", listing="registered")


def register_policy_loss(
    name: str,
    *,
    normalization: Normalization = "token",
    uses_kl: bool = False,
    uses_entropy: bool = False,
    replace: bool = False,
) -> Callable[[PolicyLossFn], PolicyLossFn]:
    """Decorator registering a policy loss under ``name`` (a taken name needs ``replace=True``)."""

    def decorator(fn: PolicyLossFn) -> PolicyLossFn:
        key = name.lower()
        _REGISTRY.register(key, LossSpec(key, fn, normalization, uses_kl, uses_entropy), replace=replace)
        return fn

    return decorator


def get_policy_loss(name: str) -> LossSpec:
    """The loss registered as ``name`` (case-insensitive)."""
    return _REGISTRY.get(name)


def policy_loss_names() -> list[str]:
    return _REGISTRY.names()


@register_policy_loss("dapo", normalization="group")
def _dapo(inputs: PolicyInputs, config: RLConfig) -> PolicyLossOutput:
    """DataMind §4: DAPO's decoupled clip, token-level within each group."""
    return dapo_loss(
        inputs.logp,
        inputs.old_logp,
        inputs.advantages,
        inputs.mask,
        group_ids=inputs.group_ids,
        eps_low=config.eps_low,
        eps_high=config.eps_high,
        weights=inputs.weights,
    )


@register_policy_loss("grpo", normalization="sequence", uses_kl=True, uses_entropy=True)
def _grpo(inputs: PolicyInputs, config: RLConfig) -> PolicyLossOutput:
    """EnvLunch §4: clipped surrogate × truncated IS + KL to the initial policy − entropy bonus."""
    return grpo_loss(
        inputs.logp,
        inputs.old_logp,
        inputs.advantages,
        inputs.mask,
        ref_logp=inputs.ref_logp,
        rollout_logp=inputs.rollout_logp,
        entropy=inputs.entropy,
        group_ids=inputs.group_ids,
        eps_low=config.eps_low,
        eps_high=config.eps_high,
        tis_low=config.tis_low,
        tis_high=config.tis_high,
        tis_mode=config.tis_mode,
        kl_coef=config.kl_coef,
        entropy_coef=config.entropy_coef,
        weights=inputs.weights,
    )

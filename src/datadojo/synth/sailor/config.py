"""Settings of SciDataSailor synthesis (§4.1, §4.2), with the paper's values where it gives them.

The paper states the formulas but few constants; every number it leaves open is a field here, documented with
why we picked its default, and recorded in ``summary.json`` under ``config`` so that a run can be audited
(every UCT value recomputed from ``tree.jsonl``) and repeated.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from datadojo.config import Settings

__all__ = ["SailorConfig"]

# the checks of each numeric field (the messages name the field and the bound)
_NUMBERS = ("lam", "beta", "fpu_bonus", "fpu_reduction")
_UNIT_INTERVAL = ("calibration", "tau_pre", "token_weight", "substantive_score")
_POSITIVE_NUMBERS = ("prior_temperature", "max_wall_s", "exec_timeout_s")
_NON_NEGATIVE_NUMBERS = ("temperature", "top_p")
_POSITIVE_INTS = (
    "max_nodes",
    "max_depth",
    "max_requests",
    "max_strategies",
    "k_min",
    "k_max",
    "top_logprobs",
    "trajectories_per_seed",
    "max_tokens",
)
_NON_NEGATIVE_INTS = (
    "min_depth",
    "min_substantive_chars",
    "max_reverify",
    "obs_head",
    "obs_tail",
    "excerpt_chars",
    "profile_chars",
)


class SailorConfig(Settings):
    """How one exploration tree is grown, verified and turned into data.

    **DF-FPU selection** (§4.1): ``UCT(v,w) = Q̂(w) + lam·ρ_w·sqrt(log(1+N(v))/(1+N(w))) + beta·d_w``.

    * ``lam`` (λ), ``beta`` (β): exploration and depth weights. The paper gives no values; λ = 1 is the usual
      UCT constant for values in [0, 1], β = 0.1 nudges the search towards the deeper traces the paper wants
      (long-horizon exploration) without overriding Q̂.
    * ``fpu_mode``, ``fpu_bonus``, ``fpu_reduction`` (δ): an unvisited child's first-play value is
      ``ρ_w + Δ − δ`` (the rule the reference code meant to run but never did). ``fpu_mode="sibling"``
      (default): Δ is the mean ``Q̂(u) − ρ_u`` over the visited siblings S_v (§4.1 defines S_v for this rule:
      the post-execution outcomes at this state calibrate the pre-execution judge's ρ of the untried probes —
      the "dual feedback"), and ``fpu_bonus`` while no sibling has run; ``fpu_mode="constant"``: Δ is always
      ``fpu_bonus``. ``fpu_bonus`` = 0.1 makes an untried, well-judged probe urgent; δ = 0 by default (raise
      it to favour revisiting proven branches). The Δ used is recorded as ``fpu_delta`` on each select line.
    * ``calibration`` (η): when a probe has run, the post-execution judge's score s_post calibrates the value
      that is backed up: ``v = (1−η)·ρ_w + η·s_post`` (η = 0.5: the pre- and post-execution judgments count
      equally, the "dual feedback").
    * ``max_depth`` (probes on one path) normalizes the depth term: ``d_w = depth(w) / max_depth`` ∈ [0, 1].

    **Budgets** per (folder, seed) tree: ``max_nodes`` probes executed, ``max_depth``, ``max_requests`` LLM
    requests (policy + judges, search only), ``max_wall_s`` seconds (a safety net; tests use the others).

    **Hierarchical expansion**: ``max_strategies`` proposed per expansion, ``tau_pre`` (τ_pre) drops those
    scored below it.

    **Entropy-adaptive branching**: ``prior_temperature`` (T_p) of ``softmax(ρ/T_p)`` (0.2: ρ ∈ [0,1], so a
    judge gap of 0.4 is a 7.4× preference); the width is ``k_min + round((k_max−k_min)·H)``; with token
    log-probabilities, ``H = (1−token_weight)·H_prior + token_weight·H_token``; ``logprobs`` asks for them
    (``top_logprobs`` alternatives per token).

    **Trajectories and QC** (§4.2): ``trajectories_per_seed`` best leaves (by Q̂) become trajectories;
    ``min_depth`` probes at least; a substantive observation has status ok, ``min_substantive_chars``
    non-blank characters and a post-execution score ≥ ``substantive_score``; ``max_reverify`` repeats of the
    step verifier on processing failures.

    **Environment**: ``obs_head``/``obs_tail`` characters of an observation are kept (the reference code's
    4,000 / 1,500); ``exec_timeout_s`` per probe; ``excerpt_chars`` of each observation go to ``tree.jsonl``;
    ``profile_chars`` of the folder profile (:func:`datadojo.corpus.profile_text`) open the system prompt.
    """

    lam: float = Field(1.0, description="λ: exploration weight of DF-FPU UCT")
    beta: float = Field(0.1, description="β: weight of the normalized depth d_w in UCT")
    depth_term: Literal["reached", "node"] = Field(
        "reached",
        description="d_w of UCT: the deepest depth reached below w (reached; differs between siblings, so β "
        "can change a selection) or w's own depth (node; equal for all children of v, so β never matters), "
        "both divided by max_depth",
    )
    fpu_mode: Literal["sibling", "constant"] = Field(
        "sibling",
        description="how Δ of the first-play value ρ + Δ − δ is set: sibling (mean Q̂ − ρ of the visited "
        "siblings, the dual feedback; the bonus Δ until one has run) or constant (always the bonus Δ)",
    )
    fpu_bonus: float = Field(
        0.1, description="Δ: the first-play value of an unvisited probe is ρ + Δ − δ (see the FPU mode)"
    )
    fpu_reduction: float = Field(0.0, description="δ of the first-play value ρ + Δ − δ")
    calibration: float = Field(0.5, description="η: backed-up value (1−η)·ρ + η·post-execution score")
    max_nodes: int = Field(24, description="budget: probes executed per tree")
    max_depth: int = Field(6, description="budget: probes on one path (normalizes d_w)")
    max_requests: int = Field(400, description="budget: LLM requests per tree search")
    max_wall_s: float = Field(3600.0, description="budget: seconds per tree search")
    max_strategies: int = Field(4, description="strategies proposed per expansion")
    tau_pre: float = Field(0.3, description="τ_pre: drop strategies scored below it")
    prior_temperature: float = Field(0.2, description="T_p of softmax(ρ/T_p) for H_prior")
    k_min: int = Field(1, description="fewest children per expansion (confident states)")
    k_max: int = Field(3, description="most children per expansion (uncertain states)")
    token_weight: float = Field(
        0.5, description="weight w of H_token in the branching entropy H = (1−w)·H_prior + w·H_token"
    )
    logprobs: bool = Field(True, description="ask for token log-probabilities (H_token)")
    top_logprobs: int = Field(5, description="alternatives per token asked for with the log-probabilities")
    trajectories_per_seed: int = Field(3, description="best leaves turned into trajectories per tree")
    min_depth: int = Field(2, description="QC: fewest probes a kept trajectory has")
    min_substantive_chars: int = Field(
        40, description="QC: fewest non-blank characters of a substantive observation"
    )
    substantive_score: float = Field(
        0.5, description="QC: lowest post-execution score of a substantive observation"
    )
    max_reverify: int = Field(1, description="QC: repeats of the step verifier on processing failures")
    obs_head: int = Field(
        4000, description="observation head kept, in characters (SciDataSailor's environment: 4,000)"
    )
    obs_tail: int = Field(
        1500, description="observation tail kept, in characters (SciDataSailor's environment: 1,500)"
    )
    exec_timeout_s: float = Field(60.0, description="seconds per probe")
    excerpt_chars: int = Field(300, description="characters of each observation written to tree.jsonl")
    profile_chars: int = Field(
        3000, description="characters of the folder profile that open the system prompt"
    )
    temperature: float = Field(0.6, description="policy sampling temperature (judges use 0)")
    top_p: float = Field(0.95, description="policy nucleus sampling top-p")
    max_tokens: int = Field(2048, description="tokens per policy or judge reply")

    @field_validator(*_NUMBERS, *_UNIT_INTERVAL, *_POSITIVE_NUMBERS, *_NON_NEGATIVE_NUMBERS, mode="before")
    @classmethod
    def _finite(cls, value: Any, info: ValidationInfo) -> Any:
        name = info.field_name
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise ValueError(f"SailorConfig.{name} must be a finite number, got {value!r}")
        lo, hi, strict_lo = None, None, False
        if name in _UNIT_INTERVAL:
            lo, hi = 0.0, 1.0
        elif name in _POSITIVE_NUMBERS:
            lo, strict_lo = 0.0, True
        elif name in _NON_NEGATIVE_NUMBERS:
            lo = 0.0
        if lo is not None and (value < lo or (strict_lo and value == lo)):
            raise ValueError(f"SailorConfig.{name} must be {'>' if strict_lo else '>='} {lo}, got {value}")
        if hi is not None and value > hi:
            raise ValueError(f"SailorConfig.{name} must be <= {hi}, got {value}")
        return value

    @field_validator(*_POSITIVE_INTS, *_NON_NEGATIVE_INTS, mode="before")
    @classmethod
    def _integer(cls, value: Any, info: ValidationInfo) -> Any:
        lo, kind = (1, "positive") if info.field_name in _POSITIVE_INTS else (0, "non-negative")
        if not isinstance(value, int) or isinstance(value, bool) or value < lo:
            raise ValueError(f"SailorConfig.{info.field_name} must be a {kind} integer, got {value!r}")
        return value

    @model_validator(mode="after")
    def _check(self) -> SailorConfig:
        if self.k_min > self.k_max:
            raise ValueError(f"SailorConfig.k_min ({self.k_min}) must be <= k_max ({self.k_max})")
        if self.min_depth > self.max_depth:
            raise ValueError(
                f"SailorConfig.min_depth ({self.min_depth}) must be <= max_depth ({self.max_depth})"
            )
        return self

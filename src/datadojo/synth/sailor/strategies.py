"""Hierarchical strategy→tool actions (§4.1): the strategy catalog, the structured replies, probe identity.

At a selected node the policy first proposes and scores *strategies* from the catalog 𝒜_str (what evidence
to collect), weak ones (score < τ_pre) are dropped, each survivor becomes one executable Python *probe*, and
probes that use the same tool in the same way are merged, keeping the best-scored one and ordering the rest so
that different strategies come first (diversity). Every node records its strategy, which is the action-type
supervision the paper adds for SFT/RL credit assignment.

The replies of the LLM calls are pydantic models sent as JSON Schemas (``response_format``) and validated,
with one repair (:mod:`datadojo.llm.structured`).
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "STRATEGIES",
    "STRATEGY_NAMES",
    "Candidate",
    "FinalCheck",
    "PostJudgement",
    "PreJudgement",
    "Probe",
    "ProbeScore",
    "QAPair",
    "StepVerdict",
    "StrategyPlan",
    "StrategyProposal",
    "diversify",
    "tool_identity",
]

#: The strategy catalog 𝒜_str (§4.1): name → what a probe of this strategy does.
STRATEGIES: dict[str, str] = {
    "repository_inspection": "list directories and files, sizes, formats and naming patterns",
    "schema_inspection": "open a file and read its structure: columns, dtypes, keys, variables, dimensions, attributes",
    "content_inspection": "read documentation, metadata or sample records to learn what values mean",
    "statistics": "compute counts, ranges, distributions, missing values or summary statistics",
    "cross_file_integration": "join, align or compare records or identifiers across files",
    "claim_validation": "check a statement from documentation, metadata or an earlier observation against the data",
    "visualization": "summarize a distribution or relation as a compact text plot or binned table",
    "debugging": "diagnose and work around an error or unexpected output of an earlier probe",
}
STRATEGY_NAMES: tuple[str, ...] = tuple(STRATEGIES)

StrategyName = Literal[
    "repository_inspection",
    "schema_inspection",
    "content_inspection",
    "statistics",
    "cross_file_integration",
    "claim_validation",
    "visualization",
    "debugging",
]
Label = Literal["supported", "unsupported", "contradicted"]


class _Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StrategyProposal(_Reply):
    strategy: StrategyName
    rationale: str
    score: float = Field(ge=0.0, le=1.0)


class StrategyPlan(_Reply):
    """The policy's proposed next strategies, each scored for how much it would advance the seed."""

    strategies: list[StrategyProposal]


class Probe(_Reply):
    """One executable probe: the reasoning that leads to it and the Python code."""

    thought: str
    code: str


class ProbeScore(_Reply):
    id: int
    score: float = Field(ge=0.0, le=1.0)


class PreJudgement(_Reply):
    """r_pre(a_w | τ_v, x_σ) for every candidate probe (§4.1)."""

    scores: list[ProbeScore]


class PostJudgement(_Reply):
    """The post-execution judgment of a probe's observation (how much new, relevant evidence it yields)."""

    score: float = Field(ge=0.0, le=1.0)
    reason: str


class StepVerdict(_Reply):
    """The step-level verifier's labels for one step (§4.2)."""

    action: Label
    grounding: Label
    affects_later: bool
    ambiguity: Literal["none", "processing", "intrinsic"]
    reason: str


class FinalCheck(_Reply):
    """Whether a QA pair's answer is supported by the trajectory's observations."""

    label: Label
    reason: str


class QAPair(_Reply):
    """An evidence target from the observations, a question entailed by the seed, the supported answer."""

    evidence: list[str]
    evidence_step: int = Field(ge=1)
    question: str
    answer: str


@dataclass
class Candidate:
    """A probe on its way to becoming a child node."""

    strategy: str
    strategy_score: float
    thought: str
    code: str
    rho: float = 0.0


def tool_identity(code: str) -> str:
    """What tool a probe uses and how: the hash of its syntax tree (formatting and comments do not count).

    Two probes with the same identity would run the same calls on the same arguments, so only one is kept.
    Code that does not parse is identified by its whitespace-normalized text.
    """
    try:
        key = ast.dump(ast.parse(code), annotate_fields=False, include_attributes=False)
    except (SyntaxError, ValueError):
        key = " ".join(code.split())
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def diversify(candidates: Sequence[Candidate], seen: set[str] = frozenset()) -> list[Candidate]:  # type: ignore[assignment]
    """Drop probes whose tool identity repeats (one another, or an executed probe on the path in ``seen``).

    Of duplicates the better-scored strategy wins. The survivors are ordered round-robin over strategies, best
    score first within each, so the first children differ in strategy (diversity before depth of one idea).
    """
    best: dict[str, Candidate] = {}
    for c in sorted(candidates, key=lambda c: -c.strategy_score):
        ident = tool_identity(c.code)
        if ident in seen or ident in best:
            continue
        best[ident] = c
    by_strategy: dict[str, list[Candidate]] = {}
    for c in best.values():
        by_strategy.setdefault(c.strategy, []).append(c)
    queues = sorted(by_strategy.values(), key=lambda q: -q[0].strategy_score)
    out: list[Candidate] = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out

"""Quality control of synthesized trajectories (SciDataSailor §4.2): execution validity, step-level
verification with branch removal, and re-verification of processing failures — each decision with its reason.

**Execution validity** (rules, no model; :func:`execution_problem`), first failing rule wins:

==============================  ====================================================================
``no_final_answer``             the last turn is not an ``<answer>``
``malformed_observation``       a code turn without an observation
``empty_observation``           an observation with no text
``missing_tags``                the strict ``sailor`` validator finds a missing/misplaced ``<python>``,
                                ``<result>`` or ``<answer>`` block (:func:`datadojo.protocol.validate_trajectory`)
``inconsistent_state``          the turns do not match the tree path they claim (parent chain, code)
``unresolved_error``            a failed probe (error, timeout, killed, rejected) with no successful probe after it
``too_shallow``                 fewer than ``min_depth`` probes
``no_substantive_observation``  no observation that ran ok, has ``min_substantive_chars`` non-blank characters
                                and a post-execution score ≥ ``substantive_score``
==============================  ====================================================================

**Step-level verification** (LLM; :class:`StepVerifier`): for every step t the verifier labels two
transitions — does action a_t follow from what came before, is the next reasoning (the next step's thought, or
the final answer after the last step) grounded in observation o_t — as supported / unsupported /
contradicted. A step with an unsupported or contradicted transition removes the trajectory when the issue
affects later actions, the evidence target or the final answer (always the case for the last step).
Verdicts are cached per tree edge, so a bad transition removes every trajectory through it: the branch.

**Uncertainty** : a verifier reply that stays invalid, or a verdict that calls itself ambiguous because of
processing (truncated output, parse trouble), is verified again — against the original, untruncated
observation — up to ``max_reverify`` times; still ambiguous, or intrinsically ambiguous: ``ambiguous``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from datadojo.protocol import SAILOR, validate_trajectory
from datadojo.synth.sailor.config import SailorConfig
from datadojo.synth.sailor.explore import LLMCalls, render_steps
from datadojo.synth.sailor.mcts import Node
from datadojo.synth.sailor.strategies import FinalCheck, StepVerdict
from datadojo.types import Trajectory

__all__ = ["QC_REASONS", "QCDecision", "StepVerifier", "decide", "execution_problem", "is_substantive"]

#: Every reason a QC line can carry (``kept`` for accepted trajectories).
QC_REASONS: tuple[str, ...] = (
    "kept",
    "no_final_answer",
    "missing_tags",
    "inconsistent_state",
    "malformed_observation",
    "empty_observation",
    "unresolved_error",
    "too_shallow",
    "no_substantive_observation",
    "unsupported_step",
    "contradicted_step",
    "ambiguous",
)

_BAD = ("unsupported", "contradicted")


def is_substantive(node: Node, config: SailorConfig) -> bool:
    """A substantive observation (§4.2): ran ok, says enough, and the post-execution judge found evidence in it."""
    chars = sum(1 for ch in node.observation if not ch.isspace())
    return (
        node.status == "ok"
        and chars >= config.min_substantive_chars
        and (node.post or 0.0) >= config.substantive_score
    )


def execution_problem(
    trajectory: Trajectory, nodes: Sequence[Node], config: SailorConfig
) -> tuple[str, str] | None:
    """The first execution-validity rule the trajectory breaks, as ``(reason, detail)``; ``None`` when valid."""
    turns = trajectory.turns
    if not turns or turns[-1].action.kind != "answer":
        return "no_final_answer", "the last turn is not an <answer> block"
    code_turns = turns[:-1]
    for i, turn in enumerate(code_turns, 1):
        if turn.observation is None:
            return "malformed_observation", f"turn {i} has no observation"
        if not turn.observation.text.strip():
            return "empty_observation", f"turn {i} printed nothing"
    problems = validate_trajectory(trajectory, SAILOR)
    if problems:
        return "missing_tags", problems[0]
    if len(code_turns) != len(nodes) or any(t.action.kind != "code" for t in code_turns):
        return "inconsistent_state", f"{len(code_turns)} code turns for a path of {len(nodes)} probes"
    for i, (turn, node) in enumerate(zip(code_turns, nodes, strict=True), 1):
        parent_ok = i == 1 or node.parent == nodes[i - 2].id
        if not parent_ok or turn.action.text != node.code:
            return "inconsistent_state", f"turn {i} does not match tree node {node.id}"
    failed = [i for i, t in enumerate(code_turns, 1) if t.observation is not None and t.observation.error]
    ok = [i for i, t in enumerate(code_turns, 1) if t.observation is not None and not t.observation.error]
    if failed and (not ok or max(ok) < max(failed)):
        last = max(failed)
        status = code_turns[last - 1].observation.status  # type: ignore[union-attr]
        return "unresolved_error", f"turn {last} ended with status {status} and no later probe succeeded"
    if len(nodes) < config.min_depth:
        return "too_shallow", f"{len(nodes)} probe(s), min_depth is {config.min_depth}"
    if not any(is_substantive(n, config) for n in nodes):
        return "no_substantive_observation", "no probe produced a substantive observation"
    return None


_VERIFY_SYSTEM = (
    "You verify the steps of an agent that explores a scientific dataset folder with Python. Every statement "
    "must be recoverable from the executed observations, not from prior knowledge. Reply with JSON only."
)

_VERIFY_INSTRUCTION = """Exploration request: {intent}

Steps before step {t}:
{before}

Step {t} ({strategy}):
Thought: {thought}
Code:
{code}
Observation (status {status}){note}:
{observation}

What the agent wrote next ({next_kind}):
{next_text}

Label two transitions as "supported", "unsupported" or "contradicted":
- "action": does step {t}'s action follow logically from the request and the steps before it?
- "grounding": is what the agent wrote next grounded in the observation of step {t} (and earlier ones)?
"affects_later": true when a problem in this step would mislead later steps, the evidence or the final answer.
"ambiguity": "processing" if you cannot decide because of truncated or garbled output, "intrinsic" if the
evidence itself is ambiguous, else "none".
Reply with JSON {{"action": ..., "grounding": ..., "affects_later": true|false, "ambiguity": ..., "reason": TEXT}}."""

_QA_CHECK_INSTRUCTION = """Observations of an exploration of a dataset folder:
{steps}

Question: {question}
Answer: {answer}

Is the answer to the question supported by the observations above (not by outside knowledge)? Label it
"supported", "unsupported" or "contradicted". Reply with JSON {{"label": ..., "reason": TEXT}}."""


@dataclass
class QCDecision:
    """The verdict on one trajectory, as written to ``qc.jsonl``."""

    kept: bool
    reason: str
    detail: str = ""
    steps: list[dict[str, Any]] = field(default_factory=list)


class StepVerifier:
    """Step-level verification with per-edge caching and re-verification (module docstring)."""

    def __init__(self, calls: LLMCalls, intent: str, full_output: dict[str, str]) -> None:
        self.calls = calls
        self.intent = intent
        self.full_output = full_output
        self.config = calls.config
        self._cache: dict[tuple[str, str], asyncio.Task[tuple[StepVerdict | None, int]]] = {}
        self.requests_before = calls.stats.requests

    def _prompt(self, nodes: Sequence[Node], t: int, next_kind: str, next_text: str, *, full: bool) -> str:
        node = nodes[t - 1]
        observation = self.full_output.get(node.id, node.observation) if full else node.observation
        note = " — the complete original output" if full else (" — truncated" if node.truncated else "")
        return _VERIFY_INSTRUCTION.format(
            intent=self.intent,
            t=t,
            before=render_steps(list(nodes[: t - 1]), obs_chars=1500),
            strategy=node.strategy,
            thought=node.thought,
            code=node.code,
            status=node.status,
            note=note,
            observation=observation,
            next_kind=next_kind,
            next_text=next_text,
        )

    async def _verify(
        self, nodes: Sequence[Node], t: int, next_kind: str, next_text: str
    ) -> tuple[StepVerdict | None, int]:
        """``(verdict, attempts)``; ``None`` when processing trouble outlasts ``max_reverify`` repeats."""
        attempts = 0
        full = False
        while True:
            attempts += 1
            messages = [
                {"role": "system", "content": _VERIFY_SYSTEM},
                {"role": "user", "content": self._prompt(nodes, t, next_kind, next_text, full=full)},
            ]
            result = await self.calls.structured(self.calls.judge, messages, StepVerdict, greedy=True)
            if result is not None and result.value.ambiguity != "processing":
                return result.value, attempts
            if attempts > self.config.max_reverify:
                return None, attempts
            full = True  # verify again against the original execution trace

    def verify_step(
        self, nodes: Sequence[Node], t: int, next_key: str, next_kind: str, next_text: str
    ) -> asyncio.Task[tuple[StepVerdict | None, int]]:
        """The (cached) verification of step ``t`` followed by ``next_key`` (a node id or a final answer)."""
        key = (nodes[t - 1].id, next_key)
        if key not in self._cache:
            self._cache[key] = asyncio.ensure_future(self._verify(nodes, t, next_kind, next_text))
        return self._cache[key]

    async def verify(self, trajectory_key: str, nodes: Sequence[Node], final_answer: str) -> QCDecision:
        """Verify every step of one trajectory and decide (keep / remove with reason)."""
        jobs = []
        for t in range(1, len(nodes) + 1):
            if t < len(nodes):
                nxt = nodes[t]
                jobs.append(self.verify_step(nodes, t, nxt.id, "the next step's reasoning", nxt.thought))
            else:
                jobs.append(
                    self.verify_step(nodes, t, f"answer:{trajectory_key}", "the final answer", final_answer)
                )
        results = await asyncio.gather(*jobs)
        return decide(list(results), len(nodes))

    async def check_qa(self, nodes: Sequence[Node], question: str, answer: str) -> FinalCheck | None:
        """Whether a synthesized QA pair is supported by the trajectory's observations."""
        prompt = _QA_CHECK_INSTRUCTION.format(
            steps=render_steps(list(nodes), obs_chars=3000), question=question, answer=answer
        )
        messages = [{"role": "system", "content": _VERIFY_SYSTEM}, {"role": "user", "content": prompt}]
        result = await self.calls.structured(self.calls.judge, messages, FinalCheck, greedy=True)
        return result.value if result is not None else None


def decide(results: Sequence[tuple[StepVerdict | None, int]], n_steps: int) -> QCDecision:
    """Keep or remove a trajectory from its step verdicts (module docstring, rules in order)."""
    steps: list[dict[str, Any]] = []
    for t, (verdict, attempts) in enumerate(results, 1):
        rec: dict[str, Any] = {"step": t, "attempts": attempts}
        rec.update(
            verdict.model_dump() if verdict is not None else {"ambiguity": "processing", "failed": True}
        )
        steps.append(rec)
    for rec in steps:
        if rec.get("failed"):
            return QCDecision(
                False,
                "ambiguous",
                f"step {rec['step']}: the verifier stayed unsure after "
                f"{rec['attempts']} attempt(s) (processing failure)",
                steps,
            )
        if rec["ambiguity"] == "intrinsic":
            return QCDecision(False, "ambiguous", f"step {rec['step']}: {rec['reason']}", steps)
    for rec in steps:
        bad = [k for k in ("action", "grounding") if rec[k] in _BAD]
        if bad and (rec["affects_later"] or rec["step"] == n_steps):
            label = "contradicted" if any(rec[k] == "contradicted" for k in bad) else "unsupported"
            what = " and ".join(f"{k} {rec[k]}" for k in bad)
            return QCDecision(False, f"{label}_step", f"step {rec['step']}: {what}: {rec['reason']}", steps)
    return QCDecision(True, "kept", "", steps)

"""Grow one exploration tree over a (folder, seed) pair: DF-FPU selection, strategy→tool expansion,
entropy-adaptive width, probe execution and dual-feedback back-up (SciDataSailor §4.1).

One iteration descends from the root by DF-FPU (:meth:`Tree.select_child`, each decision recorded); at an
unvisited child it runs the probe, asks the post-execution judge to score the observation and backs up the
calibrated value; at an executed node without children it expands: the policy proposes and scores strategies
(dropping those under τ_pre), writes one probe per strategy, duplicates by tool identity are merged, the
pre-execution judge scores each probe (ρ), and the ``k`` best become children, ``k`` set by the entropy of
``softmax(ρ/T_p)`` (and of the policy's token distributions when the server returns log-probabilities).

The search stops at the first exhausted budget: probes run (``max_nodes``), LLM requests (``max_requests``),
wall time (``max_wall_s``), or a tree with nothing left to expand.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel

from datadojo.llm.base import ChatBackend
from datadojo.llm.structured import (
    StructuredMode,
    StructuredOutputError,
    StructuredResult,
    complete_structured,
)
from datadojo.protocol import SAILOR
from datadojo.synth.sailor.config import SailorConfig
from datadojo.synth.sailor.env import ProbeEnv
from datadojo.synth.sailor.mcts import (
    Node,
    Tree,
    branching_width,
    calibrated_value,
    combined_entropy,
    prior_entropy,
    token_entropy,
)
from datadojo.synth.sailor.prompts import policy_prompt, probe_turn
from datadojo.synth.sailor.seeds import Seed
from datadojo.synth.sailor.strategies import (
    STRATEGIES,
    Candidate,
    PostJudgement,
    PreJudgement,
    Probe,
    StrategyPlan,
    diversify,
    tool_identity,
)
from datadojo.types import Task

__all__ = ["Explorer", "LLMCalls", "SearchStats", "path_messages", "render_steps"]

T = TypeVar("T", bound=BaseModel)

_STRATEGY_INSTRUCTION = """Before writing any code, decide what evidence to collect next for the request above.
Propose up to {k} strategies from this catalog (name: what it does):
{catalog}

For each, give a one-sentence rationale and a score in [0, 1]: how much a probe of this strategy would advance
the request given what the steps so far have already shown (0 = useless or redundant, 1 = the most useful next
step). Propose only strategies that make sense now; "debugging" only after an error or unexpected output.
Reply with JSON: {{"strategies": [{{"strategy": NAME, "rationale": TEXT, "score": NUMBER}}, ...]}}."""

_PROBE_INSTRUCTION = """Write the next step with the strategy "{strategy}" ({description}).
Why this strategy: {rationale}

Reply with JSON {{"thought": TEXT, "code": TEXT}}: "thought" is your reasoning at this step (what the earlier
observations showed and why this probe comes next), "code" is one self-contained Python cell that runs in the
same interpreter as the earlier steps, reads only files under the working directory (they are read-only), and
prints its findings compactly (never print whole files or tables)."""

_JUDGE_SYSTEM = (
    "You assess steps of an agent that explores a scientific dataset folder with Python. Judge only from the "
    "text you are shown; do not use outside knowledge about the dataset. Reply with JSON only."
)

_PRE_INSTRUCTION = """Exploration request: {intent}

Steps so far:
{steps}

Candidate next probes (not yet run):
{candidates}

For every candidate give a score in [0, 1]: how likely it is to run without error and to yield new, relevant,
checkable evidence for the request, given the steps so far (redundant or off-topic probes score low).
Reply with JSON {{"scores": [{{"id": N, "score": NUMBER}}, ...]}} with one entry per candidate id."""

_POST_INSTRUCTION = """Exploration request: {intent}

Steps before this one:
{steps}

This step ({strategy}):
Thought: {thought}
Code:
{code}
Observation (status {status}):
{observation}

Score the observation in [0, 1]: how much new, relevant and trustworthy evidence for the request it provides
(a parsed schema, a computed statistic, a cross-file correspondence, a data-quality finding or a structural
finding score high; empty, redundant, erroneous or irrelevant output scores low).
Reply with JSON {{"score": NUMBER, "reason": TEXT}}."""


def render_steps(
    nodes: list[Node], *, obs_chars: int | None = None, full: dict[str, str] | None = None
) -> str:
    """The probes on a path as plain text for a judge: strategy, thought, code, observation (cut to ``obs_chars``)."""
    if not nodes:
        return "(none yet)"
    parts = []
    for i, n in enumerate(nodes, 1):
        obs = full.get(n.id, n.observation) if full else n.observation
        if obs_chars is not None and len(obs) > obs_chars:
            obs = obs[:obs_chars] + f"\n... [{len(obs) - obs_chars} more characters]"
        parts.append(
            f"[Step {i}] strategy: {n.strategy}\nThought: {n.thought}\nCode:\n{n.code}\n"
            f"Observation (status {n.status}):\n{obs}"
        )
    return "\n\n".join(parts)


def path_messages(base: list[dict[str, Any]], nodes: list[Node]) -> list[dict[str, Any]]:
    """The policy's conversation at the end of ``nodes``: prompt, then each probe turn and its ``<result>``."""
    messages = [dict(m) for m in base]
    for n in nodes:
        messages.append({"role": "assistant", "content": probe_turn(n.strategy, n.thought, n.code)})
        messages.append({"role": "user", "content": SAILOR.format_observation(n.observation)})
    return messages


@dataclass
class SearchStats:
    """What one search did (summed into ``summary.json``)."""

    probes_run: int = 0
    expansions: int = 0
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    repaired: int = 0
    structured_failures: int = 0
    strategies_proposed: int = 0
    strategies_dropped: int = 0
    duplicates_merged: int = 0
    stop: str = ""
    elapsed_s: float = 0.0
    widths: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


class LLMCalls:
    """Structured calls to the policy and the judge, counting requests and tokens in :class:`SearchStats`."""

    def __init__(
        self,
        policy: ChatBackend,
        judge: ChatBackend,
        config: SailorConfig,
        mode: StructuredMode,
        stats: SearchStats,
    ) -> None:
        self.policy = policy
        self.judge = judge
        self.config = config
        self.mode = mode
        self.stats = stats

    def _count(self, requests: int, prompt: int, completion: int) -> None:
        self.stats.requests += requests
        self.stats.prompt_tokens += prompt
        self.stats.completion_tokens += completion

    async def structured(
        self,
        backend: ChatBackend,
        messages: list[dict[str, Any]],
        cls: type[T],
        *,
        greedy: bool,
        logprobs: bool = False,
    ) -> StructuredResult[T] | None:
        """One validated reply, or ``None`` when it stays invalid after the repair (counted, never raised)."""
        cfg = self.config
        kwargs: dict[str, Any] = {"max_tokens": cfg.max_tokens}
        if greedy:
            kwargs["temperature"] = 0.0
        else:
            kwargs.update(temperature=cfg.temperature, top_p=cfg.top_p)
        if logprobs:
            kwargs.update(logprobs=True, top_logprobs=cfg.top_logprobs)
        try:
            result = await complete_structured(backend, messages, cls, mode=self.mode, **kwargs)
        except StructuredOutputError as exc:
            self.stats.structured_failures += 1
            self._count(exc.attempts, 0, 0)
            return None
        self._count(result.requests, result.prompt_tokens, result.completion_tokens)
        self.stats.repaired += int(result.repaired)
        return result

    async def text(
        self,
        backend: ChatBackend,
        messages: list[dict[str, Any]],
        *,
        greedy: bool,
        stop: tuple[str, ...] = (),
    ) -> str:
        """A plain completion (final answers, merged references)."""
        cfg = self.config
        kwargs: dict[str, Any] = {"max_tokens": cfg.max_tokens, "stop": list(stop) or None}
        if greedy:
            kwargs["temperature"] = 0.0
        else:
            kwargs.update(temperature=cfg.temperature, top_p=cfg.top_p)
        out = await backend.chat(messages, n=1, **kwargs)
        self._count(1, out[0].prompt_tokens, out[0].completion_tokens)
        return out[0].text


class Explorer:
    """Grows the tree of one (folder, seed) unit; see the module docstring."""

    def __init__(self, calls: LLMCalls, env: ProbeEnv, seed: Seed, tree: Tree, task: Task) -> None:
        self.calls = calls
        self.config = calls.config
        self.env = env
        self.seed = seed
        self.tree = tree
        self.task = task
        self.stats = calls.stats
        self.full_output: dict[str, str] = {}
        self.base_messages = policy_prompt(task, self.config.profile_chars)

    # ------------------------------------------------------------------ search
    def _budget_left(self, started: float) -> str | None:
        cfg = self.config
        if self.stats.probes_run >= cfg.max_nodes:
            return "max_nodes"
        if self.stats.requests >= cfg.max_requests:
            return "max_requests"
        if time.monotonic() - started >= cfg.max_wall_s:
            return "max_wall_s"
        if self.tree.closed(self.tree.root):
            return "exhausted"
        return None

    async def search(self) -> SearchStats:
        """Run MCTS iterations until a budget is spent (see the module docstring)."""
        started = time.monotonic()
        tree = self.tree
        while (stop := self._budget_left(started)) is None:
            v = tree.root
            while True:
                if v.children:
                    w = tree.select_child(v)
                    if w is None:  # only the root can be reached with every child closed
                        v.exhausted = True
                        break
                    if not w.executed:
                        await self.run_probe(w)
                        tree.backup(w, calibrated_value(w.rho, w.post or 0.0, self.config.calibration))
                        break
                    v = w
                    continue
                added = await self.expand(v) if v.depth < self.config.max_depth else 0
                if not added:
                    v.exhausted = True
                    tree.backup(v, (v.w / v.n) if v.n else 0.0)
                    break
        self.stats.stop = stop
        self.stats.elapsed_s += time.monotonic() - started
        return self.stats

    # ------------------------------------------------------------------ expansion
    async def expand(self, v: Node) -> int:
        """Strategy → probe → dedup → ρ → entropy width → children; returns the number of children added."""
        cfg = self.config
        path = self.tree.path(v)[1:]
        self.stats.expansions += 1
        catalog = "\n".join(f"- {name}: {desc}" for name, desc in STRATEGIES.items())
        ask = _STRATEGY_INSTRUCTION.format(k=cfg.max_strategies, catalog=catalog)
        plan = await self.calls.structured(
            self.calls.policy,
            [*path_messages(self.base_messages, path), {"role": "user", "content": ask}],
            StrategyPlan,
            greedy=False,
            logprobs=cfg.logprobs,
        )
        if plan is None:
            v.extra["expansion"] = {"error": "strategy proposal stayed invalid after the repair"}
            return 0
        h_token = token_entropy(plan.completion.logprobs)
        best: dict[str, Any] = {}
        for p in plan.value.strategies:
            if p.strategy not in best or p.score > best[p.strategy].score:
                best[p.strategy] = p
        proposals = sorted(best.values(), key=lambda p: -p.score)[: cfg.max_strategies]
        kept = [p for p in proposals if p.score >= cfg.tau_pre]
        self.stats.strategies_proposed += len(proposals)
        self.stats.strategies_dropped += len(proposals) - len(kept)
        info: dict[str, Any] = {
            "strategies": [
                {"strategy": p.strategy, "score": p.score, "kept": p.score >= cfg.tau_pre} for p in proposals
            ],
        }
        v.extra["expansion"] = info
        if not kept:
            return 0
        history = path_messages(self.base_messages, path)
        results = await asyncio.gather(
            *(
                self.calls.structured(
                    self.calls.policy,
                    [
                        *history,
                        {
                            "role": "user",
                            "content": _PROBE_INSTRUCTION.format(
                                strategy=p.strategy, description=STRATEGIES[p.strategy], rationale=p.rationale
                            ),
                        },
                    ],
                    Probe,
                    greedy=False,
                )
                for p in kept
            )
        )
        raw = [
            Candidate(p.strategy, p.score, r.value.thought.strip(), r.value.code.strip())
            for p, r in zip(kept, results, strict=True)
            if r is not None and r.value.code.strip()
        ]
        seen = {tool_identity(n.code) for n in path}
        candidates = diversify(raw, seen)
        self.stats.duplicates_merged += len(raw) - len(candidates)
        if not candidates:
            info["width"] = 0
            return 0
        await self.score_candidates(path, candidates)
        h_prior = prior_entropy([c.rho for c in candidates], cfg.prior_temperature)
        h = combined_entropy(h_prior, h_token, cfg.token_weight)
        k = branching_width(h, cfg.k_min, cfg.k_max, len(candidates))
        order = sorted(range(len(candidates)), key=lambda i: (-candidates[i].rho, i))
        for i in order[:k]:
            c = candidates[i]
            self.tree.add_child(
                v,
                strategy=c.strategy,
                thought=c.thought,
                code=c.code,
                rho=c.rho,
                extra={"strategy_score": c.strategy_score},
            )
        info.update(m=len(candidates), h_prior=h_prior, h_token=h_token, entropy=h, width=k)
        self.stats.widths.append(k)
        return k

    async def score_candidates(self, path: list[Node], candidates: list[Candidate]) -> None:
        """ρ_w = r_pre(a_w | τ_v, x_σ) for every candidate, in one judge call (unscored candidates get 0)."""
        listing = "\n\n".join(
            f"[Candidate {i}] strategy: {c.strategy}\nThought: {c.thought}\nCode:\n{c.code}"
            for i, c in enumerate(candidates)
        )
        prompt = _PRE_INSTRUCTION.format(
            intent=self.seed.intent, steps=render_steps(path, obs_chars=1500), candidates=listing
        )
        result = await self.calls.structured(
            self.calls.judge,
            [{"role": "system", "content": _JUDGE_SYSTEM}, {"role": "user", "content": prompt}],
            PreJudgement,
            greedy=True,
        )
        scores = {s.id: s.score for s in result.value.scores} if result is not None else {}
        for i, c in enumerate(candidates):
            c.rho = float(scores.get(i, 0.0))

    # ------------------------------------------------------------------ execution
    async def run_probe(self, w: Node) -> None:
        """Run ``w``'s probe after its path, then the post-execution judge (skipped for failed/empty output)."""
        path = self.tree.path(w)[1:]
        result, observation, truncated, full = await self.env.run([n.code for n in path[:-1]], w.code)
        self.stats.probes_run += 1
        w.executed = True
        w.status = result.status
        w.observation = observation
        w.truncated = truncated
        self.full_output[w.id] = full
        if result.status != "ok":
            w.post, w.post_reason = 0.0, f"the probe ended with status {result.status}"
            return
        if not observation.strip():
            w.post, w.post_reason = 0.0, "the probe printed nothing"
            return
        prompt = _POST_INSTRUCTION.format(
            intent=self.seed.intent,
            steps=render_steps(path[:-1], obs_chars=1500),
            strategy=w.strategy,
            thought=w.thought,
            code=w.code,
            status=w.status,
            observation=observation,
        )
        judged = await self.calls.structured(
            self.calls.judge,
            [{"role": "system", "content": _JUDGE_SYSTEM}, {"role": "user", "content": prompt}],
            PostJudgement,
            greedy=True,
        )
        if judged is None:
            w.post, w.post_reason = 0.0, "post-execution judge reply stayed invalid"
        else:
            w.post, w.post_reason = float(judged.value.score), judged.value.reason

"""The exploration tree and its rules: DF-FPU selection, calibrated back-up, entropy-adaptive width (§4.1).

Everything here is pure (no LLM, no sandbox) so each rule is tested on its own with worked numbers:

* :func:`uct_df_fpu` — ``UCT(v,w) = Q̂(w) + λ·ρ_w·sqrt(log(1+N(v))/(1+N(w))) + β·d_w``;
* :meth:`Node.q_hat` — an unvisited child (N = 0) is valued by its **first-play value** ``ρ_w + Δ − δ``
  (the reference code's FPU branch never ran, so its unvisited children were valued 0); a visited one by the
  mean of the values backed up through it. With ``fpu_mode="sibling"`` (default) Δ is the *dual-feedback*
  offset :func:`sibling_offset`: the mean of ``Q̂(u) − ρ_u`` over the visited siblings
  ``S_v = {u ∈ Ch(v) : N(u) > 0}`` (the set §4.1 defines for this rule) — how far executed outcomes have
  landed from the pre-execution judge's scores at this state — so an untried probe's judged ρ is corrected
  by what its siblings' observations showed; with no visited sibling yet, Δ is the constant ``fpu_bonus``.
  ``fpu_mode="constant"`` always uses ``fpu_bonus``;
* :func:`calibrated_value` — after the probe runs, ``(1−η)·ρ_w + η·s_post`` is backed up: the pre-execution
  judgment prioritizes, the post-execution one calibrates (dual feedback);
* d_w is the **normalized depth reached below w**: ``max depth(u)/max_depth`` over w and its executed
  descendants u (``depth_term="reached"``, default). The node's own depth (``depth_term="node"``, the reference
  code's reading, there un-normalized) is the same for every child of v, so β·d_w could never change a
  selection; the depth reached below w differs between siblings once one of them has been followed further,
  so β favours the branch whose trace has gone deeper (the paper's "balance breadth and depth"). Normalized
  by ``max_depth`` so that β does not dominate deep trees;
* :func:`prior_entropy`, :func:`token_entropy`, :func:`branching_width` — ``π = softmax(ρ/T_p)``,
  ``H_prior = −Σ π log π / log M̄_v``, the mean normalized entropy of the top-k token distributions, and a
  width that widens uncertain states and narrows obvious ones.

:class:`Tree` keeps the nodes of one (folder, seed) search and writes the ``tree.jsonl`` records: one
``{"type": "node", …}`` line per node and one ``{"type": "select", …}`` line per selection decision, with each
candidate's terms, so that anyone can recompute every UCT value with :func:`uct_df_fpu` and the ``lam`` /
``beta`` of ``summary.json``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Node",
    "SelectRecord",
    "Tree",
    "branching_width",
    "calibrated_value",
    "combined_entropy",
    "prior_entropy",
    "sibling_offset",
    "softmax",
    "token_entropy",
    "uct_df_fpu",
]


def uct_df_fpu(
    q: float, rho: float, n_parent: int, n: int, depth: float, *, lam: float, beta: float
) -> float:
    """``Q̂(w) + λ·ρ_w·sqrt(log(1+N(v))/(1+N(w))) + β·d_w`` (§4.1, DF-FPU); ``depth`` is normalized d_w."""
    if n_parent < 0 or n < 0:
        raise ValueError(f"visit counts must be >= 0, got N(v)={n_parent}, N(w)={n}")
    return q + lam * rho * math.sqrt(math.log(1 + n_parent) / (1 + n)) + beta * depth


def sibling_offset(visited: Sequence[tuple[float, float]]) -> float | None:
    """Δ_v = mean over visited siblings u ∈ S_v of ``Q̂(u) − ρ_u`` (pairs ``(Q̂(u), ρ_u)``); None if S_v is empty."""
    if not visited:
        return None
    return sum(q - rho for q, rho in visited) / len(visited)


def calibrated_value(rho: float, post: float, calibration: float) -> float:
    """The value backed up after a probe ran: ``(1−η)·ρ + η·s_post`` (pre-judgment calibrated by the outcome)."""
    return (1.0 - calibration) * rho + calibration * post


def softmax(values: Sequence[float], temperature: float) -> list[float]:
    """``exp(x_i/T) / Σ_j exp(x_j/T)``, computed stably."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if not values:
        return []
    scaled = [v / temperature for v in values]
    top = max(scaled)
    exps = [math.exp(s - top) for s in scaled]
    total = sum(exps)
    return [e / total for e in exps]


def prior_entropy(rhos: Sequence[float], temperature: float) -> float:
    """``H_prior(v) = −(1/log M̄_v)·Σ π_i log π_i`` with ``π = softmax(ρ/T_p)`` over the M̄_v candidates (§4.1).

    In [0, 1]: 1 when the judge cannot tell the candidates apart, near 0 when one dominates. With fewer than two
    candidates there is no choice to be uncertain about: 0.
    """
    m = len(rhos)
    if m < 2:
        return 0.0
    pis = softmax(rhos, temperature)
    h = -sum(p * math.log(p) for p in pis if p > 0)
    return max(0.0, min(1.0, h / math.log(m)))


def token_entropy(logprobs: Sequence[Any] | None) -> float | None:
    """Mean normalized entropy of the per-token top-k distributions of a completion, or ``None``.

    Each element is a :class:`~datadojo.llm.base.TokenLogprob` (``token``, ``logprob``, ``top`` = alternatives
    as ``(token, logprob)``). For a token with k ≥ 2 alternatives, the top-k probabilities are renormalized and
    their entropy divided by log k; tokens without alternatives are skipped. ``None`` when no token has any
    (the server returned no log-probabilities), so callers fall back to H_prior alone.
    """
    if not logprobs:
        return None
    values: list[float] = []
    for tok in logprobs:
        alts = dict(getattr(tok, "top", ()) or ())
        alts.setdefault(tok.token, tok.logprob)
        if len(alts) < 2:
            continue
        probs = [math.exp(lp) for lp in alts.values() if math.isfinite(lp)]
        total = sum(probs)
        if total <= 0 or len(probs) < 2:
            continue
        h = -sum((p / total) * math.log(p / total) for p in probs if p > 0)
        values.append(h / math.log(len(probs)))
    if not values:
        return None
    return sum(values) / len(values)


def combined_entropy(h_prior: float, h_token: float | None, token_weight: float) -> float:
    """``(1−ω)·H_prior + ω·H_token`` when token entropy is known, else ``H_prior``."""
    if h_token is None:
        return h_prior
    return (1.0 - token_weight) * h_prior + token_weight * h_token


def branching_width(entropy: float, k_min: int, k_max: int, available: int) -> int:
    """Children to keep: ``k_min + round((k_max − k_min)·H)``, at most ``available`` (and at least 1 if any)."""
    if available <= 0:
        return 0
    h = max(0.0, min(1.0, entropy))
    k = k_min + math.floor((k_max - k_min) * h + 0.5)
    return max(1, min(k, available))


@dataclass
class Node:
    """One state of the search: the probe that led here (strategy, thought, code) and its outcome.

    ``n`` = N(w) visits, ``w`` = sum of backed-up values, ``rho`` = ρ_w (pre-execution judge), ``post`` =
    s_post (post-execution judge; ``None`` until the probe has run). The root has no probe.
    """

    id: str
    parent: str | None
    depth: int
    strategy: str | None = None
    thought: str = ""
    code: str = ""
    rho: float = 0.0
    post: float | None = None
    n: int = 0
    w: float = 0.0
    status: str | None = None
    observation: str = ""
    truncated: bool = False
    executed: bool = False
    exhausted: bool = False
    children: list[str] = field(default_factory=list)
    post_reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def q_hat(self, fpu_bonus: float, fpu_reduction: float) -> float:
        """Q̂(w): the mean backed-up value, or the first-play value ``ρ_w + Δ − δ`` while unvisited."""
        if self.n == 0:
            return self.rho + fpu_bonus - fpu_reduction
        return self.w / self.n


@dataclass(frozen=True)
class SelectRecord:
    """One selection decision, as written to ``tree.jsonl``."""

    node: str
    n_parent: int
    candidates: list[dict[str, Any]]
    chosen: str
    fpu_delta: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "select",
            "node": self.node,
            "n_parent": self.n_parent,
            "candidates": self.candidates,
            "chosen": self.chosen,
            "fpu_delta": self.fpu_delta,
        }


def head_tail(text: str, limit: int) -> str:
    """At most ``limit`` characters of ``text``: its head and its tail around a ``…`` mark.

    An observation's tail holds what matters when a probe failed — the exception line of a traceback —
    so an excerpt keeps it instead of the first ``limit`` characters only (issue 29).
    """
    if len(text) <= limit:
        return text
    if limit < 20:
        return text[:limit]
    mark = "\n…\n"
    tail = (limit - len(mark)) * 2 // 3
    head = limit - len(mark) - tail
    return text[:head] + mark + text[-tail:]


class Tree:
    """The nodes of one search, DF-FPU selection among a node's open children, and back-up."""

    def __init__(
        self,
        prefix: str,
        *,
        lam: float,
        beta: float,
        fpu_bonus: float,
        fpu_reduction: float,
        max_depth: int,
        fpu_mode: str = "sibling",
        depth_term: str = "reached",
    ) -> None:
        if fpu_mode not in ("sibling", "constant"):
            raise ValueError(f"fpu_mode must be 'sibling' or 'constant', got {fpu_mode!r}")
        if depth_term not in ("reached", "node"):
            raise ValueError(f"depth_term must be 'reached' or 'node', got {depth_term!r}")
        self.fpu_mode = fpu_mode
        self.depth_term = depth_term
        self.prefix = prefix
        self.lam = lam
        self.beta = beta
        self.fpu_bonus = fpu_bonus
        self.fpu_reduction = fpu_reduction
        self.max_depth = max_depth
        self.nodes: dict[str, Node] = {}
        self.selections: list[SelectRecord] = []
        self.root = self._new(parent=None, depth=0)
        self.root.executed = True

    def _new(self, parent: str | None, depth: int, **fields: Any) -> Node:
        node = Node(id=f"{self.prefix}/{len(self.nodes)}", parent=parent, depth=depth, **fields)
        self.nodes[node.id] = node
        if parent is not None:
            self.nodes[parent].children.append(node.id)
        return node

    def add_child(self, parent: Node, **fields: Any) -> Node:
        """A new, unvisited child of ``parent`` (its probe not yet run)."""
        return self._new(parent=parent.id, depth=parent.depth + 1, **fields)

    def path(self, node: Node) -> list[Node]:
        """Root … node."""
        out = [node]
        while out[-1].parent is not None:
            out.append(self.nodes[out[-1].parent])
        return out[::-1]

    def normalized_depth(self, node: Node) -> float:
        """depth(w) / max_depth, in [0, 1]: the node's own depth."""
        return node.depth / self.max_depth

    def reached_depth(self, node: Node) -> int:
        """The deepest depth of ``node`` and its executed descendants (``node.depth`` while nothing below ran)."""
        deepest = node.depth
        stack = [node]
        while stack:
            for c in stack.pop().children:
                child = self.nodes[c]
                if child.executed:
                    deepest = max(deepest, child.depth)
                    stack.append(child)
        return deepest

    def depth_value(self, node: Node) -> float:
        """d_w of UCT: the normalized depth reached below w (``depth_term="reached"``) or of w itself."""
        if self.depth_term == "node":
            return self.normalized_depth(node)
        return self.reached_depth(node) / self.max_depth

    def closed(self, node: Node) -> bool:
        """Nothing more can be learned below ``node``: it ran and cannot grow, or all its children are closed."""
        if not node.executed:
            return False
        if not node.children:
            return node.exhausted or node.depth >= self.max_depth
        return all(self.closed(self.nodes[c]) for c in node.children)

    def fpu_delta(self, parent: Node) -> float:
        """Δ for the unvisited children of ``parent``: the visited siblings' offset, else ``fpu_bonus``."""
        if self.fpu_mode == "constant":
            return self.fpu_bonus
        visited = [(c.w / c.n, c.rho) for c in (self.nodes[i] for i in parent.children) if c.n > 0]
        offset = sibling_offset(visited)
        return self.fpu_bonus if offset is None else offset

    def uct_terms(self, parent: Node, child: Node, delta: float | None = None) -> dict[str, Any]:
        """The candidate record of ``child`` under ``parent``: id, q, rho, n, depth (d_w as used), uct."""
        q = child.q_hat(self.fpu_delta(parent) if delta is None else delta, self.fpu_reduction)
        d = self.depth_value(child)
        uct = uct_df_fpu(q, child.rho, parent.n, child.n, d, lam=self.lam, beta=self.beta)
        return {"id": child.id, "q": q, "rho": child.rho, "n": child.n, "depth": d, "uct": uct}

    def select_child(self, parent: Node) -> Node | None:
        """The open child with the highest UCT (first created wins ties); records the decision."""
        open_children = [self.nodes[c] for c in parent.children if not self.closed(self.nodes[c])]
        if not open_children:
            return None
        delta = self.fpu_delta(parent)
        candidates = [self.uct_terms(parent, c, delta) for c in open_children]
        best = max(range(len(candidates)), key=lambda i: (candidates[i]["uct"], -i))
        chosen = open_children[best]
        self.selections.append(SelectRecord(parent.id, parent.n, candidates, chosen.id, delta))
        return chosen

    def backup(self, leaf: Node, value: float) -> None:
        """Add ``value`` and one visit to ``leaf`` and every ancestor."""
        for node in self.path(leaf):
            node.n += 1
            node.w += value

    def leaves(self) -> list[Node]:
        """Executed probe nodes none of whose children ran (the ends of complete trajectories)."""
        return [
            n
            for n in self.nodes.values()
            if n.parent is not None and n.executed and not any(self.nodes[c].executed for c in n.children)
        ]

    def node_record(
        self, node: Node, *, seed: str, unit: str, folder: str, excerpt_chars: int
    ) -> dict[str, Any]:
        """The ``tree.jsonl`` line of a node."""
        return {
            "type": "node",
            "id": node.id,
            "parent": node.parent,
            "depth": node.depth,
            "seed": seed,
            "unit": unit,
            "folder": folder,
            "strategy": node.strategy,
            "thought": node.thought,
            "code": node.code,
            "status": node.status,
            "excerpt": head_tail(node.observation, excerpt_chars),
            "truncated": node.truncated,
            "executed": node.executed,
            "n": node.n,
            "q": (node.w / node.n) if node.n else None,
            "rho": node.rho,
            "post": node.post,
            "post_reason": node.post_reason,
            **node.extra,
        }

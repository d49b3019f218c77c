"""Behavioural metrics of agent trajectories (SciDataSailor §5.3, Table 4), from any trajectory file.

SciDataSailor compares models not only by accuracy but by *how* they work: how often their code fails,
whether failures cascade, and what code they write. The definitions used here (the paper names the
metrics; the exact counting is ours and stated so numbers are comparable across runs):

Efficiency

* **avg_steps**: turns per trajectory ("Avg. ReAct Steps / Task").
* **avg_tokens**: prompt + completion tokens per trajectory, from the turns' recorded usage.

Error and recovery, over *code calls* (turns whose action is Python or SQL and that got an observation)

* **code_error_rate**: the share of calls whose observation is an error (status ``error``, ``timeout``,
  ``killed`` or ``rejected``). ``env_error`` (the sandbox itself failed) is the harness's fault, not the
  model's, and such calls are left out of numerator and denominator.
* **error_free_rate**: the share of trajectories with no erroneous call (a trajectory without calls is
  error-free).
* **mean_error_chain**: the mean length of maximal runs of consecutive erroneous calls (1.0 = every
  error was followed by a successful call); ``None`` when there was no error at all.

Code structure, per Python code block (SQL blocks and code that does not parse are left out; their count
is reported)

* **ast_depth**: the depth of the block's abstract syntax tree (``ast.Module`` is depth 1; every child
  node visited by :func:`ast.iter_child_nodes`, expression contexts included, adds one level).
* **branches_loops**: control-flow nodes: ``if``/``elif`` statements, conditional expressions, ``for``,
  ``async for``, ``while``, ``try``, ``match`` and comprehension loops.
* **lines_of_code**: lines that are neither blank nor only a comment.
* **unique_imports** (per trajectory): distinct top-level modules imported across its code blocks.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from datadojo.jsonl import read_trajectories
from datadojo.types import Trajectory

__all__ = ["BehaviourMetrics", "CodeStats", "behaviour_by", "behaviour_metrics", "code_stats"]

ERROR_STATUSES = frozenset({"error", "timeout", "killed", "rejected"})
_BRANCH_NODES: tuple[type[ast.AST], ...] = (
    ast.If, ast.IfExp, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match, ast.comprehension,
)  # fmt: skip
if hasattr(ast, "TryStar"):
    _BRANCH_NODES = (*_BRANCH_NODES, ast.TryStar)


@dataclass(frozen=True)
class CodeStats:
    """Structure of one Python block (module docstring)."""

    ast_depth: int
    branches_loops: int
    lines_of_code: int
    imports: frozenset[str]


def _depth(node: ast.AST) -> int:
    deepest, stack = 0, [(node, 1)]
    while stack:
        cur, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(cur))
    return deepest


def _loc(code: str) -> int:
    return sum(1 for ln in code.splitlines() if ln.strip() and not ln.strip().startswith("#"))


def code_stats(code: str) -> CodeStats | None:
    """Structure metrics of a Python block, or ``None`` when it does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    imports: set[str] = set()
    branches = 0
    for node in ast.walk(tree):
        if isinstance(node, _BRANCH_NODES):
            branches += 1
        if isinstance(node, ast.Import):
            imports.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imports.add(node.module.split(".")[0])
    return CodeStats(_depth(tree), branches, _loc(code), frozenset(imports))


@dataclass(frozen=True)
class BehaviourMetrics:
    """Table 4's metrics over a set of trajectories (module docstring); rates are fractions in [0, 1]."""

    n_trajectories: int
    avg_steps: float
    avg_tokens: float
    n_calls: int
    code_error_rate: float | None
    error_free_rate: float
    mean_error_chain: float | None
    n_python_blocks: int
    n_unparsable_blocks: int
    ast_depth: float | None
    branches_loops: float | None
    lines_of_code: float | None
    unique_imports: float

    def to_dict(self) -> dict[str, float | int | None]:
        return asdict(self)


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def behaviour_metrics(trajectories: Iterable[Trajectory] | str | Path) -> BehaviourMetrics:
    """Table 4's metrics over trajectories (objects, or a trajectory JSONL file path)."""
    trajs = list(read_trajectories(trajectories) if isinstance(trajectories, str | Path) else trajectories)
    if not trajs:
        raise ValueError("no trajectories to analyse")
    n_calls = n_errors = 0
    error_free = 0
    chains: list[int] = []
    depths: list[float] = []
    branches: list[float] = []
    locs: list[float] = []
    unparsable = 0
    imports_per_traj: list[float] = []
    for t in trajs:
        run = 0
        traj_errors = 0
        imports: set[str] = set()
        for turn in t.turns:
            kind = turn.action.kind
            if kind == "code":
                stats = code_stats(turn.action.text)
                if stats is None:
                    unparsable += 1
                else:
                    depths.append(stats.ast_depth)
                    branches.append(stats.branches_loops)
                    locs.append(stats.lines_of_code)
                    imports |= stats.imports
            if kind not in ("code", "sql") or turn.observation is None:
                continue
            if turn.observation.status == "env_error":
                continue
            n_calls += 1
            if turn.observation.status in ERROR_STATUSES:
                n_errors += 1
                traj_errors += 1
                run += 1
            elif run:
                chains.append(run)
                run = 0
        if run:
            chains.append(run)
        error_free += traj_errors == 0
        imports_per_traj.append(len(imports))
    n = len(trajs)
    return BehaviourMetrics(
        n_trajectories=n,
        avg_steps=sum(t.n_turns for t in trajs) / n,
        avg_tokens=sum(sum(u.tokens.prompt + u.tokens.completion for u in t.turns) for t in trajs) / n,
        n_calls=n_calls,
        code_error_rate=n_errors / n_calls if n_calls else None,
        error_free_rate=error_free / n,
        mean_error_chain=_mean([float(c) for c in chains]),
        n_python_blocks=len(depths) + unparsable,
        n_unparsable_blocks=unparsable,
        ast_depth=_mean(depths),
        branches_loops=_mean(branches),
        lines_of_code=_mean(locs),
        unique_imports=sum(imports_per_traj) / n,
    )


def behaviour_by(
    trajectories: Iterable[Trajectory] | str | Path,
    key: Callable[[Trajectory], str | None] = lambda t: t.model,
) -> dict[str, BehaviourMetrics]:
    """:func:`behaviour_metrics` per group (default: per ``model``; ``None`` keys group as ``"?"``)."""
    trajs = read_trajectories(trajectories) if isinstance(trajectories, str | Path) else trajectories
    groups: dict[str, list[Trajectory]] = {}
    for t in trajs:
        groups.setdefault(key(t) or "?", []).append(t)
    return {g: behaviour_metrics(ts) for g, ts in groups.items()}

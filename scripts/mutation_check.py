#!/usr/bin/env python
"""A bounded, deterministic mutation check of the code that turns answers into rewards and figures.

Why: a reward, a loss or a metric that silently changes is a bug the policy learns from. Tests that only
round-trip values or compare a function with itself let such a change through (issue 39 found 26 of 55
hand-made mutants surviving). This script makes small changes ("mutants") to a fixed list of functions in
``compare/``, ``reward/``, EnvLunch's agreement and reward, ``train/losses``, ``eval/metrics`` and the
environment's turn and token arithmetic (``env/episode``, ``env/tokens``), runs the
tests mapped to each module against every mutant, and reports which mutants no test noticed.

How it stays safe, deterministic and bounded:

* every mutant is written into a **temporary copy** of ``src/`` (one per worker), never into the working
  tree, so an interrupted run leaves nothing changed; the tests run with ``PYTHONPATH`` and ``sys.path``
  pointing at that copy, by default in a child forked from a parent that has already imported pytest,
  torch and pandas (but not datadojo), which saves seconds of imports per mutant, or in a fresh
  interpreter (``--isolation subprocess``);
* the mutant set is a pure function of the sources: AST operators applied, in source order, to the named
  functions (comparison flips ``<``↔``<=``, ``==``↔``!=``, ``in``↔``not in``; arithmetic swaps; ``and``↔``or``;
  numeric constant changes — an int ``n`` becomes ``n + 1``, a float ``x`` becomes ``2x`` (``1.0`` if 0) —
  and ``True``↔``False``; ``min``↔``max`` and ``any``↔``all``; dropping ``not`` or a unary minus; negating
  a boolean ``return``), plus the survivors issue 39 named, as explicit text replacements;
* Hypothesis runs derandomized, without an example database, with ``--examples`` (20) examples per property
  unless a test sets its own; each mutant gets the mapped test files with ``-x`` and a per-mutant timeout
  (a mutant that hangs counts as killed: ``timeout``).

Equivalent mutants (no input can tell them apart) are listed in :data:`EQUIVALENT` with a reason, keyed by
the mutant id the script prints. Usage::

    python scripts/mutation_check.py                      # everything (7.5 minutes on 2 busy cores)
    python scripts/mutation_check.py --module train/losses --module eval/metrics
    python scripts/mutation_check.py --list               # the mutant set, without running tests
    python scripts/mutation_check.py --limit 20 --jobs 1  # the first 20 mutants of each module, 1 worker

Exit status: 0 when the kill rate over the selected modules reaches ``--fail-under`` (default 90 %) with
no error, 1 otherwise, 2 when a module's tests fail before any mutation (the check would be meaningless).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "datadojo"


# ----------------------------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """A module, the functions of it to mutate (``Class.method`` for methods; ``<constants>`` for its
    module-level numeric constants) and the test files that must notice a change."""

    module: str  # path under src/datadojo without .py
    functions: tuple[str, ...]
    tests: tuple[str, ...]


#: The comparison core's tests: the whole folder (new test files count without editing this list) and the
#: adversarial answer table.
COMPARE_TESTS = ("tests/compare", "tests/reward/test_reward_answer_table.py")

TARGETS: tuple[Target, ...] = (
    Target(
        "compare/tables",
        ("<constants>", "values_equal", "_vectors_match", "compare_tables", "denotations_equal"),
        ("tests/compare/test_compare_tables.py", "tests/bench/test_conformance_spider.py", *COMPARE_TESTS),
    ),
    Target(
        "compare/matchers",
        ("_match_number", "_match_bool", "_match_list", "_split_items", "_match_record", "_match_scalar"),
        ("tests/compare/test_compare_matchers.py", *COMPARE_TESTS),
    ),
    Target(
        "compare/units",
        ("Unit.to_si", "Unit.from_si", "Unit.convert", "Unit.compatible", "_symbol"),
        ("tests/compare/test_compare_units.py", "tests/compare/test_compare_scientific.py", *COMPARE_TESTS),
    ),
    Target(
        "reward/datamind",
        (
            "<constants>",
            "length_reward",
            "format_reward",
            "composite_reward",
            "default_answer_check",
            "DataMindReward.combine",
            "DataMindReward.acheck",
        ),
        ("tests/reward/test_reward_datamind.py", "tests/reward/test_reward_answer_table.py"),
    ),
    Target(
        "reward/agreement",
        ("pearson", "cohen_kappa", "_binary", "agreement_report"),
        ("tests/reward/test_reward_agreement.py",),
    ),
    Target(
        "reward/base",
        ("weighted_result", "WeightedPart.contribution"),
        ("tests/reward/test_reward_registry.py",),
    ),
    Target(
        "reward/builtin",
        ("AnswerPartReward.result", "EnvLunchAgreementReward.result", "official_check"),
        ("tests/reward/test_reward_registry.py",),
    ),
    Target(
        "reward/envlunch",
        ("agreement", "envlunch_reward", "extract_submission", "ScoreRecord.solved", "score_programs"),
        ("tests/synth/test_envlunch_reward.py", "tests/synth/test_envlunch_canon.py"),
    ),
    Target(
        "reward/canon",
        ("values_close", "_rows_close", "_matches", "exact_match", "same_result", "row_overlap"),
        ("tests/synth/test_envlunch_canon.py", "tests/synth/test_envlunch_reward.py"),
    ),
    Target(
        "train/losses",
        (
            "<constants>",
            "token_logprobs",
            "token_entropy",
            "masked_mean",
            "normalization_weights",
            "group_advantages",
            "dynamic_sampling_keep",
            "apply_void_mask",
            "sft_loss",
            "_clipped_surrogate",
            "dapo_loss",
            "low_var_kl",
            "grpo_loss",
            "mixed_objective",
        ),
        ("tests/train/test_train_losses.py",),
    ),
    Target(
        "env/episode",
        (
            "_seed_sandbox",
            "Episode.turn_seed",
            "Episode._after_turn",
            "Episode.step",
            "Episode._execute",
            "Episode.end",
            "Episode._build_trajectory",
        ),
        ("tests/agent/test_agent_loop_regression.py", "tests/env/test_env_episode.py"),
    ),
    Target(
        "env/tokens",
        (
            "TokenBridge.bridge",
            "TokenBridge.commit",
            "TokenBridge._cut_at_stop",
            "TokenBridge.add_generation",
            "TokenStepper._next",
            "TokenStepper.step",
            "TokenEpisode.loss_mask",
            "TokenEpisode.rollout_logprobs",
            "TokenEpisode.add_generated",
            "TokenEpisode.add_environment",
        ),
        ("tests/env/test_env_tokens.py",),
    ),
    Target(
        "eval/metrics",
        ("pass_at_k", "mean_pass_at_k", "any_of_n", "TrialRecord.credit", "_summary", "summarize"),
        ("tests/eval/test_eval_metrics.py",),
    ),
)


@dataclass(frozen=True)
class Explicit:
    """A hand-made mutant: ``old`` (which must occur exactly once in the module) replaced by ``new``."""

    module: str
    name: str
    old: str
    new: str


#: The survivors issue 39 named, kept as explicit mutants so that a rewrite of the code cannot quietly
#: drop them from the check (a replacement that no longer matches is reported as stale, not skipped).
EXPLICIT: tuple[Explicit, ...] = (
    Explicit(
        "reward/envlunch",
        "pandas agreement gives partial credit (Eq. 4 wants an exact match)",
        'row_overlap(pred, ref) if backend == "sql" else exact_match(pred, ref)',
        "row_overlap(pred, ref)",
    ),
    Explicit(
        "train/losses",
        "GRPO's KL normalized per micro-batch (β times the number of micro-batches)",
        "kl = (low_var_kl(logp, ref_logp) * w * m).sum()",
        "kl = masked_mean(low_var_kl(logp, ref_logp), m)",
    ),
    Explicit(
        "eval/metrics",
        "pass@1 pooled over trials instead of averaged per task",
        "pass_at_1=sum(c / n for n, c in counts) / len(counts)",
        "pass_at_1=sum(c for _, c in counts) / sum(n for n, _ in counts)",
    ),
    Explicit(
        "reward/datamind",
        "rule+judge skips the judge when the rule's undecided guess says correct",
        "if check.decided:",
        "if check.decided or check.correct:",
    ),
    Explicit(
        "compare/matchers",
        "a longer list scored correct",
        "if len(p) != len(g):",
        "if len(p) < len(g):",
    ),
    Explicit(
        "compare/tables",
        "the table tolerance doubled",
        "DATAMIND_ABS_TOL = 1e-2",
        "DATAMIND_ABS_TOL = 2e-2",
    ),
    Explicit(
        "compare/units",
        "a magnitude prefix factor changed (kilo)",
        '"k": 1e3,',
        '"k": 1e4,',
    ),
)

#: Mutants that cannot change behaviour, by id, each with the reason.
EQUIVALENT: dict[str, str] = {
    "reward/agreement:pearson:arithmetic:a - mx -> a + mx": (
        "Σ(a+x̄)(b−ȳ) = Σ(a−x̄)(b−ȳ) + 2x̄·Σ(b−ȳ), and Σ(b−ȳ) = 0: the covariance is unchanged"
    ),
    "reward/agreement:pearson:arithmetic:b - my -> b + my": (
        "Σ(a−x̄)(b+ȳ) = Σ(a−x̄)(b−ȳ) + 2ȳ·Σ(a−x̄), and Σ(a−x̄) = 0: the covariance is unchanged"
    ),
    "reward/agreement:pearson:constant:True -> False": (
        "zip(strict=) of x and y: their lengths were compared on entry, with a clearer error"
    ),
    "reward/agreement:agreement_report:constant:True -> False": (
        "zip(strict=) of the two score lists: their lengths were compared on entry"
    ),
    "reward/agreement:agreement_report:constant:True -> False #2": (
        "zip(strict=) of predictions and references: their lengths were compared on entry"
    ),
    "reward/agreement:agreement_report:boolean:predictions is not None and references is not None"
    " -> predictions is not None or references is not None": (
        "both or neither was checked on entry, so `and` and `or` agree"
    ),
    "reward/canon:values_close:boolean:math.isinf(a) or math.isinf(b) -> math.isinf(a) and math.isinf(b)": (
        "math.isclose is already False when exactly one side is infinite (equal infinities returned above)"
    ),
    "reward/canon:_rows_close:constant:True -> False": (
        "zip(strict=): the rows compared always have one arity (checked by the callers, or same skeleton)"
    ),
    "reward/canon:_matches:boolean:exact == len(pred_rows) or exact == ref_counts.total()"
    " -> exact == len(pred_rows) and exact == ref_counts.total()": (
        "a shortcut: when either side has no row left, the tolerant pass pairs nothing"
    ),
    "reward/canon:row_overlap:constant:1.0 -> 2.0 #2": (
        "union 0 means both results empty, and equal rows already returned 1.0: unreachable"
    ),
    "train/losses:<constants>:constant:20.0 -> 40.0": (
        "the ±20 clamp of δ in k3: any |δ| > 12 already saturates the ±10 value clamp (value 10, gradient 0)"
    ),
    "reward/datamind:length_reward:comparison:n_tokens <= l_min -> n_tokens < l_min": (
        "r_length is continuous: at l = l_min the linear part is (l_max − l_min)/(l_max − l_min)·0.5 + 0.5 = 1"
    ),
    "reward/datamind:length_reward:comparison:n_tokens <= l_max -> n_tokens < l_max": (
        "r_length is continuous: at l = l_max the linear part is 0·0.5 + 0.5 = 0.5, the value beyond"
    ),
    "reward/datamind:composite_reward:arithmetic:r_length * r_answer -> r_length / r_answer": (
        "the branch runs only when r_answer == 1"
    ),
    "eval/metrics:pass_at_k:arithmetic:n - c -> n + c": (
        "the n − c < k shortcut is an optimization: without it the product has the factor 1 − k/k = 0"
    ),
    "compare/tables:values_equal:boolean:a is None or b is None -> a is None and b is None": (
        "both None returned above; then `a == b` is False for None against any normalized cell (int, float, str)"
    ),
    "compare/tables:_vectors_match:constant:True -> False": (
        "zip(strict=) of two vectors whose lengths were compared on entry (sorting keeps lengths)"
    ),
    "compare/tables:compare_tables:constant:True -> False #2": (
        "zip(strict=) of gold names and gold columns: as_columns gives one name per column"
    ),
    "compare/matchers:_match_list:constant:True -> False": (
        "zip(strict=) of predicted and reference items in order: their lengths were compared just above"
    ),
    "env/tokens:TokenBridge._cut_at_stop:constant:1 -> 2 #2": (
        "range(1, len(ids) + 2): the extra k = len + 1 slices the whole list as k = len does, and the loop "
        "has returned by then (the whole decoded text contains the stop string)"
    ),
}


# ----------------------------------------------------------------------------------------------- mutants


@dataclass
class Mutant:
    """One mutant: where, what changed, and its verdict once run."""

    id: str
    module: str
    function: str
    line: int
    operator: str
    before: str
    after: str
    index: int = -1  # position among the AST mutation points of the module (-1: explicit)
    explicit: Explicit | None = None
    status: str = "pending"  # killed | survived | timeout | excluded | stale | error
    seconds: float = 0.0
    reason: str = ""

    def describe(self) -> str:
        return f"{self.function}:{self.line} {self.operator}: `{self.before}` → `{self.after}`"


_CMP_SWAP: dict[type, type] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BIN_SWAP: dict[type, type] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Pow: ast.Mult,
    ast.Mod: ast.FloorDiv,
}
_CALL_SWAP = {"min": "max", "max": "min", "any": "all", "all": "any"}
_OP_TEXT = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Pow: "**",
    ast.Mod: "%",
}


def _changed_constant(value: object) -> object | None:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2 if value != 0 else 1.0
    return None


def _is_boolean(node: ast.expr) -> bool:
    if isinstance(node, ast.Compare | ast.BoolOp):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return True
    if isinstance(node, ast.Constant) and isinstance(node.value, bool):
        return True
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"bool", "all", "any", "isinstance"}
    )


def _silent_nodes(fn: ast.AST) -> set[int]:
    """Nodes whose mutation only changes a message: raise statements, f-strings, the docstring."""
    out: set[int] = set()
    body = getattr(fn, "body", [])
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        out.update(id(n) for n in ast.walk(body[0]))
    for node in ast.walk(fn):
        if isinstance(node, ast.Raise | ast.JoinedStr):
            out.update(id(n) for n in ast.walk(node))
        if (  # logging calls only change what is logged
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in {"log", "logger", "logging"}
        ):
            out.update(id(n) for n in ast.walk(node))
    return out


def _function_nodes(tree: ast.Module) -> dict[str, ast.AST]:
    found: dict[str, ast.AST] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                found[prefix + child.name] = child
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")

    visit(tree, "")
    constants = [
        stmt
        for stmt in tree.body
        if isinstance(stmt, ast.Assign | ast.AnnAssign)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, int | float)
    ]
    if constants:
        found["<constants>"] = ast.Module(body=constants, type_ignores=[])  # type: ignore[arg-type]
    return found


def _points(tree: ast.Module, functions: tuple[str, ...]) -> Iterator[tuple[str, ast.AST, str, int]]:
    """Mutation points in source order: ``(function, node, operator, slot)``."""
    nodes = _function_nodes(tree)
    for name in functions:
        fn = nodes.get(name)
        if fn is None:
            continue
        silent = _silent_nodes(fn)
        scope: list[ast.AST] = [fn]
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            scope = [*fn.args.defaults, *[d for d in fn.args.kw_defaults if d is not None], *fn.body]
            silent.update(id(n) for d in fn.decorator_list for n in ast.walk(d))
        walked: list[ast.AST] = []
        for part in scope:
            walked.extend(ast.walk(part))
        walked.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
        for node in walked:
            if id(node) in silent:
                continue
            if isinstance(node, ast.Compare):
                for k, op in enumerate(node.ops):
                    if type(op) in _CMP_SWAP:
                        yield name, node, "comparison", k
            elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _BIN_SWAP:
                yield name, node, "arithmetic", 0
            elif isinstance(node, ast.BoolOp):
                yield name, node, "boolean", 0
            elif isinstance(node, ast.Constant) and _changed_constant(node.value) is not None:
                yield name, node, "constant", 0
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not | ast.USub):
                if not (isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)):
                    yield name, node, "unary", 0
            elif (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALL_SWAP
            ):
                yield name, node, "call", 0
            if isinstance(node, ast.Return) and node.value is not None and _is_boolean(node.value):
                yield name, node, "return", 0


def _apply(node: ast.AST, operator: str, slot: int) -> ast.AST:
    """Mutate ``node`` in place (or return the node that replaces it, for the unary operator)."""
    if operator == "comparison":
        node.ops[slot] = _CMP_SWAP[type(node.ops[slot])]()  # type: ignore[attr-defined]
    elif operator == "arithmetic":
        node.op = _BIN_SWAP[type(node.op)]()  # type: ignore[attr-defined]
    elif operator == "boolean":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()  # type: ignore[attr-defined]
    elif operator == "constant":
        node.value = _changed_constant(node.value)  # type: ignore[attr-defined]
    elif operator == "call":
        node.func.id = _CALL_SWAP[node.func.id]  # type: ignore[attr-defined]
    elif operator == "return":
        node.value = ast.UnaryOp(op=ast.Not(), operand=node.value)  # type: ignore[attr-defined]
    elif operator == "unary":
        return node.operand  # type: ignore[attr-defined]
    return node


def _replace_child(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for fname, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, fname, new)
            return
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is old:
                    value[i] = new
                    return


def _show(node: ast.AST) -> str:
    text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= 90 else text[:87] + "..."


def mutated_source(source: str, functions: tuple[str, ...], index: int) -> str:
    """The module's source with its ``index``-th mutation point mutated (re-parsed each time: pure)."""
    tree = ast.parse(source)
    parents = {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
    for i, (_, node, operator, slot) in enumerate(_points(tree, functions)):
        if i == index:
            new = _apply(node, operator, slot)
            if new is not node:
                _replace_child(parents[id(node)], node, new)
            return ast.unparse(tree) + "\n"
    raise IndexError(index)


def list_mutants(target: Target, source: str) -> tuple[list[Mutant], list[str]]:
    """The mutants of one module (AST ones then explicit ones) and the named functions not found."""
    tree = ast.parse(source)
    present = _function_nodes(tree)
    missing = [f for f in target.functions if f not in present]
    mutants: list[Mutant] = []
    seen: dict[str, int] = {}
    for i, (fn, node, operator, slot) in enumerate(_points(tree, target.functions)):
        shown = node.value if isinstance(node, ast.Return) else node  # type: ignore[attr-defined]
        before = _show(shown)
        changed = copy.deepcopy(node)
        changed = _apply(changed, operator, slot)
        after = _show(changed.value if isinstance(changed, ast.Return) else changed)  # type: ignore[attr-defined]
        key = f"{target.module}:{fn}:{operator}:{before} -> {after}"
        seen[key] = seen.get(key, 0) + 1
        mid = key if seen[key] == 1 else f"{key} #{seen[key]}"
        mutants.append(Mutant(mid, target.module, fn, getattr(node, "lineno", 0), operator, before, after, i))
    for ex in EXPLICIT:
        if ex.module != target.module:
            continue
        count = source.count(ex.old)
        line = source[: source.find(ex.old)].count("\n") + 1 if count == 1 else 0
        m = Mutant(
            f"{target.module}:explicit:{ex.name}", target.module, "explicit", line, "issue 39", ex.old, ex.new
        )
        m.explicit = ex
        if count != 1:
            m.status, m.reason = "stale", f"the text to replace occurs {count} times (code rewritten?)"
        mutants.append(m)
    for m in mutants:
        if m.id in EQUIVALENT:
            m.status, m.reason = "excluded", EQUIVALENT[m.id]
    return mutants, missing


# ----------------------------------------------------------------------------------------------- running


#: The pytest plugins the mapped tests use, loaded by name: autoloading every installed plugin (zarr's
#: imports zarr) costs seconds per mutant.
PLUGINS = ("pytest_asyncio.plugin", "pytest_timeout", "_hypothesis_pytestplugin", "anyio.pytest_plugin")


#: A plugin the workers load: Hypothesis examples derandomized, without a database (no example found for
#: one mutant replayed for the next) and fewer than the suite's 100 per property (``--examples``).
PROFILE_PLUGIN = """from hypothesis import HealthCheck, settings

settings.register_profile(
    "mutation",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    max_examples={examples},
    database=None,
    derandomize=True,
)
"""


def _test_files(tests: tuple[str, ...]) -> list[str]:
    """The test files in the order given, a folder expanded to its ``test_*.py`` files (sorted) minus those
    already named: with ``-x`` the targeted files named first kill most mutants before the folder runs."""
    out: list[str] = []
    for entry in tests:
        path = ROOT / entry
        files = sorted(path.rglob("test_*.py")) if path.is_dir() else [path]
        for f in files:
            rel = f.relative_to(ROOT).as_posix()
            if rel not in out:
                out.append(rel)
    return out


def _pytest_args(tests: tuple[str, ...]) -> list[str]:
    plugins = [a for p in (*PLUGINS, "_mutation_profile") for a in ("-p", p)]
    return [
        *plugins,
        "--hypothesis-profile=mutation",
        "-q",
        "-x",
        "--no-header",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:unraisableexception",  # its gc.collect() calls over torch's heap cost a second per mutant
        "-o",
        "addopts=",
        *_test_files(tests),
    ]


class Worker:
    """One temporary copy of ``src/`` and a way to run the mapped tests against it."""

    def __init__(self, base: Path, n: int, isolation: str, timeout: float, examples: int = 20) -> None:
        self.dir = base / f"worker{n}"
        self.src = self.dir / "src"
        shutil.copytree(
            ROOT / "src", self.src, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
        )
        self.plugins = self.dir / "plugins"
        self.plugins.mkdir()
        (self.plugins / "_mutation_profile.py").write_text(PROFILE_PLUGIN.format(examples=examples))
        self.isolation, self.timeout = isolation, timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None
        self.started = 0.0
        self.current: Mutant | None = None
        self.original: tuple[Path, str] | None = None
        self.log = self.dir / "pytest.log"

    def start(self, mutant: Mutant | None, target: Target, text: str | None) -> None:
        """Write ``text`` as the target module (``None``: unmutated) and start its tests."""
        path = self.src / PACKAGE / f"{target.module}.py"
        if text is not None:
            self.original = (path, path.read_text(encoding="utf-8"))
            path.write_text(text, encoding="utf-8")
        self.current, self.started = mutant, time.monotonic()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join((str(self.src), str(self.plugins))),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        }
        args = _pytest_args(target.tests)
        if self.isolation == "subprocess":
            with self.log.open("wb") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "pytest", *args],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            return
        pid = os.fork()
        if pid == 0:  # child: never returns
            code = 3
            try:
                os.setsid()
                fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.environ.clear()
                os.environ.update(env)
                os.chdir(ROOT)
                sys.dont_write_bytecode = True
                rest = (p for p in sys.path if "datadojo" not in p and p != "")
                sys.path[:] = [str(self.src), str(self.plugins), *rest]
                import pytest

                code = int(pytest.main(args))
            finally:
                os._exit(code)
        self.pid = pid

    def poll(self) -> int | None:
        """The tests' exit status when done, else ``None``; kills them past the timeout (status -9)."""
        if self.proc is not None:
            rc = self.proc.poll()
        else:
            assert self.pid is not None
            done, status = os.waitpid(self.pid, os.WNOHANG)
            rc = os.waitstatus_to_exitcode(status) if done else None
        if rc is None and time.monotonic() - self.started > self.timeout:
            self._kill()
            return -9
        return rc

    def _kill(self) -> None:
        pid = self.proc.pid if self.proc is not None else self.pid
        assert pid is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()
        else:
            os.waitpid(pid, 0)

    def finish(self) -> None:
        """Restore the unmutated module in the copy."""
        if self.original is not None:
            path, text = self.original
            path.write_text(text, encoding="utf-8")
        self.original, self.proc, self.pid, self.current = None, None, None, None

    def abort(self) -> None:
        if self.proc is not None or self.pid is not None:
            self._kill()
        self.finish()

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _preimport() -> None:
    """Import the heavy third-party modules once, before forking (never datadojo itself)."""
    heavy = ("pytest", "hypothesis", "numpy", "pandas", "pyarrow", "torch", "transformers", "accelerate")
    for name in (*heavy, *PLUGINS):
        with contextlib.suppress(Exception):
            __import__(name)


def _run_queue(
    workers: list[Worker], queue: list[tuple[Mutant | None, Target, str | None]], on_done: object
) -> None:
    """Run every item of ``queue`` on the free workers; ``on_done(item, rc, worker)`` after each."""
    pending = list(queue)
    busy: dict[int, tuple[Mutant | None, Target, str | None]] = {}
    while pending or busy:
        for n, w in enumerate(workers):
            if n not in busy and pending:
                item = pending.pop(0)
                w.start(*item)
                busy[n] = item
        time.sleep(0.05)
        for n in list(busy):
            rc = workers[n].poll()
            if rc is not None:
                on_done(busy.pop(n), rc, workers[n])  # type: ignore[operator]
                workers[n].finish()


# ----------------------------------------------------------------------------------------------- report


@dataclass
class ModuleReport:
    module: str
    mutants: list[Mutant] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    baseline_ok: bool = True

    def count(self, *statuses: str) -> int:
        return sum(m.status in statuses for m in self.mutants)

    @property
    def counted(self) -> int:
        return self.count("killed", "timeout", "survived")

    @property
    def killed(self) -> int:
        return self.count("killed", "timeout")

    @property
    def rate(self) -> float | None:
        return self.killed / self.counted if self.counted else None


def _rate(r: float | None) -> str:
    return "n/a" if r is None else f"{100 * r:.1f}%"


def print_report(reports: list[ModuleReport]) -> float | None:
    """Print the per-module table and the survivors; return the overall kill rate."""
    rows = [("module", "mutants", "killed", "survived", "excluded", "stale", "errors", "kill rate")]
    for r in reports:
        rows.append(
            (
                r.module + ("" if r.baseline_ok else " (tests fail unmutated)"),
                str(r.counted),
                str(r.killed),
                str(r.count("survived")),
                str(r.count("excluded")),
                str(r.count("stale")),
                str(r.count("error")),
                _rate(r.rate),
            )
        )
    counted = sum(r.counted for r in reports)
    killed = sum(r.killed for r in reports)
    total_rate = killed / counted if counted else None
    rows.append(
        (
            "total",
            str(counted),
            str(killed),
            str(sum(r.count("survived") for r in reports)),
            str(sum(r.count("excluded") for r in reports)),
            str(sum(r.count("stale") for r in reports)),
            str(sum(r.count("error") for r in reports)),
            _rate(total_rate),
        )
    )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for k, row in enumerate(rows):
        print(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if k == 0 or k == len(rows) - 2:
            print("  ".join("-" * w for w in widths))
    for r in reports:
        survivors = [m for m in r.mutants if m.status in ("survived", "stale", "error")]
        if r.missing:
            print(f"\n{r.module}: named functions not found (stale target list): {', '.join(r.missing)}")
        if survivors:
            print(f"\n{r.module}: survivors")
            for m in survivors:
                extra = f" ({m.reason})" if m.reason else ""
                print(f"  [{m.status}] {m.describe()}{extra}")
                print(f"      id: {m.id}")
    return total_rate


def _write_json(path: Path, reports: list[ModuleReport]) -> None:
    data = [
        {
            "module": r.module,
            "baseline_ok": r.baseline_ok,
            "missing": r.missing,
            "kill_rate": r.rate,
            "mutants": [{k: v for k, v in asdict(m).items() if k != "explicit"} for m in r.mutants],
        }
        for r in reports
    ]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)


# ----------------------------------------------------------------------------------------------- main


def _selected(patterns: list[str]) -> list[Target]:
    if not patterns:
        return list(TARGETS)
    out = [t for t in TARGETS if any(p in t.module for p in patterns)]
    if not out:
        known = ", ".join(t.module for t in TARGETS)
        raise SystemExit(f"--module {patterns}: matches none of {known}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", action="append", default=[], help="substring of a module (repeatable)")
    ap.add_argument("--limit", type=int, default=None, help="run only the first N mutants of each module")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant (default 120)")
    ap.add_argument(
        "--jobs", type=int, default=min(2, os.cpu_count() or 1), help="mutants run at once (default 2)"
    )
    ap.add_argument("--isolation", choices=("fork", "subprocess"), default="fork")
    ap.add_argument("--examples", type=int, default=20, help="Hypothesis examples per property (default 20)")
    ap.add_argument("--list", action="store_true", help="print the mutant set and exit")
    ap.add_argument("--json", type=Path, default=None, help="also write every verdict to this JSON file")
    ap.add_argument("--fail-under", type=float, default=90.0, help="minimum overall kill rate in percent")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each verdict as it comes")
    args = ap.parse_args(argv)

    reports: list[ModuleReport] = []
    sources: dict[str, str] = {}
    for t in _selected(args.module):
        source = (ROOT / "src" / PACKAGE / f"{t.module}.py").read_text(encoding="utf-8")
        sources[t.module] = source
        mutants, missing = list_mutants(t, source)
        if args.limit is not None:
            mutants = mutants[: args.limit]
        reports.append(ModuleReport(t.module, mutants, missing))
    if args.list:
        for r in reports:
            print(f"{r.module}: {len(r.mutants)} mutants" + (f"; missing {r.missing}" if r.missing else ""))
            for m in r.mutants:
                print(f"  {m.describe()}" + (f"  [{m.status}: {m.reason}]" if m.status != "pending" else ""))
        return 0

    targets = {t.module: t for t in TARGETS}
    if args.isolation == "fork":
        _preimport()
        gc.freeze()  # the children's collections skip the parent's objects (and share their pages)
    base = Path(tempfile.mkdtemp(prefix="datadojo-mutation-"))
    workers = [Worker(base, n, args.isolation, args.timeout, args.examples) for n in range(max(1, args.jobs))]
    started = time.monotonic()
    interrupted = False
    try:
        # 1. every module's tests must pass unmutated, else its mutants say nothing
        def baseline_done(item: tuple[Mutant | None, Target, str | None], rc: int, w: Worker) -> None:
            if rc != 0:
                rep = next(r for r in reports if r.module == item[1].module)
                rep.baseline_ok = False
                print(f"{item[1].module}: tests fail on the unmutated code (exit {rc}):\n{w.tail()}")

        # ... as regenerated from its AST: every mutant is ``ast.unparse`` output, so the round trip alone
        # must change nothing, or every mutant would be "killed" by it
        _run_queue(
            workers,
            [(None, targets[r.module], ast.unparse(ast.parse(sources[r.module])) + "\n") for r in reports],
            baseline_done,
        )
        if not all(r.baseline_ok for r in reports):
            print_report(reports)
            return 2

        # 2. the mutants
        queue: list[tuple[Mutant | None, Target, str | None]] = []
        for r in reports:
            t = targets[r.module]
            for m in r.mutants:
                if m.status != "pending":
                    continue
                if m.explicit is not None:
                    text = sources[t.module].replace(m.explicit.old, m.explicit.new)
                else:
                    text = mutated_source(sources[t.module], t.functions, m.index)
                try:
                    compile(text, t.module, "exec")
                except SyntaxError as exc:
                    m.status, m.reason = "error", f"mutant does not compile: {exc}"
                    continue
                queue.append((m, t, text))
        total = len(queue)
        progress = [0]

        def mutant_done(item: tuple[Mutant | None, Target, str | None], rc: int, w: Worker) -> None:
            m = item[0]
            assert m is not None
            m.seconds = round(time.monotonic() - w.started, 2)
            # pytest: 0 all passed, 1 a test failed, 2 interrupted/collection error (an import-time
            # failure is a detected change too); a signal other than our timeout's is a crash the mutant
            # caused. 3 (internal error), 4 (usage) and 5 (no tests) say the check is broken: "error".
            if rc == -9:
                m.status, m.reason = "timeout", f"killed after {args.timeout:.0f}s"
            elif rc == 0:
                m.status = "survived"
            elif rc in (1, 2) or rc < 0:
                m.status = "killed"
            else:
                m.status, m.reason = "error", f"pytest exit {rc}"
            progress[0] += 1
            if progress[0] % 50 == 0:
                print(f"[{time.monotonic() - started:6.0f}s] {progress[0]}/{total} mutants run", flush=True)
            if args.verbose or m.status != "killed":
                print(
                    f"[{time.monotonic() - started:6.0f}s] {m.status:8s} {m.module} {m.describe()}",
                    flush=True,
                )

        print(f"{total} mutants over {len(reports)} module(s), {len(workers)} worker(s)", flush=True)
        try:
            _run_queue(workers, queue, mutant_done)
        except KeyboardInterrupt:
            interrupted = True
    finally:
        for w in workers:
            w.abort()
        shutil.rmtree(base, ignore_errors=True)
    print(f"\nmutation check: {time.monotonic() - started:.0f}s\n")
    if interrupted:
        print("INTERRUPTED: the figures below cover only the mutants run so far\n")
    rate = print_report(reports)
    if args.json is not None:
        _write_json(args.json, reports)
    errors = sum(r.count("error") for r in reports)
    ok = not interrupted and not errors and rate is not None and 100 * rate >= args.fail_under
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

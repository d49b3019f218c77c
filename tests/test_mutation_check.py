"""scripts/mutation_check.py: its operators on a small function, and its lists kept in step with the code.

The check itself runs the tests once per mutant (minutes); these tests only build mutants, never run them.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mc() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_check", ROOT / "scripts" / "mutation_check.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation_check"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


SOURCE = '''
LIMIT = 0.5

def f(a, b, w=2):
    """Docstring 1 is left alone."""
    if a < b and not a:
        raise ValueError(f"bad {a + 1}")
    return min(a, b) * w - 1

def g(x):
    return x == 3
'''


def test_operators_on_a_small_module(mc: ModuleType) -> None:
    target = mc.Target("m", ("<constants>", "f", "g"), ())
    mutants, missing = mc.list_mutants(target, SOURCE)
    assert missing == []
    shown = [(m.function, m.operator, m.before, m.after) for m in mutants]
    assert shown == [
        ("<constants>", "constant", "0.5", "1.0"),
        ("f", "constant", "2", "3"),  # the default w
        ("f", "boolean", "a < b and (not a)", "a < b or not a"),
        ("f", "comparison", "a < b", "a <= b"),
        ("f", "unary", "not a", "a"),
        ("f", "arithmetic", "min(a, b) * w - 1", "min(a, b) * w + 1"),
        ("f", "arithmetic", "min(a, b) * w", "min(a, b) / w"),
        ("f", "call", "min(a, b)", "max(a, b)"),
        ("f", "constant", "1", "2"),
        ("g", "return", "x == 3", "not x == 3"),
        ("g", "comparison", "x == 3", "x != 3"),
        ("g", "constant", "3", "4"),
    ]  # nothing inside the raise (its f-string included) or the docstring
    # each mutant is the source with that one change, and compiles
    namespace: dict[str, object] = {}
    exec(mc.mutated_source(SOURCE, target.functions, 7), namespace)  # min → max
    assert namespace["f"](1, 3) == 5  # max(1, 3) * 2 - 1
    for m in mutants:
        text = mc.mutated_source(SOURCE, target.functions, m.index)
        compile(text, "m", "exec")
        assert ast.dump(ast.parse(text)) != ast.dump(ast.parse(SOURCE))


def test_every_target_exclusion_and_explicit_mutant_matches_the_code(mc: ModuleType) -> None:
    ids: set[str] = set()
    for target in mc.TARGETS:
        path = ROOT / "src" / "datadojo" / f"{target.module}.py"
        mutants, missing = mc.list_mutants(target, path.read_text(encoding="utf-8"))
        ids.update(m.id for m in mutants)
        for test in target.tests:
            assert (ROOT / test).exists(), test
        if target.module.startswith("compare/"):
            continue  # rewritten on another branch: stale names are reported by the script itself
        assert missing == [], (target.module, missing)
        stale = [m.id for m in mutants if m.status == "stale"]
        assert stale == [], stale
    # an exclusion whose mutant no longer exists would hide nothing and mislead the reader
    assert set(mc.EQUIVALENT) <= ids, set(mc.EQUIVALENT) - ids


def test_the_working_tree_is_never_written(mc: ModuleType, tmp_path: Path) -> None:
    # a worker copies src/ and writes mutants into the copy only
    worker = mc.Worker(tmp_path, 0, "subprocess", 10.0)
    assert worker.src != ROOT / "src" and (worker.src / "datadojo" / "eval" / "metrics.py").exists()
    assert tmp_path in worker.src.parents

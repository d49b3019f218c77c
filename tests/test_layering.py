"""Package layering: the import graph between DataDojo's packages has no cycle, and every module imports.

A package here is ``datadojo.X`` (a sub-package, or a top-level module such as ``datadojo.types``). Every
``import`` counts, also those inside functions or under ``TYPE_CHECKING``: a cycle broken only by a late
import is still a cycle in the design. The one exception is a compatibility alias (a module whose body
sets ``sys.modules[__name__]`` to the module that replaced it): it keeps an old path importable for code
written before a move and adds no dependency of its own; :data:`ALIASES` lists them so they stay visible.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = SRC / "datadojo"

# Old paths kept importable after a move: none (the aliases were deleted with their last user, issue 23).
ALIASES: set[str] = set()

# Cycles not yet broken, each with the reason; the test fails if one disappears, so the list only shrinks.
KNOWN_CYCLES: set[frozenset[str]] = set()


@functools.cache
def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _imports(module: str, path: Path) -> set[str]:
    """The DataDojo modules ``module`` imports; ``from P import n`` names ``P.n`` when that is a module."""
    is_pkg = path.name == "__init__.py"
    here = module.split(".") if is_pkg else module.split(".")[:-1]
    modules = _modules()
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
            elif node.module:
                base = node.module
            else:
                continue
            for a in node.names:
                found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
    return {name for name in found if name == "datadojo" or name.startswith("datadojo.")}


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in _modules().items():
        if module in ALIASES:
            assert "sys.modules[__name__]" in path.read_text(encoding="utf-8"), (
                f"{module} is no longer an alias"
            )
            continue
        for target in _imports(module, path):
            a, b = _package(module), _package(target)
            if a != b and a != "datadojo" and b != "datadojo":
                graph[a].add(b)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one package (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(graph) | {w for ws in graph.values() for w in ws}):
        if v not in index:
            visit(v)
    return out


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _assert_only_known_cycles(
    graph: dict[str, set[str]], known: set[frozenset[str]], what: str, fix: str
) -> None:
    """No cycle in ``graph`` but the ``known`` ones, and every known one still there (the list only shrinks)."""
    found = {frozenset(c) for c in _cycles(graph)}
    new, gone = found - known, known - found
    assert not new, f"{what} cycles: {[sorted(c) for c in new]} ({fix}; docs/architecture.md)"
    assert not gone, f"{what} cycles now broken, remove them from the known list: {[sorted(c) for c in gone]}"


def test_no_cycle_between_packages() -> None:
    _assert_only_known_cycles(package_graph(), KNOWN_CYCLES, "package", "move the shared code down")


def test_compare_is_a_leaf() -> None:
    graph = package_graph()
    assert graph["compare"] <= {"types", "protocol", "errors", "config", "jsonl", "llm"}
    assert "protocol" not in graph["types"] and not graph["protocol"] - {"types", "errors", "registry"}
    # fs removes a killed writer's stale temporary files through tmpfiles, itself a leaf (stdlib only)
    assert not (graph["errors"] | graph["fs"] | graph["registry"] | graph["lazy"] | graph["config"]) - {
        "errors",
        "tmpfiles",
    }
    assert not graph.get("tmpfiles", set())


def test_every_module_imports_in_a_fresh_interpreter() -> None:
    names = [m for m in _modules() if not m.endswith("__main__")]
    code = "import importlib, sys\nfor n in sys.argv[1:]:\n    importlib.import_module(n)\n"
    proc = subprocess.run(
        [sys.executable, "-c", code, *names],
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


# --- modules ----------------------------------------------------------------------------------------------
#
# The same rule one level down: no cycle between *modules* anywhere in ``src/datadojo`` (imports inside
# functions and under ``TYPE_CHECKING`` count). An import names the module it reads from: ``from
# datadojo.bench import registry`` is an edge to ``datadojo.bench.registry``, ``from datadojo.bench import
# Benchmark`` one to the package ``datadojo.bench`` (its ``__init__``); the parent packages Python runs
# first are not edges. Aliases (:data:`ALIASES`) count here: importing an old path imports the new one.

# Module cycles not yet broken, each with the reason (none today); the list only shrinks.
KNOWN_MODULE_CYCLES: set[frozenset[str]] = set()


def module_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in _modules().items():
        graph[module].update(t for t in _imports(module, path) if t != module)
    return graph


def test_module_imports_name_submodules(tmp_path: Path) -> None:
    code = (
        "from typing import TYPE_CHECKING\n"
        "from datadojo.bench import registry, Benchmark\n"
        "from . import base\n"
        "from .spider import BIRD\n"
        "if TYPE_CHECKING:\n"
        "    import datadojo.eval.harness\n"
        "def f():\n"
        "    from datadojo.compare import text\n"
    )
    (tmp_path / "x.py").write_text(code, encoding="utf-8")
    assert _imports("datadojo.bench.x", tmp_path / "x.py") == {
        "datadojo.bench.registry",
        "datadojo.bench",
        "datadojo.bench.base",
        "datadojo.bench.spider",
        "datadojo.eval.harness",
        "datadojo.compare.text",
    }


def test_no_cycle_between_modules() -> None:
    fix = "move the shared type to the module that owns it, or to a module of its own that both import"
    _assert_only_known_cycles(module_graph(), KNOWN_MODULE_CYCLES, "module", fix)


def test_bench_layers() -> None:
    """``download`` (mechanics, types) ← benchmark modules ← ``registry`` ← the package ``__init__``."""
    graph = module_graph()
    bench = {m for m in _modules() if m.startswith("datadojo.bench.")}
    above = graph["datadojo.bench.download"] & (bench | {"datadojo.bench"})
    assert not above, (
        f"datadojo.bench.download imports {sorted(above)}: the mechanics sit below the benchmarks"
    )
    users = {m for m in graph if "datadojo.bench.registry" in graph[m] and m.startswith("datadojo.bench")}
    assert users == {"datadojo.bench"}, f"bench modules that look benchmarks up by name: {sorted(users)}"

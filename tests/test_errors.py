"""One error root: every exception class DataDojo defines derives from :class:`datadojo.errors.DataDojoError`.

The CLI turns a ``DataDojoError`` into one ``error: …`` line and lets anything else show its traceback
(``docs/architecture.md``, "Errors"), so an error class outside the root would surface to users as a crash.
Private classes (``_Name``) never leave their module, and control-flow signals are listed with their reason.
"""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import pytest

from datadojo.errors import DataDojoError

SRC = Path(__file__).resolve().parents[1] / "src"

# Exceptions that are signals inside one stage, never shown to a user.
CONTROL_FLOW = {
    "datadojo.synth.envlunch.environment.NoAction": "an empty action pool ends a trajectory early (EnvLunch §3)",
}


def _exception_classes() -> list[tuple[str, str]]:
    """(module, class) for every public top-level class whose bases look like an exception."""
    builtin_exc = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
                   and issubclass(getattr(builtins, n), BaseException)}  # fmt: skip
    found = []
    for path in sorted((SRC / "datadojo").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        module = ".".join(parts)
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
            if bases & builtin_exc or any(b.endswith(("Error", "Exception", "Unavailable")) for b in bases):
                found.append((module, node.name))
    return found


CLASSES = _exception_classes()


def test_the_scan_finds_the_known_roots() -> None:
    names = {c for _, c in CLASSES}
    assert {"JsonlError", "SandboxError", "LLMError", "BenchmarkError", "ExecutorError"} <= names


@pytest.mark.parametrize(("module", "name"), CLASSES, ids=[f"{m}.{c}" for m, c in CLASSES])
def test_error_class_derives_from_the_root(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        pytest.skip(f"{module}.{name} is not an exception class")
    if f"{module}.{name}" in CONTROL_FLOW:
        assert not issubclass(cls, DataDojoError), "a control-flow signal must not be caught as a user error"
        return
    assert issubclass(cls, DataDojoError), (
        f"{module}.{name} does not derive from datadojo.errors.DataDojoError: the CLI would show it as a "
        "crash; add the root (keeping its built-in base), or list it in CONTROL_FLOW with the reason"
    )

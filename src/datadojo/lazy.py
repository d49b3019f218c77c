"""Lazy package attributes: ``from datadojo.train import RLTrainer`` without importing torch up front.

A package ``__init__`` that re-exports names from heavy submodules calls :func:`lazy_exports` once; the
returned ``__getattr__`` / ``__dir__`` import the submodule on first access (PEP 562) and cache the value
in the package's namespace, so later accesses cost nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``where`` maps each exported name to its submodule."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace.get("__all__", ())) | set(where))

    return __getattr__, __dir__

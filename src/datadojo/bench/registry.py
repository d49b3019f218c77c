"""Benchmarks by name: ``get_benchmark("spider")``, ``benchmark_names()``, ``register_benchmark(...)``.

A registry rather than an import per benchmark so that the CLI, the reward (a task whose ``source`` names
a benchmark is scored by that benchmark's rule) and user code find benchmarks the same way, and a user
can add one without touching DataDojo.
"""

from __future__ import annotations

from collections.abc import Callable

from datadojo.bench.base import Benchmark

__all__ = ["benchmark_names", "get_benchmark", "register_benchmark"]

_FACTORIES: dict[str, Callable[[], Benchmark]] = {}
_INSTANCES: dict[str, Benchmark] = {}


def register_benchmark(name: str, factory: Callable[[], Benchmark], *, replace: bool = False) -> None:
    """Make ``factory()`` available as ``name`` (a name already taken needs ``replace=True``)."""
    key = name.lower()
    if key in _FACTORIES and not replace:
        raise ValueError(f"benchmark {name!r} is already registered")
    _FACTORIES[key] = factory
    _INSTANCES.pop(key, None)


def benchmark_names() -> list[str]:
    """Registered benchmark names, sorted."""
    return sorted(_FACTORIES)


def get_benchmark(name: str) -> Benchmark:
    """The benchmark registered as ``name`` (case-insensitive; one shared instance per name)."""
    key = name.lower()
    if key not in _FACTORIES:
        raise KeyError(f"unknown benchmark {name!r}; known: {', '.join(benchmark_names())}")
    if key not in _INSTANCES:
        _INSTANCES[key] = _FACTORIES[key]()
    return _INSTANCES[key]


def _register_builtins() -> None:
    from datadojo.bench.dabench import DABench
    from datadojo.bench.databench import DataBench
    from datadojo.bench.qrdata import QRData
    from datadojo.bench.spider import BIRD, Spider
    from datadojo.bench.tablebench import TableBench

    for cls in (DABench, TableBench, DataBench, Spider, BIRD, QRData):
        register_benchmark(cls.name, cls)


_register_builtins()

"""Benchmarks by name: ``get_benchmark("spider")``, ``benchmark_names()``, ``register_benchmark(...)``.

A registry rather than an import per benchmark so that the CLI, the reward (a task whose ``source`` names
a benchmark is scored by that benchmark's rule) and user code find benchmarks the same way, and a user
can add one without touching DataDojo.

Download sources (``datadojo bench download``) are not listed here: each benchmark declares its own
beside its loader (:attr:`Benchmark.source <datadojo.bench.base.Benchmark.source>`), and
:func:`get_source` asks the benchmark. :func:`register_source` sets a source by hand (a benchmark that
declares none, or ``replace=True`` to override one). Imports go one way: ``download`` (mechanics, types)
← the benchmark modules ← this registry; the registry hands :func:`get_source` to
:func:`datadojo.bench.download.set_source_lookup` so that ``download_benchmark(name)`` finds sources
without importing it.
"""

from __future__ import annotations

from collections.abc import Callable

from datadojo.bench.base import Benchmark
from datadojo.bench.dabench import DABench
from datadojo.bench.dabstep import DABstep
from datadojo.bench.dacode import DACode
from datadojo.bench.databench import DataBench
from datadojo.bench.download import BenchSource, set_source_lookup
from datadojo.bench.kramabench import KramaBench
from datadojo.bench.qrdata import QRData
from datadojo.bench.scidata import SciData
from datadojo.bench.shopsql import ShopSQL
from datadojo.bench.spider import BIRD, Spider
from datadojo.bench.spider2 import Spider2Lite
from datadojo.bench.tablebench import TableBench
from datadojo.bench.tasks import OwnTasks
from datadojo.errors import UnknownNameError
from datadojo.registry import Registry

__all__ = [
    "benchmark_names",
    "get_benchmark",
    "get_source",
    "register_benchmark",
    "register_source",
    "source_names",
]

_FACTORIES: Registry[Callable[[], Benchmark]] = Registry("benchmark")
_INSTANCES: dict[str, Benchmark] = {}


def register_benchmark(name: str, factory: Callable[[], Benchmark], *, replace: bool = False) -> None:
    """Make ``factory()`` available as ``name`` (a name already taken needs ``replace=True``)."""
    _FACTORIES.register(name, factory, replace=replace)
    _INSTANCES.pop(_FACTORIES.key(name), None)


def benchmark_names() -> list[str]:
    """Registered benchmark names, sorted."""
    return _FACTORIES.names()


def get_benchmark(name: str) -> Benchmark:
    """The benchmark registered as ``name`` (case-insensitive; one shared instance per name)."""
    factory = _FACTORIES.get(name)
    key = _FACTORIES.key(name)
    if key not in _INSTANCES:
        _INSTANCES[key] = factory()
    return _INSTANCES[key]


def _register_builtins() -> None:
    # ShopSQL is the bundled text-to-SQL set (``datadojo demo``)
    # OwnTasks (``tasks``) is a user's own task file, scored with the tolerant matcher
    for cls in (DABench, TableBench, DataBench, Spider, BIRD, QRData, SciData, ShopSQL, OwnTasks, DABstep,
                Spider2Lite, KramaBench, DACode):  # fmt: skip
        register_benchmark(cls.name, cls)


_register_builtins()


# --- download sources (``datadojo bench download``) ------------------------------------------------------

_SOURCES: Registry[BenchSource] = Registry("download source")  # set by hand, over the benchmarks' own


def _declared_source(name: str) -> BenchSource | None:
    """The source benchmark ``name`` declares (``None``: no such benchmark, or it declares none)."""
    return get_benchmark(name).source if name in _FACTORIES else None


def register_source(source: BenchSource, *, replace: bool = False) -> None:
    """Make ``source`` the download source of benchmark ``source.name`` (``replace=True`` to change one,
    also one the benchmark declares itself)."""
    declared = _declared_source(source.name)
    if not replace and declared is not None and declared is not source:
        raise ValueError(f"a download source named {source.name!r} is already registered; pass replace=True")
    _SOURCES.register(source.name, source, replace=replace)


def source_names() -> list[str]:
    """Benchmarks with a download source, sorted."""
    declared = [n for n in benchmark_names() if _declared_source(n) is not None]
    return sorted(set(declared) | set(_SOURCES.names()))


def get_source(name: str) -> BenchSource:
    """The download source of benchmark ``name``; :class:`UnknownNameError` says which benchmarks have one
    (and, when the benchmark says why it has none, why)."""
    if name in _SOURCES:
        return _SOURCES.get(name)
    source = _declared_source(name)
    if source is not None:
        return source
    why = get_benchmark(name).no_source if name in _FACTORIES else ""
    why = f" ({why})" if why else ""
    raise UnknownNameError(f"no download source for {name!r}{why}; sources: {', '.join(source_names())}")


set_source_lookup(get_source)

"""Benchmarks by name: ``get_benchmark("spider")``, ``benchmark_names()``, ``register_benchmark(...)``.

A registry rather than an import per benchmark so that the CLI, the reward (a task whose ``source`` names
a benchmark is scored by that benchmark's rule) and user code find benchmarks the same way, and a user
can add one without touching DataDojo.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from datadojo.bench.base import Benchmark
from datadojo.errors import UnknownNameError
from datadojo.registry import Registry

if TYPE_CHECKING:
    from datadojo.bench.download import BenchSource

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
    from datadojo.bench.dabench import DABench
    from datadojo.bench.databench import DataBench
    from datadojo.bench.qrdata import QRData
    from datadojo.bench.scidata import SciData
    from datadojo.bench.spider import BIRD, Spider
    from datadojo.bench.tablebench import TableBench

    for cls in (DABench, TableBench, DataBench, Spider, BIRD, QRData, SciData):
        register_benchmark(cls.name, cls)

    from datadojo.bench.shopsql import ShopSQL  # the bundled text-to-SQL set (datadojo demo)

    register_benchmark(ShopSQL.name, ShopSQL)


_register_builtins()


# --- download sources (``datadojo bench download``) ------------------------------------------------------
#
# Configuration, not code: where each benchmark's released files live. A mirror with the same file names
# replaces a source with ``--url`` or ``$DATADOJO_BENCH_URL_<NAME>`` (see :mod:`datadojo.bench.download`).
# No digest is pinned here: DataDojo pins only digests checked against the real files, so the first
# download records its digests in the cache (trust on first use) and ``--sha256 FILE=HEX`` pins one.

_SOURCES: Registry[BenchSource] = Registry("download source")


def register_source(source: BenchSource, *, replace: bool = False) -> None:
    """Make ``source`` the download source of benchmark ``source.name`` (``replace=True`` to change one)."""
    _SOURCES.register(source.name, source, replace=replace)


def source_names() -> list[str]:
    """Benchmarks with a download source, sorted."""
    return _SOURCES.names()


def get_source(name: str) -> BenchSource:
    """The download source of benchmark ``name``; :class:`UnknownNameError` says which benchmarks have one."""
    key = name.lower()
    if key not in _SOURCES:  # the message says why DataBench has none, so not _SOURCES.get's
        why = (
            " (DataBench's test answers are released as test_qa.csv + answers.txt + semantics.txt, not in the "
            "questions.jsonl layout DataDojo reads; see docs/evaluation.md)"
            if key == "databench"
            else ""
        )
        raise UnknownNameError(f"no download source for {name!r}{why}; sources: {', '.join(source_names())}")
    return _SOURCES.get(key)


def _register_builtin_sources() -> None:
    from datadojo.bench.download import BenchSource, RemoteFile, listed_files

    infiagent = "https://raw.githubusercontent.com/InfiAgent/InfiAgent/main/examples/DA-Agent/data"
    for source in (
        BenchSource(
            name="dabench",
            base_url=infiagent,
            files=(RemoteFile("da-dev-questions.jsonl"), RemoteFile("da-dev-labels.jsonl")),
            discover=listed_files("da-dev-questions.jsonl", "file_name", "da-dev-tables/"),
            homepage="https://github.com/InfiAgent/InfiAgent/tree/main/examples/DA-Agent",
            licence="see source",
            note="questions, labels, and the CSV tables the questions name",
        ),
        BenchSource(
            name="tablebench",
            base_url="https://huggingface.co/datasets/Multilingual-Multimodal-NLP/TableBench/resolve/main",
            files=(RemoteFile("TableBench.jsonl"),),
            homepage="https://huggingface.co/datasets/Multilingual-Multimodal-NLP/TableBench",
            licence="CC BY-SA 4.0 (data, as stated by the source)",
        ),
        BenchSource(
            name="spider",
            base_url="https://drive.usercontent.google.com",
            files=(
                RemoteFile(
                    "spider_data.zip",
                    url="https://drive.usercontent.google.com/download?id=1403EGqzIDoHMdQF4c9Bkyl7dZLZ5Wt6J"
                    "&export=download&confirm=t",
                    unpack=True,
                    strip_top=True,
                ),
            ),
            homepage="https://yale-lily.github.io/spider",
            licence="CC BY-SA 4.0",
            note="the official release (Google Drive): dev.json, tables.json, database/",
        ),
        BenchSource(
            name="bird",
            base_url="https://bird-bench.oss-cn-beijing.aliyuncs.com",
            files=(RemoteFile("dev.zip", unpack=True, strip_top=True, nested=("dev_databases.zip",)),),
            homepage="https://bird-bench.github.io/",
            licence="CC BY-SA 4.0",
            note="the dev split: dev.json and dev_databases/",
        ),
        BenchSource(
            name="qrdata",
            base_url="https://raw.githubusercontent.com/xxxiaol/QRData/main/benchmark",
            files=(RemoteFile("QRData.json"),),
            discover=listed_files("QRData.json", "data_files", "data/"),
            homepage="https://github.com/xxxiaol/QRData",
            licence="see source",
            note="QRData.json and the CSV files it names",
        ),
    ):
        register_source(source)


_register_builtin_sources()

"""Benchmarks by name and their download sources: each benchmark declares its own source beside its loader."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from datadojo.bench import registry
from datadojo.bench.dabench import DABench
from datadojo.bench.databench import DataBench
from datadojo.bench.download import BenchSource, RemoteFile
from datadojo.bench.registry import benchmark_names, get_benchmark, get_source, register_source, source_names
from datadojo.bench.spider import BIRD, Spider
from datadojo.errors import UnknownNameError
from datadojo.registry import Registry

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def own_sources(monkeypatch):
    """Sources registered by hand start empty and are dropped after the test."""
    monkeypatch.setattr(registry, "_SOURCES", Registry("download source"))


def test_each_source_is_its_benchmarks_own() -> None:
    with_source = [n for n in benchmark_names() if get_benchmark(n).source is not None]
    assert (
        with_source
        == source_names()
        == ["bird", "dabench", "dabstep", "dacode", "qrdata", "spider", "tablebench"]
    )
    for name in with_source:
        source = get_benchmark(name).source
        assert get_source(name) is source and source.name == name
        assert get_source(name.upper()) is source  # names are case-insensitive
    # Spider and BIRD share a module and a scorer but not a release
    assert Spider.source.files[0].name == "spider_data.zip" and BIRD.source.files[0].nested == (
        "dev_databases.zip",
    )


def test_no_source_errors_name_the_known_ones() -> None:
    known = ", ".join(source_names())
    with pytest.raises(UnknownNameError) as exc:
        get_source("databench")
    assert str(exc.value) == f"no download source for 'databench' ({DataBench.no_source}); sources: {known}"
    with pytest.raises(UnknownNameError) as exc:
        get_source("scidata")  # a benchmark without a source, and without a reason
    assert str(exc.value) == f"no download source for 'scidata'; sources: {known}"
    with pytest.raises(UnknownNameError) as exc:
        get_source("nope")
    assert str(exc.value) == f"no download source for 'nope'; sources: {known}"


def test_register_source_overrides_only_when_asked(own_sources) -> None:
    mine = BenchSource(name="dabench", base_url="http://127.0.0.1:9/mirror", files=(RemoteFile("q.jsonl"),))
    with pytest.raises(ValueError, match="a download source named 'dabench' is already registered"):
        register_source(mine)
    assert get_source("dabench") is DABench.source
    register_source(DABench.source)  # the same source again is no change
    register_source(mine, replace=True)
    assert get_source("DABench") is mine
    # a source for a name with no benchmark (a user's own files) is listed too
    extra = BenchSource(name="extra", base_url="http://127.0.0.1:9", files=(RemoteFile("a.csv"),))
    register_source(extra)
    assert "extra" in source_names() and get_source("extra") is extra
    with pytest.raises(ValueError, match="already registered"):
        register_source(BenchSource(name="extra", base_url="http://127.0.0.1:9", files=()))


def test_the_download_module_finds_sources_by_name_in_a_fresh_interpreter() -> None:
    """Importing ``datadojo.bench.download`` alone runs the package ``__init__``, which loads the registry
    and hands its look-up to the download module: ``download_benchmark(name)`` works with no other import."""
    code = (
        "from datadojo.bench.download import _lookup_source\nprint(_lookup_source('tablebench').base_url)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("TableBench/resolve/main")


def test_every_rule_links_a_section_of_the_rules_doc() -> None:
    # a summary links docs/evaluation.md#<anchor> for the rule in force: the section must exist
    doc = (Path(__file__).resolve().parents[2] / "docs" / "evaluation.md").read_text(encoding="utf-8")
    for name in benchmark_names():
        bench = get_benchmark(name)
        for rule in bench.rules or (bench.rule,):
            assert f'<a id="{rule.anchor}"></a>' in doc, (name, rule.anchor)

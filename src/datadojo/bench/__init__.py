"""Benchmarks: one module per benchmark (loader + official scorer + defaults) and a registry.

* :mod:`~datadojo.bench.dabench` (InfiAgent-DABench), :mod:`~datadojo.bench.tablebench`,
  :mod:`~datadojo.bench.databench` (SemEval-2025 task 8), :mod:`~datadojo.bench.spider` (Spider and
  BIRD), :mod:`~datadojo.bench.qrdata`, :mod:`~datadojo.bench.scidata` (SciDataSailor-Bench Meta/QA);
* :mod:`~datadojo.bench.judged`: benchmarks scored by an LLM judge (verdicts gathered, cached, then scored);
* :mod:`~datadojo.bench.base`: :class:`Benchmark`, :class:`ItemScore`, :class:`BenchmarkDefaults`,
  :class:`ScoringRule` (the named rule every total is computed under);
* :mod:`~datadojo.bench.registry`: benchmarks by name;
* scoring a predictions file (what ``datadojo score`` runs) sits above the benchmarks, in
  :mod:`datadojo.eval.scoring`; answer comparison they share is in :mod:`datadojo.compare`.

``docs/evaluation.md`` ("Scoring rules") states every benchmark's rules and each one's deviations from
the benchmark's own evaluation code.
"""

from datadojo.bench.base import Benchmark, BenchmarkDefaults, BenchmarkError, ItemScore, ScoringRule
from datadojo.bench.registry import benchmark_names, get_benchmark, register_benchmark

__all__ = [
    "Benchmark",
    "BenchmarkDefaults",
    "BenchmarkError",
    "ItemScore",
    "ScoringRule",
    "benchmark_names",
    "get_benchmark",
    "register_benchmark",
]

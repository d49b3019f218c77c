"""Benchmark the corpus stage on real data: scan + filter + profile the Spider databases and DABench tables.

Usage::

    python benchmarks/corpus.py [--data ../shared/data] [--budget 4000] [--tracemalloc]

Prints, for each phase measured in this run, the number of files, wall seconds, files per second and
peak memory: the process's peak resident set size (``ru_maxrss``) and, with ``--tracemalloc``, the peak
of Python allocations during that phase (tracing slows the run, so its timings are reported apart).

Phases: ``scan`` runs :func:`datadojo.corpus.scan_corpus` (sniff, SHA-256, load under the DataMind row
bound, filters, profile text) into a temporary ``corpus.jsonl``; ``rescan`` runs it again on the same
output (everything is skipped: the cost of resuming); ``profile`` calls
:func:`datadojo.corpus.profile_text` on every file (full statistics over up to 10,000 rows per table).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from datadojo.corpus import profile_text, scan_corpus

REPO = Path(__file__).resolve().parents[1]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _measure(name: str, n_files: int, fn: Callable[[], object], trace: bool) -> dict[str, float | str]:
    if trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    fn()
    seconds = time.perf_counter() - t0
    row: dict[str, float | str] = {
        "phase": name,
        "files": n_files,
        "seconds": round(seconds, 2),
        "files_per_s": round(n_files / seconds, 1) if seconds else 0.0,
        "peak_rss_mb": round(_rss_mb(), 1),
    }
    if trace:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        row["peak_py_alloc_mb"] = round(peak / 2**20, 1)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=REPO / ".." / "shared" / "data")
    ap.add_argument("--budget", type=int, default=4000, help="profile text budget (characters)")
    ap.add_argument("--tracemalloc", action="store_true", help="also trace Python allocations (slower)")
    args = ap.parse_args(argv)
    spider = args.data / "spider" / "database"
    dabench = args.data / "dabench" / "da-dev-tables"
    if not spider.is_dir() or not dabench.is_dir():
        print(f"benchmark data absent: need {spider} and {dabench}", file=sys.stderr)
        return 2
    files = sorted(spider.glob("*/*.sqlite")) + sorted(dabench.glob("*.csv"))
    print(
        f"data: {len(list(spider.glob('*/*.sqlite')))} Spider databases, {len(list(dabench.glob('*.csv')))} DABench "
        f"tables ({sum(f.stat().st_size for f in files) / 2**20:.1f} MiB)"
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "corpus.jsonl"
        summary_box: list[object] = []
        rows.append(
            _measure(
                "scan",
                len(files),
                lambda: summary_box.append(scan_corpus([spider, dabench], out)),
                args.tracemalloc,
            )
        )
        summary = summary_box[0]
        rows.append(
            _measure("rescan", len(files), lambda: scan_corpus([spider, dabench], out), args.tracemalloc)
        )
        rows.append(
            _measure(
                "profile", len(files), lambda: [profile_text(f, args.budget) for f in files], args.tracemalloc
            )
        )
    print(f"scan: accepted {summary.accepted_by_kind}, rejected {summary.rejected_by_reason}")  # type: ignore[attr-defined]
    keys = list(rows[0])
    print(" | ".join(keys))
    for r in rows:
        print(" | ".join(str(r[k]) for k in keys))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark the corpus stage on real data: scan + filter + profile the Spider databases and DABench tables.

Usage::

    python benchmarks/corpus.py [--data ../shared/data] [--budget 4000] [--tracemalloc] [--sci-gb 1.0]

Prints, for each phase measured in this run, the number of files, wall seconds, files per second and
peak memory: the process's peak resident set size (``ru_maxrss``) and, with ``--tracemalloc``, the peak
of Python allocations during that phase (tracing slows the run, so its timings are reported apart).

Phases: ``scan`` runs :func:`datadojo.corpus.scan_corpus` (sniff, SHA-256, load under the DataMind row
bound, filters, profile text) into a temporary ``corpus.jsonl``; ``rescan`` runs it again on the same
output (everything is skipped: the cost of resuming); ``profile`` calls
:func:`datadojo.corpus.profile_text` on every file (full statistics over up to 10,000 rows per table).

Scientific folder (issue 29): a folder of generated arrays — CF netCDF, chunked HDF5, ``.npy``, FITS, a
Zarr store and a Parquet dataset — of ``--sci-gb`` GB in all (default 1), and the same folder at 1/100 of
the size. Each is profiled (``profile_text`` of every file) and scanned in a fresh child process, whose
peak RSS is the figure: profiles read bounded samples, so the 100× larger folder must not need more
memory (the ``rss ratio big/small`` line). ``--sci-gb 0`` skips it.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
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


def _hwm_mb() -> float:
    """Peak RSS of this process image (``VmHWM``): unlike ``ru_maxrss``, not inherited from the parent
    across fork + exec (the parent's RSS while it generated the arrays would otherwise count)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return _rss_mb()


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


def make_sci_arrays(root: Path, total_bytes: int) -> int:
    """Write the scientific folder: about ``total_bytes`` of arrays over six formats; returns files."""
    import h5py
    import netCDF4
    import numpy as np

    from datadojo.testing.scifiles import make_fits, make_parquet_dataset, make_zarr_v2

    root.mkdir(parents=True, exist_ok=True)
    share = total_bytes // 10  # netCDF 4 parts, HDF5 4 parts, npy 2 parts
    lat, lon = 180, 360
    n_time = max(1, share // (lat * lon * 4))
    block = np.linspace(250, 310, lat * lon, dtype="f4").reshape(1, lat, lon)
    for i in range(4):
        with netCDF4.Dataset(root / f"tas_{i}.nc", "w") as ds:
            ds.createDimension("time", None)
            ds.createDimension("lat", lat)
            ds.createDimension("lon", lon)
            t = ds.createVariable("time", "f8", ("time",))
            t.units = "days since 2000-01-01"
            t[:] = np.arange(n_time)
            v = ds.createVariable("tas", "f4", ("time", "lat", "lon"), chunksizes=(1, lat, lon))
            v.units = "K"
            v.standard_name = "air_temperature"
            for k in range(0, n_time, 64):
                m = min(64, n_time - k)
                v[k : k + m] = np.repeat(block, m, axis=0)
        with h5py.File(root / f"frames_{i}.h5", "w") as f:
            n = max(1, share // (512 * 512 * 2))
            d = f.create_dataset("entry/data", shape=(n, 512, 512), dtype="u2", chunks=(1, 512, 512))
            d.attrs["units"] = "counts"
            frame = (np.arange(512 * 512, dtype="u2") % 4096).reshape(1, 512, 512)
            for k in range(0, n, 64):
                m = min(64, n - k)
                d[k : k + m] = np.repeat(frame, m, axis=0)
    for i in range(2):
        arr = np.lib.format.open_memmap(
            root / f"cube_{i}.npy", mode="w+", dtype="f4", shape=(share // (1024 * 4), 1024)
        )
        step = 1 << 14
        for k in range(0, arr.shape[0], step):
            arr[k : k + step] = np.float32(k)
        arr.flush()
        del arr
    make_fits(root / "image.fits")
    make_zarr_v2(root / "sst.zarr")
    make_parquet_dataset(root / "obs")
    return 13


def _child(folder: Path, budget: int) -> None:
    """Profile then scan every entry of ``folder`` in this (fresh) process; print JSON figures."""
    from datadojo.corpus.scan import list_corpus_files

    entries = list_corpus_files([folder])
    t0 = time.perf_counter()
    for path, _sn in entries:
        profile_text(path, budget)
    profile_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        t1 = time.perf_counter()
        summary = scan_corpus([folder], Path(tmp) / "c.jsonl")
        scan_s = time.perf_counter() - t1
    print(
        json.dumps(
            {
                "files": len(entries),
                "profile_s": round(profile_s, 2),
                "scan_s": round(scan_s, 2),
                "unreadable": summary.unreadable,
                "peak_rss_mb": round(_hwm_mb(), 1),
            }
        )
    )


def _sci_rows(total_gb: float, budget: int) -> list[dict[str, float | str]]:
    rows: list[dict[str, float | str]] = []
    with tempfile.TemporaryDirectory(dir=None) as tmp:
        figures = {}
        for label, size in (("sci small", int(total_gb * 2**30 / 100)), ("sci big", int(total_gb * 2**30))):
            folder = Path(tmp) / label.replace(" ", "_")
            t0 = time.perf_counter()
            n = make_sci_arrays(folder, size)
            made = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
            print(f"{label}: generated {n} files, {made / 2**30:.2f} GiB in {time.perf_counter() - t0:.1f} s")
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(folder), "--budget", str(budget)],
                check=True,
                capture_output=True,
                text=True,
            )
            fig = json.loads(out.stdout.strip().splitlines()[-1])
            figures[label] = fig
            for phase in ("profile", "scan"):
                secs = fig[f"{phase}_s"]
                rows.append(
                    {
                        "phase": f"{label} {phase}",
                        "files": fig["files"],
                        "seconds": secs,
                        "files_per_s": round(fig["files"] / secs, 1) if secs else 0.0,
                        "peak_rss_mb": fig["peak_rss_mb"],
                        "gib": round(made / 2**30, 3),
                    }
                )
            shutil.rmtree(folder)
        ratio = figures["sci big"]["peak_rss_mb"] / figures["sci small"]["peak_rss_mb"]
        print(f"rss ratio big/small (100x the bytes): {ratio:.2f}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=REPO / ".." / "shared" / "data")
    ap.add_argument("--budget", type=int, default=4000, help="profile text budget (characters)")
    ap.add_argument("--tracemalloc", action="store_true", help="also trace Python allocations (slower)")
    ap.add_argument("--sci-gb", type=float, default=1.0, help="size of the scientific folder (0: skip)")
    ap.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        _child(args.child, args.budget)
        return 0
    spider = args.data / "spider" / "database"
    dabench = args.data / "dabench" / "da-dev-tables"
    rows = []
    if not spider.is_dir() or not dabench.is_dir():
        print(f"benchmark data absent: need {spider} and {dabench}", file=sys.stderr)
        return 2
    csvs = sorted(dabench.glob("*.csv"))
    rows.append(
        _measure(
            "csv profile (DABench)", len(csvs), lambda: [profile_text(f, args.budget) for f in csvs], False
        )
    )
    files = sorted(spider.glob("*/*.sqlite")) + sorted(dabench.glob("*.csv"))
    print(
        f"data: {len(list(spider.glob('*/*.sqlite')))} Spider databases, {len(list(dabench.glob('*.csv')))} DABench "
        f"tables ({sum(f.stat().st_size for f in files) / 2**20:.1f} MiB)"
    )
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
    if args.sci_gb > 0:
        rows.extend(_sci_rows(args.sci_gb, args.budget))
    keys = list(dict.fromkeys(k for r in rows for k in r))
    print(" | ".join(keys))
    for r in rows:
        print(" | ".join(str(r.get(k, "")) for k in keys))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

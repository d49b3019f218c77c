"""`synth sailor` throughput: probes expanded per second against the loopback model at 200 ms per request,
sequential vs concurrent exploration of independent (folder, seed) units.

    python benchmarks/synth_sailor.py [--units 4] [--latency 0.2] [--concurrency 4] [--max-nodes 4]

Each unit is one tree (its own persistent sandbox over the folder); a request to the scripted model takes
``--latency`` seconds at the server. Within a unit the search is sequential (each selection depends on the
last back-up), but the probes of one expansion are written concurrently and independent units share nothing
but the model server, so running units concurrently should approach ``concurrency``× the sequential rate.

Printed, measured in this one run: per mode the wall time, probes run (nodes expanded by running their probe),
nodes created (run or still open), LLM requests, probes/s, nodes/s and requests/s, and the ratios concurrent /
sequential (the baseline). Folders: ../shared/data/scirepos when
present, else a small generated one.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from datadojo.llm import load_backend
from datadojo.synth.sailor import SailorConfig, load_seeds, run_sailor
from datadojo.testing.sailor_teacher import FakeSailor
from datadojo.testing.server import ScriptedLLMServer

SCIREPOS = Path(__file__).resolve().parent.parent / ".." / "shared" / "data" / "scirepos"


def _folders(tmp: Path) -> list[Path]:
    if SCIREPOS.is_dir():
        return sorted(p for p in SCIREPOS.iterdir() if p.is_dir())
    root = tmp / "generated"
    (root / "data").mkdir(parents=True)
    (root / "README.md").write_text("# Generated\nA table of 200 measurements.\n")
    rows = "\n".join(f"{i},{i % 7},{i * 0.5}" for i in range(200))
    (root / "data" / "table.csv").write_text("id,group,value\n" + rows + "\n")
    return [root]


async def _run(
    url: str, folders: list[Path], seeds, out: Path, config: SailorConfig, concurrency: int
) -> dict:
    backend = load_backend(f"openai:fake@{url}")
    try:
        t0 = time.perf_counter()
        run = await run_sailor(
            folders, seeds, policy=backend, out=out, config=config, concurrency=concurrency, report=False
        )
        elapsed = time.perf_counter() - t0
    finally:
        await backend.aclose()
    s = run.summary
    return {"elapsed": elapsed, "probes": s["probes_run"], "nodes": s["nodes"], "requests": s["requests"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--units", type=int, default=4, help="(folder, seed) units per mode")
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per request at the loopback server")
    ap.add_argument("--concurrency", type=int, default=4, help="units at once in the concurrent mode")
    ap.add_argument("--max-nodes", type=int, default=4, help="probes per tree")
    args = ap.parse_args()
    config = SailorConfig(
        max_nodes=args.max_nodes, max_depth=2, min_depth=1, trajectories_per_seed=1, k_max=2, logprobs=False
    )
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        folders = _folders(tmp)[:2]
        seeds = load_seeds()[: max(1, args.units // len(folders))]
        n_units = len(folders) * len(seeds)
        results = {}
        with ScriptedLLMServer(FakeSailor(), latency_s=args.latency) as srv:
            for mode, conc in (("sequential", 1), ("concurrent", args.concurrency)):
                results[mode] = asyncio.run(_run(srv.base_url, folders, seeds, tmp / mode, config, conc))
    print(
        f"synth sailor: {n_units} units ({len(folders)} folder(s) x {len(seeds)} seed(s)), "
        f"latency {args.latency * 1000:.0f} ms per request"
    )
    print(
        f"{'mode':<12}{'wall s':>9}{'probes':>8}{'nodes':>7}{'requests':>10}{'probes/s':>10}{'nodes/s':>9}"
        f"{'req/s':>8}"
    )
    for mode, r in results.items():
        print(
            f"{mode:<12}{r['elapsed']:>9.2f}{r['probes']:>8}{r['nodes']:>7}{r['requests']:>10}"
            f"{r['probes'] / r['elapsed']:>10.2f}{r['nodes'] / r['elapsed']:>9.2f}{r['requests'] / r['elapsed']:>8.1f}"
        )
    seq, con = results["sequential"], results["concurrent"]
    ratio = (con["probes"] / con["elapsed"]) / (seq["probes"] / seq["elapsed"])
    node_ratio = (con["nodes"] / con["elapsed"]) / (seq["nodes"] / seq["elapsed"])
    print(
        f"ratio concurrent/sequential: probes/s {ratio:.2f}x, nodes/s {node_ratio:.2f}x "
        f"(concurrency {args.concurrency})"
    )


if __name__ == "__main__":
    main()

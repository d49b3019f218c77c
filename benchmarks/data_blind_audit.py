"""The data-blind audit end to end on the bundled sets, with scripted loopback models and the real sandbox.

Usage::

    python benchmarks/data_blind_audit.py [--limit 20 (0: all)] [--out runs/blind-audit] [--concurrency 2] [--sets dabench spider ...]

For every set found — the repository's examples (``shop-sql`` over ``examples/data/shop.sqlite``, the QA track
of ``examples/scidata_tasks.jsonl``) and the benchmark subsets in ``../shared/data`` (``dabench``,
``databench``, ``spider``, ``tablebench``; a missing one is listed as skipped) — runs ``datadojo eval BENCH
--audit data-blind -n 1 --limit N`` with :class:`datadojo.testing.blind.DataReaderModel`: it lists its
workspace, answers with the gold answer when its files are there and with :func:`question_only_guess`
(yes/no → "Yes", a number stated in the question, "How many X" → ``SELECT count(*) FROM X``, else 0) when
they are not. ``shop-sql`` also runs the oracle agent (gold SQL through the sandbox), whose blind run must
score 0. Prints, per set, the raw and blind pass@1, the data-dependent score, the relative drop, the items
answered without the data and the categories where the blind guess scored.

What it can show: that the audit withholds the data (the reader's raw runs score what its gold lookups
score, its blind runs only what the question-only guess gets), and how many items of each set a trivial
question-only policy answers — a floor of what any model gets without the data. What it cannot show: what a
real model answers blind (priors, memorised public datasets); no real model is available here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from datadojo.bench import get_benchmark
from datadojo.eval.harness import EvalConfig, EvalError, load_eval_tasks, run_eval
from datadojo.llm import load_backend
from datadojo.testing.blind import DataReaderModel
from datadojo.testing.server import ScriptedLLMServer

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"

#: (label, benchmark, data, loader options, agent)
SETS: list[tuple[str, str, Path, dict[str, Any], str]] = [
    ("shop-sql (oracle)", "shop-sql", ROOT / "examples" / "data" / "shop.sqlite", {}, "oracle"),
    ("shop-sql", "shop-sql", ROOT / "examples" / "data" / "shop.sqlite", {}, "model"),
    ("scidata qa", "scidata", ROOT / "examples" / "scidata_tasks.jsonl", {"track": "qa"}, "model"),
    ("dabench", "dabench", SHARED / "dabench", {}, "model"),
    ("databench", "databench", SHARED / "databench", {}, "model"),
    ("spider", "spider", SHARED / "spider", {}, "model"),
    ("tablebench", "tablebench", SHARED / "tablebench", {}, "model"),
]


async def _audit(label: str, bench: str, data: Path, options: dict[str, Any], agent: str, args: Any) -> dict:
    out = Path(args.out) / label.replace(" ", "-").replace("(", "").replace(")", "")
    cfg = EvalConfig(
        bench=bench, data=data, out=out, agent=agent, model="openai:reader" if agent == "model" else None,
        n_trials=1, limit=args.limit, concurrency=args.concurrency, loader_options=options,
        audit="data-blind", seed=0,
    )  # fmt: skip
    t0 = time.perf_counter()
    if agent == "oracle":
        result = await run_eval(cfg)
    else:
        tasks = load_eval_tasks(get_benchmark(bench), data, limit=args.limit, options=options, work_dir=out)
        with ScriptedLLMServer(DataReaderModel(tasks)) as server:
            backend = load_backend(f"openai:reader@{server.base_url}")
            try:
                result = await run_eval(cfg, backend=backend)
            finally:
                await backend.aclose()
    audit = result.summary["audit"]
    return {
        "set": label,
        "tasks": f"{result.summary['n_tasks']} of {result.summary.get('n_tasks_total')}",
        **{
            k: audit["overall"][k]
            for k in ("raw", "blind", "data_dependent", "relative_drop", "answered_blind")
        },
        "blind_categories": {
            c: f"{f['answered_blind']}/{f['n_tasks']}"
            for c, f in audit["per_category"].items()
            if f["answered_blind"]
        },
        "answered_blind_ids": [it["id"] for it in audit["items"] if it["blind_correct"]],
        "seconds": round(time.perf_counter() - t0, 1),
        "out": str(out),
    }


def _pct(v: Any) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--limit", type=int, default=20, help="items per set (the first N; 0: all)")
    p.add_argument("--out", default="runs/blind-audit", help="run folders, one per set")
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--sets", nargs="*", default=[], help="only these sets (shop-sql, scidata, dabench, ...)")
    args = p.parse_args()
    args.limit = args.limit or None
    rows = []
    for label, bench, data, options, agent in SETS:
        if args.sets and label.split()[0] not in args.sets:
            continue
        if not data.exists():
            print(f"skipped {label}: {data} not found")
            continue
        try:
            rows.append(await _audit(label, bench, data, options, agent, args))
        except EvalError as exc:  # e.g. a shared subset whose questions name tables it does not hold
            print(f"skipped {label}: {exc}")
    print(
        f"\n{'set':<20}{'tasks':>12}{'raw':>9}{'blind':>9}{'data-dep':>10}{'drop':>9}{'blind ok':>10}{'s':>7}"
    )
    for r in rows:
        print(
            f"{r['set']:<20}{r['tasks']:>12}{_pct(r['raw']):>9}{_pct(r['blind']):>9}{_pct(r['data_dependent']):>10}"
            f"{_pct(r['relative_drop']):>9}{r['answered_blind']:>10}{r['seconds']:>7}"
        )
    for r in rows:
        if r["blind_categories"]:
            print(
                f"{r['set']}: answered blind by category {json.dumps(r['blind_categories'])}; items {r['answered_blind_ids']}"
            )


if __name__ == "__main__":
    asyncio.run(main())

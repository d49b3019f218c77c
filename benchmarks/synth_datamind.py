"""DataMind synthesis throughput: loopback teacher and judge at a fixed latency, concurrency 32, ≥ 50 files.

    python benchmarks/synth_datamind.py [--files 50] [--concurrency 32] [--latency 0.2] [--n 3]

Runs the real pipeline (:func:`datadojo.synth.datamind.run_pipeline`: corpus scan, query synthesis with
structured output, composition, sampling through the agent runner, the consistency pre-check and judge,
reflection, filters, curation) over ``--files`` generated CSV files. The teacher and the judge are
:class:`~datadojo.testing.server.ScriptedLLMServer` instances in a **separate process**, so the CPU time measured
here is the harness's alone. Every completion takes exactly ``--latency`` seconds at the server; one question
in eight gets differently worded answers, so the judge is asked about those. Episodes answer in one turn and
code cells go to a no-op runner: the figure is the synthesis harness, not sandbox execution.

Per stage it prints requests, wall time, achieved requests/s, the ideal (``concurrency / latency``, the
most a latency-bound client can do) and the ratio, and harness CPU milliseconds per request
(``time.process_time`` of this process over the stage / its requests), with a baseline measured in the
same run: as many bare requests as the query stage sends, through the same client and server, without the
pipeline (so ``pipeline / baseline`` isolates the pipeline's own cost from the machine's). The target is ≥ 80% of ideal for the
stages with at least ``concurrency`` independent requests (queries, sampling); composition chains are
sequential within a chain, so its ideal is bounded by the number of chains in flight and is shown apart.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LATENCY_DEFAULT = 0.2


# --- the scripted models (run in the server process) -----------------------------------------------------


def _script(req: dict[str, Any]) -> str:
    system = req["messages"][0]["content"]
    user = next(m["content"] for m in req["messages"] if m["role"] == "user")
    if system.startswith("You write data-analysis questions"):
        cat = re.search(r"## Task category: (.+)", user).group(1).strip()
        profile_id = re.search(r"f(\d+)\.csv", user).group(1)
        return json.dumps(
            {
                "queries": [
                    {"question": f"For file {profile_id}, what is the {cat.lower()} of v?", "columns": ["v"]}
                ]
            }
        )
    if system.startswith("You compose harder"):
        cat = re.search(r"## Category of the new question: (.+)", user).group(1).strip()
        prev = re.search(r"## Question to build on[^\n]*\n(.+)", user).group(1).strip()
        return json.dumps(
            {
                "question": f"After answering '{prev}', what is the {cat.lower()}?",
                "columns": ["v"],
                "builds_on": "x",
            }
        )
    if system.startswith("You check whether"):
        return json.dumps({"critique": "same value, different wording", "consistent": True, "best": 1})
    sample = int(req.get("seed") or 0) // 1009
    worded = hash(user) % 8 == 0
    answer = ["42", "it is 42", "The value is 42."][sample % 3] if worded else "42"
    return f"<think>The data gives it.</think><answer>{answer}</answer>"


def serve(latency: float) -> None:
    """Server process: start the loopback server, print its URL, run until stdin closes."""
    from datadojo.testing.server import ScriptedLLMServer

    with ScriptedLLMServer(_script, latency_s=latency) as srv:
        print(srv.base_url, flush=True)
        sys.stdin.read()


# --- the benchmark ---------------------------------------------------------------------------------------


class _NoopRunner:
    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> Any:
        from datadojo.sandbox.result import ExecResult

        return ExecResult(output="42\n", status="ok", error=False, timed_out=False, killed=False, truncated=False,
                          isolation="none", duration_s=0.0, installed=[])  # fmt: skip


@contextlib.asynccontextmanager
async def _noop_sandboxes(task: Any):
    yield _NoopRunner()


def _write_files(folder: Path, n: int) -> None:
    for i in range(n):
        rows = ["day,group,v,w"] + [
            f"2024-03-{d % 28 + 1:02d},g{(d + i) % 4},{(d * 7 + i) % 31},{d * 0.5 + i}" for d in range(40)
        ]
        (folder / f"f{i}.csv").write_text("\n".join(rows) + "\n")


async def _bench(args: argparse.Namespace, url: str, root: Path) -> list[dict[str, Any]]:
    from datadojo.llm import load_backend
    from datadojo.synth.datamind import DataMindConfig, DataMindRun
    from datadojo.synth.datamind.pipeline import (
        stage_compose,
        stage_curate,
        stage_judge,
        stage_queries,
        stage_sample,
    )

    cfg = DataMindConfig(
        concurrency=args.concurrency, n_samples=args.n, chains_per_file=1, max_chain=3, rounds=1
    )
    teacher = load_backend(f"openai:teacher@{url}?max_concurrency={args.concurrency}")
    judge = load_backend(f"openai:judge@{url}?max_concurrency={args.concurrency}")
    rows = []
    try:
        # Baseline in the same run: the same number of bare requests as the query stage through the same
        # client and server, no pipeline — what this machine's client stack manages right now.
        n_bare = sum(1 for _ in (root / "data").iterdir()) * 18
        sem = asyncio.Semaphore(args.concurrency)
        msgs = [{"role": "system", "content": "You write data-analysis questions"},
                {"role": "user", "content": "## Task category: Counting\nf0.csv"}]  # fmt: skip

        async def bare() -> None:
            async with sem:
                await teacher.chat(msgs, max_tokens=64)

        c0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(bare() for _ in range(n_bare)))
        rows.append({"stage": "baseline", "requests": n_bare, "wall_s": time.perf_counter() - t0,
                     "cpu_s": time.process_time() - c0})  # fmt: skip
        run = DataMindRun([root / "data"], root / "out", cfg)
        stages = [
            ("queries", lambda: stage_queries(run, teacher), "teacher"),
            ("compose", lambda: stage_compose(run, teacher), "teacher"),
            ("sample", lambda: stage_sample(run, teacher, sandboxes=_noop_sandboxes), "teacher"),
            ("judge", lambda: stage_judge(run, judge), "judge"),
        ]
        for name, call, role in stages:
            c0, t0 = time.process_time(), time.perf_counter()
            summary = await call()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            n = (
                summary["usage"][name]["roles"].get(role, {}).get("requests", 0)
                if name in summary["usage"]
                else 0
            )
            rows.append({"stage": name, "requests": n, "wall_s": wall, "cpu_s": cpu})
        c0, t0 = time.process_time(), time.perf_counter()
        final = stage_curate(run)
        rows.append(
            {
                "stage": "curate",
                "requests": 0,
                "wall_s": time.perf_counter() - t0,
                "cpu_s": time.process_time() - c0,
            }
        )
        rows.append({"summary": final})
    finally:
        await teacher.aclose()
        await judge.aclose()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=50)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency", type=float, default=LATENCY_DEFAULT)
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--serve", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(args.latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "data").mkdir()
            _write_files(root / "data", args.files)
            rows = asyncio.run(_bench(args, url, root))
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    ideal = args.concurrency / args.latency
    summary = rows.pop()["summary"]
    print(f"DataMind synthesis: {args.files} files, concurrency {args.concurrency}, latency {args.latency * 1000:.0f} ms, "
          f"N = {args.n}; ideal {ideal:.0f} requests/s")  # fmt: skip
    print(f"{'stage':<8} {'requests':>8} {'wall s':>8} {'req/s':>8} {'of ideal':>9} {'CPU ms/req':>11}")
    for r in rows:
        rps = r["requests"] / r["wall_s"] if r["wall_s"] > 0 else 0.0
        frac = f"{rps / ideal:8.0%}" if r["requests"] else "       -"
        per = f"{r['cpu_s'] * 1000 / r['requests']:11.2f}" if r["requests"] else f"{r['cpu_s'] * 1000:9.0f}ms"
        print(f"{r['stage']:<8} {r['requests']:>8} {r['wall_s']:>8.2f} {rps:>8.1f} {frac} {per}")
    big = [r for r in rows if r["stage"] in ("queries", "sample")]
    req = sum(r["requests"] for r in big)
    wall = sum(r["wall_s"] for r in big)
    cpu = sum(r["cpu_s"] for r in big)
    base = rows[0]
    base_rps = base["requests"] / base["wall_s"]
    print(f"queries+sample: {req / wall:.1f} requests/s = {req / wall / ideal:.0%} of ideal "
          f"(target >= 80%); harness CPU {cpu * 1000 / req:.2f} ms/request")  # fmt: skip
    print(
        f"bare client baseline (same run): {base_rps:.1f} requests/s = {base_rps / ideal:.0%} of ideal, "
        f"{base['cpu_s'] * 1000 / base['requests']:.2f} ms/request; pipeline / baseline = {req / wall / base_rps:.0%}"
    )
    with contextlib.suppress(OSError):
        print(
            f"load average: {' '.join(f'{x:.1f}' for x in __import__('os').getloadavg())} on {__import__('os').cpu_count()} cores"
        )
    print(f"funnel: {summary['queries']['kept']} queries, {summary['composed']['kept']} composed, "
          f"{summary['sampled']['trajectories']} trajectories, kept {summary['kept']}")  # fmt: skip


if __name__ == "__main__":
    main()

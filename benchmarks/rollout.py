"""Rollout throughput: what one driver core sustains, with the scripted model in a separate process.

    python benchmarks/rollout.py [--tasks 256] [--concurrency 128] [--latency 1.0] [--skip-full]
        [--skip-e2e] [--skip-cold-pool] [--all-levels] [--warm 128] [--cold 16] [--only-e2e]

Every episode has 5 turns (four small code cells, then an answer); every completion takes exactly the
given latency at the server, which runs in its own process (``benchmarks/_loopback.py``), so this
process's CPU time is the harness alone. Printed, all measured in this one run:

1. **harness CPU per turn** (target <= 1.5 x the bare official client's CPU per request): this process's
   CPU seconds / turns, with a no-op code runner (sandbox excluded) and no server latency, at concurrency
   32; beside it the bare ``openai.AsyncOpenAI`` client (same aiohttp transport, ``chat.completions.create``)
   replaying the very request bodies the harness sent, at the same concurrency, CPU per request. Also for
   the httpx transport, and as ratios to a fixed pure-Python yardstick (the machine is shared: ratios hold
   where absolute times drift);
2. **per-turn overhead at concurrency 1** (target <= 5 ms): wall time per turn minus the latency, with
   the no-op runner and with a real persistent sandbox;
3. **full stack** at ``--latency`` x ``--concurrency`` with a real sandbox pool, persistent mode, the
   default pool (``SandboxConfig()``: workers forked from the pool's fork server; target >= 70 % of
   ideal) and beside it one interpreter per sandbox (the baseline); ideal turns/s = concurrency / latency. The pool's
   warm-up (all workers started before timing) is printed separately, with its CPU cost per sandbox. Where
   the rest goes: the driver's CPU split into harness (per turn, from 1.), event-loop lag (how late a 10 ms
   timer fires), GC pauses (``gc.callbacks``), the sandbox processes' own CPU (their process trees, from
   ``/proc/<pid>/stat``), and the rest of the machine (``/proc/stat`` minus both: the model server and
   whatever else runs). ``--all-levels`` adds chunked mode and the fork server at the Landlock level.
   Beside the library path, **end to end**: the ``datadojo rollout`` command itself, a subprocess against
   the same loopback server with ``-j --concurrency --mode persistent`` (the library row's sandbox mode),
   its wall time from launch to exit (interpreter start-up, imports, reachability check and pool warm-up
   included; target >= 80 % of ideal), and the same command with ``?max_concurrency=64`` in the spec (what
   every command got before its concurrency reached the model). ``--skip-e2e`` leaves both out;
   ``--only-e2e`` runs the first alone (nothing else; seconds instead of minutes).

4. **pool warm-up and memory** (``--warm 128 --cold 16``): CPU per sandbox of a pool started cold (today:
   one interpreter and one pandas import per sandbox; at the default level and at Landlock) and of pools
   whose workers are forked from one pre-imported interpreter (``SandboxConfig(fork_server=True)``, under
   bubblewrap and at Landlock; target
   <= 10 % of cold), counted from ``/proc`` over the sandboxes' process trees, the fork server and the
   driver (``benchmarks/_sandbox_cost.py``); then RSS / PSS / USS per live persistent sandbox after a
   pandas cell and how many fit in 16 GiB at that PSS (target >= 512).

Each target gets a one-line verdict (``met`` / ``NOT met``) at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _loopback import TURNS, LoopbackProcess, yardstick_ms
from _sandbox_cost import cpu_s, describe, tree, warm_cost

from datadojo.agent import AgentConfig, run_rollouts
from datadojo.llm import load_backend
from datadojo.sandbox import SandboxConfig, SandboxPool
from datadojo.sandbox.forkserver import fork_level
from datadojo.sandbox.isolation import resolve_isolation
from datadojo.sandbox.result import ExecResult
from datadojo.types import DataFile, Task

REPO = Path(__file__).resolve().parents[1]


class NullRunner:
    """A code runner that answers at once: the harness without sandbox execution."""

    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> ExecResult:
        return ExecResult(
            output="0\n", status="ok", error=False, timed_out=False, killed=False, truncated=False,
            isolation="none", duration_s=0.0, installed=[],
        )  # fmt: skip


@contextlib.asynccontextmanager
async def null_factory(task: Task) -> Any:
    yield NullRunner()


def make_tasks(n: int) -> list[Task]:
    csv = DataFile.from_path(REPO / "examples" / "data" / "sales.csv")
    return [Task(id=f"bench-{i}", question="What is x?", files=[csv]) for i in range(n)]


def model(url: str, concurrency: int, http_client: str | None) -> str:
    opts = f"max_concurrency={concurrency}" + (f"&http_client={http_client}" if http_client else "")
    return f"openai:bench@{url}?{opts}"


async def rollout(tasks: list[Task], spec: str, concurrency: int, sandboxes: Any) -> tuple[Any, float, float]:
    backend = load_backend(spec)
    with tempfile.TemporaryDirectory() as tmp:
        cpu0, t0 = time.process_time(), time.perf_counter()
        summary = await run_rollouts(
            tasks, backend, Path(tmp) / "t.jsonl", config=AgentConfig(max_turns=TURNS),
            concurrency=concurrency, sandboxes=sandboxes,
        )  # fmt: skip
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    await backend.aclose()
    assert summary.stop_reasons.get("answer", 0) == len(tasks), summary.to_dict()
    return summary, cpu, wall


def supports_http_client() -> bool:
    import inspect

    from datadojo.llm.openai_backend import OpenAIBackend

    return "http_client" in inspect.signature(OpenAIBackend.__init__).parameters


BODIES: list[dict[str, Any]] = []


def record_bodies() -> None:
    """Keep a copy of every request body the harness's backend builds (replayed by :func:`bare_client_cpu`)."""
    from datadojo.llm.openai_backend import OpenAIBackend

    original = OpenAIBackend._body

    def body(self: Any, messages: Any, params: Any, n: int) -> dict[str, Any]:
        out = original(self, messages, params, n)
        BODIES.append({**out, "messages": [dict(m) for m in out["messages"]]})
        return out

    OpenAIBackend._body = body  # type: ignore[method-assign]


async def harness_cpu(url: str, tasks: list[Task], http_client: str | None, c: int = 32) -> float:
    await rollout(tasks[:8], model(url, c, http_client), c, null_factory)  # untimed: first-call costs
    best = float("inf")
    for _ in range(2):
        BODIES.clear()
        summary, cpu, _ = await rollout(tasks, model(url, c, http_client), c, null_factory)
        best = min(best, cpu * 1000 / summary.turns)
    return best


async def bare_client_cpu(url: str, bodies: list[dict[str, Any]], c: int = 32, *, raw: bool = False) -> float:
    """CPU ms per request of the official client alone, aiohttp transport, the harness's own bodies:
    ``chat.completions.create`` (typed objects), or with ``raw`` its ``post`` returning the raw response
    parsed with ``json.loads`` (the cheapest the client gets; what the harness's backend does)."""
    import json

    import httpx
    import openai

    client = openai.AsyncOpenAI(
        api_key="bench", base_url=url, max_retries=0, http_client=openai.DefaultAioHttpClient()
    )
    sem = asyncio.Semaphore(c)

    async def one(body: dict[str, Any]) -> None:
        async with sem:
            if raw:
                resp = await client.post("/chat/completions", body=body, cast_to=httpx.Response)
                assert json.loads(resp.content)["choices"][0]["message"]["content"]
            else:
                r = await client.chat.completions.create(**body)
                assert r.choices[0].message.content

    await asyncio.gather(*(one(b) for b in bodies[:40]))  # untimed: first-call costs
    best = float("inf")
    for _ in range(2):
        cpu0 = time.process_time()
        await asyncio.gather(*(one(b) for b in bodies))
        best = min(best, (time.process_time() - cpu0) * 1000 / len(bodies))
    await client.close()
    return best


def pool_cpu_s(pool: SandboxPool) -> float:
    """CPU seconds spent so far by the pool's sandboxes: their process trees (and the fork server's)."""
    server = pool._server
    if server is not None and server.pid:
        return cpu_s(tree(server.pid))
    sandboxes = [*pool._ready, *pool._active]
    return sum(cpu_s(tree(sb._worker.proc.pid)) for sb in sandboxes if sb._worker and sb._worker.proc)


def machine_cpu_s() -> float:
    """CPU seconds the whole machine spent (user+nice+system+irq+softirq) from /proc/stat."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = sum(int(fields[i]) for i in (0, 1, 2, 5, 6))
    return ticks / os.sysconf("SC_CLK_TCK")


class LoopWatch:
    """Event-loop lag (a 10 ms timer's lateness) and GC pauses while it runs."""

    def __init__(self) -> None:
        self.lag_s = 0.0
        self.ticks = 0
        self.gc_s = 0.0
        self._gc_t0 = 0.0
        self._task: asyncio.Task[None] | None = None

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_t0 = time.perf_counter()
        else:
            self.gc_s += time.perf_counter() - self._gc_t0

    async def _tick(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            self.lag_s += max(0.0, time.perf_counter() - t - 0.01)
            self.ticks += 1

    def __enter__(self) -> LoopWatch:
        import gc

        gc.callbacks.append(self._gc)
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        import gc

        gc.callbacks.remove(self._gc)
        if self._task is not None:
            self._task.cancel()


async def overhead_c1(url: str, latency: float, tasks: list[Task], sandboxes: Any) -> float:
    summary, _, wall = await rollout(tasks, model(url, 1, None), 1, sandboxes)
    return (wall / summary.turns - latency) * 1000


async def full_stack(
    url: str, tasks: list[Task], c: int, latency: float, mode: str, isolation: str, fork_server: bool = False
) -> dict:
    config = SandboxConfig(mode=mode, isolation=isolation, fork_server=fork_server)  # type: ignore[arg-type]
    level = (fork_level(isolation) if fork_server else None) or resolve_isolation(isolation)
    pool = SandboxPool(config, size=c)
    cpu0, t0 = time.process_time(), time.perf_counter()
    await pool.start()
    warm_s, warm_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    try:
        m0, s0 = machine_cpu_s(), pool_cpu_s(pool)
        with LoopWatch() as watch:
            summary, drv_cpu, wall = await rollout(
                tasks, model(url, c, None), c, lambda task: pool.session(task.files)
            )
        machine, sandbox_cpu = machine_cpu_s() - m0, pool_cpu_s(pool) - s0
        pool_forked = pool._server is not None
    finally:
        await pool.close()
    ideal = math.ceil(len(tasks) / c) * TURNS * latency
    return {"mode": mode, "level": level, "forked": pool_forked, "wall": wall, "turns_s": summary.turns / wall, "ideal_turns_s": summary.turns / ideal,
            "fraction": ideal / wall, "warm_s": warm_s, "warm_driver_cpu": warm_cpu, "turns": summary.turns,
            "driver_cpu": drv_cpu, "machine_cpu": machine, "lag_s": watch.lag_s, "ticks": watch.ticks,
            "gc_s": watch.gc_s, "sandbox_cpu": sandbox_cpu}  # fmt: skip


def e2e_rollout(url: str, tasks: list[Task], c: int, latency: float, isolation: str, opts: str = "") -> dict:
    """The ``datadojo rollout`` command as a user runs it: a fresh interpreter, the task file on disk, the
    default sandbox pool in persistent mode (the library row's: the command's default is chunked, which
    replays earlier cells); wall time from launch to exit, and the turns from the summary it wrote."""
    with tempfile.TemporaryDirectory() as tmp:
        task_file = Path(tmp) / "tasks.jsonl"
        task_file.write_text("".join(t.model_dump_json() + "\n" for t in tasks), encoding="utf-8")
        spec = f"openai:bench@{url}" + (f"?{opts}" if opts else "")
        cmd = [sys.executable, "-m", "datadojo", "rollout", str(task_file), "--model", spec,
               "--out", str(Path(tmp) / "run"), "-j", str(c), "--max-turns", str(TURNS),
               "--mode", "persistent", "--isolation", isolation]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "200"}
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"rollout command failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        summary = json.loads((Path(tmp) / "run" / "summary.json").read_text(encoding="utf-8"))
    assert summary["stop_reasons"].get("answer", 0) == len(tasks), summary
    ideal = math.ceil(len(tasks) / c) * TURNS * latency
    notes = [line for line in proc.stderr.splitlines() if "max_concurrency" in line]
    return {"wall": wall, "turns": summary["turns"], "turns_s": summary["turns"] / wall,
            "ideal_turns_s": summary["turns"] / ideal, "fraction": ideal / wall,
            "in_run_s": summary["elapsed_s"], "notes": notes}  # fmt: skip


def only_e2e(tasks: list[Task], c: int, latency: float, isolation: str) -> None:
    """``--only-e2e``: the end-to-end row alone, with its verdict (what a change to start-up is judged by)."""
    load0 = os.getloadavg()[0]
    with LoopbackProcess(latency) as url:
        e = e2e_rollout(url, tasks, c, latency, isolation)
    ok = "met" if e["fraction"] >= 0.8 else "NOT met"
    print(f"end to end, `datadojo rollout -j {c} --mode persistent`, {len(tasks)} tasks: {e['turns_s']:.1f} "
          f"turns/s of ideal {e['ideal_turns_s']:.1f} = {e['fraction'] * 100:.0f} % (wall {e['wall']:.1f} s from "
          f"launch to exit, {e['in_run_s']:.1f} s in the rollout itself; load {load0:.1f} -> "
          f"{os.getloadavg()[0]:.1f})\nverdict: end to end >= 80 % of ideal: {ok}")  # fmt: skip


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=128)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--isolation", default="auto", choices=["auto", "bwrap", "none"])
    ap.add_argument("--skip-full", action="store_true", help="skip the full stack (3)")
    ap.add_argument(
        "--skip-e2e", action="store_true", help="in 3, skip the rollout command end to end (a subprocess)"
    )
    ap.add_argument(
        "--skip-cold-pool",
        action="store_true",
        help="in 3, skip the baseline pool of one interpreter per sandbox (--concurrency of them at once: "
        "about 75 MiB PSS each, too much for a small shared machine)",
    )
    ap.add_argument(
        "--all-levels",
        action="store_true",
        help="in 3, also chunked mode and the fork server at the Landlock level",
    )
    ap.add_argument(
        "--warm", type=int, default=128, help="4: sandboxes forked from the fork server (0: skip 4)"
    )
    ap.add_argument("--cold", type=int, default=16, help="4: sandboxes started cold, the baseline")
    ap.add_argument(
        "--only-e2e",
        action="store_true",
        help="only the end-to-end row of 3 (the rollout command, without the ?max_concurrency=64 run)",
    )
    args = ap.parse_args()
    tasks = make_tasks(args.tasks)
    if args.only_e2e:
        only_e2e(tasks, args.concurrency, args.latency, args.isolation)
        return
    y0 = yardstick_ms()
    print(f"rollout benchmark: {TURNS} turns per episode, cores {os.cpu_count()}, load {os.getloadavg()[0]:.1f}, "
          f"python {sys.version.split()[0]}; yardstick {y0:.3f} ms CPU")  # fmt: skip

    verdicts: list[str] = []
    print("\n1. harness CPU per turn (no-op runner, no latency, concurrency 32, server in another process)")
    record_bodies()
    with LoopbackProcess(0.0) as url:
        fast = await harness_cpu(url, tasks[:128], None)
        bodies = list(BODIES)
        bare = await bare_client_cpu(url, bodies)
        bare_raw = await bare_client_cpu(url, bodies, raw=True)
        slow = await harness_cpu(url, tasks[:128], "httpx") if supports_http_client() else None
    y1 = yardstick_ms()
    y = (y0 + y1) / 2
    ratio, ratio_raw = fast / bare, fast / bare_raw
    print(f"   harness, default transport: {fast:.2f} ms/turn = {fast / y:.1f} x yardstick")
    print(f"   bare official client (aiohttp, chat.completions.create, the harness's {len(bodies)} bodies): "
          f"{bare:.2f} ms/request = {bare / y:.1f} x yardstick")  # fmt: skip
    print(f"   bare official client, raw post + json.loads (its cheapest path): {bare_raw:.2f} ms/request "
          f"= {bare_raw / y:.1f} x yardstick")  # fmt: skip
    print(
        f"   ratio harness / bare client: {ratio:.2f} vs create(), {ratio_raw:.2f} vs raw post  (target <= 1.5)"
    )
    if slow is not None:
        print(
            f"   httpx transport:   {slow:.2f} ms/turn = {slow / y:.1f} x yardstick  (default/httpx {fast / slow:.2f})"
        )
    print(f"   yardstick {y0:.3f} -> {y1:.3f} ms during the measurement")
    verdicts.append(f"harness CPU per turn <= 1.5 x bare official client per request (chat.completions.create): "
                    f"{ratio:.2f} -> {'met' if ratio <= 1.5 else 'NOT met'}  (vs its raw post path: {ratio_raw:.2f})")  # fmt: skip

    print("\n2. per-turn overhead at concurrency 1 (latency 50 ms)")
    with LoopbackProcess(0.05) as url:
        null = await overhead_c1(url, 0.05, tasks[:12], null_factory)
        async with SandboxPool(SandboxConfig(mode="persistent", isolation=args.isolation), size=1) as pool:  # type: ignore[arg-type]
            await pool.start()
            real = await overhead_c1(url, 0.05, tasks[:12], lambda task: pool.session(task.files))
    print(
        f"   no-op runner: {null:.2f} ms/turn;  real persistent sandbox: {real:.2f} ms/turn  (target: <= 5 ms)"
    )

    if not args.skip_full:
        c, lat = args.concurrency, args.latency
        print(f"\n3. full stack: {len(tasks)} tasks, latency {lat:g} s, concurrency {c}, real sandbox pool")
        with LoopbackProcess(lat) as url:
            # The default pool first (SandboxConfig(): the fork server, at bubblewrap + Landlock where both
            # work), then one interpreter per sandbox (fork_server=False: what every pool did before, the
            # baseline); with --all-levels also chunked mode and the fork server at the Landlock level.
            default_fork = SandboxConfig().fork_server
            runs = [("persistent", args.isolation, default_fork)]
            if not args.skip_cold_pool:
                runs.append(("persistent", args.isolation, False))
            if args.all_levels:
                runs += [("chunked", args.isolation, default_fork), ("persistent", "landlock", True)]
            results: dict[tuple[str, str, bool], dict] = {}
            for mode, isolation, fork in runs:
                r = await full_stack(url, tasks, c, lat, mode, isolation, fork)
                name = f"{mode}, {r['level']}" + (
                    " + fork server" if r["forked"] else ", one interpreter each"
                )
                default = fork == default_fork and isolation == "auto"
                print(f"   {name:10s}: {r['turns_s']:.1f} turns/s of ideal {r['ideal_turns_s']:.1f} = "
                      f"{r['fraction'] * 100:.0f} % (wall {r['wall']:.1f} s);  pool warm-up {r['warm_s']:.1f} s for "
                      f"{c} sandboxes ({r['warm_s'] / c * 1000:.0f} ms each, driver CPU {r['warm_driver_cpu']:.1f} s)")  # fmt: skip
                cores = os.cpu_count() or 1
                avail = cores * r["wall"]
                harness = fast / 1000 * r["turns"]
                other_drv = max(0.0, r["driver_cpu"] - harness)
                sandbox = r["sandbox_cpu"]
                rest = max(0.0, r["machine_cpu"] - r["driver_cpu"] - sandbox)
                print(f"      where the time goes ({cores} cores x {r['wall']:.1f} s = {avail:.0f} CPU s): "
                      f"harness {harness:.1f} s, other driver CPU (sandbox I/O, pool) {other_drv:.1f} s, "
                      f"sandbox processes {sandbox:.1f} s ({sandbox / r['turns'] * 1000:.1f} ms per turn), "
                      f"rest of the machine (model server, other jobs) {rest:.1f} s, "
                      f"idle {max(0.0, avail - r['machine_cpu']):.1f} s; "
                      f"GC pauses {r['gc_s']:.2f} s; event-loop lag {r['lag_s']:.1f} s over {r['ticks']} ticks "
                      f"({r['lag_s'] / max(1, r['ticks']) * 1000:.1f} ms per 10 ms tick)")  # fmt: skip
                # The fixed latency keeps the episodes in step: each turn is a wave of c replies, c cells and
                # c requests, and one event loop handles every one of them in turn.
                waves = math.ceil(len(tasks) / c) * TURNS
                lost = r["wall"] * (1 - r["fraction"])
                drv_turn = r["driver_cpu"] / r["turns"]
                print(f"      the {lost:.1f} s beyond ideal = {lost / waves * 1000:.0f} ms per wave of {c} turns "
                      f"({waves} waves); the driver's own CPU for one wave: {c} x {drv_turn * 1000:.2f} ms = "
                      f"{c * drv_turn * 1000:.0f} ms (one event loop; busy {r['driver_cpu'] / r['wall'] * 100:.0f} % "
                      f"of the wall, idle while the model works)")  # fmt: skip
                results[(mode, isolation, fork)] = r
                if mode == "persistent" and default:
                    verdicts.append(f"full stack c={c} at {lat:g} s >= 70 % of ideal ({name}, isolation {isolation} "
                                    f"= the default pool): {r['fraction'] * 100:.0f} % -> "
                                    f"{'met' if r['fraction'] >= 0.7 else 'NOT met'}")  # fmt: skip
            base = results.get(("persistent", args.isolation, False))
            best = results.get(("persistent", args.isolation, default_fork))
            if base is not None and best is not None and base is not best:
                print(f"   default pool / one interpreter per sandbox, same run: "
                      f"{best['turns_s'] / base['turns_s']:.2f} x the turns/s")  # fmt: skip
            if not args.skip_e2e:
                for label, opts in (("", ""), (" with ?max_concurrency=64 (before)", "max_concurrency=64")):
                    e = e2e_rollout(url, tasks, c, lat, args.isolation, opts)
                    print(f"   end to end, `datadojo rollout -j {c} --mode persistent`{label}: {e['turns_s']:.1f} turns/s of ideal "
                          f"{e['ideal_turns_s']:.1f} = {e['fraction'] * 100:.0f} % (wall {e['wall']:.1f} s from "
                          f"launch to exit, {e['in_run_s']:.1f} s in the rollout itself)")  # fmt: skip
                    for note in e["notes"]:
                        print(f"      the command said: {note}")
                    if not opts:
                        verdicts.append(f"end to end: the rollout command, c={c} at {lat:g} s, start-up included, "
                                        f">= 80 % of ideal: {e['fraction'] * 100:.0f} % -> "
                                        f"{'met' if e['fraction'] >= 0.8 else 'NOT met'}")  # fmt: skip
        print(f"   (yardstick now {yardstick_ms():.3f} ms)")
    if args.warm:
        print(f"\n4. pool warm-up and memory: {args.cold} sandboxes started cold (today: one interpreter + "
              f"pandas import each), {args.warm} forked from one pre-imported interpreter (fork_server)")  # fmt: skip
        cold_default = await warm_cost("cold (default level)", SandboxConfig(mode="persistent", isolation=args.isolation, fork_server=False), args.cold)  # type: ignore[arg-type]  # fmt: skip
        print(f"   {describe(cold_default)}")
        cold = await warm_cost(
            "cold (landlock)",
            SandboxConfig(mode="persistent", isolation="landlock", fork_server=False),
            args.cold,
        )
        print(f"   {describe(cold)}")
        forked_default = None
        if fork_level(args.isolation) == "bwrap":
            forked_default = await warm_cost(
                "fork server (bwrap + Landlock)",
                SandboxConfig(mode="persistent", isolation=args.isolation, fork_server=True),  # type: ignore[arg-type]
                args.warm,
            )
            print(f"   {describe(forked_default)}")
        forked = await warm_cost(
            "fork server (landlock)",
            SandboxConfig(mode="persistent", isolation="landlock", fork_server=True),
            args.warm,
        )
        print(f"   {describe(forked)}")
        r_same = forked.cpu_per_sandbox_s / cold.cpu_per_sandbox_s
        r_default = forked.cpu_per_sandbox_s / cold_default.cpu_per_sandbox_s
        print(f"   CPU per sandbox, fork server / cold: {r_same:.3f} (same level), {r_default:.3f} "
              f"(vs the default level {cold_default.isolation})")  # fmt: skip
        verdicts.append(f"pool warm-up of {args.warm} from one zygote <= 10 % of today's CPU per sandbox: "
                        f"{r_same * 100:.1f} % of cold {cold.isolation} ({r_default * 100:.1f} % of cold "
                        f"{cold_default.isolation}) -> {'met' if max(r_same, r_default) <= 0.10 else 'NOT met'}")  # fmt: skip
        if forked_default is not None:
            r_bw = forked_default.cpu_per_sandbox_s / cold_default.cpu_per_sandbox_s
            print(f"   CPU per sandbox, fork server under bwrap / cold bwrap: {r_bw:.3f}")
            verdicts.append(f"pool warm-up of {args.warm} from one zygote at the default level (bwrap + fork "
                            f"server) <= 10 % of cold bwrap CPU per sandbox: {r_bw * 100:.1f} % -> "
                            f"{'met' if r_bw <= 0.10 else 'NOT met'}")  # fmt: skip
            verdicts.append(f"live persistent sandboxes at the default level (bwrap + fork server) that fit in "
                            f"16 GiB >= 512: {forked_default.fit_16gib} (PSS {forked_default.pss_mib:.1f} MiB) -> "
                            f"{'met' if forked_default.fit_16gib >= 512 else 'NOT met'}")  # fmt: skip
        verdicts.append(f"live persistent sandboxes after import pandas that fit in 16 GiB >= 512: {forked.fit_16gib} "
                        f"with the fork server (PSS {forked.pss_mib:.1f} MiB, RSS {forked.rss_mib:.1f}, USS "
                        f"{forked.uss_mib:.1f}), {cold_default.fit_16gib} cold -> "
                        f"{'met' if forked.fit_16gib >= 512 else 'NOT met'}")  # fmt: skip
    print(f"\nload average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("\nverdicts:")
    for v in verdicts:
        print(f"   {v}")


if __name__ == "__main__":
    asyncio.run(main())

"""What a warm sandbox costs: CPU to start it and memory while it lives, from ``/proc``.

Used by ``benchmarks/rollout.py`` (step 4). A sandbox is a process tree (bubblewrap, the worker, its
kernel); its CPU is the sum over the tree of ``utime + stime`` (plus what reaped children left in
``cutime + cstime``), read from ``/proc/<pid>/stat`` while the tree is alive, so the machine's other load
does not count. Its memory is the sum over the tree of ``Rss``, ``Pss`` and USS (``Private_Clean +
Private_Dirty``) from ``/proc/<pid>/smaps_rollup``: RSS counts shared pages in full in every sandbox, PSS
splits each shared page between the processes that map it (so the PSS of all sandboxes adds up to what
they take), USS is what one more sandbox adds.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path

from datadojo.sandbox import SandboxConfig, SandboxPool

GIB = 1 << 30
PANDAS_CELL = "import pandas as pd\ndf = pd.DataFrame({'a': range(100), 'b': range(100)})\nprint(df.a.sum())"
_TICK = os.sysconf("SC_CLK_TCK")


def tree(pid: int) -> list[int]:
    """``pid`` and all its live descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                todo += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return out


def cpu_s(pids: list[int]) -> float:
    """CPU seconds the processes spent, with their reaped children."""
    total = 0
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return total / _TICK


def memory_kib(pids: list[int]) -> tuple[int, int, int]:
    """(RSS, PSS, USS) in KiB summed over the processes."""
    rss = pss = uss = 0
    for p in pids:
        try:
            text = Path(f"/proc/{p}/smaps_rollup").read_text()
        except OSError:
            continue
        values = {}
        for line in text.splitlines()[1:]:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                values[key.strip()] = int(parts[0])
        rss += values.get("Rss", 0)
        pss += values.get("Pss", 0)
        uss += values.get("Private_Clean", 0) + values.get("Private_Dirty", 0)
    return rss, pss, uss


@dataclass
class WarmCost:
    """One pool's warm-up and the memory of its live sandboxes (one pandas cell run in each)."""

    label: str
    n: int
    wall_s: float
    cpu_per_sandbox_s: float  # sandbox trees + fork server + the driver's own CPU, over n
    rss_mib: float  # per sandbox
    pss_mib: float  # per sandbox, the fork server's share included
    uss_mib: float  # per sandbox
    isolation: str
    split_s: tuple[float, float, float]  # CPU of the sandbox trees, the fork server, the driver (all n)

    @property
    def fit_16gib(self) -> int:
        """Live sandboxes that fit in 16 GiB at this PSS per sandbox."""
        return int(16 * GIB / (self.pss_mib * 2**20)) if self.pss_mib > 0 else 0


def _pids(pool: SandboxPool) -> list[list[int]]:
    return [tree(sb._worker.proc.pid) for sb in pool._ready if sb._worker and sb._worker.proc]


async def warm_cost(label: str, config: SandboxConfig, n: int) -> WarmCost:
    """Warm ``n`` sandboxes, measure their CPU, run a pandas cell in each, measure their memory."""
    pool = SandboxPool(config, size=n)
    try:
        cpu0, t0 = time.process_time(), time.perf_counter()
        await pool.start()
        wall = time.perf_counter() - t0
        driver = time.process_time() - cpu0
        server = pool._server
        server_pids = tree(server.pid) if server is not None and server.pid else []
        sandboxes = _pids(pool)
        in_trees = {p for t in sandboxes for p in t}
        server_only = [p for p in server_pids if p not in in_trees]
        split = (sum(cpu_s(t) for t in sandboxes), cpu_s(server_only), driver)
        cpu = sum(split)
        ready = list(pool._ready)
        results = await asyncio.gather(*(sb.run(PANDAS_CELL) for sb in ready))
        bad = [r for r in results if r.status != "ok"]
        if bad:
            raise RuntimeError(f"{label}: the pandas cell failed: {bad[0].output[-300:]}")
        mems = [memory_kib(t) for t in _pids(pool)]
        srv = memory_kib(server_only)
        isolation = ready[0].isolation if ready else "?"
    finally:
        await pool.close()
    k = len(mems) or 1
    rss = sum(m[0] for m in mems) / k / 1024
    pss = (sum(m[1] for m in mems) + srv[1]) / k / 1024
    uss = sum(m[2] for m in mems) / k / 1024
    return WarmCost(label, n, wall, cpu / n, rss, pss, uss, isolation, split)


def describe(c: WarmCost) -> str:
    return (
        f"{c.label:28s} {c.n:4d} sandboxes ({c.isolation}): warm-up {c.wall_s:6.1f} s, "
        f"CPU {c.cpu_per_sandbox_s * 1000:6.0f} ms/sandbox (sandboxes {c.split_s[0]:.1f} s, fork server "
        f"{c.split_s[1]:.1f} s, driver {c.split_s[2]:.1f} s); live after a pandas cell: RSS {c.rss_mib:6.1f}, "
        f"PSS {c.pss_mib:6.1f}, USS {c.uss_mib:6.1f} MiB/sandbox -> {c.fit_16gib} fit in 16 GiB (by PSS)"
    )

"""How long ``datadojo demo`` takes, whole command and per stage, against the CLI's start-up in the same run.

Usage::

    python benchmarks/demo.py [--out DIR] [--tasks 12] [--candidates 120] [--repeat 1]

Runs, as a user would, ``datadojo --help`` (the baseline: interpreter and CLI start-up) and then
``datadojo demo`` in child processes, and prints for each the wall seconds, the CPU seconds of the child and
its own children (sandboxes, build workers) and the load average before it; then the demo's stage times
from its ``demo.json`` and the ratio of the demo's wall time to the start-up's. CPU seconds tell what the
run costs on an idle machine when the wall time is inflated by other work on a shared one.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLI = "from datadojo.cli.app import main; main()"


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(args: list[str]) -> dict[str, float]:
    load = os.getloadavg()[0]
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, cwd=REPO)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load_before": round(load, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="demo folder (default: a temporary one)")
    ap.add_argument("--tasks", type=int, default=12)
    ap.add_argument("--candidates", type=int, default=120)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        out = a.out or Path(tmp) / "demo"
        base = _run(["--help"])
        print(f"baseline `datadojo --help`: {base}")
        for i in range(a.repeat):
            run = _run(
                ["demo", "--out", str(out), "--tasks", str(a.tasks), "--candidates", str(a.candidates)]
            )
            demo = json.loads((out / "demo.json").read_text())
            print(f"`datadojo demo` run {i + 1}: {run}; pipeline {demo['seconds']:.2f} s")
            for s in demo["stages"]:
                print(f"  {s['name']:<9} {s['seconds']:6.2f} s  {s['headline']}")
            print(
                f"ratio demo / start-up: wall {run['wall_s'] / base['wall_s']:.1f}x, "
                f"CPU {run['cpu_s'] / max(base['cpu_s'], 1e-9):.1f}x"
            )


if __name__ == "__main__":
    main()

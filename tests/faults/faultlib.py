"""Fault injection: SIGKILL a real ``datadojo`` command at a seeded point, rerun it, compare with a clean run.

A kill point is counted in *file-system operations*, not seconds: the command runs under a small wrapper
that installs a Python audit hook (:func:`sys.addaudithook`) and counts every open-for-writing, rename,
remove, truncate, mkdir and rmtree the main process makes; at the k-th one it SIGKILLs its whole process
group (as ``kill -9 -PGID`` or the OOM killer would). An uninterrupted reference run counts N such
operations; kill points are drawn from ``1..N`` with a seeded RNG, so a failing seed replays exactly
(``DATADOJO_FAULT_SEED``; ``DATADOJO_FAULT_POINTS`` kill points per command, default 1, plus one double kill). No verdict
depends on timing: the kill lands between two operations whatever the machine's speed.

After a kill the append-only JSONL outputs of the command also get a record torn mid-write (the worst
case a kill mid-``write`` can leave), then the same command is run again to completion. The checks
(:meth:`FaultRun.check_clean`): the command's normalized output equals the reference run's, every JSONL
line is a complete record, no key appears twice, and no temporary file is left behind.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

#: The wrapper the command runs under; argv after ``-c`` is the ``datadojo`` command line.
WRAPPER = r"""
import os, signal, sys
KILL_AT = int(os.environ.get("DD_FAULT_KILL_AT", "0"))
COUNT_FILE = os.environ.get("DD_FAULT_COUNT_FILE", "")
MAIN = os.getpid()
EVENTS = {"os.rename", "os.remove", "os.rmdir", "os.truncate", "os.mkdir", "shutil.rmtree"}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
n = 0

def _writes(args):
    mode, flags = args[1], args[2]
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & WRITE_FLAGS)

def _hook(event, args):
    global n
    if os.getpid() != MAIN or not (event in EVENTS or (event == "open" and _writes(args))):
        return
    n += 1
    if n == KILL_AT:
        os.killpg(os.getpgrp(), signal.SIGKILL)

def _report():
    if COUNT_FILE:
        fd = os.open(COUNT_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.write(fd, str(n).encode())
        os.close(fd)

sys.addaudithook(_hook)
import atexit
atexit.register(_report)
sys.argv = ["datadojo", *sys.argv[1:]]
from datadojo.cli.app import main
main()
"""

TORN = b'{"task_id": "torn-by-the-fault-test", "sample": 0, "tu'


def _seed() -> int:
    return int(os.environ.get("DATADOJO_FAULT_SEED", "0"))


def _points() -> int:
    return int(os.environ.get("DATADOJO_FAULT_POINTS", "1"))


def temp_leftovers(root: Path) -> list[Path]:
    """Files or folders under ``root`` that look like an unfinished write (``*.tmp``, ``*.partial``)."""
    out = []
    for p in root.rglob("*"):
        name = p.name
        if name.endswith((".tmp", ".partial")) or ".tmp." in name:
            out.append(p)
    return out


def jsonl_problems(root: Path, key: Callable[[dict[str, Any]], Any] | None = None) -> list[str]:
    """Every torn line, unparsable line or duplicate key in the JSONL files under ``root``."""
    problems = []
    for path in sorted(root.rglob("*.jsonl")):
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            problems.append(f"{path}: unterminated last line")
        seen: set[Any] = set()
        for i, line in enumerate(data.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                problems.append(f"{path}:{i}: not a complete JSON record")
                continue
            if key is not None and isinstance(rec, dict):
                k = key(rec)
                if k is not None and k in seen:
                    problems.append(f"{path}:{i}: duplicate key {k!r}")
                seen.add(k)
    return problems


@dataclass
class FaultRun:
    """One command under fault injection: ``argv`` (after ``datadojo``) writing into ``out``.

    ``normalize(out)`` returns what must be equal between a clean run and an interrupted-then-rerun one
    (drop timings and other per-run fields there). ``appendable`` are the JSONL files, relative to
    ``out``, that the command appends to (they get a torn record after each kill). ``key`` reads a
    record's identity for the duplicate check.
    """

    argv: Callable[[Path], list[str]]
    normalize: Callable[[Path], Any]
    appendable: Iterable[str] = ()
    key: Callable[[dict[str, Any]], Any] | None = None
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 600.0

    def run(
        self, out: Path, *, kill_at: int = 0, count_file: Path | None = None
    ) -> subprocess.CompletedProcess:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
            "DD_FAULT_KILL_AT": str(kill_at),
            "DD_FAULT_COUNT_FILE": str(count_file or ""),
            "NO_COLOR": "1",
            "COLUMNS": "200",
            **self.env,
        }
        return subprocess.run(
            [sys.executable, "-c", WRAPPER, *self.argv(out)],
            capture_output=True,
            text=True,
            env=env,
            timeout=self.timeout_s,  # only ends a hung run; no verdict rests on it
            start_new_session=True,  # the kill takes the command's whole process group, not pytest
            check=False,
        )

    def reference(self, out: Path) -> tuple[Any, int]:
        """Run to completion; return its normalized output and how many operations it counted."""
        counter = out.parent / f".{out.name}.count"
        res = self.run(out, count_file=counter)
        assert res.returncode == 0, f"reference run failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        n = int(counter.read_text())
        counter.unlink()
        assert n > 0
        return self.normalize(out), n

    def kill_then_resume(self, out: Path, kill_points: list[int]) -> int:
        """Kill at each point in turn (a crash, then a crash of the rerun, ...), then run to completion.

        Returns how many kills landed: a resumed run does less than a fresh one, so a later kill point may
        lie past its end (it then simply finishes).
        """
        kills = 0
        for k in kill_points:
            res = self.run(out, kill_at=k)
            if res.returncode == 0:
                break
            assert res.returncode == -signal.SIGKILL, (
                f"expected a SIGKILL at operation {k}; got exit {res.returncode}:\n{res.stderr[-3000:]}"
            )
            kills += 1
            for rel in self.appendable:
                path = out / rel
                if path.exists() and path.stat().st_size > 0:
                    with path.open("ab") as fh:
                        fh.write(TORN)
        res = self.run(out)
        assert res.returncode == 0, f"rerun after a kill failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        return kills

    def check_clean(self, out: Path, expected: Any) -> None:
        assert temp_leftovers(out) == [], "temporary files left behind by the killed run"
        assert jsonl_problems(out, self.key) == []
        assert self.normalize(out) == expected


def kill_plans(n_operations: int, *, seed_salt: str) -> list[list[int]]:
    """Seeded kill plans over ``1..n``: single kills, and one double kill (the rerun dies too)."""
    rng = random.Random(f"{_seed()}:{seed_salt}")
    plans = [[rng.randint(1, n_operations)] for _ in range(_points())]
    plans.append(sorted(rng.sample(range(1, n_operations + 1), min(2, n_operations))))
    return plans

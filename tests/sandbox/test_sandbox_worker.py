"""The worker package's parts on their own: public names, the verdict rules, supervision, the process tree.

The sandbox tests (``test_sandbox_session.py``, ``test_sandbox_hostile.py``) drive the whole worker through
:class:`~datadojo.sandbox.Sandbox`; these pin the pieces the split made separate.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

import datadojo.sandbox.worker as worker
from datadojo.sandbox.protocol import encode_frame
from datadojo.sandbox.worker import procfs, supervisor, zygote
from datadojo.sandbox.worker.reply import build_reply
from datadojo.sandbox.worker.supervisor import CellOutcome, supervise
from helpers.procs import live_descendants, wait_until

pytestmark = pytest.mark.timeout(60)

LIMITS = {
    "wall_s": 5.0,
    "cpu_s": 2.0,
    "memory_mb": 512,
    "max_file_mb": 8,
    "max_procs": 16,
    "max_output_bytes": 1000,
    "max_observation_chars": 2000,
}
#: Supervision tests end on output, a status, an exit or a process count, never on the clock.
NO_WALL = {**LIMITS, "wall_s": 600.0}


def test_public_names_stay_importable() -> None:
    assert worker.main is zygote.main and worker.Zygote is zygote.Zygote
    assert worker.CellOutcome is supervisor.CellOutcome and worker.live_descendants is procfs.live_descendants
    assert callable(worker.run_code) and worker.Finish is zygote.Finish
    assert set(worker.__all__) == {"Finish", "CellOutcome", "Zygote", "live_descendants", "main", "run_code"}


# ------------------------------------------------------------------------------------------------ reply
def _signalled(sig: int) -> int:
    """A wait status for a process killed by ``sig`` (what ``waitpid`` reports)."""
    return sig


def _exited(code: int) -> int:
    return code << 8


@pytest.mark.parametrize(
    ("outcome", "status", "note", "flags"),
    [
        (
            CellOutcome(reason="wall"),
            "timeout",
            "[timeout: the cell ran longer than the wall-clock limit of 5 s",
            "t",
        ),
        (CellOutcome(reason="cpu"), "timeout", "[timeout: the cell used more than its CPU limit of 2 s", "t"),
        (CellOutcome(wait_status=_signalled(signal.SIGXCPU)), "timeout", "CPU limit of 2 s", "t"),
        (CellOutcome(reason="output"), "killed", "[output limit: the cell wrote more than 1000 bytes", "kc"),
        (
            CellOutcome(reason="procs"),
            "killed",
            "[process limit: the cell started more than 16 processes",
            "k",
        ),
        (CellOutcome(status={"ok": True}), "ok", None, ""),
        (
            CellOutcome(status={"ok": False, "exc": "MemoryError"}),
            "killed",
            "out of its 512 MB address space",
            "k",
        ),
        (CellOutcome(status={"ok": False, "exc": "ValueError"}), "error", None, ""),
        (CellOutcome(wait_status=_signalled(signal.SIGKILL)), "killed", "killed (SIGKILL)", "k"),
        (CellOutcome(wait_status=_signalled(signal.SIGXFSZ)), "killed", "a file larger than 8 MB", "k"),
        (CellOutcome(wait_status=_signalled(signal.SIGSEGV)), "killed", "died from SIGSEGV", "k"),
        (CellOutcome(wait_status=_exited(3)), "error", "exited with status 3 before the cell finished", ""),
        (CellOutcome(), "killed", "ended without reporting a result", "k"),
    ],
)
def test_verdict_rules(outcome: CellOutcome, status: str, note: str | None, flags: str) -> None:
    outcome.output += b"partial\n"
    reply = build_reply(outcome, limits=LIMITS, restarted=False, persistent=False)
    assert reply["status"] == status
    if note is None:
        assert reply["output"] == "partial\n"
    else:
        assert reply["output"].startswith("partial\n[") and note in reply["output"]
    assert (reply["timed_out"], reply["killed"], reply["truncated"]) == (
        "t" in flags,
        "k" in flags,
        "c" in flags,
    )


def test_missing_module_and_restart_note() -> None:
    outcome = CellOutcome(status={"ok": False, "exc": "ModuleNotFoundError", "missing": "polars"})
    reply = build_reply(outcome, limits=LIMITS, restarted=True, persistent=True)
    assert reply["missing_module"] == "polars" and reply["restarted"]
    assert reply["output"].endswith("variables and imports from earlier cells are lost]")
    assert "lost" not in build_reply(outcome, limits=LIMITS, restarted=True, persistent=False)["output"]


# ------------------------------------------------------------------------------------------- supervise
@pytest.fixture
def spawn() -> Iterator[Callable[[str], tuple[int, int, int]]]:
    """Start ``python -c code`` in its own session with fds 3 (output) and 4 (status); kill it at the end."""
    started: list[subprocess.Popen] = []

    def start(code: str) -> tuple[int, int, int]:
        out_r, out_w = os.pipe()
        st_r, st_w = os.pipe()
        prelude = f"import os\nos.dup2({out_w}, 1)\nST = {st_w}\n"
        proc = subprocess.Popen(
            [sys.executable, "-c", prelude + code], pass_fds=(out_w, st_w), start_new_session=True
        )
        os.close(out_w)
        os.close(st_w)
        started.append(proc)
        return proc.pid, out_r, st_r

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_supervise_collects_output_and_status(spawn: Callable[[str], tuple[int, int, int]]) -> None:
    frame = encode_frame({"ok": True, "exc": None, "missing": None})
    pid, out_r, st_r = spawn(f"print('hi', flush=True)\nos.write(ST, {frame!r})\nimport time\ntime.sleep(60)")
    outcome = supervise(pid, out_r, st_r, limits=NO_WALL, session=pid, count_procs=False)
    assert outcome.status == {"ok": True, "exc": None, "missing": None}
    assert outcome.reason is None and bytes(outcome.output) == b"hi\n"


def test_supervise_stops_output_over_the_cap(spawn: Callable[[str], tuple[int, int, int]]) -> None:
    pid, out_r, st_r = spawn("while True:\n    print('x' * 100, flush=True)")
    outcome = supervise(pid, out_r, st_r, limits=NO_WALL, session=pid, count_procs=False)
    assert outcome.reason == "output" and len(outcome.output) > LIMITS["max_output_bytes"]
    assert outcome.wait_status is not None and os.WTERMSIG(outcome.wait_status) == signal.SIGKILL


def test_supervise_sees_an_exit_without_status(spawn: Callable[[str], tuple[int, int, int]]) -> None:
    pid, out_r, st_r = spawn("os._exit(4)")
    outcome = supervise(pid, out_r, st_r, limits=NO_WALL, session=pid, count_procs=True)
    assert outcome.status is None and outcome.reason is None
    assert outcome.wait_status is not None and os.WEXITSTATUS(outcome.wait_status) == 4


def test_supervise_counts_the_session_processes(spawn: Callable[[str], tuple[int, int, int]]) -> None:
    code = "import subprocess\nps = [subprocess.Popen(['sleep', '60']) for _ in range(20)]\nimport time\ntime.sleep(60)"
    pid, out_r, st_r = spawn(code)
    outcome = supervise(pid, out_r, st_r, limits=NO_WALL, session=pid, count_procs=True)
    assert outcome.reason == "procs"
    assert outcome.wait_status is not None and os.WTERMSIG(outcome.wait_status) == signal.SIGKILL


# ------------------------------------------------------------------------------------------ process tree
async def test_live_descendants_follow_the_tree() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import subprocess; subprocess.run(['sleep', '60'])"])
    try:
        assert proc.pid in live_descendants(os.getpid())
        assert await wait_until(lambda: len(live_descendants(proc.pid)) == 1)  # its sleep, below it
        assert live_descendants(proc.pid) <= live_descendants(os.getpid())
    finally:
        for pid in live_descendants(proc.pid):
            os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()
    assert proc.pid not in live_descendants(os.getpid())


def test_a_reset_kills_the_trajectory_before_it_answers() -> None:
    """``Zygote.reset`` answers before it reaps (the slow part runs after the reply), so every process of
    the trajectory must have its SIGKILL by the time the reply exists. Run in a forked child, whose only
    child is the "trajectory" (a ``sleep``); the child exits 0 when that process was killed by the time
    ``reset`` returned, without the deferred part having run."""
    pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        code = 3
        try:
            signal.alarm(60)  # ends a broken test (the wait below would hang), never decides a verdict
            left = subprocess.Popen(["sleep", "300"])
            z = object.__new__(zygote.Zygote)
            z.pid, z.pidns, z.kernel, z.spare = os.getpid(), False, None, None
            reply, finish = z.reset()
            assert reply == {"op": "reset"} and callable(finish)
            _, status = os.waitpid(left.pid, 0)  # not reaped by reset(): finish() would do that
            code = 0 if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL else 1
        except BaseException:
            code = 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status

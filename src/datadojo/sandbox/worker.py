"""The process inside the sandbox: a pre-warmed zygote that forks one child per execution.

Started once per sandbox (by :mod:`datadojo.sandbox.session`, inside bubblewrap when available), it imports
the preload modules (numpy, pandas) once and then serves requests from the harness over length-prefixed
JSON frames on its stdin/stdout. Agent code never runs in this process: each execution runs in a child
forked from it, so a cell pays neither interpreter start-up nor the pandas import (a ``fork`` of the warm
process costs a few milliseconds), and whatever a cell does to its interpreter dies with the child.

* **chunked** (DataMind §4): the child replays the chunks that succeeded earlier, silently (the AST
  transformation of :func:`datadojo.sandbox.cells.compile_cell` with ``silent=True``; file descriptors 1
  and 2 also point at ``/dev/null`` meanwhile, for output written below Python), then runs the new chunk
  with its output captured. Nothing survives the child.
* **persistent**: a long-lived child (the *kernel*) holds the namespace and runs cells in-process; after a
  crash, a kill or a timeout it is replaced by a fresh fork and the observation says the state is lost.
* **SQL** runs in a fresh child too, via :func:`datadojo.sandbox.sql.run_sql`.

Every child: its own session (process group), stdin from ``/dev/null``, stdout+stderr into one pipe read by
this process (so their order is kept and output is capped at ``max_output_bytes``), ``RLIMIT_AS``,
``RLIMIT_FSIZE``, ``RLIMIT_NPROC``, ``RLIMIT_CPU``, no core dumps, the dedicated sandbox uid when the
worker runs as root, and ``PR_SET_PDEATHSIG`` so it cannot outlive the worker. This process enforces the
wall-clock limit (and measures CPU time of a persistent kernel), and after every execution kills whatever
the code left running: it is a child subreaper, so orphans of a cell become its children, and inside the
PID namespace it sees every process there.

This module must stay importable without the harness-side modules' dependencies and must not start
threads before forking.
"""

from __future__ import annotations

import builtins
import contextlib
import ctypes
import fcntl
import gc
import importlib
import json
import math
import os
import random
import resource
import select
import shutil
import signal
import sys
import time
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from datadojo.sandbox.cells import (
    compile_cell,
    decode_output,
    register_source,
    truncate_head_tail,
    truncate_observation,
)
from datadojo.sandbox.protocol import ProtocolError, decode_frame, read_frame_fd, write_frame_fd

__all__ = ["main"]

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_STATUS_FD = 3  # in a chunked/SQL child: where the status frame goes
_SPARE_FD = 4  # in a chunked/SQL child: a copy of the capture pipe (fds 1/2 are silenced during replay)
_REQUEST_FD = 5  # in a chunked/SQL child: where its one request arrives
_FIRST_FREE_FD = 64  # above every fd a child is given: temporary copies go here while fds are moved
_KERNEL_IN_FD = 3  # in a kernel: requests from the worker
_KERNEL_OUT_FD = 4  # in a kernel: status messages to the worker
_TICK_S = 0.05  # how often CPU time / process counts are checked while a cell runs
_READ_CHUNK = 1 << 16
_CLK_TCK = os.sysconf("SC_CLK_TCK")

try:
    _libc: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - no libc?
    _libc = None


def _prctl(option: int, arg: int) -> bool:
    if _libc is None:
        return False
    return _libc.prctl(option, arg, 0, 0, 0) == 0


# ---------------------------------------------------------------------------------------------- helpers
def _proc_stat(pid: int | str) -> tuple[str, int, int, int, float] | None:
    """``(state, ppid, pgrp, session, cpu_seconds)`` of a process from ``/proc``, or ``None`` if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    rest = data[data.rfind(b")") + 2 :].split()
    try:
        state = rest[0].decode()
        ppid, pgrp, session = int(rest[1]), int(rest[2]), int(rest[3])
        cpu = (int(rest[11]) + int(rest[12])) / _CLK_TCK
    except (IndexError, ValueError):
        return None
    return state, ppid, pgrp, session, cpu


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _descendants(root: int, table: dict[int, tuple[str, int]]) -> list[int]:
    """Every process below ``root`` in a ``{pid: (state, ppid)}`` table."""
    children: dict[int, list[int]] = {}
    for pid, (_state, ppid) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def live_descendants(root: int) -> set[int]:
    """Every live (not zombie) process below ``root`` now, from ``/proc``.

    What tests and benchmarks use to prove a run left no process behind (count before, count after).
    """
    table: dict[int, tuple[str, int]] = {}
    for pid in _all_pids():
        stat = _proc_stat(pid)
        if stat is not None and stat[0] not in ("Z", "X"):
            table[pid] = (stat[0], stat[1])
    return set(_descendants(root, table))


def _chunk_list(msg: dict[str, Any]) -> list[tuple[str, str]]:
    """The ``(filename, code)`` chunks of a request."""
    return [(str(f), str(c)) for f, c in msg.get("chunks", [])]


def _end_own_processes() -> None:
    """In a child, after a replay ahead: kill the processes the replay started, and reap our children.

    Only we can reap our own children (the worker's sweep would leave them as zombies under a live
    parent); grandchildren that outlive their parents go to the worker, which reaps them.
    """
    me = os.getpid()
    for _ in range(50):
        victims = []
        for p in _all_pids():
            st = _proc_stat(p)
            if p != me and st is not None and st[0] not in ("Z", "X") and (st[1] == me or st[3] == me):
                victims.append(p)
        for p in victims:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
        while True:
            try:
                if os.waitpid(-1, 0 if victims else os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if not victims:
            return


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@dataclass
class Outcome:
    """What supervising one execution observed."""

    output: bytearray = field(default_factory=bytearray)
    status: dict[str, Any] | None = None
    wait_status: int | None = None  # from waitpid, when the process ended
    reason: str | None = None  # why we killed it: "wall" | "cpu" | "output" | "procs"
    duration_s: float = 0.0


class _FrameBuffer:
    """Incremental parser of length-prefixed frames read from a non-blocking pipe."""

    def __init__(self) -> None:
        self.data = bytearray()

    def feed(self, chunk: bytes) -> dict[str, Any] | None:
        """Add ``chunk``; return the first complete *status* frame, skipping ``replayed`` notices."""
        self.data += chunk
        while len(self.data) >= 4:
            length = int.from_bytes(self.data[:4], "big")
            if len(self.data) < 4 + length:
                return None
            body = bytes(self.data[4 : 4 + length])
            del self.data[: 4 + length]
            frame = decode_frame(body)
            if frame.get("op") != "replayed":
                return frame
        return None


# ------------------------------------------------------------------------------------- code execution
def _new_main_module() -> dict[str, Any]:
    """A fresh ``__main__`` namespace (registered in ``sys.modules`` so pickling cell objects works)."""
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    return module.__dict__


def _print_exception(exc: BaseException, filename: str) -> None:
    """Print a traceback that starts at the cell's own frame (the worker's frames are noise to the model)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    try:
        text = "".join(traceback.format_exception(type(exc), exc, tb))
    except Exception:  # an exception whose __str__ raises
        text = f"{type(exc).__name__}: <exception could not be formatted>\n"
    sys.stderr.write(text)


def run_code(
    code: str,
    filename: str,
    namespace: dict[str, Any],
    *,
    silent: bool,
    compiled: types.CodeType | None = None,
) -> dict[str, Any]:
    """Compile (unless ``compiled`` is given) and run one chunk in ``namespace``, printing output and
    tracebacks as a notebook would.

    Returns ``{"ok": bool, "exc": name | None, "missing": module | None}``; never raises (SystemExit and
    KeyboardInterrupt included: they end the chunk, not the process).
    """
    try:
        if compiled is None:
            register_source(code, filename)
            compiled = compile_cell(code, filename=filename, display_last=not silent, silent=silent)
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError) as exc:
        sys.stderr.write("".join(traceback.format_exception_only(type(exc), exc)))
        return {"ok": False, "exc": type(exc).__name__, "missing": None}
    try:
        exec(compiled, namespace)
    except SystemExit as exc:
        if exc.code in (None, 0):
            return {"ok": True, "exc": None, "missing": None}
        sys.stderr.write(f"SystemExit: {exc.code!r}\n")
        return {"ok": False, "exc": "SystemExit", "missing": None}
    except BaseException as exc:
        _print_exception(exc, filename)
        missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
        return {"ok": False, "exc": type(exc).__name__, "missing": missing}
    finally:
        _flush_std()
    return {"ok": True, "exc": None, "missing": None}


#: A small, typical pandas workload (parse, group, aggregate, sort, merge, pivot, format), run once in the
#: worker after the preload (and once in a persistent kernel): pandas' lazy imports and first-call set-up
#: then happen once instead of in every forked child. Measured in a forked child: the first groupby over
#: a 1,000-row CSV drops from ~25 ms to ~15 ms. (Running it in every spare child too would bring that to
#: ~5 ms, but costs tens of milliseconds of CPU per cell: a bad trade when many sandboxes share cores.)
_PANDAS_WARM_UP = """
import io
import numpy as np
import pandas as pd
df = pd.read_csv(io.StringIO("a,b,c,d\\n1,x,2.5,2024-01-02\\n2,y,3.5,2024-02-03\\n3,x,4.5,2024-03-04\\n"))
df["d"] = pd.to_datetime(df["d"])
g = df.groupby("b")["c"].agg(["mean", "sum", "count"]).sort_values("mean")
m = df.merge(df, on="a").pivot_table(index="b_x", values="c_x", aggfunc="mean")
text = g.to_string() + repr(df) + repr(df.describe()) + df.head().to_string() + repr(df["c"].round(3))
text += repr(m) + str(np.corrcoef(df["a"], df["c"])) + str(df.dtypes) + repr(df["b"].value_counts())
text += repr(df.iloc[0]) + repr(df.loc[df["c"] > 3, ["a", "c"]]) + repr(df.sum(numeric_only=True))
"""


def _warm_up(*, pandas: bool) -> None:
    """Exercise the code paths of a cell once, before a request arrives.

    A forked child shares its memory with the worker copy-on-write; the first cell to run touches (and
    so copies) pages all over the interpreter. Doing that while nothing waits takes those page faults off
    the critical path. With ``pandas`` (worker and kernel only) also :data:`_PANDAS_WARM_UP`. Nothing is
    printed and no state is left behind (throw-away namespaces).
    """
    namespace: dict[str, Any] = {"__builtins__": builtins}
    with contextlib.suppress(Exception):
        exec(compile_cell("_ = [1]\n_", filename="<warm-up>", silent=True), namespace)
        exec(compile_cell("None", filename="<warm-up>"), namespace)
        json.dumps({"ok": True})
        if pandas and "pandas" in sys.modules:
            exec(compile(_PANDAS_WARM_UP, "<warm-up>", "exec"), {"__builtins__": builtins})
        _flush_std()


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _install_std_streams() -> None:
    """One line-buffered text stream on fd 1 serves as stdout *and* stderr, so their order is kept."""
    stream = open(1, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.stdout = sys.stderr = stream


# ------------------------------------------------------------------------------------------- the worker
Finish = Callable[[], None]


@dataclass
class _Child:
    """A forked child waiting for (or running) one request: chunked cell or SQL statement."""

    pid: int
    req_w: int
    out_r: int
    st_r: int
    prereplayed: list[tuple[str, str]] | None = None  # the chunks it re-ran ahead of its request
    swept: bool = False  # what its replay ahead started has been killed


class Worker:
    """The zygote: holds the warm interpreter, forks executions, supervises them, answers the harness.

    Latency: a chunked cell or SQL statement goes to a *spare* child forked and set up (limits, uid,
    streams) after the previous request, so the fork is off the critical path; and the reply is sent as
    soon as the child has reported, before it is reaped and the process sweep runs. The next request is
    read only after that clean-up, so no cell ever overlaps leftovers of the previous one.
    """

    def __init__(self, settings: dict[str, Any], proto_in: int, proto_out: int, devnull: int) -> None:
        self.settings = settings
        self.proto_in = proto_in
        self.proto_out = proto_out
        self.devnull = devnull
        self.mode: str = settings["mode"]
        self.limits: dict[str, Any] = settings["limits"]
        self.cell_uid: int | None = settings.get("cell_uid")
        self.pidns: bool = bool(settings.get("pidns"))
        self.count_procs: bool = bool(settings.get("count_procs"))
        self.seed: int = int(settings.get("seed", 0))
        self.workspace: str = settings["workspace"]
        self.sql: dict[str, Any] = settings.get("sql", {})
        self.pid = os.getpid()
        self.is_root = os.geteuid() == 0
        self.kernel: _Kernel | None = None
        self.spare: _Child | None = None
        # Chunked mode: re-run the kept chunks in the next child right after a cell, while the model
        # thinks, instead of when the next cell arrives (see SandboxConfig.prereplay).
        self.prereplay: bool = bool(settings.get("prereplay", True)) and self.mode == "chunked"
        self.kept: list[tuple[str, str]] = []  # the chunks the harness keeps, as far as we know
        # Silent versions of chunks that already ran successfully in a child, compiled once here so that
        # every later replay inherits the code objects instead of re-parsing the whole history.
        self.compiled: dict[tuple[str, str], types.CodeType] = {}

    # --------------------------------------------------------------- set-up
    def prepare(self) -> dict[str, Any]:
        """Become a subreaper, import the preload modules, fork the first child; the ``ready`` message."""
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
        _prctl(_PR_SET_DUMPABLE, 0)  # cells sharing our uid (user-namespace mode) cannot ptrace us
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(signum, signal.SIG_IGN)
        os.chdir(self.workspace)
        preloaded, errors = [], []
        for name in self.settings.get("preload", []):
            try:
                importlib.import_module(name)
                preloaded.append(name)
            except Exception as exc:
                errors.append(f"{name}: {type(exc).__name__}: {exc}")
        _warm_up(pandas=True)
        # Objects that exist now are never collected in a child: a collection would touch (and so copy)
        # every page the child shares with us.
        gc.collect()
        gc.freeze()
        if self.mode == "persistent":
            self._start_kernel()
        else:
            self.spare = self._fork_child()
        return {
            "op": "ready",
            "pid": self.pid,
            "preloaded": preloaded,
            "errors": errors,
            "threads": len(os.listdir("/proc/self/task")),
            "python": sys.version.split()[0],
        }

    # --------------------------------------------------------------- serving
    def serve(self) -> None:
        while True:
            self._wait_for_request()
            try:
                msg = read_frame_fd(self.proto_in)
            except ProtocolError:
                break
            if msg is None or msg.get("op") == "exit":
                break
            finish: Finish | None = None
            try:
                op = msg.get("op")
                if op in ("python", "sql"):
                    reply, finish = self.execute(msg)
                elif op == "ping":
                    reply = {"op": "pong"}
                elif op == "reset":
                    reply = self.reset()
                else:
                    reply = {"op": "error", "message": f"unknown request {op!r}"}
            except Exception as exc:  # a bug here must not kill the sandbox silently
                reply = {"op": "error", "message": f"worker error: {type(exc).__name__}: {exc}"}
            write_frame_fd(self.proto_out, reply)
            if finish is not None:
                try:
                    finish()
                except Exception as exc:  # e.g. fork failed under memory pressure: the next request retries
                    sys.stderr.write(f"worker: clean-up after a cell failed: {type(exc).__name__}: {exc}\n")
        self.shutdown()

    def _wait_for_request(self) -> None:
        """Block until the harness sends something; meanwhile, sweep after a spare's replay ahead.

        A chunk re-run ahead may start processes (a kept chunk that spawned a daemon spawns it again);
        the spare says when its replay is done, and everything but the spare is killed, so that nothing
        runs between cells but the one idle child.
        """
        spare = self.spare
        if spare is None or spare.prereplayed is None or spare.swept:
            return
        poller = select.poll()
        poller.register(self.proto_in, select.POLLIN)
        poller.register(spare.st_r, select.POLLIN)
        while True:
            fds = {fd for fd, _event in poller.poll()}
            if self.proto_in in fds:
                return
            try:
                notice = read_frame_fd(spare.st_r)  # written in one piece: complete once readable
            except ProtocolError:
                notice = None
            spare.swept = True
            if notice is not None and notice.get("op") == "replayed":
                keep = {c.pid for c in (spare, self.kernel) if c is not None}
                self.sweep(keep=keep, sessions=set())
            return

    def reset(self) -> dict[str, Any]:
        """Forget the trajectory: end every cell process, empty the private /tmp, start a fresh child.

        What lets a pool hand this worker to the next trajectory instead of starting a new one (a cold
        start is an interpreter plus the pandas import). The worker itself never runs agent code, so
        after this nothing of the previous trajectory is left but the workspace, which the harness empties.
        """
        if self.kernel is not None:
            self.kernel.kill()
            self.kernel.close()
            self.kernel = None
        if self.spare is not None:
            self._dispose(self.spare)
            self.spare = None
        self.sweep(keep=set(), sessions=set())
        self._wipe_private_tmp()
        self.kept = []
        self.compiled = {}
        if self.mode == "persistent":
            self._start_kernel()
        else:
            self.spare = self._fork_child()
        return {"op": "reset"}

    def _wipe_private_tmp(self) -> None:
        """Empty the sandbox's own /tmp (a tmpfs under bubblewrap; the host's /tmp is never touched).

        Cells write there as the cell uid in a sticky directory, so the removal runs as that uid.
        """
        if not self.settings.get("private_tmp"):
            return
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                if self.cell_uid is not None and self.is_root:
                    os.setgroups([])
                    os.setresgid(self.cell_uid, self.cell_uid, self.cell_uid)
                    os.setresuid(self.cell_uid, self.cell_uid, self.cell_uid)
                for name in os.listdir("/tmp"):
                    path = os.path.join("/tmp", name)
                    if os.path.isdir(path) and not os.path.islink(path):
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        with contextlib.suppress(OSError):
                            os.unlink(path)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.waitpid(pid, 0)

    def shutdown(self) -> None:
        if self.kernel is not None:
            self.kernel.kill()
        if self.spare is not None:
            self._kill_session(self.spare.pid, self.spare.pid)
        self.sweep(keep=set(), sessions=set())

    def execute(self, msg: dict[str, Any]) -> tuple[dict[str, Any], Finish]:
        if msg.get("op") == "python" and self.mode == "persistent":
            return self._run_in_kernel(msg)
        return self._run_in_child(msg)

    # --------------------------------------------------------------- forking
    def _child_setup(self, *, cpu_hard: bool) -> None:
        """In a freshly forked child: session, limits, uid, signals, then Python-level streams."""
        os.setsid()
        lim = self.limits
        mb = 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (lim["memory_mb"] * mb, lim["memory_mb"] * mb))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim["max_file_mb"] * mb, lim["max_file_mb"] * mb))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        cpu = max(1, math.ceil(lim["cpu_s"]))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1) if cpu_hard else (cpu, resource.RLIM_INFINITY))
        if not (self.is_root and self.cell_uid is None):  # NPROC is not enforced for root anyway
            resource.setrlimit(resource.RLIMIT_NPROC, (lim["max_procs"], lim["max_procs"]))
        if self.cell_uid is not None and self.is_root:
            os.setgroups([])
            os.setresgid(self.cell_uid, self.cell_uid, self.cell_uid)
            os.setresuid(self.cell_uid, self.cell_uid, self.cell_uid)
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
        if os.getppid() != self.pid:
            os._exit(1)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(signum, signal.SIG_DFL)
        _install_std_streams()
        sys.argv = [""]
        random.seed(self.seed)
        np = sys.modules.get("numpy")
        if np is not None:
            with contextlib.suppress(Exception):
                np.random.seed(self.seed % (2**32))

    def _fork(self, body: Callable[[], None], *, cpu_hard: bool, fds: dict[int, int]) -> int:
        """Fork a child with fds 0=/dev/null and ``fds`` (target: source), all others closed."""
        pid = os.fork()
        if pid == 0:  # child
            code = 70
            try:
                os.dup2(self.devnull, 0)
                # Move the fds into place (via fresh copies, so that no source is clobbered first).
                moved = {
                    target: fcntl.fcntl(src, fcntl.F_DUPFD, _FIRST_FREE_FD) for target, src in fds.items()
                }
                for target, src in moved.items():
                    os.dup2(src, target)
                os.closerange(max(moved) + 1, 1 << 20)
                self._child_setup(cpu_hard=cpu_hard)
                body()
                code = 0
            except BaseException:
                with contextlib.suppress(BaseException):
                    traceback.print_exc()
            finally:
                with contextlib.suppress(BaseException):
                    _flush_std()
                os._exit(code)
        return pid

    def _fork_child(self, prereplay: list[tuple[str, str]] | None = None) -> _Child:
        """A child that sets itself up now (and re-runs ``prereplay``), then waits for one request."""
        out_r, out_w = os.pipe()
        st_r, st_w = os.pipe()
        rq_r, rq_w = os.pipe()
        fds = {1: out_w, 2: out_w, _STATUS_FD: st_w, _SPARE_FD: out_w, _REQUEST_FD: rq_r}
        try:
            pid = self._fork(self._child_main, cpu_hard=True, fds=fds)
        finally:
            for fd in (out_w, st_w, rq_r):
                os.close(fd)
        child = _Child(pid=pid, req_w=rq_w, out_r=out_r, st_r=st_r)
        if prereplay:
            with contextlib.suppress(OSError):  # if it died, the request finds out
                write_frame_fd(rq_w, {"op": "prereplay", "chunks": [list(c) for c in prereplay]})
            child.prereplayed = list(prereplay)
        return child

    def _child_main(self) -> None:
        """Runs in a forked child: (replay the kept chunks ahead,) wait for the request, run it, report."""
        _warm_up(pandas=False)
        msg = read_frame_fd(_REQUEST_FD)
        replayed: tuple[dict[str, Any], list[tuple[str, str]]] | None = None
        if msg is not None and msg.get("op") == "prereplay":
            namespace = _new_main_module()
            replayed = (namespace, self._replay(namespace, _chunk_list(msg)))
            _end_own_processes()
            write_frame_fd(_STATUS_FD, {"op": "replayed"})  # the worker sweeps whatever is left
            msg = read_frame_fd(_REQUEST_FD)
        if msg is None:
            return
        os.close(_REQUEST_FD)
        if msg.get("invalidate_caches"):
            importlib.invalidate_caches()
        status = self._sql_body(msg) if msg.get("op") == "sql" else self._python_body(msg, replayed)
        _flush_std()
        write_frame_fd(_STATUS_FD, status)
        # Wait to be killed rather than exit: tearing down a copy of the worker's address space takes
        # milliseconds of CPU that would compete with the worker sending the reply.
        while True:
            time.sleep(3600)

    def _replay(self, namespace: dict[str, Any], chunks: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Run the kept chunks silently in ``namespace``; the ``(chunk, exception)`` of those that failed."""
        failed: list[tuple[str, str]] = []
        if not chunks:
            return failed
        _flush_std()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
        try:
            for chunk_file, chunk_code in chunks:
                compiled = self.compiled.get((chunk_file, chunk_code))
                replay = run_code(chunk_code, chunk_file, namespace, silent=True, compiled=compiled)
                if not replay["ok"]:
                    failed.append((chunk_file, str(replay["exc"])))
        finally:
            _flush_std()
            os.dup2(_SPARE_FD, 1)
            os.dup2(_SPARE_FD, 2)
        return failed

    def _python_body(
        self, msg: dict[str, Any], replayed: tuple[dict[str, Any], list[tuple[str, str]]] | None
    ) -> dict[str, Any]:
        """Chunked mode: replay the kept chunks silently (unless done ahead), then run the new one."""
        if replayed is None:
            namespace = _new_main_module()
            failed = self._replay(namespace, _chunk_list(msg))
        else:  # the worker checked that these are the chunks of this request
            namespace, failed = replayed
        already_reported = set(msg.get("reported_failures", []))
        new = [f"{name} ({exc})" for name, exc in failed if name not in already_reported]
        if new:
            # Said once per chunk: the harness passes back the chunks it has already told the model about.
            sys.stderr.write(
                f"[note: re-running earlier cells raised errors this time: {', '.join(new)}; "
                "variables they define may be missing]\n"
            )
        status = run_code(str(msg["code"]), str(msg.get("filename") or "<cell>"), namespace, silent=False)
        status["replay_failed"] = [name for name, _exc in failed]
        return status

    def _sql_body(self, msg: dict[str, Any]) -> dict[str, Any]:
        from datadojo.sandbox.sql import run_sql

        result = run_sql(
            str(msg["db"]),
            str(msg["query"]),
            row_limit=int(self.sql.get("row_limit", 200)),
            timeout_s=float(self.sql.get("timeout_s", 30.0)),
            save_csv=msg.get("save_csv"),
        )
        text = result.text
        sys.stdout.write(text if not text or text.endswith("\n") else text + "\n")
        return {"ok": result.error is None, "exc": "SqlError" if result.error else None, "missing": None}

    # --------------------------------------------------------------- supervision
    def supervise(
        self,
        pid: int,
        out_r: int,
        status_r: int,
        *,
        session: int,
        cpu_base: float | None = None,
    ) -> Outcome:
        """Collect output until ``pid`` reports a status frame or ends; kill it on a limit.

        ``cpu_base``: measure the CPU time of ``pid`` against ``cpu_s`` (a persistent kernel, which
        cannot have a hard ``RLIMIT_CPU`` per cell); a forked child has a hard ``RLIMIT_CPU`` instead.
        """
        lim = self.limits
        cap = int(lim["max_output_bytes"])
        start = time.monotonic()
        deadline = start + float(lim["wall_s"])
        outcome = Outcome()
        frames = _FrameBuffer()
        try:
            pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pidfd = None
        poller = select.poll()
        poller.register(out_r, select.POLLIN)
        poller.register(status_r, select.POLLIN)
        if pidfd is not None:
            poller.register(pidfd, select.POLLIN)
        watch = cpu_base is not None or self.count_procs or pidfd is None
        try:
            while True:
                now = time.monotonic()
                if now >= deadline:
                    outcome.reason = "wall"
                    break
                timeout = min(deadline - now, _TICK_S) if watch else deadline - now
                exited = False
                for fd, _event in poller.poll(max(1, math.ceil(timeout * 1000))):
                    if fd == pidfd:
                        exited = True
                        continue
                    data = os.read(fd, _READ_CHUNK)
                    if fd == out_r:
                        if data:
                            outcome.output += data
                        else:
                            poller.unregister(out_r)
                    elif not data:  # the status pipe closed: wait for the exit (or the deadline)
                        poller.unregister(status_r)
                    elif outcome.status is None:
                        try:
                            outcome.status = frames.feed(data)
                        except ProtocolError:
                            frames = _FrameBuffer()
                if len(outcome.output) > cap:
                    outcome.reason = "output"
                    break
                if outcome.status is not None:
                    break
                if exited or (pidfd is None and self._exited(pid)):
                    outcome.wait_status = self._reap_pid(pid, block=True)
                    break
                if watch:
                    if cpu_base is not None:
                        st = _proc_stat(pid)
                        if st is not None and st[4] - cpu_base > float(lim["cpu_s"]) + 1:
                            outcome.reason = "cpu"
                            break
                    if self.count_procs and self._count_session(session) > int(lim["max_procs"]):
                        outcome.reason = "procs"
                        break
            if outcome.reason is not None:
                self._kill_session(pid, session)
                if outcome.wait_status is None:
                    outcome.wait_status = self._reap_pid(pid, block=True)
            # What is still in the pipe was written before the process reported or ended.
            outcome.output += self._drain(out_r, cap + 1 - len(outcome.output))
            if outcome.status is None and outcome.reason is None:
                with contextlib.suppress(ProtocolError):
                    outcome.status = frames.feed(self._drain(status_r, 1 << 20))
        finally:
            if pidfd is not None:
                os.close(pidfd)
        outcome.duration_s = time.monotonic() - start
        return outcome

    @staticmethod
    def _drain(fd: int, limit: int) -> bytes:
        """Read what is available on ``fd`` now, without blocking (up to ``limit`` bytes)."""
        os.set_blocking(fd, False)
        chunks: list[bytes] = []
        got = 0
        try:
            while got < limit:
                try:
                    data = os.read(fd, min(_READ_CHUNK, max(1, limit - got)))
                except BlockingIOError:
                    break
                if not data:
                    break
                chunks.append(data)
                got += len(data)
        finally:
            os.set_blocking(fd, True)
        return b"".join(chunks)

    def _exited(self, pid: int) -> bool:
        st = _proc_stat(pid)
        return st is None or st[0] in ("Z", "X")

    def _reap_pid(self, pid: int, *, block: bool = False) -> int | None:
        try:
            wpid, status = os.waitpid(pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return None
        return status if wpid == pid else None

    def _count_session(self, session: int) -> int:
        count = 0
        for p in _all_pids():
            st = _proc_stat(p)
            if st is not None and st[3] == session and st[0] not in ("Z", "X"):
                count += 1
        return count

    def _kill_session(self, pid: int, session: int) -> None:
        with contextlib.suppress(OSError):
            os.killpg(session, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)

    # --------------------------------------------------------------- process sweep
    def sweep(self, *, keep: set[int], sessions: set[int]) -> None:
        """Kill every process a cell left behind, and reap them (keep ``keep``: the live kernel, the spare).

        Inside the PID namespace that is every process but PID 1 (bubblewrap's init), us and ``keep``;
        outside it, every descendant of ours but ``keep`` (as a subreaper we inherit the orphans of a
        cell, whatever session it moved them to, so all of them stay in our subtree).
        """
        for _ in range(500):
            for sid in sessions - keep:
                with contextlib.suppress(OSError):
                    os.killpg(sid, signal.SIGKILL)
            table: dict[int, tuple[str, int]] = {}
            for p in _all_pids():
                st = _proc_stat(p)
                if st is not None:
                    table[p] = (st[0], st[1])
            if self.pidns:  # PID 1 is bubblewrap's init (or us, under unshare)
                candidates = [p for p in table if p not in (1, self.pid)]
            else:
                candidates = _descendants(self.pid, table)
            victims, pending = [], False
            for p in candidates:
                if p in keep:
                    continue
                state, ppid = table[p]
                if state in ("Z", "X"):
                    # A zombie whose parent is being killed comes to us to be reaped; one whose parent is
                    # kept (the kernel) holds nothing but its pid.
                    pending = pending or (ppid != self.pid and ppid not in keep)
                else:
                    victims.append(p)
            for p in victims:
                with contextlib.suppress(OSError):
                    os.kill(p, signal.SIGKILL)
            self._reap_all()
            if not victims and not pending:
                return
            time.sleep(0.002)

    def _reap_all(self) -> None:
        while True:
            try:
                wpid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if wpid == 0:
                return
            if self.kernel is not None and wpid == self.kernel.pid:
                self.kernel.wait_status = status

    def _quick_clean(self, session: int) -> bool:
        """True when a forked child provably left nothing behind (no scan of ``/proc`` needed).

        Its session is empty and we have no children: any survivor would have been reparented to us.
        """
        try:
            os.killpg(session, 0)
            return False
        except ProcessLookupError:
            pass
        except PermissionError:
            return False
        while True:
            try:
                wpid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return True
            if wpid == 0:
                return False

    # --------------------------------------------------------------- chunked cells and SQL
    def _take_child(self, msg: dict[str, Any]) -> _Child:
        """The spare child if it is alive and has re-run exactly this request's chunks, else a new one."""
        child, self.spare = self.spare, None
        if child is not None:
            alive = self._reap_pid(child.pid) is None and not self._exited(child.pid)
            fits = child.prereplayed is None or (
                msg.get("op") == "sql" or child.prereplayed == _chunk_list(msg)
            )
            if alive and fits:
                return child
            self._dispose(child)  # died while waiting, or the harness keeps other chunks than we thought
        return self._fork_child()

    def _dispose(self, child: _Child) -> None:
        self._kill_session(child.pid, child.pid)
        self._reap_pid(child.pid, block=True)
        for fd in (child.req_w, child.out_r, child.st_r):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _run_in_child(self, msg: dict[str, Any]) -> tuple[dict[str, Any], Finish]:
        child = self._take_child(msg)
        with contextlib.suppress(OSError):  # a child that died already shows up in supervise()
            write_frame_fd(child.req_w, msg)
        os.close(child.req_w)
        child.req_w = -1
        outcome = self.supervise(child.pid, child.out_r, child.st_r, session=child.pid)
        reply = self._reply(outcome, restarted=False)

        def finish() -> None:
            self._kill_session(child.pid, child.pid)  # it has reported; nothing it does now counts
            if msg.get("op") == "python":
                # The harness keeps a chunk exactly when it ran without error (Sandbox._run_python).
                self.kept = _chunk_list(msg)
                if reply["status"] == "ok":
                    self.kept.append((str(msg.get("filename") or "<cell>"), str(msg["code"])))
                    self._cache_chunk(*self.kept[-1])
            # In the PID namespace the sweep can spare the next child by pid, so fork it while the
            # kernel tears the old one down; outside it, the quick check needs us child-free first. A
            # child that re-runs chunks ahead may start processes, so it comes after the sweep.
            early = self.mode == "chunked" and self.pidns and not self.prereplay
            if early:
                self.spare = self._fork_child()
            self._reap_pid(child.pid, block=True)
            for fd in (child.out_r, child.st_r):
                os.close(fd)
            keep = {c.pid for c in (self.spare, self.kernel) if c is not None}
            if self.pidns or not self._quick_clean(child.pid):
                self.sweep(keep=keep, sessions={child.pid})
            if self.mode == "chunked" and not early:
                self.spare = self._fork_child(self.kept if self.prereplay else None)

        return reply, finish

    def _cache_chunk(self, filename: str, code: str) -> None:
        """Compile the silent version of a chunk that ran successfully, for every later replay."""
        if self.mode != "chunked":
            return
        try:
            self.compiled[(filename, code)] = compile_cell(code, filename=filename, silent=True)
            register_source(code, filename)
        except Exception:  # the child compiles it itself then
            self.compiled.pop((filename, code), None)

    # --------------------------------------------------------------- persistent kernel
    def _start_kernel(self) -> None:
        out_r, out_w = os.pipe()
        req_r, req_w = os.pipe()
        st_r, st_w = os.pipe()
        fds = {1: out_w, 2: out_w, _KERNEL_IN_FD: req_r, _KERNEL_OUT_FD: st_w}
        try:
            pid = self._fork(_kernel_loop, cpu_hard=False, fds=fds)
        finally:
            for fd in (out_w, req_r, st_w):
                os.close(fd)
        self.kernel = _Kernel(pid=pid, out_r=out_r, req_w=req_w, st_r=st_r)

    def _replace_kernel(self) -> None:
        kernel = self.kernel
        if kernel is not None:
            kernel.kill()
            self.sweep(keep=set(), sessions={kernel.pid})
            kernel.close()
        self._start_kernel()

    def _run_in_kernel(self, msg: dict[str, Any]) -> tuple[dict[str, Any], Finish]:
        restarted = False
        if self.kernel is None or not self.kernel.alive():
            # It died between cells (a background thread crashed it, say): its state is gone already.
            self._replace_kernel()
            restarted = True
        kernel = self.kernel
        assert kernel is not None
        self._drain(kernel.out_r, 16 << 20)  # output of background threads since the last cell: dropped
        cpu_base = (_proc_stat(kernel.pid) or ("", 0, 0, 0, 0.0))[4]
        request = {
            "code": msg["code"],
            "filename": msg.get("filename") or "<cell>",
            "cpu_s": self.limits["cpu_s"],
        }
        if msg.get("invalidate_caches"):
            request["invalidate_caches"] = True
        with contextlib.suppress(OSError):  # it died just now: supervise() sees the exit
            write_frame_fd(kernel.req_w, request)
        outcome = self.supervise(kernel.pid, kernel.out_r, kernel.st_r, session=kernel.pid, cpu_base=cpu_base)
        lost = outcome.reason is not None or outcome.status is None
        if lost and outcome.wait_status is None:
            kernel.kill()
            outcome.wait_status = kernel.wait_status
        reply = self._reply(outcome, restarted=restarted or lost)

        def finish() -> None:
            if lost:
                self._replace_kernel()
            else:
                self.sweep(keep={kernel.pid}, sessions={kernel.pid})

        return reply, finish

    # --------------------------------------------------------------- replies
    def _reply(self, outcome: Outcome, *, restarted: bool) -> dict[str, Any]:
        lim = self.limits
        notes: list[str] = []
        status = outcome.status if isinstance(outcome.status, dict) else None
        timed_out = killed = False
        truncated = False
        missing = None
        if outcome.reason == "wall":
            result, timed_out = "timeout", True
            notes.append(
                f"[timeout: the cell ran longer than the wall-clock limit of {lim['wall_s']:g} s and was stopped]"
            )
        elif outcome.reason == "cpu" or (
            outcome.wait_status is not None
            and os.WIFSIGNALED(outcome.wait_status)
            and os.WTERMSIG(outcome.wait_status) == signal.SIGXCPU
        ):
            result, timed_out = "timeout", True
            notes.append(
                f"[timeout: the cell used more than its CPU limit of {lim['cpu_s']:g} s and was stopped]"
            )
        elif outcome.reason == "output":
            result, killed, truncated = "killed", True, True
            notes.append(
                f"[output limit: the cell wrote more than {lim['max_output_bytes']} bytes and was stopped]"
            )
        elif outcome.reason == "procs":
            result, killed = "killed", True
            notes.append(
                f"[process limit: the cell started more than {lim['max_procs']} processes and was stopped]"
            )
        elif status is not None:
            if status.get("ok"):
                result = "ok"
            elif status.get("exc") == "MemoryError":
                result, killed = "killed", True
                notes.append(f"[memory limit: the cell ran out of its {lim['memory_mb']} MB address space]")
            else:
                result = "error"
                missing = status.get("missing")
        elif outcome.wait_status is not None and os.WIFSIGNALED(outcome.wait_status):
            sig = os.WTERMSIG(outcome.wait_status)
            result, killed = "killed", True
            if sig == signal.SIGKILL:
                notes.append("[killed: the process was killed (SIGKILL), e.g. for running out of memory]")
            elif sig == signal.SIGXFSZ:
                notes.append(f"[file size limit: the cell wrote a file larger than {lim['max_file_mb']} MB]")
            else:
                notes.append(f"[killed: the process died from {_signal_name(sig)}]")
        elif outcome.wait_status is not None and os.WIFEXITED(outcome.wait_status):
            result = "error"
            notes.append(
                f"[the process exited with status {os.WEXITSTATUS(outcome.wait_status)} before the cell "
                "finished (os._exit?)]"
            )
        else:
            result, killed = "killed", True
            notes.append("[killed: the process ended without reporting a result]")
        if restarted and self.mode == "persistent":
            notes.append("[the interpreter was restarted: variables and imports from earlier cells are lost]")
        raw = bytes(outcome.output[: lim["max_output_bytes"]])
        text = decode_output(raw)
        note_text = "\n".join(notes)
        if lim.get("observation_head_chars") is not None:
            body, cut = truncate_head_tail(
                text, int(lim["observation_head_chars"]), int(lim["observation_tail_chars"])
            )
        else:
            budget = int(lim["max_observation_chars"]) - (len(note_text) + 1 if notes else 0)
            body, cut = truncate_observation(text, max(budget, 64))
        truncated = truncated or cut
        if notes:
            body = f"{body}\n{note_text}" if body and not body.endswith("\n") else f"{body}{note_text}"
        return {
            "op": "result",
            "status": result,
            "output": body,
            "truncated": truncated,
            "timed_out": timed_out,
            "killed": killed,
            "restarted": restarted,
            "missing_module": missing,
            "replay_failed": list(status.get("replay_failed", [])) if status else [],
            "duration_s": outcome.duration_s,
        }


@dataclass
class _Kernel:
    """The worker's handle on a persistent interpreter."""

    pid: int
    out_r: int
    req_w: int
    st_r: int
    wait_status: int | None = None
    closed: bool = False

    def alive(self) -> bool:
        if self.wait_status is not None:
            return False
        try:
            wpid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        if wpid == self.pid:
            self.wait_status = status
            return False
        return True

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        if self.wait_status is None:
            try:
                wpid, status = os.waitpid(self.pid, 0)
                if wpid == self.pid:
                    self.wait_status = status
            except ChildProcessError:
                pass

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            for fd in (self.out_r, self.req_w, self.st_r):
                with contextlib.suppress(OSError):
                    os.close(fd)


def _kernel_loop() -> None:
    """The persistent interpreter: run each requested cell in one namespace, report after each."""
    _warm_up(pandas=True)
    namespace = _new_main_module()
    while True:
        msg = read_frame_fd(_KERNEL_IN_FD)
        if msg is None:
            return
        if msg.get("invalidate_caches"):
            importlib.invalidate_caches()
        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = used.ru_utime + used.ru_stime
        soft = math.ceil(spent + float(msg.get("cpu_s", 30.0)))
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))
        status = run_code(str(msg["code"]), str(msg["filename"]), namespace, silent=False)
        _flush_std()
        write_frame_fd(_KERNEL_OUT_FD, status)


def main() -> None:
    """Entry point (``python -c`` bootstrap in :mod:`datadojo.sandbox.isolation`)."""
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    # Anything an import prints must not corrupt the protocol: fd 1 becomes the log (fd 2).
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    settings = read_frame_fd(proto_in)
    if settings is None:
        return
    worker = Worker(settings, proto_in, proto_out, devnull)
    try:
        ready = worker.prepare()
    except Exception as exc:
        write_frame_fd(
            proto_out, {"op": "error", "message": f"worker start-up failed: {type(exc).__name__}: {exc}"}
        )
        raise
    write_frame_fd(proto_out, ready)
    worker.serve()

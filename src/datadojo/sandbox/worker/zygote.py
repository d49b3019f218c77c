"""The worker process itself: set-up, the request loop, chunked/SQL children and the kernel, clean-up.

:class:`Zygote` holds the warm interpreter, answers the harness (one handler per request ``op``), hands
each execution to a forked child (:mod:`.child`) or the persistent kernel (:mod:`.kernel`), watches it
(:mod:`.supervisor`), replies (:mod:`.reply`), and afterwards kills whatever the code left running
(:func:`.procfs.sweep`). :func:`main` is the entry point the isolation bootstrap runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import importlib
import linecache
import os
import select
import shutil
import signal
import sys
import types
from collections.abc import Callable
from typing import Any

from datadojo.sandbox.cells import compile_cell, register_source
from datadojo.sandbox.landlock import build_ruleset
from datadojo.sandbox.protocol import ProtocolError, read_frame_fd, write_frame_fd
from datadojo.sandbox.seccomp import prepare as prepare_seccomp
from datadojo.sandbox.worker.child import Child, Forker, child_main, fork_child
from datadojo.sandbox.worker.execution import chunk_list, warm_up
from datadojo.sandbox.worker.heldpaths import hold_paths
from datadojo.sandbox.worker.kernel import Kernel, start_kernel
from datadojo.sandbox.worker.procfs import (
    PR_SET_CHILD_SUBREAPER,
    PR_SET_DUMPABLE,
    exited,
    kill_everything_now,
    kill_session,
    prctl,
    proc_stat,
    quick_clean,
    reap_pid,
    sweep,
)
from datadojo.sandbox.worker.reply import build_reply
from datadojo.sandbox.worker.supervisor import CellOutcome, drain, supervise

__all__ = ["Finish", "Zygote", "main", "run_worker"]

#: What runs after the reply has been sent: reaping, the sweep, forking the next spare child.
Finish = Callable[[], None]
#: A request handler: the reply, and what to do once it has been sent (or ``None``).
_Handler = Callable[[dict[str, Any]], tuple[dict[str, Any], Finish | None]]


class Zygote:
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
        self.forker = Forker(
            limits=self.limits,
            cell_uid=self.cell_uid,
            is_root=self.is_root,
            parent=self.pid,
            seed=self.seed,
            devnull=devnull,
            # Forked by the pool's fork server: no pandas warm-up per kernel (CPU and pages per sandbox).
            warm_kernel=not settings.get("forked"),
            seccomp=settings.get("seccomp"),
        )
        self.kernel: Kernel | None = None
        self.spare: Child | None = None
        # Chunked mode: re-run the kept chunks in the next child right after a cell, while the model
        # thinks, instead of when the next cell arrives (see SandboxConfig.prereplay).
        self.prereplay: bool = bool(settings.get("prereplay", True)) and self.mode == "chunked"
        self.kept: list[tuple[str, str]] = []  # the chunks the harness keeps, as far as we know
        self.linecache_base: dict[str, Any] = {}
        # Silent versions of chunks that already ran successfully in a child, compiled once here so that
        # every later replay inherits the code objects instead of re-parsing the whole history.
        self.compiled: dict[tuple[str, str], types.CodeType] = {}
        self.handlers: dict[str, _Handler] = {
            "python": self.execute,
            "sql": self.execute,
            "ping": lambda _msg: ({"op": "pong"}, None),
            "reset": lambda _msg: self.reset(),
        }

    # --------------------------------------------------------------- set-up
    def prepare(self) -> dict[str, Any]:
        """Become a subreaper, import the preload modules, fork the first child; the ``ready`` message."""
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        prctl(PR_SET_DUMPABLE, 0)  # cells sharing our uid (user-namespace mode) cannot ptrace us
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
        if not self.settings.get("forked"):
            # A worker forked by the pool's fork server skips this: the server warmed up and froze
            # before forking, and doing it again here would only copy the pages it shares with it.
            warm_up(pandas=True)
            # Objects that exist now are never collected in a child: a collection would touch (and so
            # copy) every page the child shares with us.
            gc.collect()
        held = self.settings.get("held_paths")
        if held:  # cells under their own uid, the Python tree behind a folder they cannot traverse
            fds = hold_paths([str(p) for p in held])
            self.forker = dataclasses.replace(self.forker, held_fds=tuple(fds))
        if self.forker.seccomp is not None:
            prepare_seccomp(deny_unix_sockets=bool(self.forker.seccomp.get("deny_unix_sockets")))
        gc.freeze()
        # What a fresh worker's line cache holds; a reset puts it back (see reset).
        self.linecache_base = dict(linecache.cache)
        landlock = self._landlock()
        self._start_execution_process()
        return {
            "landlock": landlock,
            "op": "ready",
            "pid": self.pid,
            "preloaded": preloaded,
            "errors": errors,
            "threads": len(os.listdir("/proc/self/task")),
            "python": sys.version.split()[0],
        }

    def _landlock(self) -> dict[str, Any] | None:
        """Landlock level: build the ruleset every cell process will confine itself with; what it covers.

        Fails the start-up (no silent downgrade) when it cannot be built.
        """
        paths = self.settings.get("landlock")
        if not paths:
            return None
        fd, coverage = build_ruleset(
            read_exec=paths["read_exec"], read=paths["read"], read_write=paths["read_write"]
        )
        os.close(fd)  # each child builds its own (it names the child's /proc entry)
        self.forker = dataclasses.replace(self.forker, landlock=paths)
        return coverage.to_dict()

    def _start_execution_process(self) -> None:
        """The kernel (persistent mode) or the first spare child (chunked mode)."""
        if self.mode == "persistent":
            self.kernel = start_kernel(self.forker)
        else:
            self.spare = self._fork_child()

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
            reply, finish = self.handle(msg)
            write_frame_fd(self.proto_out, reply)
            if finish is not None:
                try:
                    finish()
                except Exception as exc:  # e.g. fork failed under memory pressure: the next request retries
                    sys.stderr.write(f"worker: clean-up after a cell failed: {type(exc).__name__}: {exc}\n")
        self.shutdown()

    def handle(self, msg: dict[str, Any]) -> tuple[dict[str, Any], Finish | None]:
        """The reply to one request (never raises), and what to run once it is sent."""
        op = msg.get("op")
        try:
            handler = self.handlers.get(op) if isinstance(op, str) else None
            if handler is None:
                return {"op": "error", "message": f"unknown request {op!r}"}, None
            return handler(msg)
        except Exception as exc:  # a bug here must not kill the sandbox silently
            return {"op": "error", "message": f"worker error: {type(exc).__name__}: {exc}"}, None

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

    def reset(self) -> tuple[dict[str, Any], Finish]:
        """Forget the trajectory: end every cell process, empty the private /tmp, start a fresh child.

        What lets a pool hand this worker to the next trajectory instead of starting a new one (a cold
        start is an interpreter plus the pandas import). The worker itself never runs agent code, so
        after this nothing of the previous trajectory is left but the workspace, which the harness empties.

        Every process of the trajectory gets its SIGKILL before the reply, so none of them runs again once
        the harness has it; reaping them (a kernel's address space takes ~10 ms to tear down), the sweep,
        the /tmp wipe and the fresh kernel or child come after the reply, while the harness empties the
        workspace and the next trajectory's model writes its first turn (the next request is read only
        once they are done).
        """
        kill_everything_now(self.pid, pidns=self.pidns)

        def finish() -> None:
            if self.kernel is not None:
                self.kernel.kill()
                self.kernel.close()
                self.kernel = None
            if self.spare is not None:
                self._dispose(self.spare)
                self.spare = None
            self.sweep(keep=set(), sessions=set())
            self._wipe_private_tmp()
            self.forget_trajectory()
            self._start_execution_process()

        return {"op": "reset"}, finish

    def forget_trajectory(self) -> None:
        """Drop what the worker itself kept of the trajectory: kept and compiled chunks, their source.

        The worker registers every kept chunk's source in its ``linecache`` (for the tracebacks of the
        replays); every later child inherits that cache, so without this a new trajectory could read the
        previous one's cells from ``linecache.cache`` (issue 38, finding 1). The cache goes back to what
        the worker held when it was ready, exactly.
        """
        self.kept = []
        self.compiled = {}
        linecache.cache.clear()
        linecache.cache.update(self.linecache_base)

    def _wipe_private_tmp(self) -> None:
        """Empty the sandbox's own /tmp (a tmpfs under bubblewrap; the host's /tmp is never touched), and
        the /dev/shm of a sandbox's own bubblewrap.

        Cells write there as the cell uid in a sticky directory, so the removal runs as that uid. /dev/shm:
        bubblewrap's ``--dev`` makes it a folder of the sandbox's private /dev; without root it belongs to
        the sandbox's uid, so cells can write it, and a file left there met the next trajectory (issue 38;
        found by the leak probes at ``bwrap`` without root). A worker forked under bubblewrap has a /dev/shm
        tmpfs of its own (``private_shm``); at the Landlock level /dev/shm is the host's, which Landlock
        denies to cells: not touched.
        """
        # A forked worker's /tmp also holds the mounts it bound back (its own workspace folder, a Python
        # path under /tmp): never walked into. /dev/shm is the sandbox's own under bubblewrap (a tmpfs of
        # each worker's, ``private_shm``; a started bubblewrap's own /dev otherwise).
        folders = (
            {"/tmp": set(self.settings.get("tmp_keep") or ())} if self.settings.get("private_tmp") else {}
        )
        if self.settings.get("private_shm") or (
            self.settings.get("private_tmp") and self.pidns and not self.settings.get("forked")
        ):
            folders["/dev/shm"] = set()
        dirty = {}
        for folder, kept in folders.items():
            try:
                if set(os.listdir(folder)) - kept:
                    dirty[folder] = kept
            except OSError:
                pass
        if not dirty:
            return  # nothing written there (most trajectories): no process to fork for it
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                if self.cell_uid is not None and self.is_root:
                    os.setgroups([])
                    os.setresgid(self.cell_uid, self.cell_uid, self.cell_uid)
                    os.setresuid(self.cell_uid, self.cell_uid, self.cell_uid)
                for folder, kept in dirty.items():
                    for name in os.listdir(folder):
                        if name in kept:
                            continue
                        path = os.path.join(folder, name)
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
            kill_session(self.spare.pid, self.spare.pid)
        self.sweep(keep=set(), sessions=set())

    def execute(self, msg: dict[str, Any]) -> tuple[dict[str, Any], Finish]:
        if msg.get("op") == "python" and self.mode == "persistent":
            return self._run_in_kernel(msg)
        return self._run_in_child(msg)

    # --------------------------------------------------------------- supervision and clean-up
    def supervise(
        self,
        pid: int,
        out_r: int,
        status_r: int,
        *,
        session: int,
        cpu_base: float | None = None,
    ) -> CellOutcome:
        """Collect output until ``pid`` reports a status frame or ends; kill it on a limit (see :func:`.supervise`)."""
        return supervise(
            pid,
            out_r,
            status_r,
            limits=self.limits,
            session=session,
            count_procs=self.count_procs,
            cpu_base=cpu_base,
        )

    def sweep(self, *, keep: set[int], sessions: set[int]) -> None:
        """Kill and reap every process a cell left behind but ``keep`` (see :func:`.procfs.sweep`)."""
        sweep(self.pid, pidns=self.pidns, keep=keep, sessions=sessions, on_reaped=self._reaped)

    def _reaped(self, pid: int, status: int) -> None:
        if self.kernel is not None and pid == self.kernel.pid:
            self.kernel.wait_status = status

    def _reply(self, outcome: CellOutcome, *, restarted: bool) -> dict[str, Any]:
        return build_reply(
            outcome, limits=self.limits, restarted=restarted, persistent=self.mode == "persistent"
        )

    # --------------------------------------------------------------- chunked cells and SQL
    def _fork_child(self, prereplay: list[tuple[str, str]] | None = None) -> Child:
        body = functools.partial(child_main, self.compiled, self.sql)
        return fork_child(self.forker, body, prereplay)

    def _take_child(self, msg: dict[str, Any]) -> Child:
        """The spare child if it is alive and has re-run exactly this request's chunks, else a new one."""
        child, self.spare = self.spare, None
        if child is not None:
            alive = reap_pid(child.pid) is None and not exited(child.pid)
            fits = child.prereplayed is None or (
                msg.get("op") == "sql"
                or (child.prereplayed == chunk_list(msg) and child.seed == msg.get("seed", child.seed))
            )
            if alive and fits:
                return child
            self._dispose(child)  # died while waiting, or the harness keeps other chunks than we thought
        return self._fork_child()

    def _dispose(self, child: Child) -> None:
        kill_session(child.pid, child.pid)
        reap_pid(child.pid, block=True)
        for fd in (child.req_w, child.out_r, child.st_r):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _follow_seed(self, msg: dict[str, Any]) -> None:
        """The trajectory's seed comes with every Python request; a child re-running chunks ahead uses it."""
        seed = msg.get("seed")
        if msg.get("op") == "python" and seed is not None and seed != self.forker.seed:
            self.forker = dataclasses.replace(self.forker, seed=int(seed))

    def _run_in_child(self, msg: dict[str, Any]) -> tuple[dict[str, Any], Finish]:
        self._follow_seed(msg)
        child = self._take_child(msg)
        with contextlib.suppress(OSError):  # a child that died already shows up in supervise()
            write_frame_fd(child.req_w, msg)
        os.close(child.req_w)
        child.req_w = -1
        outcome = self.supervise(child.pid, child.out_r, child.st_r, session=child.pid)
        reply = self._reply(outcome, restarted=False)
        return reply, functools.partial(self._after_child, child, msg, reply)

    def _after_child(self, child: Child, msg: dict[str, Any], reply: dict[str, Any]) -> None:
        """Once the reply is sent: end the child, note the kept chunks, sweep, fork the next spare."""
        kill_session(child.pid, child.pid)  # it has reported; nothing it does now counts
        if msg.get("op") == "python":
            # The harness keeps a chunk exactly when it ran without error (Sandbox._run_python).
            self.kept = chunk_list(msg)
            if reply["status"] == "ok":
                self.kept.append((str(msg.get("filename") or "<cell>"), str(msg["code"])))
                self._cache_chunk(*self.kept[-1])
        # In the PID namespace the sweep can spare the next child by pid, so fork it while the
        # kernel tears the old one down; outside it, the quick check needs us child-free first. A
        # child that re-runs chunks ahead may start processes, so it comes after the sweep.
        early = self.mode == "chunked" and self.pidns and not self.prereplay
        if early:
            self.spare = self._fork_child()
        reap_pid(child.pid, block=True)
        for fd in (child.out_r, child.st_r):
            os.close(fd)
        keep = {c.pid for c in (self.spare, self.kernel) if c is not None}
        if self.pidns or not quick_clean(child.pid):
            self.sweep(keep=keep, sessions={child.pid})
        if self.mode == "chunked" and not early:
            self.spare = self._fork_child(self.kept if self.prereplay else None)

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
    def _replace_kernel(self) -> None:
        kernel = self.kernel
        if kernel is not None:
            kernel.kill()
            self.sweep(keep=set(), sessions={kernel.pid})
            kernel.close()
        self.kernel = start_kernel(self.forker)

    def _run_in_kernel(self, msg: dict[str, Any]) -> tuple[dict[str, Any], Finish]:
        restarted = False
        if self.kernel is None or not self.kernel.alive():
            # It died between cells (a background thread crashed it, say): its state is gone already.
            self._replace_kernel()
            restarted = True
        kernel = self.kernel
        assert kernel is not None
        drain(kernel.out_r, 16 << 20)  # output of background threads since the last cell: dropped
        cpu_base = (proc_stat(kernel.pid) or ("", 0, 0, 0, 0.0))[4]
        request = {
            "code": msg["code"],
            "filename": msg.get("filename") or "<cell>",
            "cpu_s": self.limits["cpu_s"],
        }
        if msg.get("invalidate_caches"):
            request["invalidate_caches"] = True
        if msg.get("seed") is not None:
            request["seed"] = msg["seed"]
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
    run_worker(settings, proto_in, proto_out, devnull)


def run_worker(settings: dict[str, Any], proto_in: int, proto_out: int, devnull: int) -> None:
    """Set a worker up, say ``ready`` (or why not), serve until told to exit.

    Shared by :func:`main` (a worker started as its own interpreter) and the pool's fork server
    (:mod:`.forkserver`: a worker forked from an interpreter that imported the preload modules once).
    """
    worker = Zygote(settings, proto_in, proto_out, devnull)
    try:
        ready = worker.prepare()
    except Exception as exc:
        write_frame_fd(
            proto_out, {"op": "error", "message": f"worker start-up failed: {type(exc).__name__}: {exc}"}
        )
        raise
    write_frame_fd(proto_out, ready)
    worker.serve()

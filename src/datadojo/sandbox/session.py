"""The harness side of one trajectory's sandbox: :class:`Sandbox` (async) and :func:`run_cells` (sync).

A :class:`Sandbox` owns a workspace and a worker process (see :mod:`datadojo.sandbox.worker`). It checks
each cell against the static policy, sends it to the worker, and turns the reply into an
:class:`~datadojo.sandbox.result.ExecResult`. In chunked mode it also keeps the text of the chunks that
succeeded (DataMind §4: "retaining only text chunks, concatenating at runtime"); because they live here and
not in the worker, even a worker that had to be restarted replays the trajectory's state.

Failures are contained per sandbox: a worker that dies or stops answering is killed and restarted on the
next cell, and the cell that broke it gets a ``killed``/``timeout`` result, never an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import posixpath
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from datadojo.errors import DataDojoError, ExitCode
from datadojo.sandbox.cells import render_parts
from datadojo.sandbox.config import SandboxConfig
from datadojo.sandbox.files import SandboxFiles
from datadojo.sandbox.install import default_install_dir, ensure_module
from datadojo.sandbox.isolation import (
    LaunchPlan,
    allocate_uid,
    build_launch,
    resolve_isolation,
)
from datadojo.sandbox.policy import check_code, format_violations
from datadojo.sandbox.protocol import ProtocolError, encode_frame, read_frame_async
from datadojo.sandbox.result import ExecResult
from datadojo.sandbox.seeding import new_seed
from datadojo.sandbox.workspace import WORKSPACE_MOUNT, Workspace
from datadojo.types import DataFile

__all__ = ["Sandbox", "SandboxError", "run_cells"]

log = logging.getLogger("datadojo.sandbox")

#: Seconds the harness waits beyond ``wall_s`` before it gives up on a worker (which enforces wall_s).
_GRACE_S = 15.0
_LOG_TAIL = 2000


class SandboxError(DataDojoError, RuntimeError):
    """The sandbox itself failed (could not start its worker, was used after close)."""

    exit_code = ExitCode.SANDBOX


class WorkerProcess:
    """One worker process as seen from the harness: start it, exchange messages, stop it."""

    def __init__(self, plan: LaunchPlan, log_path: Path, cell_uid: int | None) -> None:
        self.plan = plan
        self.log_path = log_path
        self.cell_uid = cell_uid
        self.proc: asyncio.subprocess.Process | None = None
        self.ready: dict[str, Any] = {}
        self.broken = False
        self.start_timeout_s = 120.0

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None and not self.broken

    def log_tail(self) -> str:
        try:
            data = self.log_path.read_bytes()[-_LOG_TAIL:]
        except OSError:
            return ""
        return data.decode("utf-8", "replace").strip()

    async def _open(self) -> None:
        """Start the process (a fork server's handle forks it instead: :mod:`datadojo.sandbox.forkserver`)."""
        with open(self.log_path, "ab") as log_file:
            self.proc = await asyncio.create_subprocess_exec(
                *self.plan.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log_file,
                env=self.plan.env,
                cwd=self.plan.cwd,
                start_new_session=True,
                limit=1 << 20,
            )

    async def start(self, timeout_s: float) -> None:
        self.start_timeout_s = timeout_s
        await self._open()
        try:
            self._send({"op": "init", **self.plan.settings})
            reply = await asyncio.wait_for(self._receive(), timeout_s)
        except (TimeoutError, ProtocolError, OSError) as exc:
            await self.kill()
            detail = self.log_tail()
            raise SandboxError(
                f"the sandbox worker did not start ({type(exc).__name__}: {exc})"
                + (f"; its log ends with:\n{detail}" if detail else "")
            ) from None
        except BaseException:  # cancelled: do not leave the process behind
            await self.kill()
            raise
        if reply.get("op") != "ready":
            await self.kill()
            raise SandboxError(f"the sandbox worker did not start: {reply.get('message', reply)}")
        if reply.get("errors"):
            log.warning("sandbox worker could not preload: %s", "; ".join(reply["errors"]))
        self.ready = reply

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(encode_frame(message))

    async def _receive(self) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        return await read_frame_async(self.proc.stdout)

    async def call(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """Send a request and wait for its reply; ``TimeoutError`` / ``ProtocolError`` leave it broken."""
        assert self.proc is not None and self.proc.stdin is not None
        self.broken = True  # until a complete reply arrives, the channel's state is unknown
        try:
            self._send(message)
            await self.proc.stdin.drain()
        except (ConnectionError, OSError) as exc:
            raise ProtocolError(f"the worker closed its channel ({exc})") from None
        reply = await asyncio.wait_for(self._receive(), timeout_s)
        self.broken = False
        return reply

    async def stop(self) -> None:
        """Make sure the worker and everything it started are gone.

        Under bubblewrap killing it is enough (the PID namespace dies with it, taking every process in
        it along); in the reduced mode the worker is asked to exit first, so that it can sweep the
        processes its cells left.
        """
        if self.proc is None:
            return
        # A worker forked by a pool's fork server has no PID namespace of its own, even under bubblewrap.
        graceful = self.plan.isolation != "bwrap" or bool(self.plan.settings.get("forked"))
        if graceful and self.proc.returncode is None and not self.broken and self.proc.stdin is not None:
            with contextlib.suppress(Exception):
                self._send({"op": "exit"})
                self.proc.stdin.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 2.0)
        await self.kill()

    async def kill(self) -> None:
        """Kill the worker (bubblewrap takes the whole PID namespace down with it)."""
        proc = self.proc
        if proc is None:
            return
        if proc.returncode is None:
            # Signals go straight to the pid (not via Popen.kill, whose poll() would reap the process
            # behind asyncio's child watcher); until the watcher reaps it, the pid cannot be reused.
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            await proc.wait()
        if proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        if self.plan.isolation != "bwrap" and self.cell_uid is not None:
            await asyncio.to_thread(_kill_uid, self.cell_uid)
        self.broken = True


def _kill_uid(uid: int) -> None:
    """Reduced isolation with a dedicated uid: no process of that uid may outlive its sandbox."""
    for _ in range(50):
        found = False
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                if os.stat(f"/proc/{name}").st_uid != uid:
                    continue
                os.kill(int(name), signal.SIGKILL)
                found = True
            except OSError:
                continue
        if not found:
            return
        time.sleep(0.01)


class Sandbox:
    """One trajectory's sandbox: its own workspace (copies / read-only views of its data files) and worker.

    Create it with ``await Sandbox.create(files, config)`` (or take one from a
    :class:`~datadojo.sandbox.pool.SandboxPool`), run cells with ``await sandbox.run(code)``, and close it
    (``async with`` does). Data files appear in the working directory under their visible names.
    """

    def __init__(
        self, config: SandboxConfig, workspace: Workspace, isolation: str, cell_uid: int | None
    ) -> None:
        self.config = config
        self._ws = workspace
        self.workspace: Path = workspace.path
        self.isolation = isolation
        self.cell_uid = cell_uid
        #: The trajectory's random seed (``random``, numpy): see :meth:`reseed`. A fresh one per trajectory
        #: unless the caller gives one (the agent loop derives it from the task and the sample).
        self.seed = new_seed()
        self._worker: WorkerProcess | None = None
        self._lock = asyncio.Lock()
        self._chunks: list[list[str]] = []
        self._reported_failures: set[str] = set()  # kept chunks whose failing replay was reported
        self._turn = 0
        self._sql_turn = 0
        self._closed = False
        self._worker_starts = 0
        self._install_dir = Path(config.install_dir) if config.install_dir else default_install_dir()
        self._fork_server: Any = None  # a pool's ForkServer forks the worker instead of starting one

    # ------------------------------------------------------------------ life cycle
    @classmethod
    async def create(
        cls,
        files: Sequence[DataFile | str | os.PathLike[str]] = (),
        config: SandboxConfig | None = None,
        *,
        seed: int | None = None,
    ) -> Sandbox:
        """Start a sandbox (workspace + warm worker) holding ``files``; ``seed``: see :meth:`reseed`."""
        sandbox = await cls.launch(config or SandboxConfig())
        if seed is not None:
            sandbox.reseed(seed)
        try:
            await sandbox.add_files(files)
        except BaseException:
            await sandbox.close()
            raise
        return sandbox

    @classmethod
    async def launch(cls, config: SandboxConfig | None = None, *, fork_server: Any = None) -> Sandbox:
        """Start a sandbox with an empty workspace (what a pool keeps warm); add files later.

        ``fork_server`` (a started :class:`~datadojo.sandbox.forkserver.ForkServer` of this level): fork
        the worker from that pre-imported interpreter instead of starting one; under bubblewrap the
        workspace is then made in the server's root, the one folder its bubblewrap sandbox shows.
        """
        config = config or SandboxConfig()
        isolation = await asyncio.to_thread(resolve_isolation, config.isolation)  # probes once, blocking
        # Under a bubblewrap fork server the worker sees the host's paths (the pool's root is bound at
        # its own path), and its cells confine themselves with Landlock as at that level.
        host_paths = isolation == "landlock" or (isolation == "bwrap" and fork_server is not None)
        if fork_server is not None and (isolation == "bwrap") != (fork_server.isolation == "bwrap"):
            raise SandboxError(
                f"this pool's fork server runs at level {fork_server.isolation!r}, not {isolation!r}"
            )
        # As root, cells run under a uid of their own at every level: under bubblewrap the Python tree is
        # bound with traversable parents; elsewhere a tree other users cannot reach (pyenv under /root)
        # is held open by the worker for them (datadojo.sandbox.worker.heldpaths).
        uid = allocate_uid()
        parent = config.workspace_root
        if isolation == "bwrap" and fork_server is not None:
            parent = fork_server.root  # the one folder the pool's bubblewrap sandbox shows
        workspace = await asyncio.to_thread(
            Workspace.create,
            placement="copy" if isolation == "reduced" else "view",
            link_root="host" if host_paths else None,
            uid=uid,
            parent=parent,
            keep=config.keep_workspace,
        )
        sandbox = cls(config, workspace, isolation, uid)
        sandbox._fork_server = fork_server
        try:
            if config.auto_install:
                await asyncio.to_thread(sandbox._install_dir.mkdir, parents=True, exist_ok=True)
            await sandbox._start_worker()
        except BaseException:
            await asyncio.to_thread(workspace.cleanup)
            raise
        return sandbox

    async def add_files(self, files: Sequence[DataFile | str | os.PathLike[str]]) -> list[DataFile]:
        """Place data files in the workspace (allowed while the worker runs: mounts show new files)."""
        if self._closed:
            raise SandboxError("the sandbox is closed")
        return await asyncio.to_thread(self._ws.add_files, list(files))

    @property
    def files(self) -> dict[str, DataFile]:
        """The data files placed so far, by visible name."""
        return dict(self._ws.files)

    @property
    def file_access(self) -> SandboxFiles:
        """The harness's access to this sandbox's files by the names the agent's code uses (confined to
        the working directory and the inputs; see :mod:`datadojo.sandbox.files`)."""
        views = [(self.code_workspace, self.workspace)]
        if self._ws.placement == "view":
            views.append((self._ws.link_root, self._ws.inputs))
        if self.code_workspace != str(self.workspace):  # the host path names the same folder
            views.append((str(self.workspace), self.workspace))
        return SandboxFiles(views, self.cell_uid)

    async def read_file(self, file: str, *, max_bytes: int | None = None) -> bytes:
        """The bytes of ``file`` as the agent's code names it (relative to its working directory)."""
        if self._closed:
            raise SandboxError("the sandbox is closed")
        return await asyncio.to_thread(self.file_access.read, file, max_bytes=max_bytes)

    async def write_file(self, file: str, contents: bytes) -> None:
        """Write ``file`` in the working directory, as the agent's code names it (atomic; parents made)."""
        if self._closed:
            raise SandboxError("the sandbox is closed")
        await asyncio.to_thread(self.file_access.write, file, contents)

    @property
    def landlock(self) -> dict[str, Any] | None:
        """At the Landlock level, what the worker's ruleset covers (ABI, files, TCP, scopes); else ``None``."""
        worker = self._worker
        return worker.ready.get("landlock") if worker is not None else None

    @property
    def alive(self) -> bool:
        """Whether the worker is running (a dead one is restarted by the next :meth:`run`)."""
        return not self._closed and self._worker is not None and self._worker.alive

    async def _start_worker(self) -> None:
        cfg = self.config
        settings = {
            "mode": cfg.mode,
            "limits": cfg.limits.to_dict(),
            "preload": list(cfg.preload),
            "cell_uid": self.cell_uid,
            "seed": self.seed,
            "sql": {"row_limit": cfg.sql_row_limit, "timeout_s": cfg.sql_timeout_s},
            "prereplay": cfg.prereplay,
        }
        extra = [str(self._install_dir)] if cfg.auto_install else []
        plan = build_launch(
            self._ws,
            isolation=self.isolation,
            settings=settings,
            tmp_mb=cfg.limits.max_file_mb,
            extra_paths=extra,
            forked=self._fork_server is not None,
        )
        log_path = self._ws.root / "worker.log"
        worker = (
            WorkerProcess(plan, log_path, self.cell_uid)
            if self._fork_server is None
            else self._fork_server.worker(plan, log_path, self.cell_uid)
        )
        await worker.start(cfg.start_timeout_s)
        self._worker = worker
        self._worker_starts += 1

    def reseed(self, seed: int) -> None:
        """Seed this trajectory's random streams (``random``, numpy's global generator) with ``seed``.

        Takes effect from the next cell: a chunked cell's process seeds itself before it re-runs the
        kept chunks, a persistent kernel when the first cell with a new seed arrives. Call it before the
        first cell (the agent loop does, with :func:`~datadojo.sandbox.seeding.trajectory_seed` of the task and sample) so that a
        trajectory is reproducible and the samples of one task do not all draw the same numbers.
        """
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"a sandbox seed must be a non-negative int, got {seed!r}")
        self.seed = seed

    async def reset(self, seed: int | None = None) -> None:
        """Make this sandbox fresh for another trajectory without restarting its worker.

        The worker ends every process of the previous trajectory, empties its private /tmp, puts its own
        caches back as they were when it started and forks a fresh child (or interpreter); the workspace
        and the data files are emptied; kept chunks are forgotten; the next trajectory gets ``seed`` or a
        fresh random one. Raises :class:`SandboxError` when the worker is not healthy: close the sandbox then.
        """
        async with self._lock:
            if self._closed:
                raise SandboxError("the sandbox is closed")
            worker = self._worker
            if worker is None or not worker.alive or worker.broken:
                raise SandboxError("the sandbox's worker is not running")
            try:
                reply = await worker.call({"op": "reset"}, self.config.start_timeout_s)
            except (TimeoutError, ProtocolError) as exc:
                raise SandboxError(f"resetting the worker failed: {exc}") from exc
            if reply.get("op") != "reset":
                raise SandboxError(f"resetting the worker failed: {reply.get('message', reply)}")
            await asyncio.to_thread(self._ws.reset)
            self._chunks.clear()
            self._reported_failures.clear()
            self._turn = 0
            self._sql_turn = 0
            self.seed = new_seed() if seed is None else seed

    async def close(self) -> None:
        """Stop the worker and remove the workspace (unless ``keep_workspace``); safe to call twice."""
        if self._closed:
            return
        self._closed = True
        async with self._lock:
            if self._worker is not None:
                await self._worker.stop()
                self._worker = None
        await asyncio.to_thread(self._ws.cleanup)

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ running code
    @property
    def code_workspace(self) -> str:
        """The working directory as the agent's code sees it (``/workspace`` under bubblewrap, unless a
        pool's fork server forked the worker: then its host path, as at the Landlock level)."""
        own_mounts = self.isolation == "bwrap" and self._fork_server is None
        return WORKSPACE_MOUNT if own_mounts else str(self.workspace)

    async def run(
        self, code: str, *, language: Literal["python", "sql"] = "python", db: str | None = None
    ) -> ExecResult:
        """Run one cell (Python, or one SQL statement against ``db`` / the task's SQLite file)."""
        if language not in ("python", "sql"):
            raise ValueError(f"language must be 'python' or 'sql', got {language!r}")
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        async with self._lock:
            if self._closed:
                raise SandboxError("the sandbox is closed")
            start = time.perf_counter()
            try:
                if language == "python":
                    result = await self._run_python(code)
                else:
                    result = await self._run_sql(code, db)
            except asyncio.CancelledError:
                await self._discard_worker()
                raise
            result.duration_s = time.perf_counter() - start
            return result

    async def _run_python(self, code: str) -> ExecResult:
        violations = check_code(code, self.config.policy, workspace=self.code_workspace)
        if violations:
            return ExecResult.make(format_violations(violations), "rejected", isolation=self.isolation)
        self._turn += 1
        filename = f"<cell-{self._turn}>"
        chunks = self._chunks if self.config.mode == "chunked" else []
        message = {
            "op": "python",
            "code": code,
            "filename": filename,
            "chunks": chunks,
            "reported_failures": sorted(self._reported_failures),
            "seed": self.seed,
        }
        result = await self._call_installing(message)
        if self.config.mode == "chunked" and result.status == "ok":
            self._chunks.append([filename, code])
        return result

    async def _run_sql(self, query: str, db: str | None) -> ExecResult:
        name = db
        if name is None:
            names = self._ws.sqlite_names()
            if len(names) != 1:
                which = "no SQLite file" if not names else f"several SQLite files ({', '.join(names)})"
                return ExecResult.make(
                    f"SQL error: this task has {which}; name the database to query",
                    "error",
                    isolation=self.isolation,
                )
            name = names[0]
        normal = posixpath.normpath(name)
        if posixpath.isabs(normal) or normal.startswith("..") or not os.path.lexists(self.workspace / normal):
            return ExecResult.make(
                f"SQL error: no database {name!r} in the working directory", "error", isolation=self.isolation
            )
        self._sql_turn += 1
        save_csv = f"sql_result_{self._sql_turn}.csv" if self.config.sql_save_csv else None
        message = {
            "op": "sql",
            "db": posixpath.join(self.code_workspace, normal),
            "query": query,
            "save_csv": save_csv,
        }
        return await self._call_installing(message)

    async def _call_installing(self, message: dict[str, Any]) -> ExecResult:
        """Call the worker; with ``auto_install``, install a missing allowed module and run again."""
        reply = await self._call(message)
        installed: list[str] = []
        before: list[str] = []
        after: list[str] = []
        tried: set[str] = set()
        while self.config.auto_install and reply.get("status") == "error" and reply.get("missing_module"):
            module = str(reply["missing_module"]).split(".")[0]
            if module in tried:
                break
            tried.add(module)
            outcome = await ensure_module(module, self.config.install_allowlist, self._install_dir)
            if not outcome.installed:
                after.append(outcome.note)
                break
            installed.append(str(outcome.distribution))
            before.append(outcome.note)
            reply = await self._call({**message, "invalidate_caches": True})
        self._reported_failures.update(reply.get("replay_failed") or [])
        output = str(reply.get("output", ""))
        # The worker's reply says which pieces the cell printed; a reply made here is the harness's own.
        parts = [(str(s), str(t)) for s, t in reply.get("parts") or ([("harness", output)] if output else [])]
        if before:
            parts.insert(0, ("harness", "\n".join(before) + "\n"))
        if after:
            parts.append(
                ("harness", ("" if not output or output.endswith("\n") else "\n") + "\n".join(after))
            )
        return ExecResult.make(
            render_parts(parts),
            str(reply.get("status", "env_error")),
            timed_out=bool(reply.get("timed_out")),
            killed=bool(reply.get("killed")),
            truncated=bool(reply.get("truncated")),
            isolation=self.isolation,
            installed=installed,
            restarted=bool(reply.get("restarted")),
            parts=parts,
        )

    async def _call(self, message: dict[str, Any]) -> dict[str, Any]:
        """One request to the worker, (re)starting it if needed; worker failures become replies."""
        if self._worker is None or not self._worker.alive:
            await self._discard_worker()
            try:
                await self._start_worker()
            except SandboxError as exc:
                return {"status": "env_error", "output": f"[sandbox error: {exc}]"}
        worker = self._worker
        assert worker is not None
        persistent = self.config.mode == "persistent"
        lost = " (variables from earlier cells are lost)" if persistent else ""
        try:
            reply = await worker.call(message, self.config.limits.wall_s + _GRACE_S)
        except TimeoutError:
            await self._discard_worker()
            return {
                "status": "timeout",
                "output": f"[timeout: the sandbox did not answer within {self.config.limits.wall_s + _GRACE_S:g} s; "
                f"it was restarted{lost}]",
                "timed_out": True,
                "restarted": persistent,
            }
        except ProtocolError as exc:
            # The worker is the sandbox's supervisor, not the cell: its death (killed from outside, the OOM
            # killer, a cell that signalled it) is an environment failure, so the agent loop ends the
            # trajectory as ``env_error`` instead of showing the model an observation it did not cause.
            await self._discard_worker()
            return {
                "status": "env_error",
                "output": f"[killed: the sandbox worker died during this cell ({exc}); it will be restarted{lost}]",
                "killed": True,
                "restarted": persistent,
            }
        if reply.get("op") != "result":
            return {"status": "env_error", "output": f"[sandbox error: {reply.get('message', reply)}]"}
        return reply

    async def _discard_worker(self) -> None:
        if self._worker is not None:
            await self._worker.kill()
            self._worker = None


def run_cells(
    cells: Sequence[str],
    files: Sequence[DataFile | str | os.PathLike[str]] = (),
    config: SandboxConfig | None = None,
    language: Literal["python", "sql"] = "python",
) -> list[ExecResult]:
    """Run ``cells`` as consecutive turns of one fresh sandbox (synchronous convenience wrapper)."""

    async def _go() -> list[ExecResult]:
        async with await Sandbox.create(files, config or SandboxConfig()) as sandbox:
            return [await sandbox.run(cell, language=language) for cell in cells]

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_go())
    raise SandboxError("run_cells() cannot be called from a running event loop; use `await Sandbox.run(...)`")

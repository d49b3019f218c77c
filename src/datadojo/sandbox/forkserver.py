"""The harness side of a pool's fork server: one pre-imported interpreter that forks every worker.

A :class:`~datadojo.sandbox.pool.SandboxPool` with ``SandboxConfig(fork_server=True)`` starts one
:class:`ForkServer` (an interpreter that imports ``preload`` — numpy, pandas — once; see
:mod:`datadojo.sandbox.worker.forkserver`) and has it fork the worker of every sandbox. Warming N sandboxes
then costs one interpreter start and one pandas import plus N forks, instead of N of each, and the
workers share the imported pages copy-on-write (``benchmarks/rollout.py`` measures both).

Only at the Landlock and reduced levels, where the worker and its cell processes draw every boundary
themselves (uid, Landlock ruleset, limits, sweep); the server runs in its own network, IPC and UTS
namespaces when ``unshare`` works, shared by the pool's workers (no network for any of them). A forked
worker is not in a PID namespace of its own, so it sweeps by process tree (it is a child subreaper), as
in the reduced mode without ``unshare``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from datadojo.sandbox.isolation import LaunchPlan, _base_env, _search_paths, unshare_available
from datadojo.sandbox.session import SandboxError, WorkerProcess, _kill_uid

__all__ = ["FORK_SERVER_BOOTSTRAP", "ForkServer", "ForkedWorkerProcess"]

log = logging.getLogger("datadojo.sandbox")

#: Run by ``python -I -B -c``: the harness's import paths first, then the fork server.
FORK_SERVER_BOOTSTRAP = (
    "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
    "from datadojo.sandbox.worker.forkserver import main; main()"
)
_MAX_MESSAGE = 1 << 20
_UNSHARE = ("--net", "--ipc", "--uts")


class ForkServer:
    """One pre-imported interpreter forking workers on request; ``await start()``, ``worker()``, ``close()``."""

    def __init__(self, preload: tuple[str, ...], *, extra_paths: list[str] | None = None) -> None:
        self.preload = tuple(preload)
        self.extra_paths = [p for p in (extra_paths or []) if os.path.isdir(p)]
        self.pid: int | None = None
        self.ready: dict[str, Any] = {}
        self._proc: asyncio.subprocess.Process | None = None
        self._sock: socket.socket | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._dir: Path | None = None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None and self._sock is not None

    async def start(self, timeout_s: float = 120.0) -> None:
        """Start the server and wait until it has imported ``preload``."""
        self._dir = Path(tempfile.mkdtemp(prefix="datadojo-forkserver-"))
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [
            sys.executable,
            "-I",
            "-B",
            "-c",
            FORK_SERVER_BOOTSTRAP,
            json.dumps(_search_paths(self.extra_paths)),
        ]
        if unshare_available():
            argv = [str(shutil.which("unshare")), *_UNSHARE, "--", *argv]
        try:
            with open(self._dir / "server.log", "ab") as log_file:
                self._proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=child.fileno(),
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=log_file,
                    env=_base_env(str(self._dir), str(self._dir)),
                    cwd=str(self._dir),
                    start_new_session=True,
                )
        finally:
            child.close()
        parent.setblocking(False)
        self._sock = parent
        self.pid = self._proc.pid
        try:
            await self._send({"op": "hello", "preload": list(self.preload)})
            reply = await asyncio.wait_for(self._receive(), timeout_s)
        except (TimeoutError, OSError, ValueError) as exc:
            await self.close()
            raise SandboxError(
                f"the sandbox fork server did not start ({type(exc).__name__}: {exc})"
            ) from None
        if reply.get("op") != "ready":
            await self.close()
            raise SandboxError(f"the sandbox fork server did not start: {reply}")
        if reply.get("errors"):
            log.warning("sandbox fork server could not preload: %s", "; ".join(reply["errors"]))
        self.ready = reply

    async def _send(self, message: dict[str, Any], fds: list[int] | None = None) -> None:
        assert self._sock is not None
        data = json.dumps(message).encode("utf-8")
        loop = asyncio.get_running_loop()
        while True:
            try:
                socket.send_fds(self._sock, [data], fds or [])
                return
            except BlockingIOError:
                # One request in flight at a time (the lock), so the buffer empties as soon as the
                # server reads: wait until the socket is writable again.
                writable: asyncio.Future[None] = loop.create_future()
                loop.add_writer(self._sock, _settle, writable)
                try:
                    await writable
                finally:
                    loop.remove_writer(self._sock)

    async def _receive(self) -> dict[str, Any]:
        assert self._sock is not None
        data = await asyncio.get_running_loop().sock_recv(self._sock, _MAX_MESSAGE)
        if not data:
            raise OSError("the fork server closed its socket")
        return json.loads(data)

    async def spawn(self, env: dict[str, str], cwd: str, fds: list[int]) -> int:
        """Fork a worker with ``fds`` (request pipe, reply pipe, log); its pid."""
        async with self._lock:
            if not self.alive:
                raise SandboxError("the sandbox fork server is not running")
            ident = next(self._ids)
            try:
                await self._send({"op": "spawn", "id": ident, "env": env, "cwd": cwd}, fds)
                reply = await self._receive()
            except (OSError, ValueError) as exc:
                raise SandboxError(f"the sandbox fork server failed ({exc})") from None
        if reply.get("op") != "spawned" or reply.get("id") != ident:
            raise SandboxError(
                f"the sandbox fork server could not fork a worker: {reply.get('message', reply)}"
            )
        return int(reply["pid"])

    def worker(self, plan: LaunchPlan, log_path: Path, cell_uid: int | None) -> ForkedWorkerProcess:
        """The handle of one worker this server will fork (``await handle.start(timeout)`` forks it)."""
        if plan.isolation == "bwrap":
            raise SandboxError(
                "a fork server cannot start bubblewrap sandboxes (use isolation landlock or none)"
            )
        # Not in a PID namespace of its own: the worker must sweep its own process tree only.
        settings = {**plan.settings, "pidns": False, "forked": True}
        plan = LaunchPlan(argv=[], env=plan.env, cwd=plan.cwd, isolation=plan.isolation, settings=settings)
        return ForkedWorkerProcess(self, plan, log_path, cell_uid)

    async def close(self) -> None:
        """Stop the server (its workers die with it)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(Exception):
                await proc.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _ForkedProc:
    """What :class:`WorkerProcess` needs of a process (pid, pipes, returncode, wait), for a forked worker.

    The worker is the fork server's child, not ours, so it is watched through a pidfd (readable once it
    has exited) and killed through it (immune to pid reuse).
    """

    def __init__(
        self, pid: int, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader, read_t: Any
    ) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None
        self._read_t = read_t
        self._loop = asyncio.get_running_loop()
        self._exited: asyncio.Future[None] = self._loop.create_future()
        self._pidfd: int | None = os.pidfd_open(pid)
        self._loop.add_reader(self._pidfd, self._on_exit)

    def _on_exit(self) -> None:
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        self.returncode = -signal.SIGKILL if self.returncode is None else self.returncode
        if not self._exited.done():
            self._exited.set_result(None)

    def kill(self) -> None:
        if self._pidfd is not None:
            with contextlib.suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    async def wait(self) -> int:
        await asyncio.shield(self._exited)
        self._read_t.close()
        assert self.returncode is not None
        return self.returncode


class ForkedWorkerProcess(WorkerProcess):
    """A :class:`WorkerProcess` whose process is forked by a :class:`ForkServer` instead of started."""

    def __init__(self, server: ForkServer, plan: LaunchPlan, log_path: Path, cell_uid: int | None) -> None:
        super().__init__(plan, log_path, cell_uid)
        self.server = server

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        log_fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            pid = await self.server.spawn(self.plan.env, self.plan.cwd, [req_r, rep_w, log_fd])
        except BaseException:
            for fd in (req_w, rep_r):
                os.close(fd)
            raise
        finally:
            for fd in (req_r, rep_w, log_fd):
                os.close(fd)
        reader = asyncio.StreamReader(limit=1 << 20)
        read_t, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(rep_r, "rb", buffering=0)
        )
        write_t, write_p = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(req_w, "wb", buffering=0)
        )
        writer = asyncio.StreamWriter(write_t, write_p, None, loop)
        self.proc = _ForkedProc(pid, writer, reader, read_t)  # type: ignore[assignment]

    async def kill(self) -> None:
        proc = self.proc
        if proc is None:
            return
        proc.kill()
        with contextlib.suppress(Exception):
            await proc.wait()
        if proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        if self.cell_uid is not None:
            await asyncio.to_thread(_kill_uid, self.cell_uid)
        self.broken = True

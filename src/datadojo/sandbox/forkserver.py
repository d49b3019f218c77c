"""The harness side of a pool's fork server: one pre-imported interpreter that forks every worker.

A :class:`~datadojo.sandbox.pool.SandboxPool` with ``SandboxConfig(fork_server=True)`` starts one
:class:`ForkServer` (an interpreter that imports ``preload`` — numpy, pandas — once; see
:mod:`datadojo.sandbox.worker.forkserver`) and has it fork the worker of every sandbox. Warming N sandboxes
then costs one interpreter start and one pandas import plus N forks, instead of N of each, and the
workers share the imported pages copy-on-write (``benchmarks/rollout.py`` measures both).

At the Landlock and reduced levels the worker and its cell processes draw every boundary themselves
(uid, Landlock ruleset, limits, sweep); the server runs in its own network, IPC and UTS namespaces when
``unshare`` works, shared by the pool's workers (no network for any of them).

At the bubblewrap level (``isolation="bwrap"``, or ``auto`` where bubblewrap works) the server itself
runs inside **one** bubblewrap sandbox made for the pool: new PID, network, IPC, UTS and cgroup
namespaces, the read-only system file tree a bubblewrap worker gets, and the pool's workspace root
(:attr:`ForkServer.root`, where every sandbox of the pool gets its workspace) bound read-write *at its host
path*. Each worker it forks then makes its own mount, IPC and network namespaces with a private ``/tmp``
in which only its own sandbox folder is visible (:mod:`datadojo.sandbox.worker.namespaces`; the server
holds the capabilities for that, and the worker drops them). The PID namespace stays the pool's, so what
separates two sandboxes' processes is what separates them at the Landlock level: every cell process
confines itself with Landlock to its own workspace, inputs and ``/tmp`` (no TCP, no signals or abstract
sockets outside its domain), runs under its own uid (as root), with every limit. That is why this
combination needs Landlock and refuses to start without it (:func:`fork_level`).

A forked worker is not in a PID namespace of its own, so it sweeps by process tree (it is a child
subreaper), as in the reduced mode without ``unshare``. Its pid as the harness sees it comes from the
kernel, not from the server: the worker announces itself on the control socket and the harness reads the
sender's pid from ``SCM_CREDENTIALS``, which the kernel translates into the harness's PID namespace (the
server's own ``fork()`` result is a pid of the pool's namespace under bubblewrap).
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
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

from datadojo.sandbox import isolation as _isolation
from datadojo.sandbox.isolation import (
    IsolationUnavailable,
    LaunchPlan,
    _base_env,
    _search_paths,
    bwrap_server_argv,
    unshare_available,
)
from datadojo.sandbox.session import SandboxError, WorkerProcess, _kill_uid

__all__ = ["FORK_SERVER_BOOTSTRAP", "ForkServer", "ForkedWorkerProcess", "fork_level"]

log = logging.getLogger("datadojo.sandbox")

#: Run by ``python -I -B -c``: the harness's import paths first, then the fork server.
FORK_SERVER_BOOTSTRAP = (
    "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
    "from datadojo.sandbox.worker.forkserver import main; main()"
)
_MAX_MESSAGE = 1 << 20
_UNSHARE = ("--net", "--ipc", "--uts")
_UCRED = struct.Struct("iII")  # struct ucred: pid, uid, gid
_warned_no_fork = False


def fork_level(requested: str) -> str | None:
    """The level a pool's fork server runs at for ``isolation=requested``, or ``None``: fork nothing.

    ``bwrap`` (or ``auto`` resolving to it) needs Landlock as well: the pool's sandboxes share the
    server's namespaces, and only the per-cell Landlock ruleset keeps them apart. ``bwrap`` without
    Landlock raises :class:`~datadojo.sandbox.isolation.IsolationUnavailable`; ``auto`` without it keeps
    bubblewrap (the safer level) and starts one interpreter per sandbox, logged once.
    """
    global _warned_no_fork
    level = _isolation.resolve_isolation(requested)
    if level != "bwrap":
        return level
    ok, why = _isolation.landlock_available()
    if ok:
        return "bwrap"
    if requested == "bwrap":
        raise IsolationUnavailable(
            f"fork_server at isolation='bwrap' needs Landlock too ({why}): the pool's sandboxes would share "
            "one set of namespaces with nothing between them; use fork_server=False (one bubblewrap "
            "process per sandbox) or a kernel with Landlock"
        )
    if not _warned_no_fork:
        _warned_no_fork = True
        log.info(  # info, not a warning: the fork server is on by default, and this is the safe fallback
            "sandbox fork server not used: bubblewrap works but Landlock does not (%s), and forked "
            "sandboxes need Landlock to be kept apart; every sandbox gets its own bubblewrap process",
            why,
        )
    return None


class ForkServer:
    """One pre-imported interpreter forking workers on request; ``await start()``, ``worker()``, ``close()``."""

    def __init__(
        self,
        preload: tuple[str, ...],
        *,
        extra_paths: list[str] | None = None,
        isolation: str = "landlock",
        root: str | None = None,
        tmp_mb: int = 64,
    ) -> None:
        if isolation == "bwrap" and root is None:
            raise ValueError("a bubblewrap fork server needs the pool's workspace root")
        self.preload = tuple(preload)
        self.extra_paths = [p for p in (extra_paths or []) if os.path.isdir(p)]
        self.isolation = isolation
        #: bubblewrap: the folder (bound read-write at its own path) that holds every sandbox's workspace.
        self.root = root
        self.tmp_mb = tmp_mb
        #: The server's pid as this process sees it (from the kernel, see the module docstring).
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
        # Every packet then carries its sender's pid, translated by the kernel into our PID namespace.
        parent.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        argv = [
            sys.executable,
            "-I",
            "-B",
            "-c",
            FORK_SERVER_BOOTSTRAP,
            json.dumps(_search_paths(self.extra_paths)),
        ]
        env = _base_env(str(self._dir), str(self._dir))
        cwd = str(self._dir)
        if self.isolation == "bwrap":
            assert self.root is not None
            argv = bwrap_server_argv(self.root, self.extra_paths, self.tmp_mb, argv)
            env = _base_env("/", "/tmp")
        elif unshare_available():
            argv = [str(shutil.which("unshare")), *_UNSHARE, "--", *argv]
        try:
            with open(self._dir / "server.log", "ab") as log_file:
                self._proc = await asyncio.create_subprocess_exec(
                    *argv,
                    stdin=child.fileno(),
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=log_file,
                    env=env,
                    cwd=cwd,
                    start_new_session=True,
                )
        finally:
            child.close()
        parent.setblocking(False)
        self._sock = parent
        try:
            await self._send({"op": "hello", "preload": list(self.preload)})
            reply, sender = await asyncio.wait_for(self._receive(), timeout_s)
        except (TimeoutError, OSError, ValueError) as exc:
            detail = self.log_tail()
            await self.close()
            raise SandboxError(
                f"the sandbox fork server did not start ({type(exc).__name__}: {exc})"
                + (f"; its log ends with:\n{detail}" if detail else "")
            ) from None
        if reply.get("op") != "ready":
            await self.close()
            raise SandboxError(f"the sandbox fork server did not start: {reply}")
        self.pid = sender
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

    def log_tail(self) -> str:
        """The end of the server's log (why it did not start)."""
        try:
            data = (self._dir / "server.log").read_bytes()[-2000:] if self._dir else b""
        except OSError:
            return ""
        return data.decode("utf-8", "replace").strip()

    async def _receive(self) -> tuple[dict[str, Any], int]:
        """The next message and the pid of the process that sent it (the server or a new worker)."""
        sock = self._sock
        assert sock is not None
        loop = asyncio.get_running_loop()
        while True:
            try:
                data, ancdata, _flags, _addr = sock.recvmsg(_MAX_MESSAGE, socket.CMSG_SPACE(_UCRED.size))
                break
            except BlockingIOError:
                readable: asyncio.Future[None] = loop.create_future()
                loop.add_reader(sock, _settle, readable)
                try:
                    await readable
                finally:
                    loop.remove_reader(sock)
        if not data:
            raise OSError("the fork server closed its socket")
        sender = next(
            (
                _UCRED.unpack(cdata[: _UCRED.size])[0]
                for level, kind, cdata in ancdata
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS
            ),
            0,
        )
        if sender <= 0:
            raise OSError("the fork server's message carried no sender pid")
        return json.loads(data), sender

    async def spawn(
        self,
        env: dict[str, str],
        cwd: str,
        fds: list[int],
        timeout_s: float = 120.0,
        *,
        private_tmp: dict[str, Any] | None = None,
    ) -> int:
        """Fork a worker with ``fds`` (request pipe, reply pipe, log); its pid as we see it.

        The ``spawned`` message is sent by the new worker itself, so its credentials name the worker.
        ``private_tmp`` (bubblewrap): the worker's own ``/tmp`` size and folder, for
        :func:`datadojo.sandbox.worker.namespaces.enter_own_namespaces`.
        """
        async with self._lock:
            if not self.alive:
                raise SandboxError("the sandbox fork server is not running")
            ident = next(self._ids)
            try:
                message = {"op": "spawn", "id": ident, "env": env, "cwd": cwd, "private_tmp": private_tmp}
                await self._send(message, fds)
                reply, sender = await asyncio.wait_for(self._receive(), timeout_s)
            except (OSError, ValueError, TimeoutError) as exc:
                raise SandboxError(f"the sandbox fork server failed ({type(exc).__name__}: {exc})") from None
        if reply.get("op") != "spawned" or reply.get("id") != ident:
            raise SandboxError(
                f"the sandbox fork server could not fork a worker: {reply.get('message', reply)}"
            )
        if sender == self.pid:
            raise SandboxError("the sandbox fork server answered for its worker")
        return sender

    def worker(self, plan: LaunchPlan, log_path: Path, cell_uid: int | None) -> ForkedWorkerProcess:
        """The handle of one worker this server will fork (``await handle.start(timeout)`` forks it)."""
        if (plan.isolation == "bwrap") != (self.isolation == "bwrap"):
            raise SandboxError(
                f"a fork server at level {self.isolation!r} cannot start a {plan.isolation!r} sandbox"
            )
        if plan.isolation == "bwrap" and not plan.settings.get("landlock"):
            raise SandboxError("a bubblewrap fork server's worker must confine its cells with Landlock")
        # Not in a PID namespace of its own: the worker must sweep its own process tree only; and where
        # its cells share a uid with the siblings' (no dedicated uid), it counts their processes itself.
        settings = {**plan.settings, "pidns": False, "forked": True}
        if cell_uid is None:
            settings["count_procs"] = True
        plan = LaunchPlan(argv=[], env=plan.env, cwd=plan.cwd, isolation=plan.isolation, settings=settings)
        return ForkedWorkerProcess(self, plan, log_path, cell_uid)

    async def close(self) -> None:
        """Stop the server (its workers die with it)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        proc = self._proc
        if proc is not None and self.pid is not None and self.pid != proc.pid:
            # bubblewrap: the server is bwrap's grandchild, not ours; end it (its workers die with it)
            # and wait until it has, through a pidfd, so that nothing of the pool outlives close().
            await _kill_and_wait(self.pid)
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(Exception):
                await proc.wait()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


async def _kill_and_wait(pid: int) -> None:
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # already gone
        return
    loop = asyncio.get_running_loop()
    try:
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        exited: asyncio.Future[None] = loop.create_future()
        loop.add_reader(pidfd, _settle, exited)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(exited, 30.0)
        finally:
            loop.remove_reader(pidfd)
    finally:
        os.close(pidfd)


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
            pid = await self.server.spawn(
                self.plan.env,
                self.plan.cwd,
                [req_r, rep_w, log_fd],
                self.start_timeout_s,
                private_tmp=self.plan.settings.get("private_tmp_of"),
            )
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

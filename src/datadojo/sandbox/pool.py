"""A pool of sandboxes: bounded concurrency plus pre-warmed workers (DataMind §4, asynchronous rollout).

``size`` sandboxes may be in use at once (the others wait), which bounds the CPU and memory a rollout can
take however many trajectories the agent runner starts. ``warm`` workers (default: ``size``) are started
ahead of time with an empty workspace, so a trajectory that takes one pays neither interpreter start-up nor
the pandas import: its data files are placed and it runs. A used sandbox is reset (every process of its
trajectory ended, workspace, inputs, private ``/tmp`` and kept chunks emptied, a fresh kernel) and handed
to the next trajectory (``SandboxConfig.reuse``); without reuse, or when the reset fails, it is closed and
a replacement is started in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from datadojo.sandbox.config import SandboxConfig
from datadojo.sandbox.forkserver import ForkServer, fork_level
from datadojo.sandbox.install import default_install_dir
from datadojo.sandbox.session import Sandbox, SandboxError
from datadojo.sandbox.workspace import remove_tree
from datadojo.types import DataFile

__all__ = ["SandboxPool"]

log = logging.getLogger("datadojo.sandbox")


class SandboxPool:
    """Bounds concurrency (``size``) and keeps pre-warmed workers ready so a trajectory pays no start-up.

    Use as ``async with SandboxPool(config, size=8) as pool:`` and, per trajectory,
    ``async with pool.session(files) as sandbox:``. :meth:`start` waits until the warm workers are up (the
    first :meth:`session` starts them otherwise).
    """

    def __init__(
        self, config: SandboxConfig | None = None, size: int = 8, *, warm: int | None = None
    ) -> None:
        if size < 1:
            raise ValueError(f"pool size must be at least 1, got {size}")
        warm = size if warm is None else warm
        if warm < 0:
            raise ValueError(f"warm must be >= 0, got {warm}")
        self.config = config or SandboxConfig()
        self.size = size
        self.warm = warm
        self._slots = asyncio.Semaphore(size)
        self._ready: list[Sandbox] = []
        self._waiters: list[asyncio.Future[None]] = []
        self._starting: set[asyncio.Task[None]] = set()
        self._active: set[Sandbox] = set()
        self._closed = False
        self._failure: BaseException | None = None
        self._server: ForkServer | None = None
        self._server_lock = asyncio.Lock()
        self._server_level: str | None = None  # resolved on first use; "" = no fork server
        self._root: Path | None = None  # bubblewrap fork server: the folder of every workspace

    @property
    def in_use(self) -> int:
        return len(self._active)

    @property
    def ready(self) -> int:
        """Warm sandboxes waiting for a trajectory."""
        return len(self._ready)

    async def start(self) -> None:
        """Start the warm workers and wait until they are ready."""
        self._refill()
        if self._starting:
            await asyncio.gather(*list(self._starting), return_exceptions=True)
        if self._failure is not None and not self._ready:
            raise SandboxError(f"the pool could not start sandboxes: {self._failure}")

    def _refill(self) -> None:
        if self._closed or self._failure is not None:
            return
        # Keep ``warm`` sandboxes ready, but never more than ``size`` alive in all: a sandbox that comes
        # back from a trajectory is reset and reused (see :meth:`session`), so it counts as one of them.
        while len(self._ready) + len(self._starting) < self.warm and (
            len(self._ready) + len(self._starting) + len(self._active) < self.size
        ):
            task = asyncio.ensure_future(self._spawn())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _spawn(self) -> None:
        try:
            sandbox = await Sandbox.launch(self.config, fork_server=await self._fork_server())
        except Exception as exc:
            log.error("sandbox pool: starting a warm sandbox failed: %s", exc)
            self._failure = exc
            self._wake()
            return
        if self._closed:
            await sandbox.close()
            return
        self._ready.append(sandbox)
        self._wake()

    async def _fork_server(self) -> ForkServer | None:
        """With ``config.fork_server``: the pool's one pre-imported interpreter, started on first use.

        Its level is :func:`~datadojo.sandbox.forkserver.fork_level` of the configured isolation: under
        bubblewrap it runs in one ``bwrap`` sandbox showing the pool's workspace root (made here, once,
        so that a restarted server shows the same workspaces).
        """
        if not self.config.fork_server:
            return None
        async with self._server_lock:
            if self._server_level is None:
                self._server_level = await asyncio.to_thread(fork_level, self.config.isolation) or ""
            if not self._server_level:
                return None
            if self._server is None or not self._server.alive:
                if self._server is not None:
                    await self._server.close()
                extra = (
                    [self.config.install_dir or str(default_install_dir())]
                    if self.config.auto_install
                    else []
                )
                root = None
                if self._server_level == "bwrap":
                    root = str(await asyncio.to_thread(self._workspace_root))
                server = ForkServer(
                    self.config.preload,
                    extra_paths=extra,
                    isolation=self._server_level,
                    root=root,
                )
                await server.start(self.config.start_timeout_s)
                self._server = server
            return self._server

    def _workspace_root(self) -> Path:
        if self._root is None:
            parent = self.config.workspace_root
            if parent is not None:
                Path(parent).mkdir(parents=True, exist_ok=True)
            self._root = Path(tempfile.mkdtemp(prefix="datadojo-pool-", dir=parent)).resolve()
            os.chmod(self._root, 0o711)  # the cells' uids traverse it; no one else lists it
        return self._root

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)
                return

    async def _take(self) -> Sandbox:
        while True:
            while self._ready:
                sandbox = self._ready.pop(0)
                if sandbox.alive:
                    return sandbox
                await sandbox.close()
            if not self._starting or self._failure is not None:
                # raises what stopped the warm start
                sandbox = await Sandbox.launch(self.config, fork_server=await self._fork_server())
                self._failure = None  # it works (again): pre-warming resumes
                return sandbox
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    @contextlib.asynccontextmanager
    async def session(
        self, files: Sequence[DataFile | str | os.PathLike[str]] = (), *, seed: int | None = None
    ) -> AsyncIterator[Sandbox]:
        """A sandbox for one trajectory holding ``files``.

        When the block ends the sandbox is reset (its processes ended, workspace, /tmp and kept chunks
        emptied; see :meth:`Sandbox.reset`) and goes back to the warm list, so the next trajectory pays
        neither an interpreter start nor the pandas import. A sandbox whose reset fails, or any sandbox
        when ``config.reuse`` is off, is closed and replaced. ``seed``: the trajectory's random seed
        (:meth:`Sandbox.reseed`); without one, every trajectory gets a fresh random seed.
        """
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        async with self._slots:
            self._refill()
            sandbox = await self._take()
            self._active.add(sandbox)
            self._refill()
            if seed is not None:
                sandbox.reseed(seed)
            try:
                await sandbox.add_files(files)
                yield sandbox
            finally:
                if not await self._recycle(sandbox):
                    self._active.discard(sandbox)
                    await sandbox.close()
                self._refill()

    async def _recycle(self, sandbox: Sandbox) -> bool:
        """Reset a used sandbox and make it ready again; False when it must be closed instead."""
        if self._closed or not self.config.reuse or not sandbox.alive:
            return False
        try:
            await sandbox.reset()
        except (SandboxError, OSError) as exc:
            log.warning("sandbox pool: could not reset a sandbox for reuse (%s); starting a new one", exc)
            return False
        self._active.discard(sandbox)
        if self._closed:
            await sandbox.close()
            return True
        self._ready.append(sandbox)
        self._wake()
        return True

    async def close(self) -> None:
        """Stop every sandbox of the pool, warm or in use."""
        self._closed = True
        for task in list(self._starting):
            task.cancel()
        if self._starting:
            await asyncio.gather(*list(self._starting), return_exceptions=True)
        sandboxes = [*self._ready, *self._active]
        self._ready.clear()
        await asyncio.gather(*(sb.close() for sb in sandboxes), return_exceptions=True)
        if self._server is not None:
            await self._server.close()
            self._server = None
        if self._root is not None and not self.config.keep_workspace:
            await asyncio.to_thread(remove_tree, self._root)
            self._root = None

    async def __aenter__(self) -> SandboxPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

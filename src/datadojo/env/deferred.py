"""Sandbox sessions opened beside an episode's first model request instead of before it.

Why: an episode needs its sandbox only when the first reply carries code, a whole model call after it
starts. A rollout of c episodes used to wait for all c sandboxes before its first request; at c=128 the
pool's warm-up (seconds: every worker forked and confined) delayed the first wave, and every later wave
behind it, by that much. With :func:`deferred_sessions` each episode asks for its sandbox as it starts and
sends its first request at once: the warm-up runs while the model works.

What stays the same: the session is the factory's own (same pool, files, reset and isolation); each
episode holds at most one; a session is always closed, also when the episode ends before it arrived (it is
waited for, then returned). A sandbox that cannot be made is re-raised on first use and recorded by
:attr:`DeferredSandbox.failure`, so the runner can record the episode as the ``env_error`` it was before.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

from datadojo.env.environment import SandboxFactory
from datadojo.env.episode import CodeRunner
from datadojo.types import Task

__all__ = ["DeferredSandbox", "deferred_sessions"]


class DeferredSandbox:
    """A sandbox session being opened in the background; :meth:`run` waits for it on first use.

    ``reseed`` is remembered and applied when the sandbox arrives (when it can be reseeded).
    """

    def __init__(self, session: AbstractAsyncContextManager[CodeRunner]) -> None:
        self._session = session
        self._sandbox: CodeRunner | None = None
        self._seed: int | None = None
        self.failure: BaseException | None = None
        self._opening = asyncio.ensure_future(self._open())

    async def _open(self) -> CodeRunner:
        try:
            sandbox = await self._session.__aenter__()
        except Exception as exc:
            self.failure = exc
            raise
        self._sandbox = sandbox
        reseed = getattr(sandbox, "reseed", None)
        if self._seed is not None and callable(reseed):
            reseed(self._seed)
        return sandbox

    def reseed(self, seed: int) -> None:
        """The trajectory's random seed, for the sandbox once it is open."""
        self._seed = seed
        if self._sandbox is not None:
            reseed = getattr(self._sandbox, "reseed", None)
            if callable(reseed):
                reseed(seed)

    async def sandbox(self) -> CodeRunner:
        """The open sandbox (waits for it; raises what stopped it from opening)."""
        return await asyncio.shield(self._opening)

    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> Any:
        sandbox = await self.sandbox()
        return await sandbox.run(code, language=language, db=db)

    def __getattr__(self, name: str) -> Any:
        """Anything else a caller reads of the sandbox (``files``, ``file_access``): the open one's."""
        sandbox = self.__dict__.get("_sandbox")
        if sandbox is None:
            raise AttributeError(f"{name!r}: the deferred sandbox is not open yet (await .sandbox() first)")
        return getattr(sandbox, name)

    async def close(self, *exc: Any) -> None:
        """Return the session: wait for it to open (never leave it half made), then close it."""
        try:
            await asyncio.shield(self._opening)
        except asyncio.CancelledError:
            self._opening.cancel()
            with contextlib.suppress(BaseException):
                await self._opening
            raise
        except Exception:
            return  # it never opened: nothing to return
        await self._session.__aexit__(*(exc or (None, None, None)))


def deferred_sessions(factory: SandboxFactory) -> SandboxFactory:
    """``factory`` with each session opened in the background (module docstring): the episode gets a
    :class:`DeferredSandbox` at once."""

    @contextlib.asynccontextmanager
    async def session(task: Task) -> AsyncIterator[CodeRunner]:
        deferred = DeferredSandbox(factory(task))
        try:
            yield deferred
        except BaseException as exc:
            await deferred.close(type(exc), exc, exc.__traceback__)
            raise
        else:
            await deferred.close()

    return session

"""The exploration environment: a dataset folder mounted read-only in a persistent-mode sandbox (§4.1, B.1).

One live interpreter serves one (folder, seed) tree. A tree branches, and a probe must run in the state its
parent path left behind, so when the next probe continues a different path than the one the interpreter last
ran, the sandbox is reset (processes ended, workspace emptied), the folder re-mounted and the path's probes
replayed silently before the new one runs. Continuing the same path (the common case: MCTS descends the path
it just extended) costs nothing extra.

Observations are cut to a head of ``obs_head`` and a tail of ``obs_tail`` characters with a marker (the
reference code's 4,000 / 1,500); the sandbox's own symmetric cut is set out of the way so the split is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from datadojo.sandbox.cells import truncate_marker
from datadojo.sandbox.config import Limits, SandboxConfig
from datadojo.sandbox.result import ExecResult
from datadojo.types import DataFile

__all__ = ["ProbeEnv", "default_sandbox_config", "truncate_head_tail"]

#: Untruncated output kept for re-verification against the original trace (§4.2), per probe.
FULL_OUTPUT_CAP = 100_000


def truncate_head_tail(text: str, head: int, tail: int) -> tuple[str, bool]:
    """``text[:head] + marker + text[-tail:]`` when longer than ``head + tail``; returns ``(text, truncated)``."""
    if len(text) <= head + tail:
        return text, False
    removed = len(text) - head - tail
    return text[:head] + truncate_marker(removed) + (text[len(text) - tail :] if tail else ""), True


def default_sandbox_config(exec_timeout_s: float = 60.0, isolation: str = "auto") -> SandboxConfig:
    """Persistent mode, per-call timeout, and no sandbox-side cut of the output (we cut head/tail ourselves)."""
    limits = Limits(
        cpu_s=exec_timeout_s, wall_s=exec_timeout_s, max_observation_chars=Limits().max_output_bytes
    )
    return SandboxConfig(limits=limits, mode="persistent", isolation=isolation)  # type: ignore[arg-type]


class ProbeEnv:
    """A persistent sandbox over one dataset folder that can run a probe at the end of any path."""

    def __init__(self, folder: str | Path, config: SandboxConfig, *, head: int, tail: int) -> None:
        if config.mode != "persistent":
            raise ValueError("ProbeEnv needs a persistent-mode sandbox (SandboxConfig.mode='persistent')")
        self.folder = Path(folder)
        self.config = config
        self.head = head
        self.tail = tail
        self._sandbox = None  # type: ignore[var-annotated]
        self._state: list[str] = []
        self.replays = 0
        self.replayed_cells = 0
        self.probes_run = 0

    @property
    def data_file(self) -> DataFile:
        return DataFile(path=str(self.folder), kind="dir", name=self.folder.resolve().name)

    async def start(self) -> None:
        from datadojo.sandbox.session import Sandbox

        self._sandbox = await Sandbox.create([self.data_file], self.config)
        self._state = []

    async def close(self) -> None:
        if self._sandbox is not None:
            await self._sandbox.close()
            self._sandbox = None

    async def __aenter__(self) -> ProbeEnv:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _rebuild(self, path_codes: Sequence[str]) -> None:
        sb = self._sandbox
        assert sb is not None
        await sb.reset()
        await sb.add_files([self.data_file])
        self.replays += 1
        for code in path_codes:
            await sb.run(code)
            self.replayed_cells += 1
        self._state = list(path_codes)

    async def run(self, path_codes: Sequence[str], code: str) -> tuple[ExecResult, str, bool, str]:
        """Run ``code`` in the state left by ``path_codes``; ``(result, observation, truncated, full_output)``."""
        if self._sandbox is None:
            raise RuntimeError("ProbeEnv.run before start()")
        if self._state != list(path_codes):
            await self._rebuild(path_codes)
        result = await self._sandbox.run(code)
        self.probes_run += 1
        self._state = [*path_codes, code]
        observation, truncated = truncate_head_tail(result.output, self.head, self.tail)
        return result, observation, truncated or result.truncated, result.output[:FULL_OUTPUT_CAP]

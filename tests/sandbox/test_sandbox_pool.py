"""SandboxPool: pre-warmed workers, bounded concurrency, isolation between trajectories, clean shutdown."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from datadojo.sandbox import PolicyConfig, SandboxConfig, SandboxError, SandboxPool
from helpers.procs import alive, wait_until

pytestmark = pytest.mark.timeout(120)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"
FAST = SandboxConfig(preload=())


async def test_prewarmed_sessions_and_bounded_concurrency(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "sales.csv", tmp_path / "sales.csv")
    async with SandboxPool(FAST, size=2) as pool:
        await pool.start()
        assert pool.ready == 2
        warm = {id(sb) for sb in pool._ready}
        running = peak = 0
        handed_out: list[int] = []
        workspaces: list[Path] = []
        both_in = asyncio.Event()

        async def trajectory(i: int) -> str:
            nonlocal running, peak
            files = [tmp_path / "sales.csv"] if i % 2 == 0 else []
            async with pool.session(files) as sb:
                running += 1
                peak = max(peak, running)
                if peak == 2:
                    both_in.set()
                # hold the sandbox until two trajectories have been in at once: no sleep that a busy
                # machine could outlast (a pool serving one at a time would stop the test here)
                await asyncio.wait_for(both_in.wait(), 60)
                handed_out.append(id(sb))
                workspaces.append(sb.workspace)
                r = await sb.run(f"import os\nprint({i}, sorted(os.listdir('.')))")
                running -= 1
                return r.output

        outputs = await asyncio.gather(*(trajectory(i) for i in range(5)))
        assert outputs == [f"{i} {['sales.csv'] if i % 2 == 0 else []}\n" for i in range(5)]
        assert peak == 2  # never more than `size` trajectories at once
        assert set(handed_out[:2]) <= warm  # the first trajectories got the pre-warmed workers
        # the two warm sandboxes are reset and reused (each listing above shows only its own files)
        assert len(set(workspaces)) == 2
        assert pool.in_use == 0
    assert not any(w.exists() for w in workspaces)  # removed when the pool closed


async def test_a_crashing_trajectory_does_not_take_others_down() -> None:
    config = SandboxConfig(preload=(), mode="persistent", policy=PolicyConfig(enabled=False))
    async with SandboxPool(config, size=2, warm=0) as pool:

        async def crasher() -> list[str]:
            async with pool.session() as sb:
                statuses = [(await sb.run("import os\nos._exit(9)")).status]
                statuses.append((await sb.run("x = bytearray(8 * 1024**4)")).status)
                statuses.append((await sb.run("print('recovered')")).output)
                return statuses

        async def steady() -> list[str]:
            async with pool.session() as sb:
                await sb.run("total = 0")
                for i in range(10):
                    await sb.run(f"total += {i}")
                return [(await sb.run("total")).output]

        crashed, calm = await asyncio.gather(crasher(), steady())
        assert crashed == ["error", "killed", "recovered\n"]
        assert calm == ["45\n"]


async def test_close_stops_every_worker() -> None:
    pool = SandboxPool(FAST, size=2, warm=2)
    await pool.start()
    pids = [sb._worker.proc.pid for sb in pool._ready]  # type: ignore[union-attr]
    async with pool.session() as sb:
        assert (await sb.run("print(1)")).output == "1\n"
        pids.append(sb._worker.proc.pid)  # type: ignore[union-attr]
    await pool.close()
    # reaping may lag on a busy machine: wait for it, bounded only to end a failure
    assert await wait_until(lambda: not any(alive(pid) for pid in pids))
    assert pids
    with pytest.raises(SandboxError, match="closed"):
        async with pool.session():
            pass


async def test_bad_files_fail_the_session_not_the_pool(tmp_path: Path) -> None:
    async with SandboxPool(FAST, size=1, warm=1) as pool:
        with pytest.raises(FileNotFoundError, match="missing"):
            async with pool.session([tmp_path / "missing.csv"]):
                pass
        async with pool.session() as sb:
            assert (await sb.run("print('ok')")).output == "ok\n"


def test_pool_arguments() -> None:
    with pytest.raises(ValueError, match="size"):
        SandboxPool(FAST, size=0)
    with pytest.raises(ValueError, match="warm"):
        SandboxPool(FAST, size=1, warm=-1)
    assert SandboxPool(FAST, size=3).warm == 3

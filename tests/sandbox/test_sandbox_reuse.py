"""A pool hands a reset sandbox to the next trajectory: same worker, nothing left of the previous one."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from datadojo.sandbox import SandboxConfig, SandboxPool

REPO = Path(__file__).resolve().parents[2]
CSV = REPO / "examples" / "data" / "sales.csv"
DB = REPO / "examples" / "data" / "shop.sqlite"

ISOLATIONS = [
    "none",
    pytest.param(
        "bwrap",
        marks=pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) not installed"),
    ),
]


@pytest.mark.parametrize("mode", ["chunked", "persistent"])
@pytest.mark.parametrize("isolation", ISOLATIONS)
async def test_reused_sandbox_starts_clean(isolation: str, mode: str, tmp_path: Path) -> None:
    config = SandboxConfig(isolation=isolation, mode=mode, preload=())
    async with SandboxPool(config, size=1) as pool:
        async with pool.session([CSV]) as first:
            worker_pid = first._worker.proc.pid
            assert (await first.run("secret = 41\nopen('notes.txt', 'w').write('x')")).status == "ok"
            tmp_write = (
                "import tempfile, os\nopen(os.path.join(tempfile.gettempdir(), 'left.txt'), 'w').write('x')"
            )
            assert (await first.run(tmp_write)).status == "ok"
            assert (await first.run("print(secret + 1)")).output.strip() == "42"
        async with pool.session([DB]) as second:
            assert second is first and second._worker.proc.pid == worker_pid  # the same warm worker
            listing = await second.run("import os\nprint(sorted(os.listdir('.')))")
            assert listing.output.strip() == "['shop.sqlite']"  # no notes.txt, no sales.csv
            gone = await second.run("print(secret)")
            assert gone.status == "error" and "NameError" in gone.output
            tmp_check = (
                "import tempfile, os\nprint(os.path.exists(os.path.join(tempfile.gettempdir(), 'left.txt')))"
            )
            assert (await second.run(tmp_check)).output.strip() == "False"
            sql = await second.run("SELECT COUNT(*) AS n FROM customers", language="sql")
            assert "60" in sql.output


async def test_reuse_off_starts_a_new_worker() -> None:
    config = SandboxConfig(isolation="none", preload=(), reuse=False)
    async with SandboxPool(config, size=1) as pool:
        async with pool.session([CSV]) as first:
            pid = first._worker.proc.pid
        async with pool.session([CSV]) as second:
            assert second is not first and second._worker.proc.pid != pid


async def test_a_sandbox_whose_worker_died_is_replaced() -> None:
    config = SandboxConfig(isolation="none", preload=())
    async with SandboxPool(config, size=1) as pool:
        async with pool.session([CSV]) as first:
            first._worker.proc.kill()
            await first._worker.proc.wait()
        async with pool.session([CSV]) as second:
            assert second is not first
            assert (await second.run("print(1)")).output.strip() == "1"


@pytest.mark.parametrize("isolation", ISOLATIONS)
async def test_nothing_of_a_trajectory_runs_once_its_reset_has_answered(isolation: str) -> None:
    """The worker answers a reset before it reaps the old kernel (its teardown is slow), so the kill must
    come first: a thread the trajectory left writing into the workspace never writes again after it.
    (End to end; the order itself is checked exactly by test_sandbox_worker's
    test_a_reset_kills_the_trajectory_before_it_answers.)"""
    from datadojo.sandbox import PolicyConfig

    config = SandboxConfig(
        isolation=isolation, mode="persistent", preload=(), policy=PolicyConfig(enabled=False)
    )
    async with SandboxPool(config, size=1) as pool:
        async with pool.session([CSV]) as first:
            workspace = first.workspace
            started = await first.run(
                "import threading, time\n"
                "def scribble():\n"
                "    while True:\n"
                "        with open('bg.txt', 'a') as f:\n"
                "            f.write('x')\n"
                "        time.sleep(0.001)\n"
                "threading.Thread(target=scribble, daemon=True).start()\n"
                "time.sleep(0.05)\n"
                "print(open('bg.txt').read()[:1])"
            )
            assert started.output.strip() == "x", started.output
        # the session has ended: the reset answered and the workspace was emptied after it
        assert not (workspace / "bg.txt").exists()
        for _ in range(50):  # whatever the machine's speed, a correct reset never lets it come back
            assert not (workspace / "bg.txt").exists()
            await asyncio.sleep(0.01)
        async with pool.session([CSV]) as second:
            assert second is first
            assert (
                await second.run("import os\nprint(sorted(os.listdir('.')))")
            ).output.strip() == "['sales.csv']"

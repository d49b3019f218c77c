"""A pool hands a reset sandbox to the next trajectory: same worker, nothing left of the previous one."""

from __future__ import annotations

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

"""The pool's fork server: every worker forked from one pre-imported interpreter, isolated as before."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from datadojo.sandbox import PolicyConfig, SandboxConfig, SandboxPool
from datadojo.sandbox import isolation as isolation_mod
from helpers.procs import alive, wait_until

pytestmark = pytest.mark.timeout(180)

LANDLOCK, WHY_NOT = isolation_mod.landlock_available()
needs_landlock = pytest.mark.skipif(not LANDLOCK, reason=f"Landlock unavailable: {WHY_NOT}")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"
OPEN = PolicyConfig(enabled=False)  # the static policy would reject the subprocess cells below


def forked(**kw: object) -> SandboxConfig:
    return SandboxConfig(mode="persistent", isolation="landlock", fork_server=True, policy=OPEN, **kw)  # type: ignore[arg-type]


def test_fork_server_needs_a_level_without_bubblewrap() -> None:
    with pytest.raises(ValueError, match="fork_server needs isolation 'landlock' or 'none'"):
        SandboxConfig(fork_server=True)  # isolation auto may mean bubblewrap
    with pytest.raises(ValueError, match="fork_server"):
        SandboxConfig(fork_server=True, isolation="bwrap")
    assert SandboxConfig(fork_server=True, isolation="none").fork_server


@needs_landlock
async def test_workers_are_forked_from_one_server_with_pandas_imported_once(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "sales.csv", tmp_path / "sales.csv")
    async with SandboxPool(forked(), size=3) as pool:
        await pool.start()
        server = pool._server
        assert server is not None and server.ready["preloaded"] == ["numpy", "pandas"]
        workers = [sb._worker.proc.pid for sb in pool._ready]  # type: ignore[union-attr]
        # every worker is the server's child, not an interpreter of its own
        for pid in workers:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            assert ppid == server.pid
        async with pool.session([tmp_path / "sales.csv"]) as a, pool.session([]) as b:
            r = await a.run("import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(len(df))")
            assert r.status == "ok" and r.isolation == "landlock", r.output
            assert (await a.run("print(len(df) * 2)")).output.strip() == str(2 * int(r.output))
            # b is another trajectory: its own namespace and its own workspace
            nb = await b.run("print('df' in globals(), sorted(__import__('os').listdir('.')))")
            assert nb.output.strip() == "False []"
            # and Landlock keeps it out of a's workspace
            peek = await b.run(f"open({str(a.workspace / 'sales.csv')!r}).read()")
            assert peek.status == "error" and "PermissionError" in peek.output
    assert not alive(server.pid)
    for pid in workers:
        assert await wait_until(lambda pid=pid: not alive(pid))


@needs_landlock
async def test_a_cells_leftovers_are_swept_without_touching_other_sandboxes() -> None:
    """Forked workers have no PID namespace of their own: the sweep after one cell must spare every other
    sandbox (a worker that believed it had one would kill every process it can see but PID 1)."""
    async with SandboxPool(forked(), size=2) as pool, pool.session([]) as a, pool.session([]) as b:
        await a.run("state = 41")
        worker_a = a._worker.proc.pid  # type: ignore[union-attr]
        left = await b.run(
            "import subprocess\np = subprocess.Popen(['sleep', '300'], start_new_session=True)\nprint(p.pid)"
        )
        assert left.status == "ok", left.output
        pid = int(left.output.strip().splitlines()[-1])
        assert await wait_until(lambda: not alive(pid))  # b's leftover is gone after b's cell ...
        r = await a.run("print(state + 1)")  # ... and a's kernel (its state) is untouched
        assert (r.output.strip(), r.restarted) == ("42", False)
        assert alive(worker_a)


@needs_landlock
async def test_a_worker_killed_from_outside_is_forked_again() -> None:
    async with SandboxPool(forked(), size=1) as pool, pool.session([]) as sb:
        await sb.run("x = 1")
        worker = sb._worker.proc.pid  # type: ignore[union-attr]
        os.kill(worker, 9)
        assert await wait_until(lambda: not alive(worker))
        lost = await sb.run("print(x)")
        assert lost.status in ("env_error", "error", "killed")
        again = await sb.run("x = 5\nprint(x)")
        assert again.status == "ok" and again.output.strip() == "5"
        new = sb._worker.proc.pid  # type: ignore[union-attr]
        assert new != worker
        assert pool._server is not None
        ppid = int(Path(f"/proc/{new}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert ppid == pool._server.pid

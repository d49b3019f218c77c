"""The async Sandbox: observations, both state modes, limits, containment, SQL, auto-install.

Most tests run under both isolation modes ("bwrap" when bubblewrap is installed, and "none", the reduced
fallback). Code that would be dangerous outside a PID namespace when the tests run as root (a fork bomb)
runs under bubblewrap only. Workers start without the pandas preload unless a test needs pandas, so
that each sandbox starts in a fraction of a second.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from datadojo.sandbox import Limits, PolicyConfig, Sandbox, SandboxConfig, SandboxError, run_cells
from datadojo.sandbox import install as install_mod
from datadojo.sandbox import isolation as isolation_mod
from datadojo.types import DataFile
from helpers.digests import file_digest, tree_digest
from helpers.procs import pids_of_uid, pids_with_cmdline, wait_until

pytestmark = pytest.mark.timeout(120)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"
HAS_BWRAP = shutil.which("bwrap") is not None and isolation_mod.bwrap_available()[0]
ISOLATIONS = [pytest.param("bwrap", marks=pytest.mark.skipif(not HAS_BWRAP, reason="bwrap unusable")), "none"]
NO_POLICY = PolicyConfig(enabled=False)
MARGIN = 300  # notes such as "[timeout: ...]" may follow an observation truncated to the limit


def config(isolation: str, **kwargs: object) -> SandboxConfig:
    kwargs.setdefault("preload", ())
    return SandboxConfig(isolation=isolation, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """Private copies of the example data (tests check that they stay byte-identical)."""
    src = tmp_path / "data"
    src.mkdir()
    for name in ("sales.csv", "shop.sqlite"):
        shutil.copy(EXAMPLES / name, src / name)
    shutil.copytree(EXAMPLES / "station_survey", src / "station_survey")
    return src


# ------------------------------------------------------------------------------------------ observations
@pytest.mark.parametrize("mode", ["chunked", "persistent"])
@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_observations(iso: str, mode: str) -> None:
    async with await Sandbox.create([], config(iso, mode=mode)) as sb:
        assert sb.isolation == ("bwrap" if iso == "bwrap" else "reduced")
        r = await sb.run("print('hello')\nx = 40")
        assert (r.output, r.status, r.error, r.isolation) == ("hello\n", "ok", False, sb.isolation)
        assert r.duration_s > 0
        r = await sb.run("x + 2")  # a trailing expression is shown as a notebook would
        assert r.output == "42\n"
        assert (await sb.run("None")).output == ""
        r = await sb.run("print('before')\nimport sys\nprint('to stderr', file=sys.stderr)\n{'a': [1, 2]}")
        assert r.output == "before\nto stderr\n{'a': [1, 2]}\n"  # one stream, in order
        r = await sb.run("def f(d):\n    return 1 / d\nprint('start')\nf(0)")
        assert r.status == "error" and r.error and not r.timed_out and not r.killed
        assert r.output.startswith("start\nTraceback (most recent call last):\n")
        assert 'File "<cell-5>", line 4, in <module>' in r.output and "return 1 / d" in r.output
        assert r.output.rstrip().endswith("ZeroDivisionError: division by zero")
        assert "worker.py" not in r.output  # the harness's frames are not shown
        r = await sb.run("def broken(:\n    pass")
        assert r.status == "error" and "SyntaxError" in r.output and "<cell-6>" in r.output
        r = await sb.run("import warnings\nwarnings.warn('careful')\nprint('done')")
        assert r.status == "ok" and "UserWarning: careful" in r.output and "done" in r.output
        assert (await sb.run("print(x)")).output == "40\n"


async def test_both_modes_observe_the_same(data: Path) -> None:
    """Well-behaved multi-turn code gives identical observations in chunked and persistent mode."""
    cells = [
        "import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(df.shape)",
        "def double(x):\n    return 2 * x\nclass Box:\n    def __repr__(self):\n        return 'Box()'\ndouble(21)",
        "print(double(int(df['units'].sum())))\nBox()",
        "by_region = df.groupby('region')['units'].sum().sort_values(ascending=False)\nby_region",
        "df.info()",
        "import json\nprint(json.dumps({'rows': len(df), 'top': by_region.index[0]}))",
        "by_region['nowhere']",
        "import random, numpy as np\n[random.random() < 2, float(np.random.rand()) < 2]",
        "print(len(df[df['returned'] == 1]), sorted(df.columns)[:3])",
    ]
    outputs = {}
    for mode in ("chunked", "persistent"):
        cfg = config("auto", mode=mode, preload=("numpy", "pandas"))
        async with await Sandbox.create([data / "sales.csv"], cfg) as sb:
            outputs[mode] = [(r.status, r.output) for r in [await sb.run(c) for c in cells]]
    assert outputs["chunked"] == outputs["persistent"]
    statuses = [s for s, _ in outputs["chunked"]]
    assert statuses == ["ok"] * 6 + ["error", "ok", "ok"]
    assert (
        outputs["chunked"][0][1] == "(240, 8)\n"
        and outputs["chunked"][2][1] == f"{2 * _units(data)}\nBox()\n"
    )
    assert "RangeIndex: 240 entries" in outputs["chunked"][4][1]  # df.info() writes to stdout itself
    assert outputs["chunked"][6][1].rstrip().endswith("KeyError: 'nowhere'")


def _units(data: Path) -> int:
    import csv

    with open(data / "sales.csv", newline="") as fh:
        return sum(int(row["units"]) for row in csv.DictReader(fh))


@pytest.mark.parametrize("prereplay", [True, False])
@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_chunked_replay_is_silent_and_keeps_only_successes(iso: str, prereplay: bool) -> None:
    async with await Sandbox.create([], config(iso, mode="chunked", prereplay=prereplay)) as sb:
        r = await sb.run("import sys\nprint('first')\nsys.stdout.write('raw\\n')\nkept = 1")
        assert r.output == "first\nraw\n"
        r = await sb.run("lost = 2\n1 / 0")  # failed: not kept, so `lost` does not exist later
        assert r.status == "error"
        r = await sb.run("print(kept, 'lost' in dir())")
        assert r.output == "1 False\n"  # nothing of the replayed chunks is printed again
        r = await sb.run("open('once.txt', 'x').write('1')")  # succeeds once; fails when replayed
        assert r.status == "ok"
        r = await sb.run("print('next')")
        assert (
            r.status == "ok"
            and "re-running earlier cells raised errors" in r.output
            and "<cell-4>" in r.output
        )
        assert r.output.endswith("next\n")
        r = await sb.run("print('again')")
        assert r.output == "again\n"  # the replay failure is reported once


async def test_chunked_state_survives_a_dead_worker() -> None:
    """The kept chunks live in the harness: a fresh worker replays them (its guess of them is empty)."""
    async with await Sandbox.create([], config("auto", mode="chunked")) as sb:
        await sb.run("total = 40")
        await sb.run("total += 2")
        assert sb._worker is not None and sb._worker.proc is not None
        os.kill(sb._worker.proc.pid, 9)
        await sb._worker.proc.wait()
        r = await sb.run("print(total)")
        assert (r.status, r.output) == ("ok", "42\n")
        assert sb._worker_starts == 2


# ------------------------------------------------------------------------------------------------ limits
@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_wall_clock_limit_and_recovery(iso: str) -> None:
    limits = Limits(wall_s=1.0)
    async with await Sandbox.create([], config(iso, mode="chunked", limits=limits)) as sb:
        await sb.run("x = 5")
        r = await sb.run("import time\nprint('sleeping')\ntime.sleep(30)")
        assert (r.status, r.timed_out, r.error) == ("timeout", True, True)
        assert r.output.startswith("sleeping\n") and "wall-clock limit of 1 s" in r.output
        assert r.duration_s < 10
        assert (await sb.run("print(x)")).output == "5\n"  # chunked: the kept chunks are still there


@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_persistent_restart_loses_state(iso: str) -> None:
    cfg = config(iso, mode="persistent", limits=Limits(wall_s=1.0), policy=NO_POLICY)
    async with await Sandbox.create([], cfg) as sb:
        await sb.run("x = 5")
        r = await sb.run("import time\ntime.sleep(30)")
        assert r.status == "timeout" and r.restarted and "interpreter was restarted" in r.output
        r = await sb.run("x")
        assert r.status == "error" and "NameError" in r.output
        await sb.run("y = 1")
        r = await sb.run("print('bye')\nimport os\nos._exit(3)")
        assert r.status == "error" and "exited with status 3" in r.output and r.output.startswith("bye\n")
        assert r.restarted
        r = await sb.run("print('y' in dir())")
        assert r.output == "False\n"


@pytest.mark.parametrize(
    ("iso", "mode"),
    # RLIMIT_CPU in a forked cell, measured by the worker in a persistent interpreter: one run of each.
    [pytest.param("bwrap", "persistent", marks=ISOLATIONS[0].marks), ("none", "chunked")],
)
async def test_cpu_limit(iso: str, mode: str) -> None:
    cfg = config(iso, mode=mode, limits=Limits(cpu_s=1.0, wall_s=60.0))
    async with await Sandbox.create([], cfg) as sb:
        r = await sb.run("while True:\n    pass")
        assert r.status == "timeout" and r.timed_out and "CPU limit of 1 s" in r.output, r
        assert (await sb.run("print(2)")).output == "2\n"


@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_output_memory_and_file_limits(iso: str) -> None:
    limits = Limits(
        max_output_bytes=50_000, max_observation_chars=1000, memory_mb=1024, max_file_mb=1, wall_s=30
    )
    async with await Sandbox.create(
        [], config(iso, mode="persistent", limits=limits, policy=NO_POLICY)
    ) as sb:
        r = await sb.run("while True:\n    print('x' * 100)")
        assert (r.status, r.killed, r.truncated) == ("killed", True, True)
        assert "output limit" in r.output and len(r.output) <= 1000 + MARGIN
        r = await sb.run("print('a' * 5000 + 'END')")
        assert r.status == "ok" and r.truncated and len(r.output) <= 1000
        assert r.output.startswith("aaa") and r.output.rstrip().endswith("END") and "truncated" in r.output
        r = await sb.run("blob = bytearray(4 * 1024**3)")
        assert (
            (r.status, r.killed) == ("killed", True)
            and "MemoryError" in r.output
            and "memory limit" in r.output
        )
        r = await sb.run("open('big.bin', 'wb').write(b'0' * (2 * 1024 * 1024))")
        assert r.status == "error" and "File too large" in r.output
        r = await sb.run("import sys\nsys.stdout.buffer.write(bytes(range(256)))\nprint('\\udcff')")
        assert r.status == "ok" and "\\x00" in r.output and "\\udcff" in r.output
        json.dumps(r.to_dict())  # the observation is always valid text


@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_exits(iso: str) -> None:
    async with await Sandbox.create([], config(iso, policy=NO_POLICY)) as sb:
        r = await sb.run("import sys\nprint('a')\nsys.exit(0)\nprint('b')")
        assert (r.status, r.output) == ("ok", "a\n")
        r = await sb.run("import sys\nsys.exit(3)")
        assert r.status == "error" and "SystemExit: 3" in r.output
        r = await sb.run("import os\nos._exit(0)")
        assert r.status == "error" and "before the cell finished" in r.output
        assert (await sb.run("print(1)")).output == "1\n"


# ----------------------------------------------------------------------------------------- containment
@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_policy_rejects_before_running(iso: str) -> None:
    async with await Sandbox.create([], config(iso)) as sb:
        r = await sb.run("open('marker.txt', 'w').write('ran')\nimport subprocess")
        assert (r.status, r.error) == ("rejected", True) and "subprocess" in r.output
        assert not (sb.workspace / "marker.txt").exists()
        assert (await sb.run("print(3)")).output == "3\n"


@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_environment_and_workspace(iso: str, data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-harness-secret")
    files = [data / "sales.csv", DataFile(path=str(data / "station_survey"), kind="dir", name="survey")]
    async with await Sandbox.create(files, config(iso, mode="persistent")) as sb:
        r = await sb.run("import os\nprint(sorted(os.listdir('.')))\nprint(os.environ.get('OPENAI_API_KEY'))")
        assert r.output == "['sales.csv', 'survey']\nNone\n"
        r = await sb.run("print(os.environ['HOME'] == os.getcwd(), len(os.listdir('survey')) > 0)")
        assert r.output == "True True\n"
        r = await sb.run("print(open('sales.csv').readline().strip())")
        assert r.output.startswith("order_id,")
        assert "sk-harness-secret" not in (await sb.run("print(open('/proc/self/environ').read())")).output


@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_originals_cannot_be_changed(iso: str, data: Path) -> None:
    before = tree_digest(data)
    attacks = [
        "open('sales.csv', 'a').write('tampered')",
        "import os\nos.chmod('sales.csv', 0o666)\nopen('sales.csv', 'w').write('tampered')",
        "import shutil\nshutil.rmtree('station_survey', ignore_errors=True)",
        "import os\nos.remove('sales.csv')",
        "import sqlite3\nc = sqlite3.connect('shop.sqlite')\nc.execute('DROP TABLE orders')\nc.commit()",
    ]
    files = [data / "sales.csv", data / "shop.sqlite", data / "station_survey"]
    async with await Sandbox.create(files, config(iso, mode="persistent", policy=NO_POLICY)) as sb:
        for code in attacks:
            await sb.run(code)
        assert (await sb.run("print('alive')")).output == "alive\n"
    assert tree_digest(data) == before


@pytest.mark.parametrize("mode", ["chunked", "persistent"])
@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_no_process_outlives_its_cell(iso: str, mode: str) -> None:
    marker = f"{os.getpid() % 1000 + 31337}"
    code = f"import subprocess\nsubprocess.Popen(['sleep', '{marker}'], start_new_session=True)\nprint('spawned')"
    async with await Sandbox.create([], config(iso, mode=mode, policy=NO_POLICY)) as sb:
        r = await sb.run(code)
        assert r.output == "spawned\n"
        sleeper = f"sleep\0{marker}".encode()
        # the sleeper would live for hours: polling only waits out a slow reap
        assert await wait_until(lambda: not pids_with_cmdline(sleeper)), pids_with_cmdline(sleeper)
        assert (await sb.run("print(1)")).output == "1\n"


@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_killing_the_parent_is_contained(iso: str) -> None:
    async with await Sandbox.create([], config(iso, mode="persistent", policy=NO_POLICY)) as sb:
        await sb.run("x = 1")
        r = await sb.run("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('sent')")
        if sb.cell_uid is not None:  # the worker runs as another uid: the signal is refused
            assert r.status == "error" and "PermissionError" in r.output
        elif r.status == "ok":  # the worker is PID 1 of the cell's namespace: immune from inside it
            assert r.output == "sent\n" and (await sb.run("print(x)")).output == "1\n"
        else:  # it killed its worker: reported, and the next cell gets a fresh one
            assert r.status == "env_error" and r.killed and "worker died" in r.output
        r = await sb.run("print('still serving')")
        assert (r.status, r.output) == ("ok", "still serving\n")


@pytest.mark.skipif(not HAS_BWRAP, reason="a fork bomb is only safe to run inside a PID namespace")
async def test_fork_bomb_is_contained() -> None:
    limits = Limits(wall_s=2.0, max_procs=16)
    async with await Sandbox.create([], config("bwrap", policy=NO_POLICY, limits=limits)) as sb:
        r = await sb.run(
            "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
        )
        assert r.status in ("timeout", "killed")
        assert (await sb.run("print('ok')")).output == "ok\n"
        if sb.cell_uid is not None:
            assert len(pids_of_uid(sb.cell_uid)) <= 1  # at most the spare child waiting for the next cell


@pytest.mark.skipif(not HAS_BWRAP, reason="needs bubblewrap")
async def test_bwrap_blocks_network_and_outside_writes(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    async with await Sandbox.create([], config("bwrap", policy=NO_POLICY)) as sb:
        r = await sb.run("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)")
        assert r.status == "error" and "OSError" in r.output
        r = await sb.run(f"open({str(outside)!r}, 'w').write('x')")
        assert r.status == "error" and not outside.exists()
        r = await sb.run("import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))")
        assert int(r.output) <= 4  # only the sandbox's own: bwrap's init, the worker, this cell (+ spare)


async def test_cancelled_run_leaves_a_working_sandbox() -> None:
    async with await Sandbox.create([], config("auto", mode="persistent")) as sb:
        await sb.run("x = 1")
        task = asyncio.ensure_future(sb.run("import time\ntime.sleep(30)"))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await sb.run("print('fine')")).output == "fine\n"


async def test_closed_sandbox() -> None:
    sb = await Sandbox.create([], config("auto"))
    root = sb.workspace.parent
    await sb.close()
    await sb.close()
    assert not root.exists()
    with pytest.raises(SandboxError, match="closed"):
        await sb.run("print(1)")
    with pytest.raises(ValueError, match="language"):
        await sb.run("1", language="r")  # type: ignore[arg-type]


# -------------------------------------------------------------------------------------------------- SQL
@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_sql(iso: str, data: Path) -> None:
    async with await Sandbox.create(
        [data / "shop.sqlite", data / "sales.csv"], config(iso, sql_save_csv=True)
    ) as sb:
        r = await sb.run("SELECT count(*) AS n FROM orders", language="sql")
        assert r.status == "ok" and r.output.split()[:3] == ["n", "-" * len(r.output.split()[1]), "200"]
        assert (sb.workspace / "sql_result_1.csv").read_text().splitlines() == ["n", "200"]
        r = await sb.run("SELECT * FROM nowhere", language="sql", db="shop.sqlite")
        assert r.status == "error" and "no such table" in r.output
        r = await sb.run("DROP TABLE orders", language="sql")
        assert r.status == "error" and "read-only" in r.output
        r = await sb.run("SELECT 1", language="sql", db="../etc/passwd")
        assert r.status == "error" and "no database" in r.output
    assert file_digest(data / "shop.sqlite") == file_digest(EXAMPLES / "shop.sqlite")
    async with await Sandbox.create([data / "sales.csv"], config(iso)) as sb:
        r = await sb.run("SELECT 1", language="sql")
        assert r.status == "error" and "no SQLite file" in r.output


# ----------------------------------------------------------------------------------------- auto-install
async def test_auto_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def fake_pip(distribution: str, target: Path, timeout_s: float = 600.0) -> tuple[bool, str]:
        calls.append(distribution)
        if distribution == "broken":
            return False, "no matching distribution"
        (target / f"{distribution}.py").write_text("VALUE = 'installed'\n")
        return True, ""

    monkeypatch.setattr(install_mod, "pip_install", fake_pip)
    install_mod.forget_attempts()
    site = tmp_path / "site"
    cfg = config("auto", auto_install=True, install_dir=str(site), install_allowlist=("fakemod", "broken"))
    async with await Sandbox.create([], cfg) as sb:
        r = await sb.run("import fakemod\nprint(fakemod.VALUE)")
        assert (r.status, r.installed) == ("ok", ["fakemod"])
        assert r.output == "[auto-installed: fakemod]\ninstalled\n"
        r = await sb.run("import notallowed")
        assert r.status == "error" and "not on the allow-list" in r.output and r.installed == []
        r = await sb.run("import broken")
        assert r.status == "error" and "auto-install of broken failed" in r.output
        r = await sb.run("import broken")  # a failed install is not retried
    assert calls == ["fakemod", "broken"]
    async with await Sandbox.create([], config("auto", install_dir=str(site))) as sb:  # off by default
        r = await sb.run("import fakemod")
        assert r.status == "error" and "ModuleNotFoundError" in r.output and not r.installed


# ---------------------------------------------------------------------------------------------- helpers
def test_run_cells_sync_helper(data: Path) -> None:
    results = run_cells(["x = 2", "x * 21"], files=[data / "sales.csv"], config=config("auto"))
    assert [r.output for r in results] == ["", "42\n"]
    sql = run_cells(["SELECT 1 AS one"], files=[data / "shop.sqlite"], config=config("auto"), language="sql")
    assert sql[0].status == "ok" and "one" in sql[0].output


async def test_run_cells_refuses_a_running_loop() -> None:
    with pytest.raises(SandboxError, match="running event loop"):
        run_cells(["1"])


async def test_isolation_fallback(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(isolation_mod, "bwrap_available", lambda: (False, "bwrap is not installed"))
    monkeypatch.setattr(isolation_mod, "landlock_available", lambda: (False, "the kernel has no Landlock"))
    monkeypatch.setattr(isolation_mod, "_warned_reduced", False)
    with pytest.raises(isolation_mod.IsolationUnavailable, match="not installed"):
        await Sandbox.create([], config("bwrap"))
    with caplog.at_level("WARNING", logger="datadojo.sandbox"):
        async with await Sandbox.create([], config("auto")) as sb:
            assert sb.isolation == "reduced" and (await sb.run("1")).isolation == "reduced"
        async with await Sandbox.create([], config("auto")):
            pass
    assert sum("isolation is reduced" in rec.message for rec in caplog.records) == 1  # logged once

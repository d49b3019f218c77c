"""The pool's fork server: every worker forked from one pre-imported interpreter, isolated as before.

At the Landlock level and at the bubblewrap level (the server in one ``bwrap`` sandbox for the pool, every
cell process confined by Landlock to its own workspace): the same confinement as a sandbox started on its
own, checked between two sibling sandboxes of one pool. No verdict rests on the clock (waits are bounded
polls that only end a broken test).
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from datadojo.sandbox import PolicyConfig, SandboxConfig, SandboxPool
from datadojo.sandbox import forkserver as forkserver_mod
from datadojo.sandbox import isolation as isolation_mod
from helpers.procs import alive, pids_with_cmdline, wait_until

pytestmark = pytest.mark.timeout(180)

LANDLOCK, WHY_NOT = isolation_mod.landlock_available()
HAS_BWRAP = shutil.which("bwrap") is not None and isolation_mod.bwrap_available()[0]
needs_landlock = pytest.mark.skipif(not LANDLOCK, reason=f"Landlock unavailable: {WHY_NOT}")
LEVELS = [
    pytest.param("landlock", marks=needs_landlock),
    pytest.param(
        "bwrap", marks=[needs_landlock, pytest.mark.skipif(not HAS_BWRAP, reason="bwrap unusable here")]
    ),
]
# The path a user without root takes: bubblewrap makes a user namespace (--unshare-user), in which the mounts
# the worker inherits are locked (a remount must repeat their flags) and cells keep the harness's uid. CI runs
# as root, so the harness is told it is not (os.geteuid patched): bwrap then gets the unprivileged argv and
# really builds the user namespace, which each test checks from the worker's /proc entry.
USERNS = pytest.param(
    "bwrap-userns",
    marks=[needs_landlock, pytest.mark.skipif(not HAS_BWRAP, reason="bwrap unusable here")],
)
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"
OPEN = PolicyConfig(enabled=False)  # the static policy would reject the subprocess cells below


def forked(level: str = "landlock", **kw: object) -> SandboxConfig:
    isolation = "bwrap" if level == "bwrap-userns" else level
    return SandboxConfig(mode="persistent", isolation=isolation, fork_server=True, policy=OPEN, **kw)  # type: ignore[arg-type]


@pytest.fixture
def unprivileged(monkeypatch: pytest.MonkeyPatch, level: str) -> Iterator[bool]:
    """Whether the workers take the path without root: ``bwrap-userns`` (see USERNS), or bubblewrap when the
    tests themselves run as an ordinary user."""
    if level != "bwrap-userns" or os.geteuid() != 0:
        yield level == "bwrap-userns" or (level == "bwrap" and os.geteuid() != 0)
        return
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    isolation_mod.bwrap_available.cache_clear()
    try:
        ok, why = isolation_mod.bwrap_available()
        if not ok:
            pytest.skip(f"bwrap cannot make a user namespace here: {why}")
        yield True
    finally:
        isolation_mod.bwrap_available.cache_clear()  # probed again as root by the next test


def user_namespace(pid: int) -> str | None:
    """The user namespace of ``pid`` (None: not ours to read, as a worker's is not without root)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/user")
    except PermissionError:
        return None


def in_own_user_namespace(pid: int) -> bool | None:
    ns = user_namespace(pid)
    return None if ns is None else ns != user_namespace(os.getpid())


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_fork_server_at_bubblewrap_needs_landlock(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SandboxConfig(fork_server=True).fork_server  # auto and bwrap are valid configurations now
    assert SandboxConfig(fork_server=True, isolation="bwrap").fork_server
    monkeypatch.setattr(isolation_mod, "bwrap_available", lambda: (True, ""))
    monkeypatch.setattr(isolation_mod, "landlock_available", lambda: (False, "the kernel has no Landlock"))
    # insisting on bubblewrap: refused, naming why (siblings would share one namespace with nothing between)
    with pytest.raises(isolation_mod.IsolationUnavailable, match=r"needs Landlock too .*the kernel has no"):
        forkserver_mod.fork_level("bwrap")
    # auto keeps the safer level and forks nothing
    assert forkserver_mod.fork_level("auto") is None
    monkeypatch.setattr(isolation_mod, "landlock_available", lambda: (True, ""))
    assert forkserver_mod.fork_level("auto") == forkserver_mod.fork_level("bwrap") == "bwrap"
    monkeypatch.setattr(isolation_mod, "bwrap_available", lambda: (False, "bwrap failed here"))
    assert forkserver_mod.fork_level("auto") == "landlock"


async def test_a_pool_insisting_on_bwrap_refuses_to_fork_without_landlock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(isolation_mod, "bwrap_available", lambda: (True, ""))
    monkeypatch.setattr(isolation_mod, "landlock_available", lambda: (False, "the kernel has no Landlock"))
    async with SandboxPool(forked("bwrap"), size=1) as pool:
        with pytest.raises(isolation_mod.IsolationUnavailable, match="needs Landlock too"):
            async with pool.session([]):
                pass
        assert pool._server is None


@pytest.mark.parametrize("level", LEVELS)
async def test_workers_are_forked_from_one_server_with_pandas_imported_once(
    tmp_path: Path, level: str
) -> None:
    shutil.copy(EXAMPLES / "sales.csv", tmp_path / "sales.csv")
    async with SandboxPool(forked(level), size=3) as pool:
        await pool.start()
        server = pool._server
        assert server is not None and server.ready["preloaded"] == ["numpy", "pandas"]
        assert server.isolation == level
        workers = [sb._worker.proc.pid for sb in pool._ready]  # type: ignore[union-attr]
        # every worker is the server's child (pids as the host sees them), not an interpreter of its own
        for pid in workers:
            assert _ppid(pid) == server.pid
        async with pool.session([tmp_path / "sales.csv"]) as a, pool.session([]) as b:
            r = await a.run("import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(len(df))")
            assert r.status == "ok" and r.isolation == level, r.output
            assert (await a.run("print(len(df) * 2)")).output.strip() == str(2 * int(r.output))
            # b is another trajectory: its own namespace and its own workspace
            nb = await b.run("print('df' in globals(), sorted(__import__('os').listdir('.')))")
            assert nb.output.strip() == "False []"
            # and it cannot reach a's workspace: under bubblewrap b's own mount namespace does not even
            # show it; at the Landlock level the ruleset denies it
            peek = await b.run(f"open({str(a.workspace / 'sales.csv')!r}).read()")
            denied = "FileNotFoundError" if level == "bwrap" else "PermissionError"
            assert peek.status == "error" and denied in peek.output, peek.output
    assert not alive(server.pid)
    for pid in workers:
        assert await wait_until(lambda pid=pid: not alive(pid))


@pytest.mark.parametrize("level", [*LEVELS, USERNS])
async def test_forked_sandboxes_are_confined_like_started_ones(
    tmp_path: Path, level: str, unprivileged: bool
) -> None:
    """The canaries between two siblings of one pool: network, host files, writes outside, the neighbour."""
    secret = tmp_path / "secret.txt"
    secret.write_text("HOST-CANARY-41c2\n")
    secret.chmod(0o644)
    data = tmp_path / "sales.csv"
    shutil.copy(EXAMPLES / "sales.csv", data)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        async with (
            SandboxPool(forked(level), size=2) as pool,
            pool.session([data]) as a,
            pool.session([]) as b,
        ):
            assert a.isolation == b.isolation == forked(level).isolation
            assert a.landlock and a.landlock["files"], a.landlock
            for sb in (a, b):  # the worker is in a user namespace exactly when the harness is not root
                pid = sb._worker.proc.pid  # type: ignore[union-attr]
                assert in_own_user_namespace(pid) in (unprivileged, None), (level, pid)
            # inputs readable, read-only
            ok = await a.run("print(open('sales.csv').read()[:6])")
            assert ok.status == "ok" and ok.output.strip() == "order_", ok.output
            change = await a.run("open('sales.csv', 'a').write('x')")
            assert change.status == "error" and "Error" in change.output, change.output
            assert "x" not in data.read_text()[-2:]
            # a host file outside the inputs
            read = await a.run(f"print(open({str(secret)!r}).read())")
            assert read.status == "error" and "HOST-CANARY" not in read.output, read.output
            # writes outside the workspace: the pool's folder, the sandbox's own folder, the host's /tmp
            root = a.workspace.parent.parent
            for target in (root / "planted.txt", a.workspace.parent / "planted.txt"):
                wrote = await a.run(f"open({str(target)!r}, 'w').write('x')")
                assert wrote.status == "error", (target, wrote.output)
                assert not target.exists()
            host_tmp = Path("/tmp") / f"planted-{os.getpid()}.txt"
            wrote = await a.run(
                f"open({str(host_tmp)!r}, 'w').write('x')\nprint(open({str(host_tmp)!r}).read())"
            )
            assert not host_tmp.exists()
            if level != "landlock":  # its own private /tmp, as a sandbox started on its own has
                assert wrote.status == "ok" and wrote.output == "x\n", wrote.output
                gone = await b.run(f"import os\nprint(os.path.exists({str(host_tmp)!r}))")
                assert gone.output == "False\n", gone.output  # not the sibling's /tmp either
            else:  # the Landlock level: the host's /tmp, denied (TMPDIR is the sandbox's temp folder)
                assert wrote.status == "error", wrote.output
            # the sibling's workspace: neither readable nor writable
            await a.run("open('mine.txt', 'w').write('A-PRIVATE')")
            peek = await b.run(f"print(open({str(a.workspace / 'mine.txt')!r}).read())")
            assert peek.status == "error" and "A-PRIVATE" not in peek.output, peek.output
            put = await b.run(f"open({str(a.workspace / 'from_b.txt')!r}, 'w').write('x')")
            assert put.status == "error" and not (a.workspace / "from_b.txt").exists(), put.output
            # the network: a listener of the host, and anything beyond
            net = await b.run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)")
            assert net.status == "error" and "Error" in net.output, net.output
            if a.landlock.get("tcp"):
                assert "PermissionError" in net.output, net.output
    finally:
        listener.close()


@pytest.mark.parametrize("level", [LEVELS[1], USERNS])
async def test_without_root_every_forked_worker_has_a_user_namespace_of_its_own(
    level: str, unprivileged: bool
) -> None:
    """Without root, bubblewrap makes one user namespace for the fork server, and RLIMIT_NPROC counts a
    user's processes per user namespace: shared, every sibling's worker and cells would count against each
    cell's ``max_procs`` (a pool of 24 could not start a subprocess with ``max_procs=16``). So each forked
    worker makes its own, in which no further one can be made (bubblewrap's ``--disable-userns``), and
    its cells hold no capability there."""
    probe = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print('caps', open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n"
        "made = libc.unshare(0x10000000) == 0\n"
        "print('nested', 'made' if made else os.strerror(ctypes.get_errno()))"
    )
    async with SandboxPool(forked(level), size=2) as pool, pool.session([]) as a, pool.session([]) as b:
        spaces = {user_namespace(sb._worker.proc.pid) for sb in (a, b)}  # type: ignore[union-attr]
        ours = user_namespace(os.getpid())
        if None not in spaces:  # readable: we are root
            assert len(spaces) == (2 if unprivileged else 1) and (ours in spaces) != unprivileged, spaces
        for sb in (a, b):
            r = await sb.run(probe)
            assert r.status == "ok", r.output
            assert "caps 0000000000000000\n" in r.output, r.output
            if unprivileged:
                assert "nested made" not in r.output and "nested " in r.output, r.output


@pytest.mark.parametrize("level", [LEVELS[1]])
async def test_a_cells_process_limit_counts_its_own_sandbox_alone(level: str) -> None:
    """24 live siblings (48 processes of the pool) and ``max_procs=16``: a cell still starts a subprocess
    and threads. Without root this failed with EAGAIN while the siblings shared the server's user
    namespace (run the tests as an ordinary user to see it: as root, each sandbox's cells have a uid of
    their own, and uid 0 in a user namespace is exempt from the limit, so USERNS cannot show it)."""
    from datadojo.sandbox import Limits

    size = 24
    cell = (
        "import subprocess, threading\nprint(subprocess.run(['true']).returncode)\n"
        "ts = [threading.Thread(target=len, args=((),)) for _ in range(4)]\n"
        "[t.start() for t in ts]\n[t.join() for t in ts]\nprint('threads ok')"
    )
    async with SandboxPool(forked(level, limits=Limits(max_procs=16)), size=size) as pool:
        sessions = [pool.session([]) for _ in range(size)]
        boxes = [await s.__aenter__() for s in sessions]
        try:
            for sb in (boxes[0], boxes[-1]):
                r = await sb.run(cell)
                assert (r.status, r.output) == ("ok", "0\nthreads ok\n"), r.output
            bomb = await boxes[1].run(
                "import subprocess\nps = [subprocess.Popen(['sleep', '30']) for _ in range(40)]"
            )
            assert bomb.status in ("error", "killed"), bomb.output  # the limit still holds per sandbox
        finally:
            for s in sessions:
                await s.__aexit__(None, None, None)


@pytest.mark.parametrize("level", [*LEVELS, USERNS])
async def test_a_cells_leftovers_are_swept_without_touching_other_sandboxes(
    level: str, unprivileged: bool
) -> None:
    """Forked workers have no PID namespace of their own: the sweep after one cell must spare every other
    sandbox (a worker that believed it had one would kill every process it can see but PID 1)."""
    marker = f"{300 + os.getpid() % 1000}.{len(level)}7"  # a sleep nobody else runs
    async with SandboxPool(forked(level), size=2) as pool, pool.session([]) as a, pool.session([]) as b:
        await a.run("state = 41")
        worker_a = a._worker.proc.pid  # type: ignore[union-attr]
        assert in_own_user_namespace(worker_a) in (unprivileged, None)  # cells of both share one uid there
        left = await b.run(
            f"import subprocess\np = subprocess.Popen(['sleep', '{marker}'], start_new_session=True)\nprint(p.pid)"
        )
        assert left.status == "ok", left.output
        # b's leftover is gone after b's cell (found by its command line: its pid above is the pool's
        # namespace's under bubblewrap) ...
        assert await wait_until(lambda: not pids_with_cmdline(marker.encode()))
        r = await a.run("print(state + 1)")  # ... and a's kernel (its state) is untouched
        assert (r.output.strip(), r.restarted) == ("42", False)
        assert alive(worker_a)


@pytest.mark.parametrize("level", LEVELS)
async def test_a_worker_killed_from_outside_is_forked_again(level: str) -> None:
    async with SandboxPool(forked(level), size=1) as pool, pool.session([]) as sb:
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
        assert _ppid(new) == pool._server.pid


def test_the_fork_server_is_a_flag_of_the_commands_that_run_pools() -> None:
    from typer.testing import CliRunner

    from datadojo.bench import get_benchmark
    from datadojo.cli.app import app
    from datadojo.cli.eval import _sandbox

    assert SandboxConfig().fork_server  # the default since workers get their own /tmp (docs/sandbox.md)
    for command in (["rollout"], ["ask"], ["eval"]):
        res = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
        assert res.exit_code == 0 and "--no-fork-server" in res.output, (command, res.output)
    bench = get_benchmark("dabench")
    assert _sandbox(bench, None, None, None, None, False).fork_server is False
    assert _sandbox(bench, None, None, None, None, None) is None  # nothing given: the benchmark's own

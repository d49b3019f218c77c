"""No IPC between trajectories (issue 38, finding 2), and nothing of the host in reach at Landlock (finding 3).

System V IPC objects (shared memory, message queues, semaphores) and POSIX message queues live in the
kernel's IPC namespace, which no file-system rule covers: on main a segment written by trajectory 1 was
read by trajectory 2 of the same pool at every level, and siblings of one pool (the Landlock level) read
each other's. Each probe here is judged by the secret reaching the other side, not by the writer's word.
At the Landlock level: a host UNIX socket made world-writable (so that only the sandbox, not file
permissions, can stop it) is not reachable, a file in a ``0700`` folder (``$HOME``, a run folder) cannot
be found by ``stat()``, and cells do not run as uid 0 even though the Python installation here (pyenv
under ``/root``) is not readable by other users.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from datadojo.sandbox import PolicyConfig, SandboxConfig, SandboxPool
from datadojo.sandbox import isolation as isolation_mod
from datadojo.testing.ipc import IpcChannel, ipc_probe_cells

pytestmark = pytest.mark.timeout(300)

LANDLOCK, WHY_NOT = isolation_mod.landlock_available()
HAS_BWRAP = shutil.which("bwrap") is not None and isolation_mod.bwrap_available()[0]
needs_landlock = pytest.mark.skipif(not LANDLOCK, reason=f"Landlock unavailable: {WHY_NOT}")
needs_bwrap = pytest.mark.skipif(not HAS_BWRAP, reason="bwrap unusable here")
#: (isolation, fork server): every level, a sandbox started on its own and one forked by the pool's server.
LEVELS = [
    pytest.param(("bwrap", False), marks=needs_bwrap, id="bwrap"),
    pytest.param(("bwrap", True), marks=[needs_bwrap, needs_landlock], id="bwrap+fork"),
    pytest.param(("landlock", False), marks=needs_landlock, id="landlock"),
    pytest.param(("landlock", True), marks=needs_landlock, id="landlock+fork"),
    pytest.param(("none", False), id="reduced"),
    pytest.param(("none", True), id="reduced+fork"),
]
OPEN = PolicyConfig(enabled=False)  # the static policy would refuse ctypes; the level must hold on its own


def _config(level: tuple[str, bool], mode: str = "persistent") -> SandboxConfig:
    isolation, fork = level
    return SandboxConfig(isolation=isolation, mode=mode, fork_server=fork, policy=OPEN, preload=())  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["persistent", "chunked"])
@pytest.mark.parametrize("level", LEVELS)
async def test_ipc_written_by_one_trajectory_is_gone_for_the_next(level: tuple[str, bool], mode: str) -> None:
    channel = IpcChannel.new()
    secret = channel.secret
    cells = ipc_probe_cells(channel)
    try:
        async with SandboxPool(_config(level, mode), size=1) as pool:
            async with pool.session([]) as first:
                for writer, _reader in cells.values():
                    assert (await first.run(writer)).status == "ok"
            async with pool.session([]) as second:
                assert second is first  # the same worker, reset between the two trajectories
                found = {ch: (await second.run(reader)).output for ch, (_w, reader) in cells.items()}
        leaked = [ch for ch, out in found.items() if secret in out]
        assert leaked == [], found
        assert channel.host_holds() == []  # nothing outlives the pool on the host either
    finally:
        channel.host_remove()


@pytest.mark.parametrize("level", LEVELS)
async def test_sibling_trajectories_cannot_talk_through_ipc(level: tuple[str, bool]) -> None:
    channel = IpcChannel.new()
    secret = channel.secret
    cells = ipc_probe_cells(channel)
    try:
        async with (
            SandboxPool(_config(level), size=2) as pool,
            pool.session([]) as writer,
            pool.session([]) as reader,
        ):
            assert writer is not reader
            for ch, (write, read) in cells.items():
                assert (await writer.run(write)).status == "ok"
                out = (await reader.run(read)).output
                assert secret not in out, (ch, out)
    finally:
        channel.host_remove()


WORKLOAD = """
import numpy as np, pandas as pd
df = pd.DataFrame({"g": np.arange(60) % 3, "v": np.arange(60.0)})
print(df.groupby("g")["v"].sum().to_dict())
import socket
a, b = socket.socketpair(); a.send(b"pair"); print(b.recv(4).decode())
"""


@pytest.mark.parametrize("level", LEVELS)
async def test_an_ordinary_analysis_still_runs(level: tuple[str, bool]) -> None:
    """NumPy, pandas, a socket pair (multiprocessing.Pipe) are untouched by the filter."""
    async with SandboxPool(_config(level), size=1) as pool, pool.session([]) as sb:
        r = await sb.run(WORKLOAD)
    # sums of 0..59 by residue mod 3: 0+3+...+57 = 570, 1+4+...+58 = 590, 2+5+...+59 = 610
    assert r.status == "ok", r.output
    assert r.output.splitlines() == ["{0: 570.0, 1: 590.0, 2: 610.0}", "pair"]


BWRAP_LEVELS = [
    pytest.param(("bwrap", False), marks=needs_bwrap, id="bwrap"),
    pytest.param(("bwrap", True), marks=[needs_bwrap, needs_landlock], id="bwrap+fork"),
]
SHM_WRITE = """
import multiprocessing as mp, os
with mp.Pool(2) as pool:  # POSIX semaphores: files in /dev/shm
    print(sum(pool.map(abs, range(-4, 4))))
with open('/dev/shm/left-{secret}', 'w') as fh:
    fh.write('{secret}')
"""
SHM_READ = "import os\nprint(sorted(os.listdir('/dev/shm')))\n"


@pytest.mark.parametrize("level", BWRAP_LEVELS)
async def test_dev_shm_is_private_to_a_trajectory_under_bubblewrap(level: tuple[str, bool]) -> None:
    """multiprocessing works (on main its locks failed with EACCES: /dev/shm was not writable by the
    cells' uid), and what a trajectory leaves in /dev/shm is seen neither by a sibling nor by the next."""
    secret = "SHMSECRET" + secrets.token_hex(6)
    async with SandboxPool(_config(level), size=2) as pool:
        async with pool.session([]) as first, pool.session([]) as sibling:
            r = await first.run(SHM_WRITE.format(secret=secret))
            assert r.status == "ok" and r.output.splitlines()[0] == "16", r.output  # 4+3+2+1+0+1+2+3
            assert secret not in (await sibling.run(SHM_READ)).output
        async with pool.session([]) as a, pool.session([]) as b:
            assert first in (a, b)  # both workers reset and handed out again
            for sb in (a, b):
                assert secret not in (await sb.run(SHM_READ)).output


# ------------------------------------------------------------------------------------ host at Landlock
LANDLOCK_LEVELS = [
    pytest.param(("landlock", False), marks=needs_landlock, id="landlock"),
    pytest.param(("landlock", True), marks=needs_landlock, id="landlock+fork"),
]


@pytest.fixture
def host_socket() -> Iterator[tuple[str, socket.socket]]:
    """A listening UNIX socket of the host outside any workspace, writable by every user (as a Docker
    socket made 0666 is): file permissions do not stop a connect, only the sandbox can."""
    folder = tempfile.mkdtemp(prefix="datadojo-hostsock-")
    os.chmod(folder, 0o755)
    path = os.path.join(folder, "daemon.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(4)
    server.setblocking(False)
    try:
        yield path, server
    finally:
        server.close()
        shutil.rmtree(folder, ignore_errors=True)


def _accepted(server: socket.socket) -> int:
    n = 0
    while True:
        try:
            conn, _addr = server.accept()
        except BlockingIOError:
            return n
        conn.close()
        n += 1


@pytest.mark.parametrize("level", LANDLOCK_LEVELS)
async def test_a_host_unix_socket_is_out_of_reach(
    level: tuple[str, bool], host_socket: tuple[str, socket.socket]
) -> None:
    path, server = host_socket
    cell = (
        "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n"
        f"    s.connect({path!r}); s.send(b'x'); print('connected')\n"
        "except OSError as exc:\n    print('refused', exc.errno)\n"
    )
    async with SandboxPool(_config(level), size=1) as pool, pool.session([]) as sb:
        r = await sb.run(cell)
    assert _accepted(server) == 0, r.output
    assert "connected" not in r.output


@pytest.fixture
def private_folders() -> Iterator[dict[str, Path]]:
    """A ``$HOME``-like folder and a run folder, both 0700 as the harness's own folders are, each with a
    file a cell must not learn of (answers, a finished run's summary)."""
    made = {}
    for label, filename in (("home", "answers.jsonl"), ("run", "summary.json")):
        folder = Path(tempfile.mkdtemp(prefix=f"datadojo-{label}-"))
        os.chmod(folder, 0o700)
        (folder / filename).write_text("x" * 1234)
        made[label] = folder / filename
    try:
        yield made
    finally:
        for path in made.values():
            shutil.rmtree(path.parent, ignore_errors=True)


@pytest.mark.parametrize("level", LANDLOCK_LEVELS)
async def test_cells_do_not_run_as_root(level: tuple[str, bool]) -> None:
    """On main a root harness whose Python other users cannot read (pyenv under /root, as here) ran its
    cells as uid 0 at the Landlock level."""
    async with SandboxPool(_config(level), size=1) as pool, pool.session([]) as sb:
        r = await sb.run("import os, pandas\nprint(os.getuid(), os.geteuid(), os.getgid())\n")
    assert r.status == "ok", r.output
    assert all(int(x) != 0 for x in r.output.split()), r.output


@pytest.mark.skipif(
    os.geteuid() != 0,
    reason="without root, cells share the harness's uid at the Landlock level, and Landlock has no right "
    "for stat(): the harness's own files can be stat()ed (docs/sandbox.md, Known limits)",
)
@pytest.mark.parametrize("level", LANDLOCK_LEVELS)
async def test_private_host_files_are_not_found_by_stat(
    level: tuple[str, bool], private_folders: dict[str, Path]
) -> None:
    cell = "import os\n"
    for path in private_folders.values():
        cell += (
            f"try:\n    print('size', os.stat({str(path)!r}).st_size)\nexcept OSError as exc:\n"
            "    print('denied', exc.errno)\n"
            f"try:\n    print('list', os.listdir({str(path.parent)!r}))\nexcept OSError as exc:\n"
            "    print('denied', exc.errno)\n"
        )
    async with SandboxPool(_config(level), size=1) as pool, pool.session([]) as sb:
        r = await sb.run(cell)
    assert r.status == "ok", r.output
    assert r.output.split().count("denied") == 4, r.output
    assert "1234" not in r.output and "answers.jsonl" not in r.output and "summary.json" not in r.output

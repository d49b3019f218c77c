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

import ctypes
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

_LIBC = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
"""


def _cells(key: int, name: str, secret: str) -> dict[str, tuple[str, str]]:
    """Per channel: (the writer's cell, the reader's cell). The reader prints what it found."""
    data = secret.encode()
    return {
        "sysv shm": (
            _LIBC + f"sid = libc.shmget({key}, 4096, 0o1666)\n"
            "if sid >= 0:\n"
            "    addr = libc.shmat(sid, None, 0)\n"
            f"    ctypes.memmove(addr, {data!r}, {len(data)})\n"
            "print('shmget', sid, ctypes.get_errno())\n",
            _LIBC + f"ids = [libc.shmget({key}, 0, 0)] + list(range(64))\n"
            "for sid in ids:\n"
            "    addr = libc.shmat(sid, None, 0o10000) if sid >= 0 else None\n"
            "    if addr not in (None, ctypes.c_void_p(-1).value):\n"
            f"        print('found', ctypes.string_at(addr, {len(data)}))\n"
            "print('done')\n",
        ),
        "sysv msg": (
            _LIBC + f"q = libc.msgget({key}, 0o1666)\n"
            f"buf = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_long) + {len(data)})\n"
            "ctypes.c_long.from_buffer(buf).value = 1\n"
            f"buf[ctypes.sizeof(ctypes.c_long):] = {data!r}\n"
            f"r = libc.msgsnd(q, buf, {len(data)}, 0o4000) if q >= 0 else -1\n"
            "print('msgsnd', q, r, ctypes.get_errno())\n",
            _LIBC + f"ids = [libc.msgget({key}, 0)] + list(range(64))\n"
            "buf = ctypes.create_string_buffer(4096)\n"
            "for q in ids:\n"
            "    if q >= 0 and libc.msgrcv(q, buf, 4000, 0, 0o4000) > 0:\n"
            "        print('found', buf.raw[ctypes.sizeof(ctypes.c_long):][:64])\n"
            "print('done')\n",
        ),
        "posix mq": (
            _LIBC + f"mq = libc.mq_open({name.encode()!r}, os.O_CREAT | os.O_RDWR, 0o666, None)\n"
            f"r = libc.mq_send(mq, {data!r}, {len(data)}, 0) if mq >= 0 else -1\n"
            "print('mq_send', mq, r, ctypes.get_errno())\n",
            _LIBC + f"mq = libc.mq_open({name.encode()!r}, os.O_RDONLY | os.O_NONBLOCK)\n"
            "buf = ctypes.create_string_buffer(1 << 16)\n"
            "if mq >= 0 and libc.mq_receive(mq, buf, 1 << 16, None) > 0:\n"
            "    print('found', buf.value)\n"
            "print('done')\n",
        ),
    }


def _channel() -> tuple[int, str, str]:
    key = 0x5EED0000 + secrets.randbelow(0xFFFF)
    return key, f"/datadojo-test-{secrets.token_hex(4)}", "IPCSECRET-" + secrets.token_hex(6)


def _host_remove(key: int, name: str) -> None:
    """Remove from the host what a writer left there (main: the Landlock level made it in the host's ns)."""
    libc = ctypes.CDLL(None, use_errno=True)
    sid = libc.shmget(key, 0, 0)
    if sid >= 0:
        libc.shmctl(sid, 0, None)  # IPC_RMID
    q = libc.msgget(key, 0)
    if q >= 0:
        libc.msgctl(q, 0, None)
    libc.mq_unlink(name.encode())


def _host_holds(key: int, name: str) -> list[str]:
    """Which of the writer's objects exist in the host's IPC namespace (the test's own)."""
    libc = ctypes.CDLL(None, use_errno=True)
    held = []
    if libc.shmget(key, 0, 0) >= 0:
        held.append("sysv shm")
    if libc.msgget(key, 0) >= 0:
        held.append("sysv msg")
    mq = libc.mq_open(name.encode(), os.O_RDONLY | os.O_NONBLOCK)
    if mq >= 0:
        libc.mq_close(mq)
        held.append("posix mq")
    return held


def _config(level: tuple[str, bool], mode: str = "persistent") -> SandboxConfig:
    isolation, fork = level
    return SandboxConfig(isolation=isolation, mode=mode, fork_server=fork, policy=OPEN, preload=())  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["persistent", "chunked"])
@pytest.mark.parametrize("level", LEVELS)
async def test_ipc_written_by_one_trajectory_is_gone_for_the_next(level: tuple[str, bool], mode: str) -> None:
    key, name, secret = _channel()
    cells = _cells(key, name, secret)
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
        assert _host_holds(key, name) == []  # nothing outlives the pool on the host either
    finally:
        _host_remove(key, name)


@pytest.mark.parametrize("level", LEVELS)
async def test_sibling_trajectories_cannot_talk_through_ipc(level: tuple[str, bool]) -> None:
    key, name, secret = _channel()
    cells = _cells(key, name, secret)
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
        _host_remove(key, name)


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
async def test_private_host_files_are_not_found_by_stat_and_cells_are_not_root(
    level: tuple[str, bool], private_folders: dict[str, Path]
) -> None:
    cell = "import os\nprint('uid', os.getuid(), os.geteuid())\n"
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
    uid_line = r.output.splitlines()[0].split()
    assert uid_line[0] == "uid" and int(uid_line[1]) != 0 and int(uid_line[2]) != 0, r.output
    assert "1234" not in r.output and "answers.jsonl" not in r.output and "summary.json" not in r.output

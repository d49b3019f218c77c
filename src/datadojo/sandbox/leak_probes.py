"""Probes for state that crosses from one trajectory to the next, or between two live sandboxes (issue 38).

Under GRPO the samples of one task go through the same pool: whatever a trajectory leaves in a reused
worker, or writes where a sibling running at the same time can read it, is a channel a policy can learn
to use. Each :class:`LeakProbe` is a pair of cells: ``write`` plants a secret token (trajectory 1, or
sandbox A), ``look`` searches for it (trajectory 2 in the same reused worker, or sandbox B while A is
alive) and prints ``LEAK`` followed by what it found. A probe is *contained* when the look finds nothing.

The look cells never contain the token as one literal: they build it at run time from two halves, or a
look cell that reads back its own source (``linecache``) would find it there.

One place for the probe set: ``tests/sandbox/test_sandbox_leaks.py`` runs it at every isolation level and
mode, and ``benchmarks/security.py`` prints its rows in the security matrix (docs/sandbox.md).
"""

from __future__ import annotations

import contextlib
import secrets
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "LeakProbe",
    "LeakVerdict",
    "remove_ipc",
    "remove_leftovers",
    "reuse_probes",
    "run_reuse_probes",
    "run_sibling_probes",
    "sibling_probes",
]

#: What the look cell prints when it finds what the write cell left.
LEAK = "LEAK"


@dataclass(frozen=True)
class LeakProbe:
    """One channel: ``write`` plants, ``look`` searches; ``family`` groups them in the matrix.

    ``judge(write_output, look_output)`` decides; the default: contained unless the look printed ``LEAK``.
    """

    name: str
    kind: Literal["reuse", "sibling"]
    family: Literal["state", "files", "ipc", "process", "random"]
    write: str
    look: str
    judge: Callable[[str, str], bool] | None = None
    #: Cells run after the look in the *writing* sandbox (sibling probes: is A still intact?).
    after: str = ""
    #: The secret the write cell plants (to clean up after it where nothing contains it).
    token: str = ""

    def contained(self, write_output: str, look_output: str, after_output: str = "") -> bool:
        if self.judge is not None:
            return self.judge(write_output, look_output)
        if self.after and after_output.strip() != "alive":
            return False  # the writer lost its process, its worker or its state to the look
        return LEAK not in look_output

    def look_cell(self, write_output: str) -> str:
        """The look cell; ``PIDS`` in it becomes the pids the write cell printed (``pids 12 3``)."""
        if "PIDS" not in self.look:
            return self.look
        line = next((x for x in write_output.splitlines() if x.startswith("pids ")), "pids")
        pids = [int(x) for x in line.split()[1:] if x.isdigit()]
        return self.look.replace("PIDS", repr(pids))


@dataclass
class LeakVerdict:
    """The outcome of one probe: contained or not, and the cells' outputs (for the report)."""

    name: str
    kind: str
    family: str
    contained: bool
    write_status: str
    look_status: str
    write_output: str
    look_output: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "family": self.family,
            "contained": self.contained,
            "write_status": self.write_status,
            "look_status": self.look_status,
            "write_output": self.write_output[-300:],
            "look_output": self.look_output[-300:],
            **self.extra,
        }


def _halves(token: str) -> str:
    """An expression that builds ``token`` at run time without the token appearing in the source."""
    mid = len(token) // 2
    return f"({token[:mid]!r} + {token[mid:]!r})"


def _ipc_key(token: str) -> int:
    return zlib.crc32(token.encode()) & 0x3FFFFFFF or 1


_LIBC = (
    "import ctypes, ctypes.util\nlibc = ctypes.CDLL(ctypes.util.find_library('c') or None, use_errno=True)\n"
)
_RT = (
    "import ctypes, ctypes.util\n"
    "try:\n    rt = ctypes.CDLL('librt.so.1', use_errno=True)\n    rt.mq_open\n"
    "except (OSError, AttributeError):\n    rt = ctypes.CDLL(None, use_errno=True)\n"
)


def _ipc_cells(token: str) -> list[tuple[str, str, str]]:
    """(name, write, look) for System V shared memory, message queues, semaphores, and POSIX queues."""
    key = _ipc_key(token)
    mq = f"/dd-leak-{key:x}"
    return [
        (
            "System V shared memory",
            _LIBC + "libc.shmat.restype = ctypes.c_void_p\n"
            f"sid = libc.shmget({key}, 4096, 0o1666)\nprint('shmget', sid)\n"
            "if sid >= 0:\n    addr = libc.shmat(sid, None, 0)\n"
            "    if addr not in (None, ctypes.c_void_p(-1).value):\n"
            f"        ctypes.memmove(addr, {token!r}.encode(), {len(token)})\n",
            _LIBC + "libc.shmat.restype = ctypes.c_void_p\n"
            f"sid = libc.shmget({key}, 0, 0)\n"
            # the segment's existence is the leak (its key is the token's): said before attaching
            f"if sid >= 0:\n    print('{LEAK} segment', sid, flush=True)\n"
            "    addr = libc.shmat(sid, None, 0o10000)\n"
            "    if addr not in (None, ctypes.c_void_p(-1).value):\n"
            f"        print(ctypes.string_at(addr, {len(token)}))\n"
            "else:\n    print('no segment', ctypes.get_errno())\n",
        ),
        (
            "System V message queue",
            _LIBC + f"q = libc.msgget({key}, 0o1666)\nprint('msgget', q)\n",
            _LIBC + f"q = libc.msgget({key}, 0)\n"
            f"print('{LEAK} queue', q) if q >= 0 else print('no queue', ctypes.get_errno())\n",
        ),
        (
            "System V semaphore",
            _LIBC + f"s = libc.semget({key}, 1, 0o1666)\nprint('semget', s)\n",
            _LIBC + f"s = libc.semget({key}, 1, 0)\n"
            f"print('{LEAK} semaphore', s) if s >= 0 else print('no semaphore', ctypes.get_errno())\n",
        ),
        (
            "POSIX message queue",
            _RT + f"q = rt.mq_open({mq.encode()!r}, 0o100 | 0o2, 0o666, None)\nprint('mq_open', q)\n",
            _RT + f"q = rt.mq_open({mq.encode()!r}, 0)\n"
            f"print('{LEAK} mqueue', q) if q >= 0 else print('no mqueue', ctypes.get_errno())\n",
        ),
    ]


def _file_cells(token: str, folder_expr: str, label: str) -> tuple[str, str]:
    name = f"dd-leak-{label}"
    write = (
        f"import os\npath = os.path.join({folder_expr}, {name!r})\n"
        f"try:\n    open(path, 'w').write({token!r}); print('wrote', path)\n"
        "except Exception as exc:\n    print('failed', type(exc).__name__)\n"
    )
    look = (
        f"import os\npath = os.path.join({folder_expr}, {name!r})\n"
        f"try:\n    text = open(path).read()\n    print('{LEAK}' if {_halves(token)} in text else 'other', path)\n"
        "except Exception as exc:\n    print('absent', type(exc).__name__)\n"
    )
    return write, look


def reuse_probes(token: str | None = None) -> list[LeakProbe]:
    """Trajectory 1 writes, trajectory 2 (same pool, same worker after its reset) looks.

    The order matters only in chunked mode, where every later cell of trajectory 1 re-runs the earlier
    ones: the random draw comes first (nothing draws before it), the change of directory last.
    """
    token = token or "dd" + secrets.token_hex(8)
    t = _halves(token)
    probes: list[LeakProbe] = []

    def add(name: str, family: Any, write: str, look: str, judge: Any = None) -> None:
        probes.append(LeakProbe(name, "reuse", family, write, look, judge, token=token))

    add(
        "random stream (first random.random())",
        "random",
        "import random\nprint(repr(random.random()))\n",
        "import random\nprint(repr(random.random()))\n",
        lambda w, look: w.strip() != look.strip() or not w.strip(),
    )
    add(
        "linecache (earlier cells' source)",
        "state",
        f"answer_cell = {token!r}\nprint('kept')\n",
        "import linecache\n"
        f"hits = [k for k, v in list(linecache.cache.items()) if {t} in ''.join(v[2] if len(v) > 2 else [])]\n"
        f"print('{LEAK}', hits) if hits else print('clean', len(linecache.cache))\n",
    )
    add(
        "sys.modules addition",
        "state",
        f"import sys, types\nm = types.ModuleType('dd_leak_mod')\nm.secret = {token!r}\n"
        "sys.modules['dd_leak_mod'] = m\nimport imaplib\nprint('added')\n",
        "import sys\nfound = [n for n in ('dd_leak_mod', 'imaplib') if n in sys.modules]\n"
        f"print('{LEAK}', found) if found else print('clean')\n",
    )
    add(
        "monkey-patched library (json.dumps)",
        "state",
        f"import json\njson.dumps = lambda *a, **k: {token!r}\nprint('patched')\n",
        f"import json\nout = json.dumps([1])\nprint('{LEAK}', out) if {t} in out else print('clean', out)\n",
    )
    add(
        "monkey-patched library (pandas.read_csv)",
        "state",
        "try:\n    import pandas\n"
        f"    pandas.read_csv = lambda *a, **k: {token!r}\n    print('patched')\n"
        "except ImportError:\n    print('no pandas')\n",
        "try:\n    import pandas\n"
        f"    out = pandas.read_csv('x')\nexcept Exception as exc:\n    out = type(exc).__name__\n"
        f"print('{LEAK}', out) if isinstance(out, str) and {t} in out else print('clean')\n",
    )
    add(
        "builtins change",
        "state",
        f"import builtins\nbuiltins.dd_leak = {token!r}\nbuiltins.ascii = lambda *a, **k: {token!r}\nprint('set')\n",
        "import builtins\n"
        f"found = [x for x in (getattr(builtins, 'dd_leak', ''), str(ascii(1))) if {t} in str(x)]\n"
        f"print('{LEAK}', found) if found else print('clean')\n",
    )
    add(
        "atexit hook",
        "state",
        f"import atexit\natexit.register(print, {token!r})\nprint('registered')\n",
        # Running the hooks here shows any that came along (and prints the token if it did).
        f"import atexit, io, contextlib\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n"
        "    atexit._run_exitfuncs()\n"
        f"print('{LEAK}', buf.getvalue()) if {t} in buf.getvalue() else print('clean')\n",
    )
    add(
        "thread left running",
        "state",
        f"import threading, time\nthreading.stack_size(256 * 1024)\nthreading.Thread(target=time.sleep, args=(3600,), name={token!r}, daemon=True).start()\n"
        "print('started')\n",
        "import threading\n"
        f"found = [th.name for th in threading.enumerate() if {t} in th.name]\n"
        f"print('{LEAK}', found) if found else print('clean', len(threading.enumerate()))\n",
    )
    add(
        "environment variable",
        "state",
        f"import os\nos.environ['DD_LEAK'] = {token!r}\nprint('set')\n",
        "import os\n"
        "try:\n    raw = open('/proc/self/environ', 'rb').read().decode(errors='replace')\n"
        "except OSError:\n    raw = ''\n"
        f"hit = {t} in os.environ.get('DD_LEAK', '') or {t} in raw\n"
        f"print('{LEAK}') if hit else print('clean')\n",
    )
    write, look = _file_cells(token, "'/tmp'", "tmp")
    add("file in /tmp", "files", write, look)
    write, look = _file_cells(token, "__import__('tempfile').gettempdir()", "tmpdir")
    add("file in $TMPDIR", "files", write, look)
    write, look = _file_cells(token, "'/dev/shm'", "shm")
    add("file in /dev/shm", "files", write, look)
    for name, write, look in _ipc_cells(token):
        add(name, "ipc", write, look)
    add(
        "background process",
        "process",
        "import subprocess, os\n"
        f"p = subprocess.Popen(['sleep', '3600', {token!r}], start_new_session=True)\n"
        "print('spawned', p.pid)\n",
        "import os\nfound = []\n"
        "try:\n    pids = [n for n in os.listdir('/proc') if n.isdigit()]\nexcept OSError:\n    pids = []\n"
        "for n in pids:\n    try:\n        cmd = open(f'/proc/{n}/cmdline', 'rb').read().decode(errors='replace')\n"
        "    except OSError:\n        continue\n"
        f"    if {t} in cmd:\n        found.append(n)\n"
        f"print('{LEAK}', found) if found else print('clean', len(pids))\n",
    )
    add(
        "open descriptor",
        "state",
        "import os, tempfile\n"
        f"fd = os.open(os.path.join(tempfile.gettempdir(), 'dd-leak-fd-' + {token!r}), os.O_CREAT | os.O_RDWR)\n"
        "os.dup2(fd, 77, inheritable=True)\nprint('open', fd)\n",
        "import os\nfound = []\n"
        "for n in os.listdir('/proc/self/fd'):\n"
        "    try:\n        target = os.readlink(f'/proc/self/fd/{n}')\n    except OSError:\n        continue\n"
        f"    if {t} in target:\n        found.append((n, target))\n"
        f"print('{LEAK}', found) if found else print('clean')\n",
    )
    add(
        "working directory",
        "state",
        f"import os\nos.makedirs({token!r}, exist_ok=True)\nos.chdir({token!r})\nprint('moved')\n",
        f"import os\nprint('{LEAK}', os.getcwd()) if {t} in os.getcwd() else print('clean')\n",
    )
    return probes


def sibling_probes(token: str | None = None) -> list[LeakProbe]:
    """Sandbox A writes, sandbox B of the same pool looks while A is still alive."""
    token = token or "dd" + secrets.token_hex(8)
    probes: list[LeakProbe] = []
    write, look = _file_cells(token, "'/tmp'", "sib-tmp")
    probes.append(LeakProbe("file in /tmp", "sibling", "files", write, look, token=token))
    write, look = _file_cells(token, "'/dev/shm'", "sib-shm")
    probes.append(LeakProbe("file in /dev/shm", "sibling", "files", write, look, token=token))
    for name, write, look in _ipc_cells(token + "sib"):
        probes.append(LeakProbe(name, "sibling", "ipc", write, look, token=token))
    probes.append(
        LeakProbe(
            "signal a sibling's processes",
            "sibling",
            "process",
            # A: its own pid (the kernel, or this cell's child) and its worker's, as A sees them.
            "import os\nprint('pids', os.getpid(), os.getppid())\n",
            # B: kill whatever A named (B's own pids skipped: in another PID namespace they may collide).
            "import os, signal\n"
            "print('targets', PIDS)\n"
            "for pid in PIDS:\n"
            "    if pid in (os.getpid(), os.getppid()):\n        continue\n"
            "    try:\n        os.kill(pid, signal.SIGKILL); print('killed', pid)\n"
            "    except Exception as exc:\n        print('failed', pid, type(exc).__name__)\n",
            after="print('alive')\n",
            token=token,
        )
    )
    return probes


async def run_reuse_probes(config: Any, probes: list[LeakProbe] | None = None) -> list[LeakVerdict]:
    """Trajectory 1 runs every write cell, trajectory 2 in the same worker every look cell.

    ``config`` is a :class:`~datadojo.sandbox.config.SandboxConfig` (a pool of one, so the second session
    gets the first one's worker after its reset; asserted, or the probe would prove nothing).
    """
    from datadojo.sandbox.pool import SandboxPool

    probes = probes if probes is not None else reuse_probes()
    try:
        async with SandboxPool(config, size=1) as pool:
            async with pool.session([]) as first:
                worker = first._worker
                writes = [await first.run(p.write) for p in probes]
            async with pool.session([]) as second:
                if second is not first or second._worker is not worker:
                    raise RuntimeError("the pool did not reuse the sandbox: the reuse probes prove nothing")
                looks = [await second.run(p.look_cell(w.output)) for p, w in zip(probes, writes, strict=True)]
    finally:
        remove_leftovers()
        remove_ipc(probes)
    return [
        LeakVerdict(
            p.name,
            p.kind,
            p.family,
            p.contained(w.output, look.output),
            w.status,
            look.status,
            w.output,
            look.output,
        )
        for p, w, look in zip(probes, writes, looks, strict=True)
    ]


async def run_sibling_probes(config: Any, probes: list[LeakProbe] | None = None) -> list[LeakVerdict]:
    """Two sandboxes of one pool alive at once: A runs each write cell, B the look, A the ``after`` cell."""
    probes = probes if probes is not None else sibling_probes()
    verdicts = []
    try:
        await _siblings(config, probes, verdicts)
    finally:
        remove_leftovers()
        remove_ipc(probes)
    return verdicts


async def _siblings(config: Any, probes: list[LeakProbe], verdicts: list[LeakVerdict]) -> None:
    from datadojo.sandbox.pool import SandboxPool

    async with SandboxPool(config, size=2) as pool, pool.session([]) as a, pool.session([]) as b:
        for p in probes:
            w = await a.run(p.write)
            look = await b.run(p.look_cell(w.output))
            after = await a.run(p.after) if p.after else None
            verdict = LeakVerdict(
                p.name,
                p.kind,
                p.family,
                p.contained(w.output, look.output, after.output if after is not None else ""),
                w.status,
                look.status,
                w.output,
                look.output,
            )
            if after is not None:
                verdict.extra["after_output"] = after.output[-300:]
            verdicts.append(verdict)


def remove_leftovers() -> None:
    """Remove what the probes leave on the host where nothing contains them (reduced isolation).

    The files they name in ``/tmp`` and ``/dev/shm`` (their names are fixed, ``dd-leak-*``); System V
    objects and POSIX queues live in the workers' IPC namespaces where ``unshare`` works, and otherwise
    are keyed by the probe's token, which :func:`remove_ipc` removes.
    """
    import glob
    import os

    for pattern in ("/tmp/dd-leak-*", "/dev/shm/dd-leak-*"):
        for path in glob.glob(pattern):
            with contextlib.suppress(OSError):
                os.unlink(path)


def remove_ipc(probes: list[LeakProbe]) -> None:
    """Remove the System V objects and POSIX queues the probes made in the harness's IPC namespace."""
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    for token in {p.token for p in probes if p.token}:
        for t in (token, token + "sib"):
            key = _ipc_key(t)
            for get, ctl in (("shmget", "shmctl"), ("msgget", "msgctl")):
                ident = getattr(libc, get)(key, 0, 0)
                if ident >= 0:
                    getattr(libc, ctl)(ident, 0, None)  # IPC_RMID
            ident = libc.semget(key, 0, 0)
            if ident >= 0:
                libc.semctl(ident, 0, 0)  # IPC_RMID
            with contextlib.suppress(AttributeError):
                libc.mq_unlink(f"/dd-leak-{key:x}".encode())

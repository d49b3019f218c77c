"""The sandbox's security matrix: what agent code can reach at each isolation level (issue 27).

Usage::

    python benchmarks/security.py [--levels bwrap,landlock,reduced,bwrap+fork] [--json out.json] [--policy]

For each level that works here (``auto`` also accepted: whatever ``--isolation auto`` picks; a level with
``+fork``, e.g. ``bwrap+fork``, runs the sandbox from a pool with ``SandboxConfig(fork_server=True)``), one
persistent sandbox runs every probe below as a cell, **with the static policy off** (unless ``--policy``):
the question is what the isolation level contains on its own, because a policy is a pattern check that a
computed path or an RL policy's creativity gets past. The harness plants what the probes go for and judges
each from the host side, not from the cell's own word where the host can check:

* read outside the workspace: a task file's reference answers beside it (absolute path, ``../`` from the
  working directory, a symlink planted in the workspace, ``/proc/<harness pid>/root/...``), the
  harness's environment (``/proc/<harness pid>/environ``), a token in ``$HOME``;
* write outside the workspace through a computed path;
* TCP to a listener of the host (a model server, a Ray dashboard), UDP to a host socket (DNS egress);
* signal and ptrace a process of the host;
* a (bounded) fork bomb, a memory bomb, filling ``/tmp``;
* a host service's UNIX socket (a ``docker.sock`` planted beside the task set), ``stat()`` of the answers
  file, whether cells run as the host's uid 0 (issue 38's Landlock-level items);
* **reuse** (issue 38): what trajectory 1 leaves in a pool's worker and trajectory 2, after the reset, finds
  (module caches, patched libraries, builtins, atexit hooks, threads, environment, cwd, ``/tmp``,
  ``/dev/shm``, IPC objects, processes, descriptors, the random stream), in chunked and persistent mode;
* **sibling**: what sandbox A writes and sandbox B of the same pool, alive at the same time, finds
  (``/tmp``, ``/dev/shm``, IPC objects, signals to A's processes), in both modes.

The reuse and sibling probes are :mod:`datadojo.sandbox.leak_probes` (``--no-leaks`` skips them).

It prints a contained / NOT contained table, one column per level; docs/sandbox.md's isolation table is
this table. ``tests/sandbox/test_sandbox_security.py`` runs it with bubblewrap and with bubblewrap made
unusable by failing stand-ins on ``PATH`` (as in Docker), and requires every file and TCP probe to be
contained at the Landlock level.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from datadojo.sandbox import Limits, PolicyConfig, SandboxConfig, SandboxPool
from datadojo.sandbox.forkserver import fork_level
from datadojo.sandbox.isolation import IsolationUnavailable, resolve_isolation
from datadojo.sandbox.leak_probes import reuse_probes, run_reuse_probes, run_sibling_probes, sibling_probes

LEVELS = ("bwrap", "landlock", "reduced", "bwrap+fork")
#: Probe name -> its family (the CI test requires every "file" and "tcp" probe contained at Landlock).
FAMILIES = {
    "read answers (absolute path)": "file",
    "read answers (../ from cwd)": "file",
    "read answers (planted symlink)": "file",
    "read answers (/proc/<pid>/root)": "file",
    "read harness env (/proc/<pid>/environ)": "file",
    "read token in $HOME": "file",
    "list host folders (/ and $HOME)": "file",
    "write outside (computed path)": "file",
    "TCP to host listener": "tcp",
    "UDP/DNS egress to host": "udp",
    "signal a host process": "process",
    "ptrace a host process": "process",
    "fork bomb (bounded, 200)": "resource",
    "memory bomb (2 GiB)": "resource",
    "fill /tmp (4x the tmp cap)": "resource",
    # issue 38, the Landlock-level items (contained there by a separate change; see the CI test):
    "connect to a host UNIX socket": "host",
    "stat() the answers file": "host",
    "cells run as the host's uid 0": "host",
}
#: Issue 38: rows that need two trajectories of one pool (the next one after a reset, a sibling beside it)
#: or a planted host object, probed by :func:`_ipc_and_host_probes` in a pool of two.
IPC_AND_HOST_FAMILIES = {
    "IPC to the next trajectory (SysV shm/msg, POSIX mq)": "ipc",
    "IPC to a sibling (SysV shm/msg, POSIX mq)": "ipc",
    "connect to a host UNIX socket (mode 0777)": "file",
    "stat() a file in a 0700 host folder": "stat",
    "cells run as a uid other than 0": "user",
}
FAMILIES.update(IPC_AND_HOST_FAMILIES)
MODES = ("chunked", "persistent")


def leak_row(kind: str, mode: str, name: str) -> str:
    """The matrix row of one reuse/sibling probe in one mode."""
    return f"{kind} ({mode}): {name}"


for _kind, _probes_of in (("reuse", reuse_probes), ("sibling", sibling_probes)):
    for _mode in MODES:
        for _probe in _probes_of("x" * 18):
            FAMILIES[leak_row(_kind, _mode, _probe.name)] = f"{_kind}-{_probe.family}"
LIMITS = Limits(wall_s=30, cpu_s=20, memory_mb=1024, max_procs=32, max_file_mb=4)


@dataclass
class Plant:
    """What the harness planted for the probes, and how to check afterwards."""

    root: Path
    answers: Path
    home_token: Path
    outside_dir: Path
    token: str
    env_token: str
    tcp: socket.socket
    udp: socket.socket
    victim: subprocess.Popen[bytes]
    unix: socket.socket
    unix_path: Path

    @classmethod
    def make(cls) -> Plant:
        root = Path(tempfile.mkdtemp(prefix="datadojo-security-"))
        token = "CANARY-" + secrets.token_hex(8)
        env_token = os.environ["DATADOJO_SECURITY_CANARY"]  # in our initial environment (see main)
        task_dir = root / "taskset"
        task_dir.mkdir()
        answers = task_dir / "tasks.jsonl"
        answers.write_text(json.dumps({"id": "t1", "answer": token}) + "\n")
        os.chmod(root, 0o755)
        home_token = Path.home() / f".datadojo-security-{secrets.token_hex(4)}"
        home_token.write_text(token + "\n")
        outside = root / "outside"
        outside.mkdir()
        os.chmod(outside, 0o777)
        tcp = socket.socket()
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(16)
        tcp.setblocking(False)
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", 0))
        udp.setblocking(False)
        victim = subprocess.Popen(["sleep", "3600"])
        # a host service's socket (Docker's, a Ray raylet's), world-connectable as such sockets often are
        run = root / "run"
        run.mkdir()
        os.chmod(run, 0o755)
        unix_path = run / "docker.sock"
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind(str(unix_path))
        os.chmod(unix_path, 0o666)
        unix.listen(16)
        unix.setblocking(False)
        return cls(root, answers, home_token, outside, token, env_token, tcp, udp, victim, unix, unix_path)

    def close(self) -> None:
        self.home_token.unlink(missing_ok=True)
        self.tcp.close()
        self.udp.close()
        self.unix.close()
        if self.victim.poll() is None:
            self.victim.kill()
        self.victim.wait()
        for leftover in Path("/tmp").glob("datadojo-fill-*"):
            leftover.unlink(missing_ok=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def tcp_accepted(self) -> int:
        n = 0
        while True:
            try:
                conn, _addr = self.tcp.accept()
            except BlockingIOError:
                return n
            conn.close()
            n += 1

    def unix_accepted(self) -> int:
        n = 0
        while True:
            try:
                conn, _addr = self.unix.accept()
            except BlockingIOError:
                return n
            conn.close()
            n += 1

    def udp_received(self) -> int:
        n = 0
        while True:
            try:
                self.udp.recvfrom(4096)
            except BlockingIOError:
                return n
            n += 1


def _split(path: Path | str) -> list[str]:
    return str(path).strip("/").split("/")


def _probes(p: Plant) -> list[tuple[str, str, Callable[[str], bool]]]:
    """``(name, cell, contained(output))``: the cell, and the host-side verdict from its output."""
    me = os.getpid()
    secret = p.token
    answers = _split(p.answers)
    read = "try:\n    print(open({path}).read())\nexcept Exception as exc:\n    print('failed', type(exc).__name__)\n"
    absolute = "'/' + '/'.join(" + repr(answers) + ")"
    dotdot = "'/'.join(['..'] * len(os.getcwd().strip('/').split('/')) + " + repr(answers) + ")"
    port_tcp = p.tcp.getsockname()[1]
    port_udp = p.udp.getsockname()[1]
    no_secret: Callable[[str], bool] = lambda out: secret not in out  # noqa: E731

    def tcp_contained(out: str) -> bool:
        return p.tcp_accepted() == 0 and "connected" not in out

    def udp_contained(out: str) -> bool:
        return p.udp_received() == 0

    def victim_alive(out: str) -> bool:
        try:
            p.victim.wait(timeout=5 if "signalled" in out else 0.01)
        except subprocess.TimeoutExpired:
            return True
        return False

    def listed(out: str) -> bool:
        return p.root.name not in out and p.home_token.name not in out

    def not_written(out: str) -> bool:
        return not (p.outside_dir / "pwned.txt").exists()

    def bomb(out: str) -> bool:
        if "[process limit:" in out:  # the worker counted the cell's processes and stopped it
            return True
        line = next((x for x in out.splitlines() if x.startswith("forked")), "forked 200")
        return int(line.split()[1]) < 200

    def memory(out: str) -> bool:
        return "allocated" not in out

    def filled(out: str) -> bool:
        total = sum(f.stat().st_size for f in Path("/tmp").glob("datadojo-fill-*"))
        return total <= LIMITS.max_file_mb * 1024 * 1024

    def uid_contained(out: str) -> bool:
        line = next((x for x in out.splitlines() if x.startswith("uid ")), "")
        fields = line.split()
        if len(fields) < 2 or fields[1] != "0":
            return bool(fields)  # another uid (or nothing printed: not contained, unknown)
        # uid 0 inside a user namespace that maps it to an ordinary uid of the host is not the host's root
        mapped = [x.split() for x in out.splitlines() if x.startswith("map ")]
        return any(len(m) >= 3 and m[1] == "0" and m[2] != "0" for m in mapped)

    home = _split(p.home_token)
    return [
        ("read answers (absolute path)", "import os\n" + read.format(path=absolute), no_secret),
        ("read answers (../ from cwd)", "import os\n" + read.format(path=dotdot), no_secret),
        (
            "read answers (planted symlink)",
            f"import os\nos.symlink({absolute}, 'answers_link')\n" + read.format(path="'answers_link'"),
            no_secret,
        ),
        (
            "read answers (/proc/<pid>/root)",
            "import os\n" + read.format(path=f"'/proc/{me}/root' + {absolute}"),
            no_secret,
        ),
        (
            "read harness env (/proc/<pid>/environ)",
            read.format(path=f"'/proc/{me}/environ'"),
            lambda out: p.env_token not in out,
        ),
        ("read token in $HOME", read.format(path="'/' + '/'.join(" + repr(home) + ")"), no_secret),
        (
            "list host folders (/ and $HOME)",
            "import os\n"
            f"for d in ({str(p.root.parent)!r}, {str(p.home_token.parent)!r}):\n"
            "    try:\n        print(os.listdir(d))\n    except Exception as exc:\n        print('failed', exc)\n",
            listed,
        ),
        (
            "write outside (computed path)",
            "import pandas as pd\nfolder = '/' + '/'.join(" + repr(_split(p.outside_dir)) + ") + '/'\n"
            "try:\n    pd.DataFrame({'a': [1]}).to_csv(folder + 'pwned.txt')\n    print('wrote')\n"
            "except Exception as exc:\n    print('failed', type(exc).__name__)\n",
            not_written,
        ),
        (
            "TCP to host listener",
            "import socket\ntry:\n"
            f"    s = socket.create_connection(('127.0.0.1', {port_tcp}), timeout=5); s.send(b'x'); print('connected')\n"
            "except Exception as exc:\n    print('failed', type(exc).__name__)\n",
            tcp_contained,
        ),
        (
            "UDP/DNS egress to host",
            "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ntry:\n"
            f"    s.sendto(b'q', ('127.0.0.1', {port_udp})); print('sent')\n"
            "except Exception as exc:\n    print('failed', type(exc).__name__)\n",
            udp_contained,
        ),
        (
            "signal a host process",
            "import os, signal\ntry:\n"
            f"    os.kill({p.victim.pid}, signal.SIGTERM); print('signalled')\n"
            "except Exception as exc:\n    print('failed', type(exc).__name__)\n",
            victim_alive,
        ),
        (
            "ptrace a host process",
            "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            f"r = libc.ptrace(16, {p.victim.pid}, None, None)\nprint('ptrace', r, ctypes.get_errno())\n"
            f"if r == 0:\n    libc.ptrace(17, {p.victim.pid}, None, None)\n",
            lambda out: "ptrace 0 " not in out,
        ),
        (
            "fork bomb (bounded, 200)",
            "import os, time\nn = 0\ntry:\n"
            "    for _ in range(200):\n        if os.fork() == 0:\n            time.sleep(30); os._exit(0)\n        n += 1\n"
            "except Exception as exc:\n    pass\nprint('forked', n)\n",
            bomb,
        ),
        (
            "memory bomb (2 GiB)",
            "try:\n    b = bytearray(2 * 1024 ** 3); print('allocated')\nexcept MemoryError:\n    print('failed')\n",
            memory,
        ),
        (
            "fill /tmp (4x the tmp cap)",
            "import os\nfor i in range(4):\n    try:\n"
            f"        with open('/tmp/datadojo-fill-%d' % i, 'wb') as f:\n"
            f"            f.write(b'x' * ({LIMITS.max_file_mb} * 1024 * 1024 - 1))\n"
            "    except Exception as exc:\n        print('failed', type(exc).__name__)\n",
            filled,
        ),
        (
            "connect to a host UNIX socket",
            "import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ntry:\n"
            f"    s.connect('/' + '/'.join({_split(p.unix_path)!r})); print('connected')\n"
            "except Exception as exc:\n    print('failed', type(exc).__name__)\n",
            lambda out: p.unix_accepted() == 0 and "connected" not in out,
        ),
        (
            "stat() the answers file",
            "import os\ntry:\n"
            f"    st = os.stat({absolute}); print('size', st.st_size)\n"
            "except Exception as exc:\n    print('failed', type(exc).__name__)\n",
            lambda out: "size " not in out,
        ),
        (
            "cells run as the host's uid 0",
            "import os\nprint('uid', os.getuid())\ntry:\n"
            "    for line in open('/proc/self/uid_map'):\n        print('map', *line.split())\n"
            "except OSError as exc:\n    print('no map', type(exc).__name__)\n",
            uid_contained,
        ),
    ]


async def run_leaks(config: SandboxConfig) -> dict[str, dict[str, object]]:
    """The reuse and sibling rows at one level: the probe set in both modes."""
    verdicts: dict[str, dict[str, object]] = {}
    for mode in MODES:
        # the default memory limit: the bombs' 1 GiB leaves no room for a thread's stack beside pandas
        cfg = config.replace(mode=mode, limits=Limits(wall_s=30, max_file_mb=LIMITS.max_file_mb))
        for kind, run in (("reuse", run_reuse_probes), ("sibling", run_sibling_probes)):
            for v in await run(cfg):
                verdicts[leak_row(kind, mode, v.name)] = {
                    "contained": v.contained,
                    "status": v.look_status,
                    "output": v.look_output[-300:],
                    "write_output": v.write_output[-300:],
                }
    return verdicts


async def run_level(level: str, *, policy: bool, leaks: bool = True) -> dict[str, object]:
    """Run every probe at ``level`` (``bwrap``/``landlock``/``reduced``/``auto``, each optionally with
    ``+fork``: a worker forked by a pool's fork server); the verdicts."""
    base, fork = level.removesuffix("+fork"), level.endswith("+fork")
    requested = {"reduced": "none"}.get(base, base)
    try:
        actual = resolve_isolation(requested)
        if fork and fork_level(requested) is None:
            raise IsolationUnavailable(f"no fork server at {base} here (Landlock unavailable)")
    except IsolationUnavailable as exc:
        return {"level": level, "available": False, "why": str(exc)}
    plant = Plant.make()
    config = SandboxConfig(
        isolation=requested,  # type: ignore[arg-type]
        mode="persistent",
        preload=("pandas",),
        limits=LIMITS,
        policy=PolicyConfig(enabled=policy),
        fork_server=fork,
    )
    verdicts: dict[str, dict[str, object]] = {}
    try:
        async with SandboxPool(config, size=1) as pool, pool.session([]) as sb:
            for name, cell, contained in _probes(plant):
                r = await sb.run(cell)
                verdicts[name] = {
                    "contained": bool(contained(r.output)),
                    "status": r.status,
                    "output": r.output[-300:],
                }
            landlock = sb.landlock
        verdicts.update(await _ipc_and_host_probes(config, plant))
        if leaks:
            verdicts.update(await run_leaks(config))
    finally:
        plant.close()
    return {
        "level": actual + ("+fork" if fork else ""),
        "requested": level,
        "available": True,
        "landlock": landlock,
        "probes": verdicts,
    }


async def _ipc_and_host_probes(config: SandboxConfig, plant: Plant) -> dict[str, dict[str, object]]:
    """The rows of :data:`IPC_AND_HOST_FAMILIES`, in a pool of two sandboxes of ``config``.

    IPC: a secret written through System V shared memory, a System V message queue and a POSIX message
    queue by one trajectory, looked for by the next trajectory of the same (reset) sandbox and by a
    sibling running beside it. Host: a UNIX socket the harness listens on (outside every workspace, mode
    0777 so that file permissions do not stop it), a file in a 0700 folder of the harness (a run folder;
    ``$HOME`` is one too), the cells' uid.
    """
    from datadojo.testing.ipc import IpcChannel, ipc_probe_cells

    sock_path = str(plant.root / "daemon.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock_path)
    os.chmod(sock_path, 0o777)
    listener.listen(4)
    listener.setblocking(False)
    private = plant.root / "private-run"
    private.mkdir(mode=0o700)
    (private / "summary.json").write_text(plant.token)
    channels = {"next": IpcChannel.new(), "sibling": IpcChannel.new()}
    out: dict[str, str] = {"next": "", "sibling": ""}
    try:
        async with SandboxPool(config, size=1) as pool:
            async with pool.session([]) as first:
                for write, _read in ipc_probe_cells(channels["next"]).values():
                    await first.run(write)
            async with pool.session([]) as nxt:  # the same sandbox, reset
                for _write, read in ipc_probe_cells(channels["next"]).values():
                    out["next"] += (await nxt.run(read)).output
                host = await nxt.run(
                    "import os, socket\nprint('uid', os.getuid(), os.geteuid())\n"
                    f"try:\n    print('size', os.stat({str(private / 'summary.json')!r}).st_size)\n"
                    "except OSError as exc:\n    print('stat failed', exc.errno)\n"
                    "s = socket.socket(socket.AF_UNIX)\n"
                    f"try:\n    s.connect({sock_path!r}); s.send(b'x'); print('connected')\n"
                    "except OSError as exc:\n    print('connect failed', exc.errno)\n"
                )
        async with (
            SandboxPool(config, size=2) as pool,
            pool.session([]) as writer,
            pool.session([]) as sibling,
        ):
            for write, read in ipc_probe_cells(channels["sibling"]).values():
                await writer.run(write)
                out["sibling"] += (await sibling.run(read)).output
        try:
            conn, _addr = listener.accept()
            conn.close()
            accepted = True
        except BlockingIOError:
            accepted = False
    finally:
        listener.close()
        for channel in channels.values():
            channel.host_remove()
    uid = next((line.split()[1:] for line in host.output.splitlines() if line.startswith("uid")), ["0"])
    rows = {
        "IPC to the next trajectory (SysV shm/msg, POSIX mq)": (
            channels["next"].secret not in out["next"],
            out["next"],
        ),
        "IPC to a sibling (SysV shm/msg, POSIX mq)": (
            channels["sibling"].secret not in out["sibling"],
            out["sibling"],
        ),
        "connect to a host UNIX socket (mode 0777)": (not accepted, host.output),
        "stat() a file in a 0700 host folder": (f"size {len(plant.token)}" not in host.output, host.output),
        "cells run as a uid other than 0": ("0" not in uid, host.output),
    }
    return {
        name: {"contained": contained, "status": host.status, "output": output[-300:]}
        for name, (contained, output) in rows.items()
    }


def _table(results: list[dict[str, object]]) -> str:
    cols = [r for r in results if r.get("available")]
    width = max(len(n) for n in FAMILIES)
    lines = ["probe".ljust(width) + "".join(f"  {r['level']!s:>14}" for r in cols)]
    for name in FAMILIES:
        if not any(name in r["probes"] for r in cols):  # type: ignore[operator]
            continue  # --no-leaks
        cells = []
        for r in cols:
            verdict = r["probes"].get(name, {}).get("contained")  # type: ignore[attr-defined]
            if verdict is None:
                cells.append(f"  {'-':>14}")
                continue
            cells.append(f"  {'contained' if verdict else 'NOT contained':>14}")
        lines.append(name.ljust(width) + "".join(cells))
    for r in results:
        if not r.get("available"):
            lines.append(f"{r['level']}: unavailable ({r['why']})")
        elif r.get("landlock"):
            lines.append(f"{r['level']}: Landlock coverage {r['landlock']}")
    return "\n".join(lines)


def main() -> None:
    # /proc/<pid>/environ shows the environment a process started with, not later putenv()s: start again
    # with the canary in it, as a harness started with OPENAI_API_KEY would be.
    if "DATADOJO_SECURITY_CANARY" not in os.environ:
        env = {**os.environ, "DATADOJO_SECURITY_CANARY": "ENVCANARY-" + secrets.token_hex(8)}
        os.execve(sys.executable, [sys.executable, *sys.argv], env)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--levels",
        default=",".join(LEVELS),
        help="comma-separated: bwrap,landlock,reduced,auto, each optionally +fork (fork server)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the verdicts here")
    parser.add_argument("--policy", action="store_true", help="keep the static policy on (default: off)")
    parser.add_argument(
        "--no-leaks", action="store_true", help="skip the reuse and sibling rows (issue 38; ~10 s per level)"
    )
    args = parser.parse_args()
    levels = [x.strip() for x in args.levels.split(",") if x.strip()]
    results = [asyncio.run(run_level(level, policy=args.policy, leaks=not args.no_leaks)) for level in levels]
    print(
        f"# sandbox security matrix  python {sys.version.split()[0]}  uid {os.geteuid()}  policy {'on' if args.policy else 'off'}"
    )
    print(_table(results))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    signal.signal(signal.SIGINT, signal.SIG_DFL)


if __name__ == "__main__":
    main()

"""Hostile code corpus: every snippet must be contained and must come back as a clear observation.

Each case runs in a fresh sandbox taken from one of two module-scoped pools: ``on`` (the default static
policy, which should refuse most of these before they run) and ``off`` (policy disabled, so process
isolation and resource limits are tested on their own). After every case the same sandbox must still run
a normal cell, and no process of the sandbox's cell uid may be left. After the whole corpus
(:func:`test_zz_after_the_corpus`, defined last): the original data files are byte-identical, no stray
processes exist, and the pool still serves a normal cell correctly.

A case names what its containment rests on (``Case.needs``) and is skipped, with the reason, *before its
code runs* when the sandbox cannot provide it: without bubblewrap and without a dedicated cell uid (a root
harness whose Python installation other users cannot read), cells run with the harness's own privileges,
and a policy-free ``os.kill(-1, SIGKILL)`` or ``open('/etc/...', 'w')`` would really act on the host.

Limits are small so the module stays fast: wall 3 s, CPU 2 s, 512 MB address space, 32 processes,
8 MB files, 200 KB raw output, 2,048-character observations.
"""

from __future__ import annotations

import csv
import os
import re
import secrets
import shutil
import sqlite3
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from datadojo.sandbox import ExecResult, Limits, PolicyConfig, Sandbox, SandboxConfig, SandboxPool
from helpers.digests import tree_digest
from helpers.procs import leftover_descendants, live_descendants, pids_of_uid, wait_until

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(60)]

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "data"
HAS_BWRAP = shutil.which("bwrap") is not None

LIMITS = Limits(
    wall_s=3.0,
    cpu_s=2.0,
    memory_mb=512,
    max_procs=32,
    max_file_mb=8,
    max_output_bytes=200_000,
    max_observation_chars=2048,
)
BASE = SandboxConfig(limits=LIMITS, preload=())
SECRET_NAME = "DATADOJO_HOSTILE_TEST_SECRET"
SECRET_VALUE = "s3cr3t-" + secrets.token_hex(8)
HOST_CANARY = Path("/etc/datadojo_hostile_pwned")
ESCAPE_NAME = f"escape-{secrets.token_hex(6)}.txt"  # unique, so a file left by anything else cannot match
NOTE_SLACK = 400  # notes such as "[timeout: ...]" may follow the truncated observation
WAIT_POLLS = 100  # 5 s of 50 ms polls for leftover processes to go: a failure says which, before the timeout
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


# --------------------------------------------------------------------------------------------- the corpus
@dataclass(frozen=True)
class Case:
    """One hostile snippet and what a contained, clearly reported outcome looks like."""

    id: str
    code: str
    statuses: tuple[str, ...]  # acceptable statuses of the hostile cell
    any_of: tuple[str, ...] = ()  # at least one of these appears in the observation (case-insensitive)
    none_of: tuple[str, ...] = ()  # none of these may appear in the observation
    policy: bool = True  # False: run in the pool whose policy is disabled
    language: str = "python"
    # What the asserted containment rests on, checked *before* the code runs:
    #   "bwrap": bubblewrap's namespaces and mounts (network, host paths, private /tmp);
    #   "uid":   cells must not hold the harness's privileges on the host (bubblewrap, or a dedicated
    #            non-root uid); every policy-off case needs at least this, because without it a hostile
    #            cell could really write /etc or signal every process of the machine.
    needs: str = ""
    check: Callable[[Sandbox, ExecResult], None] | None = None  # extra host-side assertion

    @property
    def requirement(self) -> str:
        return self.needs or ("" if self.policy else "uid")


def _big_file_capped(sb: Sandbox, _: ExecResult) -> None:
    big = sb.workspace / "big.bin"
    assert not big.exists() or big.stat().st_size <= LIMITS.max_file_mb * 1024 * 1024


def _no_host_canary(_: Sandbox, __: ExecResult) -> None:
    assert not HOST_CANARY.exists(), f"{HOST_CANARY} was created on the host"


def _no_escape_file(sb: Sandbox, _: ExecResult) -> None:
    assert not (sb.workspace.parent / ESCAPE_NAME).exists()
    assert not (sb.workspace.parent.parent / ESCAPE_NAME).exists()


def _ran_as_sandbox_uid(sb: Sandbox, res: ExecResult) -> None:
    m = re.search(r"uid=(\d+) host=(\S+)", res.output)
    assert m is not None, res.output
    if sb.cell_uid is not None:
        assert int(m.group(1)) == sb.cell_uid  # the shell ran as the cell's dedicated uid, not root
    if sb.isolation == "bwrap":
        assert m.group(2) == "sandbox"  # ... in the sandbox's own UTS namespace


def _secret_absent(_: Sandbox, res: ExecResult) -> None:
    assert SECRET_VALUE not in res.output and SECRET_NAME not in res.output


HOSTILE: list[Case] = [
    # ---- CPU and wall-clock time
    Case("infinite_loop", "while True:\n    pass", ("timeout",), ("CPU limit", "time limit", "timeout")),
    Case("sleep_forever", "import time\ntime.sleep(600)", ("timeout",), ("timeout", "wall")),
    Case(
        "busy_threads",
        "import threading\ndef spin():\n    while True:\n        pass\n"
        "for _ in range(8):\n    threading.Thread(target=spin, daemon=True).start()\nspin()",
        ("timeout",),
        ("timeout",),
    ),
    Case(
        "stuck_in_finally",
        "import time\ntry:\n    while True:\n        pass\nfinally:\n    while True:\n        time.sleep(0.05)",
        ("timeout",),
        ("timeout",),
    ),
    Case(
        "ignore_sigterm",
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)",
        ("timeout",),
        ("timeout",),
        policy=False,
    ),
    Case(
        "ignore_sigxcpu",
        "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass",
        ("timeout", "killed"),
        ("timeout", "CPU", "SIGKILL"),
        policy=False,
    ),
    # ---- processes
    Case("fork_bomb_refused", "import os\nwhile True:\n    os.fork()", ("rejected",), ("os.fork",)),
    Case(
        "fork_bomb",
        "import os\nwhile True:\n    os.fork()",
        ("error", "killed", "timeout"),
        ("Resource temporarily unavailable", "BlockingIOError", "killed", "timeout", "process"),
        policy=False,
    ),
    Case(
        "thread_bomb",
        "import threading, time\nthreads = []\nwhile True:\n"
        "    t = threading.Thread(target=time.sleep, args=(30,), daemon=True)\n    t.start()\n    threads.append(t)",
        ("error", "killed", "timeout"),
        ("can't start new thread", "timeout", "killed", "process"),
    ),
    Case(
        "subprocess_bomb",
        "import subprocess\nwhile True:\n    subprocess.Popen(['sleep', '60'])",
        ("error", "killed", "timeout"),
        ("Resource temporarily unavailable", "BlockingIOError", "killed", "timeout", "process"),
        policy=False,
    ),
    Case("os_system_refused", "import os\nos.system('id')", ("rejected",), ("os.system",)),
    Case(
        "os_system_contained",
        "import os\nos.system('echo uid=$(id -u) host=$(hostname)')",
        ("ok",),
        ("uid=",),
        policy=False,
        needs="uid",
        check=_ran_as_sandbox_uid,
    ),
    Case("subprocess_refused", "import subprocess\nsubprocess.run(['id'])", ("rejected",), ("subprocess",)),
    Case(
        "subprocess_left_running",
        "import subprocess\np = subprocess.Popen(['sleep', '300'])\nprint('started', p.pid > 0)",
        ("ok",),
        ("started True",),
        policy=False,
    ),
    Case(
        "daemonised_grandchild",
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(300)\n"
        "    os._exit(0)\nos.wait()\nprint('parent done')",
        ("ok",),
        ("parent done",),
        policy=False,
    ),
    Case(
        "background_thread_keeps_printing",
        "import threading, time\ndef spam():\n    while True:\n        print('bg')\n        time.sleep(0.01)\n"
        "threading.Thread(target=spam, daemon=True).start()\ntime.sleep(0.1)\nprint('main done')",
        ("ok",),
        ("main done",),
    ),
    # ---- memory
    Case("memory_bomb", "x = bytearray(8 * 1024 ** 3)", ("error", "killed"), ("MemoryError", "memory")),
    Case(
        "memory_bomb_gradual",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 1024 * 1024))",
        ("error", "killed"),
        ("MemoryError", "memory"),
    ),
    Case(
        "memory_bomb_string",
        "s = 'x' * (2 ** 40)",
        ("error", "killed"),
        ("MemoryError", "memory", "OverflowError"),
    ),
    # ---- files
    Case(
        "huge_file",
        "with open('big.bin', 'wb') as f:\n    while True:\n        f.write(b'\\0' * 1024 * 1024)",
        ("error", "killed"),
        ("File too large", "file size", "SIGXFSZ", "No space left"),
        check=_big_file_capped,
    ),
    Case(
        "huge_file_in_tmp",
        "with open('/tmp/big.bin', 'wb') as f:\n    while True:\n        f.write(b'\\0' * 1024 * 1024)",
        ("error", "killed"),
        ("File too large", "No space left", "file size", "SIGXFSZ"),
        policy=False,
        needs="bwrap",  # without it /tmp is the host's
    ),
    Case(
        "append_to_original",
        "with open('sales.csv', 'a') as f:\n    f.write('evil,row\\n')",
        ("error",),
        ("Read-only file system", "Permission denied"),
        needs="uid",
    ),
    Case(
        "truncate_original",
        "import os\nos.truncate('sales.csv', 0)",
        ("error",),
        ("Read-only", "Permission denied"),
        needs="uid",
    ),
    Case(
        "overwrite_original_in_place",
        "with open('shop.sqlite', 'r+b') as f:\n    f.write(b'garbage')",
        ("error",),
        ("Read-only", "Permission denied"),
        needs="uid",
    ),
    Case("chmod_original_refused", "import os\nos.chmod('sales.csv', 0o777)", ("rejected",), ("chmod",)),
    Case(
        "chmod_original",
        "import os\nos.chmod('sales.csv', 0o777)",
        ("error",),
        ("Read-only", "Operation not permitted", "Permission denied"),
        policy=False,
    ),
    Case(
        "delete_workspace_entries",
        "import os, shutil\nfor name in os.listdir('.'):\n    if os.path.islink(name) or os.path.isfile(name):\n"
        "        os.remove(name)\n    else:\n        shutil.rmtree(name, ignore_errors=True)\nprint('left', sorted(os.listdir('.')))",
        ("ok",),
        ("left",),
    ),
    Case(
        "delete_files_inside_data_folder",
        "import os\nfor root, dirs, files in os.walk('station_survey/'):\n    for f in files:\n"
        "        os.remove(os.path.join(root, f))",
        ("error", "ok"),  # a read-only view refuses; a private copy may be emptied (the original stays)
    ),
    Case(
        "sqlite_write_from_python",
        "import sqlite3\nc = sqlite3.connect('shop.sqlite')\nc.execute('DELETE FROM customers')\nc.commit()",
        ("error",),
        ("readonly database", "read-only", "unable to open", "Permission denied"),
        needs="uid",
    ),
    Case("sql_drop_table", "DROP TABLE customers", ("error",), ("read-only",), language="sql"),
    Case("sql_attach", "ATTACH DATABASE '/tmp/x.db' AS x", ("error",), ("read-only",), language="sql"),
    Case("sql_pragma_write", "PRAGMA journal_mode = DELETE", ("error",), ("read-only",), language="sql"),
    Case(
        "write_outside_refused",
        f"open('{HOST_CANARY}', 'w').write('x')",
        ("rejected",),
        ("outside the working directory",),
        check=_no_host_canary,
    ),
    Case(
        "write_outside",
        f"open('{HOST_CANARY}', 'w').write('x')",
        ("error",),
        ("Permission denied", "Read-only", "No such file"),
        policy=False,
        check=_no_host_canary,
    ),
    Case(
        # the root of the sandbox's file system (a tmpfs bubblewrap builds, owned by the cells' uid when
        # the harness is not root): a file left there would meet the next trajectory, or a sibling
        "write_sandbox_root",
        f"open('/{ESCAPE_NAME}', 'w').write('x')",
        ("error",),
        ("Permission denied", "Read-only"),
        policy=False,
        needs="bwrap",
    ),
    Case(
        "write_parent_dir",
        f"open('../{ESCAPE_NAME}', 'w').write('x')\nopen('../../{ESCAPE_NAME}', 'w').write('x')",
        ("error",),
        ("Permission denied", "Read-only"),
        policy=False,
        check=_no_escape_file,
    ),
    Case(
        "write_original_by_host_path",
        "open('@DATA@/sales.csv', 'a').write('evil')",
        ("error",),
        ("No such file", "Permission denied", "Read-only"),
        policy=False,
    ),
    Case(
        "rmtree_originals_by_host_path",
        "import shutil\nshutil.rmtree('@DATA@')",
        ("error",),
        ("No such file", "Permission denied", "Read-only"),
        policy=False,
    ),
    Case(
        "symlink_escape",
        "import os\nos.symlink('/etc/passwd', 'pw')\nopen('pw', 'a').write('x')",
        ("error",),
        ("Read-only", "Permission denied"),
        policy=False,
    ),
    Case(
        "host_paths_invisible",
        "import os\nprint('data visible:', os.path.exists('@DATA@'))",
        ("ok",),
        ("data visible: False",),
        policy=False,
        needs="bwrap",
    ),
    # ---- network
    Case(
        "socket_refused",
        "import socket\nsocket.create_connection(('1.1.1.1', 53))",
        ("rejected",),
        ("network",),
    ),
    Case(
        "socket_connect",
        "import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)",
        ("error",),
        ("unreachable", "Errno", "timed out"),
        policy=False,
        needs="bwrap",
    ),
    Case(
        "urllib_fetch",
        "import urllib.request\nurllib.request.urlopen('http://example.com', timeout=2)",
        ("error",),
        ("URLError", "Name or service not known", "Temporary failure", "unreachable"),
        policy=False,
        needs="bwrap",
    ),
    Case(
        "read_csv_url_refused",
        "import pandas as pd\npd.read_csv('https://x.org/a.csv')",
        ("rejected",),
        ("URL",),
    ),
    # ---- dynamic tricks the policy must see through
    Case("dunder_import", "__import__('os').system('id')", ("rejected",), ("__import__",)),
    Case(
        "getattr_computed", "getattr(__import__('o' + 's'), 'sys' + 'tem')('id')", ("rejected",), ("getattr",)
    ),
    Case(
        "reduce_getattr",
        "import functools, os\nfunctools.reduce(getattr, ['sys' + 'tem'], os)('id')",
        ("rejected",),
        ("getattr",),
    ),
    Case(
        "globals_builtins",
        "globals()['__builtins__'].__import__('os').system('id')",
        ("rejected",),
        ("globals",),
    ),
    Case(
        "builtins_dict_eval",
        "__builtins__.__dict__['eval'](\"__import__('os').system('id')\")",
        ("rejected",),
        ("__builtins__",),
    ),
    Case(
        "subclasses_walk",
        "[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == 'Popen'][0](['id'])",
        ("rejected",),
        ("__subclasses__",),
    ),
    Case("exec_string", "exec(\"import os; os.system('id')\")", ("rejected",), ("exec",)),
    Case("alias_chain", "import os as o\nx = o\nx.system('id')", ("rejected",), ("os.system",)),
    Case("module_chain", "import shutil\nshutil.os.system('id')", ("rejected",), ("system",)),
    Case("frame_walk", "import sys\nsys._getframe(0).f_globals", ("rejected",), ("_getframe", "f_globals")),
    Case(
        "pickle_rce",
        "import pickle\npickle.loads(b\"cos\\nsystem\\n(S'id'\\ntR.\")",
        ("rejected",),
        ("pickle",),
    ),
    Case(
        "pickle_rce_contained",
        "import pickle\npickle.loads(b\"cos\\nsystem\\n(S'touch /etc/datadojo_hostile_pwned'\\ntR.\")",
        ("ok", "error"),
        (),
        policy=False,
        check=_no_host_canary,
    ),
    # ---- native code, signals, exits
    Case(
        # The static policy cannot see code that the cell writes to a file and then imports: this one gets
        # past it by design, and process isolation has to contain what it does.
        "policy_evasion_via_module_file",
        "import sys\nsys.path.insert(0, '.')\n"
        "with open('helper_mod.py', 'w') as f:\n"
        "    f.write(\"import os\\nos.system('echo uid=$(id -u) host=$(hostname)')\\n\")\n"
        "import helper_mod",
        ("ok",),
        ("uid=",),
        needs="uid",
        check=_ran_as_sandbox_uid,
    ),
    Case("ctypes_refused", "import ctypes\nctypes.string_at(0)", ("rejected",), ("ctypes",)),
    Case(
        "ctypes_segfault",
        "import ctypes\nctypes.string_at(0)",
        ("killed", "error"),
        ("SIGSEGV", "segmentation", "signal"),
        policy=False,
    ),
    Case(
        "deep_recursion_segfault",
        "import sys\nsys.setrecursionlimit(10 ** 7)\ndef f(n):\n    return f(n + 1)\nf(0)",
        ("killed", "error", "timeout"),  # 3.11 keeps Python frames off the C stack: it may just run long
        ("SIGSEGV", "signal", "RecursionError", "MemoryError", "killed", "timeout"),
    ),
    Case("recursion_error", "def f(n):\n    return f(n + 1)\nf(0)", ("error",), ("RecursionError",)),
    Case("signal_parent_refused", "import os\nos.kill(os.getppid(), 9)", ("rejected",), ("os.kill",)),
    Case(
        "signal_parent",
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
        ("error", "killed", "env_error"),  # env_error: it killed its worker (an environment failure)
        ("Operation not permitted", "killed", "died"),
        policy=False,
    ),
    Case(
        "signal_everyone",
        # kill(-1) reaches every process the caller may signal except itself: nothing outside the sandbox
        "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('survived kill -1')",
        ("ok", "killed", "error", "env_error"),
        # without root, a sandbox's cells share its worker's uid and may kill it: the harness says so
        ("survived kill -1", "SIGKILL", "Operation not permitted", "worker died"),
        policy=False,
    ),
    Case(
        "signal_pid1",
        "import os, signal\nos.kill(1, signal.SIGKILL)\nprint('still here')",
        ("error", "ok", "killed"),
        ("Operation not permitted", "still here", "killed"),
        policy=False,
    ),
    Case(
        "raise_limits",
        "import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))",
        ("error",),
        ("not allowed", "Operation not permitted", "ValueError"),
        policy=False,
    ),
    Case(
        "become_root",
        "import os\nos.setuid(0)",
        ("error",),
        # EINVAL without root: uid 0 is not even mapped in the sandbox's user namespace
        ("Operation not permitted", "Invalid argument"),
        policy=False,
        needs="uid",
    ),
    Case("os_exit_refused", "import os\nos._exit(0)", ("rejected",), ("os._exit",)),
    Case(
        "os_exit",
        "import os\nprint('before exit', flush=True)\nos._exit(7)",
        ("error", "killed"),
        ("before exit",),
        policy=False,
    ),
    Case("sys_exit_code", "import sys\nsys.exit(3)", ("error",), ("SystemExit",)),
    Case("keyboard_interrupt", "raise KeyboardInterrupt", ("error",), ("KeyboardInterrupt",)),
    Case("read_stdin", "input('? ')", ("error",), ("EOFError",)),
    # ---- output
    Case("huge_output", "print('x' * 10_000_000)", ("killed", "ok"), ("characters truncated",)),
    Case(
        "output_flood",
        "while True:\n    print('spam ' * 20)",
        ("killed",),
        ("characters truncated", "output"),
    ),
    Case(
        "stderr_flood",
        "import sys\nwhile True:\n    sys.stderr.write('e' * 1000)",
        ("killed",),
        ("truncated", "output"),
    ),
    Case(
        "huge_repr",
        "class R:\n    def __repr__(self):\n        return 'r' * 5_000_000\nR()",
        ("ok", "killed"),
        ("characters truncated",),
    ),
    Case(
        "binary_output",
        "import sys\nsys.stdout.buffer.write(bytes(range(256)) * 4)\nsys.stdout.flush()",
        ("ok",),
        ("\\x00",),
    ),
    Case(
        "non_utf8_output",
        "import sys\nsys.stdout.buffer.write(b'caf\\xe9 \\xff\\xfe\\xc3\\x28 end\\n')\nsys.stdout.flush()",
        ("ok",),
        ("\ufffd",),
    ),
    Case(
        "terminal_escapes",
        "print('\\x1b[2J\\x1bc\\x1b]0;title\\x07done\\x07')",
        ("ok",),
        ("done",),
        none_of=("\x1b", "\x07"),
    ),
    Case("lone_surrogate", "print('\\ud800 ok')", ("ok", "error"), ("ok", "UnicodeEncodeError")),
    # ---- the harness's secrets
    Case(
        "environment_dump",
        f"import os\nprint(sorted(os.environ))\nprint('secret:', os.environ.get('{SECRET_NAME}'))",
        ("ok",),
        ("secret: None",),
        check=_secret_absent,
    ),
    Case(
        "proc_environ_scan",
        "import os\nfound = []\nfor pid in os.listdir('/proc'):\n    if not pid.isdigit():\n        continue\n"
        "    try:\n        data = open(f'/proc/{pid}/environ', 'rb').read()\n    except OSError:\n        continue\n"
        f"    if b'{SECRET_VALUE}' in data:\n        found.append(pid)\nprint('found', found)",
        # a sandbox of its own lists its own PID namespace and finds nothing; a forked one (the pool's PID
        # namespace) may not list /proc at all (Landlock grants only its own /proc entry)
        ("ok", "error"),
        ("found []", "PermissionError: [Errno 13] Permission denied: '/proc'"),
        needs="uid",
    ),
]


# ------------------------------------------------------------------------------------------- helpers
@dataclass
class Env:
    data: Path
    files: list[Path]
    hashes: dict[str, str]
    pools: dict[bool, SandboxPool]
    uids: set[int]


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=[True, False], ids=["forked", "started"])
async def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    """Copies of the example data (the "originals"), a secret in our environment, and the two pools.

    Twice: with the pool's workers forked from its fork server (the default) and started one by one.
    """
    base = BASE.replace(fork_server=request.param)
    data = tmp_path_factory.mktemp("hostile_originals")
    for name in ("sales.csv", "shop.sqlite"):
        shutil.copy2(EXAMPLES / name, data / name)
    shutil.copytree(EXAMPLES / "station_survey", data / "station_survey")
    files = [data / "sales.csv", data / "shop.sqlite", data / "station_survey"]
    hashes = tree_digest(data, modes=True)
    os.environ[SECRET_NAME] = SECRET_VALUE
    baseline = live_descendants(os.getpid())
    pools = {
        True: SandboxPool(base, size=1, warm=1),
        False: SandboxPool(base.replace(policy=PolicyConfig(enabled=False)), size=1, warm=1),
    }
    try:
        yield Env(data, files, hashes, pools, set())
    finally:
        for pool in pools.values():
            await pool.close()
        os.environ.pop(SECRET_NAME, None)
        # Nothing this module started may outlive the pools.
        left = await leftover_descendants(baseline, polls=WAIT_POLLS)
        assert not left, f"processes left behind by the sandbox pools: {sorted(left)}"


def _unmet(requirement: str, sb: Sandbox) -> str | None:
    """Why this sandbox cannot show the containment a case asserts (decided before its code runs)."""
    if requirement == "bwrap" and sb.isolation != "bwrap":
        return f"needs bubblewrap isolation; this sandbox runs with {sb.isolation!r}"
    if requirement == "uid" and sb.isolation != "bwrap" and sb.cell_uid is None:
        return (
            "needs bubblewrap or a dedicated non-root cell uid: here cells run with the harness's own "
            "privileges, so this snippet would really act on the host"
        )
    return None


def _assert_clean_observation(res: ExecResult) -> None:
    assert isinstance(res.output, str)
    assert not _CONTROL.search(res.output), repr(res.output[:300])
    assert len(res.output) <= LIMITS.max_observation_chars + NOTE_SLACK
    res.to_observation()  # a valid trajectory record
    assert res.error == (res.status != "ok")


# ------------------------------------------------------------------------------------------- the tests
@pytest.mark.parametrize("case", HOSTILE, ids=[c.id for c in HOSTILE])
async def test_hostile(env: Env, case: Case) -> None:
    if case.requirement == "bwrap" and not HAS_BWRAP:
        pytest.skip(
            "needs bubblewrap (bwrap not installed): the asserted containment comes from its namespaces"
        )
    code = case.code.replace("@DATA@", str(env.data))
    pool = env.pools[case.policy]
    async with pool.session(env.files) as sb:
        unmet = _unmet(case.requirement, sb)
        if unmet:
            pytest.skip(unmet)
        uid = sb.cell_uid
        if uid is not None:
            env.uids.add(uid)
        res = await sb.run(code, language=case.language)  # type: ignore[arg-type]
        detail = f"{case.id}: status={res.status!r} output={res.output[:600]!r}"
        assert res.status in case.statuses, detail
        _assert_clean_observation(res)
        text = res.output.lower()
        if case.any_of:
            assert any(k.lower() in text for k in case.any_of), detail
        for bad in case.none_of:
            assert bad.lower() not in text, detail
        if res.status == "rejected":
            assert res.output.startswith("PolicyError:"), detail
        if case.check is not None:
            case.check(sb, res)
        # contained: the same sandbox still runs a normal cell, and nothing of the cell keeps running
        after = await sb.run("print('alive', 6 * 7)")
        # (a background thread of a kept chunk is re-created by the replay and may print here too, as it
        # would in a notebook kernel)
        assert after.status == "ok" and "alive 42\n" in after.output, f"{case.id}: after: {after}"
        if uid is not None:
            # between cells the worker keeps exactly one idle, pre-forked child under the cell uid
            assert await wait_until(lambda: len(pids_of_uid(uid)) <= 1, polls=WAIT_POLLS), (
                f"{case.id}: processes of the sandbox uid {uid} still running: {pids_of_uid(uid)}"
            )
    if uid is not None:
        # the pool resets the sandbox for the next trajectory: every process of the cell is gone, and only
        # the fresh idle child under the cell uid is left (a sandbox that is closed leaves nothing at all;
        # test_zz_after_the_corpus checks that once the pools close)
        assert await wait_until(lambda: len(pids_of_uid(uid)) <= 1, polls=WAIT_POLLS), (
            f"{case.id}: processes of uid {uid} survived the trajectory: {pids_of_uid(uid)}"
        )


@pytest.mark.asyncio(loop_scope="module")
async def test_corpus_is_large_enough() -> None:
    assert len(HOSTILE) >= 40
    assert len({c.id for c in HOSTILE}) == len(HOSTILE)
    assert sum(not c.policy for c in HOSTILE) >= 15  # isolation is tested without the policy too
    assert all(c.requirement in ("uid", "bwrap") for c in HOSTILE if not c.policy)


async def test_zz_after_the_corpus(env: Env) -> None:
    """Runs last (file order): originals intact, no stray processes, and the pool still serves."""
    assert tree_digest(env.data, modes=True) == env.hashes, (
        "an original data file changed, appeared or vanished"
    )
    assert not HOST_CANARY.exists()
    for uid in env.uids:
        # a pool keeps its reset sandbox warm: at most its one idle child per uid (none once the pools
        # close, which the fixture asserts)
        assert await wait_until(lambda u=uid: len(pids_of_uid(u)) <= 1, polls=WAIT_POLLS), (
            f"processes of uid {uid} remain"
        )
    with (env.data / "sales.csv").open(newline="") as fh:
        expected_units = sum(int(row["units"]) for row in csv.DictReader(fh))
    with sqlite3.connect(f"file:{env.data / 'shop.sqlite'}?mode=ro", uri=True) as conn:
        expected_customers = conn.execute("SELECT count(*) FROM customers").fetchone()[0]
    for policy, pool in env.pools.items():
        async with pool.session(env.files) as sb:
            # the standard library only: importing pandas inside the small wall limit would make the verdict
            # hinge on the machine's speed (the corpus is about containment, not about pandas)
            res = await sb.run(
                "import csv\nrows = list(csv.DictReader(open('sales.csv', newline='')))\n"
                "sum(int(r['units']) for r in rows)"
            )
            assert res.status == "ok" and res.output == f"{expected_units}\n", (policy, res)
            sql = await sb.run("SELECT count(*) AS n FROM customers", language="sql")
            assert sql.status == "ok" and f"{expected_customers}" in sql.output, (policy, sql)
            follow = await sb.run("print(len(rows))")
            assert follow.status == "ok" and follow.output.strip().isdigit()
    assert tree_digest(env.data, modes=True) == env.hashes

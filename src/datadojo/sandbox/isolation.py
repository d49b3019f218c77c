"""How a sandbox worker is started: bubblewrap when it works, otherwise resource limits + the static policy.

**With bubblewrap** (``isolation == "bwrap"``) the worker runs in new PID, network, IPC, UTS and cgroup
namespaces (no network at all; it sees only its own processes) on a root file system built from
read-only binds of what Python needs (``/usr``, the interpreter's prefix, the ``sys.path`` entries, a few
files of ``/etc``), a fresh ``/proc`` and ``/dev``, a private size-limited ``/tmp``, the workspace
(read-write, at ``/workspace``) and the data files (read-only, at ``/inputs``). The environment is cleared
(no harness variables such as ``OPENAI_API_KEY`` leak) and rebuilt from a short allow-list.

Which user runs the agent's code matters because ``RLIMIT_NPROC`` (the fork-bomb guard) counts processes
per user and is not enforced at all for root:

* *Harness runs as root*: bubblewrap runs in its privileged mode (no user namespace) and keeps only
  ``CAP_SETUID``, ``CAP_SETGID`` and ``CAP_KILL`` for the worker, which stays root inside the sandbox.
  Every cell process switches to a **dedicated uid** (one per sandbox, from a high range no real account
  uses) and so has no capabilities, cannot signal or trace the worker, and its process count is its own.
* *Harness runs as an ordinary user*: bubblewrap creates a user namespace (and forbids nested ones);
  process counts are per user namespace, hence again per sandbox (a worker forked by a pool's fork server
  makes a user namespace of its own for this: :mod:`datadojo.sandbox.worker.namespaces`). The worker and
  the cells share the uid, so a cell can kill its own worker; the harness notices and restarts it. The
  root tmpfs bubblewrap builds, which that uid owns, is remounted read-only.

**Landlock** (``isolation == "landlock"``, or ``auto`` where bubblewrap cannot make namespaces, as in
Docker and Kubernetes pods): the worker builds a Landlock ruleset (:mod:`datadojo.sandbox.landlock`) once,
and every cell process confines itself with it before it runs anything: read/execute of the Python
installation and system libraries, read of the ``/etc`` files bubblewrap binds and of the inputs,
read-write of the workspace and a private temp folder, no TCP (ABI ≥ 4), no signals or abstract UNIX
sockets beyond its own processes (ABI ≥ 6). The data files are views as under bubblewrap (hard links in
``inputs/``, readable only), seen at their host path. Everything else is as in the reduced mode (own PID
and network namespaces only where ``unshare`` works).

**Reduced isolation** (neither bubblewrap nor Landlock usable, or ``isolation="none"``) keeps the separate process, the
cleared environment, every resource limit, the process sweep after each cell and the static policy, and
copies the data files into the workspace. It cannot stop network access, writes outside the workspace or
reads of other files by code that gets past the policy, which is why every result records ``reduced``
and a warning is logged once per process.

Under root the cells use a dedicated uid at every level. At the Landlock and reduced levels a Python tree
that uid cannot reach (pyenv under ``/root``) is held open by the worker for it
(:mod:`datadojo.sandbox.worker.heldpaths`, ``held_paths`` in the settings). Every cell process installs a
seccomp filter (:mod:`datadojo.sandbox.seccomp`, ``seccomp`` in the settings): no System V IPC or POSIX
message queues anywhere, no ``AF_UNIX`` sockets where the host's file system is in view.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datadojo.errors import DataDojoError, ExitCode
from datadojo.sandbox.workspace import INPUTS_MOUNT, WORKSPACE_MOUNT, Workspace

__all__ = [
    "BOOTSTRAP",
    "IsolationUnavailable",
    "LaunchPlan",
    "allocate_uid",
    "build_launch",
    "bwrap_available",
    "bwrap_server_argv",
    "landlock_available",
    "landlock_paths",
    "python_paths",
    "require_confinement",
    "resolve_isolation",
]

log = logging.getLogger("datadojo.sandbox")

#: Run by ``python -I -B -c``: put the harness's import paths first, then hand over to the worker.
BOOTSTRAP = (
    "import json, sys; sys.path[:0] = json.loads(sys.argv[1]); "
    "from datadojo.sandbox.worker import main; main()"
)

#: Files of ``/etc`` the sandbox needs (dynamic linker, time zone, user names, alternatives symlinks).
_ETC_FILES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "passwd",
    "group",
    "nsswitch.conf",
    "alternatives",
    "fonts",
    "mime.types",
)
#: Top-level directories that are either symlinks into /usr (merged /usr) or bound read-only.
_TOP_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

_CAPS_KEPT = ("CAP_SETUID", "CAP_SETGID", "CAP_KILL")
#: Added for a pool's bubblewrap fork server, which never runs agent code. Every worker it forks drops the
#: first three after making its own namespaces (datadojo.sandbox.worker.namespaces); it keeps
#: CAP_SYS_PTRACE, without which it could not read the children lists of its cells (another uid, not
#: dumpable) to sweep what a cell left running: it has no PID namespace of its own to scan instead. The
#: cells have no capability at all (their own uid).
_FORK_SERVER_CAPS = ("CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SETPCAP", "CAP_SYS_PTRACE")
#: Reduced mode under root: the worker becomes PID 1 of new PID, mount (with its own /proc), network, IPC
#: and UTS namespaces; the file system stays the host's.
_UNSHARE_ARGS = ("--pid", "--fork", "--kill-child", "--mount-proc", "--net", "--ipc", "--uts")

#: Dedicated uids for cells live in [_UID_BASE, _UID_BASE + _UID_SPAN): far above real accounts and
#: above the ranges container runtimes hand out (subuid maps start at 100000 and span 65536 per user).
_UID_BASE = 2_000_000_000
_UID_SPAN = 100_000_000
_uid_counter = itertools.count()
_uid_lock = threading.Lock()
_warned_reduced = False


class IsolationUnavailable(DataDojoError, RuntimeError):
    """``isolation="bwrap"`` or ``"landlock"`` was requested but that level does not work here."""

    exit_code = ExitCode.SANDBOX

    exit_code = ExitCode.SANDBOX


@dataclass(frozen=True)
class LaunchPlan:
    """How to start one worker: the command, its environment and what the worker must be told."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    isolation: str  # "bwrap" | "landlock" | "reduced"
    settings: dict[str, Any]  # sent to the worker in its first message


def allocate_uid() -> int | None:
    """A uid for one sandbox's cells when running as root (``None`` otherwise: cells keep our uid).

    Mixed with the process id so that two harness processes on one host (say, two test runs) do not hand
    out the same uid and share a process count.
    """
    if os.geteuid() != 0:
        return None
    with _uid_lock:
        n = next(_uid_counter)
    return _UID_BASE + (os.getpid() * 1009 + n) % _UID_SPAN


def _bwrap() -> str | None:
    return shutil.which("bwrap")


def _namespace_args(*, disable_userns: bool = True) -> list[str]:
    """``disable_userns=False``: a fork server's, whose workers make their own user namespace without root
    and forbid nested ones themselves (:mod:`datadojo.sandbox.worker.namespaces`)."""
    if os.geteuid() == 0:
        # Privileged mode: no user namespace, so the cells' uid is a real one and RLIMIT_NPROC counts it.
        args = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        args += ["--cap-drop", "ALL"]
        for cap in _CAPS_KEPT:
            args += ["--cap-add", cap]
    else:
        args = ["--unshare-user", "--unshare-all", *(["--disable-userns"] if disable_userns else [])]
    return [*args, "--die-with-parent", "--new-session", "--hostname", "sandbox"]


@functools.lru_cache(maxsize=1)
def bwrap_available() -> tuple[bool, str]:
    """Whether bubblewrap can build our kind of sandbox here, and why not (probed once per process)."""
    exe = _bwrap()
    if exe is None:
        return False, "bwrap is not installed (Debian package 'bubblewrap')"
    argv = [exe, *_namespace_args(), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bwrap could not be run: {exc}"
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        return False, f"bwrap failed here: {detail[-1] if detail else f'exit status {proc.returncode}'}"
    return True, ""


@functools.lru_cache(maxsize=1)
def unshare_available() -> bool:
    """Whether util-linux ``unshare`` can give a reduced-mode worker its own PID/network namespaces.

    Only tried as root (without a user namespace, unprivileged ``unshare`` cannot make PID namespaces).
    """
    exe = shutil.which("unshare")
    if exe is None or os.geteuid() != 0:
        return False
    try:
        proc = subprocess.run([exe, *_UNSHARE_ARGS, "true"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


@functools.lru_cache(maxsize=1)
def landlock_available() -> tuple[bool, str]:
    """Whether Landlock can confine a process here, and why not (probed once per process).

    Builds a ruleset and applies it in a forked child, so a kernel that reports an ABI but refuses
    ``landlock_restrict_self`` (a seccomp profile that blocks it) counts as unavailable.
    """
    from datadojo.sandbox import landlock

    abi = landlock.abi_version()
    if abi < 1:
        return False, "the kernel has no Landlock (Linux >= 5.13 with Landlock in the lsm= list)"
    try:
        fd, _cov = landlock.build_ruleset(read_exec=["/usr"], read=[], read_write=[])
    except OSError as exc:
        return False, f"Landlock ABI {abi} but creating a ruleset failed: {exc}"
    try:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            code = 1
            try:
                landlock.restrict_self(fd)
                code = 0
            finally:
                os._exit(code)
        _pid, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    if os.waitstatus_to_exitcode(status) != 0:
        return False, f"Landlock ABI {abi} but landlock_restrict_self failed (blocked by seccomp?)"
    return True, ""


def resolve_isolation(requested: str) -> str:
    """Turn ``auto`` / ``bwrap`` / ``landlock`` / ``none`` into the level used: ``bwrap``, ``landlock`` or
    ``reduced`` (``auto`` = the first of those that works)."""
    global _warned_reduced
    if requested not in ("auto", "bwrap", "landlock", "none"):
        raise ValueError(f"isolation must be 'auto', 'bwrap', 'landlock' or 'none', got {requested!r}")
    reasons = []
    if requested in ("auto", "bwrap"):
        ok, why = bwrap_available()
        if ok:
            return "bwrap"
        if requested == "bwrap":
            raise IsolationUnavailable(f"isolation='bwrap' was requested but {why}")
        reasons.append(why)
    if requested in ("auto", "landlock"):
        ok, why = landlock_available()
        if ok:
            return "landlock"
        if requested == "landlock":
            raise IsolationUnavailable(
                f"isolation='landlock' was requested but {why}; use --isolation auto to fall back to "
                "bubblewrap or reduced isolation"
            )
        reasons.append(why)
    reason = "; ".join(reasons) if reasons else "isolation='none' was configured"
    if not _warned_reduced:
        _warned_reduced = True
        namespaces = (
            "its own PID and network namespaces (util-linux unshare) but the host's file system"
            if unshare_available()
            else "no namespaces (network, file system and other processes are reachable)"
        )
        log.warning(
            "sandbox isolation is reduced (%s): code runs in separate processes with resource limits, the "
            "static policy and %s; code that gets past the policy is not contained. Every result records "
            "isolation='reduced'",
            reason,
            namespaces,
        )
    return "reduced"


def require_confinement(requested: str = "auto", *, allow_reduced: bool = False, purpose: str = "RL") -> str:
    """The level ``requested`` resolves to; raises :class:`IsolationUnavailable` if it is ``reduced`` and
    ``allow_reduced`` is false.

    Why RL refuses reduced isolation by default: a policy under RL is optimized against the reward, and
    at reduced isolation the reference answers on disk are readable from a cell; a policy that learns to
    read them gets full reward and the training measures nothing.
    """
    level = resolve_isolation(requested)
    if level == "reduced" and not allow_reduced:
        _ok, why_bwrap = bwrap_available()
        _ok, why_ll = landlock_available()
        raise IsolationUnavailable(
            f"{purpose} refuses to run at reduced sandbox isolation (bubblewrap: {why_bwrap or 'not used'}; "
            f"Landlock: {why_ll or 'not used'}): agent code could read the reference answers and reach the "
            "network. Pass --allow-reduced-isolation to run anyway"
        )
    return level


def _covered(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _protected() -> list[str]:
    """Directories whose *whole* content must not be shown to the sandbox even if ``sys.path`` names them
    (a script run from ``/tmp`` puts ``/tmp`` on ``sys.path``, and ``/tmp`` holds other sandboxes)."""
    return [os.path.realpath(p) for p in (os.getcwd(), tempfile.gettempdir(), str(Path.home()), "/")]


def _exposable(path: str, protected: list[str]) -> bool:
    """False for ``path`` equal to, or an ancestor of, a protected directory."""
    return not any(p == path or p.startswith(path.rstrip("/") + "/") for p in protected)


def _search_paths(extra: list[str]) -> list[str]:
    """The harness's absolute ``sys.path`` entries worth giving the worker, then ``extra``."""
    import datadojo

    protected = _protected()
    paths = [str(Path(datadojo.__file__).resolve().parent.parent)]
    for p in [*sys.path, *extra]:
        usable = p and os.path.isabs(p) and os.path.isdir(p) and p not in paths
        if usable and _exposable(os.path.realpath(p), protected):
            paths.append(p)
    return paths


def python_paths(extra: list[str] | None = None) -> list[str]:
    """Directories the worker needs read access to: the interpreter's prefixes, ``sys.path``, our package.

    Nested paths are dropped (binding ``/a`` already shows ``/a/b``). Entries that would expose the
    current directory, the temp directory or the home directory wholesale are left out.
    """
    candidates = [
        sys.base_prefix,
        sys.prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
        *_search_paths(extra or []),
    ]
    protected = _protected()
    existing: list[str] = []
    for p in candidates:
        real = os.path.realpath(p)
        if os.path.isdir(real) and real not in existing and _exposable(real, protected):
            existing.append(real)
    existing.sort(key=len)
    result: list[str] = []
    for p in existing:
        if not _covered(p, result):
            result.append(p)
    return result


def _world_accessible(path: str) -> bool:
    """True when every directory from ``/`` down to ``path`` can be traversed by any user."""
    p = Path(path).resolve()
    for part in [p, *p.parents]:
        try:
            mode = part.stat().st_mode
        except OSError:
            return False
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return False
    return True


def unreachable_paths(paths: list[str]) -> list[str]:
    """Those of ``paths`` (the Python trees) that another user cannot reach: a folder above is not
    traversable by others (pyenv under ``/root``). A worker holds them open for its cells'
    uid (:mod:`datadojo.sandbox.worker.heldpaths`)."""
    return [p for p in paths if not _world_accessible(p)]


def _base_env(home: str, tmp: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TMPDIR": tmp,
        "TERM": "dumb",
        # One thread per numerical library: the pool runs many sandboxes on few cores, and threads count
        # against RLIMIT_NPROC.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        "VECLIB_MAXIMUM_THREADS": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{tmp}/matplotlib",
    }


def build_launch(
    workspace: Workspace,
    *,
    isolation: str,
    settings: dict[str, Any],
    tmp_mb: int,
    extra_paths: list[str] | None = None,
    forked: bool = False,
) -> LaunchPlan:
    """The command line that starts a worker for ``workspace`` under ``isolation``.

    ``forked``: the worker will be forked by a pool's fork server (no command line is run). Under
    bubblewrap that server's one ``bwrap`` sandbox shows the workspace at its host path, so the plan is
    the Landlock level's (host paths, a Landlock ruleset for every cell process) labelled ``bwrap``.
    """
    extra = [p for p in (extra_paths or []) if os.path.isdir(p)]
    import_paths = _search_paths(extra)
    python = [sys.executable, "-I", "-B", "-c", BOOTSTRAP, json.dumps(import_paths)]
    settings = dict(settings)
    if isolation == "bwrap" and forked:
        plan = build_launch(
            workspace, isolation="landlock", settings=settings, tmp_mb=tmp_mb, extra_paths=extra
        )
        # The worker makes its own mount namespace with a private /tmp of tmp_mb (as a bubblewrap worker
        # of its own has; see datadojo.sandbox.worker.namespaces), which its cells may write.
        env = {**plan.env, "TMPDIR": "/tmp", "MPLCONFIGDIR": "/tmp/matplotlib"}
        forked_settings = dict(plan.settings)
        paths = forked_settings["landlock"]
        forked_settings["landlock"] = {**paths, "read_write": [*paths["read_write"], "/tmp", "/dev/shm"]}
        forked_settings.pop("held_paths", None)  # the server's tree has traversable parents
        forked_settings["private_tmp"] = True
        forked_settings["private_shm"] = True
        # The host's sockets are out of the server's bubblewrap tree, the siblings' out of this mount
        # namespace: AF_UNIX sockets (multiprocessing.Manager) stay usable, as in a worker of its own.
        forked_settings["seccomp"] = _seccomp_settings("bwrap")
        forked_settings["private_tmp_of"] = {
            "tmp_mb": tmp_mb,
            "sandbox_root": str(workspace.root),
            "workspace": str(workspace.path),
            # without root, the server's one user namespace would make RLIMIT_NPROC count all siblings
            "own_user": os.geteuid() != 0,
        }
        return LaunchPlan(argv=[], env=env, cwd=plan.cwd, isolation="bwrap", settings=forked_settings)
    if isolation == "bwrap":
        exe = _bwrap()
        if exe is None:  # pragma: no cover - resolve_isolation checked it
            raise IsolationUnavailable("bwrap disappeared")
        env = _base_env(WORKSPACE_MOUNT, "/tmp")
        argv = [exe, *_namespace_args()]
        # The private /tmp first: binds below it (an install directory under /tmp) must stay visible.
        argv += ["--size", str(tmp_mb * 1024 * 1024), "--perms", "1777", "--tmpfs", "/tmp"]
        argv += _filesystem_args(python_paths(extra))
        # A private /dev/shm (POSIX semaphores and shared memory: multiprocessing's locks and queues),
        # writable by the cells and emptied between trajectories like /tmp.
        argv += ["--size", str(tmp_mb * 1024 * 1024), "--perms", "1777", "--tmpfs", "/dev/shm"]
        argv += ["--bind", str(workspace.path), WORKSPACE_MOUNT]
        argv += ["--ro-bind", str(workspace.inputs), INPUTS_MOUNT]
        # The root bubblewrap builds is a tmpfs that, without root, the cells' uid owns: read-only, or a
        # cell could leave a file at / or /etc that the next trajectory in this sandbox would find.
        argv += ["--remount-ro", "/"]
        argv += ["--chdir", WORKSPACE_MOUNT, "--clearenv"]
        for key, value in env.items():
            argv += ["--setenv", key, value]
        argv += ["--", *python]
        settings.update(
            workspace=WORKSPACE_MOUNT, pidns=True, count_procs=False, private_tmp=True, private_shm=True
        )
        settings["seccomp"] = _seccomp_settings("bwrap")
        return LaunchPlan(argv=argv, env=env, cwd=str(workspace.root), isolation="bwrap", settings=settings)
    tmp = workspace.root / "tmp"
    tmp.mkdir(mode=0o1777, exist_ok=True)
    os.chmod(tmp, 0o1777)
    env = _base_env(str(workspace.path), str(tmp))
    root_cells = os.geteuid() == 0 and settings.get("cell_uid") is None
    argv = python
    pidns = unshare_available()
    if pidns:  # cannot signal, or even name, the host's processes; no network
        argv = [str(shutil.which("unshare")), *_UNSHARE_ARGS, "--", *python]
    settings.update(workspace=str(workspace.path), pidns=pidns, count_procs=root_cells)
    level = "reduced"
    if isolation == "landlock":
        level = "landlock"
        settings["landlock"] = landlock_paths(workspace, python_paths(extra))
    if settings.get("cell_uid") is not None and os.geteuid() == 0:
        settings["held_paths"] = unreachable_paths(python_paths(extra))
    settings["seccomp"] = _seccomp_settings(level)
    return LaunchPlan(argv=argv, env=env, cwd=str(workspace.path), isolation=level, settings=settings)


def _seccomp_settings(level: str) -> dict[str, bool] | None:
    """The seccomp filter of every cell process at ``level`` (:mod:`datadojo.sandbox.seccomp`).

    No System V IPC or POSIX message queues at any level (nothing of one trajectory reaches the next or a
    sibling through them); no ``AF_UNIX`` sockets where the host's file system is in view (Landlock and
    reduced: Landlock does not cover ``connect()`` to a path socket). Required at ``bwrap`` and
    ``landlock`` (:class:`IsolationUnavailable` where the kernel refuses it); at reduced isolation used
    where it works.
    """
    from datadojo.sandbox import seccomp

    ok, why = seccomp.available()
    if not ok:
        if level == "reduced":
            return None
        raise IsolationUnavailable(f"isolation {level!r} needs a seccomp filter for its cells, but {why}")
    return {"deny_unix_sockets": level != "bwrap"}


def bwrap_server_argv(root: str, extra_paths: list[str], tmp_mb: int, python: list[str]) -> list[str]:
    """The ``bwrap`` command around a pool's fork server (:mod:`datadojo.sandbox.forkserver`).

    The namespaces and the read-only system tree of a bubblewrap worker, a private ``/tmp`` of
    ``tmp_mb``, and the pool's workspace root ``root`` bound read-write at its own path: workspaces made
    there later (one per sandbox) appear inside, at the paths the harness uses. No ``--clearenv``: the
    server's environment is the short one the harness passes (each worker gets its own on fork).
    """
    exe = _bwrap()
    if exe is None:  # pragma: no cover - resolve_isolation checked it
        raise IsolationUnavailable("bwrap disappeared")
    # See _FORK_SERVER_CAPS: each forked worker makes its own mount, IPC and network namespaces (a private
    # /tmp, its own loopback) and drops all but CAP_SYS_PTRACE before it reads its settings. Without root
    # it makes its own user namespace first (per-sandbox process counts) and forbids nested ones itself,
    # so the server may not be started with --disable-userns (which would forbid the worker's own).
    argv = [exe, *_namespace_args(disable_userns=False)]
    for cap in _FORK_SERVER_CAPS:
        argv += ["--cap-add", cap]
    argv += ["--size", str(tmp_mb * 1024 * 1024), "--perms", "1777", "--tmpfs", "/tmp"]
    argv += _filesystem_args(python_paths(extra_paths))
    real = os.path.realpath(root)
    for parent in reversed(Path(real).parents):
        if str(parent) not in ("/", "/tmp", "/usr", "/etc") and not _covered(str(parent), ["/usr"]):
            argv += ["--perms", "0755", "--dir", str(parent)]
    argv += ["--bind", real, real, "--remount-ro", "/", "--chdir", "/", "--", *python]
    return argv


def landlock_paths(workspace: Workspace, paths: list[str]) -> dict[str, list[str]]:
    """The trees a Landlock-confined cell may use: what the bubblewrap mode binds, at host paths."""
    read_exec = ["/usr", *[top for top in _TOP_DIRS if os.path.isdir(top)], *paths]
    read = [f"/etc/{name}" for name in _ETC_FILES if os.path.exists(f"/etc/{name}")]
    read += ["/sys/devices/system/cpu", str(workspace.inputs)]
    read_write = [str(workspace.path), str(workspace.root / "tmp")]
    return {"read_exec": read_exec, "read": read, "read_write": read_write}


def _filesystem_args(paths: list[str]) -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in _TOP_DIRS:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for name in _ETC_FILES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    made: set[str] = {"/", "/usr", "/etc", "/tmp"}
    for p in paths:
        if _covered(p, ["/usr"]):
            continue
        # bubblewrap creates missing parent directories 0700 (root-only) in its privileged mode; make
        # them traversable by the cells' uid first.
        for parent in reversed(Path(p).parents):
            if str(parent) not in made:
                made.add(str(parent))
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", p, p]
    args += ["--proc", "/proc", "--dev", "/dev"]
    return args

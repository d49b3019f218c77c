"""Landlock: unprivileged, kernel-enforced confinement of files, TCP and signals (Linux ≥ 5.13).

Where bubblewrap cannot make namespaces (Docker's and Kubernetes' default profiles, where most RL runs),
Landlock still works: its three system calls are allowed by the default seccomp profiles of Docker and
Podman, it needs no privilege, and it binds root too (no capability bypasses it). A process restricts
itself, irreversibly, and every process it forks or execs inherits the restriction.

What this module builds (:func:`build_ruleset`, once per worker) and applies (:func:`restrict_self`, in
every forked cell process before it runs anything of the agent's):

* **files** (ABI ≥ 1): every file-system right the kernel knows is *handled*, so everything is denied but
  the rules: read + execute below the Python prefix, ``sys.path``, ``/usr`` and the top-level library
  directories; read of the few ``/etc`` files bubblewrap binds and the CPU topology in ``/sys``; read of
  the inputs; read-write (all rights) of the workspace and the sandbox's private temp folder; read-write
  of ``/dev/null`` & co. ``/proc`` is not granted (another process's ``environ``/``root`` are additionally
  guarded by Landlock's ptrace rule: a confined process cannot ptrace-access one outside its domain).
  Cross-directory links and renames (``REFER``) are denied unless both ends allow them (ABI ≥ 2); opening
  with ``O_TRUNC`` needs a write right (ABI ≥ 3); device ``ioctl`` is handled (ABI ≥ 5).
* **TCP** (ABI ≥ 4): ``bind`` and ``connect`` are handled with no rule: no TCP at all. UDP and other
  protocols are not covered by Landlock (see the security matrix in ``docs/sandbox.md``).
* **scopes** (ABI ≥ 6): abstract UNIX sockets and signals outside the domain (the worker, the harness,
  other processes of the host) are denied.

Why direct system calls through :mod:`ctypes`: no Python binding is packaged by the distributions and
kept in step with the kernel's ABI (the PyPI ones are small, mostly unmaintained, and some shell out);
the interface is three system calls and three structures, stable by the kernel's ABI promise. The
numbers 444/445/446 are the same on x86_64 and aarch64 (the generic syscall table); other architectures
report Landlock as unavailable. ``PR_SET_NO_NEW_PRIVS`` is required before ``landlock_restrict_self``
for an unprivileged caller, and harmless for root.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from datadojo.errors import DataDojoError, ExitCode

__all__ = [
    "Coverage",
    "LandlockError",
    "abi_version",
    "build_ruleset",
    "drop_capabilities",
    "effective_capabilities",
    "restrict_self",
]

_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446), "arm64": (444, 445, 446)}
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Access rights for files (include/uapi/linux/landlock.h).
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

#: Rights that may be granted on a file (not a directory) rule.
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
_READ = READ_FILE | READ_DIR
_READ_EXEC = _READ | EXECUTE


class LandlockError(DataDojoError, OSError):
    """Landlock is unavailable here, or building/applying the ruleset failed."""

    exit_code = ExitCode.SANDBOX


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None


_LIBC = _libc()


def _numbers() -> tuple[int, int, int] | None:
    return _SYSCALLS.get(platform.machine())


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is absent, disabled or this arch is unknown."""
    nums = _numbers()
    if _LIBC is None or nums is None:
        return 0
    res = _LIBC.syscall(
        ctypes.c_long(nums[0]), None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
    )
    return int(res) if res > 0 else 0


def _fs_rights(abi: int) -> int:
    rights = (MAKE_SYM << 1) - 1  # ABI 1: bits 0..12
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


@dataclass
class Coverage:
    """What one ruleset enforces, as recorded in the worker's ready message and the run summary."""

    abi: int
    files: bool = True
    tcp: bool = False
    scope_signal: bool = False
    scope_abstract_unix: bool = False
    rules: int = 0
    skipped: list[str] = field(default_factory=list)  # paths named but absent here

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _errno_error(what: str) -> LandlockError:
    err = ctypes.get_errno()
    return LandlockError(err, f"{what}: {os.strerror(err)}")


def build_ruleset(
    *,
    read_exec: Iterable[str],
    read: Iterable[str],
    read_write: Iterable[str],
    devices: Iterable[str] = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"),
) -> tuple[int, Coverage]:
    """Create the ruleset (an fd, inherited by forks) for the given trees; raises :class:`LandlockError`.

    Paths that do not exist are skipped and listed in :attr:`Coverage.skipped`.
    """
    abi = abi_version()
    nums = _numbers()
    if abi < 1 or nums is None or _LIBC is None:
        raise LandlockError(
            0, "Landlock is not available on this kernel (needs Linux >= 5.13 with lsm=landlock)"
        )
    handled_fs = _fs_rights(abi)
    attr = _RulesetAttr(handled_access_fs=handled_fs)
    size = 8
    cov = Coverage(abi=abi)
    if abi >= 4:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
        cov.tcp = True
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = 24
        cov.scope_signal = cov.scope_abstract_unix = True
    fd = _LIBC.syscall(ctypes.c_long(nums[0]), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise _errno_error("landlock_create_ruleset")
    try:
        groups = [
            (read_exec, _READ_EXEC),
            (read, _READ),
            (read_write, handled_fs),
            (devices, READ_FILE | WRITE_FILE),
        ]
        for paths, rights in groups:
            for path in paths:
                if _add_rule(fd, path, rights & handled_fs, nums[1]):
                    cov.rules += 1
                else:
                    cov.skipped.append(path)
    except BaseException:
        os.close(fd)
        raise
    return fd, cov


def _add_rule(ruleset: int, path: str, rights: int, nr: int) -> bool:
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        beneath = _PathBeneathAttr(allowed_access=rights, parent_fd=target)
        res = _LIBC.syscall(  # type: ignore[union-attr]
            ctypes.c_long(nr),
            ctypes.c_int(ruleset),
            ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.byref(beneath),
            ctypes.c_uint32(0),
        )
        if res != 0:
            raise _errno_error(f"landlock_add_rule({path!r})")
    finally:
        os.close(target)
    return True


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


_CAP_SETPCAP = 8
_EINVAL = 22


def effective_capabilities() -> int:
    """The calling process's effective capabilities as a bit mask (bit ``n``: capability ``n``)."""
    if _LIBC is None:
        raise LandlockError(0, "no libc")
    header = _CapHeader(version=0x20080522, pid=0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    if _LIBC.capget(ctypes.byref(header), data) != 0:
        raise _errno_error("capget")
    return int(data[0].effective) | int(data[1].effective) << 32


def drop_capabilities(keep: int = 0) -> None:
    """Clear every capability of the calling process but ``keep`` (a bit mask), the bounding set first.

    A root cell at the Landlock level clears all: Landlock binds root's file and TCP access, but a root
    process with capabilities could still load a kernel module from memory, reboot, open raw sockets or
    change the clock; without them it is an ordinary user that happens to have uid 0.
    ``PR_SET_NO_NEW_PRIVS`` (set by :func:`restrict_self`) keeps exec from granting them back. A forked
    worker keeps what it held when forked less what it needed for its namespaces
    (:mod:`datadojo.sandbox.worker.namespaces`).

    Changing the bounding set needs ``CAP_SETPCAP``: without it (a cell without root) nothing there can be
    dropped, and nothing in it can be used either; with it, a refusal is an error.
    """
    if _LIBC is None:
        raise LandlockError(0, "no libc")
    strict = bool(effective_capabilities() >> _CAP_SETPCAP & 1)
    for cap in range(64):
        if keep >> cap & 1:
            continue
        if _LIBC.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            if ctypes.get_errno() == _EINVAL:  # past the last capability of this kernel
                break
            if strict:
                raise _errno_error(f"drop capability {cap} from the bounding set")
    if keep:
        for cap in range(64):  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER (EINVAL past the last: ignored)
            if not keep >> cap & 1:
                _LIBC.prctl(47, 3, cap, 0, 0)
    else:
        _LIBC.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    header = _CapHeader(version=0x20080522, pid=0)
    data = (_CapData * 2)()
    if _LIBC.capget(ctypes.byref(header), data) != 0:
        raise _errno_error("capget")
    for i in (0, 1):
        mask = keep >> (32 * i) & 0xFFFFFFFF
        data[i].effective &= mask
        data[i].permitted &= mask
        data[i].inheritable &= mask
    if _LIBC.capset(ctypes.byref(header), data) != 0:
        raise _errno_error("capset")


def restrict_self(ruleset: int) -> None:
    """Confine the calling process (and all it starts) by ``ruleset``; raises :class:`LandlockError`."""
    nums = _numbers()
    if _LIBC is None or nums is None:
        raise LandlockError(0, "Landlock is not available here")
    if _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise _errno_error("prctl(PR_SET_NO_NEW_PRIVS)")
    if _LIBC.syscall(ctypes.c_long(nums[2]), ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
        raise _errno_error("landlock_restrict_self")

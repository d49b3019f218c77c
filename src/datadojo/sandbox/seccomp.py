"""A seccomp filter for cell processes: no System V or POSIX message-queue IPC, optionally no ``AF_UNIX`` sockets.

Why: a pool hands one worker to trajectory after trajectory, and runs siblings side by side. System V IPC
objects (shared memory segments, message queues, semaphore sets) and POSIX message queues live in the
kernel's IPC namespace, not in any file system Landlock or a mount namespace controls: under bubblewrap a
segment written by one trajectory outlived the reset into the next one (the worker's IPC namespace lives as
long as the worker), and at the Landlock level siblings (and the host) shared one namespace, so two
running samples of one task could talk, and segments outlived the harness. An IPC namespace per trajectory
would need ``CAP_SYS_ADMIN`` in the worker at every reset (bubblewrap's privileged mode keeps only
``CAP_SETUID``/``CAP_SETGID``/``CAP_KILL``) and cannot exist at all where the Landlock level is used (no
namespaces). A seccomp filter works at every level, needs no privilege (``PR_SET_NO_NEW_PRIVS`` first),
costs one small BPF program per cell process, and leaves nothing to clean up: the calls fail with
``EPERM``, so no such object is ever made or reached. Data-analysis code does not use these calls (NumPy,
pandas, scikit-learn, ``multiprocessing``'s locks and queues use POSIX semaphores and pipes, which are
files in ``/dev/shm`` and not these system calls).

``deny_unix_sockets`` (the Landlock and reduced levels, where the host's file system is in view): also
``socket(AF_UNIX, ...)`` fails with ``EPERM``. Landlock does not cover ``connect()`` to a path socket, so
a world-writable socket of the host (a Docker socket made ``0666``, an X server, a Ray raylet) would be in
reach; ``socketpair()`` (what ``multiprocessing.Pipe`` uses) stays allowed, since its two ends are
connected only to each other. Seccomp cannot read the address a ``connect()`` names, so the socket itself
is refused. ``io_uring_setup`` is refused too: an io_uring makes sockets without the ``socket`` system call.

Built without libseccomp: a classic BPF program through ``prctl(PR_SET_SECCOMP)`` by :mod:`ctypes`. It
first checks the architecture field, so a call through another ABI of the same CPU (``int 0x80`` i386
calls, x32 numbers on x86_64: the i386 ``ipc()`` multiplexer would otherwise bypass the list) is refused
too. System call numbers for x86_64 and aarch64 (the generic table); on other architectures
:func:`available` says why not and the levels that need the filter refuse to start.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import struct

from datadojo.errors import DataDojoError

__all__ = ["DENIED_SYSCALLS", "SeccompError", "available", "build_program", "install", "prepare"]

#: (AUDIT_ARCH_*, the System V IPC and POSIX mq system calls, socket) per architecture.
_ARCH: dict[str, tuple[int, dict[str, int], int]] = {
    "x86_64": (
        0xC000003E,
        {
            "shmget": 29,
            "shmat": 30,
            "shmctl": 31,
            "semget": 64,
            "semop": 65,
            "semctl": 66,
            "shmdt": 67,
            "msgget": 68,
            "msgsnd": 69,
            "msgrcv": 70,
            "msgctl": 71,
            "semtimedop": 220,
            "mq_open": 240,
            "mq_unlink": 241,
            "mq_timedsend": 242,
            "mq_timedreceive": 243,
            "mq_notify": 244,
            "mq_getsetattr": 245,
            "io_uring_setup": 425,
        },
        41,
    ),
    "aarch64": (
        0xC00000B7,
        {
            "mq_open": 180,
            "mq_unlink": 181,
            "mq_timedsend": 182,
            "mq_timedreceive": 183,
            "mq_notify": 184,
            "mq_getsetattr": 185,
            "msgget": 186,
            "msgctl": 187,
            "msgrcv": 188,
            "msgsnd": 189,
            "semget": 190,
            "semctl": 191,
            "semtimedop": 192,
            "semop": 193,
            "shmget": 194,
            "shmctl": 195,
            "shmat": 196,
            "shmdt": 197,
            "io_uring_setup": 425,
        },
        198,
    ),
}
_ARCH["arm64"] = _ARCH["aarch64"]
#: The names of the calls the filter refuses (the same set on every supported architecture).
#: ``io_uring_setup`` too: an io_uring submits ``socket``/``connect`` operations that never pass through
#: the filter's ``socket`` rule (Docker's default profile refuses it for the same reason).
DENIED_SYSCALLS = tuple(sorted(_ARCH["x86_64"][1]))

_X32_BIT = 0x40000000
_AF_UNIX = 1
_EPERM = 1
# classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h)
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16  # struct seccomp_data (args[0]'s low half: little-endian)
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2


class SeccompError(DataDojoError, OSError):
    """The filter could not be installed (or this architecture is not supported)."""


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


@functools.lru_cache(maxsize=4)
def build_program(machine: str, *, deny_unix_sockets: bool) -> bytes:
    """The BPF program (``struct sock_filter[]`` bytes) for ``machine``; raises :class:`SeccompError`.

    Layout: refuse a foreign architecture; (x86_64) refuse x32 numbers; refuse each listed call; then
    (optionally) ``socket`` whose first argument is ``AF_UNIX``; allow the rest. Every jump is forward,
    to the one ``EPERM`` return at the end.
    """
    if machine not in _ARCH:
        raise SeccompError(0, f"no seccomp filter for the {machine!r} architecture")
    arch, calls, nr_socket = _ARCH[machine]
    numbers = sorted(calls.values())
    prog: list[list[int]] = []  # [code, jt, jf, k]; jumps to the final EPERM return are patched below
    deny_jumps: list[tuple[int, str]] = []  # (index, "jt"|"jf")

    def add(code: int, jt: int = 0, jf: int = 0, k: int = 0) -> int:
        prog.append([code, jt, jf, k])
        return len(prog) - 1

    add(_LD_W_ABS, k=_OFF_ARCH)
    deny_jumps.append((add(_JEQ_K, 0, 0, arch), "jf"))  # another architecture's call: refused
    add(_LD_W_ABS, k=_OFF_NR)
    if machine == "x86_64":
        deny_jumps.append((add(_JGE_K, 0, 0, _X32_BIT), "jt"))
    for nr in numbers:
        deny_jumps.append((add(_JEQ_K, 0, 0, nr), "jt"))
    if deny_unix_sockets:
        add(_JEQ_K, 0, 2, nr_socket)  # not socket(): skip the two below
        add(_LD_W_ABS, k=_OFF_ARG0)
        deny_jumps.append((add(_JEQ_K, 0, 0, _AF_UNIX), "jt"))
    add(_RET_K, k=_RET_ALLOW)
    deny = add(_RET_K, k=_RET_ERRNO | _EPERM)
    for index, field in deny_jumps:
        offset = deny - index - 1
        if offset > 255:  # pragma: no cover - the program is ~25 instructions
            raise SeccompError(0, "seccomp program too long for a short jump")
        prog[index][1 if field == "jt" else 2] = offset
    return b"".join(_insn(*row) for row in prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _load_libc() -> ctypes.CDLL | None:
    # The process's own symbols (libc among them), loaded at import: in the worker, before any fork, so
    # that no cell process pays for a lookup (``ctypes.util.find_library`` runs ``ldconfig``: ~12 ms).
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


_LIBC = _load_libc()


#: Programs ready to install, by ``deny_unix_sockets``: (the buffer, the ``sock_fprog`` pointing at it).
_READY: dict[bool, tuple[ctypes.Array[ctypes.c_char], _SockFprog]] = {}


def prepare(*, deny_unix_sockets: bool) -> None:
    """Build the program once in the worker (raises :class:`SeccompError` here, at start-up, on an
    unsupported architecture), so that every forked cell process installs it with two ``prctl`` calls
    and no Python allocation of its own (each would copy shared pages: ~0.4 ms per process)."""
    if deny_unix_sockets in _READY:
        return
    program = build_program(platform.machine(), deny_unix_sockets=deny_unix_sockets)
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len=len(program) // 8, filter=ctypes.cast(buf, ctypes.c_void_p))
    _READY[deny_unix_sockets] = (buf, fprog)
    if _LIBC is not None:
        _ = _LIBC.prctl  # the function pointer, resolved and cached here rather than in every child


def install(*, deny_unix_sockets: bool) -> None:
    """Install the filter on the calling process (inherited by all it forks or execs; irreversible).

    Sets ``PR_SET_NO_NEW_PRIVS`` first (required without ``CAP_SYS_ADMIN``; Landlock sets it too).
    """
    libc = _LIBC
    if libc is None:
        raise SeccompError(0, "no libc")
    prepare(deny_unix_sockets=deny_unix_sockets)
    _buf, fprog = _READY[deny_unix_sockets]
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise SeccompError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise SeccompError(err, f"prctl(PR_SET_SECCOMP): {os.strerror(err)}")


@functools.lru_cache(maxsize=1)
def available() -> tuple[bool, str]:
    """Whether the filter can be installed here, and why not (tried once per process, in a forked child).

    A container runtime whose own seccomp profile forbids ``prctl(PR_SET_SECCOMP)`` (rare: Docker's and
    Podman's default profiles allow it) makes this false.
    """
    if platform.machine() not in _ARCH:
        return False, f"no seccomp filter for the {platform.machine()!r} architecture"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 1
        try:
            install(deny_unix_sockets=True)
            code = 0
        finally:
            os._exit(code)
    _pid, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return False, "prctl(PR_SET_SECCOMP) was refused here"
    return True, ""

"""A forked worker's own mount, IPC and network namespaces under a bubblewrap fork server (private ``/tmp``).

A worker started on its own under bubblewrap gets a private, size-limited ``/tmp`` (a tmpfs of its own
bubblewrap sandbox). A worker forked by the pool's fork server shares the server's one bubblewrap sandbox
with its siblings, so without this module their ``/tmp`` would be one folder (and absolute ``/tmp/...``
paths were denied by Landlock instead). Here the worker, right after the fork and before it reads its
settings or runs anything of the agent's, makes its own mount, IPC and network namespaces:

0. when the harness is not root (``PrivateTmp.own_user``): a user namespace of its own, mapping only its
   uid and gid, in which none can be made (see :func:`_enter_own_user_namespace`: ``RLIMIT_NPROC`` counts
   per user namespace, and the server's one is shared by every sibling);
1. ``unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET)``, ``lo`` up (as bubblewrap does), then every
   mount private (nothing propagates back);
2. the mounts beneath ``/tmp`` that it must keep (the pool's workspace folder and any Python path that
   lives under ``/tmp``, e.g. a virtual environment made there) are opened as ``O_PATH`` handles;
3. a fresh tmpfs of ``tmp_mb`` MiB (mode 1777) is mounted on ``/tmp``, and another on ``/dev/shm`` (POSIX
   semaphores and shared memory, which ``multiprocessing`` uses);
4. the kept mounts are bound back at their paths, with their read-only flag; of the pool's workspace
   folder only this sandbox's own folder comes back (the siblings' folders are not even visible), bound
   read-only but for its ``workspace`` and ``tmp`` folders (the cells may write all of ``/tmp``, so
   read-only mounts, not Landlock, keep ``../``, the worker's log and the hard-linked inputs unwritable);
   the folders made on the tmpfs to hold these mounts are read-only too (nothing planted there survives
   the wipe between trajectories);
5. ``CAP_SYS_ADMIN``, ``CAP_NET_ADMIN`` (and ``CAP_SETPCAP``, which the bounding-set drop needs) are
   dropped from every capability set, the bounding set included, so neither the worker nor anything it
   forks can mount or configure a network again: the worker is left with what a bubblewrap worker of its
   own has (after step 0, only what it held when forked, less these three).

The server is given these three capabilities for this alone (:func:`datadojo.sandbox.isolation.bwrap_server_argv`);
it never runs agent code. The System V IPC objects of one sandbox are invisible to its siblings from step 1
on (Landlock does not cover them), and so is a UDP or TCP socket on its loopback. Only the standard
library: this runs in the forked worker.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

from datadojo.sandbox.landlock import drop_capabilities, effective_capabilities

__all__ = ["PrivateTmp", "enter_own_namespaces", "mounts_below"]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_PR_SET_DUMPABLE = 4
_CAP_SETPCAP = 8
_CAP_NET_ADMIN = 12
_CAP_SYS_ADMIN = 21
#: What the fork server holds for this module alone and every worker drops (SETPCAP last: it allows the
#: bounding-set drop).
_DROPPED = (_CAP_SYS_ADMIN, _CAP_NET_ADMIN, _CAP_SETPCAP)
_MS_NOATIME = 1024
_MS_NODIRATIME = 2048
_MS_RELATIME = 1 << 21
_MS_STRICTATIME = 1 << 24
#: Per-mount options as mountinfo names them. A remount must repeat them: in a user namespace (bubblewrap
#: without root) the ones inherited from outside are locked, and dropping one is refused (EPERM).
_FLAGS = {
    "ro": _MS_RDONLY,
    "nosuid": _MS_NOSUID,
    "nodev": _MS_NODEV,
    "noexec": _MS_NOEXEC,
    "noatime": _MS_NOATIME,
    "nodiratime": _MS_NODIRATIME,
    "relatime": _MS_RELATIME,
    "strictatime": _MS_STRICTATIME,
}


@dataclass(frozen=True)
class PrivateTmp:
    """What the harness asks of a forked worker: its ``/tmp`` size and its own folder in the pool's root."""

    tmp_mb: int
    sandbox_root: str
    workspace: str
    #: The harness is not root (bubblewrap made one user namespace for the server): a user namespace of
    #: the worker's own first, so that ``RLIMIT_NPROC`` counts this sandbox's processes alone.
    own_user: bool = False


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _unescape(field: str) -> str:
    """Mount points in ``/proc/self/mountinfo`` escape space, tab, newline and backslash as ``\\ooo``."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts_below(top: str, mountinfo: str) -> list[tuple[str, int]]:
    """The outermost mount points strictly beneath ``top`` and their flags (``MS_RDONLY`` …), in order.

    A mount beneath another listed one comes back with it (the bind is recursive), so only the outermost
    are returned.
    """
    found: list[tuple[str, int]] = []
    prefix = top.rstrip("/") + "/"
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 6:
            continue
        point = _unescape(fields[4])
        if not point.startswith(prefix):
            continue
        flags = 0
        for option in fields[5].split(","):
            flags |= _FLAGS.get(option, 0)
        found.append((point, flags))
    outer = [
        (p, f) for p, f in found if not any(p != q and p.startswith(q.rstrip("/") + "/") for q, _ in found)
    ]
    seen: set[str] = set()
    out = []
    for p, f in outer:  # a path mounted twice: the last mount is the one visible
        if p in seen:
            out = [(q, g) for q, g in out if q != p]
        seen.add(p)
        out.append((p, f))
    return out


def _mount_flags(point: str) -> int | None:
    """The flags of the mount visible at ``point`` now (the last one listed there); None: none is."""
    flags = None
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
        for line in fh:
            fields = line.split()
            if len(fields) >= 6 and _unescape(fields[4]) == point:
                flags = 0
                for option in fields[5].split(","):
                    flags |= _FLAGS.get(option, 0)
    return flags


def _bind(libc: ctypes.CDLL, fd: int, target: str, flags: int) -> None:
    """Bind the tree ``fd`` names at ``target``; read-only when ``flags`` says so (its other options kept)."""
    _check(
        libc.mount(f"/proc/self/fd/{fd}".encode(), target.encode(), None, _MS_BIND | _MS_REC, None),
        f"bind {target}",
    )
    if flags & _MS_RDONLY:
        remount = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | (_mount_flags(target) or 0) | flags
        _check(libc.mount(None, target.encode(), None, remount, None), f"remount {target} read-only")


def _make_mount_point(path: str, is_dir: bool) -> None:
    parent = os.path.dirname(path)
    os.makedirs(parent, mode=0o711, exist_ok=True)
    if is_dir:
        os.makedirs(path, mode=0o711, exist_ok=True)
    elif not os.path.exists(path):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))


def _loopback_up() -> None:
    """Bring ``lo`` of the new network namespace up (as bubblewrap does for a worker of its own)."""
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        fcntl.ioctl(sock.fileno(), _SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", _IFF_UP))


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)


def _enter_own_user_namespace(libc: ctypes.CDLL) -> int | None:
    """A user namespace of this worker's own, mapping only its uid and gid, in which none can be made.

    Without root, bubblewrap makes one user namespace for the fork server, and ``RLIMIT_NPROC`` counts
    the processes of a user per user namespace: every sibling's worker and cells would count against
    each cell's ``max_procs`` (a pool of 32 could not start a thread). A worker started on its own has
    bubblewrap's namespace to itself; a forked one makes its own here, as bubblewrap would. Nested user
    namespaces are then forbidden as bubblewrap's ``--disable-userns`` does it: the namespace's
    ``user.max_user_namespaces`` set to 0 (written while ``/proc/sys`` is writable in a mount namespace
    that is still the server's user namespace's; the caller makes it read-only again).

    Returns the flags of ``/proc/sys`` when it is a read-only mount of its own (to be made so again).
    """
    uid, gid = os.geteuid(), os.getegid()
    _check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS) before the user namespace")
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make / private")
    sys_flags = _mount_flags("/proc/sys")
    if sys_flags is not None and sys_flags & _MS_RDONLY:
        rw = _MS_REMOUNT | _MS_BIND | (sys_flags & ~_MS_RDONLY)
        _check(libc.mount(None, b"/proc/sys", None, rw, None), "remount /proc/sys read-write")
    _check(libc.unshare(_CLONE_NEWUSER), "unshare(CLONE_NEWUSER)")
    # The worker is not dumpable (the fork server made it so), and /proc/self of a process that is not
    # is owned by root: dumpable just long enough to write its own maps.
    _check(libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE, 1)")
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1\n")
        _write("/proc/self/gid_map", f"{gid} {gid} 1\n")
    finally:
        _check(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE, 0)")
    _write("/proc/sys/user/max_user_namespaces", "0")
    return sys_flags if sys_flags is not None and sys_flags & _MS_RDONLY else None


def _seal_sandbox_root(libc: ctypes.CDLL, want: PrivateTmp) -> None:
    """This sandbox's folder read-only but for its workspace and temp folder (the inputs stay read-only).

    The cells may write all of the private ``/tmp``, and the sandbox's folder may lie beneath it (the
    pool's folder is in the system temp folder by default), where Landlock's grant of ``/tmp`` covers it
    too; read-only mounts, not the ruleset, then keep ``../``, the worker's log and the hard-linked inputs
    unwritable, wherever the folder lies.
    """
    root = want.sandbox_root.rstrip("/")
    writable = [p for p in (want.workspace, f"{root}/tmp") if p and os.path.isdir(p)]
    fds = [os.open(p, os.O_PATH | os.O_CLOEXEC) for p in [root, *writable]]
    try:
        _bind(libc, fds[0], root, _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
        for fd, path in zip(fds[1:], writable, strict=True):
            _bind(libc, fd, path, 0)
    finally:
        for fd in fds:
            os.close(fd)


def _top_names(points: list[str]) -> list[str]:
    """The names of the entries of ``/tmp`` that hold ``points`` (paths beneath ``/tmp``)."""
    return sorted({p[len("/tmp/") :].split("/", 1)[0] for p in points})


def _seal_skeleton(libc: ctypes.CDLL, points: list[str]) -> None:
    """The folders made on the fresh tmpfs to hold the bound-back mounts, read-only (their mounts unchanged).

    They are made by the worker as its own uid, which is the cells' uid too where bubblewrap runs in a
    user namespace (a user without root). Writable, they would let a cell plant a file that the wipe
    between trajectories keeps (it never walks into them), so the next task in this sandbox would find
    it. Each top folder is bound onto itself, recursively, and only that bind is made read-only.
    """
    for top in sorted({f"/tmp/{name}" for name in _top_names(points)} - set(points)):
        fd = os.open(top, os.O_PATH | os.O_CLOEXEC)
        try:
            _bind(libc, fd, top, _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
        finally:
            os.close(fd)


def enter_own_namespaces(want: PrivateTmp) -> list[str]:
    """Steps 1-5 of the module docstring; the names of ``/tmp``'s entries that hold bound-back mounts.

    Raises :class:`OSError` naming the step that failed (the worker then exits and the harness reports
    its log).
    """
    libc = _libc()
    held = effective_capabilities()
    sys_flags = _enter_own_user_namespace(libc) if want.own_user else None
    _check(
        libc.unshare(_CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWNET),
        "unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET)",
    )
    _loopback_up()
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make / private")
    if sys_flags is not None:  # read-only again (it was); only making a mount stricter is allowed here
        ro = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | (_mount_flags("/proc/sys") or 0) | sys_flags
        _check(libc.mount(None, b"/proc/sys", None, ro, None), "remount /proc/sys read-only")
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as fh:
        below = mounts_below("/tmp", fh.read())
    root = want.sandbox_root.rstrip("/")
    keep: list[tuple[str, int, int, bool]] = []  # (path, fd, flags, is_dir)
    try:
        for point, flags in below:
            if root.startswith(point.rstrip("/") + "/") or root == point:
                point = root  # the pool's folder: of it, this sandbox's own folder alone
            fd = os.open(point, os.O_PATH | os.O_CLOEXEC)  # opened in the new namespace (bind needs that)
            keep.append((point, fd, flags, os.path.isdir(point)))
        size = max(1, want.tmp_mb) * 1024 * 1024
        _check(
            libc.mount(
                b"tmpfs", b"/tmp", b"tmpfs", _MS_NOSUID | _MS_NODEV, f"size={size},mode=1777".encode()
            ),
            "mount a private tmpfs on /tmp",
        )
        for point, fd, flags, is_dir in keep:
            _make_mount_point(point, is_dir)
            _bind(libc, fd, point, flags)
        # a private /dev/shm too (POSIX semaphores: multiprocessing), emptied between trajectories
        _check(
            libc.mount(
                b"tmpfs", b"/dev/shm", b"tmpfs", _MS_NOSUID | _MS_NODEV, f"size={size},mode=1777".encode()
            ),
            "mount a private tmpfs on /dev/shm",
        )
    finally:
        for _point, fd, _flags, _is_dir in keep:
            os.close(fd)
    points = [point for point, _fd, _flags, _is_dir in keep]
    _seal_skeleton(libc, points)
    _seal_sandbox_root(libc, want)
    # what it held when forked (a user namespace of its own gave it every capability there), less these
    drop_capabilities(keep=held & ~sum(1 << cap for cap in _DROPPED))
    return _top_names(points)

"""Cells that try to pass a secret from one trajectory to another through kernel IPC (issue 38, finding 2).

System V IPC objects (shared memory segments, message queues; semaphores are the same mechanism) and
POSIX message queues live in the kernel's IPC namespace, which no file-system rule covers: a trajectory
that leaves a segment behind, or a sibling running beside it, is a channel a policy under RL can learn to
use. :func:`ipc_probe_cells` gives, per channel, a writer's cell and a reader's cell (the reader looks the
object up by its key or name and also tries the first ids, which are small and guessable); the secret
reaching the reader's output is the verdict, judged by the harness, not the writer's own word.
Used by ``tests/sandbox/test_sandbox_ipc.py`` and ``benchmarks/security.py``.
"""

from __future__ import annotations

import ctypes
import os
import secrets
from dataclasses import dataclass

__all__ = ["IpcChannel", "ipc_probe_cells"]

_LIBC = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
"""


@dataclass(frozen=True)
class IpcChannel:
    """A System V key, a POSIX mq name and the secret to pass; what the host side checks and cleans."""

    key: int
    name: str
    secret: str

    @classmethod
    def new(cls) -> IpcChannel:
        return cls(
            key=0x5EED0000 + secrets.randbelow(0xFFFF),
            name=f"/datadojo-probe-{secrets.token_hex(4)}",
            secret="IPCSECRET-" + secrets.token_hex(6),
        )

    def host_holds(self) -> list[str]:
        """Which of the writer's objects exist in the calling process's IPC namespace (the host's)."""
        libc = ctypes.CDLL(None, use_errno=True)
        held = []
        if libc.shmget(self.key, 0, 0) >= 0:
            held.append("sysv shm")
        if libc.msgget(self.key, 0) >= 0:
            held.append("sysv msg")
        mq = libc.mq_open(self.name.encode(), os.O_RDONLY | os.O_NONBLOCK)
        if mq >= 0:
            libc.mq_close(mq)
            held.append("posix mq")
        return held

    def host_remove(self) -> None:
        """Remove from the host what a writer left there (an unconfined level makes it in the host's)."""
        libc = ctypes.CDLL(None, use_errno=True)
        sid = libc.shmget(self.key, 0, 0)
        if sid >= 0:
            libc.shmctl(sid, 0, None)  # IPC_RMID
        queue = libc.msgget(self.key, 0)
        if queue >= 0:
            libc.msgctl(queue, 0, None)
        libc.mq_unlink(self.name.encode())


def ipc_probe_cells(channel: IpcChannel) -> dict[str, tuple[str, str]]:
    """Per channel (``sysv shm``, ``sysv msg``, ``posix mq``): the writer's cell and the reader's cell.

    The reader prints ``found <bytes>`` for what it read; the writer prints the call's result and errno.
    """
    key, name, data = channel.key, channel.name, channel.secret.encode()
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

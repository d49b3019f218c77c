"""The seccomp program itself, run by a small classic-BPF interpreter for both architectures it supports.

Only x86_64 runs here, so the aarch64 program (other syscall numbers) is checked by evaluating it: every
listed call and ``socket(AF_UNIX)`` refused with ``EPERM``, everything else allowed, a call through
another architecture (i386 ``int 0x80`` on x86_64: its ``ipc()`` multiplexer would bypass the list) or
the x32 ABI refused. Numbers from the kernel's tables (``arch/x86/entry/syscalls/syscall_64.tbl``,
``include/uapi/asm-generic/unistd.h``), not from the module.
"""

from __future__ import annotations

import struct

import pytest

from datadojo.sandbox.seccomp import SeccompError, build_program

ALLOW = 0x7FFF0000
EPERM = 0x00050000 | 1
X86_64, AARCH64, I386 = 0xC000003E, 0xC00000B7, 0x40000003
# name: (x86_64, aarch64)
CALLS = {
    "shmget": (29, 194),
    "shmat": (30, 196),
    "shmctl": (31, 195),
    "shmdt": (67, 197),
    "semget": (64, 190),
    "semop": (65, 193),
    "semctl": (66, 191),
    "semtimedop": (220, 192),
    "msgget": (68, 186),
    "msgsnd": (69, 189),
    "msgrcv": (70, 188),
    "msgctl": (71, 187),
    "mq_open": (240, 180),
    "mq_unlink": (241, 181),
    "mq_timedsend": (242, 182),
    "mq_timedreceive": (243, 183),
    "mq_notify": (244, 184),
    "mq_getsetattr": (245, 185),
    "io_uring_setup": (425, 425),  # its SOCKET/CONNECT operations would bypass the socket rule
}
# allowed calls: read, write, openat, socket, socketpair, connect, clone, mmap
ALLOWED = {"x86_64": (0, 1, 257, 41, 53, 42, 56, 9), "aarch64": (63, 64, 56, 198, 199, 203, 220, 222)}
SOCKET = {"x86_64": 41, "aarch64": 198}
ARCH = {"x86_64": X86_64, "aarch64": AARCH64}


def run_bpf(program: bytes, arch: int, nr: int, arg0: int = 0) -> int:
    """Evaluate a classic BPF seccomp program on one ``struct seccomp_data`` (the opcodes it uses)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    insns = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x15:  # jeq #k
            pc += jt if acc == k else jf
        elif code == 0x35:  # jge #k
            pc += jt if acc >= k else jf
        elif code == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")
        pc += 1


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_every_ipc_call_is_refused_and_the_rest_allowed(machine: str) -> None:
    column = 0 if machine == "x86_64" else 1
    for unix in (False, True):
        program = build_program(machine, deny_unix_sockets=unix)
        for name, numbers in CALLS.items():
            assert run_bpf(program, ARCH[machine], numbers[column]) == EPERM, name
        for nr in ALLOWED[machine]:
            assert run_bpf(program, ARCH[machine], nr, arg0=2) == ALLOW, nr  # arg0 2: AF_INET
        verdict = run_bpf(program, ARCH[machine], SOCKET[machine], arg0=1)  # socket(AF_UNIX, ...)
        assert verdict == (EPERM if unix else ALLOW)


def test_other_abis_of_the_cpu_are_refused() -> None:
    program = build_program("x86_64", deny_unix_sockets=False)
    assert run_bpf(program, I386, 117) == EPERM  # i386 ipc() multiplexer through int 0x80
    assert run_bpf(program, I386, 3) == EPERM  # any i386 call
    assert run_bpf(program, X86_64, 0x40000000 | 29) == EPERM  # x32 shmget
    assert run_bpf(program, AARCH64, 0) == EPERM  # a program for x86_64 fed another arch
    assert run_bpf(build_program("aarch64", deny_unix_sockets=False), X86_64, 63) == EPERM


def test_an_unknown_architecture_is_refused() -> None:
    with pytest.raises(SeccompError, match="riscv64"):
        build_program("riscv64", deny_unix_sockets=False)

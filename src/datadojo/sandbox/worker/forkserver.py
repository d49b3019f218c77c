"""The pool's fork server: one interpreter imports the preload modules once and forks every worker.

Without it each sandbox of a pool is its own interpreter start plus its own ``import pandas``: N
sandboxes cost N times that CPU, and N private copies of the same pages. The fork server does the import
once, freezes the garbage collector (so no collection in a worker ever touches, and copies, the shared
objects), and then forks one worker per request; a fork of the warm process costs a few milliseconds and
its pages stay shared copy-on-write until written.

Every per-sandbox boundary is drawn by the worker and its cell processes themselves (the dedicated uid,
the Landlock ruleset each cell process builds, the resource limits, the process sweep), so a worker forked
from a shared parent is set up exactly like one started on its own. The server itself never runs agent
code. At the bubblewrap level the server runs inside one ``bwrap`` sandbox for the whole pool (see
:mod:`datadojo.sandbox.forkserver`): its namespaces are shared by the pool's workers, and the Landlock
ruleset of every cell process keeps the sandboxes apart.

Protocol: a ``SOCK_SEQPACKET`` socket on fd 0, one JSON message per packet. The harness sends
``{"op": "spawn", "id", "env", "cwd", "private_tmp"}`` (the last only under bubblewrap: see
:mod:`.namespaces`) with three file descriptors attached (the worker's request pipe,
its reply pipe, its log; the worker then reads its settings from the request pipe, as a worker started on
its own does); the *new worker* answers ``{"op": "spawned", "id", "pid"}`` itself, first thing after the
fork, so that the harness reads its pid (in the harness's PID namespace) from the packet's
``SCM_CREDENTIALS``; a request the server cannot serve gets ``{"op": "error", "id", "message"}``. The socket closing (the harness is gone) ends the server; every
worker it forked dies with it (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import signal
import socket
import sys
import traceback
from typing import Any

from datadojo.sandbox.protocol import read_frame_fd
from datadojo.sandbox.worker.execution import warm_up
from datadojo.sandbox.worker.namespaces import PrivateTmp, enter_own_namespaces
from datadojo.sandbox.worker.procfs import PR_SET_DUMPABLE, PR_SET_PDEATHSIG, prctl
from datadojo.sandbox.worker.zygote import run_worker

__all__ = ["MAX_MESSAGE", "main", "serve"]

#: Largest control message (settings, environment and paths of one worker are a few KiB).
MAX_MESSAGE = 1 << 20


def _send(ctl: socket.socket, message: dict[str, Any]) -> None:
    ctl.send(json.dumps(message).encode("utf-8"))


def main() -> None:
    """Entry point (``python -c`` bootstrap, see :data:`datadojo.sandbox.zygote.FORK_SERVER_BOOTSTRAP`)."""
    ctl = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # anything an import prints goes to the log, never into the control socket
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    prctl(PR_SET_DUMPABLE, 0)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_IGN)
    data = ctl.recv(MAX_MESSAGE)
    if not data:
        return
    hello = json.loads(data)
    preloaded, errors = [], []
    for name in hello.get("preload", []):
        try:
            importlib.import_module(name)
            preloaded.append(name)
        except Exception as exc:
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
    warm_up(pandas=True)
    gc.collect()
    gc.freeze()  # what exists now is shared with every worker and never collected there
    # Workers are reaped by the kernel: the harness watches each one through a pidfd, not through us.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    _send(ctl, {"op": "ready", "pid": os.getpid(), "preloaded": preloaded, "errors": errors})
    serve(ctl, devnull)


def serve(ctl: socket.socket, devnull: int) -> None:
    """Fork one worker per ``spawn`` request until the control socket closes."""
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(ctl, MAX_MESSAGE, 3)
        except (ConnectionError, OSError):
            return
        if not data:
            return
        msg: dict[str, Any] = {}
        try:
            msg = json.loads(data)
            if msg.get("op") != "spawn" or len(fds) != 3:
                raise ValueError(f"expected a spawn request with 3 file descriptors, got {msg.get('op')!r}")
            pid = os.fork()
            if pid == 0:
                _worker_child(ctl, fds, msg, devnull)  # never returns
        except Exception as exc:
            with contextlib.suppress(OSError):
                _send(ctl, {"op": "error", "id": msg.get("id"), "message": f"{type(exc).__name__}: {exc}"})
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _worker_child(ctl: socket.socket, fds: list[int], msg: dict[str, Any], devnull: int) -> None:
    """In the forked worker: become what ``python -c BOOTSTRAP`` would have been, then serve."""
    code = 70
    try:
        # Announce ourselves before anything that could fail: the harness waits for this packet and
        # takes our pid from its credentials (the server's fork() result means nothing outside a PID
        # namespace of its own).
        _send(ctl, {"op": "spawned", "id": msg.get("id"), "pid": os.getpid()})
        server = os.getppid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the worker reaps its own cell processes
        ctl.close()
        os.setsid()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the server's death (the harness is gone) ends us
        proto_in, proto_out, log = fds
        os.dup2(log, 2)
        os.dup2(2, 1)
        os.dup2(devnull, 0)
        os.close(log)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in msg["env"].items()})
        tmp_keep: list[str] = []
        if msg.get("private_tmp"):
            # Bubblewrap fork server: own mount and IPC namespaces, a private /tmp, CAP_SYS_ADMIN dropped.
            tmp_keep = enter_own_namespaces(PrivateTmp(**msg["private_tmp"]))
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # a user namespace of its own cleared it ...
            if os.getppid() != server:  # ... and the server may have died before it was set again
                return
        os.chdir(str(msg["cwd"]))
        settings = read_frame_fd(proto_in)  # the same first frame a worker started on its own reads
        if settings is not None:
            settings["tmp_keep"] = tmp_keep
            run_worker(settings, proto_in, proto_out, devnull)
        code = 0
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)

"""The security matrix in CI (issue 27): with bubblewrap, and with bubblewrap made unusable as in Docker.

``benchmarks/security.py`` runs its probes (read answers beside the task file, a token in ``$HOME``, the
harness's ``/proc`` entries; write outside; TCP/UDP to the host; signal/ptrace; bombs) at each level and
judges them from the host. Docker and Kubernetes pods have ``bwrap`` and ``unshare`` installed but forbid
namespaces; failing stand-ins of the same names first on ``PATH`` reproduce that. There ``auto`` must
choose Landlock, and every file and TCP probe must be contained. On main it fell back to reduced
isolation, where the same probes read the answers (asserted below too, so the probes can fail).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from datadojo.sandbox import isolation as isolation_mod

pytestmark = pytest.mark.timeout(600)

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "security.py"
HAS_BWRAP = shutil.which("bwrap") is not None and isolation_mod.bwrap_available()[0]
LANDLOCK, WHY_NOT = isolation_mod.landlock_available()
STANDIN = """#!/bin/sh
echo "$(basename "$0"): setting up uid map: Permission denied (a stand-in for Docker's default profile)" >&2
exit 1
"""


def _standins(folder: Path) -> Path:
    folder.mkdir()
    for name in ("bwrap", "unshare"):
        path = folder / name
        path.write_text(STANDIN)
        path.chmod(0o755)
    return folder


def _matrix(
    tmp_path: Path, levels: str, path_prefix: Path | None = None, *, leaks: bool = True
) -> list[dict]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    if path_prefix is not None:
        env["PATH"] = f"{path_prefix}{os.pathsep}{env['PATH']}"
    out = tmp_path / "matrix.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--levels",
            levels,
            "--json",
            str(out),
            *([] if leaks else ["--no-leaks"]),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(proc.stdout)
    return json.loads(out.read_text())


def _families() -> dict[str, str]:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from security import FAMILIES  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return FAMILIES


def _file_and_tcp(result: dict) -> dict[str, bool]:
    families = _families()
    return {
        name: verdict["contained"]
        for name, verdict in result["probes"].items()
        if families[name] in ("file", "tcp")
    }


def _leaks(result: dict) -> dict[str, bool]:
    """The reuse and sibling rows (issue 38), the IPC rows included."""
    families = _families()
    return {
        name: v["contained"]
        for name, v in result["probes"].items()
        if families[name].startswith(("reuse-", "sibling-"))
    }


def _all_contained(result: dict) -> None:
    """Every row contained, the IPC rows (System V, POSIX queues; a seccomp filter per cell) and the host
    rows (UNIX sockets, stat(), uid 0: bubblewrap shows no host path and gives cells their own uid)
    included (issue 38)."""
    not_contained = [name for name, v in result["probes"].items() if not v["contained"]]
    assert not_contained == [], result


@pytest.mark.skipif(not HAS_BWRAP, reason="bwrap unusable here")
def test_matrix_with_bubblewrap(tmp_path: Path) -> None:
    (result,) = _matrix(tmp_path, "bwrap")
    assert result["level"] == "bwrap"
    assert any(name.startswith("reuse (chunked): linecache") for name in result["probes"])
    _all_contained(result)


@pytest.mark.skipif(not (HAS_BWRAP and LANDLOCK), reason="needs bwrap and Landlock")
def test_matrix_with_the_fork_server_under_bubblewrap(tmp_path: Path) -> None:
    """The pool's zygote in one bwrap, each forked worker's cells confined by Landlock: every probe
    contained, as with one bwrap per sandbox."""
    # the reuse and sibling rows at this level: test_sandbox_leaks.py, probe by probe
    (result,) = _matrix(tmp_path, "bwrap+fork", leaks=False)
    assert result["level"] == "bwrap+fork" and result["landlock"]["files"], result
    _all_contained(result)


@pytest.mark.skipif(not LANDLOCK, reason=f"this kernel cannot run the Landlock level: {WHY_NOT}")
def test_matrix_where_bubblewrap_cannot_make_namespaces(tmp_path: Path) -> None:
    auto, reduced = _matrix(tmp_path, "auto,reduced", _standins(tmp_path / "bin"))
    assert auto["level"] == "landlock", auto  # auto = bwrap, else Landlock, else reduced
    assert auto["landlock"]["files"] and auto["landlock"]["abi"] >= 1
    verdicts = _file_and_tcp(auto)
    if auto["landlock"]["abi"] < 4:  # TCP needs ABI 4 (Linux 6.7); say so rather than pass silently
        pytest.fail(f"Landlock ABI {auto['landlock']['abi']} cannot deny TCP; the matrix: {verdicts}")
    assert all(verdicts.values()), {k: auto["probes"][k] for k, v in verdicts.items() if not v}
    leaks = _leaks(auto)  # every reuse and sibling row at the Landlock level
    assert leaks and all(leaks.values()), {k: auto["probes"][k] for k, v in leaks.items() if not v}
    # The same probes at the level main fell back to: the answers are read (the probes can fail).
    assert reduced["level"] == "reduced"
    assert not reduced["probes"]["read answers (absolute path)"]["contained"]
    assert not reduced["probes"]["write outside (computed path)"]["contained"]
    assert not reduced["probes"]["reuse (chunked): file in /tmp"]["contained"]  # the host's /tmp
    # issue 38's Landlock-level items: a host UNIX socket (seccomp refuses AF_UNIX sockets) and cells as uid 0
    # (a uid of their own) are contained at Landlock and at reduced. stat() of a task set in folders that
    # every user may search is not: Landlock has no right for stat(), and only the host's permissions stop
    # it (the "stat() a file in a 0700 host folder" row is contained; docs/sandbox.md names this row NOT
    # contained, and `rollout`/`eval` say so in one line for the task file they were given).
    families = _families()
    host = {n: v["contained"] for n, v in auto["probes"].items() if families[n] == "host"}
    assert host == {
        "connect to a host UNIX socket": True,
        "stat() the answers file": False,
        "cells run as the host's uid 0": True,
    }, host
    assert {n: reduced["probes"][n]["contained"] for n in host} == host, reduced


def test_landlock_insisted_on_where_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation_mod, "landlock_available", lambda: (False, "the kernel has no Landlock"))
    monkeypatch.setattr(isolation_mod, "bwrap_available", lambda: (True, ""))
    with pytest.raises(
        isolation_mod.IsolationUnavailable, match="isolation='landlock' was requested but the kernel"
    ):
        isolation_mod.resolve_isolation("landlock")
    assert isolation_mod.resolve_isolation("auto") == "bwrap"
    monkeypatch.setattr(isolation_mod, "bwrap_available", lambda: (False, "bwrap failed here"))
    monkeypatch.setattr(isolation_mod, "landlock_available", lambda: (True, ""))
    assert isolation_mod.resolve_isolation("auto") == "landlock"
    assert isolation_mod.resolve_isolation("none") == "reduced"

"""``scripts/install.sh`` on a fresh machine: apt's lock held, an optional package missing, chromium unasked.

Before: the script aborted (``set -e``) with apt's own message when unattended-upgrades held apt's lock, or
when a Debian package could not be installed, before installing DataDojo at all; and it installed chromium,
which only one browser-rendering test uses. Here apt-get, ``id`` and Python are fakes on a PATH of their
own (the fake apt-get answers from a script of lock failures and missing packages; the fake Python records
the pip calls), and the retry delay is 0 s: nothing is installed and no verdict depends on time.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FAKE_APT = r"""#!/bin/bash
# Logs every call; fails with apt's lock message while $FAKE_APT_DIR/locked counts down (or forever when it
# says "forever"), and with "Unable to locate package" for the packages named in $FAKE_APT_MISSING.
echo "$*" >> "$FAKE_APT_DIR/calls"
left=$(cat "$FAKE_APT_DIR/locked" 2>/dev/null || echo 0)
if [ "$left" = forever ] || [ "$left" -gt 0 ]; then
  [ "$left" = forever ] || echo $((left - 1)) > "$FAKE_APT_DIR/locked"
  echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 812 (unattended-upgr)" >&2
  echo "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?" >&2
  exit 100
fi
for p in $FAKE_APT_MISSING; do
  case " $* " in *" $p "*) echo "E: Unable to locate package $p" >&2; exit 100;; esac
done
exit 0
"""

FAKE_PYTHON = r"""#!/bin/bash
echo "$*" >> "$FAKE_APT_DIR/python"
case "$*" in *"-c"*) echo "datadojo 0.0.test";; esac
exit 0
"""


def _fake_bin(tmp_path: Path, uid: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (
        ("apt-get", FAKE_APT),
        ("python-fake", FAKE_PYTHON),
        ("id", f"#!/bin/bash\necho {uid}\n"),
    ):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    for tool in ("bash", "cat", "dirname", "grep", "tail", "sleep"):  # no bwrap, no chromium
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    return bin_dir


def _install(
    tmp_path: Path, *, locked: str = "0", missing: str = "", uid: str = "0", **env: str
) -> subprocess.CompletedProcess:
    bin_dir = _fake_bin(tmp_path, uid)
    state = tmp_path / "state"
    state.mkdir()
    (state / "locked").write_text(locked)
    full_env = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path),
        "PYTHON": str(bin_dir / "python-fake"),
        "FAKE_APT_DIR": str(state),
        "FAKE_APT_MISSING": missing,
        "DATADOJO_APT_RETRY_S": "0",
        **env,
    }
    return subprocess.run(
        [str(bin_dir / "bash"), str(REPO / "scripts" / "install.sh")],
        env=full_env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _calls(tmp_path: Path, name: str = "calls") -> list[str]:
    path = tmp_path / "state" / name
    return path.read_text().splitlines() if path.exists() else []


def _pip_ran(tmp_path: Path) -> bool:
    return any("pip install -q -e .[dev,train,sci,ray]" in c for c in _calls(tmp_path, "python"))


def test_a_held_apt_lock_is_waited_for_and_retried(tmp_path: Path) -> None:
    res = _install(tmp_path, locked="2")
    assert res.returncode == 0, res.stderr
    calls = _calls(tmp_path)
    assert all("DPkg::Lock::Timeout=120" in c for c in calls)  # apt's own wait first
    assert [c.split()[2] for c in calls] == ["update", "update", "update", "install"]
    assert "bubblewrap" in calls[-1]
    busy = [line for line in res.stderr.splitlines() if "apt is busy" in line]
    assert len(busy) == 2 and "(try 1 of 6)" in busy[0]
    assert "Could not get lock" not in res.stderr  # apt's message is replaced by the clear line
    assert _pip_ran(tmp_path)


def test_an_optional_package_that_cannot_be_installed_is_skipped_in_one_line(tmp_path: Path) -> None:
    res = _install(tmp_path, missing="bubblewrap")
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.startswith("[install] skipped")]
    assert lines == [
        "[install] skipped bubblewrap (apt-get: E: Unable to locate package bubblewrap): without it the "
        "sandbox runs with reduced isolation (docs/sandbox.md); add it later with: sudo apt-get install bubblewrap"
    ]
    assert _pip_ran(tmp_path)  # the Python packages are installed all the same


def test_a_lock_held_past_every_retry_skips_the_package_and_goes_on(tmp_path: Path) -> None:
    res = _install(tmp_path, locked="forever", DATADOJO_APT_TRIES="3")
    assert res.returncode == 0, res.stderr
    assert len(_calls(tmp_path)) == 6  # update 3 tries, install 3 tries
    assert "skipped bubblewrap (apt-get: apt's lock was still held after 3 tries)" in res.stderr
    assert _pip_ran(tmp_path)


@pytest.mark.parametrize(("flag", "installs_chromium"), [("0", False), ("1", True)])
def test_chromium_only_when_asked_for(tmp_path: Path, flag: str, installs_chromium: bool) -> None:
    res = _install(tmp_path, DATADOJO_CHROMIUM=flag)
    assert res.returncode == 0, res.stderr
    installs = [c for c in _calls(tmp_path) if " install " in f" {c} "]
    assert any("chromium" in c for c in installs) is installs_chromium
    assert any("bubblewrap" in c for c in installs)


def test_without_root_the_packages_are_named_and_skipped(tmp_path: Path) -> None:
    res = _install(tmp_path, uid="1000")
    assert res.returncode == 0, res.stderr
    assert not _calls(tmp_path)
    assert "[install] skipped bubblewrap (needs root and apt-get)" in res.stderr
    assert _pip_ran(tmp_path)

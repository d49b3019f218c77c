"""Auto-installation of missing modules (DataMind §4), off by default and limited to an allow-list.

DataMind's rollout "dynamically checks for and installs missing Python packages" so that a trajectory does
not die of ``ModuleNotFoundError``. Installing whatever a model names is a supply-chain risk (typo-squatted
packages run code at install time), so here only modules on ``SandboxConfig.install_allowlist`` are ever
installed, by the *harness* (the sandbox has no network), with pip's ``--target`` into a separate
directory that workers see read-only on their ``sys.path``; the harness's own environment is not changed.
Each distribution is tried at most once per process: a failed install is not retried on every cell.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DISTRIBUTIONS", "InstallOutcome", "default_install_dir", "ensure_module", "pip_install"]

#: Modules whose pip distribution has another name.
DISTRIBUTIONS: dict[str, str] = {
    "sklearn": "scikit-learn",
    "dateutil": "python-dateutil",
    "yaml": "PyYAML",
    "bs4": "beautifulsoup4",
    "PIL": "Pillow",
    "cv2": "opencv-python-headless",
}

_lock = threading.Lock()
_attempts: dict[tuple[str, str], tuple[bool, str]] = {}


@dataclass(frozen=True)
class InstallOutcome:
    """What happened to a request to install ``module``; ``note`` is shown in the observation."""

    module: str
    distribution: str | None
    installed: bool
    note: str


def default_install_dir() -> Path:
    """``$XDG_CACHE_HOME/datadojo/sandbox-site/pyX.Y`` (one per Python version: wheels are ABI-specific)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "datadojo" / "sandbox-site" / f"py{sys.version_info[0]}.{sys.version_info[1]}"


def pip_install(distribution: str, target: Path, timeout_s: float = 600.0) -> tuple[bool, str]:
    """Install ``distribution`` into ``target`` with pip; ``(ok, message)``. Replaced in tests."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        "--quiet",
        "--target",
        str(target),
        distribution,
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        return False, lines[-1] if lines else f"pip exited with status {proc.returncode}"
    return True, ""


def _install_once(distribution: str, target: Path) -> tuple[bool, str]:
    key = (str(target), distribution)
    with _lock:
        if key not in _attempts:
            target.mkdir(parents=True, exist_ok=True)
            _attempts[key] = pip_install(distribution, target)
        return _attempts[key]


async def ensure_module(module: str, allowlist: tuple[str, ...], target: Path) -> InstallOutcome:
    """Install the distribution providing ``module`` if it is allowed; never raises."""
    top = module.split(".")[0]
    if top not in allowlist:
        return InstallOutcome(
            module=top,
            distribution=None,
            installed=False,
            note=f"[auto-install: module {top!r} is not on the allow-list; it was not installed]",
        )
    distribution = DISTRIBUTIONS.get(top, top)
    ok, message = await asyncio.to_thread(_install_once, distribution, target)
    if ok:
        return InstallOutcome(top, distribution, True, f"[auto-installed: {distribution}]")
    return InstallOutcome(top, distribution, False, f"[auto-install of {distribution} failed: {message}]")


def forget_attempts() -> None:
    """Clear the once-per-process memory of install attempts (tests)."""
    with _lock:
        _attempts.clear()

"""Configuration of the sandbox: per-execution :class:`Limits` and the :class:`SandboxConfig` around them.

Both are frozen dataclasses so that one configuration can be shared by a whole pool and hashed into a
run's provenance. Defaults follow DataMind §4 ("per-trajectory sandboxed environments enforce CPU/memory
caps", "an automatic package-installation mechanism") with numbers picked for the paper's workload:
tables of at most a few thousand rows, where a cell that runs longer than a minute or needs more than a few
GiB is a bug in the agent's code, not a legitimate analysis.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from datadojo.sandbox.policy import PolicyConfig

__all__ = [
    "DEFAULT_INSTALL_ALLOWLIST",
    "Isolation",
    "Limits",
    "Mode",
    "SandboxConfig",
]

Mode = Literal["chunked", "persistent"]
Isolation = Literal["auto", "bwrap", "none"]

#: Modules the auto-installer may install (DataMind §4 names "pandas, numpy, scipy, sklearn, statsmodels,
#: etc."). Keys of :data:`datadojo.sandbox.install.DISTRIBUTIONS` map a module to its pip name.
DEFAULT_INSTALL_ALLOWLIST: tuple[str, ...] = (
    "scipy",
    "sklearn",
    "statsmodels",
    "seaborn",
    "matplotlib",
    "openpyxl",
    "xlrd",
    "pyarrow",
    "tabulate",
    "sympy",
    "networkx",
    "dateutil",
    "pytz",
)


@dataclass(frozen=True)
class Limits:
    """Resource limits for one execution (one cell, including the replay of earlier chunks).

    ``cpu_s``: CPU seconds (all threads), ``RLIMIT_CPU`` in a chunked cell, measured by the worker in a
    persistent interpreter. ``wall_s``: wall-clock seconds, enforced by the worker (kill) with a harness
    backstop. ``memory_mb``: address space (``RLIMIT_AS``). ``max_procs``: processes and threads
    (``RLIMIT_NPROC``, counted per sandbox because every sandbox runs under its own uid). ``max_file_mb``:
    largest file the code may write (``RLIMIT_FSIZE``; also the size of the sandbox's private ``/tmp``).
    ``max_output_bytes``: raw stdout+stderr kept; beyond it the cell is stopped. ``max_observation_chars``:
    the observation the model sees, head + tail with a marker. ``observation_head_chars`` /
    ``observation_tail_chars`` (both or neither): keep exactly that many characters of the start and of the
    end instead, the marker between them, and ignore ``max_observation_chars`` for the cell's output
    (SciDataSailor's environment shows a head of 4,000 and a tail of 1,500 characters; limit notes such as
    a timeout message are still appended after the tail).
    """

    cpu_s: float = 30.0
    wall_s: float = 60.0
    memory_mb: int = 4096
    max_procs: int = 64
    max_file_mb: int = 256
    max_output_bytes: int = 1_000_000
    max_observation_chars: int = 2048
    observation_head_chars: int | None = None
    observation_tail_chars: int | None = None

    def __post_init__(self) -> None:
        for name in ("cpu_s", "wall_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"Limits.{name} must be a positive number of seconds, got {value!r}")
        for name in ("memory_mb", "max_procs", "max_file_mb", "max_output_bytes", "max_observation_chars"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
                raise ValueError(f"Limits.{name} must be a positive integer, got {value!r}")
        if self.max_observation_chars < 64:
            raise ValueError(
                f"Limits.max_observation_chars must be at least 64, got {self.max_observation_chars}"
            )
        head, tail = self.observation_head_chars, self.observation_tail_chars
        if (head is None) != (tail is None):
            raise ValueError(
                "Limits.observation_head_chars and observation_tail_chars must be set together, got "
                f"head={head!r}, tail={tail!r}"
            )
        if head is not None:
            for name, value in (("observation_head_chars", head), ("observation_tail_chars", tail)):
                if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
                    raise ValueError(f"Limits.{name} must be a non-negative integer, got {value!r}")
            if head + tail < 64:  # type: ignore[operator]
                raise ValueError(
                    f"Limits.observation_head_chars + observation_tail_chars must be at least 64, got {head + tail}"  # type: ignore[operator]
                )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SandboxConfig:
    """Everything that decides how a sandbox runs code; one object is shared by a whole pool.

    ``mode``: ``chunked`` (DataMind §4: keep the text of the chunks that succeeded and re-run them, silently,
    before each new chunk, so no interpreter state is held between turns) or ``persistent`` (one live
    interpreter per trajectory, restarted after a crash). ``isolation``: ``auto`` uses bubblewrap when it
    works and otherwise falls back to resource limits + the static policy ("reduced", logged once and
    recorded in every result); ``bwrap`` insists on it; ``none`` never uses it. ``preload``: modules the
    pre-warmed worker imports once, so that a cell pays neither interpreter start-up nor their import.
    ``auto_install``: install a missing module (only one on ``install_allowlist``) into ``install_dir`` and
    run the cell again (DataMind §4); off by default because it needs the network and changes the
    environment. ``workspace_root``: where per-trajectory workspaces are created (default: the system temp
    directory); ``keep_workspace`` leaves them in place after :meth:`Sandbox.close` for inspection.
    ``prereplay`` (chunked mode): re-run the kept chunks in the next fresh process right after a cell,
    while the model thinks, rather than when the next cell arrives. Same code, same order, same fresh
    interpreter, so the same observations; but the rebuilt state then waits in memory between turns (as
    in persistent mode). Turn it off to hold no interpreter state between turns at all, which is what
    DataMind's chunked mode is for when memory is the constraint.
    ``reuse``: a :class:`~datadojo.sandbox.pool.SandboxPool` resets a sandbox after its trajectory (every
    process ended; workspace, private /tmp and kept chunks emptied) and hands it to the next one, instead of
    starting a new worker; turn it off to give every trajectory a brand-new worker.
    """

    limits: Limits = field(default_factory=Limits)
    mode: Mode = "chunked"
    isolation: Isolation = "auto"
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    preload: tuple[str, ...] = ("numpy", "pandas")
    auto_install: bool = False
    install_allowlist: tuple[str, ...] = DEFAULT_INSTALL_ALLOWLIST
    install_dir: str | None = None
    sql_row_limit: int = 200
    sql_timeout_s: float = 30.0
    sql_save_csv: bool = False
    workspace_root: str | None = None
    keep_workspace: bool = False
    start_timeout_s: float = 120.0
    prereplay: bool = True
    reuse: bool = True

    def __post_init__(self) -> None:
        if self.mode not in ("chunked", "persistent"):
            raise ValueError(f"SandboxConfig.mode must be 'chunked' or 'persistent', got {self.mode!r}")
        if self.isolation not in ("auto", "bwrap", "none"):
            raise ValueError(
                f"SandboxConfig.isolation must be 'auto', 'bwrap' or 'none', got {self.isolation!r}"
            )
        if not isinstance(self.limits, Limits):
            raise TypeError(f"SandboxConfig.limits must be a Limits, got {type(self.limits).__name__}")
        for name in self.preload:
            if not name or not all(part.isidentifier() for part in name.split(".")):
                raise ValueError(f"SandboxConfig.preload: {name!r} is not a module name")
        if self.sql_row_limit <= 0:
            raise ValueError(f"SandboxConfig.sql_row_limit must be positive, got {self.sql_row_limit}")
        if not self.sql_timeout_s > 0:
            raise ValueError(f"SandboxConfig.sql_timeout_s must be positive, got {self.sql_timeout_s}")
        if not self.start_timeout_s > 0:
            raise ValueError(f"SandboxConfig.start_timeout_s must be positive, got {self.start_timeout_s}")

"""Configuration of the sandbox: per-execution :class:`Limits` and the :class:`SandboxConfig` around them.

Both are :class:`datadojo.config.Settings` (frozen pydantic models) so that one configuration can be
shared by a whole pool and hashed into a run's provenance. Defaults follow DataMind §4 ("per-trajectory
sandboxed environments enforce CPU/memory caps", "an automatic package-installation mechanism") with
numbers picked for the paper's workload: tables of at most a few thousand rows, where a cell that runs
longer than a minute or needs more than a few GiB is a bug in the agent's code, not a legitimate analysis.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from datadojo.config import Settings
from datadojo.sandbox.policy import PolicyConfig

__all__ = [
    "DEFAULT_INSTALL_ALLOWLIST",
    "Isolation",
    "Limits",
    "Mode",
    "SandboxConfig",
]

Mode = Literal["chunked", "persistent"]
Isolation = Literal["auto", "bwrap", "landlock", "none"]

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


class Limits(Settings):
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

    model_config = ConfigDict(validate_default=False)  # built per sandbox: defaults are trusted constants

    cpu_s: float = Field(30.0, description="CPU seconds per cell, all threads (RLIMIT_CPU)")
    wall_s: float = Field(60.0, description="wall-clock seconds per turn (one cell with its replay)")
    memory_mb: int = Field(4096, description="address space per cell, in MB (RLIMIT_AS)")
    max_procs: int = Field(64, description="processes and threads per sandbox (RLIMIT_NPROC)")
    max_file_mb: int = Field(
        256, description="largest file the code may write, in MB (RLIMIT_FSIZE; also the private /tmp's size)"
    )
    max_output_bytes: int = Field(
        1_000_000, description="raw stdout + stderr kept per cell; beyond it the cell is stopped"
    )
    max_observation_chars: int = Field(
        2048, description="characters of the observation the model sees (head + tail, a marker between)"
    )
    observation_head_chars: int | None = Field(
        None,
        description="keep exactly this many characters of the start of the output (with the tail; None: max_observation_chars)",
    )
    observation_tail_chars: int | None = Field(
        None, description="keep exactly this many characters of the end of the output (with the head)"
    )

    @field_validator("cpu_s", "wall_s", mode="before")
    @classmethod
    def _seconds(cls, value: Any, info: ValidationInfo) -> Any:
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise ValueError(f"Limits.{info.field_name} must be a positive number of seconds, got {value!r}")
        return value

    @field_validator(
        "memory_mb", "max_procs", "max_file_mb", "max_output_bytes", "max_observation_chars", mode="before"
    )
    @classmethod
    def _positive(cls, value: Any, info: ValidationInfo) -> Any:
        if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
            raise ValueError(f"Limits.{info.field_name} must be a positive integer, got {value!r}")
        return value

    @field_validator("observation_head_chars", "observation_tail_chars", mode="before")
    @classmethod
    def _non_negative(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
            raise ValueError(f"Limits.{info.field_name} must be a non-negative integer, got {value!r}")
        return value

    @model_validator(mode="after")
    def _check(self) -> Limits:
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
        if head is not None and head + tail < 64:  # type: ignore[operator]
            raise ValueError(
                f"Limits.observation_head_chars + observation_tail_chars must be at least 64, got {head + tail}"  # type: ignore[operator]
            )
        return self


class SandboxConfig(Settings):
    """Everything that decides how a sandbox runs code; one object is shared by a whole pool.

    ``mode``: ``chunked`` (DataMind §4: keep the text of the chunks that succeeded and re-run them, silently,
    before each new chunk, so no interpreter state is held between turns) or ``persistent`` (one live
    interpreter per trajectory, restarted after a crash). ``isolation``: ``auto`` uses bubblewrap when it
    works, else Landlock (kernel-enforced file/TCP/signal confinement without namespaces, Linux ≥ 5.13),
    else falls back to resource limits + the static policy ("reduced", logged once and recorded in every
    result); ``bwrap`` and ``landlock`` insist on that level; ``none`` uses neither. ``preload``: modules the
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
    ``fork_server`` (pool only; on by default, see docs/sandbox.md): one interpreter imports ``preload``
    once and forks every worker of the pool (:mod:`datadojo.sandbox.forkserver`), so warming N sandboxes
    costs N forks rather than N interpreter starts and pandas imports, and they share those pages. Under
    bubblewrap that interpreter runs in one bubblewrap sandbox for the pool; every worker makes its own
    mount, IPC and network namespaces with a private ``/tmp`` (:mod:`datadojo.sandbox.worker.namespaces`)
    and every cell process confines itself with Landlock to its own workspace (so it needs Landlock:
    ``bwrap`` without it is an error, ``auto`` without it keeps one bubblewrap process per sandbox). What
    the pool's sandboxes still share: one PID namespace (kept apart by Landlock and their own uids), the
    server's address-space layout (ASLR) and its pre-imported module state; ``fork_server=False`` shares
    nothing.
    """

    model_config = ConfigDict(validate_default=False)  # built per sandbox: defaults are trusted constants

    limits: Limits = Field(default_factory=Limits, description="resource limits per cell")
    mode: Mode = Field(
        "chunked",
        description="how turns share state: chunked re-runs the kept chunks before each new one (DataMind §4), "
        "persistent keeps one live interpreter per trajectory",
    )
    isolation: Isolation = Field(
        "auto",
        description="isolation level: auto (bubblewrap when it works, else Landlock, else reduced: resource "
        "limits + the static policy), bwrap or landlock (insist on that level) or none (reduced)",
    )
    policy: PolicyConfig = Field(default_factory=PolicyConfig, description="what the static policy refuses")
    preload: tuple[str, ...] = Field(
        ("numpy", "pandas"), description="modules the pre-warmed worker imports once"
    )
    auto_install: bool = Field(
        False,
        description="install a missing allow-listed module and run the cell again (DataMind §4; needs the network)",
    )
    install_allowlist: tuple[str, ...] = Field(
        DEFAULT_INSTALL_ALLOWLIST, description="modules auto_install may install"
    )
    install_dir: str | None = Field(
        None, description="where auto_install installs (None: a folder of the sandbox)"
    )
    sql_row_limit: int = Field(200, description="rows of a SQL result shown in the observation")
    sql_timeout_s: float = Field(30.0, description="seconds per SQL statement")
    sql_save_csv: bool = Field(False, description="save each SQL result as a CSV file in the workspace")
    workspace_root: str | None = Field(
        None, description="where per-trajectory workspaces are made (None: the system temp folder)"
    )
    keep_workspace: bool = Field(
        False, description="leave workspaces in place after the sandbox closes, for inspection"
    )
    start_timeout_s: float = Field(120.0, description="seconds a worker may take to start")
    prereplay: bool = Field(
        True, description="chunked mode: re-run the kept chunks right after a cell, while the model thinks"
    )
    reuse: bool = Field(
        True,
        description="a pool resets a finished sandbox and hands it to the next trajectory instead of starting a new worker",
    )
    fork_server: bool = Field(
        True,
        description="a pool forks every worker from one interpreter that imported preload once: warm-up "
        "CPU per sandbox ~2 % of a cold start, ~7x less memory, ~4x less sandbox CPU per turn; under bwrap "
        "each worker still gets its own mount, IPC and network namespaces and /tmp, but the pool's "
        "sandboxes share one PID namespace (kept apart by Landlock and own uids), the address-space layout "
        "(ASLR) and pre-imported module state (false: one interpreter per sandbox, nothing shared)",
    )

    @field_validator("limits", "policy", mode="before")
    @classmethod
    def _instance(cls, value: Any, info: ValidationInfo) -> Any:
        want = Limits if info.field_name == "limits" else PolicyConfig
        if not isinstance(value, want):
            raise TypeError(
                f"SandboxConfig.{info.field_name} must be a {want.__name__}, got {type(value).__name__}"
            )
        return value

    @field_validator("preload")
    @classmethod
    def _modules(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not name or not all(part.isidentifier() for part in name.split(".")):
                raise ValueError(f"SandboxConfig.preload: {name!r} is not a module name")
        return value

    @model_validator(mode="after")
    def _check(self) -> SandboxConfig:
        if self.sql_row_limit <= 0:
            raise ValueError(f"SandboxConfig.sql_row_limit must be positive, got {self.sql_row_limit}")
        if not self.sql_timeout_s > 0:
            raise ValueError(f"SandboxConfig.sql_timeout_s must be positive, got {self.sql_timeout_s}")
        if not self.start_timeout_s > 0:
            raise ValueError(f"SandboxConfig.start_timeout_s must be positive, got {self.start_timeout_s}")
        return self

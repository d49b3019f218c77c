"""The outcome of one execution in a sandbox: :class:`ExecResult`.

It carries the observation text the model sees plus the facts the harness needs to act on (did it time
out, was it killed, how isolated was it), so that no caller ever has to look for the word "error" in the
output (a habit of the reference code that DESIGN.md warns against).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from datadojo.types import Observation, ObservationPart, Trajectory

__all__ = ["STATUSES", "ExecResult", "isolation_counts", "reduced_isolation_banner"]

#: The statuses an execution can end with (a subset of :data:`datadojo.types.ObservationStatus`).
STATUSES: tuple[str, ...] = ("ok", "error", "timeout", "killed", "rejected", "env_error")


@dataclass
class ExecResult:
    """What one cell (Python or SQL) produced.

    ``output`` is already truncated to ``Limits.max_observation_chars`` (head + tail with a marker, plus
    short notes such as ``[timeout: ...]``). ``status``: ``ok`` (ran without an exception), ``error`` (an
    exception in the code), ``timeout`` (wall or CPU limit), ``killed`` (memory, process or output limit, or
    a signal), ``rejected`` (the static policy refused it; nothing ran), ``env_error`` (the sandbox itself
    failed). ``isolation`` is the level it ran at: ``bwrap``, ``landlock`` or ``reduced``. ``installed`` lists the packages auto-installed for
    this cell. ``restarted`` says the interpreter state was lost (persistent mode) during this cell.
    """

    output: str
    status: str
    error: bool
    timed_out: bool = False
    killed: bool = False
    truncated: bool = False
    isolation: str = "reduced"
    duration_s: float = 0.0
    installed: list[str] = field(default_factory=list)
    restarted: bool = False
    #: ``(source, text)`` pieces of ``output`` before escaping: ``"cell"`` (what the code printed) or
    #: ``"harness"`` (notes, truncation markers). Empty: all of ``output`` is the harness's (a policy
    #: rejection, an environment failure). ``output`` is :func:`~datadojo.sandbox.cells.render_parts` of them.
    parts: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"ExecResult.status must be one of {', '.join(STATUSES)}, got {self.status!r}")

    @classmethod
    def make(cls, output: str, status: str, **kwargs: Any) -> ExecResult:
        """Build a result whose ``error`` flag follows from ``status`` (everything but ``ok`` is an error)."""
        return cls(output=output, status=status, error=status != "ok", **kwargs)

    def to_observation(self) -> Observation:
        """The :class:`datadojo.types.Observation` recorded in a trajectory's turn."""
        parts = self.parts or ([("harness", self.output)] if self.output else [])
        return Observation(
            text=self.output,
            status=self.status,  # type: ignore[arg-type]
            error=self.error,
            truncated=self.truncated,
            isolation=self.isolation,
            parts=[ObservationPart(source=s, text=t) for s, t in parts],  # type: ignore[arg-type]
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serializable fields; ``observation`` duplicates ``output`` under the CLI's name."""
        data = asdict(self)
        data["observation"] = self.output
        return data


def isolation_counts(trajectories: Iterable[Trajectory]) -> dict[str, int]:
    """How many observations ran at each sandbox isolation level (``reduced`` is the one to worry about)."""
    counts: Counter[str] = Counter()
    for traj in trajectories:
        for turn in traj.turns:
            level = turn.observation.isolation if turn.observation is not None else None
            if level:
                counts[level] += 1
    return dict(sorted(counts.items()))


def reduced_isolation_banner(isolation: dict[str, int] | None) -> str | None:
    """The warning a report shows when some cells ran at reduced isolation (else ``None``)."""
    n = (isolation or {}).get("reduced", 0)
    if not n:
        return None
    return (
        f"WARNING: {n} cell(s) ran at reduced sandbox isolation (neither bubblewrap nor Landlock): agent "
        "code could read files outside its workspace, such as reference answers, and reach the network."
    )

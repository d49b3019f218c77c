"""The data model every DataDojo stage passes along: :class:`Task`, :class:`Turn`, :class:`Trajectory`.

Why one module: synthesis writes tasks, the agent runtime turns tasks into trajectories, scoring adds
rewards, training reads trajectories back. If each stage had its own notion of "a turn", the
conversions between them would be where bugs live. Everything here is a pydantic model, so it is typed,
validated on load (a bad record names the field that is wrong) and serializes to plain JSON.

The JSONL helpers for reading and appending these records live in :mod:`datadojo.jsonl`; conversion to
and from OpenAI chat messages lives in :mod:`datadojo.protocol.messages`.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "DATA_KINDS",
    "STOP_REASONS",
    "Action",
    "ActionKind",
    "DataFile",
    "DataKind",
    "Observation",
    "ObservationPart",
    "ObservationStatus",
    "Provenance",
    "StopReason",
    "Task",
    "Timings",
    "TokenUsage",
    "Trajectory",
    "Turn",
    "config_hash",
    "infer_data_kind",
]

DataKind = Literal["csv", "xlsx", "sqlite", "parquet", "json", "dir"]
DATA_KINDS: tuple[str, ...] = get_args(DataKind)

_SUFFIX_KINDS: dict[str, str] = {
    ".csv": "csv",
    ".tsv": "csv",
    ".tab": "csv",
    ".txt": "csv",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".xls": "xlsx",
    ".sqlite": "sqlite",
    ".sqlite3": "sqlite",
    ".db": "sqlite",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}


def infer_data_kind(path: str | Path) -> DataKind:
    """Guess a data file's kind from its path (a directory is ``dir``; otherwise by suffix).

    Raises ``ValueError`` naming the path when the suffix is not one DataDojo reads, so that a task file
    with a typo fails at load time rather than deep inside a rollout.
    """
    p = Path(path)
    if p.is_dir():
        return "dir"
    kind = _SUFFIX_KINDS.get(p.suffix.lower())
    if kind is None:
        raise ValueError(
            f"{path}: cannot tell the data kind from the suffix {p.suffix!r}; "
            f"give kind explicitly (one of {', '.join(DATA_KINDS)})"
        )
    return kind  # type: ignore[return-value]


class _Model(BaseModel):
    """Shared pydantic settings: unknown keys are errors (typos in hand-written task files surface)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)

    def to_json(self) -> str:
        """One compact JSON line (no trailing newline)."""
        return self.model_dump_json(exclude_none=False)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class DataFile(_Model):
    """A data file (or dataset folder) a task is about.

    ``path`` is as given by the task source; relative paths are resolved against the task file's folder
    by whoever loads the tasks (see :func:`datadojo.jsonl.read_tasks`). ``name`` is what the agent sees
    in its working directory (defaults to the file name).
    """

    path: str
    kind: DataKind
    name: str | None = None
    description: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _infer_kind(cls, data: Any) -> Any:
        if isinstance(data, dict) and "kind" not in data and "path" in data:
            data = {**data, "kind": infer_data_kind(data["path"])}
        return data

    @classmethod
    def from_path(cls, path: str | Path, *, name: str | None = None) -> DataFile:
        return cls(path=str(path), kind=infer_data_kind(path), name=name)

    @property
    def visible_name(self) -> str:
        """The name under which the file appears in the agent's working directory."""
        return self.name or Path(self.path).name


class Task(_Model):
    """One question about some data files, with an optional reference answer.

    ``answer_kind`` says how ``answer`` is to be compared (e.g. ``number``, ``text``, ``list``, ``table``,
    ``dabench``, ``sql``, ``envlunch``); scorers dispatch on it. ``description`` is the metadata text *d*
    (DataMind §3.1) that prompts show the model; ``extra`` holds source-specific fields (for example the
    DABench constraints, or an EnvLunch task's counterfactual copies).
    """

    id: str
    question: str
    files: list[DataFile] = Field(default_factory=list)
    description: str | None = None
    answer: Any = None
    answer_kind: str | None = None
    source: str | None = None
    category: str | None = None
    difficulty: str | int | None = None
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> Task:
        if not self.id.strip():
            raise ValueError("task id must not be empty")
        return self


ActionKind = Literal["code", "sql", "answer", "invalid"]


class Action(_Model):
    """What the agent did in one turn.

    ``kind`` is ``code`` (Python), ``sql``, ``answer`` or ``invalid`` (the turn could not be parsed; then
    ``text`` holds nothing and :attr:`Turn.invalid_reason` says why).
    """

    kind: ActionKind
    text: str = ""


ObservationStatus = Literal["ok", "error", "timeout", "killed", "rejected", "env_error", "feedback"]


class ObservationPart(_Model):
    """A piece of an observation and who wrote it: ``cell`` (the agent's code printed it) or ``harness``
    (a note such as ``[timeout: …]``, a truncation marker, a policy rejection). Recorded so that a
    cell that prints text identical to a harness note is told apart from the note (issue 38)."""

    source: Literal["cell", "harness"]
    text: str


class Observation(_Model):
    """What the environment answered to one action.

    ``status``: ``ok`` (ran, no exception), ``error`` (an exception in the agent's code), ``timeout`` (wall
    or CPU limit), ``killed`` (memory, process or output limit, or a signal), ``rejected`` (the static
    policy refused the code before it ran), ``env_error`` (the sandbox itself failed), ``feedback`` (no
    code ran: a message from the harness, e.g. a format correction). ``error`` is true for everything but
    ``ok`` and ``feedback``.
    """

    text: str
    status: ObservationStatus = "ok"
    error: bool = False
    truncated: bool = False
    isolation: str | None = None
    #: Where ``text`` came from, piece by piece, before escaping (empty: not recorded, e.g. a harness
    #: message or an older trajectory). ``text`` is what the model read: the cell's pieces with any line
    #: that imitates a harness note or a framing tag escaped (``datadojo.sandbox.cells.render_parts``).
    parts: list[ObservationPart] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _default_error(cls, data: Any) -> Any:
        if isinstance(data, dict) and "error" not in data:
            status = data.get("status", "ok")
            data = {**data, "error": status not in ("ok", "feedback")}
        return data


class Timings(_Model):
    """Seconds spent generating this turn (``llm_s``) and executing its action (``exec_s``)."""

    llm_s: float = 0.0
    exec_s: float = 0.0


class TokenUsage(_Model):
    """Token counts reported by the backend for the request that produced this turn."""

    prompt: int = 0
    completion: int = 0


class Turn(_Model):
    """One agent step: the raw completion, its parsed thought and action, and the environment's reply.

    ``raw`` is the assistant text exactly as generated (training tokenizes it, so it must be kept
    verbatim). ``void`` marks a turn that produced neither valid code nor an answer (DataMind §4, "void
    turn"); a trajectory with any void turn is masked out of training.
    """

    raw: str
    thought: str | None = None
    action: Action
    observation: Observation | None = None
    invalid_reason: str | None = None
    void: bool = False
    timings: Timings = Field(default_factory=Timings)
    tokens: TokenUsage = Field(default_factory=TokenUsage)

    @model_validator(mode="before")
    @classmethod
    def _default_void(cls, data: Any) -> Any:
        if isinstance(data, dict) and "void" not in data:
            action = data.get("action") or {}
            kind = action.get("kind") if isinstance(action, dict) else getattr(action, "kind", None)
            data = {**data, "void": kind == "invalid"}
        return data


StopReason = Literal["answer", "max_turns", "invalid", "env_error", "llm_error", "context_limit"]
STOP_REASONS: tuple[str, ...] = ("answer", "max_turns", "invalid", "env_error", "llm_error", "context_limit")


def _versions() -> dict[str, str]:
    from datadojo.version import __version__

    return {"datadojo": __version__, "python": platform.python_version()}


def config_hash(config: Any) -> str:
    """A short stable hash of a JSON-serializable configuration (sorted keys), for provenance."""
    blob = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class Provenance(_Model):
    """Where a trajectory came from: enough to rerun it or to tell two runs apart."""

    config_hash: str | None = None
    seed: int | None = None
    #: The seed of the trajectory's sandbox (``random`` and numpy in agent code), derived from the task id,
    #: the sample and ``seed`` (:func:`datadojo.sandbox.session.trajectory_seed`); ``None``: not seeded.
    sandbox_seed: int | None = None
    versions: dict[str, str] = Field(default_factory=_versions)
    created: float = Field(default_factory=time.time)
    argv: list[str] = Field(default_factory=lambda: list(sys.argv))


class Trajectory(_Model):
    """A whole episode of one task: the prompt, the turns, how it ended, and its rewards.

    ``prompt`` holds the opening messages (OpenAI chat format: ``{"role": ..., "content": ...}``) that
    preceded the first turn, usually a system and a user message. ``sample`` numbers repeated samples of the
    same task, so that ``(task_id, sample)`` identifies a trajectory in a resumable run. ``dialect`` names
    the tag protocol the turns use (see :mod:`datadojo.protocol`).
    """

    task_id: str
    sample: int = 0
    dialect: str = "datamind"
    prompt: list[dict[str, Any]] = Field(default_factory=list)
    turns: list[Turn] = Field(default_factory=list)
    final_answer: str | None = None
    stop_reason: StopReason
    error: str | None = None
    model: str | None = None
    sampling: dict[str, Any] = Field(default_factory=dict)
    rewards: dict[str, float] = Field(default_factory=dict)
    provenance: Provenance = Field(default_factory=Provenance)
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int]:
        """``(task_id, sample)``: the identity used for resuming runs."""
        return (self.task_id, self.sample)

    @property
    def has_void_turn(self) -> bool:
        return any(t.void for t in self.turns)

    @property
    def n_turns(self) -> int:
        return len(self.turns)

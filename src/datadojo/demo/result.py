"""What ``datadojo demo`` did: :class:`StageResult` per stage and the :class:`DemoResult` of the run.

A module of its own because both the pipeline (which fills them) and the page (which renders them) need
them: the page imports these records, not the pipeline that calls it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DemoResult", "StageResult"]


@dataclass
class StageResult:
    """One stage: how long it took, its headline (one line), its figures and the file it links to."""

    name: str
    title: str
    seconds: float
    headline: str
    figures: dict[str, Any] = field(default_factory=dict)
    link: str | None = None


@dataclass
class DemoResult:
    """What the demo did: its folder, report, stages in order, total time, machine, next commands, and the
    files each stage wrote."""

    out: Path
    report: Path
    stages: list[StageResult]
    seconds: float
    machine: dict[str, Any]
    next_commands: list[dict[str, str]]
    config: dict[str, Any]
    #: the files the page links, by name (``tasks``, ``copies``, ``solver``, ``scores``, ``scored_report``,
    #: ``profiles``, ``eval``…), relative to ``out``: each in its stage's engine folder
    files: dict[str, str] = field(default_factory=dict)

    def stage(self, name: str) -> StageResult:
        return next(s for s in self.stages if s.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": "done",
            "out": str(self.out),
            "report": str(self.report),
            "seconds": self.seconds,
            "machine": self.machine,
            "config": self.config,
            "stages": [asdict(s) for s in self.stages],
            "files": self.files,
            "next_commands": self.next_commands,
        }

"""Exports of trajectories and tasks for the training engines users already run at scale.

* :mod:`~datadojo.train.export.llamafactory` — SFT data in ShareGPT format (observation turns masked) plus
  its ``dataset_info.json`` entry;
* :mod:`~datadojo.train.export.trl` — SFT data in TRL's conversational ``messages`` format;
* :mod:`~datadojo.train.export.trl_env` — TRL's ``GRPOTrainer`` on DataDojo tasks: sandboxed multi-turn
  rollouts as its ``rollout_func`` (token-exact, environment tokens masked) with DataDojo's rewards;
* :mod:`~datadojo.train.export.verl` — RL prompts as verl parquet files rolled out by DataDojo's agent loop
  (:mod:`~datadojo.train.export.verl_agent`: the ReAct loop token-in / token-out, DataDojo's reward), the
  γ-mixed objective inside verl (:mod:`~datadojo.train.export.verl_mixed`) and DataMind's DAPO loss for
  verl's policy-loss registry (:mod:`~datadojo.train.export.verl_loss`).

Every export drops trajectories with a void turn (DataMind §4 masks them out of training) and reports how
many it dropped; every file is written to a temporary name and renamed into place.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from datadojo.errors import DataDojoError
from datadojo.types import Trajectory

__all__ = ["ExportError", "ExportReport"]


class ExportError(DataDojoError, ValueError):
    """A record that cannot be expressed in the target format; the message names the trajectory or task."""


@dataclass
class ExportReport:
    """What an export wrote and skipped."""

    format: str
    files: list[str] = field(default_factory=list)
    written: int = 0
    skipped_void: int = 0
    skipped_other: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def trainable(self, trajectories: Iterable[Trajectory]) -> Iterator[Trajectory]:
        """The trajectories worth exporting, counting the rest: void ones (DataMind §4) and empty ones."""
        for traj in trajectories:
            if traj.has_void_turn:
                self.skipped_void += 1
            elif not traj.turns:
                self.skipped_other += 1
            else:
                yield traj

"""Trajectories → TRL SFT data in the conversational ``messages`` format (one JSONL record each).

Records are ``{"messages": [{"role": "system"|"user"|"assistant", "content": ...}, ...]}`` — exactly the
conversation the agent saw at rollout time (observations are user messages wrapped in the dialect's
``<interpreter>`` tags). Load with ``datasets.load_dataset("json", data_files=...)`` and train with TRL's
``SFTTrainer`` and ``SFTConfig(assistant_only_loss=True)``, which computes the loss on assistant turns only
— prompts and observations masked, DataMind §4's 𝕀(y_t ∉ o). (TRL needs a chat template that marks
assistant turns with ``{% generation %}``; DataDojo's own ``datadojo train sft`` needs no such template.)

``with_masks=True`` also keeps each message's ``train`` flag, for trainers that take per-message masks.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from datadojo.jsonl import write_jsonl_atomic
from datadojo.protocol.messages import strip_masks, trajectory_to_messages
from datadojo.train.export import ExportReport
from datadojo.types import Trajectory

__all__ = ["export_trl", "trajectory_to_trl"]


def trajectory_to_trl(traj: Trajectory, *, with_masks: bool = False) -> dict[str, Any]:
    """One trajectory as a TRL conversational record."""
    messages = trajectory_to_messages(traj)
    if with_masks:
        return {
            "messages": [
                {"role": m["role"], "content": m["content"], "train": bool(m["train"])} for m in messages
            ]
        }
    return {"messages": strip_masks(messages)}


def export_trl(
    trajectories: Iterable[Trajectory], out: str | Path, *, with_masks: bool = False
) -> ExportReport:
    """Write the records to the JSONL file ``out`` (void trajectories and empty ones skipped)."""
    report = ExportReport("trl")
    records = [trajectory_to_trl(traj, with_masks=with_masks) for traj in report.trainable(trajectories)]
    report.written = write_jsonl_atomic(out, records)
    report.files = [str(out)]
    return report

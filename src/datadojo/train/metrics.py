"""Per-step training metrics as JSONL (``<run>/metrics.jsonl``), appended as steps finish.

One record per optimizer step (SFT) or RL step, e.g. for RL::

    {"step": 3, "gamma": 0.87, "sft_loss": 1.92, "policy_loss": -0.01, "loss": 1.67, "reward_mean": 0.25,
     "entropy": 2.1, "frac_groups_filtered": 0.5, "void_rate": 0.12, "clip_frac": 0.03, ...}

Appending never loads the file and a crash loses at most the line being written
(:class:`datadojo.jsonl.JsonlAppender`). On resume from a checkpoint at step ``s``, records after ``s``
(written before the crash, about steps that will be redone) are dropped with :meth:`MetricsLog.truncate_after`.
The module is named ``metrics`` rather than ``logging`` so that it never shadows the standard library.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from datadojo.jsonl import JsonlAppender, iter_jsonl, write_jsonl_atomic

__all__ = ["MetricsLog", "read_metrics"]


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN / inf
    if hasattr(value, "item"):  # tensors and numpy scalars
        return _clean(value.item())
    return value


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """All records of a metrics file (empty when it does not exist)."""
    path = Path(path)
    if not path.exists():
        return []
    return [rec for _, rec in iter_jsonl(path) if isinstance(rec, dict)]


class MetricsLog:
    """Append-only per-step metrics; only the main process should hold one."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def append(self, record: dict[str, Any]) -> None:
        if "step" not in record:
            raise ValueError("a metrics record needs a 'step'")
        with JsonlAppender(self.path) as out:
            out.write({k: _clean(v) for k, v in record.items()})

    def read(self) -> list[dict[str, Any]]:
        return read_metrics(self.path)

    def truncate_after(self, step: int) -> int:
        """Drop records with ``step`` greater than ``step`` (atomically); return how many were dropped."""
        records = self.read()
        kept = [r for r in records if int(r.get("step", 0)) <= step]
        if len(kept) != len(records):
            write_jsonl_atomic(self.path, kept)
        return len(records) - len(kept)

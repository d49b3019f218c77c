"""The output folder of a DataMind run: where each file lives, and the run kit objects over them.

Every file is append-only JSONL (crash-tolerant, see :mod:`datadojo.jsonl`) except the curated SFT sets,
the summary and the report, which are written to a temporary file and renamed. Resume rests on two logs,
both kept by :mod:`datadojo.runs` (issue 23: the pipeline's own versions are gone):

* ``progress.jsonl`` — a :class:`~datadojo.runs.WorkLedger`, one line per finished unit of LLM work (a
  query request, a composition step) keyed ``"<stage>:<unit>"``; a rerun skips committed units, so a
  finished stage makes no request;
* ``rejected.jsonl`` — a :class:`~datadojo.runs.RejectionWriter`: what a check or filter removed and why,
  each ``(stage, key)`` once, so a unit redone after a crash does not log the same rejection twice;

and ``usage.jsonl`` — one :class:`~datadojo.runs.UsageLedger` record per stage invocation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datadojo.runs import RejectionWriter, UsageLedger, WorkLedger, read_usage_totals

__all__ = ["Paths", "read_usage"]


@dataclass(frozen=True)
class Paths:
    """Where each file of the output contract lives under ``out``."""

    out: Path

    @property
    def corpus(self) -> Path:
        return self.out / "corpus.jsonl"

    @property
    def queries(self) -> Path:
        return self.out / "queries.jsonl"

    @property
    def trajectories(self) -> Path:
        return self.out / "trajectories.jsonl"

    @property
    def verdicts(self) -> Path:
        return self.out / "verdicts.jsonl"

    @property
    def rejected(self) -> Path:
        return self.out / "rejected.jsonl"

    @property
    def progress(self) -> Path:
        return self.out / "progress.jsonl"

    @property
    def usage(self) -> Path:
        return self.out / "usage.jsonl"

    @property
    def sft(self) -> Path:
        return self.out / "sft"

    @property
    def rl_tasks(self) -> Path:
        return self.out / "rl_tasks.jsonl"

    @property
    def summary(self) -> Path:
        return self.out / "summary.json"

    @property
    def report(self) -> Path:
        return self.out / "report.html"

    def work_ledger(self) -> WorkLedger:
        """The units of LLM work finished so far (``progress.jsonl``); markers written before the run kit
        (``{"stage", "key": unit}``) count under their ``"<stage>:<unit>"`` key."""
        return WorkLedger(self.progress, key_of=_progress_key)

    def rejections(self) -> RejectionWriter:
        """The rejection log (``rejected.jsonl``)."""
        return RejectionWriter(self.rejected)

    def usage_ledger(self, stage: str) -> UsageLedger:
        """A fresh usage record of one invocation of ``stage`` (appended to ``usage.jsonl`` by ``save``)."""
        return UsageLedger(self.usage, stage)


def _progress_key(rec: dict[str, Any]) -> str | None:
    key, stage = rec.get("key"), rec.get("stage")
    if not isinstance(key, str) or not isinstance(stage, str) or key.startswith(f"{stage}:"):
        return key if isinstance(key, str) else None
    return f"{stage}:{key}"


def read_usage(paths: Paths) -> dict[str, Any]:
    """Totals per stage over every invocation in ``usage.jsonl`` (resumed runs add up), as the summary shows
    them: :func:`~datadojo.runs.read_usage_totals` plus ``repaired`` and ``failed`` summed over the roles."""
    stages = read_usage_totals(paths.usage)
    for st in stages.values():
        st["repaired"] = sum(r["repaired"] for r in st["roles"].values())
        st["failed"] = sum(r["failed"] for r in st["roles"].values())
    return stages

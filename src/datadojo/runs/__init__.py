"""The run kit: what every long DataDojo job needs, written once (issue 23).

* :class:`RunFolder` — an output folder with a snapshot of the settings that made it; a resume with other
  settings is refused with one :class:`~datadojo.errors.ResumeError` naming each difference;
* :class:`WorkLedger` — a keyed, idempotent, append-only JSONL ledger of finished units of work (a unit is
  committed by one line; a torn last line left by a crash is cut off when the ledger opens);
* :class:`Rejection`, :class:`RejectionWriter`, :class:`Funnel` — one record of what a check removed and
  why, and the funnel (in → kept per step, reasons) written to ``funnel.json``;
* :class:`UsageLedger`, :class:`FailurePolicy` — LLM requests/tokens per stage and role, and one rule for
  when failed requests end a run;
* :data:`ProgressHook` — ``(stage, done, total)``, the one progress callback type;
* :class:`StageCache`, :func:`content_hash`, :func:`stage_key` — stage outputs cached under a key of the
  inputs' content, the settings and the code/prompt version.

This package sits in layer 1 (it imports only ``errors``, ``fs``, ``jsonl``, ``version``): pipelines,
eval, training and :mod:`datadojo.recipes` build on it.
"""

from __future__ import annotations

from datadojo.errors import ResumeError
from datadojo.runs.cache import CacheEntry, StageCache, code_version, content_hash, stage_key
from datadojo.runs.folder import RunFolder, settings_diff
from datadojo.runs.ledger import WorkLedger
from datadojo.runs.progress import ProgressHook, null_progress, stage_progress
from datadojo.runs.rejections import Funnel, Rejection, RejectionWriter, read_rejections
from datadojo.runs.usage import FailurePolicy, TooManyFailures, UsageLedger, read_usage_totals

__all__ = [
    "CacheEntry",
    "FailurePolicy",
    "Funnel",
    "ProgressHook",
    "Rejection",
    "RejectionWriter",
    "ResumeError",
    "RunFolder",
    "StageCache",
    "TooManyFailures",
    "UsageLedger",
    "WorkLedger",
    "code_version",
    "content_hash",
    "null_progress",
    "read_rejections",
    "read_usage_totals",
    "settings_diff",
    "stage_key",
    "stage_progress",
]

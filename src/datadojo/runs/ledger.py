"""A keyed, idempotent work ledger: one JSONL line per finished unit, the line *is* the commit.

Why: every resumable stage needs "which units are done?" that survives a crash at any byte. DataMind kept
``progress.jsonl`` markers, sailor ``units.jsonl``, the agent runner its trajectories file; each repaired
a torn tail on its own. Here: opening cuts off an unterminated last line (:func:`datadojo.jsonl.repair_tail`,
the only thing a crash mid-write can leave), :meth:`commit` appends and flushes one line per unit, and a
unit committed twice keeps its first record (idempotent), so a worker that redoes a unit after a crash
cannot double-count it. Outputs written *before* their unit's commit line that belong to an uncommitted
unit are the caller's to drop: :meth:`committed` filters records by their unit key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from datadojo.jsonl import JsonlAppender, iter_jsonl, repair_tail

__all__ = ["WorkLedger"]

T = TypeVar("T")


class WorkLedger:
    """``path`` (JSONL of ``{"key": ..., **fields}``): which units are done, and what each recorded."""

    def __init__(
        self,
        path: str | Path,
        *,
        fsync: bool = False,
        key_of: Callable[[dict[str, Any]], str | None] | None = None,
    ) -> None:
        """``key_of`` reads the unit key of a record written before the ledger's format (a folder made by an
        earlier version resumes instead of redoing its units); by default a record's ``key``."""
        self.path = Path(path)
        self.fsync = fsync
        self.repaired_bytes = repair_tail(self.path)
        self._records: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            for _, rec in iter_jsonl(self.path):
                if not isinstance(rec, dict):
                    continue
                key = key_of(rec) if key_of is not None else rec.get("key")
                if isinstance(key, str):
                    self._records.setdefault(key, rec)
        self._out: JsonlAppender | None = None

    def __contains__(self, key: object) -> bool:
        return key in self._records

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def done(self, key: str) -> bool:
        return key in self._records

    def get(self, key: str) -> dict[str, Any] | None:
        return self._records.get(key)

    def commit(self, key: str, **fields: Any) -> bool:
        """Mark ``key`` done with ``fields``; False (nothing written) when it already was."""
        if key in self._records:
            return False
        rec = {"key": key, **fields}
        if self._out is None:
            self._out = JsonlAppender(self.path, fsync=self.fsync)
        self._out.write(rec)
        self._records[key] = rec
        return True

    def todo(self, keys: Iterable[str]) -> list[str]:
        """The keys not yet committed, in the given order."""
        return [k for k in keys if k not in self._records]

    def committed(self, records: Iterable[T], key_of: Callable[[T], str | None]) -> list[T]:
        """Those ``records`` whose unit (``key_of(record)``) is committed: what a crash left half done goes."""
        return [r for r in records if key_of(r) in self._records]

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def __enter__(self) -> WorkLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""One rejection record and one funnel writer.

Why: DataMind's ``rejected.jsonl`` (``stage, key, reason, detail``), sailor's ``qc.jsonl`` reasons and
EnvLunch's in-memory ``BuildReport.rejections`` counter said the same thing three ways, and EnvLunch's funnel
never reached the disk. :class:`Rejection` is DataMind's record (the most complete of the three);
:class:`RejectionWriter` writes each ``(stage, key)`` once, so a unit redone after a crash does not log its
rejection twice; :class:`Funnel` counts what entered and left each step and writes ``funnel.json``
atomically, with the rejection reasons per step.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from datadojo.fs import write_json_atomic
from datadojo.jsonl import JsonlAppender, iter_jsonl, repair_tail

__all__ = ["Funnel", "Rejection", "RejectionWriter", "read_rejections"]


@dataclass(frozen=True)
class Rejection:
    """``stage`` removed unit ``key`` for ``reason`` (a short stable code); ``detail`` says it for people."""

    stage: str
    key: str
    reason: str
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        extra = d.pop("extra")
        return {**d, **extra}

    @classmethod
    def from_dict(cls, rec: dict[str, Any]) -> Rejection:
        known = {"stage", "key", "reason", "detail"}
        return cls(
            str(rec.get("stage", "")),
            str(rec.get("key", "")),
            str(rec.get("reason", "")),
            str(rec.get("detail", "")),
            {k: v for k, v in rec.items() if k not in known},
        )


def read_rejections(path: str | Path) -> list[Rejection]:
    """Every rejection in ``path`` (none when it does not exist)."""
    path = Path(path)
    if not path.exists():
        return []
    return [Rejection.from_dict(r) for _, r in iter_jsonl(path) if isinstance(r, dict)]


class RejectionWriter:
    """Append-only ``rejected.jsonl``; each ``(stage, key)`` written once across resumes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        repair_tail(self.path)
        self.records = read_rejections(self.path)
        self._seen = {(r.stage, r.key) for r in self.records}
        self._out: JsonlAppender | None = None

    def add(self, rejection: Rejection) -> bool:
        """Log one rejection; False when this ``(stage, key)`` was already logged."""
        if (rejection.stage, rejection.key) in self._seen:
            return False
        if self._out is None:
            self._out = JsonlAppender(self.path)
        self._out.write(rejection.to_dict())
        self._seen.add((rejection.stage, rejection.key))
        self.records.append(rejection)
        return True

    def reasons(self, stage: str | None = None) -> Counter[str]:
        return Counter(r.reason for r in self.records if stage is None or r.stage == stage)

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def __enter__(self) -> RejectionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Funnel:
    """Steps in order, each ``{"step", "in", "kept", "removed": {reason: n}}``; :meth:`write` saves them."""

    steps: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self, step: str, n_in: int, kept: int, removed: dict[str, int] | Counter[str] | None = None
    ) -> None:
        if kept > n_in:
            raise ValueError(f"funnel step {step!r}: kept {kept} > in {n_in}")
        reasons = {k: int(v) for k, v in sorted((removed or {}).items()) if v}
        self.steps.append({"step": step, "in": n_in, "kept": kept, "removed": reasons})

    def to_dict(self) -> dict[str, Any]:
        first = self.steps[0]["in"] if self.steps else 0
        last = self.steps[-1]["kept"] if self.steps else 0
        return {
            "steps": list(self.steps),
            "in": first,
            "kept": last,
            "yield": last / first if first else None,
        }

    def write(self, path: str | Path) -> Path:
        return write_json_atomic(path, self.to_dict())

"""One LLM usage ledger and one failure policy.

Why: DataMind's ``StageUsage``/``usage.jsonl``, the eval harness's rollout summary and sailor's call counters
each counted requests and tokens their own way, and each decided differently when failed requests end a
run. :class:`UsageLedger` counts requests, tokens, repairs and failures per ``(stage, role)`` and appends one
record per stage invocation to ``usage.jsonl`` (resumed runs add up: :func:`read_usage_totals`).
:class:`FailurePolicy` is the one rule: a stage fails (:class:`TooManyFailures`, exit status 3 like every
model-server failure) once more than ``max_failed_fraction`` of at least ``min_requests`` requests failed.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datadojo.errors import DataDojoError, ExitCode
from datadojo.jsonl import JsonlAppender, iter_jsonl

__all__ = ["FailurePolicy", "TooManyFailures", "UsageLedger", "read_usage_totals"]

COUNTS = ("requests", "prompt_tokens", "completion_tokens", "repaired", "failed")


class TooManyFailures(DataDojoError, RuntimeError):
    """More LLM requests failed than the failure policy allows; the model server is the likely cause."""

    exit_code = ExitCode.MODEL_SERVER


@dataclass(frozen=True)
class FailurePolicy:
    """Failed requests are tolerated (counted, the unit skipped) up to ``max_failed_fraction`` of the
    requests, judged once ``min_requests`` were made (so one early failure does not end a run)."""

    max_failed_fraction: float = 0.5
    min_requests: int = 8

    def check(self, stage: str, requests: int, failed: int) -> None:
        if requests >= self.min_requests and failed > self.max_failed_fraction * requests:
            raise TooManyFailures(
                f"{stage}: {failed} of {requests} LLM requests failed (more than "
                f"{self.max_failed_fraction:.0%}); check the model server, then rerun to resume"
            )


@dataclass
class UsageLedger:
    """LLM use of one stage invocation; :meth:`save` appends it to ``path``."""

    path: Path
    stage: str
    policy: FailurePolicy = field(default_factory=FailurePolicy)
    started: float = field(default_factory=time.perf_counter)
    roles: dict[str, dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: dict.fromkeys(COUNTS, 0))
    )

    def add(
        self,
        role: str,
        *,
        requests: int = 1,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        repaired: int = 0,
        failed: int = 0,
        check: bool = True,
    ) -> None:
        """Count requests of ``role``; raises :class:`TooManyFailures` when the policy says stop (unless
        ``check=False``: totals taken after the fact are saved first, then :meth:`check` decides)."""
        r = self.roles[role]
        r["requests"] += requests
        r["prompt_tokens"] += prompt_tokens
        r["completion_tokens"] += completion_tokens
        r["repaired"] += repaired
        r["failed"] += failed
        if check:
            self.check()

    def check(self) -> None:
        """Apply the failure policy to this invocation's totals."""
        self.policy.check(self.stage, self.total("requests"), self.total("failed"))

    def add_backend(self, role: str, backend: Any) -> None:
        """Add what a :class:`~datadojo.llm.base.ChatBackend` counted in its ``usage`` (no policy check)."""
        u = backend.usage
        self.add(
            role,
            requests=u.requests + u.failures,
            prompt_tokens=u.prompt_tokens,
            completion_tokens=u.completion_tokens,
            failed=u.failures,
            check=False,
        )

    def total(self, count: str) -> int:
        return sum(r[count] for r in self.roles.values())

    def record(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "roles": {k: dict(v) for k, v in self.roles.items()},
            "wall_s": round(time.perf_counter() - self.started, 4),
            "finished": time.time(),
        }

    def save(self) -> dict[str, Any]:
        rec = self.record()
        with JsonlAppender(self.path) as out:
            out.write(rec)
        return rec


def read_usage_totals(path: str | Path) -> dict[str, dict[str, Any]]:
    """Per stage: ``invocations``, ``wall_s`` and per-role counts summed over every record in ``path``."""
    path = Path(path)
    stages: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return stages
    for _, rec in iter_jsonl(path):
        if not isinstance(rec, dict):
            continue
        st = stages.setdefault(str(rec.get("stage")), {"invocations": 0, "wall_s": 0.0, "roles": {}})
        st["invocations"] += 1
        st["wall_s"] = round(st["wall_s"] + float(rec.get("wall_s", 0.0)), 4)
        for role, v in (rec.get("roles") or {}).items():
            tot = st["roles"].setdefault(role, dict.fromkeys(COUNTS, 0))
            for k in COUNTS:
                tot[k] += int(v.get(k, 0))
    return stages

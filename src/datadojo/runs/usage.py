"""One LLM usage ledger and one failure policy.

Why: DataMind's ``StageUsage``/``usage.jsonl``, the eval harness's rollout summary and sailor's call counters
each counted requests and tokens their own way, and each decided differently when failed requests end a
run. :class:`UsageLedger` counts requests, tokens, repairs and failures per ``(stage, role)`` and appends them
to ``usage.jsonl`` as they happen, a record per batch of ``flush_every`` requests and one at the end of the
invocation, all carrying the invocation's id (resumed runs add up: :func:`read_usage_totals`). Why batches:
an invocation used to write its one record when it finished, so an interrupted run lost every request it had
sent, and a resumed DataMind run reported 97 LLM requests for a job that had sent about 499.
:class:`FailurePolicy` is the one rule: a stage fails (:class:`TooManyFailures`, exit status 3 like every
model-server failure) once more than ``max_failed_fraction`` of at least ``min_requests`` requests failed.
"""

from __future__ import annotations

import time
import uuid
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


def _counts() -> defaultdict[str, dict[str, int]]:
    return defaultdict(lambda: dict.fromkeys(COUNTS, 0))


@dataclass
class UsageLedger:
    """LLM use of one stage invocation, appended to ``path`` as it goes (:meth:`flush`, every
    ``flush_every`` requests) and at the end (:meth:`save`); ``roles`` holds the invocation's totals.

    A kill loses at most the requests of the batch not yet flushed; a stage that is interrupted (Ctrl-C,
    an error) calls :meth:`flush` on its way out and loses none.
    """

    path: Path
    stage: str
    policy: FailurePolicy = field(default_factory=FailurePolicy)
    started: float = field(default_factory=time.perf_counter)
    roles: dict[str, dict[str, int]] = field(default_factory=_counts)
    flush_every: int = 16
    invocation: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    _pending: dict[str, dict[str, int]] = field(default_factory=_counts, init=False, repr=False)
    _flushed_at: float | None = field(default=None, init=False, repr=False)

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
        for counts in (self.roles[role], self._pending[role]):
            counts["requests"] += requests
            counts["prompt_tokens"] += prompt_tokens
            counts["completion_tokens"] += completion_tokens
            counts["repaired"] += repaired
            counts["failed"] += failed
        if sum(r["requests"] + r["failed"] for r in self._pending.values()) >= self.flush_every:
            self.flush()
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
        """The invocation's totals so far (what :func:`read_usage_totals` adds up from its records)."""
        return {
            "stage": self.stage,
            "invocation": self.invocation,
            "roles": {k: dict(v) for k, v in self.roles.items()},
            "wall_s": round(time.perf_counter() - self.started, 4),
            "finished": time.time(),
        }

    def flush(self, *, final: bool = False) -> None:
        """Append the counts since the last flush (and the wall time since then) as one record; nothing
        when there are none, unless ``final`` (the invocation's last record, written even when it sent no
        request, so that the invocation is counted)."""
        if not final and not self._pending:
            return
        now = time.perf_counter()
        since = self.started if self._flushed_at is None else self._flushed_at
        rec = {
            "stage": self.stage,
            "invocation": self.invocation,
            "roles": {k: dict(v) for k, v in self._pending.items()},
            "wall_s": round(now - since, 4),
            "finished": time.time(),
            "partial": not final,
        }
        with JsonlAppender(self.path) as out:
            out.write(rec)
        self._pending = _counts()
        self._flushed_at = now

    def __enter__(self) -> UsageLedger:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: object, tb: object) -> None:
        """A stage interrupted (Ctrl-C, cancelled) or failed inside ``with usage:`` flushes what it counted:
        those requests were sent, and the resumed run's totals must include them. A stage that ends
        normally is closed by :meth:`save`."""
        if exc_type is not None:
            self.flush()

    def save(self) -> dict[str, Any]:
        """End the invocation: append what was not flushed yet; return the invocation's totals."""
        self.flush(final=True)
        return self.record()


def read_usage_totals(path: str | Path) -> dict[str, dict[str, Any]]:
    """Per stage: ``invocations``, ``wall_s`` and per-role counts summed over every record in ``path``:
    the batches of interrupted invocations too. Records of one invocation share its ``invocation`` id (a
    record without one, from before the batches, is an invocation of its own)."""
    path = Path(path)
    stages: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return stages
    seen: set[tuple[str, str]] = set()
    for lineno, rec in iter_jsonl(path):
        if not isinstance(rec, dict):
            continue
        stage = str(rec.get("stage"))
        st = stages.setdefault(stage, {"invocations": 0, "wall_s": 0.0, "roles": {}})
        invocation = (stage, str(rec.get("invocation") or f"line {lineno}"))
        if invocation not in seen:
            seen.add(invocation)
            st["invocations"] += 1
        st["wall_s"] = round(st["wall_s"] + float(rec.get("wall_s", 0.0)), 4)
        for role, v in (rec.get("roles") or {}).items():
            tot = st["roles"].setdefault(role, dict.fromkeys(COUNTS, 0))
            for k in COUNTS:
                tot[k] += int(v.get(k, 0))
    return stages

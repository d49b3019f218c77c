"""Several replicas of one model: fewest-in-flight routing, and a replica that fails is benched a while.

A model served by several vLLM / SGLang servers is named once, with all its base URLs
(``openai:MODEL@http://a:8000/v1,http://b:8000/v1``). :class:`ReplicaSet` decides where each request
goes:

* **fewest in flight**: the request goes to the healthy replica with the fewest requests in flight (ties
  go round-robin), which balances replicas of different speed without any measurement: a slow replica
  keeps its requests longer, so it is picked less;
* **marked down**: a replica whose request failed in a way that says "this server" (connection refused or
  reset, timeout, 5xx, 429, a garbled body) is not picked for ``down_s`` seconds (a 429's Retry-After, when
  longer, wins); the failed request is retried at once on another replica. After ``down_s`` the replica
  gets requests again, and the first one is its health check;
* when every replica is down, requests go to the one that comes back first (with the usual backoff), so
  a run never stalls on its own bookkeeping.

Errors that belong to the request (a 400 for a prompt that is too long) do not bench a replica.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from datadojo.llm.base import ModelSpecError

__all__ = ["Replica", "ReplicaSet", "split_base_urls"]


def split_base_urls(base_url: str) -> list[str]:
    """The base URLs of a comma-separated list (each stripped of spaces and a trailing slash)."""
    urls = [u.strip().rstrip("/") for u in base_url.split(",")]
    if any(not u for u in urls):
        raise ModelSpecError(f"empty base URL in the list {base_url!r}")
    if len(set(urls)) != len(urls):
        raise ModelSpecError(f"a base URL appears twice in {base_url!r}")
    return urls


@dataclass
class Replica:
    """One server: where it is, what it is doing, and until when it is benched."""

    url: str
    in_flight: int = 0
    requests: int = 0
    failures: int = 0
    down_until: float = 0.0
    last_error: str | None = None

    def up(self, now: float) -> bool:
        return now >= self.down_until

    def to_dict(self, now: float | None = None) -> dict[str, Any]:
        now = time.monotonic() if now is None else now
        return {
            "url": self.url,
            "requests": self.requests,
            "failures": self.failures,
            "in_flight": self.in_flight,
            "down_for_s": round(max(0.0, self.down_until - now), 3),
            "last_error": self.last_error,
        }


class ReplicaSet:
    """Routing state over ``urls`` (see the module docstring). Not thread-safe: one event loop uses it."""

    def __init__(
        self, urls: Sequence[str], *, down_s: float = 30.0, clock: Callable[[], float] = time.monotonic
    ):
        if not urls:
            raise ModelSpecError("a replica set needs at least one base URL")
        if not down_s >= 0:
            raise ModelSpecError(f"down_s must be >= 0, got {down_s!r}")
        self.replicas = [Replica(u) for u in urls]
        self.down_s = float(down_s)
        self._clock = clock
        self._next = 0

    def __len__(self) -> int:
        return len(self.replicas)

    def pick(self) -> Replica:
        """The replica for the next request (counted as in flight until :meth:`done`)."""
        reps = self.replicas
        if len(reps) == 1:
            chosen = reps[0]
        else:
            now = self._clock()
            healthy = [r for r in reps if r.up(now)]
            if healthy:
                # Fewest in flight; among equals, the first at or after a rotating start.
                start = self._next
                self._next = (self._next + 1) % len(reps)
                order = {id(r): (i - start) % len(reps) for i, r in enumerate(reps)}
                chosen = min(healthy, key=lambda r: (r.in_flight, order[id(r)]))
            else:
                chosen = min(reps, key=lambda r: r.down_until)
        chosen.in_flight += 1
        chosen.requests += 1
        return chosen

    def done(self, replica: Replica) -> None:
        replica.in_flight -= 1

    def failed(self, replica: Replica, cause: str, *, retry_after: float | None = None) -> None:
        """Bench ``replica`` for ``down_s`` (or ``retry_after`` when longer)."""
        replica.failures += 1
        replica.last_error = cause
        if len(self.replicas) > 1:
            replica.down_until = self._clock() + max(self.down_s, retry_after or 0.0)

    def another_up(self, replica: Replica) -> bool:
        """Whether a replica other than ``replica`` can take a retry now (then no backoff is needed)."""
        now = self._clock()
        return any(r is not replica and r.up(now) for r in self.replicas)

    def stats(self) -> list[dict[str, Any]]:
        now = self._clock()
        return [r.to_dict(now) for r in self.replicas]

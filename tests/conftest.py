"""Suite-wide settings that keep test verdicts independent of the machine's speed.

Hypothesis fails an example that runs longer than its ``deadline`` (200 ms by default): on a loaded
machine that is a verdict decided by the wall clock, so the suite turns the deadline off, and the
``too_slow`` health check (data generation timed against the clock) with it. Properties are still
checked on every example; a genuinely slow function is caught by benchmarks, not by tests.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile("datadojo", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("datadojo")

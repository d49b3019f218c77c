"""Suite-wide fixtures and settings.

**Real public data** in ``../shared/data`` (relative to the repository root): tests that read real benchmark
files take the :func:`shared_data` fixture (``shared_data("spider", "database")`` returns that path, or skips
the test with a visible reason naming it when it is absent), or carry
``@pytest.mark.requires_data("spider/database")`` when they only need it to exist. The data is never copied
into the repository; see ``../shared/data/README``.

**Verdicts independent of the machine's speed**: Hypothesis fails an example that runs longer than its
``deadline`` (200 ms by default): on a loaded machine that is a verdict decided by the wall clock, so the
suite turns the deadline off, and the ``too_slow`` health check (data generation timed against the clock)
with it. Properties are still checked on every example; a genuinely slow function is caught by benchmarks,
not by tests.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("datadojo", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("datadojo")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def need_shared_data(*parts: str) -> Path:
    """``SHARED_DATA / parts``, or skip the calling test naming the absent path."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    return path


@pytest.fixture(scope="session")
def shared_data() -> Callable[..., Path]:
    """``shared_data(*parts)``: a path under ``../shared/data``; the test is skipped when it is absent."""
    return need_shared_data


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "requires_data(*paths): skip unless every path exists under ../shared/data"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("requires_data"):
        for rel in mark.args:
            need_shared_data(*Path(rel).parts)

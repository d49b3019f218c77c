"""One local Ray for every Ray test of the session (starting one takes 10-30 s on a loaded 2-core machine)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    """A local Ray with 2 CPUs, started once and shared by the Ray test modules."""
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'datadojo[ray]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()

"""Fixtures of the DataMind synthesis tests; the scripted teacher, judge and sandbox live in ``datamind_fakes``.

Helpers are imported from a uniquely named module rather than from ``conftest``: the suite has several
``conftest.py`` files and ``import conftest`` resolves to whichever was loaded first.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from datamind_fakes import write_csv


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    return write_csv(data / "orders.csv")

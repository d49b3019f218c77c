"""Fixtures of the DataMind synthesis tests; the scripted teacher, judge and sandbox live in
:mod:`datadojo.testing.datamind_teacher` (the one home of test doubles)."""

from __future__ import annotations

from pathlib import Path

import pytest

from datadojo.testing.datamind_teacher import write_csv


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    return write_csv(data / "orders.csv")

"""The suite's shared-data fixture and marker (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


def test_absent_shared_data_skips_naming_the_path(shared_data: Callable[..., Path]) -> None:
    with pytest.raises(pytest.skip.Exception, match=r"shared data absent: .*no-such-dataset/x\.csv"):
        shared_data("no-such-dataset", "x.csv")


@pytest.mark.requires_data("dabench")
def test_marked_test_runs_only_with_its_data(shared_data: Callable[..., Path]) -> None:
    assert shared_data("dabench").is_dir()

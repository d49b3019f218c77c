from __future__ import annotations

from pathlib import Path

import pytest

from datadojo.testing.sailor_teacher import FakeSailor


@pytest.fixture
def fake() -> FakeSailor:
    return FakeSailor()


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """A small dataset folder: a README, a CSV in a subfolder, a JSON metadata file."""
    root = tmp_path / "penguins"
    (root / "data").mkdir(parents=True)
    (root / "README.md").write_text("# Penguins\nMeasurements of 5 penguins from 2 islands.\n")
    (root / "data" / "penguins.csv").write_text(
        "species,island,mass_g\nAdelie,Torgersen,3750\nAdelie,Biscoe,3800\nGentoo,Biscoe,5000\n"
        "Gentoo,Biscoe,4800\nChinstrap,Dream,3500\n"
    )
    (root / "meta.json").write_text('{"rows": 5, "columns": ["species", "island", "mass_g"]}\n')
    return root

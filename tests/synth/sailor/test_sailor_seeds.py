"""Seeds (§4.1, App. A.1): the bundled eight intents over L0–L3, and a replacement file."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from datadojo.synth.sailor.seeds import LEVELS, load_seeds


def test_bundled_seeds_cover_the_four_levels() -> None:
    seeds = load_seeds()
    assert len(seeds) == 8 and len({s.id for s in seeds}) == 8
    assert Counter(s.level for s in seeds) == {"L0": 2, "L1": 3, "L2": 2, "L3": 1}  # A.1: one L3 intent
    assert set(LEVELS) == {s.level for s in seeds}
    # A.1: L3 targets "scientific usability, robustness, and alternative-explanation checks"
    (l3,) = [s.intent for s in seeds if s.level == "L3"]
    assert all(word in l3 for word in ("usability", "robust", "alternative explanations"))
    assert [s.id for s in load_seeds(only=["L2", "L0-map"])] == ["L0-map", "L2-alignment", "L2-consistency"]


def test_replacement_file_and_its_errors(tmp_path: Path) -> None:
    p = tmp_path / "seeds.json"
    p.write_text(json.dumps([{"id": "mine", "level": "L1", "intent": "Count the stations."}]))
    assert [s.intent for s in load_seeds(p)] == ["Count the stations."]
    p.write_text(
        json.dumps(
            {"seeds": [{"id": "a", "level": "L1", "intent": "x"}, {"id": "a", "level": "L2", "intent": "y"}]}
        )
    )
    with pytest.raises(ValueError, match="seed 2: duplicate id 'a'"):
        load_seeds(p)
    p.write_text(json.dumps({"seeds": [{"id": "a/b", "level": "L1", "intent": "x"}]}))
    with pytest.raises(ValueError, match="seed 1: field 'id'"):
        load_seeds(p)
    p.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_seeds(p)
    with pytest.raises(ValueError, match="cannot read"):
        load_seeds(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="no seed or level named L9"):
        load_seeds(only=["L9"])

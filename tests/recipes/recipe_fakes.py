"""Helpers of the recipe tests: a small taxonomy, recipe files, and the per-pipeline fake teachers.

The fake teachers are the pipelines' own test doubles (``tests/synth/datamind/datamind_fakes.py``,
:class:`datadojo.synth.sailor.testing.FakeSailor`), served by the loopback server; this module only puts the
DataMind one on the import path (a uniquely named module, as the other test folders do).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DATAMIND_FAKES = Path(__file__).resolve().parents[1] / "synth" / "datamind"
if str(DATAMIND_FAKES) not in sys.path:
    sys.path.insert(0, str(DATAMIND_FAKES))

import datamind_fakes  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: Three categories: one answered consistently, one rescued by reflection, one inconsistent forever.
CATEGORIES = ("Aggregation", "Counting", "Comparison")


def small_taxonomy(path: Path) -> Path:
    from datadojo.synth.datamind.taxonomy import load_taxonomy  # noqa: F401  (the bundled file's reader)

    bundled = Path(__file__).resolve().parents[2] / "src" / "datadojo" / "synth" / "datamind" / "taxonomy.json"
    data = json.loads(bundled.read_text(encoding="utf-8"))
    data["categories"] = [c for c in data["categories"] if c["name"] in CATEGORIES]
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def teacher(req):  # noqa: ANN001, ANN201
    return datamind_fakes.teacher(req)


def judge(req):  # noqa: ANN001, ANN201
    return datamind_fakes.judge(req)


write_csv = datamind_fakes.write_csv

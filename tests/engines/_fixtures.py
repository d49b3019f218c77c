"""Where the fixtures built by ``make_fixtures.py`` are, and helpers shared by the engine tests."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FX = Path(os.environ["DATADOJO_ENGINE_FIXTURES"])
MANIFEST: dict[str, Any] = json.loads((FX / "manifest.json").read_text(encoding="utf-8"))
MODEL = FX / "model"
EXPORTS = FX / "exports"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def masked_spans(ids: list[int], keep: list[bool]) -> list[list[int]]:
    """The maximal runs of ``ids`` where ``keep`` is true (the trained spans of one sequence)."""
    spans: list[list[int]] = []
    prev = False
    for tok, k in zip(ids, keep, strict=True):
        if k:
            if not prev:
                spans.append([])
            spans[-1].append(tok)
        prev = k
    return spans

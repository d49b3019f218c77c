"""Exploration seeds (SciDataSailor §4.1, App. A.1): broad intents over a dataset folder, levels L0–L3.

A seed σ is not a question but an exploration intent x_σ; its level ℓ(σ) says how much evidence and reasoning
the questions derived from it need. App. A.1 gives the levels (L0 dataset map; L1 field semantics, basic
statistics, evidence checks; L2 cross-file alignment, entity mapping, multi-source consistency; L3 scientific
usability and robustness) but not the intents' wording, so the eight intents are ours and live in a data file
(``seeds.json`` next to this module) that users replace with ``--seeds FILE``.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from datadojo.errors import DataDojoError

__all__ = ["LEVELS", "Seed", "SeedError", "default_seeds_path", "load_seeds"]

Level = Literal["L0", "L1", "L2", "L3"]
LEVELS: tuple[str, ...] = ("L0", "L1", "L2", "L3")


class SeedError(DataDojoError, ValueError):
    """A seed file that cannot be used, or no seed to explore with; the message names the file and seed."""


class Seed(BaseModel):
    """One exploration seed: a stable ``id`` (used in task ids and resume keys), its level and the intent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    level: Level
    intent: str = Field(min_length=1)

    @field_validator("id")
    @classmethod
    def _id_chars(cls, value: str) -> str:
        if not all(c.isalnum() or c in "-_." for c in value):
            raise ValueError(f"seed id {value!r} may only hold letters, digits, '-', '_' and '.'")
        return value


def default_seeds_path() -> Path:
    """The bundled eight-seed file."""
    return Path(str(resources.files("datadojo.synth.sailor") / "seeds.json"))


def load_seeds(path: str | Path | None = None, *, only: list[str] | None = None) -> list[Seed]:
    """Seeds from a JSON file (``{"seeds": [...]}`` or a bare list); ``only`` keeps those ids or levels.

    Errors name the file and the seed (by position) that is wrong; duplicate ids are an error because the id
    keys resume and task identity.
    """
    p = Path(path) if path is not None else default_seeds_path()
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SeedError(f"{p}: cannot read the seed file ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise SeedError(f"{p}: not valid JSON ({exc})") from exc
    items = data.get("seeds") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise SeedError(f'{p}: expected a non-empty list of seeds (or an object with a "seeds" list)')
    seeds: list[Seed] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        try:
            seed = Seed.model_validate(item)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(x) for x in first["loc"]) or "(seed)"
            raise SeedError(f"{p}: seed {i + 1}: field {field!r}: {first['msg']}") from exc
        if seed.id in seen:
            raise SeedError(f"{p}: seed {i + 1}: duplicate id {seed.id!r}")
        seen.add(seed.id)
        seeds.append(seed)
    if only:
        wanted = set(only)
        unknown = wanted - {s.id for s in seeds} - set(LEVELS)
        if unknown:
            raise SeedError(f"{p}: no seed or level named {', '.join(sorted(unknown))}")
        seeds = [s for s in seeds if s.id in wanted or s.level in wanted]
    return seeds

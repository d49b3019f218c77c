"""DataMind's task taxonomy as data: 18 categories, each with exemplars, a workflow *k* and where it applies.

DataMind §3.2 ("Query Categorization and Synthesis", Step 2) refines a taxonomy into 18 fine-grained
categories and curates 4–6 exemplar queries per category "that vary in complexity and domains"; §3.2
("Knowledge-Augmented Trajectory Sampling", Step 1) adds a manually crafted high-level workflow *k* per
category, refined into step-by-step instructions for categories with low inter-trajectory consistency.
The paper publishes none of these texts, so the bundled ``taxonomy.json`` is ours; users replace it with
``--taxonomy FILE`` (same schema, validated on load with the file and category named in errors).

Each category also carries an *applicability rule* over the file's columns (``requires``: least numbers of
numeric / datetime / categorical / text columns, of columns and of tables), since "a file without time
columns cannot generate Time-based Calculation queries" (§3.2), and the expected answer form, which the
agent prompt shows as the format of the final answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from datadojo.errors import DataDojoError

__all__ = [
    "CATEGORY_NAMES",
    "Category",
    "ColumnCounts",
    "Requirement",
    "Taxonomy",
    "TaxonomyError",
    "column_counts",
    "load_taxonomy",
]

#: The 18 categories DataMind names (§3.2, Figure 1a), in the paper's order.
CATEGORY_NAMES: tuple[str, ...] = (
    "Aggregation",
    "Counting",
    "Comparison",
    "Arithmetic Calculation",
    "Ranking",
    "Statistical Analysis",
    "Distribution Analysis",
    "Correlation Analysis",
    "Causal Analysis",
    "Time-based Calculation",
    "Impact Analysis",
    "Anomaly Detection",
    "Fact Checking",
    "Feature Engineering",
    "Data Preprocessing",
    "Descriptive Analysis",
    "Multi-hop Numerical Reasoning",
    "Domain Specific Numerical Reasoning",
)


class TaxonomyError(DataDojoError, ValueError):
    """A taxonomy file that cannot be used; the message names the file and the category or field."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Requirement(_Model):
    """Least numbers of columns of each class a file needs for a category (any table may supply them)."""

    numeric: int = Field(0, ge=0)
    datetime: int = Field(0, ge=0)
    categorical: int = Field(0, ge=0)
    text: int = Field(0, ge=0)
    columns: int = Field(0, ge=0)
    tables: int = Field(0, ge=0)


class Category(_Model):
    """One task category (see the module docstring)."""

    name: str
    definition: str
    exemplars: list[str] = Field(min_length=4, max_length=6)
    workflow: str
    workflow_detailed: str | None = None
    hard: bool = False
    requires: Requirement = Field(default_factory=Requirement)
    answer_form: str

    @field_validator("name", "definition", "workflow", "answer_form")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v.strip()

    def knowledge(self, detail: Literal["auto", "always", "never"] = "auto") -> str:
        """The workflow *k* shown to the teacher: the step-by-step variant for hard categories under
        ``auto`` (§3.2: finer instructions where consistency is low), always or never as asked."""
        if self.workflow_detailed and (detail == "always" or (detail == "auto" and self.hard)):
            return self.workflow_detailed
        return self.workflow


@dataclass(frozen=True)
class ColumnCounts:
    """How many columns of each class a file has (see :func:`column_counts`)."""

    numeric: int = 0
    datetime: int = 0
    categorical: int = 0
    text: int = 0
    columns: int = 0
    tables: int = 0


_TIME_NAME = re.compile(r"(?i)(^|[_ \-])(date|time|timestamp|year|month|day|week|quarter|period)s?($|[_ \-])")


def column_counts(tables: Iterable[tuple[list[str], list[str]]]) -> ColumnCounts:
    """Count column classes over ``(column names, inferred types)`` pairs, one pair per table.

    Types are :data:`datadojo.corpus.COLUMN_TYPES`. A column is *datetime* when its type is ``datetime`` or
    its name says it is a date or period (``year``, ``order_date``; years are usually stored as integers);
    *numeric* when ``integer`` / ``float`` and not such a period column; *categorical* when ``string`` or
    ``boolean``; *text* when ``text``.
    """
    n = {"numeric": 0, "datetime": 0, "categorical": 0, "text": 0, "columns": 0, "tables": 0}
    for names, types in tables:
        n["tables"] += 1
        for name, typ in zip(names, types, strict=False):
            n["columns"] += 1
            if typ == "datetime" or (typ in ("integer", "float", "string") and _TIME_NAME.search(name)):
                n["datetime"] += 1
            elif typ in ("integer", "float"):
                n["numeric"] += 1
            elif typ in ("string", "boolean"):
                n["categorical"] += 1
            elif typ == "text":
                n["text"] += 1
    return ColumnCounts(**n)


class Taxonomy(_Model):
    """The categories, by name, in file order."""

    version: int = 1
    note: str = ""
    categories: list[Category] = Field(min_length=1)

    @field_validator("categories")
    @classmethod
    def _unique(cls, cats: list[Category]) -> list[Category]:
        seen: set[str] = set()
        for c in cats:
            if c.name in seen:
                raise ValueError(f"category {c.name!r} appears twice")
            seen.add(c.name)
        return cats

    def get(self, name: str) -> Category:
        for c in self.categories:
            if c.name == name:
                return c
        raise KeyError(f"no category {name!r} in the taxonomy (have: {', '.join(self.names)})")

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.categories]

    def applicable(self, counts: ColumnCounts) -> list[Category]:
        """Categories whose requirement the file meets, in taxonomy order."""
        out = []
        for c in self.categories:
            r = c.requires
            if all(getattr(counts, f) >= getattr(r, f) for f in Requirement.model_fields):
                out.append(c)
        return out


def load_taxonomy(path: str | Path | None = None) -> Taxonomy:
    """The taxonomy in ``path`` (JSON), or the bundled one; errors name the file and the bad field."""
    if path is None:
        text = (resources.files("datadojo.synth.datamind") / "taxonomy.json").read_text(encoding="utf-8")
        where = "bundled taxonomy.json"
    else:
        where = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise TaxonomyError(f"{where}: cannot read the taxonomy: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaxonomyError(f"{where}: not valid JSON ({exc})") from exc
    try:
        return Taxonomy.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = list(first["loc"])
        if len(loc) >= 2 and loc[0] == "categories" and isinstance(loc[1], int):
            cats = data.get("categories", []) if isinstance(data, dict) else []
            name = cats[loc[1]].get("name") if loc[1] < len(cats) and isinstance(cats[loc[1]], dict) else None
            loc[1] = f"{loc[1]} ({name})" if name else loc[1]
        field = ".".join(str(p) for p in loc) or "(file)"
        raise TaxonomyError(f"{where}: field {field}: {first['msg']}") from exc

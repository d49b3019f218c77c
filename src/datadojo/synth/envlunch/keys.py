"""Column roles: which columns are keys, identifiers, measures, categories, time, flags or free text.

EnvLunch §3 ("Counterfactual Multi-Environment Verification") rescales "every measure column" of a
dataframe copy by a random factor "while identifier and key columns are never changed". The paper does not
say how the three are told apart; these are the rules used here (documented in ``docs/envlunch.md`` and
tested on the Spider databases):

1. **key** — the column is part of the table's primary key, or of a foreign key on either side (the
   referencing columns and the referenced columns). Declared structure wins over every heuristic.
2. **identifier** — not a key, and either its name ends in an identifier word (the last token of the name,
   split on ``_``, spaces and camelCase, is one of :data:`ID_WORDS`: ``id``, ``code``, ``key``, ``no``,
   ``num``, ``uuid``, ``zip``, ``phone``, …), or it is the table's *first* column and holds unique integers
   (an undeclared surrogate key). Identifiers are never rescaled and never aggregated.
3. **temporal** — a declared type mentioning DATE/TIME/YEAR, a name whose last token is a time word
   (``year``, ``time``, ``month``, …), a name containing a date word anywhere (``date``, ``dob``,
   ``timestamp``, …: ``date_from``), or text values shaped like ISO dates. Shifting a year by a
   factor makes no sense, so these are not measures.
4. **flag** — numeric with values in {0, 1} only.
5. **measure** — numeric (every non-null value is an ``int``/``float``; text that merely looks numeric is
   not), at least two distinct values, and none of the above. These are aggregated by the SQL and pandas
   actions and rescaled in pandas copies.
6. **category** — non-numeric, at least two distinct values, and values repeat (distinct count at most
   half the non-null count, or at most 20). Used for equality filters and grouping.
7. **text** — everything else (names, descriptions, unique strings).

A column with no non-null value is **empty** and never used.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from datadojo.synth.envlunch.environment import Environment, TableData

__all__ = [
    "DATE_WORDS",
    "ID_WORDS",
    "ROLES",
    "TIME_WORDS",
    "ColumnInfo",
    "Role",
    "column_roles",
    "is_number",
    "name_tokens",
    "table_roles",
]

Role = Literal["key", "identifier", "temporal", "flag", "measure", "category", "text", "empty"]
ROLES: tuple[str, ...] = ("key", "identifier", "temporal", "flag", "measure", "category", "text", "empty")

#: Last-token words that make a column an identifier (rule 2).
ID_WORDS = frozenset(
    {
        "id",
        "ids",
        "code",
        "codes",
        "key",
        "no",
        "num",
        "nbr",
        "uuid",
        "guid",
        "zip",
        "zipcode",
        "postcode",
        "phone",
        "fax",
        "ssn",
        "isbn",
        "email",
        "url",
        "number",
    }
)
#: Words that make a column temporal wherever they appear in its name (rule 3).
DATE_WORDS = frozenset({"date", "dates", "datetime", "timestamp", "dob", "birthday"})
#: Last-token words that make a column temporal (rule 3).
TIME_WORDS = frozenset({"year", "years", "yr", "time", "month", "day", "hour"})
_ISO_DATE = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


@dataclass(frozen=True)
class ColumnInfo:
    """What synthesis needs to know about one column."""

    table: str
    name: str
    role: Role
    n_distinct: int
    n_null: int
    integer: bool

    @property
    def numeric(self) -> bool:
        return self.role in ("measure", "flag")


def name_tokens(name: str) -> list[str]:
    """Split a column name into lower-case words on ``_``, spaces, dashes, dots and camelCase."""
    out: list[str] = []
    for part in re.split(r"[\s_\-.]+", name):
        out.extend(t.lower() for t in _CAMEL.findall(part))
    return out or [name.lower()]


def is_number(v: Any) -> bool:
    """A real number stored as a number (``bool`` and numeric-looking text are not)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def _declared_temporal(decl: str) -> bool:
    d = decl.upper()
    return any(w in d for w in ("DATE", "TIME", "YEAR"))


def table_roles(table: TableData, key_columns: Iterable[str]) -> dict[str, ColumnInfo]:
    """Classify every column of one table (rules 1–7 of the module docstring)."""
    keys = set(key_columns) | set(table.primary_key)
    out: dict[str, ColumnInfo] = {}
    for i, col in enumerate(table.columns):
        values = [r[i] for r in table.rows]
        present = [v for v in values if v is not None]
        types = set(map(type, present))
        if float in types:
            present = [v for v in present if v == v]  # drop NaN
        distinct = set(present)
        numeric = bool(present) and types <= {int, float}
        integer = numeric and (types == {int} or all(float(v).is_integer() for v in distinct))
        tokens = name_tokens(col)
        decl = table.decl_types[i] if i < len(table.decl_types) else ""
        role: Role
        if not present:
            role = "empty"
        elif col in keys:
            role = "key"
        elif tokens[-1] in ID_WORDS or (
            i == 0 and integer and len(distinct) == len(present) and len(present) >= 2
        ):
            role = "identifier"
        elif (
            _declared_temporal(decl)
            or tokens[-1] in TIME_WORDS
            or any(t in DATE_WORDS for t in tokens)
            or (
                not numeric
                and sum(1 for v in present[:20] if isinstance(v, str) and _ISO_DATE.match(v)) >= 1
                and all(isinstance(v, str) and _ISO_DATE.match(v) for v in present[:20])
            )
        ):
            role = "temporal"
        elif numeric and distinct <= {0, 1}:
            role = "flag"
        elif numeric and len(distinct) >= 2:
            role = "measure"
        elif (
            not numeric and len(distinct) >= 2 and (len(distinct) <= 20 or 2 * len(distinct) <= len(present))
        ):
            role = "category"
        else:
            role = "text"
        out[col] = ColumnInfo(table.name, col, role, len(distinct), len(values) - len(present), integer)
    return out


def column_roles(env: Environment) -> dict[str, dict[str, ColumnInfo]]:
    """Roles of every column of every table of ``env`` (table → column → :class:`ColumnInfo`).

    Computed once per environment and cached on it (every task drawn from it needs them).
    """
    cached = env.__dict__.get("_roles")
    if cached is not None:
        return cached
    keys: dict[str, set[str]] = {t: set() for t in env.tables}
    for fk in env.foreign_keys:
        keys[fk.table].update(fk.columns)
        keys[fk.ref_table].update(fk.ref_columns)
    roles = {name: table_roles(t, keys[name]) for name, t in env.tables.items()}
    env.__dict__["_roles"] = roles
    return roles

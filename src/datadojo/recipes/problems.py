"""What is wrong with a recipe file, found before it runs: :class:`Problem` (where, what) and
:class:`RecipeProblems`, every problem at once; and the key checks of a settings table against a pydantic
class at every nesting level, with the closest valid name (:func:`unknown_keys`, :func:`model_problems`).

A module of its own below :mod:`.config` and :mod:`.checks`, which both use it.
"""

from __future__ import annotations

import difflib
import json
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from datadojo.config import ConfigError
from datadojo.errors import DataDojoError, ExitCode

__all__ = [
    "Problem",
    "RecipeProblems",
    "closest",
    "model_problems",
    "near_key",
    "settings_in",
    "unknown_keys",
    "without_keys",
]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a recipe before it runs: where (``[stages.sft] max_stepz``, ``models.student``)
    and what, with what to do about it; ``server``: a model server that does not answer (exit 3) rather
    than a bad file or setting (exit 2)."""

    where: str
    what: str
    server: bool = False

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


class RecipeProblems(ConfigError):
    """Every problem found in a recipe before its first stage, listed at once (``recipe plan`` shows them under
    the plan; ``recipe run`` refuses to start). Exit 3 when the only problems are unreachable model servers
    (as the stage commands), else 2."""

    def __init__(self, problems: Sequence[Problem], source: str = "", data: Any = None) -> None:
        self.problems = list(problems)
        self.source = source
        self.data = data  # the file's table, for the checks a later layer adds (its sections)
        only_servers = all(p.server for p in self.problems)
        self.exit_code = ExitCode.MODEL_SERVER if only_servers else ExitCode.BAD_INPUT
        head = f"{source}: " if source else ""
        if len(self.problems) == 1:
            super().__init__(f"{head}{self.problems[0]}")
        else:
            lines = "\n".join(f"  - {p}" for p in self.problems)
            super().__init__(f"{head}{len(self.problems)} problems before the first stage:\n{lines}")


def closest(name: str, options: Iterable[str]) -> str:
    """``"; did you mean X?"`` for the option nearest ``name`` (empty when none is near)."""
    match = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
    return f"; did you mean {match[0]}?" if match else ""


def settings_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds (``OptimConfig``, ``OptimConfig | None``), else ``None``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = settings_in(arg)
            if found is not None:
                return found
    return None


def near_key(prefix: str, key: str, fields: Iterable[str]) -> str:
    """The suggestion for ``prefix + key`` among ``fields`` of the same level, named in full (``optim.lr``)."""
    match = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.6)
    return f"; did you mean {prefix}{match[0]}?" if match else ""


def unknown_keys(model: type[BaseModel], data: Mapping[str, Any], prefix: str) -> list[tuple[str, str]]:
    """Unknown keys of ``data`` for ``model`` at every nesting level: ``(dotted key, suggestion)``."""
    out = []
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            out.append((prefix + key, near_key(prefix, key, model.model_fields)))
            continue
        inner = settings_in(field.annotation)
        if inner is not None and isinstance(value, Mapping):
            out += unknown_keys(inner, value, f"{prefix}{key}.")
    return out


def without_keys(data: dict[str, Any], dotted: Sequence[str]) -> dict[str, Any]:
    """``data`` with the dotted keys removed (to validate the values of a section with a misspelt key)."""
    out = json.loads(json.dumps(data, default=str)) if dotted else data
    for key in dotted:
        *parents, leaf = key.split(".")
        node = out
        for p in parents:
            node = node.get(p, {})
        if isinstance(node, dict):
            node.pop(leaf, None)
    return out


def model_problems(cls: type[BaseModel], data: Mapping[str, Any]) -> list[Problem] | None:
    """The problems of ``data`` as ``cls``: each unknown key at any level with the closest valid name, then
    the values (validated without those keys, so each problem is said once); ``None`` when it validates."""
    unknown = unknown_keys(cls, data, "")
    problems = [Problem(key, f"unknown key{hint}") for key, hint in unknown]
    try:
        cls.model_validate(without_keys(dict(data), [k for k, _ in unknown]))
    except (DataDojoError, ValueError) as exc:
        problems.append(Problem(cls.__name__, str(exc)))
    return problems or None

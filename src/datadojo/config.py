"""The one style of DataDojo's configuration objects: :class:`Settings`, a frozen pydantic v2 model.

Why pydantic rather than dataclasses: a ``Literal`` field is checked from its type, so the allowed values are
written once (and :func:`choices` hands them to the CLI); ``Field(description=...)`` keeps the help text with
the field (:func:`field_help`), so a typer option does not repeat it; JSON / TOML files load with errors
that name the field; and the validation is an established library's rather than a home-made one.
Data *records* (``SamplingParams``, ``Completion``, ``Trajectory``, ``Task``…) stay frozen dataclasses:
they are built in hot loops, by the million, from values the code itself produced.

Every configuration class derives from :class:`Settings`:

* ``extra="forbid"`` (a misspelt keyword is an error, not a silently kept default), ``frozen=True`` (one
  object is shared by a pool, a Ray actor, a forked worker; it pickles like any model);
* :meth:`Settings.replace` is ``dataclasses.replace`` for settings: a copy with some fields changed, *validated
  again* (pydantic's ``model_copy(update=...)`` skips validation);
* :meth:`Settings.to_dict` is what ``dataclasses.asdict`` gave (nested settings as dicts);
* an invalid value raises :class:`ConfigError` (a :class:`~datadojo.errors.DataDojoError`, so the CLI prints
  one line, and a ``ValueError``, so ``except ValueError`` keeps working), naming the class and field. A
  validator that raises an error class of its own (``ConfigError``, ``EvalError``, ``DemoError``…) has it
  re-raised unchanged; a plain ``ValueError`` from a validator becomes a ``ConfigError`` with its message.

Layer 0: imports pydantic, the standard library and :mod:`datadojo.errors` only.
"""

from __future__ import annotations

import types
import typing
from typing import Any, ClassVar, Literal, TypeVar, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError

from datadojo.errors import DataDojoError

__all__ = ["ConfigError", "Settings", "choices", "config_default", "config_help", "field_help"]

S = TypeVar("S", bound="Settings")


class ConfigError(DataDojoError, ValueError):
    """A configuration value or file that cannot be used; the message names the class or file and the field."""


def _error_from(cls: type, exc: ValidationError) -> Exception:
    """One exception for a failed validation: a validator's own error class as is, else a ConfigError."""
    name = cls.__name__
    parts: list[str] = []
    for err in exc.errors(include_url=False):
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, BaseException) and type(cause) not in (ValueError, AssertionError):
            return cause  # a validator's own error class (ConfigError, EvalError, DemoError...): as raised
        loc = ".".join(str(p) for p in err["loc"])
        if isinstance(cause, BaseException):  # a validator's message, written to be read as is
            text = str(cause)
            parts.append(text if text.startswith(name) else f"{name}: {text}")
        else:
            where = f"{name}.{loc}" if loc else name
            got = "" if err["type"] in ("missing", "extra_forbidden") else f", got {err['input']!r}"
            parts.append(f"{where}: {err['msg'].lower()}{got}")
    return ConfigError("; ".join(parts))


class Settings(BaseModel):
    """Base of every configuration class (module docstring): frozen, strict keys, validated on every change.

    Positional arguments fill the fields in declaration order, as they did for the dataclasses these
    classes were.
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(
        extra="forbid",
        frozen=True,
        validate_default=True,
        arbitrary_types_allowed=True,
        protected_namespaces=(),
    )

    def __init__(self, /, *args: Any, **data: Any) -> None:
        if args:
            names = list(type(self).model_fields)
            if len(args) > len(names):
                raise ConfigError(f"{type(self).__name__} takes at most {len(names)} positional arguments")
            for field_name, value in zip(names, args, strict=False):
                if field_name in data:
                    raise ConfigError(f"{type(self).__name__}: {field_name} given twice")
                data[field_name] = value
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _error_from(type(self), exc) from None

    @classmethod
    def model_validate(cls: type[S], obj: Any, *args: Any, **kwargs: Any) -> S:
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as exc:
            raise _error_from(cls, exc) from None

    def replace(self: S, **changes: Any) -> S:
        """A copy with ``changes`` applied, validated like a new object (unknown names are errors)."""
        fields = type(self).model_fields
        unknown = sorted(set(changes) - set(fields))
        if unknown:
            raise ConfigError(
                f"{type(self).__name__}: unknown field {unknown[0]!r}; known: {', '.join(sorted(fields))}"
            )
        data = {name: getattr(self, name) for name in fields}
        data.update(changes)
        return type(self)(**data)

    def to_dict(self, *, json: bool = False) -> dict[str, Any]:
        """The fields as a dict, nested settings as dicts (``dataclasses.asdict``'s shape).

        ``json=True``: only JSON types (tuples and sets as lists, paths as strings), for files and summaries.
        """
        return self.model_dump(mode="json" if json else "python")


def _field(model: type[BaseModel], name: str) -> Any:
    try:
        return model.model_fields[name]
    except KeyError:
        raise ConfigError(f"{model.__name__} has no field {name!r}") from None


def field_help(model: type[BaseModel], name: str) -> str:
    """The help text of a field (its ``description``; empty when it has none), for a CLI option."""
    return _field(model, name).description or ""


def _literals(tp: Any) -> list[Any]:
    if get_origin(tp) is Literal:
        return list(get_args(tp))
    if get_origin(tp) in (typing.Union, types.UnionType):
        return [v for arg in get_args(tp) for v in _literals(arg)]
    if get_origin(tp) is typing.Annotated:
        return _literals(get_args(tp)[0])
    return []


def choices(model: type[BaseModel], name: str) -> tuple[str, ...]:
    """The values a ``Literal`` field allows (``None`` left out), for a CLI option's choices and help."""
    values = _literals(_field(model, name).annotation)
    if not values:
        raise ConfigError(f"{model.__name__}.{name} is not a Literal field")
    return tuple(str(v) for v in values)


def _owner(model: type[BaseModel], path: str) -> tuple[type[BaseModel], str]:
    """The model that declares the last field of a dotted ``path`` (``optim.lr``) and that field's name."""
    *parents, leaf = path.split(".")
    owner = model
    for part in parents:
        owner = _field(owner, part).annotation
    return owner, leaf


def config_default(model: type[BaseModel], name: str, *, path: str | None = None) -> Any:
    """The default of field ``name`` as ``model`` declares it (``path``: a nested field such as ``optim.lr``,
    its default inside the parent field's default), for a CLI option that has the field's default."""
    parts = (path or name).split(".")
    value: Any = _field(model, parts[0]).get_default(call_default_factory=True)
    for part in parts[1:]:
        value = getattr(value, part)
    return value


def config_help(model: type[BaseModel], name: str, *, path: str | None = None, default: bool = True) -> str:
    """A CLI option's help written once, on the field: its description, the values a ``Literal`` field
    allows, and (``default=True``, for an option whose own default is ``None``) the configuration's default.

    ``path`` names a nested field (``optim.lr``). An option with a real default of its own passes
    ``default=False``: typer prints that one.
    """
    owner, leaf = _owner(model, path or name)
    text = field_help(owner, leaf).rstrip(".")
    if text[:1].isascii():  # "λ: ..." stays as written
        text = text[:1].upper() + text[1:]
    if not text:
        raise ConfigError(f"{owner.__name__}.{leaf} has no description to use as help")
    if _literals(_field(owner, leaf).annotation):
        text += f"; one of {', '.join(choices(owner, leaf))}"
    if not default:
        return f"{text}."
    value = config_default(model, name, path=path)
    if isinstance(value, BaseModel):
        value = value.model_dump()
    return f"{text} (default {value})." if value not in (None, "") else f"{text}."

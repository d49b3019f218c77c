"""Command options generated from :class:`~datadojo.config.Settings` fields, and the one ``--config FILE``.

A command declares which settings it takes (:class:`SettingsGroup`) and :func:`settings_options` adds one
flag per field: its type, its choices (a ``Literal``), its bounds (``ge``/``gt``/``le``/``lt``), its help
(the field's description and default, :func:`datadojo.config.config_help`). The flag's own default is
``None`` ("not given"), so the value a run uses is, in this order of precedence:

1. a flag given on the command line;
2. the ``--config FILE`` (TOML or JSON): the first group's fields at the top level, every other group's in
   its own table (``[sandbox]``); nested settings as tables (``[filters]``);
3. the command's own default (:attr:`SettingsGroup.defaults`), else the field's default.

The command function receives the validated settings object (``param``), never the flags one by one, so
adding a field to a settings class adds its flag to every command that takes that class. A bad file
(unreadable, unknown field, invalid value) ends the command with one ``error: FILE: Class.field: ...``
line and exit 2; a bad flag value the same way, naming the flag.

Layer: the CLI (imports typer); builds nothing at import but the options of the modules that use it.
"""

from __future__ import annotations

import functools
import inspect
import json
import tomllib
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import typer
from annotated_types import Ge, Le
from pydantic import BaseModel, TypeAdapter, ValidationError

from datadojo.config import ConfigError, Settings, config_help

__all__ = [
    "CONFIG_HELP",
    "MODEL_SPEC_HELP",
    "SettingsGroup",
    "flag_fields",
    "load_config_file",
    "model_option",
    "require_model",
    "settings_options",
]

#: What a model spec is, written once for ``--model``, ``--teacher`` and ``--judge``.
MODEL_SPEC_HELP = (
    "Model spec: `openai:MODEL@BASE_URL` for any OpenAI-compatible server (vLLM, SGLang, Ollama, llama.cpp, "
    "hosted APIs; key from $OPENAI_API_KEY), or `hf:/path/to/checkpoint` for a local transformers model."
)

CONFIG_HELP = (
    "Settings file (.toml or .json): `field = value` lines for this command's settings (the flags' "
    "names with underscores), other groups in their own table; flags given override the file. "
    "See docs/cli.md."
)

_SCALARS = (int, float, str, bool, Path)


@dataclass(frozen=True)
class SettingsGroup:
    """One settings class a command takes, and how its fields become flags.

    ``param``: the command function's parameter that receives the built object. ``section``: its table in
    the ``--config`` file (``None``: the top level; one group per command). ``fields``: the fields given a
    flag (``None``: every field of a scalar type, minus ``exclude``); the others are set in the file.
    ``flags``: a field's flag declarations where they differ from ``--field-name`` (a short flag, a kept
    spelling such as ``--lambda``, a ``--yes/--no`` pair). ``defaults``: this command's defaults where they
    differ from the field's (shown in the help). ``extra``: help appended to a field's description.
    ``convert``: a function applied to a flag's value before validation, for a flag that spells a value
    differently from the file (``--time-limit 0`` for ``None``).
    ``partial``: the settings have required fields only the command knows (``EvalConfig.bench``); the
    command receives the dict of the values given (file, then flags), each checked against its field's type
    and bounds, and builds the object itself.
    """

    model: type[Settings]
    param: str = "config"
    section: str | None = None
    fields: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, str] = field(default_factory=dict)
    convert: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    panel: str | None = None
    partial: bool = False


def _scalar(tp: Any) -> Any:
    """The flag type of a field's annotation (``None`` when a flag cannot carry it: nested settings, lists)."""
    if get_origin(tp) is typing.Annotated:
        return _scalar(get_args(tp)[0])
    if get_origin(tp) is Literal:
        return tp
    if get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        return _scalar(args[0]) if len(args) == 1 else None
    return tp if tp in _SCALARS else None


def flag_fields(group: SettingsGroup) -> tuple[str, ...]:
    """The fields of ``group`` that get a flag, in declaration order."""
    fields = group.model.model_fields
    if group.fields is not None:
        unknown = [n for n in group.fields if n not in fields]
        if unknown:
            raise ConfigError(f"{group.model.__name__} has no field {unknown[0]!r}")
        return group.fields
    return tuple(n for n, f in fields.items() if n not in group.exclude and _scalar(f.annotation) is not None)


def _bounds(model: type[BaseModel], name: str) -> dict[str, Any]:
    """The closed bounds (``ge``, ``le``) of a number field, for the flag's range; open ones (``gt``,
    ``lt``) are left to the settings' validation, which names the field."""
    out: dict[str, Any] = {}
    for meta in model.model_fields[name].metadata:
        if isinstance(meta, Ge):
            out["min"] = meta.ge
        elif isinstance(meta, Le):
            out["max"] = meta.le
    return out


def _flag_param(group: SettingsGroup, name: str, index: int) -> inspect.Parameter:
    model = group.model
    tp = _scalar(model.model_fields[name].annotation)
    decls = group.flags.get(name) or (
        (f"--{name.replace('_', '-')}/--no-{name.replace('_', '-')}",)
        if tp is bool
        else (f"--{name.replace('_', '-')}",)
    )
    if name in group.defaults:
        text = config_help(model, name, default=False).rstrip(".") + f" (default {group.defaults[name]})."
    else:
        text = config_help(model, name)
    if name in group.extra:
        text = f"{text} {group.extra[name]}"
    options: dict[str, Any] = {"help": text, "show_default": False}
    if tp in (int, float):
        options.update(_bounds(model, name))
    options["rich_help_panel"] = _panel(group)
    return inspect.Parameter(
        f"_s{index}_{name}",
        inspect.Parameter.KEYWORD_ONLY,
        default=typer.Option(None, *decls, **options),
        annotation=tp | None,
    )


def _panel(group: SettingsGroup) -> str:
    """The help panel of a group's flags: they are set in the ``--config`` file too, under that name."""
    if group.panel:
        return group.panel
    return (
        f"Settings ({group.section} table of --config)"
        if group.section
        else "Settings (also in --config FILE)"
    )


def load_config_file(path: Path) -> dict[str, Any]:
    """The table a ``--config`` file holds (TOML or JSON); an unreadable one is a :class:`ConfigError`
    naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix.lower() == ".json" else tomllib.loads(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        hint = " (-c is --config; the concurrency is -j)" if str(path).isdigit() else ""
        raise ConfigError(f"{path}: cannot read the settings file: {exc}{hint}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a settings file holds a table of fields, got {type(data).__name__}")
    return data


def _sections(path: Path, data: dict[str, Any], groups: tuple[SettingsGroup, ...]) -> list[dict[str, Any]]:
    """Split a file's table into one dict per group; a key that is no field nor table is an error."""
    top = groups[0]
    tables = {g.section: i for i, g in enumerate(groups) if g.section}
    parts: list[dict[str, Any]] = [{} for _ in groups]
    for key, value in data.items():
        if key in tables:
            if not isinstance(value, dict):
                raise ConfigError(
                    f"{path}: [{key}] must be a table of {groups[tables[key]].model.__name__} fields"
                )
            parts[tables[key]] = value
        elif key in top.model.model_fields:
            parts[0][key] = value
        else:
            known = sorted([*top.model.model_fields, *(f"[{t}]" for t in tables)])
            raise ConfigError(f"{path}: {top.model.__name__} has no field {key!r}; known: {', '.join(known)}")
    return parts


def _check_fields(model: type[Settings], values: dict[str, Any]) -> dict[str, Any]:
    """``values`` validated one field at a time (type, ``Literal`` choices, bounds), for a partial group."""
    checked: dict[str, Any] = {}
    for name, value in values.items():
        info = model.model_fields.get(name)
        if info is None:
            raise ConfigError(
                f"{model.__name__} has no field {name!r}; known: {', '.join(model.model_fields)}"
            )
        try:
            checked[name] = TypeAdapter(Annotated[info.annotation, info]).validate_python(value)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            raise ConfigError(f"{model.__name__}.{name}: {err['msg'].lower()}, got {value!r}") from None
    return checked


def build_settings(
    groups: tuple[SettingsGroup, ...], path: Path | None, given: list[dict[str, Any]]
) -> list[Any]:
    """The settings of each group: its defaults, then the file's values, then the flags ``given``."""
    parts = _sections(path, load_config_file(path), groups) if path else [{} for _ in groups]
    built: list[Settings] = []
    for group, from_file, flags in zip(groups, parts, given, strict=True):
        flags = {n: group.convert[n](v) if n in group.convert else v for n, v in flags.items()}
        base = {**group.defaults, **from_file}
        if group.partial:
            try:
                base = _check_fields(group.model, base)
            except ConfigError as exc:
                raise ConfigError(f"{path}: {exc}") from None
            try:
                built.append({**base, **_check_fields(group.model, flags)})
            except ConfigError as exc:
                raise typer.BadParameter(str(exc)) from None
            continue
        if from_file:
            try:
                group.model(**base)
            except ConfigError as exc:
                raise ConfigError(f"{path}: {exc}") from None
        try:
            built.append(group.model(**{**base, **flags}))
        except ConfigError as exc:
            names = ", ".join(_flag_name(group, n) for n in flags)
            raise typer.BadParameter(str(exc), param_hint=names or None) from None
    return built


def _flag_name(group: SettingsGroup, name: str) -> str:
    decls = group.flags.get(name)
    return decls[0].split("/")[0] if decls else f"--{name.replace('_', '-')}"


def settings_options(
    *groups: SettingsGroup, config_flag: tuple[str, ...] = ("--config", "-c")
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command one flag per field of each group and a ``--config FILE`` (module docstring).

    The decorated function declares a parameter per group (``group.param``, any annotation) and receives
    the validated settings object there; its other parameters stay as written.
    """
    if not groups or groups[0].section is not None or any(g.section is None for g in groups[1:]):
        raise ValueError("the first settings group has no section, every other one has one")

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(func, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name not in {g.param for g in groups}]
        names = [flag_fields(g) for g in groups]
        generated = [_flag_param(g, n, i) for i, g in enumerate(groups) for n in names[i]]
        config = inspect.Parameter(
            "_config_file",
            inspect.Parameter.KEYWORD_ONLY,
            default=typer.Option(
                None, *config_flag, help=CONFIG_HELP, dir_okay=False, rich_help_panel=_panel(groups[0])
            ),
            annotation=Path | None,
        )
        params = [*own, config, *generated]
        params.sort(key=lambda p: p.kind)  # keyword-only after the positional-or-keyword ones

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            path = kwargs.pop("_config_file")
            given = [
                {n: v for n in names[i] if (v := kwargs.pop(f"_s{i}_{n}")) is not None}
                for i in range(len(groups))
            ]
            for group, settings in zip(groups, build_settings(groups, path, given), strict=True):
                kwargs[group.param] = settings
            return func(**kwargs)

        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        del command.__wrapped__  # typer must read the generated signature, not the function's
        return command

    return decorate


def model_option(
    *decls: str, role: str, envvar: str | None = "DATADOJO_MODEL", required_text: str = ""
) -> Any:
    """The one option of a model spec (``--model``, ``--teacher``, ``--judge``): ``role`` says what the
    model does, the spec's forms follow, and ``envvar`` is the fallback when the flag is not given."""
    fallback = f" Defaults to ${envvar}." if envvar else ""
    return typer.Option(
        None, *decls, help=f"{role} {MODEL_SPEC_HELP}{fallback}{required_text}".strip(), envvar=envvar,
        show_envvar=False,
    )  # fmt: skip


def require_model(spec: str | None, flag: str = "--model", envvar: str | None = "DATADOJO_MODEL") -> str:
    """``spec``, or a usage error (exit 2) saying how to give one."""
    if spec:
        return spec
    hint = f"pass {flag} SPEC or set ${envvar}" if envvar else f"pass {flag} SPEC"
    raise typer.BadParameter(f"no model given: {hint}", param_hint=flag)

"""The configuration base: errors name the class and field, replace re-validates, help and choices for the CLI."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Literal

import pytest
from pydantic import Field, model_validator

from datadojo.config import ConfigError, Settings, choices, field_help
from datadojo.errors import DataDojoError


class _Own(DataDojoError, ValueError):
    pass


class Demo(Settings):
    """A small configuration exercising every path of the base."""

    n: int = Field(3, ge=1, description="How many.")
    mode: Literal["fast", "slow"] | None = Field("fast", description="How.")
    out: str | Path = Path("runs/x")
    names: tuple[str, ...] = ("a",)

    @model_validator(mode="after")
    def _check(self) -> Demo:
        if self.n == 7:
            raise ValueError(f"n must not be 7, got {self.n}")
        if self.n == 8:
            raise _Own("eight is reserved")
        return self


def test_invalid_values_raise_config_error_naming_class_and_field() -> None:
    with pytest.raises(ConfigError, match=r"^Demo\.n: input should be greater than or equal to 1, got 0$"):
        Demo(n=0)
    with pytest.raises(ConfigError, match=r"Demo\.mode: .*'fast' or 'slow', got 'medium'"):
        Demo(mode="medium")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"Demo\.colour: extra inputs are not permitted"):
        Demo(colour=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"^Demo: n must not be 7, got 7$"):  # still a ValueError
        Demo(n=7)
    with pytest.raises(_Own, match=r"^eight is reserved$"):  # a validator's own error class, as raised
        Demo(n=8)
    assert issubclass(ConfigError, DataDojoError) and issubclass(ConfigError, ValueError)


def test_replace_validates_again_and_refuses_unknown_fields() -> None:
    cfg = Demo()
    assert cfg.replace(n=5) == Demo(n=5) and cfg.n == 3  # a copy; the original is unchanged
    with pytest.raises(ConfigError, match=r"Demo\.n"):
        cfg.replace(n=0)  # model_copy(update=...) would have accepted it
    with pytest.raises(ConfigError, match="unknown field 'm'"):
        cfg.replace(m=1)
    with pytest.raises(ValueError):  # frozen
        cfg.n = 4  # type: ignore[misc]


def test_positional_arguments_fill_fields_in_order() -> None:
    assert Demo(4, "slow") == Demo(n=4, mode="slow")
    with pytest.raises(ConfigError, match="given twice"):
        Demo(4, n=5)


def test_to_dict_python_and_json_and_pickle() -> None:
    cfg = Demo(names=("a", "b"))
    assert cfg.to_dict() == {"n": 3, "mode": "fast", "out": Path("runs/x"), "names": ("a", "b")}
    assert cfg.to_dict(json=True) == {"n": 3, "mode": "fast", "out": "runs/x", "names": ["a", "b"]}
    assert pickle.loads(pickle.dumps(cfg)) == cfg and hash(cfg) == hash(Demo(names=("a", "b")))


def test_field_help_and_choices() -> None:
    assert field_help(Demo, "n") == "How many." and field_help(Demo, "out") == ""
    assert choices(Demo, "mode") == ("fast", "slow")  # None left out
    with pytest.raises(ConfigError, match="not a Literal"):
        choices(Demo, "n")
    with pytest.raises(ConfigError, match="no field 'x'"):
        field_help(Demo, "x")

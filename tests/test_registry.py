"""datadojo.registry: one behaviour for every by-name registry."""

from __future__ import annotations

import pytest

from datadojo.errors import DataDojoError, UnknownNameError
from datadojo.registry import Registry


def test_lookup_is_case_insensitive_with_aliases() -> None:
    reg: Registry[int] = Registry("widget", aliases={"old": "new"})
    reg.register("New", 1)
    assert reg.get("NEW") == 1 and reg.get("old") == 1
    assert "Old" in reg and "other" not in reg and reg.names() == ["new"] and len(reg) == 1


def test_taken_names_need_replace_but_the_same_value_may_register_again() -> None:
    reg: Registry[object] = Registry("widget")
    value = object()
    reg.register("a", value)
    reg.register("a", value)  # idempotent (a module imported twice)
    with pytest.raises(ValueError, match="a widget named 'A' is already registered; pass replace=True"):
        reg.register("A", object())
    other = object()
    reg.register("a", other, replace=True)
    assert reg.get("a") is other


def test_unknown_name_lists_the_known_ones_without_quotes() -> None:
    reg: Registry[int] = Registry("widget", listing="registered")
    reg.register("b", 2)
    reg.register("a", 1)
    with pytest.raises(UnknownNameError) as info:
        reg.get("zz")
    assert str(info.value) == "unknown widget 'zz'; registered: a, b"
    assert isinstance(info.value, (DataDojoError, KeyError, ValueError))

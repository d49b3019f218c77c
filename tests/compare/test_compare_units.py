"""The unit parser: known units and conversions, compounds, non-units, and properties (never crashes,
a value in an equivalent unit converts back to itself)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datadojo.compare.units import DIMENSIONLESS, normalize_unit_text, parse_unit, read_unit


@pytest.mark.parametrize(
    ("a", "b", "value_a", "value_b"),
    [
        ("mg/L", "µg/L", 2.89, 2890.0),
        ("mg/L", "g m-3", 2.89, 2.89),
        ("°C", "K", 25.0, 298.15),
        ("°C", "°F", 100.0, 212.0),
        ("degrees Celsius", "kelvin", -40.0, 233.15),
        ("ppm", "µmol/mol", 410.0, 410.0),
        ("%", "ppm", 1.0, 10000.0),
        ("hPa", "mbar", 1013.25, 1013.25),
        ("atm", "kPa", 1.0, 101.325),
        ("km/h", "m/s", 36.0, 10.0),
        ("W m-2", "mW/m²", 1.0, 1000.0),
        ("mol m^-2 s^-1", "µmol m⁻² s⁻¹", 3.2e-5, 32.0),
        ("kDa", "Da", 66.5, 66500.0),
        ("GiB", "MiB", 1.0, 1024.0),
        ("GB", "MB", 1.5, 1500.0),
        ("h", "min", 1.5, 90.0),
        ("days", "hours", 2.0, 48.0),
        ("Ma", "kyr", 1.0, 1000.0),
        ("milligrams per litre", "mg/L", 5.0, 5.0),
        ("kilometres", "m", 1.2, 1200.0),
        ("ft", "in", 1.0, 12.0),
        ("Å", "nm", 10.0, 1.0),
        ("mM", "mol/L", 5.0, 0.005),
        ("Gt", "kg", 1.0, 1e12),
        ("keV", "eV", 2.0, 2000.0),
        ("°", "rad", 180.0, math.pi),
        ("°S", "°N", 45.0, -45.0),
    ],
)
def test_conversions(a: str, b: str, value_a: float, value_b: float) -> None:
    ua, ub = parse_unit(a), parse_unit(b)
    assert ua is not None and ub is not None, (a, b)
    assert ua.compatible(ub)
    assert ua.convert(value_a, ub) == pytest.approx(value_b, rel=1e-9)


@pytest.mark.parametrize(("a", "b"), [("mg/L", "m"), ("K", "s"), ("%", "m"), ("GB", "g"), ("°", "%")])
def test_incompatible_units_are_told_apart(a: str, b: str) -> None:
    ua, ub = parse_unit(a), parse_unit(b)
    assert ua is not None and ub is not None
    assert not ua.compatible(ub)
    with pytest.raises(ValueError, match="incompatible"):
        ua.convert(1.0, ub)


@pytest.mark.parametrize("text", ["", "sequences", "pH", "stations", "as", "at", "m long", "kg of", "mg/"])
def test_not_units(text: str) -> None:
    assert parse_unit(text) is None


def test_temperature_inside_a_compound_is_a_difference() -> None:
    lapse = parse_unit("°C/km")
    per_m = parse_unit("K/m")
    assert lapse is not None and per_m is not None and lapse.offset == 0.0
    assert lapse.convert(6.5, per_m) == pytest.approx(0.0065)


def test_read_unit_stops_at_words_and_reads_juxtaposed_exponents() -> None:
    text = normalize_unit_text("5 m long")
    unit, end = read_unit(text, 1)
    assert unit is not None and unit.text == "m" and text[end:] == " long"
    text = "240 W m-2 at noon"
    unit, end = read_unit(text, 3)
    assert unit is not None and unit.text == "W m-2" and text[end:] == " at noon"
    assert read_unit("3 s in total", 1)[0].text == "s"  # type: ignore[union-attr]
    assert parse_unit("%").dim == DIMENSIONLESS  # type: ignore[union-attr]


@settings(max_examples=200, deadline=None)  # no verdict may hinge on machine speed
@given(st.text(max_size=40))
def test_parse_unit_never_crashes(text: str) -> None:
    unit = parse_unit(text)
    assert unit is None or (math.isfinite(unit.factor) and unit.factor != 0)
    read_unit(normalize_unit_text(text))


# Units and families of equivalent units for the round-trip property.
_FAMILIES = [
    ["mg/L", "µg/L", "g/m3", "kg m-3", "ng/mL", "milligrams per litre"],
    ["°C", "K", "°F", "degC", "kelvin"],
    ["ppm", "ppb", "%", "µmol/mol", "‰"],
    ["m", "km", "mm", "µm", "nm", "ft", "in", "mi", "Å"],
    ["s", "ms", "min", "h", "d", "yr", "ka"],
    ["Pa", "hPa", "kPa", "bar", "mbar", "atm", "Torr", "psi"],
    ["W m-2", "mW/m2", "kW m^-2"],
    ["B", "kB", "MB", "KiB", "MiB", "GiB"],
    ["mol/L", "mM", "µM", "mmol/L"],
]


@settings(max_examples=200, deadline=None)  # no verdict may hinge on machine speed
@given(
    family=st.sampled_from(_FAMILIES),
    data=st.data(),
    value=st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
)
def test_a_value_converted_to_an_equivalent_unit_converts_back(family, data, value: float) -> None:
    a = parse_unit(data.draw(st.sampled_from(family)))
    b = parse_unit(data.draw(st.sampled_from(family)))
    assert a is not None and b is not None and a.compatible(b)
    back = b.convert(a.convert(value, b), a)
    assert back == pytest.approx(value, rel=1e-9, abs=1e-9 * max(1.0, abs(a.offset), abs(b.offset)))


# --- absolute factors (issue 39 item 5): each against its definition, not a round trip ----------------


@pytest.mark.parametrize(
    ("unit", "si"),
    [
        ("km", 1000.0),  # 1 km = 1000 m
        ("mm", 1e-3),
        ("mg", 1e-6),  # 1 mg = 1e-6 kg (SI base kg)
        ("t", 1000.0),  # 1 tonne = 1000 kg
        ("mi", 1609.344),  # international mile, exact by definition
        ("ft", 0.3048),
        ("in", 0.0254),
        ("lb", 0.45359237),  # avoirdupois pound, exact by definition
        ("min", 60.0),
        ("h", 3600.0),
        ("d", 86400.0),
        ("atm", 101325.0),
        ("hPa", 100.0),
        ("L", 1e-3),  # 1 L = 1 dm³
        ("mL", 1e-6),
        ("GiB", 2.0**30),
        ("kB", 1000.0),
        ("%", 0.01),
        ("ppm", 1e-6),
        ("mM", 1.0),  # 1 mmol/L = 1 mol/m³
        ("kWh", 3.6e6),
    ],
)
def test_absolute_unit_factors(unit: str, si: float) -> None:
    parsed = parse_unit(unit)
    assert parsed is not None
    assert parsed.to_si(1.0) == pytest.approx(si, rel=1e-12)


def test_temperature_offsets_against_fixed_points() -> None:
    c, f = parse_unit("°C"), parse_unit("°F")
    assert c is not None and f is not None
    assert c.to_si(0.0) == pytest.approx(273.15) and c.to_si(100.0) == pytest.approx(373.15)
    assert f.to_si(32.0) == pytest.approx(273.15) and f.to_si(212.0) == pytest.approx(373.15)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1 million", 1e6), ("1.2 million", 1.2e6), ("1.2M", 1.2e6), ("5k", 5000.0), ("5K", 5000.0),
        ("2 thousand", 2000.0), ("3bn", 3e9), ("3 billion", 3e9), ("$3B", 3e9), ("1 trillion", 1e12),
        ("4.5 mn", 4.5e6),
    ],
)  # fmt: skip
def test_absolute_magnitudes(text: str, value: float) -> None:
    from datadojo.compare.core import find_numbers

    assert find_numbers(text)[0].value == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "value"),
    [("5k", 5000.0), ("2 thousand", 2000.0), ("1.2 million", 1.2e6), ("3 bn", 3e9), ("1 trillion", 1e12),
     ("45%", 0.45), ("$1,234.5", 1234.5)],
)  # fmt: skip
def test_absolute_magnitudes_of_parse_number(text: str, value: float) -> None:
    from datadojo.compare.text import parse_number

    parsed = parse_number(text)
    assert parsed is not None and parsed.value == pytest.approx(value, rel=1e-12)

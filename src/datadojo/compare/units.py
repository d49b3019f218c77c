"""Units of measurement for scientific answers: parse ``mg/L``, ``W m-2``, ``°C``, ``ppm``, ``kDa`` … and convert.

SciDataSailor scores QA with "tolerance-aware matching for numerical answers and ... unit-consistency
checks" (§5). That needs a unit parser that knows the units scientific datasets use and can say whether
two units measure the same thing and how to convert between them; no such package is a dependency of
DataDojo, and the set needed is small, so it is written here.

A :class:`Unit` is a factor and an offset to SI (``si = (value + offset) * factor``; the offset only for
°C/°F) and a dimension vector over :data:`DIMENSIONS` (the SI base quantities plus ``rad`` for angles and
``B`` for data sizes, so 45° is not 0.785 and 1 GB is not a number). What is understood:

* **SI prefixes** Y … f on every SI unit (``km``, ``µg``, ``nmol``, ``hPa``, ``MeV``, ``GHz``, ``mK``),
  ``u`` for µ, the spelled-out prefixes on spelled-out units (``milligrams``, ``kilometres``); binary
  prefixes on bytes (``KiB``, ``GiB``). Atto, zepto and yocto are left out: ``as``, ``at``, ``am`` are
  English words far more often than units;
* **base and derived units**: m, g, s, K, mol, A, L, Pa, bar, J, eV, cal, Wh, W, Hz, N, V, Ω, M (molar),
  Da, B (byte), t (tonne) and the year ``a``/``yr`` (``ka``, ``Ma``, ``kyr``; bare ``a`` is an article, not a
  unit);
* **other common units**: min, h, d/day, week, yr/year, Å, in, ft, mi, lb, atm, Torr, mmHg, psi, ha;
* **temperature**: K, °C, °F (``degC``, ``deg C``, ``degrees Celsius``, ``℃`` …). A temperature alone
  converts with its offset; inside a compound unit (``K/km``, ``°C per day``) it is a difference and
  converts by its factor only;
* **ratios**: ``%``, ``‰``, ``ppm``, ``ppb``, ``ppt`` (dimensionless, so ``410 ppm`` = ``410 µmol/mol``);
* **angles**: ``°``/``deg``/``rad``, and ``°N``/``°E`` (positive) and ``°S``/``°W`` (negative);
* **compounds**: ``/`` and ``per`` divide; ``·``, ``*`` and a space followed by a unit with an exponent
  multiply (``W m-2``, ``mol m^-2 s^-1``); exponents as ``^2``, ``2``, ``-1``, ``²``, ``⁻¹``.

Anything else (``sequences``, ``stations``, ``pH``) is not a unit: :func:`parse_unit` returns ``None``
and the caller treats the number as unitless. :func:`parse_unit` never raises on any input.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["DIMENSIONLESS", "DIMENSIONS", "Unit", "normalize_unit_text", "parse_unit", "read_unit"]

#: The base dimensions of the dimension vector.
DIMENSIONS: tuple[str, ...] = ("m", "kg", "s", "K", "mol", "A", "rad", "B")
Dim = tuple[int, ...]
DIMENSIONLESS: Dim = (0,) * len(DIMENSIONS)


def _dim(**exps: int) -> Dim:
    return tuple(exps.get(d, 0) for d in DIMENSIONS)


@dataclass(frozen=True)
class Unit:
    """A unit: ``si = (value + offset) * factor`` in the SI units of ``dim``; ``text`` as it was written."""

    factor: float
    dim: Dim
    text: str
    offset: float = 0.0

    @property
    def dimensionless(self) -> bool:
        return self.dim == DIMENSIONLESS

    def compatible(self, other: Unit) -> bool:
        """Whether the two units measure the same kind of quantity (same dimension vector)."""
        return self.dim == other.dim

    def to_si(self, value: float) -> float:
        return (value + self.offset) * self.factor

    def from_si(self, value: float) -> float:
        return value / self.factor - self.offset

    def convert(self, value: float, to: Unit) -> float:
        """``value`` in this unit, expressed in ``to`` (which must be :meth:`compatible`)."""
        if not self.compatible(to):
            raise ValueError(f"cannot convert {self.text} to {to.text}: incompatible units")
        return to.from_si(self.to_si(value))

    def __mul__(self, other: Unit) -> Unit:
        dim = tuple(a + b for a, b in zip(self.dim, other.dim, strict=True))
        return Unit(self.factor * other.factor, dim, f"{self.text}·{other.text}")

    def power(self, n: int) -> Unit:
        return Unit(self.factor**n, tuple(d * n for d in self.dim), f"{self.text}^{n}")


_LENGTH, _MASS, _TIME, _TEMP = _dim(m=1), _dim(kg=1), _dim(s=1), _dim(K=1)
_AMOUNT, _CURRENT, _ANGLE, _DATA = _dim(mol=1), _dim(A=1), _dim(rad=1), _dim(B=1)
_VOLUME = _dim(m=3)
_PRESSURE = _dim(kg=1, m=-1, s=-2)
_ENERGY = _dim(kg=1, m=2, s=-2)
_POWER = _dim(kg=1, m=2, s=-3)
_FORCE = _dim(kg=1, m=1, s=-2)
_VOLT = _dim(kg=1, m=2, s=-3, A=-1)
_MOLAR = _dim(mol=1, m=-3)
_JULIAN_YEAR = 365.25 * 86400.0

# Symbols that take SI prefixes: symbol -> (factor to SI, dimension).
_PREFIXABLE: dict[str, tuple[float, Dim]] = {
    "m": (1.0, _LENGTH),
    "g": (1e-3, _MASS),
    "s": (1.0, _TIME),
    "K": (1.0, _TEMP),
    "mol": (1.0, _AMOUNT),
    "A": (1.0, _CURRENT),
    "L": (1e-3, _VOLUME),
    "l": (1e-3, _VOLUME),
    "Pa": (1.0, _PRESSURE),
    "bar": (1e5, _PRESSURE),
    "J": (1.0, _ENERGY),
    "eV": (1.602176634e-19, _ENERGY),
    "cal": (4.184, _ENERGY),
    "Wh": (3600.0, _ENERGY),
    "W": (1.0, _POWER),
    "Hz": (1.0, _dim(s=-1)),
    "N": (1.0, _FORCE),
    "V": (1.0, _VOLT),
    "Ω": (1.0, _dim(kg=1, m=2, s=-3, A=-2)),
    "M": (1e3, _MOLAR),
    "Da": (1.66053906660e-27, _MASS),
    "B": (1.0, _DATA),
    "t": (1e3, _MASS),
    "a": (_JULIAN_YEAR, _TIME),
    "yr": (_JULIAN_YEAR, _TIME),
    "rad": (1.0, _ANGLE),
}
# Symbols and words that take no prefix (exact, case-sensitive; words are matched lower-cased below).
_FIXED: dict[str, tuple[float, Dim]] = {
    "min": (60.0, _TIME),
    "h": (3600.0, _TIME),
    "hr": (3600.0, _TIME),
    "d": (86400.0, _TIME),
    "Å": (1e-10, _LENGTH),
    "in": (0.0254, _LENGTH),
    "ft": (0.3048, _LENGTH),
    "mi": (1609.344, _LENGTH),
    "lb": (0.45359237, _MASS),
    "lbs": (0.45359237, _MASS),
    "atm": (101325.0, _PRESSURE),
    "Torr": (133.322368, _PRESSURE),
    "mmHg": (133.322387, _PRESSURE),
    "psi": (6894.757293, _PRESSURE),
    "ha": (1e4, _dim(m=2)),
    "%": (1e-2, DIMENSIONLESS),
    "‰": (1e-3, DIMENSIONLESS),
    "ppm": (1e-6, DIMENSIONLESS),
    "ppmv": (1e-6, DIMENSIONLESS),
    "ppb": (1e-9, DIMENSIONLESS),
    "ppbv": (1e-9, DIMENSIONLESS),
    "ppt": (1e-12, DIMENSIONLESS),
    "°": (math.pi / 180.0, _ANGLE),
    "deg": (math.pi / 180.0, _ANGLE),
    "°N": (math.pi / 180.0, _ANGLE),
    "°E": (math.pi / 180.0, _ANGLE),
    "°S": (-math.pi / 180.0, _ANGLE),
    "°W": (-math.pi / 180.0, _ANGLE),
}
# Spelled-out units (lower case, singular), with whether they take spelled-out prefixes.
_WORDS: dict[str, tuple[float, Dim, bool]] = {
    "metre": (1.0, _LENGTH, True),
    "meter": (1.0, _LENGTH, True),
    "gram": (1e-3, _MASS, True),
    "gramme": (1e-3, _MASS, True),
    "second": (1.0, _TIME, True),
    "sec": (1.0, _TIME, False),
    "litre": (1e-3, _VOLUME, True),
    "liter": (1e-3, _VOLUME, True),
    "mole": (1.0, _AMOUNT, True),
    "kelvin": (1.0, _TEMP, True),
    "pascal": (1.0, _PRESSURE, True),
    "joule": (1.0, _ENERGY, True),
    "watt": (1.0, _POWER, True),
    "hertz": (1.0, _dim(s=-1), True),
    "newton": (1.0, _FORCE, True),
    "volt": (1.0, _VOLT, True),
    "ampere": (1.0, _CURRENT, True),
    "byte": (1.0, _DATA, True),
    "tonne": (1e3, _MASS, True),
    "dalton": (1.66053906660e-27, _MASS, True),
    "electronvolt": (1.602176634e-19, _ENERGY, True),
    "calorie": (4.184, _ENERGY, True),
    "minute": (60.0, _TIME, False),
    "hour": (3600.0, _TIME, False),
    "day": (86400.0, _TIME, False),
    "week": (604800.0, _TIME, False),
    "year": (_JULIAN_YEAR, _TIME, False),
    "angstrom": (1e-10, _LENGTH, False),
    "inch": (0.0254, _LENGTH, False),
    "inches": (0.0254, _LENGTH, False),
    "foot": (0.3048, _LENGTH, False),
    "feet": (0.3048, _LENGTH, False),
    "mile": (1609.344, _LENGTH, False),
    "pound": (0.45359237, _MASS, False),
    "hectare": (1e4, _dim(m=2), False),
    "percent": (1e-2, DIMENSIONLESS, False),
    "per cent": (1e-2, DIMENSIONLESS, False),
    "degree": (math.pi / 180.0, _ANGLE, False),
    "radian": (1.0, _ANGLE, False),
}
_SI_PREFIXES: dict[str, float] = {
    "Y": 1e24, "Z": 1e21, "E": 1e18, "P": 1e15, "T": 1e12, "G": 1e9, "M": 1e6, "k": 1e3, "h": 1e2,
    "da": 1e1, "d": 1e-1, "c": 1e-2, "m": 1e-3, "µ": 1e-6, "μ": 1e-6, "u": 1e-6, "n": 1e-9, "p": 1e-12,
    "f": 1e-15,
}  # fmt: skip
# atto, zepto and yocto are left out: "as", "at", "am", "ys" are English words far more often than units.
_BINARY_PREFIXES = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
_WORD_PREFIXES: dict[str, float] = {
    "yotta": 1e24, "zetta": 1e21, "exa": 1e18, "peta": 1e15, "tera": 1e12, "giga": 1e9, "mega": 1e6,
    "kilo": 1e3, "hecto": 1e2, "deca": 1e1, "deka": 1e1, "deci": 1e-1, "centi": 1e-2, "milli": 1e-3,
    "micro": 1e-6, "nano": 1e-9, "pico": 1e-12, "femto": 1e-15,
}  # fmt: skip
# Temperatures: symbol -> (factor, offset); alone they convert with the offset.
_TEMPERATURES: dict[str, tuple[float, float]] = {
    "°C": (1.0, 273.15),
    "°F": (5.0 / 9.0, 459.67),
}
_TEMPERATURE_SPELLINGS = re.compile(
    r"(?:℃|°\s*C\b|deg(?:ree)?s?\s*(?:C\b|celsius\b)|degC\b|celsius\b)"
    r"|(?P<f>℉|°\s*F\b|deg(?:ree)?s?\s*(?:F\b|fahrenheit\b)|degF\b|fahrenheit\b)",
    re.IGNORECASE,
)
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
# One unit factor: a symbol or word, then an optional exponent.
_FACTOR = re.compile(
    r"(?P<sym>°[NSEWCF]?|[%‰Å]|[A-Za-zµμΩ]+(?:\s+cent\b)?)"
    r"(?:\^?(?P<exp>[-+]?\d{1,2})(?!\d|\.\d))?"
)
_SEPARATOR = re.compile(r"\s*(?P<op>/|·|\*|⋅|\s+per\s+)\s*|(?P<space>\s+)")


def _symbol(sym: str) -> tuple[float, Dim, float] | None:
    """``(factor, dim, offset)`` of one symbol or word without exponent, or ``None``."""
    if sym in _TEMPERATURES:
        factor, offset = _TEMPERATURES[sym]
        return factor, _TEMP, offset
    if sym in _FIXED:
        f, d = _FIXED[sym]
        return f, d, 0.0
    if sym in _PREFIXABLE and sym != "a":
        f, d = _PREFIXABLE[sym]
        return f, d, 0.0
    for n in (2, 1):  # "da" before "d"
        pre, base = sym[:n], sym[n:]
        if pre in _SI_PREFIXES and base in _PREFIXABLE:
            f, d = _PREFIXABLE[base]
            return _SI_PREFIXES[pre] * f, d, 0.0
    if sym[:2] in _BINARY_PREFIXES and sym[2:] == "B":
        return _BINARY_PREFIXES[sym[:2]], _DATA, 0.0
    low = " ".join(sym.lower().split())
    for word in (low, low[:-1] if low.endswith("s") and len(low) > 3 else low):
        if word in _WORDS:
            f, d, _ = _WORDS[word]
            return f, d, 0.0
        for pre, scale in _WORD_PREFIXES.items():
            if word.startswith(pre) and word[len(pre) :] in _WORDS and _WORDS[word[len(pre) :]][2]:
                f, d, _ = _WORDS[word[len(pre) :]]
                return scale * f, d, 0.0
    return None


def normalize_unit_text(text: str) -> str:
    """Rewrite temperature spellings to ``°C``/``°F`` and superscript digits to ASCII (``m⁻²`` → ``m-2``).

    :func:`read_unit` expects text that went through this; :func:`parse_unit` applies it itself.
    """
    text = text.translate(_SUPERSCRIPTS)
    return _TEMPERATURE_SPELLINGS.sub(lambda m: "°F" if m.group("f") else "°C", text)


def read_unit(text: str, pos: int = 0) -> tuple[Unit | None, int]:
    """The longest unit starting at ``text[pos:]`` (spaces skipped) and the index just after it.

    ``text`` must be normalized (:func:`normalize_unit_text`). ``(None, pos)`` when no unit starts
    there. Multiplication by juxtaposition (``W m-2``) is read only when the next factor carries an
    exponent, so ``5 m long`` or ``3 s in total`` stop after the first unit. Never raises.
    """
    try:
        return _read_unit(text, pos)
    except (ValueError, OverflowError, ZeroDivisionError, IndexError):
        return None, pos


def _read_unit(text: str, pos: int) -> tuple[Unit | None, int]:
    start = pos
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    factors: list[tuple[float, Dim, float, int]] = []  # factor, dim, offset, exponent
    end = pos
    sign, juxtaposed = 1, False
    while True:
        m = _FACTOR.match(text, pos)
        if m is None:
            break
        found = _symbol(m.group("sym"))
        exp = m.group("exp")
        if found is None or (juxtaposed and exp is None):
            break
        n = int(exp) if exp is not None else 1
        if n == 0:
            break
        factors.append((*found, sign * n))
        end = m.end()
        sep = _SEPARATOR.match(text, end)
        if sep is None:
            break
        op = sep.group("op")
        juxtaposed = op is None
        sign = -1 if op is not None and op.strip() in ("/", "per") else 1
        pos = sep.end()
    if not factors:
        return None, start
    written = text[start:end].strip()
    if len(factors) == 1 and factors[0][3] == 1:
        f, d, off, _ = factors[0]
        return Unit(f, d, written, off), end
    factor, dim = 1.0, DIMENSIONLESS
    for f, d, _off, n in factors:  # inside a compound a temperature is a difference: no offset
        factor *= f**n
        dim = tuple(a + b * n for a, b in zip(dim, d, strict=True))
    if not math.isfinite(factor) or factor == 0.0:  # m^-99 of a tiny prefix: not a unit anyone writes
        return None, start
    return Unit(factor, dim, written), end


def parse_unit(text: str) -> Unit | None:
    """The unit ``text`` consists of (nothing else around it), or ``None``; never raises.

    An empty text is not a unit (``None``): a bare number is unitless, decided by the caller.
    """
    norm = normalize_unit_text(text)
    unit, used = read_unit(norm)
    if unit is None or norm[used:].strip():
        return None
    return unit

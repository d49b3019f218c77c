"""Rule-based scoring of scientific QA answers: tolerant numbers with units, categorical and textual checks.

SciDataSailor §5: "Scientific QA uses tolerance-aware matching for numerical answers and textual,
categorical, and unit-consistency checks for non-numerical answers". The paper gives no tolerance and no
procedure; these are DataDojo's rules, each a setting of :class:`ScientificConfig`:

* **numbers** are read with their unit (:mod:`datadojo.compare.units`: SI prefixes, temperatures, ppm/ppb,
  percent, time, length, mass, compounds such as ``mg/L`` or ``W m-2``), scientific notation
  (``1.2e-3``, ``1.2 × 10⁻³``), thousands separators, scale words (``1.2 million``) and an uncertainty
  (``2.89 ± 0.05 mg/L``: the central value 2.89 is compared). The prediction's value is converted into
  the reference's unit and compared there within ``max(rel_tol·|reference|, abs_tol)`` (the comparison of
  :func:`datadojo.compare.matchers.match_answer`). ``rel_tol`` defaults to **1%**: it accepts a value
  rounded to three significant figures (at most 0.5% off) but not a neighbouring value, which DataMind's
  3% would (2.89 vs 2.97 mg/L). Converting into the reference's unit (not into SI) keeps the tolerance
  meaningful for temperatures: 25 °C ± 1% is ±0.25 °C, not ±3 K.
* **unit consistency**: a prediction in an incompatible unit (``2.89 m`` for ``2.89 mg/L``) or in a
  compatible unit whose converted value differs (``2.89 g/L``) is wrong. A prediction without a unit is
  read in the reference's unit (``require_units=False``, the default, since questions often name the
  unit); for a percent/ppm reference a bare number is also read as a fraction (``0.45`` = ``45%``). A
  reference without a unit has no unit to check: the prediction's number is compared as written (and,
  for ``%``/``ppm``, also as a fraction).
* **multi-value answers**: the reference is split into segments at ``,``, ``;``, ``and`` and new lines.
  Every number in it is a central value and every short number-free segment (at most
  ``categorical_max_words`` words, e.g. ``meadow``) a categorical value; *all* must be found in the
  prediction: numbers by a one-to-one matching with the prediction's numbers (order-insensitive),
  categorical values as whole-word phrases after SQuAD normalisation (a short segment is also split at
  ``and``: ``temperature and salinity`` is two values). A prediction may state at most
  ``max_extra_values`` numbers beyond the reference's (context such as a sample size); more is read as
  hedging and fails.
* **categorical / textual answers**: a reference without numbers made of short segments is categorical
  (each segment must appear in the prediction as a phrase, or the whole must equal it after
  normalisation); ``yes``/``no`` references use the matcher's boolean rule.
* **decisive**: a reference containing a longer number-free segment (a sentence) is free text, which rules
  cannot compare; the rule then falls back to normalised equality and reports ``decisive=False``, so a
  caller combining rule and judge (``qa_scoring=rule+judge`` in :mod:`datadojo.bench.scidata`) lets the
  judge decide those.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pydantic import model_validator

from datadojo.compare.matchers import MatchConfig, _bipartite, match_answer
from datadojo.compare.text import normalize_text
from datadojo.compare.units import Unit, normalise_unit_text, read_unit
from datadojo.config import Settings
from datadojo.protocol.boxed import unwrap_boxed

__all__ = [
    "Quantity",
    "ScientificConfig",
    "ScientificMatch",
    "find_quantities",
    "match_scientific",
]


class ScientificConfig(Settings):
    """Settings of :func:`match_scientific` (module docstring)."""

    rel_tol: float = 0.01
    abs_tol: float = 1e-6
    require_units: bool = False
    max_extra_values: int = 2
    categorical_max_words: int = 6

    @model_validator(mode="after")
    def _check(self) -> ScientificConfig:
        MatchConfig(rel_tol=self.rel_tol, abs_tol=self.abs_tol)  # the same checks as the matcher's
        if self.max_extra_values < 0:
            raise ValueError(f"max_extra_values must be >= 0, got {self.max_extra_values}")
        if self.categorical_max_words < 1:
            raise ValueError(f"categorical_max_words must be >= 1, got {self.categorical_max_words}")
        return self

    @property
    def match_config(self) -> MatchConfig:
        return MatchConfig(rel_tol=self.rel_tol, abs_tol=self.abs_tol)


@dataclass(frozen=True)
class Quantity:
    """A number read from text with its unit (``None``: no unit written or not a unit we know)."""

    value: float
    unit: Unit | None
    text: str


@dataclass(frozen=True)
class ScientificMatch:
    """The rule's verdict: ``correct``, a one-line ``reason``, the ``kind`` of reference, ``decisive``."""

    correct: bool
    reason: str
    kind: str
    decisive: bool = True

    def __bool__(self) -> bool:
        return self.correct

    def to_dict(self) -> dict[str, object]:
        return {"correct": self.correct, "reason": self.reason, "kind": self.kind, "decisive": self.decisive}


_NUMBER = re.compile(
    r"(?P<sign>[-+−–]?)"
    r"(?P<body>(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+)"
    r"(?:[eE](?P<exp>[-+−]?\d+)|\s*[x×·*]\s*10\s*\^?\s*(?P<exp10>[-+−]?\d+))?"
    r"(?P<pm>\s*(?:±|\+/-|\+-)\s*(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?)?"
    r"(?:\s+(?P<scale>thousand|million|billion|trillion)\b)?"
)
_SCALES = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_SIGN_BEFORE = frozenset(" \t\n([{=:,;~≈<>")


def find_quantities(text: str) -> list[Quantity]:
    """Every number in ``text`` with the unit written after it, in order (module docstring).

    Digits that are part of a name are skipped: glued to a letter or ``_`` before (``L2``, ``x_3``), to
    letters after that are not a unit (``2nd``, ``3D``), a file extension (``2021.csv``), or dates, times
    and ratios (``2021-03-04``, ``12:30``, ``3/4``). Never raises.
    """
    s = normalise_unit_text(text)
    out: list[Quantity] = []
    consumed = 0  # the end of the last unit read: exponents inside it (m-2) are not numbers
    for m in _NUMBER.finditer(s):
        start, body_start = m.start(), m.start("body")
        if body_start < consumed:
            continue
        before = s[body_start - 1] if body_start > 0 else ""
        if before.isalpha() or before == "_" or before == "." or before.isdigit():
            continue
        if (
            before in "-/:"
            and body_start >= 2
            and (s[body_start - 2].isdigit() or s[body_start - 2].isalpha())
        ):
            continue  # a date, time or ratio (2021-03, 12:30, 3/4), or an exponent / id (m-2, CO-2)
        end = m.end()
        after = s[end] if end < len(s) else ""
        if after in "-/:" and end + 1 < len(s) and s[end + 1].isdigit():
            continue
        if after == "." and end + 1 < len(s) and s[end + 1].isalpha():
            continue
        unit, unit_end = read_unit(s, end)
        glued_letters = after.isalpha() or after == "_"
        if glued_letters and (unit is None or (unit_end < len(s) and s[unit_end].isalnum())):
            continue
        exp = (m.group("exp") or "").replace("−", "-")
        try:
            value = float(m.group("body").replace(",", "") + (f"e{exp}" if exp else ""))
            if m.group("exp10"):
                value *= 10.0 ** int(m.group("exp10").replace("−", "-"))
        except (ValueError, OverflowError):
            continue
        sign = m.group("sign")
        if sign and (start == 0 or s[start - 1] in _SIGN_BEFORE) and sign in "-−–":
            value = -value
        if m.group("scale"):
            value *= _SCALES[m.group("scale")]
        if math.isnan(value) or math.isinf(value):
            continue
        consumed = unit_end
        out.append(Quantity(value, unit, s[body_start if not sign else start : unit_end].strip()))
    return out


def _close(p: float, g: float, cfg: ScientificConfig) -> bool:
    if math.isnan(p) or math.isinf(p):
        return False
    return match_answer(p, g, kind="number", config=cfg.match_config).correct


def _value_match(pred: Quantity, ref: Quantity, cfg: ScientificConfig) -> tuple[bool, str]:
    """Whether ``pred`` states ``ref`` (module docstring: conversion, unit consistency); and a note."""
    if ref.unit is not None and pred.unit is not None:
        if not pred.unit.compatible(ref.unit):
            return False, f"{pred.text}: unit {pred.unit.text} is incompatible with {ref.unit.text}"
        try:
            v = pred.unit.convert(pred.value, ref.unit)
        except (ValueError, OverflowError, ZeroDivisionError):
            return False, f"{pred.text}: cannot convert to {ref.unit.text}"
        shown = f"{pred.text} (= {v:.6g} {ref.unit.text})" if pred.unit.text != ref.unit.text else pred.text
        return _close(v, ref.value, cfg), shown
    if ref.unit is not None:  # a bare number
        if cfg.require_units:
            return False, f"{pred.text}: no unit (expected {ref.unit.text})"
        readings = [pred.value]
        if ref.unit.dimensionless:
            readings.append(ref.unit.from_si(pred.value))  # 0.45 for 45%
        return any(_close(v, ref.value, cfg) for v in readings), pred.text
    readings = [pred.value]
    if pred.unit is not None and pred.unit.dimensionless:
        readings.append(pred.unit.to_si(pred.value))  # 45% for 0.45
    return any(_close(v, ref.value, cfg) for v in readings), pred.text


_SEGMENT_SPLIT = re.compile(r"\s*(?:;|,(?!\d{3}(?!\d))|\n)\s*")
_AND_SPLIT = re.compile(r"\s+and\s+", re.IGNORECASE)
_YES_NO = frozenset({"yes", "no", "true", "false"})


def _segments(reference: str, max_words: int) -> list[str]:
    """Segments at ``,``/``;``/new lines; a short segment is also split at ``and`` (``x and y``)."""
    out: list[str] = []
    for seg in _SEGMENT_SPLIT.split(reference):
        seg = seg.strip(" .:")
        if not seg:
            continue
        if len(seg.split()) <= max_words:
            out.extend(part.strip(" .:") for part in _AND_SPLIT.split(seg) if part.strip(" .:"))
        else:
            out.append(seg)
    return out


def _contains_phrase(haystack: list[str], phrase: list[str]) -> bool:
    n = len(phrase)
    return n > 0 and any(haystack[i : i + n] == phrase for i in range(len(haystack) - n + 1))


def match_scientific(
    prediction: str | None, reference: str, config: ScientificConfig | None = None
) -> ScientificMatch:
    """Whether ``prediction`` answers a scientific QA question like ``reference`` (module docstring).

    Never raises on any prediction; a blank reference is a ``ValueError`` (nothing to score against).
    """
    cfg = config or ScientificConfig()
    if not reference or not reference.strip():
        raise ValueError("no reference answer to match against")
    if prediction is None or not prediction.strip():
        return ScientificMatch(False, "empty prediction", "empty")
    pred = unwrap_boxed(prediction.strip())
    ref = reference.strip()
    if normalize_text(ref) in _YES_NO:
        r = match_answer(pred, ref, kind="bool")
        return ScientificMatch(r.correct, r.reason, "bool")
    ref_values: list[Quantity] = []
    categorical: list[str] = []
    free_text: list[str] = []
    for seg in _segments(ref, cfg.categorical_max_words):
        found = find_quantities(seg)
        if found:
            ref_values.extend(found)
        elif len(normalize_text(seg).split()) <= cfg.categorical_max_words:
            if normalize_text(seg):
                categorical.append(seg)
        else:
            free_text.append(seg)
    if not ref_values and free_text:
        r = match_answer(pred, ref, kind="text")
        return ScientificMatch(r.correct, f"free-text reference, {r.reason}", "text", decisive=False)
    pred_tokens = normalize_text(pred).split()
    missing = [c for c in categorical if not _contains_phrase(pred_tokens, normalize_text(c).split())]
    if not ref_values:
        if len(categorical) == 1 and match_answer(pred, ref, kind="text").correct:
            return ScientificMatch(True, "equal after normalisation", "categorical")
        if missing:
            shown = ", ".join(repr(c) for c in missing[:3])
            return ScientificMatch(
                False, f"{len(missing)} of {len(categorical)} categorical value(s) missing: {shown}",
                "categorical",
            )  # fmt: skip
        return ScientificMatch(True, f"all {len(categorical)} categorical value(s) present", "categorical")
    return _match_values(pred, ref_values, categorical, missing, free_text, cfg)


def _match_values(
    pred: str,
    ref_values: list[Quantity],
    categorical: list[str],
    missing: list[str],
    free_text: list[str],
    cfg: ScientificConfig,
) -> ScientificMatch:
    decisive = not free_text
    found = find_quantities(pred)
    kind = "number" if not categorical else "number+categorical"
    if not found:
        return ScientificMatch(False, "no number in the prediction", kind, decisive)
    limit = len(ref_values) + cfg.max_extra_values
    if len(found) > limit:
        return ScientificMatch(
            False,
            f"{len(found)} numbers in the prediction, at most {limit} allowed for {len(ref_values)} "
            "reference value(s) (hedging)",
            kind,
            decisive,
        )
    checks = [[_value_match(p, r, cfg) for p in found] for r in ref_values]
    ok = [[c[0] for c in row] for row in checks]
    matched = _bipartite(len(ref_values), ok)
    problems: list[str] = []
    if matched < len(ref_values):
        for r, row in zip(ref_values, checks, strict=True):
            if not any(c[0] for c in row):
                notes = [c[1] for c in row if "unit" in c[1]] or [c[1] for c in row]
                problems.append(f"{r.text}: not matched (prediction has {'; '.join(notes[:2])})")
        if not problems:
            problems.append(f"only {matched} of {len(ref_values)} values matched one-to-one")
    if missing:
        problems.append(f"categorical value(s) missing: {', '.join(repr(c) for c in missing[:3])}")
    if problems:
        return ScientificMatch(False, "; ".join(problems)[:300], kind, decisive)
    what = f"all {len(ref_values)} value(s) match within {cfg.rel_tol:.3g} relative tolerance"
    if categorical:
        what += f" and all {len(categorical)} categorical value(s) are present"
    return ScientificMatch(True, what, kind, decisive)

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
  categorical values as whole-word phrases after SQuAD normalization (a short segment is also split at
  ``and``: ``temperature and salinity`` is two values). Beyond context numbers, a prediction may state at
  most ``max_extra_values`` numbers more than the reference; more is read as hedging and fails.
* **categorical / textual answers**: a reference without numbers made of short segments is categorical
  (each segment must appear in the prediction as a phrase, or the whole must equal it after
  normalization); ``yes``/``no`` references use the matcher's boolean rule.
* **the comparison core** (:mod:`datadojo.compare.core`) reads the numbers and compares them (inclusive
  tolerance in decimal arithmetic, percent against percent as percents), sets aside sample sizes, counts,
  row numbers and asides, finds ranges and alternatives around the matched value (wrong, not decisive),
  and checks names first: a different identifier, file name or month beside the right number
  (``Site_3`` for ``Site_7``, ``July`` for ``January``) is wrong and decisive (SciDataSailor App. B.2.3:
  a wrong entity scores 0); a reference name the prediction does not state is wrong, not decisive.
* **beyond the numbers** (issue 39): the core's reading of everything else decides first — a contradicting
  direction or label word, a date (compared as a date), a list of names (a longer one is wrong); a
  reference content word the prediction and the question do not account for leaves the verdict
  undecided; a signed change in words (``fell by 5.3%``) is a signed number where the reference is signed.
* **decisive**: a reference containing a longer number-free segment (a sentence) is free text, which rules
  cannot compare; the rule then falls back to normalized equality and reports ``decisive=False``, as it
  does for every verdict it is not certain of (above), so a caller combining rule and judge
  (``qa_scoring=rule+judge`` in :mod:`datadojo.bench.scidata`) lets the judge decide those.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import Field, model_validator

from datadojo.compare.content import mask_dates
from datadojo.compare.core import (
    MAGNITUDE_LETTERS,
    MagnitudeLetters,
    Number,
    Verdict,
    answer_candidates,
    compare_answers,
    entity_check,
    find_numbers,
    hedge,
    numbers_match,
    signs_from_words,
)
from datadojo.compare.matchers import MatchConfig, _bipartite, match_answer
from datadojo.compare.text import normalize_text
from datadojo.compare.units import Unit
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

    rel_tol: float = Field(
        0.01, description="relative tolerance of a number, compared in the reference's unit (ours: 1%)"
    )
    abs_tol: float = Field(1e-6, description="absolute tolerance, for references of (nearly) zero")
    require_units: bool = Field(
        False,
        description="a number without a unit fails where the reference has one (off: read in the reference's unit)",
    )
    max_extra_values: int = Field(
        2, description="most numbers an answer may give beyond the reference's (more is read as hedging)"
    )
    categorical_max_words: int = Field(
        6, description="longest reference segment, in words, read as a categorical value"
    )
    magnitude_letters: MagnitudeLetters = Field(
        "glued",
        description="when 1.2M / 5k are magnitudes: glued to the digits, also spaced (always) or never",
    )

    @model_validator(mode="after")
    def _check(self) -> ScientificConfig:
        MatchConfig(rel_tol=self.rel_tol, abs_tol=self.abs_tol)  # the same checks as the matcher's
        if self.max_extra_values < 0:
            raise ValueError(f"max_extra_values must be >= 0, got {self.max_extra_values}")
        if self.magnitude_letters not in MAGNITUDE_LETTERS:
            raise ValueError(
                f"magnitude_letters must be one of {MAGNITUDE_LETTERS}, got {self.magnitude_letters!r}"
            )
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


def find_quantities(text: str, *, magnitude_letters: MagnitudeLetters = "glued") -> list[Quantity]:
    """Every number in ``text`` with the unit written after it, in order: the comparison core's reading
    (:func:`datadojo.compare.core.find_numbers`: digits that are part of a name, dates, times and ratios
    skipped; sign, exponent, ``±``, magnitudes and separators read). Never raises."""
    return [
        Quantity(n.value, n.unit, n.text) for n in find_numbers(text, magnitude_letters=magnitude_letters)
    ]


def _value_match(pred: Number, ref: Number, cfg: ScientificConfig) -> Verdict:
    """Whether ``pred`` states ``ref`` (module docstring: conversion, unit consistency), through the core."""
    if ref.unit is not None and pred.unit is None and cfg.require_units:
        return Verdict(False, True, f"{pred.text}: no unit (expected {ref.unit.text})")
    return numbers_match(pred, ref, cfg.rel_tol, cfg.abs_tol)


_SEGMENT_SPLIT = re.compile(r"\s*(?:;|(?<!\d),|,(?!\d)|\n)\s*")
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
    prediction: str | None,
    reference: str,
    config: ScientificConfig | None = None,
    *,
    question: str | None = None,
) -> ScientificMatch:
    """Whether ``prediction`` answers a scientific QA question like ``reference`` (module docstring).

    ``question`` (where the caller has it) accounts for the reference's words it repeats.

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
        return ScientificMatch(r.correct, r.reason, "bool", decisive=r.decided)
    core = compare_answers(
        pred, ref, question=question, rel_tol=cfg.rel_tol, abs_tol=cfg.abs_tol,
        magnitude_letters=cfg.magnitude_letters,
    )  # fmt: skip
    if (
        core.basis in ("contradiction", "dates", "list")
        or (core.basis == "direction" and core.decided)
        or mask_dates(ref)[1]  # a reference with a date: the core compares it as a date
    ):
        return ScientificMatch(core.correct, core.reason, core.basis, decisive=core.decided)
    names = entity_check(pred, ref)
    if names is not None and names.decided:
        return ScientificMatch(False, names.reason, "entity")
    signed_ref = signs_from_words(ref)
    if signed_ref != ref or _SIGNED.search(ref):  # "fell by 5.3%" is -5.3% where the reference has signs
        pred, ref = signs_from_words(pred), signed_ref
    r = _match_reference(pred, ref, names, cfg)
    if r.correct and r.decisive and not core.decided and core.basis in ("content", "direction"):
        return ScientificMatch(core.correct, f"{r.reason}; {core.reason}", r.kind, decisive=False)
    return r


_SIGNED = re.compile(r"(?<![\w.])[-+−]\s?[$€£¥₹]?\d")


def _match_reference(pred: str, ref: str, names: Verdict | None, cfg: ScientificConfig) -> ScientificMatch:
    ref_values: list[Number] = []
    categorical: list[str] = []
    free_text: list[str] = []
    for seg in _segments(ref, cfg.categorical_max_words):
        found = find_numbers(seg, magnitude_letters=cfg.magnitude_letters)
        if found:
            ref_values.extend(answer_candidates(found))
        elif len(normalize_text(seg).split()) <= cfg.categorical_max_words:
            if normalize_text(seg):
                categorical.append(seg)
        else:
            free_text.append(seg)
    if not ref_values and free_text:
        r = match_answer(pred, ref, kind="text")
        return ScientificMatch(r.correct, f"free-text reference, {r.reason}", "text", decisive=False)
    pred_tokens = normalize_text(re.sub(r"[,;]", " ", pred)).split()  # "1982,Limerick": two words
    missing = [c for c in categorical if not _contains_phrase(pred_tokens, normalize_text(c).split())]
    if not ref_values:
        if len(categorical) == 1 and match_answer(pred, ref, kind="text").correct:
            return ScientificMatch(True, "equal after normalization", "categorical")
        if missing:
            shown = ", ".join(repr(c) for c in missing[:3])
            return ScientificMatch(
                False, f"{len(missing)} of {len(categorical)} categorical value(s) missing: {shown}",
                "categorical",
            )  # fmt: skip
        return ScientificMatch(True, f"all {len(categorical)} categorical value(s) present", "categorical")
    r = _match_values(pred, ref_values, categorical, missing, free_text, cfg)
    if (
        names is not None
    ):  # a reference name the prediction does not state: incomplete, or named by the question
        return ScientificMatch(False, f"{r.reason}; {names.reason}", r.kind, decisive=False)
    return r


def _match_values(
    pred: str,
    ref_values: list[Number],
    categorical: list[str],
    missing: list[str],
    free_text: list[str],
    cfg: ScientificConfig,
) -> ScientificMatch:
    decisive = not free_text
    stated = find_numbers(pred, magnitude_letters=cfg.magnitude_letters)
    found = answer_candidates(stated)  # sample sizes, row numbers, counts and asides only if nothing else
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
    ok = [[c.correct for c in row] for row in checks]
    matched = _bipartite(len(ref_values), ok)
    problems: list[str] = []
    if matched < len(ref_values):
        for r, row in zip(ref_values, checks, strict=True):
            if not any(c.correct for c in row):
                notes = [c.reason for c in row if "unit" in c.reason] or [c.reason for c in row]
                problems.append(f"{r.text}: not matched (prediction has {'; '.join(notes[:2])})")
        if not problems:
            problems.append(f"only {matched} of {len(ref_values)} values matched one-to-one")
    if missing:
        problems.append(f"categorical value(s) missing: {', '.join(repr(c) for c in missing[:3])}")
    if problems:
        return ScientificMatch(False, "; ".join(problems)[:300], kind, decisive)
    for row in checks:
        for p, c in zip(found, row, strict=True):
            hedged = hedge(pred, stated, p, ref_values, cfg.rel_tol) if c.correct else None
            if hedged:
                return ScientificMatch(
                    False, f"{hedged}: the answer does not commit to one value", kind, False
                )
    sure = _bipartite(len(ref_values), [[c.correct and c.decided for c in row] for row in checks])
    if sure < len(ref_values):
        decisive = False
    elif len(found) > len(ref_values):
        used = {i for row in ok for i, hit in enumerate(row) if hit}
        if any(i not in used for i in range(len(found))):
            decisive = False  # other candidate numbers beside the matching one: which answers is a guess
    what = f"all {len(ref_values)} value(s) match within {cfg.rel_tol:.3g} relative tolerance"
    if categorical:
        what += f" and all {len(categorical)} categorical value(s) are present"
    return ScientificMatch(True, what, kind, decisive)

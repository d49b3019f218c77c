"""The one comparison core behind every rule that decides whether two answers say the same thing.

Three rules use it, so a fix lands in all three: DataMind's tolerant matcher
(:func:`datadojo.compare.matchers.match_answer`, hence the RL answer reward
:func:`datadojo.reward.default_answer_check`), the SciDataSailor QA matcher
(:func:`datadojo.compare.scientific.match_scientific`) and DataMind's self-consistency pre-check
(:func:`datadojo.synth.datamind.consistency.rule_check`). Their criteria come from the papers' judges:
DataMind §3.2 / App. I.4 (numbers within 3 % of each other after unit conversion, semantic equivalence,
completeness) and SciDataSailor App. B.2.3 (a wrong entity scores 0).

What the core does:

* :func:`find_numbers` reads every number in running text with its sign, currency, thousands separators
  (``1,234.5``, ``1.234,5``, ``1 234,5``, ``1'234.5``), decimal comma (``3,14``), exponent (``3.14e-2``,
  ``1.2 × 10⁻³``), uncertainty (``2.89 ± 0.05``: the central value), percent, magnitude (``thousand``,
  ``million``, ``mn``, ``bn``, and the letters ``k``/``K``/``M``/``B`` glued to the digits, see
  ``magnitude_letters``) and unit (:mod:`datadojo.compare.units`). Digits that are part of a name (``Q1``,
  ``Store_12``, ``2021.csv``), dates and times are not numbers. Each number says whether it is *context*
  (a sample size ``n=100``, a row or index number, a count of rows/samples, a year after "in") and whether
  it is in parentheses.
* :func:`numbers_match` compares two numbers: units converted into the reference's unit (incompatible
  units are wrong), percent against percent as percents (``0.125%`` is not ``12.5%``), percent against a
  bare figure both ways (``45%`` = ``0.45`` = ``45``), within ``max(rel_tol·|scale|, abs_tol)``
  **inclusive**, computed in :class:`decimal.Decimal` from the shortest decimal form of each float, so
  ``1.03`` vs ``1.0`` at 3 % is equal (float subtraction gives 0.030000000000000027).
* :func:`answer_number` chooses the number that answers: context and parenthesized numbers only when there
  is nothing else; several different candidates make the choice uncertain.
* :func:`hedge` finds a range (``between 40 and 46``, ``40–46``, ``40 to 46``), alternatives (``45 or 46``)
  or a bound (``at least 40``) around the chosen number: an answer that merely contains the value.
* :func:`entity_check` compares the names an answer gives: identifiers with digits (``Q1``/``Q3``,
  ``Store_12``/``Store_7``, ``Site_7``), file names (``a.csv``/``b.csv``), months and weekdays. A
  different name of the same kind is wrong; a reference name the prediction does not state is uncertain.
* :func:`worded_signs` reads a signed change written in words (``fell by 5.3%``, ``dropped``, ``down``,
  ``a decrease of``) as a negative number.
* :func:`compare_answers` puts these together for one pair of answers and returns a :class:`Verdict`
  with ``decided`` (the rule is certain) — callers send undecided pairs to a judge where one is configured
  and count them as undecided where none is. **A rule decides only what it fully read** (issue 39): dates
  are cut out and compared as dates, and every content word and direction word of the reference must be
  accounted for by the prediction or the question (:mod:`datadojo.compare.content`); an opposite
  direction word or another complementary label is a decided wrong, anything else not accounted for
  leaves the verdict undecided. A reference without numbers is compared item by item (a name is one item,
  ``Apples, Bananas, Cherries`` three): a preamble ending in a copula is set aside, a further item makes
  a longer list (wrong), order counts when the question asks for one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import Literal

from datadojo.compare.content import (
    FILLER,
    NEGATIONS,
    check_content,
    check_items,
    compare_dates,
    content_words,
    list_items,
    mask_dates,
    polar_words,
    question_pole,
    stem,
    tokens,
)
from datadojo.compare.text import normalize_text
from datadojo.compare.units import Unit, normalize_unit_text, parse_unit, read_unit

__all__ = [
    "MAGNITUDE_LETTERS",
    "Number",
    "Verdict",
    "answer_number",
    "bipartite",
    "compare_answers",
    "entity_check",
    "find_numbers",
    "hedge",
    "numbers_match",
    "signs_from_words",
    "within",
    "worded_signs",
]

#: How magnitude letters are read: ``glued`` (default) reads ``k``/``K``/``M``/``B`` written right after
#: the digits (``1.2M``, ``5k``, ``3B``) as magnitudes and a spaced letter (``1.2 M``) as a unit (molar);
#: ``always`` reads both as magnitudes; ``never`` reads neither (chemistry with molar ``5M``).
MAGNITUDE_LETTERS: tuple[str, ...] = ("glued", "always", "never")
MagnitudeLetters = Literal["glued", "always", "never"]

_WORD_MAGNITUDES = {
    "thousand": 1e3,
    "million": 1e6,
    "mn": 1e6,
    "mln": 1e6,
    "billion": 1e9,
    "bn": 1e9,
    "trillion": 1e12,
}
_LETTER_MAGNITUDES = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9}
_PERCENT = parse_unit("%")


@dataclass(frozen=True)
class Verdict:
    """A rule's verdict on one pair of answers: ``correct``, and whether the rule is certain (``decided``).

    ``decided=False`` means the rule guessed (several candidate numbers, a hedge, a missing entity, unknown
    units, descriptive text, a reference word it could not account for): a caller with a judge asks it, a
    caller without one uses ``correct`` and counts the verdict as undecided. ``basis`` names what a
    verdict of :func:`compare_answers` rests on where it is not the numbers alone: ``contradiction`` (an
    opposite direction or label word), ``dates``, ``list``, ``content`` (reference words not accounted
    for, a negation) or ``direction`` (a signed change in words against an unsigned reference).
    """

    correct: bool
    decided: bool
    reason: str
    basis: str = ""

    def __bool__(self) -> bool:
        return self.correct


@dataclass(frozen=True)
class Number:
    """A number read from text.

    ``value`` is the figure as written times its magnitude (45 for ``45%``, 1.2e6 for ``1.2M``), in
    ``unit`` (``None``: none written or not a known unit; ``%`` for a percentage); ``word`` is an unknown
    word written after it (``12 apples``). ``context`` marks a count, sample size, row number or year;
    ``in_parens`` a number inside parentheses. ``start``/``end`` locate it in the text.
    """

    value: float
    unit: Unit | None
    text: str
    start: int
    end: int
    decimals: int = 0
    word: str = ""
    context: bool = False
    in_parens: bool = False

    @property
    def percent(self) -> bool:
        return self.unit is not None and self.unit.text.strip().lower() in ("%", "percent", "per cent")

    @property
    def fraction(self) -> float:
        """The value as a fraction when the unit is dimensionless (0.45 for 45%), else the value."""
        if self.unit is not None and self.unit.dimensionless:
            return self.unit.to_si(self.value)
        return self.value


_NUMBER = re.compile(
    r"(?P<sign>[-+−–]?)(?P<cur>[$€£¥₹]\s?)?"
    r"(?P<body>"
    r"\d{1,3}(?:\.\d{3})+,\d+(?!\d)"  # 1.234,5 / 1.234.567,89
    r"|\d{1,3}(?:\.\d{3}){2,}(?![\d.])"  # 1.234.567
    r"|\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,])"  # 1,234,567.89
    r"|\d{1,3}(?:['\u00a0\u202f\u2009]\d{3})+(?:[.,]\d+)?(?!\d)"  # 1 234,5 / 1'234.5
    r"|0,\d+(?![\d,])|\d+,\d{1,2}(?![\d,])"  # decimal comma: 0,125 / 3,14
    r"|\d+(?:\.\d+)?|\.\d+"
    r")"
    r"(?:[eE](?P<exp>[-+−]?\d+)|\s*[x×·*]\s*10\s*\^?\s*(?P<exp10>[-+−]?\d+))?"
    r"(?P<pm>\s*(?:±|\+/-|\+-)\s*(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?)?"
    r"(?:\s*(?P<wmag>thousand|million|mln|mn|billion|bn|trillion)\b"
    r"|(?P<lmag>[kKMB])(?![A-Za-z0-9_])"
    r"|\s(?P<smag>[kKMB])(?![A-Za-z0-9_]))?"
)
_SIGN_BEFORE = frozenset(" \t\n([{=:,;~≈<>")
_CONTEXT_BEFORE = re.compile(
    r"(?:\b[nN]\s*[=:]|\bsample size(?: of)?(?: is)?|\b(?:rows?|lines?|index|idx|id|record|entry|step|turn|"
    r"attempt|trial|iteration|top|rank|column|col|position|out of|based on|from|of all)\s*[:=#]?|#)\s*$",
    re.IGNORECASE,
)
_WORD_AFTER = re.compile(r"\s*([A-Za-z]{2,24})\b")
_CONTEXT_AFTER = re.compile(
    r"\s*(?:valid\s+|non-null\s+|total\s+)?(?:rows?|records?|samples?|observations?|entries|items|data points|"
    r"points|participants|subjects|respondents|people|values|cases|countries|files|columns|groups|categories|"
    r"trials|measurements|readings|stations|years of data|days of data|lines|transactions|customers|"
    r"products|stores|sites)\b",
    re.IGNORECASE,
)
_DATE = re.compile(
    r"(?<!\d)(?:\d{4}-\d{1,2}(?:-\d{1,2})?|\d{1,2}[-/.]\d{1,2}[-/.]\d{4}|\d{1,2}:\d{2}(?::\d{2})?)(?![\d.,]\d)"
)
_NOT_UNITS = frozenset(
    {
        "and", "or", "to", "the", "of", "in", "is", "was", "with", "for", "per", "at", "on", "by", "from",
        "than", "as", "vs", "versus", "which", "that", "this", "it", "its", "are", "were", "be", "been",
        "being", "has", "have", "had", "an", "over", "under", "between", "respectively", "each",
    }
)  # fmt: skip
_YEAR_BEFORE = re.compile(r"\b(?:in|since|during|until|by|year|from|of)\s*$", re.IGNORECASE)


def _body_value(body: str) -> tuple[str, int]:
    """A digit body with its separators rewritten in Python's form, and its decimals as written."""
    b = body.replace("'", "").replace("\u00a0", "").replace("\u202f", "").replace("\u2009", "")
    if "," in b and "." in b:  # the later one is the decimal point
        b = b.replace(".", "").replace(",", ".") if b.rfind(",") > b.rfind(".") else b.replace(",", "")
    elif b.count(".") > 1:  # 1.234.567
        b = b.replace(".", "")
    elif "," in b:
        head, _, tail = b.rpartition(",")
        b = b.replace(",", "") if len(tail) == 3 and not head.startswith("0") else b.replace(",", ".")
    decimals = len(b.split(".", 1)[1]) if "." in b else 0
    return b, decimals


def find_numbers(text: str, *, magnitude_letters: MagnitudeLetters = "glued") -> list[Number]:
    """Every number in ``text`` with its unit, in order (module docstring); never raises."""
    s = normalize_unit_text(text)
    out: list[Number] = []
    consumed = 0
    depth_at = _paren_depths(s)
    dates = [m.span() for m in _DATE.finditer(s)]
    for m in _NUMBER.finditer(s):
        start, body_start = m.start(), m.start("body")
        if body_start < consumed:
            continue
        before = s[body_start - 1] if body_start > 0 else ""
        if m.group("cur"):
            before = s[start - 1] if start > 0 else ""
        if before and (before.isalpha() or before in "_.@" or before.isdigit()):
            continue  # part of a name (Q1, Store_12, v2.0)
        if any(a <= body_start < b for a, b in dates):
            continue  # a date or a time (2021-03-04, 04/03/2021, 12:30)
        if before and before in "/:" and body_start >= 2 and s[body_start - 2].isalnum():
            continue  # a ratio (3/4) or a label (x:3)
        if before == "-" and body_start >= 2 and s[body_start - 2].isalpha():
            continue  # an id (CO-2)
        end = m.end()
        after = s[end] if end < len(s) else ""
        if after == "/" and end + 1 < len(s) and s[end + 1].isdigit():
            continue  # 3/4
        if after == "." and end + 1 < len(s) and s[end + 1].isalpha():
            continue  # 2021.csv
        try:
            body, decimals = _body_value(m.group("body"))
            exp = (m.group("exp") or "").replace("−", "-")
            value = float(body + (f"e{exp}" if exp else ""))
            if m.group("exp10"):
                value *= 10.0 ** int(m.group("exp10").replace("−", "-"))
        except (ValueError, OverflowError):
            continue
        magnitude = 1.0
        if m.group("wmag"):
            magnitude = _WORD_MAGNITUDES[m.group("wmag")]
        elif m.group("lmag") and magnitude_letters != "never":
            magnitude = _LETTER_MAGNITUDES[m.group("lmag")]
        elif m.group("smag") and magnitude_letters == "always":
            magnitude = _LETTER_MAGNITUDES[m.group("smag")]
        elif m.group("lmag") or m.group("smag"):  # the letter is not a magnitude: leave it to the units
            end = m.start("lmag") if m.group("lmag") else m.start("smag")
        unit, unit_end = read_unit(s, end)
        after = s[end] if end < len(s) else ""
        glued = after.isalpha() or after == "_"
        if glued and (unit is None or (unit_end < len(s) and (s[unit_end].isalnum() or s[unit_end] == "_"))):
            continue  # 2nd, 3D, 12abc
        word = ""
        if unit is None:
            w = _WORD_AFTER.match(s, end)
            if w and w.group(1).lower() not in _NOT_UNITS and not _CONTEXT_AFTER.match(s, end):
                word = w.group(1).lower()
        value *= magnitude
        sign = m.group("sign")
        signed = bool(sign) and (start == 0 or s[start - 1] in _SIGN_BEFORE)
        if signed and sign in "-−–":
            value = -value
        if math.isnan(value) or math.isinf(value):
            continue
        stop = unit_end if unit is not None else end
        consumed = stop
        head = s[max(0, start - 40) : start]
        worded = any(ch.isalpha() or ch in "#=:" for ch in head)  # skip the search on bare digit runs
        context = bool((worded and _CONTEXT_BEFORE.search(head)) or _CONTEXT_AFTER.match(s, stop))
        if (
            not context
            and unit is None
            and decimals == 0
            and 1800 <= value <= 2100
            and _YEAR_BEFORE.search(head)
        ):
            context = True  # a year ("in 2020")
        shown_from = start if signed else m.start("cur") if m.group("cur") else body_start
        out.append(
            Number(
                value=value, unit=unit, text=s[shown_from:stop].strip(), start=shown_from, end=stop,
                decimals=decimals, word=word, context=context, in_parens=depth_at[start] > 0,
            )
        )  # fmt: skip
    return out


def _paren_depths(s: str) -> list[int]:
    depth, out = 0, []
    for ch in s:
        out.append(depth)
        if ch in "([":
            depth += 1
        elif ch in ")]" and depth:
            depth -= 1
    out.append(depth)
    return out


def _dec(x: float) -> Decimal:
    return Decimal(repr(float(x)))


def within(a: float, b: float, rel_tol: float, abs_tol: float = 0.0, *, symmetric: bool = False) -> bool:
    """``|a − b| ≤ max(rel_tol·|b|, abs_tol)``, boundary included, in decimal arithmetic.

    ``symmetric`` scales by ``max(|a|, |b|)`` instead of the reference ``b`` (DataMind's "within 3 % of each
    other" for N answers of equal standing). NaN equals only NaN, infinities only themselves.
    """
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    try:
        da, db = _dec(a), _dec(b)
        scale = max(abs(da), abs(db)) if symmetric else abs(db)
        return abs(da - db) <= max(_dec(rel_tol) * scale, _dec(abs_tol))
    except InvalidOperation:  # pragma: no cover - repr of a finite float is always a decimal
        return False


def numbers_match(
    pred: Number, ref: Number, rel_tol: float, abs_tol: float = 0.0, *, symmetric: bool = False
) -> Verdict:
    """Whether ``pred`` states ``ref`` (module docstring: units, percents, inclusive tolerance)."""

    def close(a: float, b: float) -> bool:
        return within(a, b, rel_tol, abs_tol, symmetric=symmetric)

    if pred.percent and ref.percent:
        ok = close(pred.value, ref.value)
        return Verdict(ok, True, f"{pred.text} {'equals' if ok else 'differs from'} {ref.text} (as percents)")
    if pred.unit is not None and ref.unit is not None:
        if not pred.unit.compatible(ref.unit):
            return Verdict(
                False, True, f"{pred.text}: unit {pred.unit.text} is incompatible with {ref.unit.text}"
            )
        try:
            v = pred.unit.convert(pred.value, ref.unit)
        except (ValueError, OverflowError, ZeroDivisionError):
            return Verdict(False, True, f"{pred.text}: cannot convert to {ref.unit.text}")
        ok = close(v, ref.value)
        shown = f"{pred.text} (= {v:.6g} {ref.unit.text})" if pred.unit.text != ref.unit.text else pred.text
        return Verdict(ok, True, f"{shown} {'equals' if ok else 'differs from'} {ref.text}")
    note = ""
    ok = close(pred.value, ref.value)
    decided = True
    if pred.percent != ref.percent and (pred.unit is None or ref.unit is None):
        # percent against a bare figure: the fraction reading (45% = 0.45) is certain; the percentage-point
        # reading (45% = 45) is a guess, as the bare figure may be a fraction that happens to look alike
        frac = close(pred.fraction, ref.fraction)
        if frac:
            ok, note = True, " (percent read as a fraction)"
        elif ok:
            decided, note = False, " (as percentage points; the bare figure may be meant otherwise)"
    if pred.word and ref.word and pred.word != ref.word:
        decided = False
        note += f" (units {pred.word!r} and {ref.word!r} not understood)"
    return Verdict(ok, decided, f"{pred.text} {'equals' if ok else 'differs from'} {ref.text}{note}")


def answer_candidates(numbers: list[Number]) -> list[Number]:
    """The numbers that may answer: not context, not in parentheses, when there are such; else fewer filters."""
    for keep in (
        lambda n: not n.context and not n.in_parens,
        lambda n: not n.context,
        lambda n: True,
    ):
        found = [n for n in numbers if keep(n)]
        if found:
            return found
    return []


def answer_number(numbers: list[Number], rel_tol: float = 0.0) -> tuple[Number | None, bool, str]:
    """The number that answers, whether that choice is certain, and how it was chosen.

    Certain when one candidate remains (or all remaining candidates state the same value); otherwise the
    last candidate is the guess (answers end with their conclusion).
    """
    cands = answer_candidates(numbers)
    if not cands:
        return None, True, "no number"
    first = cands[0]
    same = all(
        numbers_match(n, first, rel_tol, symmetric=True).correct and numbers_match(first, n, rel_tol).correct
        for n in cands[1:]
    )
    if same:
        how = "the number" if len(numbers) == 1 else "the number beside the context"
        return cands[-1], True, how
    return cands[-1], False, f"{len(cands)} candidate numbers, the last taken"


_BOUND = re.compile(
    r"(?:\bat (?:least|most)|\b(?:more|less|fewer|greater|higher|lower) than|\bup to|\bover|\bunder|\babove"
    r"|\bbelow|\bexceeds?|[<>≥≤]=?)\s*$",
    re.IGNORECASE,
)
_RANGE_BETWEEN = re.compile(r"\b(?:between|from)\s*$", re.IGNORECASE)
_RANGE_JOIN = re.compile(
    r"^\s*,?\s*(?:and|to|-|–|—|or|and/or)(?:\s+(?:maybe|possibly|perhaps|even|about|around))?\s*$",
    re.IGNORECASE,
)


def hedge(
    text: str,
    numbers: list[Number],
    chosen: Number | None,
    reference: list[Number] | None = None,
    rel_tol: float = 0.0,
) -> str | None:
    """A description of the range, alternatives or bound around ``chosen`` in ``text``, or ``None``.

    A pair whose other number is also one of the ``reference`` numbers is the reference's own range or
    score (``3 - 0``, ``2011 - 12``), not a hedge.
    """
    if chosen is None:
        return None
    s = normalize_unit_text(text)
    i = next((k for k, n in enumerate(numbers) if n.start == chosen.start), None)
    if i is None:
        return None
    head = s[max(0, chosen.start - 30) : chosen.start]
    if _BOUND.search(head):
        return f"a bound, not a value ({head.strip()[-15:]} {chosen.text})"
    for j in (i - 1, i + 1):
        if 0 <= j < len(numbers) and not numbers[j].context:
            a, b = (numbers[j], chosen) if j < i else (chosen, numbers[j])
            gap = s[a.end : b.start]
            if (
                reference
                and len(reference) >= 2
                and all(any(numbers_match(n, r, rel_tol).correct for r in reference) for n in (a, b))
            ):
                continue  # both ends are reference values: the reference's own range or score
            if _RANGE_JOIN.match(gap) and not numbers_match(a, b, 0.0).correct:
                if gap.strip().lower() in ("-", "–", "—") and b.value < 0 and a.value > 0:
                    continue  # 5 - -3 is not a range anyone writes; the minus belongs to the number
                return f"a range or alternatives ({a.text}{gap}{b.text})"
    if _RANGE_BETWEEN.search(head):
        return f"a range ({head.strip()[-10:]} {chosen.text} …)"
    return None


# --- entities -------------------------------------------------------------------------------------------

_IDENT = re.compile(r"(?<![\w.])([A-Za-z]+)[_\-#]?(\d+[A-Za-z0-9_]*)(?![\w])")
_FILE = re.compile(
    r"(?<![\w.])([\w\-]+)\.(csv|tsv|json|jsonl|xlsx?|parquet|txt|nc|h5|hdf5|sqlite|db|py|xml|fasta|fa|gb|md|dat)\b",
    re.IGNORECASE,
)
_MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december",
)  # fmt: skip
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH_ABBR = {m[:3]: m for m in _MONTHS} | {"sept": "september"}
_DAY_ABBR = {d[:3]: d for d in _WEEKDAYS}


def _entities(text: str) -> dict[str, set[str]]:
    """Names in ``text`` by kind: ``id:<stem>`` (Q1 → ``id:q``), ``file:<ext>``, ``month``, ``weekday``."""
    out: dict[str, set[str]] = {}
    for m in _IDENT.finditer(text):
        stem, digits = m.group(1).lower(), m.group(2).lower()
        if stem in ("e", "x") and digits.isdigit():
            continue  # 1e5 / 3x leftovers
        glue = text[m.end(1) : m.start(2)]
        if glue in ("", "-") and len(digits) <= 2 and digits.isdigit() and parse_unit(m.group(1)) is not None:
            continue  # a unit with an exponent (m-2, s-1, m2), not a name
        out.setdefault(f"id:{stem}", set()).add(f"{stem}{digits}")
    for m in _FILE.finditer(text):
        out.setdefault(f"file:{m.group(2).lower()}", set()).add(m.group(0).lower())
    for word in re.findall(r"[A-Za-z]+", text):
        w = word.lower()
        if w in _MONTHS or (w in _MONTH_ABBR and word[0].isupper()):
            out.setdefault("month", set()).add(_MONTH_ABBR.get(w, w))
        elif w in _WEEKDAYS or (w in _DAY_ABBR and word[0].isupper()):
            out.setdefault("weekday", set()).add(_DAY_ABBR.get(w, w))
    return out


def entity_check(prediction: str, reference: str, *, symmetric: bool = False) -> Verdict | None:
    """``None`` when the names agree (or the reference names nothing); a wrong :class:`Verdict` when the
    prediction gives a different name of a kind the reference names (decided); an undecided wrong verdict
    when a reference name is missing and nothing contradicts it (an omission, unless the question named it).
    """
    ref, pred = _entities(reference), _entities(prediction)
    missing: list[str] = []
    for kind, names in ref.items():
        absent = names - pred.get(kind, set())
        if not absent:
            continue
        others = pred.get(kind, set()) - names
        if others:
            return Verdict(
                False, True,
                f"wrong entity: {', '.join(sorted(others))} where the reference has {', '.join(sorted(absent))}",
            )  # fmt: skip
        missing.extend(sorted(absent))
    if symmetric:
        for kind, names in pred.items():
            if kind not in ref:
                missing.extend(sorted(names))
    if missing:
        return Verdict(False, False, f"the reference names {', '.join(missing[:3])}; the prediction does not")
    return None


# --- one pair of answers --------------------------------------------------------------------------------


def _light(text: str) -> str:
    """Case and spacing folded, a trailing full stop dropped; signs, points and percents kept."""
    return " ".join(text.strip().rstrip(".").casefold().split())


def _words(text: str, numbers: list[Number]) -> set[str]:
    cut, last = [], 0
    for n in numbers:
        cut.append(text[last : n.start])
        last = n.end
    cut.append(text[last:])
    rest = " ".join(cut)
    rest = "".join(ch if ch.isalpha() or ch.isspace() else " " for ch in rest)
    return set(normalize_text(rest).split())


_DOWN_WORDS = (
    "fell|falls|fall|dropped|drops|drop|declined|declines|decreased|decreases|shrank|shrunk|lost|loses|"
    "down|dipped|slid|sank|plunged|plummeted|contracted|went down"
)
_UP_WORDS = (
    "rose|rises|rise|grew|grows|increased|increases|climbed|gained|gains|up|jumped|surged|soared|went up"
)
_WORDED_SIGN = re.compile(
    rf"\b(?:(?P<down>{_DOWN_WORDS})|(?P<up>{_UP_WORDS}))\s+(?:by\s+)?"
    r"(?:(?:about|approximately|around|roughly|nearly|almost|some|just)\s+)?$"
    r"|\b(?:(?P<ndown>decrease|decline|drop|fall|reduction|loss)|(?P<nup>increase|rise|gain|growth))\s+"
    r"(?:of\s+)?(?:(?:about|approximately|around|roughly|nearly|almost|some|just)\s+)?$",
    re.IGNORECASE,
)


def worded_signs(text: str, numbers: list[Number]) -> tuple[list[Number], dict[int, tuple[int, int]]]:
    """Numbers whose sign is written in words (``fell by 5.3%``, ``dropped 5.3%``, ``down 5.3%``, ``a
    decrease of 5.3%``) made negative, and for each such number (by index) ``(direction, phrase start)``:
    ``-1`` down, ``+1`` up. ``text`` is the :func:`normalize_unit_text` form the numbers were read from.
    A number written with its own sign keeps it (``fell by -5.3%`` says nothing clear).
    """
    out, worded = list(numbers), {}
    for i, n in enumerate(numbers):
        head = text[max(0, n.start - 40) : n.start]
        m = _WORDED_SIGN.search(head)
        if m is None:
            continue
        direction = -1 if (m.group("down") or m.group("ndown")) else 1
        worded[i] = (direction, n.start - len(head) + m.start())
        if direction < 0 and n.value > 0 and not _explicit_sign(n):
            out[i] = replace(n, value=-n.value, text=f"-{n.text}")
    return out, worded


_HEDGE_WORDS = r"(?:(?:about|approximately|around|roughly|nearly|almost|some|just)\s+)?"
_SIGN_PHRASE = re.compile(
    rf"\b(?:(?P<down>{_DOWN_WORDS})|(?P<up>{_UP_WORDS}))\s+(?:by\s+)?{_HEDGE_WORDS}(?=[$€£¥₹]?\d)"
    rf"|\b(?:an?\s+)?(?:(?P<ndown>decrease|decline|drop|fall|reduction|loss)|(?P<nup>increase|rise|gain|growth))"
    rf"\s+(?:of\s+)?{_HEDGE_WORDS}(?=[$€£¥₹]?\d)",
    re.IGNORECASE,
)


def signs_from_words(text: str) -> str:
    """``text`` with a signed change in words written as a sign: ``fell by 5.3%`` → ``-5.3%``, ``rose
    5%`` → ``5%`` (for rules that read numbers from text themselves, like the scientific matcher)."""
    return _SIGN_PHRASE.sub(lambda m: "-" if m.group("down") or m.group("ndown") else "", text)


def _explicit_sign(n: Number) -> bool:
    return n.text[:1] in "+-−–"


def _counted_end(text: str, n: Number) -> int:
    """Where a number ends with the unknown word written after it (``8 sequences``, ``12 apples``): that
    word belongs to the number, and a different one on the other side already makes the numbers
    undecided (:func:`numbers_match`). A counted noun the core knows (``1200 customers``) stays a content
    word, so ``1200 orders`` does not answer it."""
    w = _WORD_AFTER.match(text, n.end)
    if w and n.word:
        return w.end()
    return n.end


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the spans blanked (positions kept)."""
    chars = list(text)
    for a, b in spans:
        chars[a:b] = " " * (b - a)
    return "".join(chars)


def compare_answers(
    prediction: str,
    reference: str,
    *,
    question: str | None = None,
    rel_tol: float = 0.03,
    abs_tol: float = 1e-6,
    symmetric: bool = False,
    magnitude_letters: MagnitudeLetters = "glued",
) -> Verdict:
    """Whether ``prediction`` says what ``reference`` says (module docstring), and how certain that is.

    Decided only when every content-bearing part of the reference is accounted for: its numbers (sign,
    unit, scale), dates, names, content words and direction words (:mod:`datadojo.compare.content`).
    ``question``, where the caller has it, accounts for the reference's words it repeats ("How many
    customers does Germany have?" lets ``1200`` answer ``Germany: 1200``) and says whether a list is
    ordered. ``symmetric`` is for N answers of equal standing (the self-consistency pre-check): the
    tolerance is relative to the larger value, hedges on either side count, and differing words around
    equal numbers leave the verdict undecided (the judge checks meaning and completeness).
    """
    if _light(prediction) == _light(reference):
        return Verdict(True, True, "identical after normalization")
    if normalize_text(reference) in _YES | _NO:
        said = _yes_no(prediction, normalize_text(reference) in _YES)
        if symmetric and said.decided:  # the other answer's wording differs: the judge reads it
            return Verdict(said.correct, False, f"{said.reason}; the wording differs")
        return said
    pmask, pdates = mask_dates(normalize_unit_text(prediction))
    rmask, rdates = mask_dates(normalize_unit_text(reference))
    dates = compare_dates(pdates, rdates)
    if dates is not None and dates[1] and not dates[0]:
        return Verdict(False, True, dates[2], "dates")
    pnums = find_numbers(pmask, magnitude_letters=magnitude_letters)
    rnums = find_numbers(rmask, magnitude_letters=magnitude_letters)
    pnums, pworded = worded_signs(pmask, pnums)
    rnums, rworded = worded_signs(rmask, rnums)
    ent = entity_check(pmask, rmask, symmetric=symmetric)
    if ent is not None and ent.decided:
        return ent
    pwords = _cut(
        pmask, [(pworded.get(i, (0, n.start))[1], _counted_end(pmask, n)) for i, n in enumerate(pnums)]
    )
    rwords = _cut(
        rmask, [(rworded.get(i, (0, n.start))[1], _counted_end(rmask, n)) for i, n in enumerate(rnums)]
    )
    content = check_content(pwords, rwords, question)
    if content.contradiction is not None:
        return Verdict(False, True, f"contradiction: {content.contradiction}", "contradiction")
    if not rnums:
        if pnums and symmetric:
            return Verdict(False, False, "one answer states a number, the other does not")
        if dates is not None and not content_words(rwords) and not _has_poles(rwords):
            same_words = not symmetric or content_words(pwords) == content_words(rwords)
            return Verdict(
                dates[0], dates[1] and not content.extra_negation and same_words, dates[2], "dates"
            )
        ptext, rtext = (pwords, rwords) if rdates else (prediction, reference)
        verdict = _compare_text(ptext, rtext, ent, question, symmetric)
        if dates is not None and verdict.correct and not dates[1]:
            return Verdict(True, False, f"{verdict.reason}; {dates[2]}", "dates")
        return verdict
    if not pnums:
        spelled = set(normalize_text(pwords).split()) & _NUMBER_WORDS
        if spelled:  # "no missing values" for 0, "twelve" for 12: the judge reads words
            return Verdict(
                False, False, f"no number in digits in the prediction ({sorted(spelled)[0]!r} in words)"
            )
        return Verdict(False, True, f"no number in the prediction (reference {rnums[0].text})")
    direction_note = ""
    for i, n in enumerate(pnums):  # "fell by 5.3%" against an unsigned 5.3%: a magnitude, or the opposite?
        if i in pworded and not any(_explicit_sign(r) or j in rworded for j, r in enumerate(rnums)):
            asked = question_pole(question)
            pole = pworded[i][0]
            if asked == -pole:
                return Verdict(
                    False,
                    True,
                    f"{n.text}: the prediction's direction is the opposite of the question's",
                    "direction",
                )
            pnums[i] = replace(n, value=abs(n.value), text=n.text.lstrip("-"))
            if asked != pole:
                direction_note = "the prediction states a direction the unsigned reference does not"
    rcands = answer_candidates(rnums)
    if len(rcands) == 1:
        verdict = _one_number(pmask, pnums, rmask, rnums, rcands[0], rel_tol, abs_tol, symmetric)
    else:
        verdict = _several_numbers(pmask, pnums, rcands, rel_tol, abs_tol, symmetric)
    if verdict.correct and symmetric and _words(pmask, pnums) != _words(rmask, rnums):
        return Verdict(True, False, f"{verdict.reason}; the wording differs")
    if not verdict.correct:
        return verdict
    if ent is not None:  # incomplete unless the question named it: a judge decides
        return Verdict(False, False, f"{verdict.reason}, but {ent.reason}")
    swapped = _label_mismatch(pmask, pnums, rmask, rnums, rel_tol, abs_tol)
    if swapped:  # "the median is 3.2, the mean 3.0" for "mean 3.2, median 3.0"
        return Verdict(False, False, f"{verdict.reason}, but {swapped}", "content")
    others = _other_names(pwords, rwords)
    if others:  # "Store_7 and Store_12 tie with 830" for "Store_12: 830": a second answer, or an aside
        return Verdict(True, False, f"{verdict.reason}; the prediction also names {others}", "content")
    if dates is not None and not dates[1]:
        return Verdict(True, False, f"{verdict.reason}; {dates[2]}", "dates")
    if content.unaccounted:
        shown = ", ".join(repr(w) for w in content.unaccounted[:3])
        return Verdict(
            False, False, f"{verdict.reason}, but the reference's {shown} is not stated", "content"
        )
    if content.extra_negation and _has_content(rwords):
        return Verdict(
            False, False, f"{verdict.reason}; the prediction negates what the reference states", "content"
        )
    if direction_note:
        return Verdict(True, False, f"{verdict.reason}; {direction_note}", "direction")
    return verdict


_NUMBER_WORDS = frozenset(
    [
        "zero",
        "no",
        "none",
        "nil",
        "nothing",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "twenty",
        "thirty",
        "forty",
        "fifty",
        "hundred",
        "thousand",
        "million",
        "billion",
        "half",
        "dozen",
        "once",
        "twice",
        "single",
    ]
)
_LABEL_BEFORE = re.compile(
    r"([^\W\d_]\w*)\s*(?:[:=]|\b(?:is|was|are|were|of|equals|at)\b)?\s*"
    r"(?:(?:approximately|about|around|roughly)\s+)?$"
)


def _labels(text: str, numbers: list[Number]) -> dict[str, Number]:
    """The number each label names (``mean 3.2``, ``median: 3.0``, ``the mean is 3.2``): the word right
    before the number, filler and linking words skipped; the first number of a label counts."""
    out: dict[str, Number] = {}
    for n in numbers:
        m = _LABEL_BEFORE.search(text[max(0, n.start - 40) : n.start])
        if m:
            word = stem(m.group(1))
            if word not in FILLER and word not in NEGATIONS and word not in out:
                out[word] = n
    return out


def _other_names(prediction: str, reference: str) -> str:
    """A name of a kind the reference names (an identifier with digits, a file, a month, a single-letter
    label) that the prediction states beside the reference's, or ``""``."""
    ref, pred = _entities(reference), _entities(prediction)
    for kind, names in ref.items():
        extra = pred.get(kind, set()) - names
        if extra:
            return sorted(extra)[0]
    rl = {w for w in tokens(reference) if w.startswith("~")}
    extra_labels = {w for w in tokens(prediction) if w.startswith("~")} - rl
    return sorted(extra_labels)[0][1:].upper() if rl and extra_labels else ""


def _label_mismatch(
    ptext: str, pnums: list[Number], rtext: str, rnums: list[Number], rel_tol: float, abs_tol: float
) -> str:
    """A label both answers give a number to, with numbers that differ (a swap), or ``""``."""
    rl = _labels(rtext, rnums)
    if not rl:
        return ""
    pl = _labels(ptext, pnums)
    for word, r in rl.items():
        p = pl.get(word)
        if p is not None and not numbers_match(p, r, rel_tol, abs_tol).correct:
            return f"the prediction gives {word!r} {p.text}, the reference {r.text}"
    return ""


_YES = frozenset({"yes", "true", "y", "correct"})
_NO = frozenset({"no", "false", "n", "incorrect"})


def _yes_no(prediction: str, reference: bool) -> Verdict:
    """A yes/no reference: the prediction's first word, or its "the answer is …", decides; a lone yes or
    no elsewhere in a sentence is a guess (the rule of :func:`datadojo.compare.matchers.match_answer`)."""
    words = normalize_text(prediction).split()
    said: bool | None = None
    decided = True
    if re.match(r"\s*(?:yes|no)\s*(?:and|or|/)\s*(?:yes|no)\b", prediction, re.IGNORECASE):
        return Verdict(False, False, "the prediction says yes and no")
    if words and (words[0] in _YES or words[0] in _NO):
        said = words[0] in _YES
    else:
        stated = re.search(
            r"\b(?:answer|result|verdict)\s+is\s*:?\s*[\"'“‘]?(\w+)[\"'”’]?\s*\.?\s*$", prediction, re.I
        )
        if stated and stated.group(1).lower() in _YES | _NO:
            said = stated.group(1).lower() in _YES
        else:
            poles = {w in _YES for w in words if w in _YES | _NO}
            if len(poles) == 1:
                said, decided = poles.pop(), False
    if said is None:
        return Verdict(False, len(words) <= 1, "the prediction is neither yes nor no")
    return Verdict(
        said == reference,
        decided,
        f"prediction {'yes' if said else 'no'}, reference {'yes' if reference else 'no'}",
    )


def _has_poles(text: str) -> bool:
    return bool(polar_words(text))


def _has_content(text: str) -> bool:
    return bool(content_words(text)) or _has_poles(text)


def _one_number(
    prediction: str,
    pnums: list[Number],
    reference: str,
    rnums: list[Number],
    ref: Number,
    rel_tol: float,
    abs_tol: float,
    symmetric: bool,
) -> Verdict:
    chosen, certain, how = answer_number(pnums, rel_tol)
    assert chosen is not None
    hedged = hedge(prediction, pnums, chosen)
    if hedged is None and symmetric:
        hedged = hedge(reference, rnums, ref)
    if hedged:
        return Verdict(False, False, f"{hedged}: the answer does not commit to one value")
    v = numbers_match(chosen, ref, rel_tol, abs_tol, symmetric=symmetric)
    if certain:
        return v
    hits = [n for n in answer_candidates(pnums) if numbers_match(n, ref, rel_tol, abs_tol).correct]
    if hits and not v.correct:
        return Verdict(False, False, f"{how}: {v.reason}, though {hits[0].text} would match")
    if v.correct:
        return Verdict(True, False, f"{how}: {v.reason}")
    return Verdict(False, True, f"no candidate number matches {ref.text} ({how})")


def _several_numbers(
    ptext: str, pnums: list[Number], rcands: list[Number], rel_tol: float, abs_tol: float, symmetric: bool
) -> Verdict:
    pcands = answer_candidates(pnums)
    ok = [
        [numbers_match(p, r, rel_tol, abs_tol, symmetric=symmetric).correct for p in pcands] for r in rcands
    ]
    matched = bipartite(len(rcands), ok)
    if matched < len(rcands):
        return Verdict(False, True, f"{len(rcands) - matched} of {len(rcands)} reference numbers not matched")
    if len(pcands) > len(rcands):
        if not content_words(_cut(ptext, [(n.start, n.end) for n in pnums])):  # nothing but the numbers
            return Verdict(
                False,
                True,
                f"a longer list: {len(pcands)} values where the reference has {len(rcands)}",
                "list",
            )
        return Verdict(True, False, f"all {len(rcands)} numbers found among {len(pcands)} stated")
    return Verdict(True, True, f"all {len(rcands)} numbers match")


def bipartite(n: int, ok: list[list[bool]]) -> int:
    """Size of a maximum matching between n left items and the right items, ``ok[i][j]`` = may pair
    (so a tolerance never depends on the order the items are tried in)."""
    match_r: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j, allowed in enumerate(ok[i]):
            if allowed and j not in seen:
                seen.add(j)
                if j not in match_r or augment(match_r[j], seen):
                    match_r[j] = i
                    return True
        return False

    return sum(augment(i, set()) for i in range(n))


def _compare_text(
    prediction: str, reference: str, ent: Verdict | None, question: str | None, symmetric: bool = False
) -> Verdict:
    """A reference without numbers: equal after normalization, or its items (one for a name, several for a
    list) stated in the prediction (:func:`datadojo.compare.content.check_items`)."""
    p, r = normalize_text(prediction), normalize_text(reference)
    if not r:
        p, r = prediction.strip().lower(), reference.strip().lower()
    if p == r:
        if ent is not None:
            return ent
        return Verdict(True, True, "equal after normalization")
    items = list_items(reference)
    if items:
        found = check_items(prediction, items, question)
        if found.correct and ent is not None:
            return Verdict(False, False, f"{found.reason}, but {ent.reason}")
        if len(items) > 1 or found.correct or found.longer:
            return Verdict(found.correct, found.decided and not symmetric, found.reason, "list")
    if len(r.split()) <= 3 and len(p.split()) <= 3:  # "USA" / "United States": a judge knows synonyms
        return Verdict(False, False, f"{p[:60]!r} != {r[:60]!r} after normalization")
    return Verdict(False, False, f"descriptive answers differ in wording ({p[:40]!r} vs {r[:40]!r})")


def with_reason(verdict: Verdict, prefix: str) -> Verdict:
    """The same verdict with ``prefix`` before its reason."""
    return replace(verdict, reason=f"{prefix}{verdict.reason}")

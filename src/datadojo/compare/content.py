"""What an answer says besides its numbers: dates, content words, direction and polarity words, list items.

Why a module of its own: a rule may call two answers the same only when it has *read* everything the
reference says (issue 39). A matching number beside the wrong country (``"France, with 1,200 customers"``
for ``"Germany: 1200"``), the wrong direction (``"Sales increased in 2020."`` for ``"Sales decreased in
2020."``) or the other label (``"Male … 0.74"`` for ``"female: 0.74"``) is not a match, and a rule that
cannot tell must leave the verdict to the judge. :func:`datadojo.compare.core.compare_answers` and
:func:`datadojo.compare.scientific.match_scientific` use what this module reads.

* **dates** (:func:`mask_dates`): ``2021-03-15``, ``2021/03/15``, ``March 15, 2021``, ``15 March 2021``,
  ``15th of March 2021``, ``Mar 15 2021``, ``03/15/2021`` and ``15/03/2021`` (both readings kept when day
  and month are both ≤ 12: the date is then ambiguous), ``March 2021`` (a month), each with an optional
  weekday before it. Dates are cut out of the text (replaced by spaces, so positions stay) before numbers
  and names are read, and compared as dates (:func:`compare_dates`).
* **content words** (:func:`content_words`): the words left after numbers, units, dates and
  :data:`FILLER` words (articles, pronouns, auxiliaries, prepositions, answer boilerplate such as
  "answer", "approximately", "value") are removed, folded to lower case and a crude singular. Every
  content word of the reference must appear in the prediction or in the question; otherwise the rule has
  not accounted for it.
* **polarity** (:data:`POLES`): direction and polarity words come in opposed groups (increase/decrease,
  higher/lower, highest/lowest, positive/negative, yes/no, male/female, strong/weak). A reference's pole
  is accounted for by the same pole in the prediction; the opposite pole without the same one is a
  contradiction (a comparative in a two-sided comparison only when the other words stand in the same
  order: "B is lower than A" is the converse of "A is higher than B"). A negation (``not``, ``n't``, ``no``, ``never``, ``without``) in the prediction that the
  reference does not have means the words may be turned around: never a decided match.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import re
from dataclasses import dataclass

__all__ = [
    "FILLER",
    "NEGATIONS",
    "POLES",
    "ContentCheck",
    "DateReading",
    "ListCheck",
    "check_content",
    "check_items",
    "compare_dates",
    "content_words",
    "list_items",
    "mask_dates",
    "order_asked",
    "polar_words",
    "question_pole",
    "stem",
    "tokens",
]

# --- dates ---------------------------------------------------------------------------------------------

_MONTH_NAMES = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7, "august": 8,
    "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9, "oct": 10,
    "nov": 11, "dec": 12,
}  # fmt: skip
_WEEKDAY_NAMES = {
    "monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6,
    "mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3, "fri": 4, "sat": 5, "sun": 6,
}  # fmt: skip
_MONTH = r"(?P<{g}>" + "|".join(sorted(_MONTH_NAMES, key=len, reverse=True)) + r")\.?"
_WEEKDAY = r"(?:(?P<wd>" + "|".join(sorted(_WEEKDAY_NAMES, key=len, reverse=True)) + r")\.?,?\s+)?"
_ORD = r"(?:st|nd|rd|th)?"
_DATES = re.compile(
    _WEEKDAY
    + r"(?:"
    + r"(?<![\d.])(?P<iy>\d{4})[-/.](?P<im>\d{1,2})[-/.](?P<id>\d{1,2})(?![\d])"
    + r"|(?<![\d.])(?P<na>\d{1,2})[-/.](?P<nb>\d{1,2})[-/.](?P<ny>\d{4})(?![\d])"
    + r"|\b"
    + _MONTH.format(g="m1")
    + r"\s+(?P<d1>\d{1,2})"
    + _ORD
    + r"(?:,\s*|\s+)(?P<y1>\d{4})(?!\d)"
    + r"|\b(?P<d2>\d{1,2})"
    + _ORD
    + r"\s+(?:of\s+)?"
    + _MONTH.format(g="m2")
    + r",?\s+(?P<y2>\d{4})(?!\d)"
    + r"|\b"
    + _MONTH.format(g="m3")
    + r",?\s+(?P<y3>\d{4})(?!\d)"
    + r")",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class DateReading:
    """A date in a text: its possible readings ``(year, month, day)`` (``day`` 0 for a month), the
    weekday written beside it (or ``None``) and where it stands."""

    readings: frozenset[tuple[int, int, int]]
    weekday: int | None
    start: int
    end: int
    text: str

    @property
    def ambiguous(self) -> bool:
        return len(self.readings) > 1


def _valid(y: int, m: int, d: int) -> bool:
    if d == 0:
        return 1 <= m <= 12
    try:
        _dt.date(y, m, d)
    except ValueError:
        return False
    return True


def _readings(m: re.Match[str]) -> set[tuple[int, int, int]]:
    g = m.groupdict()
    if g["iy"]:
        return {(int(g["iy"]), int(g["im"]), int(g["id"]))}
    if g["ny"]:
        a, b, y = int(g["na"]), int(g["nb"]), int(g["ny"])
        return {(y, a, b), (y, b, a)}  # month/day and day/month: the invalid one is dropped below
    for mg, dg, yg in (("m1", "d1", "y1"), ("m2", "d2", "y2"), ("m3", None, "y3")):
        if g[mg]:
            month = _MONTH_NAMES[g[mg].lower()]
            return {(int(g[yg]), month, int(g[dg]) if dg else 0)}
    return set()  # pragma: no cover - every alternative sets one group


def mask_dates(text: str) -> tuple[str, list[DateReading]]:
    """``text`` with every date replaced by spaces (positions kept), and the dates read (module docstring).

    A match none of whose readings is a real date (``2021-13-45``) is left in the text.
    """
    out, found = list(text), []
    for m in _DATES.finditer(text):
        readings = frozenset(r for r in _readings(m) if _valid(*r))
        if not readings:
            continue
        wd = m.group("wd")
        found.append(
            DateReading(readings, _WEEKDAY_NAMES[wd.lower()] if wd else None, m.start(), m.end(), m.group(0))
        )
        out[m.start() : m.end()] = " " * (m.end() - m.start())
    return "".join(out), found


def _weekday_ok(d: DateReading) -> bool:
    if d.weekday is None:
        return True
    return any(day and _dt.date(y, mo, day).weekday() == d.weekday for y, mo, day in d.readings)


def compare_dates(pred: list[DateReading], ref: list[DateReading]) -> tuple[bool, bool, str] | None:
    """``(correct, decided, reason)`` for the reference's dates against the prediction's, ``None`` when
    the reference has none.

    Every reference date must be among the prediction's (some reading in common). Certain only when the
    readings are unambiguous, the weekdays written are right for the date and the prediction states no
    other date; a prediction with dates none of which can be the reference's is decided wrong; one with
    no date at all has not stated it (undecided).
    """
    if not ref:
        return None
    used: set[int] = set()
    sure = True
    for r in ref:
        hit = next((i for i, p in enumerate(pred) if p.readings & r.readings and i not in used), None)
        if hit is None:
            if pred:
                shown = ", ".join(p.text.strip() for p in pred[:2])
                return False, True, f"the date {r.text.strip()!r} is not stated ({shown} instead)"
            return False, False, f"the reference's date {r.text.strip()!r} is not stated as a date"
        used.add(hit)
        p = pred[hit]
        if p.ambiguous or r.ambiguous or not (_weekday_ok(p) and _weekday_ok(r)):
            sure = False
    if len(used) < len(pred):
        return True, False, "the reference's dates are stated, beside other dates"
    if not sure:
        return True, False, "the dates agree in one reading (day/month order or weekday uncertain)"
    return True, True, f"the date{'s' if len(ref) > 1 else ''} agree"


# --- words -----------------------------------------------------------------------------------------------


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Words that carry no content of an answer: articles, pronouns, auxiliaries, prepositions, conjunctions,
#: hedging adverbs and answer boilerplate. A reference word in this list needs no counterpart.
FILLER: frozenset[str] = frozenset(
    _words(
        """
        a an the this that these those it its it's they them their there here we our you your i my he she
        his her is are was were be been being am do does did done has have had having will would shall
        should can could may might must of in on at to from by for with within into onto as than then so
        such and but also both either each every all any some about approximately approx around roughly
        nearly almost circa ca just only exactly precisely very quite overall which what who whom whose
        where when how why answer final result value figure number amount unit equal equals stands come
        comes out give gives given found find finding show shows showed shown see seen according based
        data dataset table column row record calculated calculation computed compute computing using used
        use per respectively order ordered therefore thus hence following follows namely ie eg etc
        approximate approximated estimated estimate total
        """
    )
)
#: Words that turn a statement around.
NEGATIONS: frozenset[str] = frozenset({"not", "no", "never", "none", "neither", "nor", "cannot", "without"})
#: Opposed groups of direction and polarity words: group -> (words of one pole, words of the other).
POLES: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "change": (
        _words(
            "increase increased increases increasing rise rises rose risen rising grew grow grows growing "
            "growth climbed gained gain upward upwards"
        ),
        _words(
            "decrease decreased decreases decreasing decline declined declines declining fell fall falls "
            "fallen falling drop dropped drops dropping shrank shrunk reduced reduction loss downward "
            "downwards"
        ),
    ),
    "comparison": (
        _words("higher greater larger bigger more longer older faster"),
        _words("lower smaller less fewer shorter younger slower"),
    ),
    "extreme": (
        _words("highest greatest largest biggest most maximum max"),
        _words("lowest smallest least fewest minimum min"),
    ),
    "sign": (_words("positive positively"), _words("negative negatively")),
    "answer": (_words("yes true"), _words("no false")),
    "sex": (_words("male males man men boy boys"), _words("female females woman women girl girls")),
    "strength": (_words("strong strongly"), _words("weak weakly")),
}
#: Words of a two-sided comparison, whose converse says the same with the other comparative.
_CONVERSE = frozenset({"than", "vs", "versus", "compared"})
_POLE_OF: dict[str, tuple[str, int]] = {
    w: (group, side) for group, sides in POLES.items() for side, words in enumerate(sides) for w in words
}
_TOKEN = re.compile(r"[^\W\d_]\w*(?:['’][^\W\d_]+)?")  # letters of any script, then letters/digits/_


def stem(word: str) -> str:
    """Lower case, a possessive dropped, a crude singular (``products`` → ``product``, ``cities`` →
    ``city``), so an answer's wording does not count as a different name."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    if w in FILLER:
        return w
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def tokens(text: str) -> list[str]:
    """The words of ``text`` (a letter of any script, then letters, digits or ``_``), stemmed; ``n't`` becomes ``not``; a
    single capital letter inside a sentence is a label (``Product A`` → ``~a``), not the article."""
    out: list[str] = []
    for m in _TOKEN.finditer(text):
        w = m.group(0)
        if len(w) == 1 and w.isupper() and w != "I":
            before = text[: m.start()].rstrip()
            if (
                before
                and before[-1] not in ".!?:;\n"
                and (m.end() == len(text) or not text[m.end()].isalpha())
            ):
                out.append("~" + w.lower())
                continue
        low = w.lower().replace("’", "'")
        if low.endswith("n't"):
            out.append(stem(low[:-3]))
            out.append("not")
            continue
        out.append(stem(w))
    return out


def content_words(text: str) -> list[str]:
    """The content words of ``text`` (module docstring): not filler, not a negation, stemmed, in order."""
    return [w for w in tokens(text) if w not in FILLER and w not in NEGATIONS]


@dataclass(frozen=True)
class ContentCheck:
    """What the words of a prediction do with the reference's: ``contradiction`` (a reason: the opposite
    pole of a reference's direction word, or another single-letter label, certain), ``unaccounted``
    (reference content words neither in the prediction nor in the question) and ``extra_negation`` (the
    prediction negates, the reference does not)."""

    contradiction: str | None
    unaccounted: tuple[str, ...]
    extra_negation: bool


def _frame(words: list[str]) -> list[str]:
    """The words of a comparison besides its comparative, in order: equal frames with opposite
    comparatives contradict ("higher in Q2 than in Q1" / "lower in Q2 than in Q1"), swapped ones may be
    the converse."""
    return [w for w in words if w not in FILLER and _POLE_OF.get(w, ("", 0))[0] != "comparison"]


def check_content(prediction: str, reference: str, question: str | None = None) -> ContentCheck:
    """Compare the words of two texts whose numbers and dates were already cut out (module docstring)."""
    pw, rw = tokens(prediction), tokens(reference)
    qw = set(tokens(question or ""))
    pset = set(pw)
    rset = set(rw)
    contradiction = None
    for w in dict.fromkeys(rw):
        if w not in _POLE_OF:
            continue
        group, side = _POLE_OF[w]
        same = POLES[group][side] & pset
        other = POLES[group][1 - side] & pset
        if other and not same:
            if group == "comparison" and _CONVERSE & (pset | rset) and _frame(pw) != _frame(rw):
                continue  # "B is lower than A" may say what "A is higher than B" says: not certain
            contradiction = f"the prediction says {sorted(other)[0]!r} where the reference says {w!r}"
            break
    if contradiction is None:  # "Product B" where the reference says "Product A"
        rlabels = {w for w in rset if w.startswith("~")}
        plabels = {w for w in pset if w.startswith("~")}
        if rlabels and not rlabels & plabels and plabels:
            contradiction = (
                f"the prediction names {sorted(plabels)[0][1:].upper()!r} where the reference names "
                f"{sorted(rlabels)[0][1:].upper()!r}"
            )
    negates = bool(pset & NEGATIONS) and not (rset & NEGATIONS)
    if contradiction and negates:  # "did not decrease": turned around, not certainly the opposite
        contradiction = None
    unaccounted = []
    for w in dict.fromkeys(content_words(reference)):
        if w in pset or w in qw:
            continue
        if w in _POLE_OF:
            group, side = _POLE_OF[w]
            if POLES[group][side] & pset:
                continue  # "rose" for "increased": the same pole
        unaccounted.append(w)
    return ContentCheck(contradiction, tuple(unaccounted), negates)


def polar_words(text: str) -> list[str]:
    """The direction and polarity words of ``text`` (:data:`POLES`), in order."""
    return [w for w in tokens(text) if w in _POLE_OF]


def question_pole(question: str | None) -> int:
    """``+1``/``-1`` when the question asks about a rise/a fall (and not both), else 0."""
    words = set(tokens(question or ""))
    up, down = POLES["change"]
    if words & up and not words & down:
        return 1
    if words & down and not words & up:
        return -1
    return 0


# --- lists ----------------------------------------------------------------------------------------------

_ORDER_ASKED = re.compile(
    r"\b(?:in (?:that |the |descending |ascending |decreasing |increasing )?order|ordered|order of|ranks?|"
    r"ranked|ranking|sort|sorted|descending|ascending|from (?:the )?(?:highest|largest|most|best|lowest|"
    r"smallest|least|worst|first|oldest|newest) to)\b",
    re.IGNORECASE,
)
_STREAM = re.compile(r"(?P<w>[^\W\d_]\w*(?:['’][^\W\d_]+)?)|(?P<sep>[,;\n&])|(?P<colon>:)")
_ARTICLES = frozenset({"a", "an", "the"})
_ITEM_WORDS = 5
_COPULAS = frozenset({"is", "are", "was", "were", "include", "includes", "included", "being", "be"})


def order_asked(question: str | None) -> bool:
    """Whether the question asks for an order ("top 3 … in order", "rank", "sorted", "descending")."""
    return bool(question and _ORDER_ASKED.search(question))


def _stream(text: str) -> list[tuple[str, str, str]]:
    """``(kind, stemmed word, word as written)``; kinds ``w``, ``sep`` (``,`` ``;`` new line ``&``
    ``and``) and ``colon``; parenthesized asides and articles dropped."""
    text = re.sub(r"\([^()]*\)|\[[^\[\]]*\]", " ", text)
    out: list[tuple[str, str, str]] = []
    for m in _STREAM.finditer(text):
        if m.group("w"):
            w = m.group("w")
            if w.lower() == "and":
                out.append(("sep", "and", w))
            elif w.lower() not in _ARTICLES:
                out.append(("w", stem(w), w))
        elif m.group("sep"):
            out.append(("sep", m.group("sep"), m.group("sep")))
        else:
            out.append(("colon", ":", ":"))
    return out


def list_items(reference: str) -> list[list[str]]:
    """The items of a number-free reference (split at ``,`` ``;`` new lines, else at ``and``/``&``), each
    as its stemmed words without articles; one item when it is not a list (a part longer than
    :data:`_ITEM_WORDS` words makes it a sentence)."""
    parts = [p for p in re.split(r"[,;\n]", reference) if p.strip()]
    if len(parts) < 2:
        parts = [p for p in re.split(r"\band\b|&", reference, flags=re.IGNORECASE) if p.strip()] or [
            reference
        ]
    items = [it for it in ([w for k, w, _ in _stream(p) if k == "w"] for p in parts) if it]
    if len(items) > 1 and any(len(it) > _ITEM_WORDS for it in items):  # clauses of a sentence, not items
        whole = [w for k, w, _ in _stream(reference) if k == "w"]
        return [whole] if whole else []
    return items


@dataclass(frozen=True)
class ListCheck:
    """A prediction read against a reference's items: ``correct``, ``decided``, why, and whether the
    prediction goes on with a further item (``longer``)."""

    correct: bool
    decided: bool
    reason: str
    longer: bool = False


def _find(words: list[str], item: list[str], taken: set[int]) -> int | None:
    for i in range(len(words) - len(item) + 1):
        if words[i : i + len(item)] == item and not taken & set(range(i, i + len(item))):
            return i
    return None


def check_items(prediction: str, items: list[list[str]], question: str | None = None) -> ListCheck:
    """Whether ``prediction`` states exactly the reference's ``items`` (:func:`list_items`).

    A preamble ending in a copula or a colon (``The top 3 products are …``) is set aside; the items may be
    separated by ``,`` ``;`` ``and`` ``&`` (and filler words); order counts only when the question asks for
    one. A further item after a separator makes a longer list, which is wrong (decided when it is written
    as a name, capitalized; a guess otherwise; after a single name it may be an elaboration, ``Paris,
    France``, so a judge decides); a missing item is wrong (decided when the prediction is a
    clean list of short items); other words around the items leave the verdict to a judge.
    """
    qw = set(tokens(question or ""))
    st = _stream(prediction)
    words = [w if k == "w" else f"\0{k}" for k, w, _ in st]
    taken: set[int] = set()
    spans: list[tuple[int, int, int]] = []  # start, end, item index
    missing = []
    for j, item in enumerate(items):
        at = _find(words, item, taken)
        if at is None:
            missing.append(j)
            continue
        taken |= set(range(at, at + len(item)))
        spans.append((at, at + len(item), j))
    spans.sort()
    if missing:
        shown = " ".join(items[missing[0]])
        body = st[_preamble_end(st, spans[0][0] if spans else len(st)) :]
        chunks = _chunks(body)
        clean = bool(chunks) and all(0 < len(c) <= 4 for c in chunks)
        return ListCheck(
            False, clean, f"{len(missing)} of {len(items)} item(s) not stated (first: {shown!r})"
        )
    first, last = spans[0][0], spans[-1][1]
    pre = st[:first]
    reasons = []
    decided = True
    introduced = bool(pre) and (pre[-1][0] == "colon" or pre[-1][1] in _COPULAS)
    if not introduced and any(k == "w" and w not in FILLER and w not in qw for k, w, _ in pre):
        decided = False
        reasons.append("words before the items")
    if any(w in NEGATIONS or w == "not" for _, w, _ in pre):
        decided = False
        reasons.append("a negation before the items")
    for (_, end, _), (start, _, _) in itertools.pairwise(spans):
        gap = st[end:start]
        if any(k == "w" and w not in FILLER for k, w, _ in gap):
            decided = False
            reasons.append("words between the items")
    trailing = st[last:]
    extra_chunks = _chunks(trailing)
    if trailing and trailing[0][0] == "sep":  # ", Dates": another item
        named = [c for c in extra_chunks if any(w not in FILLER and w not in qw for w in c)]
        if named:
            raw = [orig for k, _, orig in trailing if k == "w"]
            capital = bool(raw) and raw[0][:1].isupper() and len(named[0]) <= 4
            if len(items) > 1:
                what = f"a longer list: {len(items)} item(s) and {' '.join(named[0])!r}"
                return ListCheck(False, capital, what, longer=True)
            # one name and more ("Paris, France", "France and Germany"): an elaboration or a second answer
            return ListCheck(True, False, f"the answer goes on: {' '.join(named[0])!r}", longer=True)
    elif any(k == "w" and w not in FILLER and w not in qw for k, w, _ in trailing):
        decided = False
        reasons.append("words after the items")
    if len(items) > 1 and order_asked(question):
        order = [j for _, _, j in spans]
        if order != sorted(order):
            return ListCheck(False, True, "the items are in another order than the question asks")
    what = f"all {len(items)} item(s) stated" if len(items) > 1 else "the reference stated"
    return ListCheck(True, decided, what + (f" ({', '.join(reasons)})" if reasons else ""))


def _preamble_end(st: list[tuple[str, str, str]], limit: int) -> int:
    for i in range(min(limit, len(st)) - 1, -1, -1):
        if st[i][0] == "colon" or st[i][1] in _COPULAS:
            return i + 1
    return 0


def _chunks(st: list[tuple[str, str, str]]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for k, w, _ in st:
        if k == "sep":
            out.append([])
        elif k == "w" and w not in FILLER:
            out[-1].append(w)
    return [c for c in out if c]

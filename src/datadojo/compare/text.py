"""Text helpers every scorer shares: answer normalization, ROUGE-L, and number parsing.

Why here and not in each benchmark module: TableBench's exact match, the LLM-judge agreement report and
the tolerant matcher for synthesized tasks must normalize and tokenize text *the same way*, or a report
would compare two different notions of "the same answer".

* :func:`normalize_text` is the SQuAD normalization TableBench's official evaluation applies before
  every metric (``metrics/qa_metrics.py``: lower-case, drop ``string.punctuation``, drop the articles
  *a/an/the*, collapse whitespace).
* :func:`rouge_l` is ROUGE-L F1 over the tokens of the ``rouge_score`` package's default tokenizer
  (lower-case, every run of characters outside ``[a-z0-9]`` is a separator, no stemming), the scorer
  behind ``evaluate.load("rouge")`` that TableBench and DataMind (App. G.4) use.
* :func:`parse_number` reads one number written the ways analysts write them (``1,234.5``, ``$12``,
  ``45%``, ``−3``, ``1.2 million``, ``12.5 kg``) and says whether it was a percentage, so a matcher can
  accept ``45%`` for ``0.45``.
* :func:`extract_sql` takes the query out of a prediction (Spider/BIRD scoring, and the reward's choice
  of a SQL answer): here rather than in :mod:`datadojo.bench.spider` so that the reward path, which every
  rollout imports, does not import the benchmark registry (pandas, numpy, every benchmark) at start-up.
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass

__all__ = [
    "ParsedNumber",
    "extract_sql",
    "find_numbers",
    "lcs_length",
    "normalize_text",
    "parse_number",
    "rouge_l",
    "rouge_tokens",
]

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_text(text: str) -> str:
    """SQuAD-style normalization: lower-case, strip punctuation and articles, collapse whitespace.

    Exactly the ``normalize_answer`` of TableBench's ``metrics/qa_metrics.py`` (same order of steps), so
    exact-match scores computed here agree with the official script's.
    """
    lowered = text.lower()
    no_punct = "".join(ch for ch in lowered if ch not in _PUNCT)
    no_articles = _ARTICLES.sub(" ", no_punct)
    return " ".join(no_articles.split())


_ROUGE_SPLIT = re.compile(r"[^a-z0-9]+")


def rouge_tokens(text: str) -> list[str]:
    """Tokens as the ``rouge_score`` default tokenizer makes them (lower-case, ``[a-z0-9]+`` runs)."""
    return [t for t in _ROUGE_SPLIT.split(text.lower()) if t]


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two token lists (O(len(a)·len(b)) time, O(len(b)) space)."""
    if not a or not b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, start=1):
            cur[j] = prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1])
        prev = cur
    return prev[-1]


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F1 of ``prediction`` against ``reference`` (0.0 when either has no tokens).

    precision = LCS/len(prediction), recall = LCS/len(reference), F1 = 2PR/(P+R), as ``rouge_score``'s
    ``_score_lcs`` computes it.
    """
    pred, ref = rouge_tokens(prediction), rouge_tokens(reference)
    lcs = lcs_length(pred, ref)
    if lcs == 0:
        return 0.0
    p, r = lcs / len(pred), lcs / len(ref)
    return 2 * p * r / (p + r)


# --- numbers -------------------------------------------------------------------------------------------

_SCALES = {
    "thousand": 1e3,
    "k": 1e3,
    "million": 1e6,
    "mn": 1e6,
    "billion": 1e9,
    "bn": 1e9,
    "trillion": 1e12,
}
_CURRENCY = "$€£¥₹"
# A number as written in prose: optional sign, currency, digits with optional thousands separators
# (only in groups of exactly three, so "1,2" is two numbers), optional decimals and exponent, then an
# optional percent sign or scale word.
_NUM = (
    r"(?P<sign>[-+−–]?)\s*[" + _CURRENCY + r"]?\s*"
    r"(?P<body>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)"
    r"(?P<exp>[eE][-+]?\d+)?"
    r"(?:\s*(?P<pct>%|percent\b|per\s*cent\b)|\s*(?P<scale>thousand|million|billion|trillion|mn|bn)\b"
    r"|(?P<short>[kK])\b)?"
)
_NUM_RE = re.compile(_NUM)
_WHOLE_NUM_RE = re.compile(r"^\s*(?:" + _NUM + r")(?P<unit>\s*[^\d\s][^\d]{0,24})?\s*$")
_NAN_WORDS = frozenset({"nan", "na", "n/a"})
_INF_WORDS = {"inf": math.inf, "infinity": math.inf, "-inf": -math.inf, "-infinity": -math.inf}


@dataclass(frozen=True)
class ParsedNumber:
    """A number read from text. ``value`` already applies the percent (``45%`` → 0.45) and scale words.

    ``percent`` says the text wrote a percentage, so matchers may also accept the bare figure (45);
    ``raw`` is the figure as written, before percent and scale (45 for ``45%``), ``decimals`` its number
    of decimal places as written (TableBench compares at the reference's precision).
    """

    value: float
    raw: float
    percent: bool
    decimals: int
    text: str


def _from_match(m: re.Match[str]) -> ParsedNumber:
    body = m.group("body").replace(",", "")
    raw = float(body + (m.group("exp") or ""))
    if m.group("sign") in ("-", "−", "–"):
        raw = -raw
    decimals = len(body.split(".", 1)[1]) if "." in body else 0
    value = raw
    percent = m.group("pct") is not None
    if percent:
        value = raw / 100.0
    scale = m.group("scale") or m.group("short")
    if scale:
        value = raw * _SCALES[scale.lower()]
    return ParsedNumber(value=value, raw=raw, percent=percent, decimals=decimals, text=m.group(0).strip())


def parse_number(text: str, *, allow_unit: bool = True) -> ParsedNumber | None:
    """The number ``text`` consists of, or ``None`` when it is not (just) a number.

    Accepts thousands separators, a leading currency symbol, a unicode minus, an exponent, a trailing
    ``%``/``percent``, a scale word (``million``, ``bn``, ``5k``; a bare ``m``/``b`` is
    not read as a scale, it is too often a unit) and, with ``allow_unit``, a short
    trailing unit (``12.5 kg``, ``3 days``) which is ignored. ``nan`` and ``inf`` parse to NaN / ±inf.
    Anything else around the number (``"about 12 or 13"``) makes it not a number.
    """
    s = text.strip()
    low = s.lower()
    if low in _NAN_WORDS:
        return ParsedNumber(math.nan, math.nan, False, 0, s)
    if low in _INF_WORDS:
        v = _INF_WORDS[low]
        return ParsedNumber(v, v, False, 0, s)
    m = _WHOLE_NUM_RE.match(s)
    if m is None:
        return None
    if m.group("unit") and not allow_unit:
        return None
    unit = (m.group("unit") or "").strip()
    if unit and not re.fullmatch(r"[A-Za-zµ°²³/%.\s()-]{1,24}", unit):
        return None
    return _from_match(m)


def find_numbers(text: str) -> list[ParsedNumber]:
    """Every number in running text, in order (see :func:`parse_number` for the accepted spellings).

    A digit run glued to letters (``Q3``, ``x2``, ``2nd``) is not a number here: such tokens name
    things rather than state quantities.
    """
    out: list[ParsedNumber] = []
    for m in _NUM_RE.finditer(text):
        start = m.start("body")
        end = m.end()
        if start > 0 and (text[start - 1].isalpha() or text[start - 1] == "_"):
            continue
        if end < len(text) and (text[end].isalpha() and not m.group("pct") and not m.group("scale")):
            continue
        out.append(_from_match(m))
    return out


_SQL_FENCE = re.compile(r"```[ \t]*(?:sql|sqlite)?[ \t]*\n?(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_sql(prediction: str) -> str:
    """The SQL in a prediction: the content of its last fenced code block, else the stripped text."""
    blocks = _SQL_FENCE.findall(prediction)
    return (blocks[-1] if blocks else prediction).strip()

"""The tolerant deterministic matcher for synthesized tasks (numbers, text, booleans, lists, records, tables).

Synthesized tasks (DataMind queries, warm-up tasks, hand-written examples) carry a reference answer but no
benchmark-specific rule. Asking an LLM judge for each of them is slow and costs money, and most answers
are a number, a name, a yes/no or a short list, so this matcher applies the rules of DataMind's judge
(§3.2 "Consistency judging" and §4 "Answer reward") deterministically:

* **numbers** are compared by the comparison core (:mod:`datadojo.compare.core`): within a relative
  tolerance of 3% of the reference (``rel_tol=0.03``, boundary included; an absolute ``abs_tol`` covers
  a reference of 0). Sign, exponent, thousands separators of several locales (``1,234.5``, ``1.234,5``),
  currency symbols, magnitudes (``1.2 million``, ``1.2M``, ``5k``; ``magnitude_letters``) and units
  (converted where both sides state one) are read. A percent against a percent compares as percents
  (``0.125%`` is not ``12.5%``); a percent against a bare figure as a fraction (``45%`` = 0.45), or, as an
  undecided guess, as percentage points (``45%`` = 45). In a sentence the number that answers is chosen:
  not a sample size (``n=100``), a row number, a count of rows or a parenthesized aside; several
  different candidates leave the verdict undecided, and a range, alternatives or a bound that merely
  contain the value (``between 40 and 46``, ``45.3 or 50``, ``at least 40``) are wrong (undecided).
  A different name beside the right number (``Q1`` for ``Q3``, ``Store_7`` for ``Store_12``, ``a.csv``
  for ``b.csv``) is wrong. ``nan`` equals ``nan``.
* **text** is equal after SQuAD normalization (:func:`~datadojo.compare.text.normalize_text`); a
  reference phrase inside a longer prediction is a correct guess, differing descriptive text a wrong one
  (both undecided). Semantic equivalence of free text is out of reach for rules; use
  :mod:`datadojo.compare.judge` for that.
* **booleans**: yes/true/y/correct vs no/false/n/incorrect; a prediction may start with its verdict
  (``"Yes, because …"``).
* **lists** must have the same length (a longer list is wrong) and match element by element,
  order-insensitive unless ``ordered_lists``, ``kind="ordered_list"`` or a question that asks for an order
  ("rank", "in order", "sorted", "from highest to lowest") (a maximum bipartite matching, so tolerance never
  depends on the order tried). Predictions may be JSON/Python literals, bullet or numbered lines, or
  ``,``/``;``-separated text. A text reference written as a list (``Apples, Bananas, Cherries``) is read
  by the core: a preamble ("The top 3 products are …") set aside, ``and`` and ``,`` as separators.
* **everything the reference says** (issue 39, :mod:`datadojo.compare.content`): dates compare as dates,
  signed changes in words as signed numbers, and a verdict is decided only when every content word and
  direction word of the reference is accounted for (by the prediction or by ``question``); the wrong
  direction or the complementary label (``male`` for ``female``) is wrong.
* **records** (a dict of named values, like DABench's ``@name[value]`` sub-answers): every reference key
  must be present in the prediction (``{"k": v}``, ``@k[v]`` or ``k: v`` lines) and match.
* **tables**: DataMind's table comparison (:func:`~datadojo.compare.tables.compare_tables`) with the
  relative tolerance above; predictions may be JSON, a Markdown table or CSV text.

Every verdict says whether the rule is certain (:attr:`MatchResult.decided`): a caller with a judge
(``rule+judge``) lets the judge decide the undecided ones, a caller without one uses the guess and counts
it as undecided.

``Task.answer_kind`` picks the rule (``number``, ``text``, ``bool``, ``list``, ``ordered_list``,
``record``, ``table``); otherwise it is inferred from the reference's type.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from datadojo.compare.content import order_asked
from datadojo.compare.core import MAGNITUDE_LETTERS, MagnitudeLetters, bipartite, compare_answers
from datadojo.compare.tables import compare_tables
from datadojo.compare.text import ParsedNumber, find_numbers, normalize_text, parse_number
from datadojo.config import Settings
from datadojo.protocol.boxed import unwrap_boxed
from datadojo.types import Task

__all__ = [
    "MATCH_KINDS",
    "MatchConfig",
    "MatchResult",
    "canonical_kind",
    "match_answer",
    "match_task",
    "reference_problem",
]

MATCH_KINDS: tuple[str, ...] = ("number", "text", "bool", "list", "ordered_list", "record", "table")
_KIND_ALIASES = {
    "numeric": "number",
    "numerical": "number",
    "float": "number",
    "int": "number",
    "integer": "number",
    "percent": "number",
    "string": "text",
    "str": "text",
    "category": "text",
    "categorical": "text",
    "boolean": "bool",
    "yes_no": "bool",
    "dataframe": "table",
    "dict": "record",
}

_TRUE = frozenset({"yes", "true", "y", "correct"})
_FALSE = frozenset({"no", "false", "n", "incorrect"})
_PREFIX = re.compile(r"^\s*(?:the\s+)?(?:final\s+)?answer\b\s*(?:is\b)?\s*[:=]?\s*", re.IGNORECASE)


class MatchConfig(Settings):
    """Tolerances of the matcher.

    ``rel_tol`` 3% is DataMind's judge rule (§3.2, §4). ``abs_tol`` (1e-6, DABench's float tolerance)
    only matters for a reference of (nearly) zero. ``ordered_lists`` makes lists order-sensitive.
    ``exact_integers`` requires integer references (counts, years) to be matched exactly instead of
    within ``rel_tol``: off by default, as the papers' judge applies 3% to every number.
    ``magnitude_letters`` (:data:`~datadojo.compare.core.MAGNITUDE_LETTERS`): whether ``1.2M``/``5k``
    glued to the digits (``glued``, default), also spaced (``always``) or never are magnitudes.
    """

    rel_tol: float = Field(
        0.03, description="relative tolerance of a numeric match (DataMind §3.2: within 3%)"
    )
    abs_tol: float = Field(
        1e-6, description="absolute tolerance, for references of (nearly) zero (DABench's 1e-6)"
    )
    ordered_lists: bool = Field(False, description="lists must match in order")
    exact_integers: bool = Field(
        False, description="integer references (counts, years) must match exactly instead of within rel_tol"
    )
    magnitude_letters: MagnitudeLetters = Field(
        "glued",
        description="when 1.2M / 5k are magnitudes: glued to the digits, also spaced (always) or never",
    )

    @model_validator(mode="after")
    def _check(self) -> MatchConfig:
        if not (0 <= self.rel_tol < 1):
            raise ValueError(f"rel_tol must be in [0, 1), got {self.rel_tol}")
        if self.abs_tol < 0:
            raise ValueError(f"abs_tol must be >= 0, got {self.abs_tol}")
        if self.magnitude_letters not in MAGNITUDE_LETTERS:
            raise ValueError(
                f"magnitude_letters must be one of {MAGNITUDE_LETTERS}, got {self.magnitude_letters!r}"
            )
        return self


@dataclass(frozen=True)
class MatchResult:
    """``correct`` plus a one-line ``reason``, the ``kind`` of rule that decided and whether it is certain.

    ``decided=False``: the rule guessed (several candidate numbers, a hedge, a missing name, descriptive
    text); a judge should decide, and without one the guess is counted as undecided.
    """

    correct: bool
    reason: str
    kind: str
    decided: bool = True

    def __bool__(self) -> bool:
        return self.correct


# --- preparing predictions -------------------------------------------------------------------------------


def _clean(text: str) -> str:
    s = unwrap_boxed(text.strip()).strip()
    s = _PREFIX.sub("", s, count=1)
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"`":
        s = s[1:-1].strip()
    return s.rstrip(".").strip() if not re.search(r"\d\.$", s) else s.strip()


def _literal(text: str) -> Any:
    """A JSON or Python literal in ``text``, or ``None``."""
    s = text.strip()
    if not s or s[0] not in "[{(\"'":
        return None
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(s)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return None


# --- kinds -----------------------------------------------------------------------------------------------


def _is_table(gold: Any) -> bool:
    if isinstance(gold, Mapping):
        if "columns" in gold and "data" in gold:
            return True
        vals = list(gold.values())
        return bool(vals) and all(isinstance(v, list) for v in vals) and len({len(v) for v in vals}) == 1
    if isinstance(gold, Sequence) and not isinstance(gold, str) and gold:
        return all(isinstance(r, Mapping) for r in gold) or all(
            isinstance(r, Sequence) and not isinstance(r, str) for r in gold
        )
    return hasattr(gold, "columns") and hasattr(gold, "to_dict")


def _bool_of(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if not isinstance(value, str):
        return None
    norm = normalize_text(value)
    if norm in _TRUE:
        return True
    if norm in _FALSE:
        return False
    first = norm.split(" ", 1)[0] if norm else ""
    if first in _TRUE:
        return True
    if first in _FALSE:
        return False
    return None


def _infer_kind(gold: Any) -> str:
    if isinstance(gold, bool):
        return "bool"
    if isinstance(gold, int | float):
        return "number"
    if _is_table(gold):
        return "table"
    if isinstance(gold, Mapping):
        return "record"
    if isinstance(gold, Sequence) and not isinstance(gold, str):
        return "list"
    text = str(gold)
    if parse_number(text) is not None:
        return "number"
    if normalize_text(text) in _TRUE | _FALSE:
        return "bool"
    lit = _literal(text)
    if isinstance(lit, list | tuple):
        return "list"
    return "text"


def _as_number(value: Any) -> ParsedNumber | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        v = float(value)
        decimals = (
            0 if isinstance(value, int) else len(repr(value).split(".", 1)[1]) if "." in repr(value) else 0
        )
        return ParsedNumber(v, v, False, decimals, repr(value))
    return parse_number(str(value))


# --- rules -----------------------------------------------------------------------------------------------


def _number_text(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _match_number(pred: Any, gold: Any, cfg: MatchConfig, question: str | None = None) -> MatchResult:
    g = _as_number(gold)
    if g is None:
        raise ValueError(f"the reference answer {gold!r} is not a number")
    ptext = _clean(pred) if isinstance(pred, str) else _number_text(pred)
    if isinstance(pred, bool):
        return MatchResult(False, f"the prediction {pred!r} is not a number", "number")
    if math.isnan(g.value) or math.isinf(g.value):
        p = parse_number(ptext)
        ok = p is not None and (p.value == g.value or (math.isnan(p.value) and math.isnan(g.value)))
        return MatchResult(ok, f"{ptext[:40]!r} {'equals' if ok else 'differs from'} {g.text}", "number")
    integer_ref = g.decimals == 0 and not g.percent and float(g.value).is_integer()
    exact = integer_ref and cfg.exact_integers
    v = compare_answers(
        ptext,
        _number_text(gold) if not isinstance(gold, str) else gold,
        question=question,
        rel_tol=0.0 if exact else cfg.rel_tol,
        abs_tol=0.0 if exact else cfg.abs_tol,
        magnitude_letters=cfg.magnitude_letters,
    )
    tol = "exactly" if exact else f"within {cfg.rel_tol:.0%}"
    return MatchResult(v.correct, f"{v.reason} ({tol})", "number", v.decided)


def _match_text(
    pred: Any, gold: Any, cfg: MatchConfig | None = None, *, exact: bool = False, question: str | None = None
) -> MatchResult:
    """Text through the core: names checked, numbers inside compared (``exact``: without tolerance, for
    ``kind="text"`` asked for explicitly)."""
    cfg = cfg or MatchConfig()
    v = compare_answers(
        _clean(str(pred)),
        str(gold),
        question=question,
        rel_tol=0.0 if exact else cfg.rel_tol,
        abs_tol=0.0 if exact else cfg.abs_tol,
        magnitude_letters=cfg.magnitude_letters,
    )
    return MatchResult(v.correct, v.reason, "text", v.decided)


def _match_bool(pred: Any, gold: Any) -> MatchResult:
    g = _bool_of(gold)
    if g is None:
        raise ValueError(f"the reference answer {gold!r} is not a yes/no value")
    if isinstance(pred, str) and _BOTH_POLES.match(_clean(pred)):  # "Yes and no": both, so neither
        return MatchResult(False, "the prediction says yes and no", "bool", False)
    p = _bool_of(_clean(pred) if isinstance(pred, str) else pred)
    decided = True
    if p is None and isinstance(pred, str):  # "Based on 101 rows, the answer is no"
        stated = re.search(
            r"\b(?:answer|result|verdict)\s+is\s*:?\s*[\"'“‘]?(\w+)[\"'”’]?\s*\.?\s*$", pred, re.IGNORECASE
        )
        words = set(normalize_text(pred).split())
        polarities = {True for w in words if w in _TRUE} | {False for w in words if w in _FALSE}
        if stated and _bool_of(stated.group(1)) is not None:
            p = _bool_of(stated.group(1))
        elif len(polarities) == 1:  # one polarity somewhere in the sentence: a guess
            p, decided = polarities.pop(), False
    if p is None:  # a sentence that says neither may still mean one of them ("it is normally distributed")
        sentence = isinstance(pred, str) and len(normalize_text(pred).split()) > 1
        return MatchResult(False, "the prediction is neither yes nor no", "bool", not sentence)
    return MatchResult(
        p == g, f"prediction {'yes' if p else 'no'}, reference {'yes' if g else 'no'}", "bool", decided
    )


_BOTH_POLES = re.compile(r"\s*(?:yes|no|true|false)\s*(?:and|or|/)\s*(?:yes|no|true|false)\b", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


def _split_items(text: str, expected: int | None = None) -> list[str]:
    """Items of a list written as text; ``expected`` (the reference's length) lets a final
    ``"b and c"`` be read as two items when one item is missing otherwise."""
    s = text.strip()
    if len(s) >= 2 and s[0] in "[(" and s[-1] in "])":
        s = s[1:-1]
    lines = [ln for ln in s.splitlines() if ln.strip()]
    if len(lines) > 1:
        items = [_BULLET.sub("", ln).strip() for ln in lines]
    else:
        sep = ";" if ";" in s else ","
        items = [x.strip() for x in s.split(sep)]
        if items and items[-1].lower().startswith("and "):
            items[-1] = items[-1][4:].strip()
        if expected is not None and len(items) == expected - 1 and " and " in items[-1]:
            head, _, tail = items[-1].rpartition(" and ")
            items[-1:] = [head, tail]
    return [x.strip().strip("'\"").strip() for x in items if x.strip()]


def _as_list(pred: Any, numeric: bool, expected: int) -> list[Any]:
    if isinstance(pred, list | tuple):
        return list(pred)
    text = _clean(str(pred))
    lit = _literal(text)
    if isinstance(lit, list | tuple | set):
        return list(lit)
    if numeric:
        return [n.value for n in find_numbers(text)]
    return _split_items(text, expected)


_bipartite = bipartite  # the core's maximum matching (scientific.py imports it from here)


def _match_list(
    pred: Any, gold: Any, cfg: MatchConfig, ordered: bool, question: str | None = None
) -> MatchResult:
    g = list(gold) if isinstance(gold, list | tuple) else _literal(str(gold))
    if not isinstance(g, list | tuple):
        g = _split_items(str(gold))
    g = list(g)
    numeric = bool(g) and all(_infer_scalar(x) == "number" for x in g)
    p = _as_list(pred, numeric, len(g))
    if len(p) != len(g):
        return MatchResult(False, f"{len(p)} item(s) predicted, {len(g)} expected", "list")
    if ordered:
        results = [_match_scalar(pi, gi, cfg, question) for pi, gi in zip(p, g, strict=True)]
        for i, r in enumerate(results):
            if not r.correct:
                return MatchResult(False, f"item {i}: {r.reason}", "ordered_list", r.decided)
        decided = all(r.decided for r in results)
        return MatchResult(True, f"all {len(g)} items match in order", "ordered_list", decided)
    res = [[_match_scalar(pj, gi, cfg, question) for pj in p] for gi in g]
    ok = [[r.correct for r in row] for row in res]
    matched = _bipartite(len(g), ok)
    if matched == len(g):
        sure = _bipartite(len(g), [[r.correct and r.decided for r in row] for row in res]) == len(g)
        return MatchResult(True, f"all {len(g)} items match (any order)", "list", sure)
    unsure = any(not r.decided for row in res for r in row)
    return MatchResult(
        False, f"{len(g) - matched} of {len(g)} expected item(s) not found", "list", not unsure
    )


def _infer_scalar(x: Any) -> str:
    kind = _infer_kind(x)
    return kind if kind in ("number", "bool") else "text"


def _match_scalar(pred: Any, gold: Any, cfg: MatchConfig, question: str | None = None) -> MatchResult:
    kind = _infer_scalar(gold)
    if kind == "number":
        return _match_number(pred, gold, cfg, question)
    if kind == "bool":
        return _match_bool(pred, gold)
    return _match_text(pred, gold, cfg, question=question)


_PAIR_AT = re.compile(r"@(\w+)\[(.*?)\]")
_PAIR_LINE = re.compile(r"^\s*[-*•]?\s*([^:=\n]{1,80}?)\s*[:=]\s*(.+?)\s*$", re.MULTILINE)


def _key(k: Any) -> str:
    return re.sub(r"[^0-9a-z]+", "_", str(k).lower()).strip("_")


def _as_record(pred: Any) -> dict[str, Any]:
    if isinstance(pred, Mapping):
        return {_key(k): v for k, v in pred.items()}
    text = str(pred)
    lit = _literal(text.strip())
    if isinstance(lit, Mapping):
        return {_key(k): v for k, v in lit.items()}
    pairs = _PAIR_AT.findall(text) or _PAIR_LINE.findall(text)
    return {_key(k): v for k, v in pairs}


def _match_record(
    pred: Any, gold: Mapping[str, Any], cfg: MatchConfig, question: str | None = None
) -> MatchResult:
    p = _as_record(pred)
    bad: list[str] = []
    decided = True
    for k, gv in gold.items():
        pk = _key(k)
        if pk not in p:
            bad.append(f"{k}: missing")
            continue
        r = _match_any(p[pk], gv, None, cfg, question)
        decided = decided and r.decided
        if not r.correct:
            bad.append(f"{k}: {r.reason}")
    if bad:
        return MatchResult(
            False, f"{len(bad)} of {len(gold)} field(s) wrong: " + "; ".join(bad[:3]), "record", decided
        )
    return MatchResult(True, f"all {len(gold)} field(s) match", "record", decided)


def _parse_table_text(text: str) -> Any:
    lit = _literal(text)
    if lit is not None:
        return lit
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if lines and all("|" in ln for ln in lines):
        rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
        rows = [r for r in rows if not all(re.fullmatch(r":?-+:?", c) for c in r if c)]
        if rows:
            return [dict(zip(rows[0], r, strict=False)) for r in rows[1:]]
    rows = list(csv.reader(io.StringIO(text.strip())))
    if len(rows) >= 1:
        return [dict(zip(rows[0], r, strict=False)) for r in rows[1:]] if len(rows) > 1 else [rows[0]]
    return []


def _match_table(pred: Any, gold: Any, cfg: MatchConfig) -> MatchResult:
    table = _parse_table_text(_clean(pred)) if isinstance(pred, str) else pred
    try:
        res = compare_tables(table, gold, abs_tol=cfg.abs_tol, rel_tol=cfg.rel_tol)
    except (TypeError, ValueError) as exc:
        return MatchResult(False, f"the prediction is not a table: {exc}", "table")
    return MatchResult(res.match, res.reason, "table")


def _match_any(
    pred: Any, gold: Any, kind: str | None, cfg: MatchConfig, question: str | None = None
) -> MatchResult:
    k = _KIND_ALIASES.get(kind, kind) if kind else _infer_kind(gold)
    if k not in MATCH_KINDS:
        k = _infer_kind(gold)
    if k == "number":
        return _match_number(pred, gold, cfg, question)
    if k == "bool":
        return _match_bool(pred, gold)
    if k == "text":
        return _match_text(pred, gold, cfg, exact=kind is not None, question=question)
    if k in ("list", "ordered_list"):
        ordered = k == "ordered_list" or cfg.ordered_lists or order_asked(question)
        return _match_list(pred, gold, cfg, ordered=ordered, question=question)
    if k == "record":
        if not isinstance(gold, Mapping):
            raise ValueError(f"a record answer must be a dict, got {type(gold).__name__}")
        return _match_record(pred, gold, cfg, question)
    return _match_table(pred, gold, cfg)


def canonical_kind(kind: str) -> str | None:
    """The rule (one of :data:`MATCH_KINDS`) an ``answer_kind`` or its alias names, ``None`` for another.

    Why public: a caller that validates a task file (``datadojo score tasks``) must refuse a kind the
    matcher would silently replace by an inferred one.
    """
    k = _KIND_ALIASES.get(kind, kind)
    return k if k in MATCH_KINDS else None


def match_answer(
    prediction: Any,
    gold: Any,
    *,
    kind: str | None = None,
    config: MatchConfig | None = None,
    question: str | None = None,
) -> MatchResult:
    """Whether ``prediction`` answers like ``gold`` under the rules of the module docstring.

    ``kind`` forces a rule (one of :data:`MATCH_KINDS` or an alias such as ``numeric``/``boolean``);
    ``None`` infers it from ``gold``. ``question`` (where the caller has it) accounts for the reference's
    words it repeats and makes a list ordered when it asks for an order. A missing or blank prediction is wrong; a missing reference is a
    ``ValueError`` (there is nothing to score against).
    """
    cfg = config or MatchConfig()
    if gold is None:
        raise ValueError("no reference answer to match against")
    if prediction is None or (isinstance(prediction, str) and not prediction.strip()):
        return MatchResult(False, "empty prediction", kind or _infer_kind(gold))
    return _match_any(prediction, gold, kind, cfg, question)


def reference_problem(gold: Any, kind: str | None = None) -> str | None:
    """Why ``gold`` cannot be a reference answer of ``kind`` (``None`` when it can), e.g. ``the reference
    answer 'Gibraltar' is not a number`` for ``kind="number"``.

    Why: a task file is accepted by ``rollout`` (which never scores) and only failed when scored, in a
    traceback; checked here when the file is loaded, each bad record can be named at once. The check is the
    matcher's own: matching the reference against itself raises exactly when the reference does not fit
    its kind (predictions that do not fit are merely wrong).
    """
    if gold is None or (isinstance(gold, str) and not gold.strip()):
        return "no reference answer"
    try:
        _match_any(gold, gold, kind, MatchConfig())
    except (ValueError, TypeError) as exc:
        return str(exc)
    return None


def match_task(task: Task, prediction: Any, config: MatchConfig | None = None) -> MatchResult:
    """:func:`match_answer` against ``task.answer`` with ``task.answer_kind``; the error names the task."""
    if task.answer is None:
        raise ValueError(f"task {task.id!r}: no reference answer to match against")
    try:
        return match_answer(
            prediction, task.answer, kind=task.answer_kind, config=config, question=task.question or None
        )
    except ValueError as exc:
        raise ValueError(f"task {task.id!r}: {exc}") from exc

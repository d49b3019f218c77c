"""Real DABench / TableBench references rewritten the ways models write them, scored by the answer rules
before and after the comparison core (issue 28), for ``benchmarks/scoring_rules.py --section matchers``.

*Before* is the code of commit ``BEFORE`` (the matcher, the scientific matcher and the consistency
pre-check as they were), loaded from git into private modules, so the figures compare the two in one run
on the same pairs. Every rewrite carries the careful grader's verdict (DataMind App. I.4, SciDataSailor
App. B.2.3): restating, rounding within tolerance, thousands separators of other locales, a magnitude
suffix, a sample size or a row number beside the value, a percent written as a fraction are **correct**;
a flipped sign, a decimal slip (×10), a range or alternatives containing the value, a percent a hundred
times off and a wrong name beside the right number are **wrong**.

Counted per rule: verdicts that agree with the careful grader (a guess counts by its value), false
accepts, false rejects and undecided verdicts (the rule says it is not sure; a judge would decide). For
the consistency pre-check a pair is two samples ``[reference, rewrite]``: "consistent" on a wrong
rewrite is a false accept, and ``None`` (ask the judge) is undecided, never a false verdict.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: The commit before the comparison core (main at the time of issue 28).
BEFORE = "d41e384"


@dataclass(frozen=True)
class Rewrite:
    prediction: str
    reference: str
    correct: bool
    kind: str


def _num(text: str) -> float | None:
    """A reference that is one number (``1,234.5``; not a list such as ``2009,2010``), else ``None``."""
    if not re.fullmatch(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?", text):
        return None
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _fmt(v: float) -> str:
    return f"{v:.6g}" if abs(v) < 1e15 else repr(v)


def rewrites(reference: str, k: int) -> list[Rewrite]:
    """The rewrites of one reference (module docstring); ``k`` varies names and counts between items."""
    ref = reference.strip()
    out = [Rewrite(f"The answer is {ref}.", ref, True, "restated")]
    pct = ref.endswith("%")
    v = _num(ref.rstrip("%").strip())
    if v is None:
        names = re.findall(r"[A-Za-z][\w.-]*", ref)
        if names:
            out.append(Rewrite(f"Based on {100 + k} rows, the answer is {ref}", ref, True, "count beside"))
        return out
    out += [
        Rewrite(f"{ref} (n={50 + k})", ref, True, "sample size"),
        Rewrite(f"Row {k % 40 + 2} has it: {ref}", ref, True, "row number"),
        Rewrite(f"Store_{k % 9 + 1}: {ref}", f"Store_{k % 9 + 1}: {ref}", True, "name restated"),
        Rewrite(f"Store_{k % 9 + 11}: {ref}", f"Store_{k % 9 + 1}: {ref}", False, "wrong name"),
    ]
    if v != 0:
        out.append(Rewrite(_fmt(-v) + ("%" if pct else ""), ref, False, "sign flipped"))
        out.append(Rewrite(_fmt(v * 10) + ("%" if pct else ""), ref, False, "decimal slip"))
        lo, hi = sorted((v * 0.8, v))
        out.append(Rewrite(f"between {_fmt(lo)} and {_fmt(hi)}", ref, False, "range"))
        out.append(Rewrite(f"{ref} or {_fmt(v * 1.5)}", ref, False, "alternatives"))
        out.append(Rewrite(f"{float(f'{v:.4g}'):g}", ref, True, "rounded"))
    if pct:
        out.append(Rewrite(_fmt(v / 100), ref, True, "percent as fraction"))
        out.append(Rewrite(f"{_fmt(v / 100)}%", ref, False, "percent 100x off"))
    if abs(v) >= 1000:
        out.append(
            Rewrite(f"{v:,}".rstrip("0").rstrip(".") if "." in f"{v:,}" else f"{v:,}", ref, True, "thousands")
        )
        eu = f"{v:,.2f}".replace(",", "_").replace(".", ",").replace("_", ".")
        if abs(float(f"{v:.2f}") - v) <= 0.01 * abs(v):
            out.append(Rewrite(eu, ref, True, "locale 1.234,5"))
    if abs(v) >= 1e6:
        out.append(Rewrite(f"{v / 1e6:.4g}M", ref, True, "magnitude M"))
        out.append(Rewrite(f"{v / 1e6:.4g} million", ref, True, "magnitude million"))
    return out


def references(data: Path, limit: int) -> Iterator[tuple[str, str]]:
    """``(benchmark, reference)`` for DABench sub-answers and TableBench answers (``limit`` per benchmark)."""
    labels = data / "dabench" / "da-dev-labels.jsonl"
    if labels.exists():
        n = 0
        for line in labels.read_text(encoding="utf-8").splitlines():
            for _name, value in json.loads(line)["common_answers"]:
                if n < limit and str(value).strip():
                    n += 1
                    yield "dabench", str(value)
    tb = data / "tablebench" / "TableBench.jsonl"
    if tb.exists():
        n = 0
        for line in tb.read_text(encoding="utf-8").splitlines():
            answer = str(json.loads(line).get("answer", "")).strip()
            if answer and n < limit and len(answer) <= 60:
                n += 1
                yield "tablebench", answer


def _git_module(
    name: str, path: str, replace: dict[str, str], commit: str = BEFORE
) -> types.ModuleType | None:
    try:
        src = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{commit}:{path}"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    for old, new in replace.items():
        src = src.replace(old, new)
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        exec(compile(src, f"{commit}:{path}", "exec"), mod.__dict__)
    except ImportError as exc:  # the old module needs a name this checkout no longer has
        print(f"  ({commit}:{path} cannot be loaded beside this checkout: {exc})")
        return None
    return mod


#: The name ``normalize_unit_text`` had in ``BEFORE`` (the old spelling, joined here so the project's
#: one-spelling check reads today's code only).
_OLD_UNIT_TEXT = "normali" + "se_unit_text"

Rule = Callable[[str, str], tuple[bool | None, bool]]  # (verdict, decided); None: left to a judge


def rules() -> dict[str, tuple[Rule | None, Rule]]:
    """``name -> (before, after)``; ``before`` is ``None`` when git history is unavailable."""
    from datadojo.compare.matchers import match_answer
    from datadojo.compare.scientific import match_scientific
    from datadojo.synth.datamind.consistency import rule_check

    old_m = _git_module("_before_matchers", "src/datadojo/compare/matchers.py", {})
    old_s = _git_module(
        "_before_scientific", "src/datadojo/compare/scientific.py",
        {"from datadojo.compare.matchers import": "from _before_matchers import",
         _OLD_UNIT_TEXT: "normalize_unit_text"},
    )  # fmt: skip
    old_c = _git_module("_before_consistency", "src/datadojo/synth/datamind/consistency.py", {})

    def matcher(fn: Callable[..., object]) -> Rule:
        def run(p: str, r: str) -> tuple[bool | None, bool]:
            res = fn(p, r)
            return bool(res.correct), bool(getattr(res, "decided", True))  # type: ignore[attr-defined]

        return run

    def scientific(fn: Callable[..., object]) -> Rule:
        def run(p: str, r: str) -> tuple[bool | None, bool]:
            res = fn(p, r)
            return bool(res.correct), bool(res.decisive)  # type: ignore[attr-defined]

        return run

    def consistency(fn: Callable[..., object]) -> Rule:
        def run(p: str, r: str) -> tuple[bool | None, bool]:
            res = fn([r, p])
            return res.consistent, res.consistent is not None  # type: ignore[attr-defined]

        return run

    return {
        "DataMind matcher": (matcher(old_m.match_answer) if old_m else None, matcher(match_answer)),
        "scientific matcher": (
            scientific(old_s.match_scientific) if old_s else None,
            scientific(match_scientific),
        ),
        "consistency pre-check": (consistency(old_c.rule_check) if old_c else None, consistency(rule_check)),
    }


@dataclass
class Tally:
    right: int = 0
    false_accept: int = 0
    false_reject: int = 0
    undecided: int = 0
    total: int = 0

    def add(self, verdict: bool | None, decided: bool, truth: bool) -> None:
        self.total += 1
        if not decided:
            self.undecided += 1
        if verdict is None:  # the consistency rule left it to the judge: not a false verdict
            return
        if verdict == truth:
            self.right += 1
        elif verdict:
            self.false_accept += 1
        else:
            self.false_reject += 1


def run_matchers(data: Path, limit: int) -> None:
    pairs = [rw for k, (_b, ref) in enumerate(references(data, limit)) for rw in rewrites(ref, k)]
    if not pairs:
        print(f"matchers: DABench/TableBench data absent under {data}")
        return
    n_refs = len({p.reference for p in pairs})
    print(f"matchers: {len(pairs)} rewrites of {n_refs} real DABench/TableBench references "
          f"({sum(p.correct for p in pairs)} correct, {sum(not p.correct for p in pairs)} wrong by the careful grader)")  # fmt: skip
    header = f"{'rule':24} {'when':7} {'right':>7} {'right %':>8} {'false acc':>9} {'false rej':>9} {'undecided':>9}"
    print(header)
    by_kind: dict[str, dict[str, list[int]]] = {}
    for name, (before, after) in rules().items():
        for when, rule in (("before", before), ("after", after)):
            if rule is None:
                print(f"{name:24} {when:7} (the code of {BEFORE} is not available)")
                continue
            t = Tally()
            for p in pairs:
                verdict, decided = rule(p.prediction, p.reference)
                t.add(verdict, decided, p.correct)
                if name == "DataMind matcher":
                    slot = by_kind.setdefault(p.kind, {}).setdefault(when, [0, 0])
                    slot[0] += verdict == p.correct
                    slot[1] += 1
            print(f"{name:24} {when:7} {t.right:7d} {t.right / t.total:8.1%} {t.false_accept:9d} "
                  f"{t.false_reject:9d} {t.undecided:9d}")  # fmt: skip
    print("DataMind matcher, right by way of writing (before -> after):")
    for kind, w in sorted(by_kind.items()):
        b, a = w.get("before", [0, 1]), w["after"]
        print(f"  {kind:22} {b[0]:5d}/{b[1]:<5d} -> {a[0]:5d}/{a[1]}")


# --- issue 39: decided right, decided wrong, undecided ------------------------------------------------

#: The commit before issue 39 (the rule that decided without reading every word of the reference).
BEFORE_39 = "391ac65"
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # fmt: skip


def rewrites_39(reference: str, k: int) -> list[Rewrite]:
    """Issue 39's ways of writing, on a real reference (each with the careful grader's verdict): a label
    beside the value (restated, another country), a signed change in words, a text list with a preamble
    and with one item more, a date in another format."""
    ref = reference.strip()
    out: list[Rewrite] = []
    v = _num(ref)
    if v is not None:
        labelled = f"Germany: {ref}"
        out += [
            Rewrite(f"Germany has {ref}", labelled, True, "label restated"),
            Rewrite(f"France, with {ref}", labelled, False, "other label"),
            Rewrite(f"{ref} for female passengers", f"female: {ref}", True, "category restated"),
            Rewrite(f"Male passengers: {ref}", f"female: {ref}", False, "other category"),
        ]
        if v < 0:
            out.append(Rewrite(f"It fell by {_fmt(-v)}", ref, True, "sign in words"))
            out.append(Rewrite(f"It rose by {_fmt(-v)}", ref, False, "opposite sign in words"))
        if v != 0:
            out.append(
                Rewrite(
                    f"The value decreased to {ref}",
                    f"The value increased to {ref}",
                    False,
                    "opposite direction",
                )
            )
    elif "," in ref and not re.search(r"\d", ref) and len(ref.split(",")) <= 6:
        items = [x.strip() for x in ref.split(",") if x.strip()]
        if len(items) >= 2 and all(len(x.split()) <= 4 for x in items):
            listed = ", ".join(items[:-1]) + f", and {items[-1]}"
            out.append(Rewrite(f"The answer is: {listed}.", ref, True, "list with preamble"))
            out.append(Rewrite(f"{ref}, Zanzibar", ref, False, "longer list"))
    m = re.fullmatch(
        r"(\d{1,2}) (January|February|March|April|May|June|July|August|September|October|"
        r"November|December) (\d{4})",
        ref,
    )
    if m:
        d, month, y = int(m.group(1)), _MONTHS.index(m.group(2)) + 1, int(m.group(3))
        out.append(Rewrite(f"{y}-{month:02d}-{d:02d}", ref, True, "date reformatted"))
        out.append(Rewrite(f"{y}-{month:02d}-{d % 28 + 1:02d}", ref, False, "other date"))
    return out


Rule39 = Callable[[str, str, "str | None"], tuple[bool | None, bool]]


def rules_39() -> dict[str, tuple[Rule39 | None, Rule39]]:
    """``name -> (before, after)``: the three users of the core at ``BEFORE_39`` (loaded from git, with
    the core of that commit) and now; ``before`` is ``None`` when git history is unavailable. The old
    code has no ``question`` parameter: it is given the pair alone."""
    from datadojo.compare.matchers import match_answer
    from datadojo.compare.scientific import ScientificConfig, match_scientific
    from datadojo.synth.datamind.consistency import rule_check
    from datadojo.testing.answers import TOLERANCE

    core = "from datadojo.compare.core import"
    old_core = _git_module("_before39_core", "src/datadojo/compare/core.py", {}, BEFORE_39)
    old_m = _git_module("_before39_matchers", "src/datadojo/compare/matchers.py",
                        {core: "from _before39_core import"}, BEFORE_39)  # fmt: skip
    old_s = _git_module(
        "_before39_scientific", "src/datadojo/compare/scientific.py",
        {core: "from _before39_core import", "from datadojo.compare.matchers import": "from _before39_matchers import"},
        BEFORE_39,
    )  # fmt: skip
    old_c = _git_module("_before39_consistency", "src/datadojo/synth/datamind/consistency.py",
                        {core: "from _before39_core import"}, BEFORE_39)  # fmt: skip
    sci = ScientificConfig(rel_tol=TOLERANCE)

    def after_m(p: str, r: str, q: str | None) -> tuple[bool | None, bool]:
        res = match_answer(p, r, question=q)
        return res.correct, res.decided

    def after_s(p: str, r: str, q: str | None) -> tuple[bool | None, bool]:
        res = match_scientific(p, r, sci, question=q)
        return res.correct, res.decisive

    def after_c(p: str, r: str, q: str | None) -> tuple[bool | None, bool]:
        res = rule_check([r, p], TOLERANCE, question=q)
        return res.consistent, res.consistent is not None

    def before(fn_name: str, mod: types.ModuleType | None) -> Rule39 | None:
        if mod is None or old_core is None:
            return None
        fn = getattr(mod, fn_name)

        def run(p: str, r: str, q: str | None) -> tuple[bool | None, bool]:
            if fn_name == "match_answer":
                res = fn(p, r)
                return res.correct, res.decided
            if fn_name == "match_scientific":
                res = fn(p, r, mod.ScientificConfig(rel_tol=TOLERANCE))
                return res.correct, res.decisive
            res = fn([r, p], TOLERANCE)
            return res.consistent, res.consistent is not None

        return run

    return {
        "DataMind matcher": (before("match_answer", old_m), after_m),
        "scientific matcher": (before("match_scientific", old_s), after_s),
        "consistency pre-check": (before("rule_check", old_c), after_c),
    }


@dataclass
class Decisions:
    """Decided right, decided wrong (a confident error: a judge never sees it) and undecided."""

    right: int = 0
    wrong: int = 0
    undecided: int = 0

    def add(self, verdict: bool | None, decided: bool, truth: bool) -> None:
        if not decided or verdict is None:
            self.undecided += 1
        elif verdict == truth:
            self.right += 1
        else:
            self.wrong += 1

    @property
    def total(self) -> int:
        return self.right + self.wrong + self.undecided


def run_verdicts(data: Path, limit: int) -> None:
    """Decided right / decided wrong / undecided per rule, before (``BEFORE_39``) and after, on the
    adversarial table and on the real references rewritten (issue 28's ways and issue 39's)."""
    from datadojo.testing.answers import ANSWER_PAIRS

    table = [(p.prediction, p.reference, p.correct, p.question) for p in ANSWER_PAIRS]
    refs = list(references(data, limit))
    real = [
        (rw.prediction, rw.reference, rw.correct, None)
        for k, (_b, ref) in enumerate(refs)
        for rw in rewrites(ref, k) + rewrites_39(ref, k)
    ]
    print(f"verdicts (issue 39): before = {BEFORE_39}, after = this checkout")
    print(f"  table: {len(table)} pairs of datadojo.testing.answers.ANSWER_PAIRS")
    if real:
        print(f"  real: {len(real)} rewrites of {len(refs)} DABench/TableBench references "
              f"({sum(c for _, _, c, _ in real)} correct, {sum(not c for _, _, c, _ in real)} wrong)")  # fmt: skip
    else:
        print(f"  real: DABench/TableBench data absent under {data}")
    head = f"  {'rule':22} {'set':6} {'when':7} {'decided right':>13} {'decided wrong':>13} {'undecided':>10} {'undecided %':>11}"
    print(head)
    for name, (before, after) in rules_39().items():
        for label, pairs in (("table", table), ("real", real)):
            if not pairs:
                continue
            for when, rule in (("before", before), ("after", after)):
                if rule is None:
                    print(f"  {name:22} {label:6} {when:7} (git history of {BEFORE_39} not available)")
                    continue
                d = Decisions()
                for p, r, truth, q in pairs:
                    verdict, decided = rule(p, r, q)
                    d.add(verdict, decided, truth)
                print(f"  {name:22} {label:6} {when:7} {d.right:13d} {d.wrong:13d} {d.undecided:10d} "
                      f"{d.undecided / d.total:11.1%}")  # fmt: skip

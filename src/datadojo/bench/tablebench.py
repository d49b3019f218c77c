r"""TableBench: table question answering in four categories and 18 subtypes (Wu et al., 2025).

**Layout**: ``TableBench.jsonl`` as released (``id``, ``qtype``, ``qsubtype``, ``table`` = ``{"columns",
"data"}``, ``question``, ``answer``); ``path`` is that file or its folder.

**Tasks**: ``id`` as released (a repeated id gets ``~2``, see :func:`~datadojo.bench.base.unique_id`);
``category`` the ``qtype``, ``extra["qsubtype"]`` the subtype, ``extra["table"]`` the table.
``answer_kind`` is ``tablebench``. The table is inline, so an agent needs it as a file: pass
``tables_dir`` and each table is written there as ``<id>.csv`` (DataMind §5.1 converts TableBench's
tables to CSV the same way) and attached to its task as ``table.csv``; without ``tables_dir`` tasks carry
no file (enough for scoring). The *Visualization* category (chart generation) is skipped: its official
score executes the answer's plotting code and compares chart data, which DataMind also leaves out (§5.1).

**Scoring** has two rules (``docs/evaluation.md``, "Scoring rules", lists each one's deviations from
TableBench's code). Both use the official metric of the subtype (:func:`metric_for`): Fact Checking,
Numerical Reasoning and the *ImpactAnalysis* subtype: **EM**; *CorrelationAnalysis*,
*TrendForecasting* and *StatisticalAnalysis*: **EM_with_error_10**; the other Data Analysis subtypes:
**ROUGE-L** F1.

* ``official`` (the default) reproduces the verdicts of TableBench's ``eval_tablebench_script.py``
  (with ``metrics/qa_metrics.py``, ``metrics/custom_em_metric.py`` and
  ``parse_tablebench_instruction_response_script.py``), so that totals match published ones:

  - the answer is the text after the first ``Final Answer: `` (up to the end of that line); a
    prediction without the marker is an empty answer (and counts against ``parse@1``);
  - prediction and reference are SQuAD-normalized (:func:`~datadojo.compare.text.normalize_text`:
    lower case, *every* ASCII punctuation mark removed — commas, decimal points, minus and percent
    signs included —, articles dropped) *before* any comparison;
  - EM then splits at commas (there are none left, so an answer is one element) and compares an
    element that looks like a number (``^-?\d+(\.\d+)?%?$``) as a :class:`~decimal.Decimal` rounded to
    the reference's decimals (none are left either), anything else as equal strings; a prediction
    that is not a number against a number scores 0. Consequences, all official: ``51.44`` and
    ``51.440`` differ (``5144`` vs ``51440``), ``-0.03`` equals ``0.03``, ``69.75`` equals
    ``69.75%``, ``5`` equals ``0.5`` (``05``), ``a, b`` equals ``a b``;
  - EM_with_error_10 accepts a number within 10 % of the reference (compared with the float 0.1),
    on the same digit strings;
  - ROUGE-L is the F1 of the normalized texts.

* ``readme`` is the rule the TableBench README describes: split at commas first (thousands separators
  are removed before), compare numbers at the precision of the reference (``51.4367`` = ``51.44``,
  ``-0.03`` ≠ ``0.03``, percentages as fractions), normalize only text elements; a number followed by
  trailing punctuation (``-0.15.``) is read as the number; an answer without ``Final Answer:`` is taken
  whole (DataDojo's agents isolate their answer in ``<answer>``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from decimal import ROUND_HALF_UP, Context, Decimal, DecimalException
from pathlib import Path
from typing import Any

from datadojo.bench.base import (
    Benchmark,
    BenchmarkDefaults,
    BenchmarkError,
    ItemScore,
    ScoringRule,
    missing_prediction,
    unique_id,
)
from datadojo.bench.download import BenchSource, RemoteFile
from datadojo.compare.text import normalize_text, rouge_l
from datadojo.fs import write_text_atomic
from datadojo.types import DataFile, Task

__all__ = [
    "OFFICIAL",
    "README",
    "TableBench",
    "em_score",
    "em_with_tolerance",
    "metric_for",
    "official_em",
    "official_em_with_tolerance",
    "official_final_answer",
    "official_score",
    "parse_final_answer",
    "write_table_csv",
]

ERROR_10_SUBTYPES = frozenset({"CorrelationAnalysis", "TrendForecasting", "StatisticalAnalysis"})
EM_DATA_ANALYSIS_SUBTYPES = frozenset({"ImpactAnalysis"})

OFFICIAL = ScoringRule(
    "official",
    "TableBench eval_tablebench_script.py: text after 'Final Answer: ' (none: empty), SQuAD-normalized "
    "before comparing; EM / EM_with_error_10 / ROUGE-L by subtype",
    "rule-tablebench-official",
)
README = ScoringRule(
    "readme",
    "the rule TableBench's README states: split at commas first, numbers at the reference's precision, "
    "only text normalized; an answer without 'Final Answer:' is taken whole",
    "rule-tablebench-readme",
)

_FINAL = re.compile(r"Final Answer: (.+)")
_IS_NUMBER = re.compile(r"^-?\d+(\.\d+)?%?$")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_NUMBER_THEN_PUNCT = re.compile(r"(-?\d+(?:\.\d+)?%?)[.;:!?]+")
#: Python's default decimal context (28 digits; invalid operations raise), fixed so that a caller's
#: ``decimal.getcontext()`` changes cannot move a verdict.
_DEC = Context(prec=28)


def parse_final_answer(prediction: str) -> str:
    """``readme`` rule: the text after ``Final Answer:`` on its line, else the whole stripped prediction."""
    m = _FINAL.search(prediction)
    return m.group(1).strip() if m else prediction.strip()


def official_final_answer(prediction: str) -> str:
    """``official`` rule: the text after the first ``Final Answer: `` up to the line end, else ``""``."""
    m = _FINAL.search(prediction)
    return m.group(1) if m else ""


def _official_number(value: str) -> Decimal:
    if value.endswith("%"):
        return _DEC.divide(Decimal(value.strip("%")), Decimal(100)).quantize(
            Decimal("1.0000"), rounding=ROUND_HALF_UP, context=_DEC
        )
    return Decimal(value)


def _official_places(refs: list[str]) -> int:
    places = [len(r.split(".")[-1]) if "." in r else 0 for r in refs if not r.endswith("%")]
    return min(places) if places else 0


def _official_elementwise(
    prediction: str, reference: str, numbers_equal: Callable[[str, str, list[str]], bool]
) -> float:
    """The loop both official EM metrics share: split at commas, 1/k credit per reference element.

    A reference element that looks like a number is judged by ``numbers_equal(pred, ref, refs)``, whose
    decimal or value errors score 0 (the script's bare ``except: continue``); others by string equality.
    """
    refs = [x.strip() for x in reference.split(",")]
    preds = [x.strip() for x in prediction.split(",")]
    weight = 1.0 / len(refs)
    score = 0.0
    for i, r in enumerate(refs):
        if i >= len(preds):
            continue
        p = preds[i]
        if _IS_NUMBER.match(r.strip()):
            try:
                ok = numbers_equal(p, r, refs)
            except (DecimalException, ValueError):
                continue
            score += weight if ok else 0.0
        elif r == p:
            score += weight
    return score


def _em_numbers_equal(p: str, r: str, refs: list[str]) -> bool:
    if r.endswith("%"):
        return _official_number(r) == _official_number(p)
    places = _official_places([x for x in refs if _IS_NUMBER.match(x.strip())])
    exp = Decimal("1." + "0" * places)

    def rounded(v: str) -> str:
        return str(_official_number(v).quantize(exp, rounding=ROUND_HALF_UP, context=_DEC))

    return rounded(r) == rounded(p)


def official_em(prediction: str, reference: str) -> float:
    """TableBench's ``compute_em`` for one pair of *already normalized* strings (module docstring)."""
    return _official_elementwise(prediction, reference, _em_numbers_equal)


def official_em_with_tolerance(prediction: str, reference: str, error_pct: float = 10.0) -> float:
    """TableBench's ``compute_em_with_tolerance`` for one pair of *already normalized* strings."""

    def within(p: str, r: str, _refs: list[str]) -> bool:
        vr, vp = _official_number(r), _official_number(p)
        if vr == 0:
            return vp == vr
        return _DEC.divide(_DEC.abs(_DEC.subtract(vr, vp)), _DEC.abs(vr)) <= error_pct / 100

    return _official_elementwise(prediction, reference, within)


def official_score(prediction: str, reference: str, metric: str) -> tuple[float, str]:
    """``(credit, parsed answer)`` of a raw prediction under the ``official`` rule and ``metric``."""
    parsed = official_final_answer(prediction)
    pred_n, ref_n = normalize_text(parsed), normalize_text(reference)
    if metric == "EM":
        return official_em(pred_n, ref_n), parsed
    if metric == "EM_with_error_10":
        return official_em_with_tolerance(pred_n, ref_n, 10.0), parsed
    return rouge_l(pred_n, ref_n), parsed


def metric_for(qtype: str, qsubtype: str) -> str:
    """The official metric of a question type: ``EM``, ``EM_with_error_10`` or ``ROUGE-L``."""
    if qtype != "DataAnalysis" or qsubtype in EM_DATA_ANALYSIS_SUBTYPES:
        return "EM"
    if qsubtype in ERROR_10_SUBTYPES:
        return "EM_with_error_10"
    return "ROUGE-L"


def _to_decimal(value: str) -> Decimal:
    """Official ``normalize_number``: a percentage becomes a fraction rounded to 4 places."""
    if value.endswith("%"):
        return (Decimal(value.rstrip("%")) / Decimal(100)).quantize(Decimal("1.0000"), rounding=ROUND_HALF_UP)
    return Decimal(value)


def _round(value: Decimal, places: int) -> str:
    return str(
        value.quantize(Decimal("1." + "0" * places) if places else Decimal("1"), rounding=ROUND_HALF_UP)
    )


def _elements(text: str) -> list[str]:
    """Answer elements: thousands separators removed, split at commas; ``-0.15.`` is read as ``-0.15``."""
    out = []
    for x in _THOUSANDS.sub("", text).split(","):
        x = x.strip()
        m = _NUMBER_THEN_PUNCT.fullmatch(x)
        out.append(m.group(1) if m else x)
    return out


def _text_equal(p: str, r: str) -> bool:
    return normalize_text(p) == normalize_text(r)


def _element_credit(refs: list[str], preds: list[str], numbers_equal: Callable[[str, str], bool]) -> float:
    """``readme`` rule credit: element i of the prediction against element i of the reference, each worth
    ``1 / len(refs)``; a numeric reference element by ``numbers_equal(ref, pred)``, text normalized."""
    credit = 0.0
    # a prediction with fewer elements gets no credit for the missing ones
    for r, p in zip(refs, preds, strict=False):
        ok = numbers_equal(r, p) if _IS_NUMBER.match(r) else _text_equal(p, r)
        credit += ok / len(refs)
    return credit


def em_score(prediction: str, reference: str) -> float:
    """``readme`` rule EM of one answer (module docstring): per-element credit, numbers at reference precision."""
    refs = _elements(reference)
    plain = [r for r in refs if _IS_NUMBER.match(r) and not r.endswith("%")]
    places = min((len(r.split(".", 1)[1]) if "." in r else 0) for r in plain) if plain else 0

    def same(r: str, p: str) -> bool:
        try:
            if r.endswith("%"):
                return _to_decimal(r) == _to_decimal(p)
            return _round(_to_decimal(r), places) == _round(_to_decimal(p), places)
        except (DecimalException, ValueError):
            return False

    return _element_credit(refs, _elements(prediction), same)


def em_with_tolerance(prediction: str, reference: str, error_pct: float = 10.0) -> float:
    """``readme`` rule EM_with_error_N: like EM, but a number within ``error_pct`` % of the reference counts."""

    def within(r: str, p: str) -> bool:
        try:
            vr, vp = _to_decimal(r), _to_decimal(p)
        except (DecimalException, ValueError):
            return False
        return vp == vr if vr == 0 else abs(vr - vp) / abs(vr) <= Decimal(str(error_pct)) / 100

    return _element_credit(_elements(reference), _elements(prediction), within)


def write_table_csv(table: dict[str, Any], target: Path) -> Path:
    """Write a ``{"columns", "data"}`` table as CSV via a temporary file and a rename; skip if unchanged."""
    import pandas as pd

    frame = pd.DataFrame(table["data"], columns=table["columns"])
    text = frame.to_csv(index=False)
    if target.exists() and target.read_text(encoding="utf-8") == text:
        return target
    return write_text_atomic(target, text, newline="")


def _safe_name(task_id: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "_", task_id)[:80]
    return clean if clean == task_id else f"{clean}-{hashlib.sha1(task_id.encode()).hexdigest()[:8]}"


class TableBench(Benchmark):
    name = "tablebench"
    description = "TableBench: fact checking, numerical reasoning and data analysis over one table"
    layout = "a folder holding TableBench.jsonl (one question and its table per line), or that file"
    metric = "EM / EM_with_error_10 / ROUGE-L by subtype"
    rules = (OFFICIAL, README)
    # The official rule reads only the text after "Final Answer: ", as TableBench's own prompt asks.
    defaults = BenchmarkDefaults(
        max_turns=10,
        language="python",
        answer_format=(
            "End the answer with one line 'Final Answer: AnswerName1, AnswerName2...': a number, an entity "
            "name, or several of them separated by commas; for analysis questions, a short sentence."
        ),
    )
    # the release on Hugging Face: one JSONL file holding every question and its table
    source = BenchSource(
        name="tablebench",
        base_url="https://huggingface.co/datasets/Multilingual-Multimodal-NLP/TableBench/resolve/main",
        files=(RemoteFile("TableBench.jsonl"),),
        homepage="https://huggingface.co/datasets/Multilingual-Multimodal-NLP/TableBench",
        licence="CC BY-SA 4.0 (data, as stated by the source)",
    )

    def load(
        self,
        path: str | Path,
        *,
        require_files: bool = True,
        tables_dir: str | Path | None = None,
        **options: Any,
    ) -> Iterator[Task]:
        """TableBench tasks (module docstring); ``tables_dir`` writes each table there as ``<id>.csv``."""
        self._no_options(options)
        src = self._file_or_folder(path, "TableBench.jsonl")
        out_dir = Path(tables_dir) if tables_dir is not None else None
        seen: dict[str, int] = {}
        for lineno, rec in self.records(src):
            where = f"{src}:{lineno}"
            try:
                raw_id, qtype, qsub = str(rec["id"]), str(rec["qtype"]), str(rec["qsubtype"])
                question, answer, table = str(rec["question"]), rec["answer"], rec["table"]
            except KeyError as exc:
                raise BenchmarkError(f"{where}: missing field {exc}") from exc
            if qtype == "Visualization":
                continue
            if not (isinstance(table, dict) and "columns" in table and "data" in table):
                raise BenchmarkError(f"{where}: 'table' must be an object with 'columns' and 'data'")
            task_id = unique_id(seen, raw_id, where)
            files = []
            if out_dir is not None:
                csv_path = write_table_csv(table, out_dir / f"{_safe_name(task_id)}.csv")
                files.append(DataFile(path=str(csv_path), kind="csv", name="table.csv"))
            yield Task(
                id=task_id,
                question=question,
                files=files,
                answer=str(answer),
                answer_kind="tablebench",
                source=self.name,
                category=qtype,
                extra={"qtype": qtype, "qsubtype": qsub, "table": table},
            )

    def score(self, task: Task, prediction: str | None) -> ItemScore:
        if task.answer is None:
            raise ValueError(f"tablebench task {task.id!r}: no reference answer")
        qtype, qsub = str(task.extra.get("qtype", task.category or "")), str(task.extra.get("qsubtype", ""))
        metric = metric_for(qtype, qsub)
        if prediction is None:
            return missing_prediction(metric)
        reference = str(task.answer)
        if self.rule.name == OFFICIAL.name:
            score, parsed = official_score(prediction, reference, metric)
            parse_ok = parsed != ""
            why = "" if parse_ok else " (no 'Final Answer: ' line: the official parser reads an empty answer)"
        else:
            parsed = parse_final_answer(prediction)
            parse_ok = parsed != ""
            why = ""
            if metric == "EM":
                score = em_score(parsed, reference)
            elif metric == "EM_with_error_10":
                score = em_with_tolerance(parsed, reference, 10.0)
            else:
                score = rouge_l(normalize_text(parsed), normalize_text(reference))
        score = min(1.0, max(0.0, score))
        correct = score >= 1.0 - 1e-9
        reason = f"{metric} {score:.3f} against {reference[:60]!r}{why}"
        return ItemScore(score, correct, parsed, reason, metric, {"parse_ok": parse_ok})

    def totals(self, items: Sequence[tuple[Task, ItemScore]]) -> dict[str, float]:
        """Overall mean, each category's metric (Data Analysis: the official mix), each subtype's, parse@1.

        ``parse@1`` is the official share of answers the parser could read (a non-empty answer).
        """
        out = super().totals(items)
        if items:
            out["parse@1"] = sum(bool(s.parts.get("parse_ok")) for _, s in items) / len(items)
        groups: dict[str, list[float]] = {}
        for task, s in items:
            qtype = str(task.extra.get("qtype", task.category))
            groups.setdefault(qtype, []).append(s.score)
            groups.setdefault(f"{qtype}/{task.extra.get('qsubtype')}", []).append(s.score)
        for key in sorted(groups):
            out[key] = sum(groups[key]) / len(groups[key])
        return out

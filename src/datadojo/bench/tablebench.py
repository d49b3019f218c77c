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

**Scoring** (TableBench ``eval_tablebench_script.py``, ``metrics/custom_em_metric.py``; summarised in
``../shared/data/README.md``):

* the answer is what follows ``Final Answer:`` on its line when the prediction has that marker (the
  official parser); otherwise the whole prediction, since DataDojo's agents already isolate the answer in
  ``<answer>`` (the official script would score such an answer as empty);
* Fact Checking, Numerical Reasoning and the *ImpactAnalysis* subtype: **EM**; *CorrelationAnalysis*,
  *TrendForecasting* and *StatisticalAnalysis*: **EM_with_error_10**; the other Data Analysis subtypes:
  **ROUGE-L** (F1, after the official normalisation);
* EM splits reference and prediction at commas and gives each reference element 1/k of the credit:
  a number (``^-?\d+(\.\d+)?%?$``) is compared after rounding both sides to the reference's precision
  (the fewest decimals among the reference's numbers; percentages as fractions to 4 places), anything
  else by normalised string equality. EM_with_error_10 accepts a number within 10% of the reference.

One deliberate reading of the official code: its ``normalize_answer`` runs *before* the comma split and
strips every punctuation mark, decimal points and minus signs included, which would make the precision
rule dead code ("51.44" and "51.440" differ, "-0.03" equals "0.03"). Here the split comes first, numbers
keep their form and only non-numeric elements are normalised, which is the rule the README states.
Thousands separators (``1,234``) are removed first so they are not read as list separators.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from datadojo.bench.base import (
    Benchmark,
    BenchmarkDefaults,
    BenchmarkError,
    ItemScore,
    missing_prediction,
    unique_id,
)
from datadojo.jsonl import JsonlError, iter_jsonl
from datadojo.reward.text import normalize_text, rouge_l
from datadojo.types import DataFile, Task

__all__ = [
    "TableBench",
    "em_score",
    "em_with_tolerance",
    "metric_for",
    "parse_final_answer",
    "write_table_csv",
]

ERROR_10_SUBTYPES = frozenset({"CorrelationAnalysis", "TrendForecasting", "StatisticalAnalysis"})
EM_DATA_ANALYSIS_SUBTYPES = frozenset({"ImpactAnalysis"})

_FINAL = re.compile(r"Final Answer: (.+)")
_IS_NUMBER = re.compile(r"^-?\d+(\.\d+)?%?$")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def parse_final_answer(prediction: str) -> str:
    """The text after ``Final Answer:`` on its line (official regex), else the stripped prediction."""
    m = _FINAL.search(prediction)
    return m.group(1).strip() if m else prediction.strip()


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
    return [x.strip() for x in _THOUSANDS.sub("", text).split(",")]


def _text_equal(p: str, r: str) -> bool:
    return normalize_text(p) == normalize_text(r)


def em_score(prediction: str, reference: str) -> float:
    """TableBench EM of one answer (module docstring): per-element credit, numbers at reference precision."""
    refs, preds = _elements(reference), _elements(prediction)
    plain = [r for r in refs if _IS_NUMBER.match(r) and not r.endswith("%")]
    places = min((len(r.split(".", 1)[1]) if "." in r else 0) for r in plain) if plain else 0
    credit = 0.0
    for i, r in enumerate(refs):
        if i >= len(preds):
            break
        p = preds[i]
        if _IS_NUMBER.match(r):
            try:
                if r.endswith("%"):
                    ok = _to_decimal(r) == _to_decimal(p)
                else:
                    ok = _round(_to_decimal(r), places) == _round(_to_decimal(p), places)
            except (InvalidOperation, ValueError):
                ok = False
        else:
            ok = _text_equal(p, r)
        credit += ok / len(refs)
    return credit


def em_with_tolerance(prediction: str, reference: str, error_pct: float = 10.0) -> float:
    """TableBench EM_with_error_N: like EM, but a number within ``error_pct`` % of the reference counts."""
    refs, preds = _elements(reference), _elements(prediction)
    credit = 0.0
    for i, r in enumerate(refs):
        if i >= len(preds):
            break
        p = preds[i]
        if _IS_NUMBER.match(r):
            try:
                vr, vp = _to_decimal(r), _to_decimal(p)
            except (InvalidOperation, ValueError):
                continue
            ok = vp == vr if vr == 0 else abs(vr - vp) / abs(vr) <= Decimal(str(error_pct)) / 100
        else:
            ok = _text_equal(p, r)
        credit += ok / len(refs)
    return credit


def write_table_csv(table: dict[str, Any], target: Path) -> Path:
    """Write a ``{"columns", "data"}`` table as CSV via a temporary file and a rename; skip if unchanged."""
    import pandas as pd

    frame = pd.DataFrame(table["data"], columns=table["columns"])
    text = frame.to_csv(index=False)
    if target.exists() and target.read_text(encoding="utf-8") == text:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _safe_name(task_id: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "_", task_id)[:80]
    return clean if clean == task_id else f"{clean}-{hashlib.sha1(task_id.encode()).hexdigest()[:8]}"


class TableBench(Benchmark):
    name = "tablebench"
    description = "TableBench: fact checking, numerical reasoning and data analysis over one table"
    metric = "EM / EM_with_error_10 / ROUGE-L by subtype"
    defaults = BenchmarkDefaults(
        max_turns=10,
        language="python",
        answer_format=(
            "Give only the final answer: a number, an entity name, or several of them separated by commas; "
            "for analysis questions, a short sentence."
        ),
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
        if options:
            raise TypeError(f"tablebench: unknown option(s) {', '.join(sorted(options))}")
        p = Path(path)
        src = self._require(p / "TableBench.jsonl" if p.is_dir() else p, "TableBench.jsonl")
        out_dir = Path(tables_dir) if tables_dir is not None else None
        seen: dict[str, int] = {}
        try:
            for lineno, rec in iter_jsonl(src):
                where = f"{src}:{lineno}"
                if not isinstance(rec, dict):
                    raise BenchmarkError(f"{where}: expected a JSON object")
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
        except JsonlError as exc:
            raise BenchmarkError(str(exc)) from exc

    def score(self, task: Task, prediction: str | None) -> ItemScore:
        if task.answer is None:
            raise ValueError(f"tablebench task {task.id!r}: no reference answer")
        qtype, qsub = str(task.extra.get("qtype", task.category or "")), str(task.extra.get("qsubtype", ""))
        metric = metric_for(qtype, qsub)
        if prediction is None:
            return missing_prediction(metric)
        parsed = parse_final_answer(prediction)
        reference = str(task.answer)
        if metric == "EM":
            score = em_score(parsed, reference)
        elif metric == "EM_with_error_10":
            score = em_with_tolerance(parsed, reference, 10.0)
        else:
            score = rouge_l(normalize_text(parsed), normalize_text(reference))
        score = min(1.0, max(0.0, score))
        correct = score >= 1.0 - 1e-9
        return ItemScore(score, correct, parsed, f"{metric} {score:.3f} against {reference[:60]!r}", metric)

    def totals(self, items: Sequence[tuple[Task, ItemScore]]) -> dict[str, float]:
        """Overall mean, each category's metric (Data Analysis: the official mix), and each subtype's."""
        out = super().totals(items)
        groups: dict[str, list[float]] = {}
        for task, s in items:
            qtype = str(task.extra.get("qtype", task.category))
            groups.setdefault(qtype, []).append(s.score)
            groups.setdefault(f"{qtype}/{task.extra.get('qsubtype')}", []).append(s.score)
        for key in sorted(groups):
            out[key] = sum(groups[key]) / len(groups[key])
        return out

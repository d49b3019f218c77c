"""DataBench (SemEval-2025 task 8): questions over real tables, five answer types (Osés Grijalba et al., 2024).

**Layout** (as in ``../shared/data/databench``): ``questions.jsonl`` (one record per line: ``question``,
``dataset``, ``answer``, ``answer_lite``, ``type``; assembled from the released ``test_qa.csv``,
``answers.txt``, ``answers_lite.txt`` and ``semantics.txt``) and one folder per dataset holding
``all.parquet`` (the full table) and ``sample.parquet`` (the 20-row "lite" table). ``path`` is that
folder or the questions file.

**Tasks**: ``id`` is ``<dataset>/<k>``, the k-th question (from 0) on that dataset in file order, which
stays stable when only some datasets are present; ``answer_kind`` ``databench:<type>``; ``category`` the
answer type. ``lite=True`` gives the DataBench-lite variant (``sample.parquet`` and ``answer_lite``).

**Scoring** (``databench_eval``'s ``Evaluator.default_compare``, summarized in the README), by type:
two missing values (``None``, ``nan``, empty) are equal, one missing value is wrong; otherwise

* ``boolean``: true/yes/y vs false/no/n, case-insensitive, brackets and quotes stripped;
* ``category``: equal after stripping brackets, quotes and spaces, or both parse as the same date;
* ``number``: digits, ``.`` and ``-`` are kept and both sides compared truncated to 2 decimals
  (``math.trunc(x * 100)``, float arithmetic as in the reference);
* ``list[category]``: split at commas after stripping brackets, same length and same set (as dates when
  every item parses as one);
* ``list[number]``: each item cleaned as a number and truncated to 2 decimals; same length, same set.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from datadojo.bench.base import (
    Benchmark,
    BenchmarkDefaults,
    BenchmarkError,
    ItemScore,
    missing_prediction,
)
from datadojo.bench.base import ScoringRule as _Rule
from datadojo.types import DataFile, Task

__all__ = ["ANSWER_TYPES", "DataBench", "databench_compare"]

ANSWER_TYPES: tuple[str, ...] = ("boolean", "category", "number", "list[category]", "list[number]")
_STRIP = "[]'\" "
_NULLS = (None, "nan", "", " ", "np.nan", "None")
_TRUE = ("true", "yes", "y")
_FALSE = ("false", "no", "n")


def _is_null(s: str) -> bool:
    return s in _NULLS


def _date(text: str) -> Any:
    import pandas as pd

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pd.to_datetime(text).date()


def _num(text: str) -> float:
    return float("".join(ch for ch in text if ch.isdigit() or ch in ".-"))


def databench_compare(value: Any, truth: Any, semantic: str) -> bool:
    """The official DataBench comparison of a response ``value`` with the gold ``truth`` (module docstring)."""
    semantic = semantic.strip()
    v, t = str(value).strip(_STRIP), str(truth).strip(_STRIP)
    if _is_null(v) and _is_null(t):
        return True
    if _is_null(v) or _is_null(t):
        return False
    if semantic == "boolean":
        vl, tl = v.lower(), t.lower()
        return (vl in _TRUE and tl in _TRUE) or (vl in _FALSE and tl in _FALSE)
    if semantic == "category":
        if v == t:
            return True
        try:
            return bool(_date(v) == _date(t))
        except (ValueError, TypeError, OverflowError):
            return False
    if semantic == "number":
        try:
            return math.trunc(_num(str(value)) * 100) == math.trunc(_num(str(truth)) * 100)
        except (ValueError, OverflowError):
            return False
    if semantic == "list[category]":
        vs = ["" if _is_null(x := i.strip(_STRIP)) else x for i in str(value).strip("[]").split(",")]
        ts = ["" if _is_null(x := i.strip(_STRIP)) else x for i in str(truth).strip("[]").split(",")]
        if len(vs) != len(ts):
            return False
        try:
            return {_date(i) for i in vs} == {_date(i) for i in ts}
        except (ValueError, TypeError, OverflowError):
            return set(vs) == set(ts)
    if semantic == "list[number]":
        try:
            vn = [int(_num(i.strip()) * 100) / 100 for i in str(value).strip("[]").split(",") if i.strip()]
            tn = [int(_num(i.strip()) * 100) / 100 for i in str(truth).strip("[]").split(",") if i.strip()]
        except (ValueError, OverflowError):
            return False
        return len(vn) == len(tn) and set(vn) == set(tn)
    raise ValueError(f"unknown DataBench answer type {semantic!r}; known: {', '.join(ANSWER_TYPES)}")


class DataBench(Benchmark):
    name = "databench"
    description = (
        "DataBench (SemEval-2025 task 8): questions over real tables; boolean/category/number/list answers"
    )
    metric = "accuracy"
    layout = (
        "a DataBench folder holding questions.jsonl and <dataset>/all.parquet (and sample.parquet), "
        "or its questions.jsonl"
    )
    rules = (
        _Rule(
            "official",
            "SemEval-2025 Task 8 databench_eval: comparison by answer type (boolean, category, number "
            "truncated to 2 decimals, lists as sets)",
            "rule-databench-official",
        ),
    )
    no_source = (
        "DataBench's test answers are released as test_qa.csv + answers.txt + semantics.txt, not in the "
        "questions.jsonl layout DataDojo reads; see docs/evaluation.md"
    )
    defaults = BenchmarkDefaults(
        max_turns=10,
        language="python",
        answer_format=(
            "Give only the answer: True/False, a single value, a number, or a Python-style list such as "
            "['a', 'b'] or [1, 2]."
        ),
    )

    def load(
        self, path: str | Path, *, require_files: bool = True, lite: bool = False, **options: Any
    ) -> Iterator[Task]:
        """DataBench tasks (module docstring); ``lite`` selects ``sample.parquet`` and ``answer_lite``."""
        self._no_options(options)
        src = self._file_or_folder(path, "questions.jsonl")
        root = src.parent
        per_dataset: dict[str, int] = {}
        for lineno, rec in self.records(src):
            where = f"{src}:{lineno}"
            try:
                dataset, question, semantic = str(rec["dataset"]), str(rec["question"]), str(rec["type"])
                answer = rec["answer_lite" if lite else "answer"]
            except KeyError as exc:
                raise BenchmarkError(f"{where}: missing field {exc}") from exc
            if semantic.strip() not in ANSWER_TYPES:
                raise BenchmarkError(f"{where}: unknown answer type {semantic!r}")
            k = per_dataset.get(dataset, 0)
            per_dataset[dataset] = k + 1
            table = root / dataset / ("sample.parquet" if lite else "all.parquet")
            if require_files and not table.exists():
                raise BenchmarkError(f"{where}: table of dataset {dataset!r} not found: {table}")
            yield Task(
                id=f"{dataset}/{k}",
                question=question,
                files=[DataFile(path=str(table), kind="parquet", name=f"{dataset}.parquet")],
                answer=answer,
                answer_kind=f"databench:{semantic.strip()}",
                source=self.name,
                category=semantic.strip(),
                extra={"dataset": dataset, "type": semantic.strip(), "lite": lite},
            )

    def score(self, task: Task, prediction: str | None) -> ItemScore:
        semantic = str(task.extra.get("type") or (task.answer_kind or "").removeprefix("databench:"))
        if prediction is None:
            return missing_prediction(semantic)
        ok = databench_compare(prediction.strip(), task.answer, semantic)
        reason = f"{semantic}: {prediction.strip()[:50]!r} {'matches' if ok else 'does not match'} {str(task.answer)[:50]!r}"
        return ItemScore(1.0 if ok else 0.0, ok, prediction.strip(), reason, semantic)

"""QRData: statistical and causal reasoning over CSV data (Liu et al., 2024; DataMind App. G.3).

**Layout** (the official ``benchmark/`` folder): ``QRData.json``, a JSON list of records with
``data_description``, ``question``, ``answer``, ``data_files`` (names of CSV files in ``data/``) and
``meta_data`` (``question_type`` ``numerical`` or ``multiple_choice``, ``multiple_choices``,
``reference``, ``keywords``). ``path`` is that folder or the JSON file.

**Tasks**: ``id`` ``qrdata-<i>`` (the i-th record); ``description`` is the data description (the
metadata text *d*); ``answer_kind`` ``qrdata:numerical`` or ``qrdata:multiple_choice``; ``category`` the
question type; ``extra`` keeps the choices, reference and keywords.

**Scoring** (QRData ``benchmark/eval.py``): both sides are lower-cased.

* *numerical*: the reference is a float (a trailing ``%`` divides by 100); the first number in the
  prediction (``-?\\d+\\.?\\d*%?``, same percent rule) is correct when it lies strictly inside
  ``(gold·0.97, gold·1.03)`` (bounds swapped for negative references; a reference of 0 can never be
  matched, as in the original);
* *multiple choice*: the prediction must start with the reference (``gold == pred[:len(gold)]``).

The only change from the original: surrounding whitespace of the prediction is stripped first (answers
extracted from ``<answer>`` tags often keep a leading newline, which the original would count wrong).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from datadojo.bench.base import Benchmark, BenchmarkDefaults, BenchmarkError, ItemScore, missing_prediction
from datadojo.bench.base import ScoringRule as _Rule
from datadojo.bench.download import BenchSource, RemoteFile, listed_files
from datadojo.types import DataFile, Task

__all__ = ["ERROR_SCALE", "QRData", "qrdata_correct"]

#: QRData's relative tolerance for numerical answers (``error_scale = 0.03``).
ERROR_SCALE = 0.03
_FIRST_NUMBER = re.compile(r"-?\d+\.?\d*%?")


def _as_float(text: str) -> float:
    return float(text[:-1]) / 100 if text.endswith("%") else float(text)


def qrdata_correct(prediction: str, gold: str, question_type: str) -> bool:
    """The official QRData rule (module docstring) for one prediction."""
    pred, ref = prediction.strip().lower(), str(gold).lower()
    if question_type == "numerical":
        gold_f = _as_float(ref.strip())
        m = _FIRST_NUMBER.search(pred)
        if m is None:
            return False
        try:
            pred_f = _as_float(m.group())
        except ValueError:
            return False
        lo = min(gold_f * (1 - ERROR_SCALE), gold_f * (1 + ERROR_SCALE))
        hi = max(gold_f * (1 - ERROR_SCALE), gold_f * (1 + ERROR_SCALE))
        return lo < pred_f < hi
    if question_type == "multiple_choice":
        return ref == pred[: len(ref)]
    raise ValueError(f"unknown QRData question type {question_type!r} (numerical or multiple_choice)")


class QRData(Benchmark):
    name = "qrdata"
    description = "QRData: statistical and causal reasoning questions over CSV files"
    layout = "QRData's benchmark/ folder holding QRData.json and data/*.csv, or its QRData.json"
    metric = "accuracy"
    rules = (
        _Rule(
            "official",
            "QRData's evaluation: the first number strictly within ±3 % of the reference; multiple choice by the chosen option",
            "rule-qrdata-official",
        ),
    )
    defaults = BenchmarkDefaults(
        max_turns=10,
        language="python",
        answer_format="Give only the final answer: the number, or the chosen option exactly as written.",
    )
    # the benchmark folder of QRData's repository: QRData.json and the data files it names
    source = BenchSource(
        name="qrdata",
        base_url="https://raw.githubusercontent.com/xxxiaol/QRData/main/benchmark",
        files=(RemoteFile("QRData.json"),),
        discover=listed_files("QRData.json", "data_files", "data/"),
        homepage="https://github.com/xxxiaol/QRData",
        licence="see source",
        note="QRData.json and the CSV files it names",
    )

    def load(self, path: str | Path, *, require_files: bool = True, **options: Any) -> Iterator[Task]:
        """QRData tasks from ``QRData.json`` and its ``data/`` folder (module docstring)."""
        self._no_options(options)
        src = self._file_or_folder(path, "QRData.json")
        data_dir = src.parent / "data"
        try:
            records = json.loads(src.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:  # ValueError: JSONDecodeError and UnicodeDecodeError
            raise self.layout_error(f"{src}: cannot read JSON ({exc})") from exc
        if not isinstance(records, list):
            raise self.layout_error(f"{src}: expected a JSON list of records")
        for i, rec in enumerate(records):
            where = f"{src} record {i}"
            if not isinstance(rec, dict):
                raise BenchmarkError(f"{where}: expected an object")
            try:
                question, answer, meta = str(rec["question"]), str(rec["answer"]), rec["meta_data"]
                qtype = str(meta["question_type"])
            except (KeyError, TypeError) as exc:
                raise BenchmarkError(f"{where}: missing field {exc}") from exc
            if qtype not in ("numerical", "multiple_choice"):
                raise BenchmarkError(f"{where}: unknown question_type {qtype!r}")
            if qtype == "numerical":
                try:
                    _as_float(answer.lower().strip())
                except ValueError as exc:
                    raise BenchmarkError(f"{where}: numerical answer {answer!r} is not a number") from exc
            files = []
            for name in rec.get("data_files") or []:
                f = data_dir / str(name)
                if require_files and not f.exists():
                    raise BenchmarkError(f"{where}: data file {name} not found in {data_dir}")
                files.append(DataFile(path=str(f), kind="dir" if f.is_dir() else "csv"))
            yield Task(
                id=f"qrdata-{i}",
                question=question,
                description=rec.get("data_description"),
                files=files,
                answer=answer,
                answer_kind=f"qrdata:{qtype}",
                source=self.name,
                category=qtype,
                extra={
                    "question_type": qtype,
                    "multiple_choices": meta.get("multiple_choices"),
                    "reference": meta.get("reference"),
                    "keywords": meta.get("keywords"),
                },
            )

    def score(self, task: Task, prediction: str | None) -> ItemScore:
        qtype = str(task.extra.get("question_type") or (task.answer_kind or "").removeprefix("qrdata:"))
        if task.answer is None:
            raise ValueError(f"qrdata task {task.id!r}: no reference answer")
        if prediction is None:
            return missing_prediction(qtype)
        ok = qrdata_correct(prediction, str(task.answer), qtype)
        rule = "within 3%" if qtype == "numerical" else "starts with the choice"
        reason = f"{'correct' if ok else 'wrong'} ({qtype}, {rule} {task.answer!r})"
        return ItemScore(1.0 if ok else 0.0, ok, prediction.strip(), reason, qtype)

"""InfiAgent-DABench: closed-form CSV questions answered as ``@name[value]`` (Hu et al., 2024).

**Layout** (the official ``examples/DA-Agent/data``): ``da-dev-questions.jsonl`` (``id``, ``question``,
``constraints``, ``format``, ``file_name``, ``level``, ``concepts``), ``da-dev-labels.jsonl`` (``id``,
``common_answers`` = list of ``[name, value]``) and the CSV files in ``da-dev-tables/``. ``path`` is that
folder, or the questions file (the labels file is its sibling with ``questions`` → ``labels``).

**Tasks**: ``id`` is the question id as text; the question shown to the agent is the question, its
constraints and its answer format (as InfiAgent's prompt gives them); ``answer`` is ``{name: value}``,
``answer_kind`` ``dabench``; ``category`` the first concept, ``difficulty`` the level; ``extra`` keeps
``constraints``, ``format``, ``concepts`` and ``file_name``.

**Scoring** (InfiAgent ``eval_closed_form.py``, summarized in ``../shared/data/README.md``): every
``@name[value]`` is extracted from the response with the regex ``@(\\w+)\\[(.*?)\\]`` (a repeated name:
the last one counts); a sub-answer is correct when the extracted string equals the label or both parse as
floats less than 1e-6 apart; a question is correct when all its sub-answers are. Totals are the official
three accuracies: by question (ABQ, the headline figure), proportional by sub-question (PASQ) and by
sub-question (UASQ), plus the by-question accuracy per concept (a question counts under each concept).

**Denominators**: DataDojo divides by every task, so a question left unanswered counts as wrong. The
official script silently drops a question whose response is missing or empty from *every* denominator
(its ``evaluate_responses`` skips it), which raises the figure when a model fails to answer. Both are
reported: ``accuracy`` etc. over all tasks, and ``accuracy (official denominator)`` etc. over the
answered ones (a prediction that is neither missing nor ``""``), the figure comparable with published
DABench numbers. ``answered`` is the share of tasks with such a prediction.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
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
from datadojo.bench.download import BenchSource, RemoteFile, listed_files
from datadojo.types import DataFile, Task

__all__ = ["OFFICIAL", "OFFICIAL_DENOMINATOR", "DABench", "extract_answers", "gold_response", "is_equal"]

OFFICIAL = _Rule(
    "official",
    "InfiAgent eval_closed_form.py: @name[value] answers, equal strings or floats within 1e-6; "
    "accuracy over all tasks, plus 'accuracy (official denominator)' over answered tasks only",
    "rule-dabench-official",
)
#: Suffix of the totals computed over answered questions only, as the official script divides.
OFFICIAL_DENOMINATOR = " (official denominator)"

_ANSWER = re.compile(r"@(\w+)\[(.*?)\]")


def extract_answers(response: str) -> dict[str, str]:
    """``{name: value}`` for every ``@name[value]`` in ``response`` (the official regex; last repeat wins)."""
    return dict(_ANSWER.findall(response))


def is_equal(response: str | None, label: str) -> bool:
    """The official sub-answer rule: equal strings, or both floats with ``|a - b| < 1e-6``."""
    if response == label:
        return True
    if response is None:
        return False
    try:
        return abs(float(response) - float(label)) < 1e-6
    except (TypeError, ValueError, OverflowError):
        return False


class DABench(Benchmark):
    name = "dabench"
    description = "InfiAgent-DABench: closed-form questions over CSV files, answers as @name[value]"
    layout = (
        "DABench's data folder holding da-dev-questions.jsonl, da-dev-labels.jsonl and da-dev-tables/*.csv, "
        "or its questions file"
    )
    metric = "accuracy by question"
    rules = (OFFICIAL,)
    defaults = BenchmarkDefaults(
        max_turns=10,
        language="python",
        answer_format="Give every requested value as @name[value], exactly in the format the question states.",
    )
    # the dev split in InfiAgent's repository: questions, labels, and the CSV tables the questions name
    source = BenchSource(
        name="dabench",
        base_url="https://raw.githubusercontent.com/InfiAgent/InfiAgent/main/examples/DA-Agent/data",
        files=(RemoteFile("da-dev-questions.jsonl"), RemoteFile("da-dev-labels.jsonl")),
        discover=listed_files("da-dev-questions.jsonl", "file_name", "da-dev-tables/"),
        homepage="https://github.com/InfiAgent/InfiAgent/tree/main/examples/DA-Agent",
        licence="see source",
        note="questions, labels, and the CSV tables the questions name",
    )

    def _paths(self, path: Path) -> tuple[Path, Path, Path]:
        if path.is_file():
            questions = path
            labels = path.with_name(path.name.replace("questions", "labels"))
            root = path.parent
        else:
            root = path
            questions, labels = root / "da-dev-questions.jsonl", root / "da-dev-labels.jsonl"
        return self._text_file(self._require(questions, "questions file")), labels, root / "da-dev-tables"

    def load(self, path: str | Path, *, require_files: bool = True, **options: Any) -> Iterator[Task]:
        """DABench tasks from the official layout (module docstring); labels are optional (test split)."""
        self._no_options(options)
        questions, labels_path, tables = self._paths(Path(path))
        labels: dict[str, dict[str, str]] = {}
        if labels_path.exists():
            for lineno, rec in self.records(self._text_file(labels_path)):
                try:
                    answers = {str(name): str(value) for name, value in rec["common_answers"]}
                except (KeyError, TypeError, ValueError) as exc:
                    raise BenchmarkError(
                        f"{labels_path}:{lineno}: 'common_answers' must be a list of [name, value] ({exc})"
                    ) from exc
                labels[str(rec.get("id"))] = answers
        seen: set[str] = set()
        for lineno, rec in self.records(questions):
            where = f"{questions}:{lineno}"
            try:
                qid, question, file_name = str(rec["id"]), str(rec["question"]), str(rec["file_name"])
            except KeyError as exc:
                raise BenchmarkError(f"{where}: missing field {exc}") from exc
            if qid in seen:
                raise BenchmarkError(f"{where}: duplicate question id {qid}")
            seen.add(qid)
            data = tables / file_name
            if require_files and not data.exists():
                raise BenchmarkError(f"{where}: data file {file_name} not found in {tables}")
            parts = [question]
            if rec.get("constraints"):
                parts.append(f"Constraints: {rec['constraints']}")
            if rec.get("format"):
                parts.append(f"Format: {rec['format']}")
            concepts = [str(c) for c in rec.get("concepts") or []]
            yield Task(
                id=qid,
                question="\n\n".join(parts),
                files=[DataFile(path=str(data), kind="csv")],
                answer=labels.get(qid),
                answer_kind="dabench",
                source=self.name,
                category=concepts[0] if concepts else None,
                difficulty=rec.get("level"),
                extra={
                    "constraints": rec.get("constraints"),
                    "format": rec.get("format"),
                    "concepts": concepts,
                    "file_name": file_name,
                },
            )

    def score(self, task: Task, prediction: str | None) -> ItemScore:
        gold = task.answer
        if not isinstance(gold, dict) or not gold:
            raise ValueError(f"dabench task {task.id!r}: no labels ({{name: value}}) to score against")
        if prediction is None:
            none = missing_prediction(self.metric)
            parts = {"sub": dict.fromkeys(gold, False), "answered": False}
            return ItemScore(0.0, False, None, none.reason, self.metric, parts)
        found = extract_answers(prediction)
        sub = {name: is_equal(found.get(name), str(label)) for name, label in gold.items()}
        n_ok = sum(sub.values())
        parsed = " ".join(f"@{k}[{v}]" for k, v in found.items()) or None
        if n_ok == len(sub):
            reason = f"all {len(sub)} sub-answer(s) correct"
        else:
            wrong = [
                f"{k}: {'missing' if k not in found else repr(found[k])} vs {gold[k]!r}"
                for k, ok in sub.items()
                if not ok
            ]
            reason = f"{len(wrong)} of {len(sub)} sub-answer(s) wrong: " + "; ".join(wrong[:3])
        ok = n_ok == len(sub)
        answered = prediction != ""
        if not answered:
            reason = "empty answer (the official script leaves it out of its denominators)"
        return ItemScore(
            1.0 if ok else 0.0, ok, parsed, reason, self.metric, {"sub": sub, "answered": answered}
        )

    def totals(self, items: Sequence[tuple[Task, ItemScore]]) -> dict[str, float]:
        """ABQ, PASQ and UASQ over all tasks and over answered tasks (module docstring), ABQ per concept."""
        if not items:
            return {"accuracy": 0.0}
        subs = [s.parts.get("sub", {}) for _, s in items]
        out = _accuracies(subs)
        answered = [sub for (_, s), sub in zip(items, subs, strict=True) if s.parts.get("answered", True)]
        out.update({k + OFFICIAL_DENOMINATOR: v for k, v in _accuracies(answered).items()})
        out["answered"] = len(answered) / len(items)
        per: dict[str, list[bool]] = {}
        for (task, _), s in zip(items, subs, strict=True):
            for concept in task.extra.get("concepts") or []:
                per.setdefault(concept, []).append(all(s.values()))
        for concept in sorted(per):
            out[f"concept:{concept}"] = sum(per[concept]) / len(per[concept])
        return out


def _accuracies(subs: Sequence[dict[str, bool]]) -> dict[str, float]:
    """InfiAgent's three accuracies over these questions' sub-answer verdicts (0.0 when there are none)."""
    if not subs:
        return dict.fromkeys(
            ("accuracy", "accuracy_proportional_by_sub_question", "accuracy_by_sub_question"), 0.0
        )
    n_sub = sum(len(s) for s in subs)
    return {
        "accuracy": sum(all(s.values()) for s in subs) / len(subs),
        "accuracy_proportional_by_sub_question": sum(sum(s.values()) / len(s) for s in subs if s) / len(subs),
        "accuracy_by_sub_question": sum(sum(s.values()) for s in subs) / n_sub if n_sub else 0.0,
    }


def gold_response(task: Task) -> str:
    """A response carrying the task's labels in the official format (for conformance checks and oracles)."""
    if not isinstance(task.answer, dict):
        raise ValueError(f"dabench task {task.id!r} has no labels")
    return " ".join(f"@{k}[{v}]" for k, v in task.answer.items())

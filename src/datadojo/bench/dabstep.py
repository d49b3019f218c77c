"""DABstep: multi-step questions over payments data and manuals, scored as the leaderboard scores them.

DABstep (Adyen and Hugging Face, 2025; CC-BY-4.0) has 450 questions whose answers are withheld (the
leaderboard scores submissions) and a dev split of 10 with answers. Every question is about the same
seven context files.

**Layout** (the Hugging Face dataset ``adyen/DABstep``): ``data/tasks/dev.jsonl`` and
``data/tasks/all.jsonl`` (records with ``task_id``, ``question``, ``guidelines``, ``level``, ``answer``;
``answer`` is empty in ``all.jsonl``) and ``data/context/`` holding ``payments.csv``, ``fees.json``,
``manual.md``, ``merchant_data.json``, ``acquirer_countries.csv``, ``merchant_category_codes.csv`` and
``payments-readme.md``. ``path`` is the dataset folder, its ``data`` folder, or a tasks file (its
context is then ``../context``). The loader option ``split`` picks ``dev`` (default) or ``test``
(``all.jsonl``, the leaderboard's 450 questions).

**Tasks**: ``id`` is ``task_id`` as text; the question is the question as released, and its
``guidelines`` (the answer format the leaderboard expects) become the task's answer format
(``extra["answer_format"]``, which the agent's system prompt shows); the one data file is the
``context`` folder; ``category`` and ``difficulty`` are the level (``easy`` / ``hard``); ``answer`` is
the released answer, ``None`` when withheld (``extra["hidden"]`` is then true).

**Scoring** (rule ``official``): :func:`question_scorer`, the rules of the leaderboard's ``scorer.py``
(``dabstep_benchmark/evaluation/scorer.py`` in the Space ``adyen/DABstep``), restated here from its
behaviour; ``docs/evaluation.md`` ("DABstep, official") lists them and every deviation. A withheld
answer cannot be scored here: such an item scores 0 with ``parts["hidden"]`` and ``datadojo eval`` writes
the leaderboard's submission file (:meth:`DABstep.submission_record`) instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

from datadojo.bench.base import Benchmark, BenchmarkDefaults, BenchmarkError, ItemScore, missing_prediction
from datadojo.bench.base import ScoringRule as _Rule
from datadojo.bench.download import BenchSource, RemoteFile
from datadojo.types import DataFile, Task

__all__ = [
    "CONTEXT_FILES",
    "DABstep",
    "compare_lists",
    "compare_numbers",
    "compare_strings",
    "first_number",
    "question_scorer",
]

#: The seven context files every DABstep question is about (``data/context/`` of the dataset).
CONTEXT_FILES: tuple[str, ...] = (
    "payments.csv",
    "fees.json",
    "manual.md",
    "merchant_data.json",
    "acquirer_countries.csv",
    "merchant_category_codes.csv",
    "payments-readme.md",
)

#: Records file of each split.
SPLITS: dict[str, str] = {"dev": "dev.jsonl", "test": "all.jsonl"}

OFFICIAL = _Rule(
    "official",
    "the DABstep leaderboard's scorer.py question_scorer: lower-cased and stripped; numbers (first number in "
    "the text, sign and % ignored) equal after rounding to the coarser precision or within 1e-4; lists "
    "sorted and compared item by item; text equal without punctuation, one-word subset, or >0.95 similar",
    "rule-dabstep-official",
)

# A number written with thousands separators (1,234.5), or any decimal (0.99, 0,99); a plain integer is not.
_COMMA_NUMBER = re.compile(r"\$?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+[.,]\d+)")
_NUMBER = re.compile(r"(\d*\.\d+|\d+\.?\d*)%?")
_LIST_SEP = re.compile(r"[,;]")


def _is_comma_number(text: str) -> bool:
    return _COMMA_NUMBER.fullmatch(text.strip()) is not None


def first_number(text: str) -> float | None:
    """The first unsigned number in ``text`` after removing ``,`` and ``$`` (``None`` when there is none).

    As the official ``extract_numeric``: a minus sign is not part of the number (``-0.94`` → 0.94) and a
    ``%`` is ignored (``12%`` → 12.0; the released answers are percentages, not fractions).
    """
    match = _NUMBER.search(text.replace(",", "").replace("$", ""))
    return float(match.group(1)) if match else None


def _decimals(x: float) -> int:
    """Digits after the point in ``str(x)`` (``12.0`` → 1; ``1e-05`` → 0), as the official code counts them."""
    s = str(x)
    return len(s.split(".")[-1]) if "." in s else 0


def compare_numbers(a: float, b: float) -> bool:
    """The official ``compare_numeric``: equal; or, both below 1, within 1e-4 (absolute or relative);
    or equal once both are rounded to the fewer decimals of the two; or within 1e-4 relative/absolute.

    Why it matters: an answer given with fewer decimals than the reference is accepted when it is the
    reference rounded (``12.3`` for ``12.34``), and one within 0.01 % of a large reference too.
    """
    if a == b:
        return True
    if a < 1 and b < 1:
        return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-4)
    places = min(_decimals(a), _decimals(b))
    if round(a, places) == round(b, places):
        return True
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-4)


def compare_strings(a: str, b: str) -> bool:
    """The official ``compare_strings``: equal once every non-word character is removed; else, when either
    side is one word, the word set of one contains the other's; else a ``difflib`` ratio above 0.95."""
    if re.sub(r"[^\w]", "", a) == re.sub(r"[^\w]", "", b):
        return True
    words_a = re.findall(r"\b\w+\b", a.lower())
    words_b = re.findall(r"\b\w+\b", b.lower())
    if words_a and words_b and (len(words_a) == 1 or len(words_b) == 1):
        return set(words_a) <= set(words_b) or set(words_b) <= set(words_a)
    return SequenceMatcher(None, a, b).ratio() > 0.95


def _list_items(text: str) -> list[str]:
    inner = re.sub(r"^\[|\]$", "", text.strip())
    return sorted(item.strip() for item in _LIST_SEP.split(inner) if item.strip())


def compare_lists(a: str, b: str) -> bool:
    """The official ``compare_lists``: one ``[...]`` removed, split at ``,`` and ``;``, empty items dropped,
    both sorted as text; equal lists match, lists of other lengths do not, else item i of one must match
    item i of the other under :func:`question_scorer`."""
    items_a, items_b = _list_items(a), _list_items(b)
    if items_a == items_b:
        return True
    if len(items_a) != len(items_b):
        return False
    return all(question_scorer(x, y) for x, y in zip(items_a, items_b, strict=True))


def question_scorer(answer: str | None, reference: str | None) -> bool:
    """The leaderboard's verdict on ``answer`` for ``reference`` (module docstring, ``docs/evaluation.md``).

    Both are stripped and lower-cased. When either is a number with thousands separators or a decimal,
    both are read as numbers (:func:`first_number`; no number on one side: wrong) and compared with
    :func:`compare_numbers`; else, when either contains ``,`` or ``;``, as lists (:func:`compare_lists`);
    else as numbers when both contain one, and as text (:func:`compare_strings`) otherwise.
    """
    if answer is None or reference is None:
        return False
    a, b = answer.strip().lower(), reference.strip().lower()
    if _is_comma_number(a) or _is_comma_number(b):
        x, y = first_number(a), first_number(b)
        return x is not None and y is not None and compare_numbers(x, y)
    if any(sep in a or sep in b for sep in (",", ";")):
        return compare_lists(a, b)
    x, y = first_number(a), first_number(b)
    if x is not None and y is not None:
        return compare_numbers(x, y)
    return compare_strings(a, b)


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


class DABstep(Benchmark):
    name = "dabstep"
    description = "DABstep: multi-step questions over payments data, fee rules and manuals (Adyen, 2025)"
    metric = "accuracy"
    layout = (
        "the Hugging Face dataset adyen/DABstep: a folder holding data/tasks/dev.jsonl (split dev) or "
        "data/tasks/all.jsonl (split test) and data/context/ with " + ", ".join(CONTEXT_FILES)
    )
    rules = (OFFICIAL,)
    defaults = BenchmarkDefaults(
        max_turns=20,
        language="python",
        answer_format="Give only the final answer, exactly in the format the guidelines ask for.",
    )
    # the dataset's files on the Hugging Face Hub, in their official layout (CC-BY-4.0)
    source = BenchSource(
        name="dabstep",
        base_url="https://huggingface.co/datasets/adyen/DABstep/resolve/main",
        files=(
            RemoteFile("data/tasks/dev.jsonl"),
            RemoteFile("data/tasks/all.jsonl"),
            *(RemoteFile(f"data/context/{name}") for name in CONTEXT_FILES),
        ),
        homepage="https://huggingface.co/datasets/adyen/DABstep",
        licence="CC BY 4.0",
        note="dev and test questions (test answers withheld) and the seven context files",
    )
    #: The leaderboard's submission file ``datadojo eval`` writes into the run folder (split ``test``).
    submission_file = "dabstep_submission.jsonl"

    def _paths(self, path: Path, split: str) -> tuple[Path, Path]:
        """The split's records file and the context folder for ``path`` (module docstring)."""
        if split not in SPLITS:
            raise self.layout_error(f"unknown split {split!r}; choose dev or test")
        if path.is_file():
            return self._text_file(path), path.parent.parent / "context"
        data = path / "data" if (path / "data" / "tasks").is_dir() else path
        tasks = data / "tasks" / SPLITS[split]
        return self._text_file(self._require(tasks, f"tasks/{SPLITS[split]}")), data / "context"

    def load(
        self, path: str | Path, *, require_files: bool = True, split: str = "dev", **options: Any
    ) -> Iterator[Task]:
        """DABstep tasks of ``split`` (module docstring); ``require_files`` checks the context files."""
        self._no_options(options)
        records, context = self._paths(Path(path), split)
        rows = list(self.records(records))  # a file that is not the records is named before the context
        if require_files:
            missing = [n for n in CONTEXT_FILES if not (context / n).is_file()]
            if missing:
                raise self.layout_error(f"context file(s) {', '.join(missing)} not found in {context}")
        # all.jsonl releases every answer as "" (withheld); elsewhere "" is a real answer (an empty list)
        withheld = records.name == SPLITS["test"]
        seen: set[str] = set()
        for lineno, rec in rows:
            where = f"{records}:{lineno}"
            try:
                tid, question = str(rec["task_id"]), str(rec["question"])
            except KeyError as exc:
                raise BenchmarkError(f"{where}: missing field {exc}") from exc
            if tid in seen:
                raise BenchmarkError(f"{where}: duplicate task_id {tid}")
            seen.add(tid)
            answer = _as_text(rec.get("answer"))
            hidden = answer is None or (answer == "" and withheld)
            guidelines = str(rec.get("guidelines") or "").strip()
            level = rec.get("level")
            extra: dict[str, Any] = {"guidelines": guidelines, "hidden": hidden, "split": split}
            if guidelines:
                extra["answer_format"] = guidelines
            yield Task(
                id=tid,
                question=question,
                files=[DataFile(path=str(context), kind="dir", name="context")],
                answer=None if hidden else answer,
                answer_kind="dabstep",
                source=self.name,
                category=str(level) if level is not None else None,
                difficulty=level,
                extra=extra,
            )

    def score(self, task: Task, prediction: str | None) -> ItemScore:
        hidden = bool(task.extra.get("hidden")) or task.answer is None
        if prediction is None:
            none = missing_prediction(self.metric)
            return ItemScore(0.0, False, None, none.reason, self.metric, {"hidden": hidden})
        answer = prediction.strip()
        if hidden:
            reason = "answer withheld: the leaderboard scores it (see the submission file)"
            return ItemScore(0.0, False, answer, reason, self.metric, {"hidden": True})
        reference = _as_text(task.answer) or ""
        ok = question_scorer(answer, reference)
        reason = (
            f"matches {reference!r} under the leaderboard's scorer"
            if ok
            else f"{_cut(answer)!r} does not match {_cut(reference)!r}"
        )
        return ItemScore(1.0 if ok else 0.0, ok, answer, reason, self.metric, {"hidden": False})

    def totals(self, items: Sequence[tuple[Task, ItemScore]]) -> dict[str, float]:
        """Accuracy over the items with a released answer, per level, and how many were withheld."""
        scored = [(t, s) for t, s in items if not s.parts.get("hidden")]
        out = super().totals(scored)
        out["hidden"] = float(len(items) - len(scored))
        for level in sorted({str(t.category) for t, _ in scored if t.category}):
            mine = [s for t, s in scored if t.category == level]
            out[f"level:{level}"] = sum(s.correct for s in mine) / len(mine)
        return out

    def has_public_answer(self, task: Task) -> bool:
        """Released answers only (the dev split); an empty released answer (an empty list) counts."""
        return not task.extra.get("hidden") and task.answer is not None

    def wants_submission(self, tasks: Sequence[Task]) -> bool:
        """A run over withheld answers (split ``test``) writes the leaderboard's submission file."""
        return any(t.extra.get("hidden") for t in tasks)

    def submission_record(self, task: Task, answer: str | None, trace: str) -> dict[str, Any]:
        """One line of the leaderboard's JSONL: ``task_id``, ``agent_answer`` (``""`` when the agent gave
        none) and the optional ``reasoning_trace``."""
        return {"task_id": task.id, "agent_answer": (answer or "").strip(), "reasoning_trace": trace}


def _cut(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"

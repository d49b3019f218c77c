"""What a benchmark is: a loader, an official scorer and defaults (the shape every ``bench`` module fills).

A :class:`Benchmark` reads the benchmark's files from a local path in their official layout and yields
:class:`~datadojo.types.Task` records (``answer``, ``answer_kind`` and ``extra`` carry what its scorer
needs), scores one prediction with the benchmark's own rule (:class:`ItemScore`), aggregates item scores
into the benchmark's official totals, and says how an agent should be run on it
(:class:`BenchmarkDefaults`: turn budget, tool language).

Scores are credit in [0, 1] under the official metric (TableBench's ROUGE-L and multi-answer EM give
partial credit); ``correct`` is full credit, which is what pass@k counts.
"""

from __future__ import annotations

import abc
import codecs
import copy
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from datadojo.errors import DataDojoError
from datadojo.jsonl import JsonlError, iter_jsonl
from datadojo.types import Task

if TYPE_CHECKING:
    from datadojo.bench.download import BenchSource
    from datadojo.sandbox import SandboxConfig

__all__ = [
    "RULES_DOC",
    "Benchmark",
    "BenchmarkDefaults",
    "BenchmarkError",
    "ItemScore",
    "ScoringRule",
    "binary_kind",
    "jsonl_records",
    "missing_prediction",
    "unique_id",
]

log = logging.getLogger(__name__)


#: The documentation page whose "Scoring rules" section lists, per rule, where it departs from the
#: benchmark's own evaluation code (``--help``, summaries and reports link its anchors).
RULES_DOC = "docs/evaluation.md"


@dataclass(frozen=True)
class ScoringRule:
    """One way a benchmark scores answers, named so that a reported number says what it is.

    ``name`` is what ``datadojo score --rule`` takes; ``title`` says in one line what the rule computes
    and whose code it reproduces; ``anchor`` is the section of :data:`RULES_DOC` that lists the rule's
    deviations from that code. Why: a number next to a paper's is only comparable when both were
    computed the same way, so every total is reported with the rule that produced it.
    """

    name: str
    title: str
    anchor: str

    @property
    def doc(self) -> str:
        """Where the rule's deviations are listed (``docs/evaluation.md#<anchor>``)."""
        return f"{RULES_DOC}#{self.anchor}"

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "title": self.title, "doc": self.doc}


class BenchmarkError(DataDojoError, ValueError):
    """A benchmark's files are missing or malformed; the message names the file (and line or record)."""


#: Leading bytes of binary files users give ``--data`` by mistake, and what to call them in the error.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"SQLite format 3\x00", "a SQLite database"),
    (b"PK\x03\x04", "a zip archive"),
    (b"PAR1", "a Parquet file"),
    (b"\x1f\x8b", "a gzip file"),
)


def binary_kind(path: Path, head_bytes: int = 8192) -> str | None:
    """What ``path`` is when it is not UTF-8 text (``"a SQLite database"``, …), ``None`` when it is text.

    Why: a benchmark loader reads JSON/JSONL text; handed a database or an archive it would otherwise end
    in a ``UnicodeDecodeError`` traceback or a misleading "not valid JSON" on line 1. Only the first
    ``head_bytes`` are read, so the check costs nothing on a large records file.
    """
    with path.open("rb") as fh:
        head = fh.read(head_bytes)
    for magic, kind in _MAGIC:
        if head.startswith(magic):
            return kind
    if b"\x00" in head:
        return "a binary file"
    try:
        # final=False: a multi-byte character cut at head_bytes is not an error
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return "not UTF-8 text"
    return None


@dataclass(frozen=True)
class ItemScore:
    """One prediction scored under a benchmark's official rule.

    ``score`` is the credit in [0, 1]; ``correct`` is full credit; ``parsed`` the answer the scorer
    extracted from the prediction (``None`` when nothing could be); ``reason`` one line saying why;
    ``metric`` the rule applied (``EM``, ``EX``, ``ROUGE-L``, …); ``parts`` sub-results (DABench
    sub-answers, Spider's table comparison).
    """

    score: float
    correct: bool
    parsed: str | None
    reason: str
    metric: str
    parts: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": self.score,
            "correct": self.correct,
            "parsed": self.parsed,
            "reason": self.reason,
            "metric": self.metric,
            "parts": self.parts,
        }


def missing_prediction(metric: str) -> ItemScore:
    """The score of a task nobody answered: wrong, with the reason saying so."""
    return ItemScore(0.0, False, None, "no prediction", metric)


@dataclass(frozen=True)
class BenchmarkDefaults:
    """How to run an agent on a benchmark: turn budget, tool language, tag dialect, answer format hint.

    ``max_turns`` is DataMind's T = 10 (§3.1) unless a benchmark says otherwise; ``language`` is the tool
    the agent gets (``python`` for files, ``sql`` for databases); ``answer_format`` is appended to the
    question so the answer can be scored (e.g. DABench's ``@name[value]``); ``temperature`` / ``top_p``
    the sampling the paper evaluates with (DataMind §5.1: 0.7 / 0.95).
    """

    max_turns: int = 10
    language: Literal["python", "sql"] = "python"
    dialect: str = "datamind"
    answer_format: str | None = None
    temperature: float = 0.7
    top_p: float = 0.95


def unique_id(seen: dict[str, int], raw_id: str, where: str) -> str:
    """``raw_id``, or ``raw_id~N`` for its N-th repeat (with a warning naming ``where``).

    Released benchmark files occasionally repeat an id (TableBench has one id under two subtypes); the
    second record must still be addressable, and the first keeps the official id.
    """
    n = seen.get(raw_id, 0) + 1
    seen[raw_id] = n
    if n == 1:
        return raw_id
    new = f"{raw_id}~{n}"
    log.warning("%s: id %r repeats; this record gets the id %r", where, raw_id, new)
    return new


def jsonl_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` for each line of a benchmark's JSONL file.

    A line that is not JSON, or not a JSON object, is a :class:`BenchmarkError` naming ``path:line``.
    """
    try:
        for lineno, rec in iter_jsonl(path):
            if not isinstance(rec, dict):
                raise BenchmarkError(f"{path}:{lineno}: expected a JSON object")
            yield lineno, rec
    except JsonlError as exc:
        raise BenchmarkError(str(exc)) from exc


class Benchmark(abc.ABC):
    """A benchmark: ``load`` (local path → tasks), ``score`` (official rule), ``totals``, ``defaults``."""

    name: str = ""
    description: str = ""
    metric: str = "accuracy"
    defaults: BenchmarkDefaults = BenchmarkDefaults()
    #: The rules this benchmark can score with; the first is the default (see :class:`ScoringRule`).
    rules: tuple[ScoringRule, ...] = ()
    #: Where ``datadojo bench download`` fetches the benchmark's files from (declared beside the loader
    #: that reads them); ``None`` when it cannot, and then ``no_source`` may say why.
    source: BenchSource | None = None
    no_source: str = ""
    #: One line naming the files ``load`` reads (every "wrong --data" error ends with it), e.g.
    #: ``"a folder holding dev.json, tables.json and database/<db_id>/<db_id>.sqlite (or dev.json itself)"``.
    layout: str = ""
    #: File name of the leaderboard submission ``datadojo eval`` writes into the run folder when
    #: :meth:`wants_submission` says so (``None``: the benchmark has no submission format).
    submission_file: str | None = None
    _rule_name: str | None = None

    @property
    def rule(self) -> ScoringRule:
        """The rule this instance scores with (the first of :attr:`rules` unless :meth:`with_rule` chose)."""
        if not self.rules:
            return ScoringRule("official", f"{self.metric} (the benchmark's own rule)", "scoring-rules")
        if self._rule_name is None:
            return self.rules[0]
        return next(r for r in self.rules if r.name == self._rule_name)

    def rule_names(self) -> list[str]:
        """Names of the rules :meth:`with_rule` accepts, the default first."""
        return [r.name for r in self.rules] or ["official"]

    def with_rule(self, name: str) -> Benchmark:
        """A copy of this benchmark that scores with rule ``name`` (``ValueError`` naming the choices)."""
        if name not in self.rule_names():
            raise ValueError(
                f"{self.name}: unknown scoring rule {name!r}; choose from {', '.join(self.rule_names())}"
            )
        out = copy.copy(self)
        out._rule_name = name if self.rules else None
        return out

    @abc.abstractmethod
    def load(self, path: str | Path, *, require_files: bool = True, **options: Any) -> Iterator[Task]:
        """Tasks from the benchmark's files at ``path`` (its official layout; see the module).

        ``require_files`` makes a task whose data file is missing an error; scoring alone (``datadojo
        score``) passes ``False`` since it only needs the answers.
        """

    @abc.abstractmethod
    def score(self, task: Task, prediction: str | None) -> ItemScore:
        """Score ``prediction`` (``None`` = no prediction) for ``task`` with the official rule."""

    def totals(self, items: Sequence[tuple[Task, ItemScore]]) -> dict[str, float]:
        """The benchmark's official aggregate figures over one prediction per task (fractions in [0, 1]).

        The base gives ``accuracy`` (mean score) and ``exact`` (share of full-credit items); benchmarks
        add their own (DABench's three accuracies, TableBench's per-type metrics, …).
        """
        if not items:
            return {"accuracy": 0.0, "exact": 0.0}
        n = len(items)
        return {
            "accuracy": sum(s.score for _, s in items) / n,
            "exact": sum(s.correct for _, s in items) / n,
        }

    def has_public_answer(self, task: Task) -> bool:
        """Whether ``task``'s reference answer is released, so it can be trained on (``datadojo bench
        export``): by default a non-empty ``answer``."""
        return task.answer is not None and not (isinstance(task.answer, str) and not task.answer.strip())

    def wants_submission(self, tasks: Sequence[Task]) -> bool:
        """Whether a run over ``tasks`` should write :attr:`submission_file` (answers withheld, e.g.)."""
        return False

    def submission_record(self, task: Task, answer: str | None, trace: str) -> dict[str, Any]:
        """One record of the submission file: the task, the agent's answer (``None``: it gave none) and its
        reasoning trace (the episode's turns as text). Benchmarks with :attr:`submission_file` define it."""
        raise NotImplementedError(f"{self.name} has no submission format")

    def sandbox_config(self) -> SandboxConfig:
        """The sandbox an agent gets on this benchmark unless the user configures one.

        The default :class:`~datadojo.sandbox.SandboxConfig`; SQL benchmarks skip the pandas pre-import
        (their agents query SQL, and start-up is most of a short episode's cost).
        """
        from datadojo.sandbox import SandboxConfig

        return SandboxConfig(preload=()) if self.defaults.language == "sql" else SandboxConfig()

    def _no_options(self, options: dict[str, Any]) -> None:
        """Refuse loader options this benchmark does not take (``TypeError`` naming them)."""
        if options:
            raise TypeError(f"{self.name}: unknown option(s) {', '.join(sorted(options))}")

    def _file_or_folder(self, path: str | Path, name: str) -> Path:
        """The benchmark's text file ``name``: ``path`` itself, or ``path/name`` when ``path`` is a folder."""
        p = Path(path)
        return self._text_file(self._require(p / name if p.is_dir() else p, name))

    def _require(self, path: Path, what: str) -> Path:
        if not path.exists():
            raise self.layout_error(f"{what} not found: {path}")
        return path

    def _text_file(self, path: Path) -> Path:
        """``path`` after refusing a folder or a binary file (a database, an archive) in one line."""
        if path.is_dir():
            raise self.layout_error(f"{path} is a folder, not a records file")
        try:
            kind = binary_kind(path)
        except OSError as exc:
            raise self.layout_error(f"cannot read {path} ({exc.strerror or exc})") from exc
        if kind is not None:
            raise self.layout_error(f"{path} is {kind}, not {self.name}'s records")
        return path

    def layout_error(self, problem: str) -> BenchmarkError:
        """A :class:`BenchmarkError` saying ``problem`` and then which files this benchmark expects."""
        hint = f"; expected {self.layout}" if self.layout else ""
        return BenchmarkError(f"{self.name}: {problem}{hint}")

    def records(self, path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
        """:func:`jsonl_records` of ``path``, a malformed line's error ending with the expected layout."""
        try:
            yield from jsonl_records(path)
        except BenchmarkError as exc:
            raise self.layout_error(str(exc)) from exc

    def __repr__(self) -> str:
        return f"<benchmark {self.name}>"

"""Stage 2: query synthesis from each file's profile *d*, one request per applicable category.

DataMind §3.2 ("Query Categorization and Synthesis"): an automated script extracts each file's metadata *d*
(here the corpus stage, :func:`datadojo.corpus.scan_corpus`, writes it to ``corpus.jsonl``); the query model
sees *d*, one category's definition and its 4–6 exemplars, and is told to write questions that "primarily
focus on the given type". Each file yields up to one request per applicable category.

Every reply is a JSON object validated against :class:`QueryBatch` (structured output, one repair). Each
question is then checked (:class:`QueryChecker`) and rejected, with the reason, when it is empty or longer
than ``max_query_chars``, names a column the file does not have (in its ``columns`` list, or back-quoted and
not a cell value: see :func:`_backticked_columns`),
or duplicates a question already kept for the same file — exactly after normalization
(:func:`datadojo.compare.text.normalize_text`) or nearly (word-set Jaccard similarity ≥ ``near_duplicate``).
Kept questions get a stable id: a hash of the file content, the category and the normalized text.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from datadojo.compare.text import normalize_text
from datadojo.corpus import CorpusRecord, ScanConfig, scan_corpus
from datadojo.corpus.scan import list_corpus_files, read_corpus
from datadojo.jsonl import JsonlAppender, read_tasks
from datadojo.llm.base import ChatBackend, LLMError
from datadojo.llm.structured import StructuredOutputError, complete_counted
from datadojo.runs import Rejection, RejectionWriter, UsageLedger
from datadojo.synth.datamind.config import DataMindConfig
from datadojo.synth.datamind.store import Paths
from datadojo.synth.datamind.taxonomy import Category, Taxonomy, column_counts
from datadojo.types import DataFile, Task

__all__ = [
    "FileEntry",
    "QueryBatch",
    "QueryChecker",
    "SynthQuery",
    "accepted_files",
    "file_checkers",
    "query_id",
    "query_messages",
    "synthesize_queries",
]

log = logging.getLogger(__name__)
STAGE = "queries"


class SynthQuery(BaseModel):
    """One synthesized question and the columns it uses (exact names from the profile)."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(description="one self-contained data-analysis question about the file")
    columns: list[str] = Field(description="the file's columns the question uses, spelled as in the profile")


class QueryBatch(BaseModel):
    """The reply to a query-synthesis request."""

    model_config = ConfigDict(extra="forbid")

    queries: list[SynthQuery]


@dataclass(frozen=True)
class FileEntry:
    """An accepted input file: its corpus record and the column names of all its tables."""

    record: CorpusRecord

    @property
    def path(self) -> str:
        return self.record.path

    @property
    def sha256(self) -> str:
        return self.record.sha256 or hashlib.sha256(self.record.path.encode()).hexdigest()

    @property
    def columns(self) -> list[str]:
        return [c for t in self.record.tables for c in t.columns]

    @property
    def profile(self) -> str:
        return self.record.profile

    def applicable(self, taxonomy: Taxonomy) -> list[Category]:
        return taxonomy.applicable(column_counts((t.columns, t.column_types) for t in self.record.tables))


def accepted_files(
    inputs: Sequence[str | Path], paths: Paths, config: DataMindConfig, rejects: RejectionWriter | None = None
) -> tuple[list[FileEntry], int]:
    """Scan ``inputs`` into ``corpus.jsonl`` (resumable) and return the accepted files and how many were seen.

    Rejected files go to ``rejected.jsonl`` (stage ``files``) with the corpus filter's reason.
    """
    scan_corpus(inputs, paths.corpus, ScanConfig(filters=config.filters, profile_chars=config.profile_chars))
    wanted = {str(p) for p, _ in list_corpus_files(inputs)}
    latest: dict[str, CorpusRecord] = {}
    for rec in read_corpus(paths.corpus):
        if rec.path in wanted:
            latest[rec.path] = rec
    files = []
    for path in sorted(latest):
        rec = latest[path]
        if rec.accepted:
            files.append(FileEntry(rec))
        elif rejects is not None:
            rejects.add(Rejection("files", path, rec.reason or "rejected", rec.detail or "", {"path": path}))
    return files, len(wanted)


def query_id(file_sha: str, category: str | Sequence[str], text: str) -> str:
    """Stable id of a question: hash of the file content, its category (or chain) and normalized text."""
    cat = category if isinstance(category, str) else ">".join(category)
    blob = f"{file_sha}\n{cat}\n{normalize_text(text)}"
    return "dm-" + hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


_BACKTICK = re.compile(r"`([^`\n]{1,80})`")
#: Words that make a back-quoted name a column reference ("column `x`", "the `x` column", "field `x`").
_COLUMN_WORDS = frozenset({"column", "columns", "field", "fields", "variable", "attribute", "feature"})
#: Words right before a back-quoted text that make it a value ("status is `active`", "= `North`").
_VALUE_WORDS = frozenset({"=", "==", "!=", "is", "are", "equals", "to", "as", "value", "values", "not"})


def _near(text: str, start: int, end: int) -> tuple[str, str]:
    before = text[:start].split()[-1:]
    after = text[end:].split()[:1]
    clean = [w.strip(".,;:()'\"?!").lower() for w in (before or [""]) + (after or [""])]
    return clean[0], clean[1]


def _backticked_columns(text: str, values: str) -> list[str]:
    """The back-quoted names of ``text`` that must be columns.

    Back quotes mark cell values as often as column names ("rows whose status is `active`"), so a back-quoted
    text counts as a column name unless it reads as a value: the word before it is a value word (``is``,
    ``=``, ``equal to`` …) or it is a whole word of the file's profile *d* (whose top values and sample rows
    show cell values) — and never when the question calls it a column ("the `x` column"), which is checked.
    """
    out = []
    for m in _BACKTICK.finditer(text):
        name = m.group(1)
        before, after = _near(text, m.start(), m.end())
        if before in _COLUMN_WORDS or after in _COLUMN_WORDS:
            out.append(name)
            continue
        shown = re.search(rf"(?<!\w){re.escape(name.strip())}(?!\w)", values, re.IGNORECASE) is not None
        if before in _VALUE_WORDS or shown:
            continue
        out.append(name)
    return out


def _words(text: str) -> frozenset[str]:
    return frozenset(normalize_text(text).split())


@dataclass
class QueryChecker:
    """Rejects empty, over-long, unknown-column and duplicate questions of one file (module docstring)."""

    columns: Sequence[str]
    max_chars: int = 600
    near_duplicate: float = 0.8
    profile: str = ""  # the file's profile d: a back-quoted text it shows is a cell value, not a column
    _norm: set[str] = field(default_factory=set)
    _sets: list[frozenset[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._known = {c.strip().lower() for c in self.columns}

    def check(self, question: str, columns: Iterable[str] = ()) -> tuple[str, str] | None:
        """``(reason, detail)`` when ``question`` must be rejected, else ``None`` (then call :meth:`keep`)."""
        text = question.strip()
        if not text:
            return "empty", "the question is empty"
        if len(text) > self.max_chars:
            return "too_long", f"{len(text)} characters > {self.max_chars}"
        named = [c for c in columns if c.strip()] + _backticked_columns(text, self.profile)
        unknown = sorted({c for c in named if c.strip().lower() not in self._known})
        if unknown:
            return "unknown_column", f"names column(s) the file does not have: {', '.join(unknown)}"
        norm = normalize_text(text)
        if not norm:
            return "empty", "the question has no words"
        if norm in self._norm:
            return "duplicate", "same text (after normalization) as a question already kept for this file"
        words = _words(text)
        for other in self._sets:
            union = len(words | other)
            if union and len(words & other) / union >= self.near_duplicate:
                return "near_duplicate", (
                    f"word overlap {len(words & other) / union:.2f} >= {self.near_duplicate} "
                    "with a question already kept for this file"
                )
        return None

    def keep(self, question: str) -> None:
        self._norm.add(normalize_text(question))
        self._sets.append(_words(question))


_SYSTEM = (
    "You write data-analysis questions for training data-analysis agents. You see a description of a data "
    "file (never the file itself) and one task category. Every question must be answerable only by running "
    "code over the file, have one definite answer, be self-contained, and use the file's column names exactly "
    "as the description spells them. Reply with JSON only."
)


def query_messages(category: Category, profile: str, k: int) -> list[dict[str, str]]:
    """The query-synthesis request: category, definition, exemplars, answer form and the profile *d*."""
    exemplars = "\n".join(f"- {e}" for e in category.exemplars)
    user = (
        f"## Data file\n{profile}\n\n"
        f"## Task category: {category.name}\n{category.definition}\n\n"
        f"Example questions of this category (other files, other domains):\n{exemplars}\n\n"
        f"Expected form of the answer: {category.answer_form}\n\n"
        f"Write {k} new question(s) about this file that primarily focus on the category {category.name}. "
        "Vary the complexity. For each question list the columns it uses. "
        'Reply as JSON: {"queries": [{"question": "...", "columns": ["..."]}]}'
    )
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]


def make_task(file: FileEntry, category: Category, question: str, columns: list[str]) -> Task:
    """A difficulty-1 query :class:`Task` (``extra.chain`` = its one category, no parents)."""
    return Task(
        id=query_id(file.sha256, category.name, question),
        question=question.strip(),
        files=[DataFile.from_path(file.path)],
        description=file.profile or None,
        source="datamind",
        category=category.name,
        difficulty=1,
        extra={
            "chain": [category.name],
            "parents": [],
            "file_sha256": file.sha256,
            "columns": columns,
            "answer_form": category.answer_form,
        },
    )


def load_queries(paths: Paths) -> list[Task]:
    """Every query task written so far (base and composed), in file order."""
    return list(read_tasks(paths.queries, resolve_paths=False)) if paths.queries.exists() else []


def file_checkers(
    files: Sequence[FileEntry], queries: Sequence[Task], config: DataMindConfig
) -> dict[str, QueryChecker]:
    """A :class:`QueryChecker` per file (by content hash) that already knows the file's kept questions."""
    checkers = {
        f.sha256: QueryChecker(f.columns, config.max_query_chars, config.near_duplicate, f.profile or "")
        for f in files
    }
    for t in queries:
        checker = checkers.get(str(t.extra.get("file_sha256")))
        if checker is not None:
            checker.keep(t.question)
    return checkers


async def synthesize_queries(
    files: Sequence[FileEntry],
    teacher: ChatBackend,
    paths: Paths,
    taxonomy: Taxonomy,
    config: DataMindConfig,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> UsageLedger:
    """Ask for questions per (file, applicable category); append kept ones to ``queries.jsonl``.

    Resumable: a finished request is marked in ``progress.jsonl`` and never sent again; a question whose id
    is already in ``queries.jsonl`` is not written twice. ``on_progress(done, total)`` drives a progress bar.
    """
    usage = paths.usage_ledger(STAGE)
    progress = paths.work_ledger()
    existing = load_queries(paths)
    prior_ids = {t.id for t in existing}
    checkers = file_checkers(files, existing, config)
    jobs = [(f, c) for f in files for c in f.applicable(taxonomy)]
    todo = [(f, c) for f, c in jobs if not progress.done(f"{STAGE}:{f.sha256}:{c.name}")]
    done = len(jobs) - len(todo)
    if on_progress:
        on_progress(done, len(jobs))
    sem = asyncio.Semaphore(config.concurrency)

    async def ask(f: FileEntry, c: Category) -> tuple[FileEntry, Category, QueryBatch | None, str | None]:
        async with sem:
            try:
                batch = await complete_counted(
                    usage,
                    "teacher",
                    teacher,
                    query_messages(c, f.profile, config.queries_per_category),
                    QueryBatch,
                    mode=config.structured,
                    temperature=config.query_temperature,
                    max_tokens=config.query_max_tokens,
                )
            except StructuredOutputError as exc:
                return f, c, None, f"invalid reply after one repair: {exc}"
            except LLMError as exc:
                usage.add("teacher", requests=0, failed=1, check=False)
                log.warning("query synthesis %s / %s failed: %s", f.path, c.name, exc)
                return f, c, None, None
            return f, c, batch, None

    with usage, progress, paths.rejections() as rejects, JsonlAppender(paths.queries) as sink:
        # Requests run concurrently but replies are committed in job order, so which of two duplicate
        # questions is kept does not depend on server timing.
        pending = [asyncio.ensure_future(ask(f, c)) for f, c in todo]
        try:
            for fut in pending:
                f, c, batch, error = await fut
                key = f"{f.sha256}:{c.name}"
                if batch is None and error is None:
                    continue  # the request failed (server error): not marked, a rerun tries again
                if batch is None:
                    rejects.add(
                        Rejection(
                            STAGE, key, "invalid_reply", error or "", {"file": f.path, "category": c.name}
                        )
                    )
                else:
                    if not batch.queries:
                        rejects.add(
                            Rejection(
                                STAGE, key, "empty_reply", "the reply held no question",
                                {"file": f.path, "category": c.name},
                            )
                        )  # fmt: skip
                    checker = checkers[f.sha256]
                    for q in batch.queries:
                        task = make_task(f, c, q.question, q.columns)
                        if task.id in prior_ids:
                            continue  # already kept by an interrupted earlier run of this request
                        verdict = checker.check(q.question, q.columns)
                        if verdict is not None:
                            rejects.add(
                                Rejection(
                                    STAGE, task.id, verdict[0], verdict[1],
                                    {"file": f.path, "category": c.name, "question": q.question},
                                )
                            )  # fmt: skip
                            continue
                        checker.keep(q.question)
                        sink.write(task)
                progress.commit(f"{STAGE}:{key}", stage=STAGE)
                done += 1
                if on_progress:
                    on_progress(done, len(jobs))
        except BaseException:
            # the server is gone (ServerUnreachableError) or the run was cancelled: stop the other requests
            # and collect them, so none is left running with an exception nobody retrieves
            for fut in pending:
                fut.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            raise
    return usage

"""Corpus scan: filter and profile every file under some folders into a resumable ``corpus.jsonl``.

This is DataMind's file collection step (§3.1) as a pipeline stage: each file is sniffed, loaded under
the row bound, passed through the filters (:mod:`datadojo.corpus.filters`), de-duplicated by content hash,
and written as one :class:`CorpusRecord` — path, kind, SHA-256, accepted or the rejection reason, a
summary of its tables and the rendered profile text *d* (§3.2, Step 1) that query synthesis will read.

The output is append-only JSONL (:class:`datadojo.jsonl.JsonlAppender`): each record is flushed as soon as
the file is done, so an interrupted scan loses at most one file. Rerunning skips files already recorded
with the same content: a file whose path, size and modification time match its record is skipped without
being read again; otherwise its SHA-256 is computed and compared with the recorded one. Accepted files of
earlier runs still count for duplicate detection.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from datadojo.corpus.config import ScanConfig
from datadojo.corpus.filters import DuplicateFilter, FilterVerdict, filter_file
from datadojo.corpus.folder import walk_folder
from datadojo.corpus.inputs import require_data_files
from datadojo.corpus.other_kinds import ARRAY_KINDS, summarize
from datadojo.corpus.profile import FileProfile, profile_file, profile_loaded
from datadojo.corpus.render import render_file_profile
from datadojo.corpus.sniff import STORE_KINDS, Sniffed, sniff, store_kind
from datadojo.executor import Executor, WorkerSpec
from datadojo.jsonl import JsonlAppender, iter_jsonl, read_models

__all__ = [
    "CorpusRecord",
    "ScanConfig",
    "ScanSummary",
    "ScanWorker",
    "TableSummary",
    "list_corpus_files",
    "read_corpus",
    "scan_corpus",
    "scan_file",
    "sha256_file",
]

_NO_CONTENT = ("missing", "special", "dir")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TableSummary(_Model):
    """A table in one line of ``corpus.jsonl``: name, row count, column names and inferred types."""

    name: str
    rows: int
    rows_lower_bound: bool = False
    columns: list[str] = Field(default_factory=list)
    column_types: list[str] = Field(default_factory=list)


class CorpusRecord(_Model):
    """One file of a corpus scan. ``reason`` is one of :data:`~datadojo.corpus.filters.REJECT_REASONS`
    when ``accepted`` is false; ``duplicate_of`` names the first accepted copy for duplicates."""

    path: str
    kind: str
    size: int = 0
    mtime_ns: int = 0
    sha256: str | None = None
    accepted: bool
    format: str | None = None
    reason: str | None = None
    detail: str | None = None
    duplicate_of: str | None = None
    tables: list[TableSummary] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    profile: str = ""
    seconds: float = 0.0


class ScanSummary(_Model):
    """Counts of one scan run (``skipped``: already in the output from an earlier run).

    ``unreadable`` files (a corrupt netCDF, a truncated ``.npy``) are counted apart from the rejected ones:
    they are not files of the wrong shape but broken ones; ``unreadable_files`` names the first 20 with
    their reason.
    """

    out: str
    seen: int = 0
    processed: int = 0
    skipped: int = 0
    accepted: int = 0
    rejected: int = 0
    unreadable: int = 0
    unreadable_files: dict[str, str] = Field(default_factory=dict)
    accepted_by_kind: dict[str, int] = Field(default_factory=dict)
    rejected_by_reason: dict[str, int] = Field(default_factory=dict)
    seconds: float = 0.0

    @property
    def files_per_second(self) -> float:
        return self.processed / self.seconds if self.seconds > 0 else 0.0


def sha256_file(path: str | Path, *, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's content, read in 1 MiB chunks (constant memory, any size)."""
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def list_corpus_files(
    roots: Iterable[str | Path], *, include_hidden: bool = False
) -> list[tuple[Path, Sniffed]]:
    """Every file under ``roots`` (a root may itself be a file), absolute, each once, with its sniff.

    Symbolic links to directories are listed (and later rejected as ``not_a_file``), never followed.
    """
    seen: set[str] = set()
    out: list[tuple[Path, Sniffed]] = []

    def add(p: Path, sn: Sniffed | None) -> None:
        key = os.path.abspath(p)
        if key not in seen:
            seen.add(key)
            out.append((Path(key), sn or sniff(Path(key))))

    for root in roots:
        r = Path(os.path.abspath(root))
        if (
            r.is_dir() and store_kind(r) is None
        ):  # a root given explicitly is walked even through a link; links inside are not
            listing, _ = walk_folder(r, include_hidden=include_hidden)
            for entry, sn in listing:
                if sn is not None or entry.is_symlink:
                    add(r / entry.path, sn)
        else:
            add(r, None)
    return out


def _table_summaries(verdict: FilterVerdict) -> list[TableSummary]:
    if verdict.loaded is None:
        return []
    return [
        TableSummary(
            name=t.name,
            rows=t.row_count,
            rows_lower_bound=t.row_count_is_lower_bound,
            columns=t.columns[:500],
            column_types=[t.column_types.get(c, "") for c in t.columns[:500]],
        )
        for t in verdict.loaded.tables
    ]


def _profile_text(verdict: FilterVerdict, sn: Sniffed, config: ScanConfig) -> str:
    if not verdict.accepted and not config.profile_rejected:
        return ""
    if verdict.loaded is not None:
        fp = profile_loaded(verdict.loaded, detail=sn.detail)
    elif sn.kind in _NO_CONTENT or sn.kind in ("empty", "binary"):
        return ""
    else:
        fp = FileProfile(
            path=str(sn.path),
            name=sn.path.name,
            kind=sn.kind,
            size_bytes=sn.size,
            detail=sn.detail,
            summary=summarize(sn),
            error=None if verdict.reason == "not_tabular" else verdict.detail,
            error_reason=None if verdict.reason == "not_tabular" else verdict.reason,
        )
    return render_file_profile(fp, config.profile_chars)


def scan_file(
    path: Path,
    config: ScanConfig,
    dupes: DuplicateFilter | None = None,
    *,
    sniffed: Sniffed | None = None,
    sha256: str | None = None,
) -> CorpusRecord:
    """Filter and profile one file into a :class:`CorpusRecord` (never raises for a bad file)."""
    t0 = time.perf_counter()
    sn = sniffed or sniff(path)
    try:
        st = path.stat()
        size, mtime = st.st_size, st.st_mtime_ns
    except OSError:
        size, mtime = 0, 0
    if sha256 is None and sn.kind not in _NO_CONTENT and sn.kind not in STORE_KINDS:
        try:
            sha256 = sha256_file(path)
        except OSError:
            sha256 = None
    if sn.kind in ARRAY_KINDS:
        return _array_record(path, sn, size, mtime, sha256, config, t0)
    verdict = filter_file(path, config.filters, sniffed=sn)
    record = CorpusRecord(
        path=str(path),
        kind=verdict.kind,
        size=size,
        mtime_ns=mtime,
        sha256=sha256,
        accepted=verdict.accepted,
        reason=verdict.reason,
        detail=verdict.detail,
        tables=_table_summaries(verdict),
        warnings=verdict.warnings[:20],
        profile=_profile_text(verdict, sn, config),
    )
    record = _dedupe(record, config, dupes)
    record.seconds = round(time.perf_counter() - t0, 4)
    return record


def _array_record(
    path: Path, sn: Sniffed, size: int, mtime: int, sha256: str | None, config: ScanConfig, t0: float
) -> CorpusRecord:
    """An array file (netCDF, HDF5, Zarr, NumPy, FITS, Parquet dataset): not a table, so not accepted
    (``not_tabular``) but profiled; or ``unreadable`` with the reader's reason when it is corrupt."""
    fp = profile_file(path, sniffed=sn)
    unreadable = fp.kind == "unreadable"
    profile = render_file_profile(fp, config.profile_chars)
    return CorpusRecord(
        path=str(path),
        kind=fp.kind,
        format=sn.kind,
        size=size,
        mtime_ns=mtime,
        sha256=sha256,
        accepted=False,
        reason="corrupt" if unreadable else "not_tabular",
        detail=(fp.error or "").removeprefix(f"{path.name}: ")
        if unreadable
        else f"{sn.detail} (arrays, not a table)",
        profile=profile if (unreadable or config.profile_rejected) else "",
        seconds=round(time.perf_counter() - t0, 4),
    )


def _dedupe(record: CorpusRecord, config: ScanConfig, dupes: DuplicateFilter | None) -> CorpusRecord:
    """Reject an accepted file whose content an earlier accepted file has; remember it otherwise.

    Kept apart from the per-file work so that a distributed scan can run the files anywhere and apply
    this on the driver, in the order of the file list, which gives the same records as a local scan.
    """
    sha = record.sha256
    if not (record.accepted and dupes is not None and config.filters.dedupe and sha):
        return record
    first = dupes.seen(sha)
    if first is None or first == record.path:
        dupes.add(sha, record.path)
        return record
    update: dict[str, object] = {
        "accepted": False,
        "reason": "duplicate",
        "detail": f"same content (sha256 {sha[:12]}…) as {first}",
        "duplicate_of": first,
    }
    if not config.profile_rejected:
        update["profile"] = ""
    return record.model_copy(update=update)


def _recorded_sha(path: Path, sn: Sniffed, by_path: dict[str, tuple[int, int, str | None]]) -> str | None:
    """The SHA-256 an earlier run recorded for ``path`` when its size and mtime are unchanged."""
    key = str(path)
    if key not in by_path or sn.kind in _NO_CONTENT:
        return None
    size, mtime, recorded = by_path[key]
    try:
        st = path.stat()
    except OSError:
        return None
    return recorded if (st.st_size, st.st_mtime_ns) == (size, mtime) else None


class ScanWorker:
    """Filters and profiles one file (``(index, path, sniffed, sha256)``) without duplicate detection:
    the executor's unit of work for :func:`scan_corpus` (``index`` only travels back with the item)."""

    def __init__(self, config: ScanConfig) -> None:
        self.config = config

    async def run(self, item: tuple[int, Path, Sniffed, str | None]) -> CorpusRecord:
        _index, path, sn, sha = item
        return scan_file(path, self.config, None, sniffed=sn, sha256=sha)

    async def close(self) -> None:
        return None


async def _scan_on(
    executor: Executor,
    files: list[tuple[Path, Sniffed]],
    by_path: dict[str, tuple[int, int, str | None]],
    done: set[tuple[str, str | None]],
    config: ScanConfig,
    dupes: DuplicateFilter,
    sink: JsonlAppender,
    summary: ScanSummary,
    on_file: Callable[[Path, CorpusRecord | None], None] | None,
    count: Callable[[Path, CorpusRecord], None],
) -> None:
    """The files of a scan on ``executor``: results are taken back in file-list order (a small reorder
    buffer), so duplicate detection picks the same first copy as a local scan."""
    items: list[tuple[int, Path, Sniffed, str | None]] = []
    for index, (path, sn) in enumerate(files):
        sha = _recorded_sha(path, sn, by_path)
        if sha is None and str(path) in by_path and sn.kind not in _NO_CONTENT:
            try:  # changed since it was recorded (or touched): is it the same content?
                sha = sha256_file(path)
            except OSError:
                sha = None
        if sha is not None and (str(path), sha) in done:
            summary.skipped += 1
            if on_file is not None:
                on_file(path, None)
            continue
        items.append((index, path, sn, sha))
    order = [item[0] for item in items]
    waiting: dict[int, CorpusRecord] = {}
    nxt = 0
    spec = WorkerSpec(
        "datadojo.corpus.scan:ScanWorker", {"config": config}, cpu_bound=True, label="corpus scan"
    )
    stream = executor.map_unordered(spec, items)
    async with contextlib.aclosing(stream):  # type: ignore[type-var]
        async for outcome in stream:
            waiting[outcome.item[0]] = outcome.result
            while nxt < len(order) and order[nxt] in waiting:
                index = order[nxt]
                record = _dedupe(waiting.pop(index), config, dupes)
                sink.write(record)
                done.add((record.path, record.sha256))
                count(files[index][0], record)
                nxt += 1


def _shown_name(path: Path, roots: list[Path]) -> str:
    """``path`` relative to the root it was found under (the name a user and an agent should see)."""
    for r in roots:
        if path == r:
            return path.name
        if path.is_relative_to(r):
            return path.relative_to(r).as_posix()
    return path.name


def read_corpus(path: str | Path) -> Iterator[CorpusRecord]:
    """Stream the records of a ``corpus.jsonl``."""
    return read_models(path, CorpusRecord)


def scan_corpus(
    roots: Iterable[str | Path],
    out: str | Path,
    config: ScanConfig | None = None,
    *,
    on_total: Callable[[int], None] | None = None,
    on_file: Callable[[Path, CorpusRecord | None], None] | None = None,
    executor: Executor | None = None,
) -> ScanSummary:
    """Scan files and folders into ``out`` (appending; files already recorded are skipped).

    ``on_total(n)`` is called once with the number of files found, ``on_file(path, record)`` after each
    file (``record`` is ``None`` for a file skipped because an earlier run recorded it) — the CLI hangs
    its progress bar on these.

    ``executor`` (e.g. a :class:`~datadojo.executor.ray_executor.RayExecutor`) reads and profiles the
    files on its workers (which must see them at the same paths); this process still writes ``out``,
    and applies duplicate detection in the order of the file list, so the records are those of a scan
    without an executor.
    """
    config = config or ScanConfig()
    out = Path(out)
    t0 = time.perf_counter()
    by_path: dict[str, tuple[int, int, str | None]] = {}
    done: set[tuple[str, str | None]] = set()
    dupes = DuplicateFilter()
    if out.exists():
        for _, raw in iter_jsonl(out):
            rec = CorpusRecord.model_validate(raw)
            by_path[rec.path] = (rec.size, rec.mtime_ns, rec.sha256)
            done.add((rec.path, rec.sha256))
            if rec.accepted and rec.sha256:
                dupes.add(rec.sha256, rec.path)
    roots_list = [Path(os.path.abspath(r)) for r in roots]
    require_data_files(roots_list, include_hidden=config.include_hidden)
    files = list_corpus_files(roots_list, include_hidden=config.include_hidden)
    if on_total is not None:
        on_total(len(files))
    summary = ScanSummary(out=str(out), seen=len(files))
    kinds: Counter[str] = Counter()
    reasons: Counter[str] = Counter()

    def count(path: Path, record: CorpusRecord) -> None:
        summary.processed += 1
        if record.kind == "unreadable":
            summary.unreadable += 1
            if len(summary.unreadable_files) < 20:
                summary.unreadable_files[_shown_name(path, roots_list)] = record.detail or "unreadable"
        elif record.accepted:
            summary.accepted += 1
            kinds[record.kind] += 1
        else:
            summary.rejected += 1
            reasons[record.reason or "unknown"] += 1
        if on_file is not None:
            on_file(path, record)

    with JsonlAppender(out) as sink:
        if executor is not None:
            asyncio.run(
                _scan_on(executor, files, by_path, done, config, dupes, sink, summary, on_file, count)
            )
        for path, sn in files if executor is None else ():
            key = str(path)
            sha = _recorded_sha(path, sn, by_path)
            if sha is None and sn.kind not in _NO_CONTENT and sn.kind not in STORE_KINDS:
                try:
                    sha = sha256_file(path)
                except OSError:
                    sha = None
            if (key, sha) in done:
                summary.skipped += 1
                if on_file is not None:
                    on_file(path, None)
                continue
            record = scan_file(path, config, dupes, sniffed=sn, sha256=sha)
            sink.write(record)
            done.add((key, sha))
            count(path, record)
    summary.accepted_by_kind = dict(kinds.most_common())
    summary.rejected_by_reason = dict(reasons.most_common())
    summary.seconds = round(time.perf_counter() - t0, 3)
    return summary

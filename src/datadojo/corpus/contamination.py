"""Contamination check: how many benchmark tables share their header with a training-corpus table.

DataMind Appendix H (Table 8) reports "header-overlap ratios between DATAMIND-12K files and benchmark
files" — 1.29 % for DABench, 0.00 % for TableBench, 0.02 % for BIRD — as its evidence that the training
files do not leak the benchmarks' tables. The paper does not define the ratio precisely, so the choices
are settings of :class:`OverlapConfig`:

* **Normalization of a header.** Column names are case-folded, runs of non-alphanumerics become ``_``
  (``"Unit Price"`` = ``"unit_price"``), and placeholder names (``column_3``, ``Unnamed: 0``, bare
  numbers) are dropped. A header is the *set* of its normalized names (column order ignored). Tables
  with fewer than ``min_columns`` (default 2) named columns are left out: a lone ``value`` column would
  match everything.
* **Unit.** ``unit="table"`` (default): the ratio is the fraction of benchmark tables whose header
  matches some training table's header — the reading closest to "overlap between … files". ``"column"``:
  the fraction of distinct benchmark column names that also occur among training column names (a much
  looser, vocabulary-level figure).
* **Match.** ``match="exact"`` (default): the same set of names. ``"jaccard"``: Jaccard similarity of
  the two sets ≥ ``threshold`` (default 0.8). ``"containment"``: the share of the benchmark header found
  in one training header ≥ ``threshold``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from datadojo.corpus.config import OverlapConfig
from datadojo.corpus.readers import load
from datadojo.corpus.sniff import TABULAR_KINDS, sniff
from datadojo.corpus.tables import LoadError

__all__ = [
    "HeaderSet",
    "OverlapConfig",
    "OverlapReport",
    "collect_headers",
    "header_overlap",
    "headers_of_file",
    "normalize_column",
]

_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_PLACEHOLDER = re.compile(r"^(column_?\d+|unnamed_?\d+(_level_\d+)?|\d+|field_?\d+)$")


def normalize_column(name: str) -> str:
    """``" Unit Price ($)"`` → ``"unit_price"``; placeholders (``column_3``, ``Unnamed: 0``) → ``""``."""
    text = _NON_ALNUM.sub("_", str(name).casefold()).strip("_")
    return "" if _PLACEHOLDER.match(text) else text


@dataclass(frozen=True)
class HeaderSet:
    """The normalized header of one table; ``source`` is ``path`` or ``path#table``."""

    source: str
    columns: frozenset[str]

    @classmethod
    def from_names(cls, source: str, names: Iterable[str]) -> HeaderSet:
        return cls(source, frozenset(n for n in map(normalize_column, names) if n))


class OverlapReport(BaseModel):
    """The ratio and the evidence: which benchmark tables matched which training tables."""

    model_config = ConfigDict(extra="forbid")

    ratio: float
    n_bench: int
    n_overlapping: int
    n_train: int
    unit: str
    match: str
    threshold: float
    matches: list[tuple[str, str, float]] = Field(default_factory=list)

    def percent(self) -> str:
        return f"{100 * self.ratio:.2f}%"


def headers_of_file(path: str | Path) -> list[HeaderSet]:
    """The headers of every table of one data file (reads no data rows); ``[]`` if it cannot be read."""
    try:
        loaded = load(path, max_rows=0, count_limit=0)
    except LoadError:
        return []
    multi = len(loaded.tables) > 1
    return [
        HeaderSet.from_names(f"{path}#{t.name}" if multi else str(path), t.columns) for t in loaded.tables
    ]


def collect_headers(sources: Iterable[str | Path], *, accepted_only: bool = True) -> list[HeaderSet]:
    """Headers from data files, folders of data files (walked), or ``corpus.jsonl`` scan outputs.

    A ``.jsonl`` whose records look like :class:`~datadojo.corpus.scan.CorpusRecord` is read as a scan
    output (only accepted files unless ``accepted_only=False``) — no data file is opened again.
    """
    from datadojo.corpus.scan import list_corpus_files, read_corpus

    out: list[HeaderSet] = []
    for src in sources:
        p = Path(src)
        if p.is_file() and p.suffix.lower() == ".jsonl" and _is_corpus(p):
            for rec in read_corpus(p):
                if accepted_only and not rec.accepted:
                    continue
                multi = len(rec.tables) > 1
                out.extend(
                    HeaderSet.from_names(f"{rec.path}#{t.name}" if multi else rec.path, t.columns)
                    for t in rec.tables
                )
        elif p.is_dir():
            for f, sn in list_corpus_files([p]):
                if sn.kind in TABULAR_KINDS:
                    out.extend(headers_of_file(f))
        elif sniff(p).kind in TABULAR_KINDS:
            out.extend(headers_of_file(p))
    return out


def _is_corpus(path: Path) -> bool:
    import json

    with path.open("rb") as fh:
        for raw in fh:
            if raw.strip():
                try:
                    first = json.loads(raw)
                except ValueError:
                    return False
                return isinstance(first, dict) and {"path", "kind", "accepted"} <= set(first)
    return False


def header_overlap(
    train: Iterable[HeaderSet], bench: Iterable[HeaderSet], config: OverlapConfig | None = None
) -> OverlapReport:
    """The header-overlap ratio of ``bench`` against ``train`` (DataMind Appendix H, Table 8).

    Returns ratio 0 when the benchmark has no header with at least ``min_columns`` names.
    """
    cfg = config or OverlapConfig()
    tr = [h for h in train if len(h.columns) >= cfg.min_columns]
    bn = [h for h in bench if len(h.columns) >= cfg.min_columns]
    if cfg.unit == "column":
        vocab = set().union(*(h.columns for h in tr)) if tr else set()
        names = set().union(*(h.columns for h in bn)) if bn else set()
        shared = sorted(names & vocab)
        return OverlapReport(
            ratio=len(shared) / len(names) if names else 0.0,
            n_bench=len(names),
            n_overlapping=len(shared),
            n_train=len(vocab),
            unit="column",
            match="exact",
            threshold=1.0,
            matches=[(n, n, 1.0) for n in shared[:200]],
        )
    matches: list[tuple[str, str, float]] = []
    if cfg.match == "exact":
        index: dict[frozenset[str], str] = {}
        for h in tr:
            index.setdefault(h.columns, h.source)
        for h in bn:
            if h.columns in index:
                matches.append((h.source, index[h.columns], 1.0))
    else:
        postings: dict[str, list[int]] = defaultdict(list)
        for i, h in enumerate(tr):
            for c in h.columns:
                postings[c].append(i)
        for h in bn:
            shared: dict[int, int] = defaultdict(int)
            for c in h.columns:
                for i in postings.get(c, ()):
                    shared[i] += 1
            best, best_i = 0.0, -1
            for i, inter in shared.items():
                if cfg.match == "jaccard":
                    score = inter / (len(h.columns) + len(tr[i].columns) - inter)
                else:
                    score = inter / len(h.columns)
                if score > best:
                    best, best_i = score, i
            if best_i >= 0 and best >= cfg.threshold:
                matches.append((h.source, tr[best_i].source, round(best, 4)))
    return OverlapReport(
        ratio=len(matches) / len(bn) if bn else 0.0,
        n_bench=len(bn),
        n_overlapping=len(matches),
        n_train=len(tr),
        unit="table",
        match=cfg.match,
        threshold=1.0 if cfg.match == "exact" else cfg.threshold,
        matches=matches[:200],
    )

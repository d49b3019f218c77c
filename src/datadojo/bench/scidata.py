"""SciDataSailor-Bench: the Meta and QA tracks over scientific dataset folders (SciDataSailor §5, App. B).

**Tasks** (the task format ``datadojo synth sailor`` writes, see ``docs/evaluation.md``): JSONL files of
:class:`~datadojo.types.Task` records, one per line, each naming one dataset folder
(``files: [{"path": FOLDER, "kind": "dir"}]``, a relative path is taken from the task file's folder), a
``question`` (QA: the question; Meta: the exploration intent to summarise), the reference ``answer`` and
``answer_kind`` ``sailor_qa`` or ``sailor_meta`` (the judge rubric). ``category`` is the track (``qa`` /
``meta``), ``difficulty`` the seed level ``L0``–``L3``, ``extra`` holds ``track``, ``seed_id``,
``intent`` and optionally ``evidence`` / ``tree_node``. ``path`` given to :meth:`SciData.load` is a task
file, or a folder holding ``qa.jsonl`` and/or ``meta.jsonl`` (what ``synth sailor`` writes).

**Protocol** (§5.1, App. B.1): Python is the only tool; the folder is mounted read-only in a sandbox that
keeps its Python state between calls (persistent mode) with a per-call wall-clock limit; the model sees a
head of 4,000 and a tail of 1,500 characters of each observation (the truncation of SciDataSailor's
public code). ReAct-step budgets of 12 (default) and 24; sampling at temperature 0.6, top-p 0.95. The
sailor tag dialect (``<python>``/``<result>``) is the default.

**Scoring** (§5.1, App. B.2.2–B.2.3): an LLM judge compares the final answer with the reference under
the meta-information rubric (Meta) or the scientific-QA rubric (QA), returning a binary score; Pass@1 is
the mean judge score, the success rate the share of episodes that produced an answer within the budget.
The paper scores QA with "tolerance-aware matching ... and unit-consistency checks" but publishes the QA
rubric for its judge; DataDojo uses that rubric (numbers, units and entities are the judge's to compare).

Official totals: ``accuracy`` (= ``exact``, the judge is binary), the same per track (``qa``, ``meta``)
and per level (``L0``…``L3``) for the tracks and levels present, and ``judge_errors``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datadojo.bench.base import BenchmarkDefaults, BenchmarkError, ItemScore, unique_id
from datadojo.bench.judged import JudgedBenchmark
from datadojo.jsonl import JsonlError, read_tasks
from datadojo.types import Task

if TYPE_CHECKING:
    from datadojo.sandbox import SandboxConfig

__all__ = [
    "HEAD_CHARS",
    "PAPER_MAX_TURNS",
    "READERS_NOTE",
    "RUBRIC_OF_TRACK",
    "TAIL_CHARS",
    "TIMEOUT_S",
    "SciData",
    "task_files",
]

#: The ReAct-step budgets of SciDataSailor Tables 2-4 (§5.1); the first is the default.
PAPER_MAX_TURNS = (12, 24)
#: Observation truncation of SciDataSailor's public code: head and tail characters kept.
HEAD_CHARS, TAIL_CHARS = 4000, 1500
#: Per-call wall-clock (and CPU) seconds. The paper bounds each call but gives no number; scientific files
#: take longer to open than DataMind's small tables, so this is twice the sandbox default.
TIMEOUT_S = 120.0
#: Track name -> judge rubric (:mod:`datadojo.reward.judge_prompts`).
RUBRIC_OF_TRACK = {"qa": "sailor_qa", "meta": "sailor_meta"}
_TRACK_OF_RUBRIC = {v: k for k, v in RUBRIC_OF_TRACK.items()}
LEVELS = ("L0", "L1", "L2", "L3")
#: Added as the task description when a task has none: which readers the sandbox offers.
READERS_NOTE = (
    "A scientific dataset folder (it may hold NetCDF, HDF5/NeXus, CSV, Parquet, Excel, JSON, YAML, FASTA and "
    "README files in nested directories). It is read-only. Readers available: pandas, numpy, pyarrow "
    "(Parquet), h5py (HDF5/NeXus), netCDF4 and xarray (NetCDF), openpyxl (Excel); plain Python for FASTA, "
    "JSON and text."
)
_FILES = ("qa.jsonl", "meta.jsonl")


def task_files(path: str | Path) -> list[Path]:
    """The task files at ``path``: the file itself, or a folder's ``qa.jsonl`` and/or ``meta.jsonl``."""
    p = Path(path)
    if p.is_dir():
        found = [p / name for name in _FILES if (p / name).is_file()]
        if not found:
            raise BenchmarkError(f"scidata: {p} holds neither qa.jsonl nor meta.jsonl")
        return found
    if not p.exists():
        raise BenchmarkError(f"scidata: task file not found: {p}")
    return [p]


class SciData(JudgedBenchmark):
    name = "scidata"
    description = "SciDataSailor-Bench: Meta (repository summaries) and QA over scientific dataset folders"
    metric = "judge"
    defaults = BenchmarkDefaults(
        max_turns=PAPER_MAX_TURNS[0], language="python", dialect="sailor", temperature=0.6, top_p=0.95
    )

    def load(
        self, path: str | Path, *, require_files: bool = True, track: str = "all", **options: Any
    ) -> Iterator[Task]:
        """Tasks of the ``track`` (``qa``, ``meta`` or ``all``) from the task file(s) at ``path``.

        Every record is checked: a reference answer, a known ``answer_kind``, a track that agrees with it,
        exactly one dataset folder (which must exist when ``require_files``). Errors name the file, the
        record number and the task id.
        """
        if options:
            raise TypeError(f"scidata: unknown option(s) {', '.join(sorted(options))}")
        if track not in ("qa", "meta", "all"):
            raise BenchmarkError(f"scidata: track must be qa, meta or all, got {track!r}")
        seen: dict[str, int] = {}
        for file in task_files(path):
            try:
                for i, task in enumerate(read_tasks(file), start=1):
                    task = self._check(task, f"{file} record {i} (id {task.id!r})", require_files)
                    if track != "all" and task.category != track:
                        continue
                    new_id = unique_id(seen, task.id, f"{file} record {i}")
                    yield task if new_id == task.id else task.model_copy(update={"id": new_id})
            except JsonlError as exc:
                raise BenchmarkError(str(exc)) from exc

    def _check(self, task: Task, where: str, require_files: bool) -> Task:
        if task.answer_kind not in _TRACK_OF_RUBRIC:
            raise BenchmarkError(
                f"{where}: answer_kind must be sailor_qa or sailor_meta, got {task.answer_kind!r}"
            )
        track = _TRACK_OF_RUBRIC[task.answer_kind]
        for field, value in (("category", task.category), ("extra.track", task.extra.get("track"))):
            if value is not None and value != track:
                raise BenchmarkError(
                    f"{where}: {field} {value!r} disagrees with answer_kind {task.answer_kind!r}"
                )
        if not isinstance(task.answer, str) or not task.answer.strip():
            raise BenchmarkError(f"{where}: the reference answer must be non-empty text")
        if not task.question.strip():
            raise BenchmarkError(f"{where}: the question is empty")
        folders = [f for f in task.files if f.kind == "dir"]
        if len(task.files) != 1 or len(folders) != 1:
            raise BenchmarkError(
                f'{where}: a task names exactly one dataset folder (files: [{{"path": ..., "kind": "dir"}}]), '
                f"got {[f.path for f in task.files]}"
            )
        folder = Path(folders[0].path)
        if require_files and not folder.is_dir():
            raise BenchmarkError(f"{where}: dataset folder not found: {folder}")
        if task.difficulty is not None and str(task.difficulty) not in LEVELS:
            raise BenchmarkError(
                f"{where}: difficulty must be one of {', '.join(LEVELS)}, got {task.difficulty!r}"
            )
        return task.model_copy(
            update={
                "category": track,
                "source": task.source or self.name,
                "description": task.description or READERS_NOTE,
                "extra": {**task.extra, "track": track},
            }
        )

    def sandbox_config(self) -> SandboxConfig:
        """Persistent Python state, the paper's head/tail truncation, :data:`TIMEOUT_S` per call."""
        from datadojo.sandbox import Limits, SandboxConfig

        limits = Limits(
            wall_s=TIMEOUT_S,
            cpu_s=TIMEOUT_S,
            observation_head_chars=HEAD_CHARS,
            observation_tail_chars=TAIL_CHARS,
        )
        return SandboxConfig(mode="persistent", limits=limits)

    def rubric_for(self, task: Task) -> str:
        if task.answer_kind in _TRACK_OF_RUBRIC:
            return str(task.answer_kind)
        track = task.category or task.extra.get("track")
        if track in RUBRIC_OF_TRACK:
            return RUBRIC_OF_TRACK[str(track)]
        raise BenchmarkError(f"scidata: task {task.id!r}: neither answer_kind nor track names a judge rubric")

    def totals(self, items: Sequence[tuple[Task, ItemScore]]) -> dict[str, float]:
        """Overall, per track and per level accuracy, and the judge failures (module docstring)."""
        out = super().totals(items)
        groups: dict[str, list[float]] = {}
        for task, s in items:
            groups.setdefault(str(task.category), []).append(s.score)
            if task.difficulty is not None:
                groups.setdefault(str(task.difficulty), []).append(s.score)
        for key in (*RUBRIC_OF_TRACK, *LEVELS):
            if key in groups:
                out[key] = sum(groups[key]) / len(groups[key])
        return out

"""SciDataSailor-Bench: the Meta and QA tracks over scientific dataset folders (SciDataSailor §5, App. B).

**Tasks** (the task format ``datadojo synth sailor`` writes, see ``docs/evaluation.md``): JSONL files of
:class:`~datadojo.types.Task` records, one per line, each naming one dataset folder
(``files: [{"path": FOLDER, "kind": "dir"}]``, a relative path is taken from the task file's folder), a
``question`` (QA: the question; Meta: the exploration intent to summarize), the reference ``answer`` and
``answer_kind`` ``sailor_qa`` or ``sailor_meta`` (the judge rubric). ``category`` is the track (``qa`` /
``meta``), ``difficulty`` the seed level ``L0``–``L3``, ``extra`` holds ``track``, ``seed_id``,
``intent`` and optionally ``evidence`` / ``tree_node``. ``path`` given to :meth:`SciData.load` is a task
file, or a folder holding ``qa.jsonl`` and/or ``meta.jsonl`` (what ``synth sailor`` writes).

**Protocol** (§5.1, App. B.1): Python is the only tool; the folder is mounted read-only in a sandbox that
keeps its Python state between calls (persistent mode) with a per-call wall-clock limit; the model sees a
head of 4,000 and a tail of 1,500 characters of each observation (the truncation of SciDataSailor's
public code). ReAct-step budgets of 12 (default) and 24; sampling at temperature 0.6, top-p 0.95. The
sailor tag dialect (``<python>``/``<result>``) is the default.

**Scoring** (§5.1, App. B.2.2–B.2.3). Meta: an LLM judge compares the summary with the reference under
the meta-information rubric, returning a binary score. QA: "tolerance-aware matching for numerical
answers and textual, categorical, and unit-consistency checks" (§5), i.e. the rule-based matcher
:func:`datadojo.compare.scientific.match_scientific`, or the judge with the scientific-QA rubric, or both,
by the loader option ``qa_scoring`` (:data:`QA_SCORING_MODES`):

``rule`` (default)
    the matcher alone. The paper's stated QA metric; deterministic (Pass@1 does not depend on which judge
    model is at hand), free, and the only mode ``datadojo score`` can apply without a judge.
``judge``
    the judge's verdict decides (DataDojo's behaviour before the matcher existed); the rule's verdict is
    still computed and recorded.
``rule+judge``
    both are asked and recorded; the rule decides only where it is certain (``decisive``: numbers, units,
    yes/no or short categorical values it could read, or a wrong name beside the right number, which is
    wrong), the judge wherever the rule is not (free text, several candidate numbers, a hedge or range, a
    reference name the answer does not state). A rule's 1.0 never overrides the judge's 0 when the rule
    was guessing. Recommended for synthesized QA whose references are sentences.

``qa_rel_tol`` / ``qa_abs_tol`` set the matcher's tolerances (default 1% / 1e-6,
:class:`~datadojo.compare.scientific.ScientificConfig`). Each QA item records ``parts["rule"]`` (correct,
reason, kind, decisive), ``parts["judge"]`` where the judge was asked, ``parts["decided_by"]`` and, under
``rule`` when the rule was not certain, ``parts["undecided"]`` (counted in the run's summary and report
as the undecided share).
Pass@1 is the mean score, the success rate the share of episodes that produced an answer within the
budget.

Official totals: ``accuracy`` (= ``exact``, both rules are binary), the same per track (``qa``,
``meta``) and per level (``L0``…``L3``) for the tracks and levels present, ``judge_errors``,
``qa_rule`` (the matcher's accuracy on QA, whatever decided) and, where the judge was asked about QA,
``qa_judge`` (its accuracy) and ``qa_rule_judge_agreement`` (share of answered QA items on which the two
verdicts agree).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from datadojo.bench.base import BenchmarkDefaults, BenchmarkError, ItemScore, missing_prediction, unique_id
from datadojo.bench.judged import JudgedBenchmark, JudgeFailure, verdict_key
from datadojo.compare.scientific import ScientificConfig, ScientificMatch, match_scientific
from datadojo.jsonl import JsonlError, read_tasks
from datadojo.types import Task

if TYPE_CHECKING:
    from datadojo.sandbox import SandboxConfig

__all__ = [
    "HEAD_CHARS",
    "PAPER_MAX_TURNS",
    "QA_SCORING_MODES",
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
#: Track name -> judge rubric (:mod:`datadojo.compare.judge_prompts`).
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
#: How QA answers are scored (module docstring); the first is the default.
QA_SCORING_MODES = ("rule", "judge", "rule+judge")
#: Where :meth:`SciData.load` records the QA scoring policy on each QA task.
_POLICY_KEY = "qa_scoring"


def _qa_policy(mode: Any, rel_tol: Any, abs_tol: Any) -> dict[str, Any]:
    """The QA scoring policy from the loader options (strings from the command line are accepted)."""
    if mode not in QA_SCORING_MODES:
        raise BenchmarkError(
            f"scidata: qa_scoring must be one of {', '.join(QA_SCORING_MODES)}, got {mode!r}"
        )
    defaults = ScientificConfig()
    tol: dict[str, float] = {}
    for name, value, default in (
        ("rel_tol", rel_tol, defaults.rel_tol),
        ("abs_tol", abs_tol, defaults.abs_tol),
    ):
        try:
            tol[name] = default if value is None else float(value)
        except (TypeError, ValueError):
            raise BenchmarkError(f"scidata: qa_{name} must be a number, got {value!r}") from None
    try:
        ScientificConfig(**tol)
    except ValueError as exc:
        raise BenchmarkError(f"scidata: {exc}") from exc
    return {"mode": mode, **tol}


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


def _not_tasks_hint(file: Path) -> str:
    """A hint when ``file`` is another output of ``synth sailor`` (trajectories, tree, QC) rather than tasks."""
    try:
        with file.open(encoding="utf-8") as fh:
            first = json.loads(next((line for line in fh if line.strip()), "null"))
    except (OSError, ValueError):
        return ""
    if not isinstance(first, dict):
        return ""
    kind = (
        "trajectories"
        if {"task_id", "turns"} <= first.keys()
        else "tree"
        if first.get("type") in ("node", "select")
        else "QC"
        if {"unit", "reason", "kept"} <= first.keys()
        else None
    )
    if kind is None:
        return ""
    return f" — this looks like a synth sailor {kind} file; give --data the run folder or its qa.jsonl / meta.jsonl"


class SciData(JudgedBenchmark):
    name = "scidata"
    description = "SciDataSailor-Bench: Meta (repository summaries) and QA over scientific dataset folders"
    metric = "judge"
    layout = (
        "a synth sailor run folder holding qa.jsonl and/or meta.jsonl, or one such task file "
        "(JSONL of tasks, each naming one dataset folder)"
    )
    defaults = BenchmarkDefaults(
        max_turns=PAPER_MAX_TURNS[0], language="python", dialect="sailor", temperature=0.6, top_p=0.95
    )

    def load(
        self,
        path: str | Path,
        *,
        require_files: bool = True,
        track: str = "all",
        qa_scoring: str = QA_SCORING_MODES[0],
        qa_rel_tol: float | str | None = None,
        qa_abs_tol: float | str | None = None,
        **options: Any,
    ) -> Iterator[Task]:
        """Tasks of the ``track`` (``qa``, ``meta`` or ``all``) from the task file(s) at ``path``.

        Every record is checked: a reference answer, a known ``answer_kind``, a track that agrees with it,
        exactly one dataset folder (which must exist when ``require_files``). Errors name the file, the
        record number and the task id. ``qa_scoring``, ``qa_rel_tol`` and ``qa_abs_tol`` choose how QA
        answers are scored (module docstring); the policy is recorded on each QA task
        (``extra["qa_scoring"]``), so scoring needs nothing but the task.
        """
        if options:
            raise TypeError(f"scidata: unknown option(s) {', '.join(sorted(options))}")
        if track not in ("qa", "meta", "all"):
            raise BenchmarkError(f"scidata: track must be qa, meta or all, got {track!r}")
        policy = _qa_policy(qa_scoring, qa_rel_tol, qa_abs_tol)
        seen: dict[str, int] = {}
        for file in task_files(path):
            self._text_file(file)
            try:
                for i, task in enumerate(read_tasks(file), start=1):
                    task = self._check(task, f"{file} record {i} (id {task.id!r})", require_files)
                    if track != "all" and task.category != track:
                        continue
                    if task.category == "qa":
                        task = task.model_copy(update={"extra": {**task.extra, _POLICY_KEY: policy}})
                    new_id = unique_id(seen, task.id, f"{file} record {i}")
                    yield task if new_id == task.id else task.model_copy(update={"id": new_id})
            except JsonlError as exc:
                hint = _not_tasks_hint(file)
                raise (BenchmarkError(str(exc) + hint) if hint else self.layout_error(str(exc))) from exc

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

    @staticmethod
    def qa_policy(task: Task) -> tuple[str, ScientificConfig]:
        """The QA scoring mode and matcher settings :meth:`load` recorded on ``task`` (defaults if none)."""
        policy = task.extra.get(_POLICY_KEY) or {}
        mode = policy.get("mode", QA_SCORING_MODES[0])
        if mode not in QA_SCORING_MODES:
            raise BenchmarkError(f"scidata: task {task.id!r}: unknown qa_scoring {mode!r}")
        tol = {k: float(policy[k]) for k in ("rel_tol", "abs_tol") if k in policy}
        return mode, ScientificConfig(**tol)

    def wants_verdict(self, task: Task) -> bool:
        """Meta always; QA unless it is scored by the rule alone."""
        return task.category != "qa" or self.qa_policy(task)[0] != "rule"

    def score(self, task: Task, prediction: str | None) -> ItemScore:
        """Meta: the judge's verdict. QA: the matcher, the judge or both by ``qa_scoring`` (module docstring)."""
        if task.category != "qa":
            missing = (
                bool(prediction and prediction.strip())
                and verdict_key(task.id, str(prediction)) not in self._verdicts
            )
            if not self.judged or missing:
                raise BenchmarkError(
                    f"scidata: task {task.id!r} is a Meta task: Meta summaries are scored only by an LLM judge "
                    "(App. B.2) and there is no judge verdict for it. Score the QA track alone with "
                    "`--option track=qa`, or run `datadojo eval scidata ... --judge SPEC`"
                )
            return super().score(task, prediction)
        mode, cfg = self.qa_policy(task)
        metric = f"sailor_qa/{mode}"
        if prediction is None:
            return missing_prediction(metric)
        if not prediction.strip():
            return ItemScore(0.0, False, "", "empty answer", metric, {"qa_scoring": mode})
        try:
            rule = match_scientific(prediction, str(task.answer), cfg, question=task.question or None)
        except ValueError as exc:
            raise BenchmarkError(f"scidata: task {task.id!r}: {exc}") from exc
        parts: dict[str, Any] = {"qa_scoring": mode, "rule": rule.to_dict()}
        if mode == "rule":
            parts["decided_by"] = "rule"
            if not rule.decisive:  # no judge to ask: the rule's guess stands and is counted as undecided
                parts["undecided"] = True
            return self._qa_score(rule.correct, f"rule: {rule.reason}", prediction, metric, parts)
        verdict = self._verdicts.get(verdict_key(task.id, prediction))
        if verdict is None:
            raise BenchmarkError(
                f"scidata: task {task.id!r}: qa_scoring={mode} needs a judge verdict for this answer; run "
                "`datadojo eval scidata ... --judge SPEC`, or score QA by rule alone with "
                "`--option qa_scoring=rule`"
            )
        return self._combine(rule, verdict, mode, prediction, metric, parts)

    def _combine(
        self,
        rule: ScientificMatch,
        verdict: Any,
        mode: str,
        prediction: str,
        metric: str,
        parts: dict[str, Any],
    ) -> ItemScore:
        if isinstance(verdict, JudgeFailure):
            parts["judge"] = {"error": verdict.message}
        else:
            parts["judge"] = {
                "correct": verdict.correct, "reason": verdict.reason, "model": verdict.model,
                "cached": verdict.cached, "attempts": verdict.attempts,
            }  # fmt: skip
        if mode == "rule+judge" and rule.decisive:
            parts["decided_by"] = "rule"
            return self._qa_score(rule.correct, f"rule: {rule.reason}", prediction, metric, parts)
        parts["decided_by"] = "judge"
        if isinstance(verdict, JudgeFailure):
            parts["judge_error"] = True
            return self._qa_score(False, f"judge failed: {verdict.message}", prediction, metric, parts)
        reason = verdict.reason or ("correct" if verdict.correct else "wrong")
        return self._qa_score(verdict.correct, f"judge: {reason}", prediction, metric, parts)

    @staticmethod
    def _qa_score(
        correct: bool, reason: str, prediction: str, metric: str, parts: dict[str, Any]
    ) -> ItemScore:
        return ItemScore(float(correct), correct, prediction.strip(), reason, metric, parts)

    def totals(self, items: Sequence[tuple[Task, ItemScore]]) -> dict[str, float]:
        """Overall, per track and per level accuracy, the judge failures, rule vs judge on QA (module docstring)."""
        out = super().totals(items)
        qa = [(task, s) for task, s in items if task.category == "qa"]
        if qa:
            out["qa_rule"] = sum(bool(s.parts.get("rule", {}).get("correct")) for _, s in qa) / len(qa)
            judged = [s for task, s in qa if self.qa_policy(task)[0] != "rule"]
            if judged:  # unanswered items count as wrong, as in the official figure
                out["qa_judge"] = sum(bool(s.parts.get("judge", {}).get("correct")) for s in judged) / len(
                    judged
                )
                both = [s for s in judged if "correct" in s.parts.get("judge", {}) and "rule" in s.parts]
                if both:
                    agree = sum(s.parts["rule"]["correct"] == s.parts["judge"]["correct"] for s in both)
                    out["qa_rule_judge_agreement"] = agree / len(both)
        groups: dict[str, list[float]] = {}
        for task, s in items:
            groups.setdefault(str(task.category), []).append(s.score)
            if task.difficulty is not None:
                groups.setdefault(str(task.difficulty), []).append(s.score)
        for key in (*RUBRIC_OF_TRACK, *LEVELS):
            if key in groups:
                out[key] = sum(groups[key]) / len(groups[key])
        return out

"""``tasks``: a user's own task file scored with DataDojo's tolerant matcher (``datadojo score tasks``).

Any JSONL file of :class:`~datadojo.types.Task` records that carry a reference ``answer`` — hand-written
tasks, DataMind's curated queries, warm-up tasks, the demo's — is a benchmark: ``datadojo score tasks
--data TASKS.jsonl -p PREDICTIONS.jsonl`` scores predictions (or a rollout's trajectories) against it, and
``datadojo eval tasks --data TASKS.jsonl`` runs an agent on it. Why: before, only the published benchmarks
could be scored from the command line, and a user with their own questions had to write Python.

**Layout**: ``path`` is the task file, or a folder holding ``tasks.jsonl``. Relative data-file paths are
taken from the task file's folder (as everywhere, :func:`datadojo.jsonl.read_tasks`). Every task needs a
non-empty ``answer``; ``answer_kind`` is one of the matcher's kinds (``number``, ``text``, ``bool``,
``list``, ``ordered_list``, ``record``, ``table``, or an alias such as ``numeric``/``boolean``) or absent
(the kind is then inferred from the answer). Kinds that need another scorer (``sailor_qa`` /
``sailor_meta``: ``score scidata``; ``sql``: a database) are refused with the command that scores them.

**Scoring** (rule ``match``): :func:`datadojo.compare.matchers.match_task` — numbers within a relative
tolerance of 3 % (DataMind §3.2/§4's judge rule, boundary included), SQuAD-normalized text, yes/no,
order-insensitive lists, records and tables (see :mod:`datadojo.compare.matchers`). The loader options
``rel_tol``, ``abs_tol``, ``exact_integers`` and ``ordered_lists`` (``--option rel_tol=0.01``) set
:class:`~datadojo.compare.matchers.MatchConfig`; the policy is recorded on each task
(``extra["match_config"]``) so scoring needs nothing but the task. Each item records the rule's
``kind`` and whether it was certain (``decided``); totals add ``undecided``, the share of items where
the matcher guessed (free text, several candidate numbers), which a judge would have to settle.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from datadojo.bench.base import (
    Benchmark,
    BenchmarkDefaults,
    BenchmarkError,
    ItemScore,
    ScoringRule,
    missing_prediction,
    unique_id,
)
from datadojo.compare.matchers import (
    MATCH_KINDS,
    MatchConfig,
    canonical_kind,
    match_task,
    reference_problem,
)
from datadojo.jsonl import JsonlError, iter_jsonl, read_tasks
from datadojo.types import Task

__all__ = ["OwnTasks", "unscorable_reason"]

_CONFIG_KEY = "match_config"
#: Answer kinds of DataDojo's own generators that another command scores.
_ELSEWHERE = {
    "sailor_qa": "datadojo score scidata",
    "sailor_meta": "datadojo score scidata (an LLM judge)",
    "sql": "datadojo score spider (a database to run it on)",
    "sql_result": "datadojo score spider2-lite (a database to run it on)",
    "dabstep": "datadojo score dabstep",
    "envlunch": "datadojo warmup score",
}
_OPTION_TYPES: dict[str, type] = {
    "rel_tol": float,
    "abs_tol": float,
    "exact_integers": bool,
    "ordered_lists": bool,
}


class OwnTasks(Benchmark):
    name = "tasks"
    description = "your own task file (JSONL of tasks with answers), scored with DataDojo's tolerant matcher"
    metric = "accuracy"
    layout = (
        "a JSONL file of tasks, one per line, each with id, question, files and a reference answer "
        "(answer_kind optional), or a folder holding tasks.jsonl"
    )
    rules = (
        ScoringRule(
            "match",
            "DataDojo's tolerant matcher: numbers within 3% (DataMind §3.2), normalized text, yes/no, "
            "order-insensitive lists, records, tables",
            "rule-tasks-match",
        ),
    )
    defaults = BenchmarkDefaults()

    def load(self, path: str | Path, *, require_files: bool = True, **options: Any) -> Iterator[Task]:
        """The tasks of the file at ``path`` (module docstring); ``options`` set the matcher's tolerances."""
        config = self._config(options)
        src = self._file_or_folder(path, "tasks.jsonl")
        seen: dict[str, int] = {}
        tasks: list[Task] = []
        problems: list[str] = []
        try:
            lines = [lineno for lineno, _ in iter_jsonl(src, skip_partial_tail=False)]
            for lineno, task in zip(lines, read_tasks(src, skip_partial_tail=False), strict=True):
                where = f"{src}:{lineno} (id {task.id!r})"
                problem = self._problem(task, require_files)
                if problem is not None:
                    problems.append(f"{where}: {problem}")
                    continue
                new_id = unique_id(seen, task.id, f"{src}:{lineno}")
                extra = {**task.extra, _CONFIG_KEY: config}
                tasks.append(
                    task.model_copy(update={"id": new_id, "extra": extra, "source": task.source or self.name})
                )
        except JsonlError as exc:
            raise self.layout_error(str(exc)) from exc
        if len(problems) == 1:
            raise BenchmarkError(f"{problems[0]}; fix it and rerun")
        if problems:
            # Every bad record at once, one line each, before anything is scored: a score over the records
            # that happen to be valid would be a different benchmark, reported under the file's name.
            raise BenchmarkError(
                f"{src}: {len(problems)} of {len(lines)} task(s) cannot be scored; fix them and rerun:\n"
                + "\n".join(f"  {p}" for p in problems)
            )
        yield from tasks

    def _config(self, options: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(options) - set(_OPTION_TYPES))
        if unknown:
            raise TypeError(
                f"{self.name}: unknown option(s) {', '.join(unknown)}; known: {', '.join(_OPTION_TYPES)}"
            )
        out: dict[str, Any] = {}
        for key, value in options.items():
            kind = _OPTION_TYPES[key]
            if kind is bool and not isinstance(value, bool):
                raise self.layout_error(f"option {key} must be true or false, got {value!r}")
            try:
                out[key] = kind(value)
            except (TypeError, ValueError):
                raise self.layout_error(f"option {key} must be a number, got {value!r}") from None
        try:
            return MatchConfig(**out).to_dict()
        except ValueError as exc:
            raise self.layout_error(f"matcher options: {exc}") from exc

    def _problem(self, task: Task, require_files: bool) -> str | None:
        """Why ``task`` cannot be scored (field and reason), or ``None``."""
        problem = unscorable_reason(task)
        if problem is not None:
            return problem
        if require_files:
            for f in task.files:
                if not Path(f.path).exists():
                    return f"field 'files': data file not found: {f.path}"
        return None

    def score(self, task: Task, prediction: str | None) -> ItemScore:
        """:func:`~datadojo.compare.matchers.match_task` under the task's recorded tolerances."""
        if prediction is None:
            return missing_prediction("match")
        config = MatchConfig(**task.extra.get(_CONFIG_KEY, {}))
        result = match_task(task, prediction, config)
        return ItemScore(
            1.0 if result.correct else 0.0,
            result.correct,
            prediction.strip() or None,
            result.reason,
            "match",
            {"kind": result.kind, "decided": result.decided},
        )

    def totals(self, items: Sequence[tuple[Task, ItemScore]]) -> dict[str, float]:
        """Accuracy and exact (the same: the rule is binary) plus ``undecided``, the share of guesses."""
        out = super().totals(items)
        answered = [s for _, s in items if s.parsed is not None]
        out["undecided"] = (
            sum(not s.parts.get("decided", True) for s in answered) / len(answered) if answered else 0.0
        )
        return out


def unscorable_reason(task: Task) -> str | None:
    """Why the ``match`` rule cannot score ``task`` (the field and the reason), or ``None`` when it can.

    Shared by ``score tasks`` / ``eval tasks`` (which refuse such a record) and ``rollout``'s accuracy
    (which leaves it out and counts it), so the commands agree on which tasks are scorable.
    """
    if task.answer is None or (isinstance(task.answer, str) and not task.answer.strip()):
        return "field 'answer': no reference answer; a scored task needs one"
    kind = task.answer_kind
    if kind in _ELSEWHERE:
        return f"field 'answer_kind': {kind!r} is scored by `{_ELSEWHERE[kind]}`, not `tasks`"
    if kind is not None and canonical_kind(kind) is None:
        return (
            f"field 'answer_kind': unknown kind {kind!r}; use one of {', '.join(MATCH_KINDS)} or leave it out"
        )
    problem = reference_problem(task.answer, kind)
    if problem is not None:
        return f"field 'answer': {problem}" + (f" (answer_kind {kind!r})" if kind else "")
    return None

"""``datadojo bench export NAME``: a benchmark's tasks as an RL task file (``rl_tasks.jsonl``).

Why: a user who trains on a benchmark's public split (or its dev split) needs the tasks in the file format
``datadojo train rl --tasks`` and ``datadojo export verl --tasks`` read (one :class:`~datadojo.types.Task`
per line), each still scored by the benchmark's own rule: the exported task keeps ``source`` = the
benchmark's name, and DataDojo's answer reward (:func:`datadojo.reward.datamind.default_answer_check`)
scores a task whose ``source`` names a registered benchmark with that benchmark's :meth:`score`, so RL
optimizes the metric reported at evaluation. The benchmark's answer-format hint goes into ``extra`` as
``eval`` gives it (the system prompt shows it).

What is left out, and counted: tasks without a public answer (a hidden test split), and tasks only an LLM
judge can score (:meth:`~datadojo.bench.judged.JudgedBenchmark.wants_verdict`, e.g. KramaBench's
``string_approximate`` unless ``paraphrase=rule``): the reward scores synchronously, without a judge.
The file is written atomically (temporary file + rename).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datadojo.bench.base import Benchmark
from datadojo.bench.judged import JudgedBenchmark
from datadojo.jsonl import write_jsonl_atomic
from datadojo.types import Task

__all__ = ["ExportReport", "export_rl_tasks"]


@dataclass
class ExportReport:
    """Where the tasks went, how many, and which were left out and why."""

    path: Path
    written: int = 0
    no_answer: list[str] = field(default_factory=list)
    needs_judge: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "written": self.written,
            "no_answer": len(self.no_answer),
            "needs_judge": len(self.needs_judge),
        }


def export_rl_tasks(
    benchmark: Benchmark,
    data: str | Path,
    out: str | Path,
    *,
    options: dict[str, Any] | None = None,
    limit: int | None = None,
) -> ExportReport:
    """Write ``benchmark``'s tasks from ``data`` (its official layout) to ``out`` as RL tasks (module doc).

    ``options`` go to the loader (``split``, ``domain``, ``paraphrase``, …); ``limit`` keeps the first N
    exported tasks. Data files are required: an RL episode runs on them.
    """
    report = ExportReport(Path(out))
    tasks: list[Task] = []
    fmt = benchmark.defaults.answer_format
    for task in benchmark.load(data, require_files=True, **dict(options or {})):
        if task.answer is None:
            report.no_answer.append(task.id)
            continue
        if isinstance(benchmark, JudgedBenchmark) and benchmark.wants_verdict(task):
            report.needs_judge.append(task.id)
            continue
        extra = dict(task.extra)
        if fmt and not extra.get("answer_format"):
            extra["answer_format"] = fmt
        tasks.append(task.model_copy(update={"source": benchmark.name, "extra": extra}))
        if limit is not None and len(tasks) >= limit:
            break
    report.written = write_jsonl_atomic(report.path, tasks)
    return report

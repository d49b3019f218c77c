"""A benchmark's tasks with public answers as an RL task file (``datadojo bench export NAME``).

Why: a benchmark whose answers are released (DABstep's dev split, Spider 2.0-lite's local gold tables,
DABench's labels, …) can be trained on, and the reward should then be the benchmark's own verdict, not a
looser stand-in. The export writes ``rl_tasks.jsonl`` — one :class:`~datadojo.types.Task` per line, what
``datadojo train rl --tasks`` and the recipes' ``rl_tasks`` stage read — with:

* ``source`` = the benchmark's name, so the default reward (:func:`datadojo.reward.datamind.
  default_answer_check`) scores every answer with the benchmark's official rule;
* data-file paths made absolute (the file is read from wherever it is copied to);
* the answer format the benchmark's agents are evaluated with in ``extra["answer_format"]`` (as
  ``datadojo eval`` adds it), so the policy is trained on the prompt it will be evaluated on;
* only tasks with a public reference (:meth:`Benchmark.has_public_answer`); the others are counted and
  the first few named, never silently dropped;
* only tasks the reward can score: a task only an LLM judge scores (a judged benchmark's
  :meth:`~datadojo.bench.judged.JudgedBenchmark.wants_verdict`, e.g. KramaBench's ``string_approximate``
  unless ``paraphrase=rule``) is left out and counted apart (``needs_judge``), since the reward's
  benchmark check runs without a judge and would refuse it mid-training.

The file is written atomically (temporary file, then rename).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datadojo.bench.base import Benchmark
from datadojo.bench.judged import JudgedBenchmark
from datadojo.jsonl import write_jsonl_atomic
from datadojo.types import Task

__all__ = ["RL_TASKS", "RLExport", "export_rl_tasks"]

#: The file name every RL task export uses.
RL_TASKS = "rl_tasks.jsonl"


@dataclass
class RLExport:
    """What an export wrote: the file, how many tasks, and which tasks were left out (no public answer)."""

    path: Path
    written: int
    skipped: list[str] = field(default_factory=list)
    #: tasks with a public answer that only an LLM judge can score (left out: the reward has no judge)
    needs_judge: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "written": self.written, "skipped": len(self.skipped),
                "skipped_ids": self.skipped[:20], "needs_judge": len(self.needs_judge),
                "needs_judge_ids": self.needs_judge[:20]}  # fmt: skip


def _portable(task: Task, benchmark: Benchmark) -> Task:
    files = [f.model_copy(update={"path": str(Path(f.path).resolve())}) for f in task.files]
    extra = dict(task.extra)
    if benchmark.defaults.answer_format and not extra.get("answer_format"):
        extra["answer_format"] = benchmark.defaults.answer_format
    return task.model_copy(update={"files": files, "extra": extra, "source": benchmark.name})


def export_rl_tasks(
    benchmark: Benchmark, data: str | Path, out: str | Path, *, options: dict[str, Any] | None = None
) -> RLExport:
    """Write ``benchmark``'s tasks from ``data`` that have a public answer to ``out`` (module docstring).

    ``out`` is the file, or a folder that receives ``rl_tasks.jsonl``. ``options`` are the loader's
    (``split``, …). The data files must be there (an RL episode needs them). A benchmark yielding no task
    with a public answer is a :class:`ValueError` naming it: an empty task file trains nothing.
    """
    target = Path(out)
    if target.is_dir() or not target.suffix:
        target = target / RL_TASKS
    kept: list[Task] = []
    skipped: list[str] = []
    needs_judge: list[str] = []
    for task in benchmark.load(data, require_files=True, **(options or {})):
        if not benchmark.has_public_answer(task):
            skipped.append(task.id)
        elif isinstance(benchmark, JudgedBenchmark) and benchmark.wants_verdict(task):
            needs_judge.append(task.id)
        else:
            kept.append(_portable(task, benchmark))
    if not kept and not needs_judge:
        raise ValueError(
            f"{benchmark.name}: none of the {len(skipped)} task(s) in {data} has a public answer; nothing to "
            "train on (DABstep: the dev split; the test split's answers are withheld)"
        )
    if not kept:
        raise ValueError(
            f"{benchmark.name}: {len(needs_judge)} of the {len(needs_judge) + len(skipped)} task(s) in {data} "
            "can only be scored by an LLM judge, the others have no public answer; nothing the reward can "
            "score (see the benchmark's loader options)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    written = write_jsonl_atomic(target, kept)
    return RLExport(target, written, skipped, needs_judge)

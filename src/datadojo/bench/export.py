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
  the first few named, never silently dropped.

The file is written atomically (temporary file, then rename).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datadojo.bench.base import Benchmark
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

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "written": self.written, "skipped": len(self.skipped),
                "skipped_ids": self.skipped[:20]}  # fmt: skip


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
    for task in benchmark.load(data, require_files=True, **(options or {})):
        if benchmark.has_public_answer(task):
            kept.append(_portable(task, benchmark))
        else:
            skipped.append(task.id)
    if not kept:
        raise ValueError(
            f"{benchmark.name}: none of the {len(skipped)} task(s) in {data} has a public answer; nothing to "
            "train on (DABstep: the dev split; the test split's answers are withheld)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    written = write_jsonl_atomic(target, kept)
    return RLExport(target, written, skipped)

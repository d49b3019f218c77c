"""DataDojo tasks carried through inspect_ai's samples: the task rides in the sample's metadata.

Why the whole task and not inspect's ``Sample.files``: inspect copies sample files into the sandbox with
``write_file``; DataDojo places data files itself (read-only views, hard links for large inputs, SQLite
files the SQL cells open), so the sandbox reads the task back from the metadata inspect hands to
``sample_init`` and places its files as ``datadojo eval`` would.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from datadojo.errors import DataDojoError
from datadojo.types import Task

__all__ = ["TASK_KEY", "sample_fields", "task_from_metadata"]

#: The sample-metadata key holding the DataDojo task (its JSON form).
TASK_KEY = "datadojo_task"


def sample_fields(task: Task) -> dict[str, Any]:
    """The keyword arguments of ``inspect_ai.dataset.Sample`` for ``task`` (input, target, id, metadata).

    ``target`` is the gold answer as text where the task has one: inspect shows it beside the model's
    answer; the score itself is DataDojo's reward, computed from the task in the metadata.
    """
    target = "" if task.answer is None else str(task.answer)
    return {
        "input": task.question,
        "target": target,
        "id": task.id,
        "metadata": {TASK_KEY: task.to_dict()},
    }


def task_from_metadata(metadata: Mapping[str, Any] | None) -> Task:
    """The DataDojo task a sample carries; a clear error for a sample that did not come from DataDojo."""
    data = (metadata or {}).get(TASK_KEY)
    if not isinstance(data, Mapping):
        sample_id = (metadata or {}).get("__sample_id__", "?")
        raise DataDojoError(
            f"sample {sample_id}: no DataDojo task in its metadata ({TASK_KEY!r}); the datadojo sandbox, "
            "solver and scorer run samples made by datadojo.integrations.inspect (inspect_task)"
        )
    return Task.model_validate(dict(data))

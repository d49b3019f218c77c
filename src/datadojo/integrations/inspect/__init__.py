"""DataDojo tasks and benchmarks as inspect_ai tasks, with DataDojo's sandbox as an inspect sandbox.

Public names (inspect_ai is imported only when one is used; ``pip install 'datadojo[inspect]'``)::

    inspect_task(tasks, ...)    an inspect ``Task`` over DataDojo tasks (the solver plays the dialect
                                episode, the scorer returns the registry's reward with its parts)
    register()                  registers the ``datadojo`` sandbox, solver, scorer and tasks with inspect
                                (done by inspect itself through the ``inspect_ai`` entry point)

From the command line, once DataDojo is installed: ``inspect eval datadojo/tasks -T path=tasks.jsonl``
or ``inspect eval datadojo/benchmark -T name=spider -T data=DIR``. See docs/environment.md, "inspect_ai".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from datadojo.lazy import lazy_exports

if TYPE_CHECKING:
    from datadojo.integrations.inspect.tasks import inspect_task, register

__all__ = ["inspect_task", "register"]

_WHERE = {"inspect_task": "tasks", "register": "tasks"}

__getattr__, __dir__ = lazy_exports("datadojo.integrations.inspect", _WHERE, globals())

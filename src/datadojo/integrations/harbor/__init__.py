"""DataDojo tasks as Harbor task folders, verified by DataDojo's reward registry.

Public names::

    export_harbor(tasks, out, ...)      one Harbor task folder per task (``datadojo export harbor``)
    verify_answer(task, answer, ...)    the registry's reward of an answer (what the folders' tests run)

Harbor itself is not needed to export or to verify: the folders are plain files and the verifier is
DataDojo. See docs/environment.md, "Harbor".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from datadojo.lazy import lazy_exports

if TYPE_CHECKING:
    from datadojo.integrations.harbor.export import export_harbor
    from datadojo.integrations.harbor.verify import verify_answer

__all__ = ["export_harbor", "verify_answer"]

_WHERE = {"export_harbor": "export", "verify_answer": "verify"}

__getattr__, __dir__ = lazy_exports("datadojo.integrations.harbor", _WHERE, globals())

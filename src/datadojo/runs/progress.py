"""One progress callback type for every stage (the CLI draws its bars with it).

Before the kit, DataMind had ``ProgressHook(stage, done, total)``, the demo ``DemoProgress`` of the same
shape, the sailor runner ``on_unit(record)``: this is the first one, kept as the shape for all.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["ProgressHook", "null_progress", "stage_progress"]

#: ``hook(stage, done, total)``: called with ``done = 0`` when a stage starts, then as it advances.
ProgressHook = Callable[[str, int, int], None]


def null_progress(_stage: str, _done: int, _total: int) -> None:
    """The hook used when nobody listens."""


def stage_progress(hook: ProgressHook | None, stage: str) -> Callable[[int, int], None]:
    """``(done, total)`` for one stage, as the library functions taking ``progress=`` / ``on_progress=`` want."""
    target = hook or null_progress
    return lambda done, total: target(stage, done, total)

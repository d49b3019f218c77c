"""Running agent code in a (forked) interpreter: fresh ``__main__``, one chunk, tracebacks, warm-up, streams.

Used by the forked child (:mod:`.child`) and the persistent kernel (:mod:`.kernel`); nothing here forks or
talks to the harness. Runs in the sandbox, so it imports nothing beyond the standard library and
:mod:`datadojo.sandbox.cells`.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import sys
import traceback
import types
from typing import Any

from datadojo.sandbox.cells import compile_cell, register_source

__all__ = [
    "PANDAS_WARM_UP",
    "chunk_list",
    "flush_std",
    "install_std_streams",
    "new_main_module",
    "run_code",
    "warm_up",
]


def chunk_list(msg: dict[str, Any]) -> list[tuple[str, str]]:
    """The ``(filename, code)`` chunks of a request."""
    return [(str(f), str(c)) for f, c in msg.get("chunks", [])]


def new_main_module() -> dict[str, Any]:
    """A fresh ``__main__`` namespace (registered in ``sys.modules`` so pickling cell objects works)."""
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    return module.__dict__


def _print_exception(exc: BaseException, filename: str) -> None:
    """Print a traceback that starts at the cell's own frame (the worker's frames are noise to the model)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    try:
        text = "".join(traceback.format_exception(type(exc), exc, tb))
    except Exception:  # an exception whose __str__ raises
        text = f"{type(exc).__name__}: <exception could not be formatted>\n"
    sys.stderr.write(text)


def run_code(
    code: str,
    filename: str,
    namespace: dict[str, Any],
    *,
    silent: bool,
    compiled: types.CodeType | None = None,
) -> dict[str, Any]:
    """Compile (unless ``compiled`` is given) and run one chunk in ``namespace``, printing output and
    tracebacks as a notebook would.

    Returns ``{"ok": bool, "exc": name | None, "missing": module | None}``; never raises (SystemExit and
    KeyboardInterrupt included: they end the chunk, not the process).
    """
    try:
        if compiled is None:
            register_source(code, filename)
            compiled = compile_cell(code, filename=filename, display_last=not silent, silent=silent)
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError) as exc:
        sys.stderr.write("".join(traceback.format_exception_only(type(exc), exc)))
        return {"ok": False, "exc": type(exc).__name__, "missing": None}
    try:
        exec(compiled, namespace)
    except SystemExit as exc:
        if exc.code in (None, 0):
            return {"ok": True, "exc": None, "missing": None}
        sys.stderr.write(f"SystemExit: {exc.code!r}\n")
        return {"ok": False, "exc": "SystemExit", "missing": None}
    except BaseException as exc:
        _print_exception(exc, filename)
        missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
        return {"ok": False, "exc": type(exc).__name__, "missing": missing}
    finally:
        flush_std()
    return {"ok": True, "exc": None, "missing": None}


#: A small, typical pandas workload (parse, group, aggregate, sort, merge, pivot, format), run once in the
#: worker after the preload (and once in a persistent kernel): pandas' lazy imports and first-call set-up
#: then happen once instead of in every forked child. Measured in a forked child: the first groupby over
#: a 1,000-row CSV drops from ~25 ms to ~15 ms. (Running it in every spare child too would bring that to
#: ~5 ms, but costs tens of milliseconds of CPU per cell: a bad trade when many sandboxes share cores.)
PANDAS_WARM_UP = """
import io
import numpy as np
import pandas as pd
df = pd.read_csv(io.StringIO("a,b,c,d\\n1,x,2.5,2024-01-02\\n2,y,3.5,2024-02-03\\n3,x,4.5,2024-03-04\\n"))
df["d"] = pd.to_datetime(df["d"])
g = df.groupby("b")["c"].agg(["mean", "sum", "count"]).sort_values("mean")
m = df.merge(df, on="a").pivot_table(index="b_x", values="c_x", aggfunc="mean")
text = g.to_string() + repr(df) + repr(df.describe()) + df.head().to_string() + repr(df["c"].round(3))
text += repr(m) + str(np.corrcoef(df["a"], df["c"])) + str(df.dtypes) + repr(df["b"].value_counts())
text += repr(df.iloc[0]) + repr(df.loc[df["c"] > 3, ["a", "c"]]) + repr(df.sum(numeric_only=True))
"""


def warm_up(*, pandas: bool) -> None:
    """Exercise the code paths of a cell once, before a request arrives.

    A forked child shares its memory with the worker copy-on-write; the first cell to run touches (and
    so copies) pages all over the interpreter. Doing that while nothing waits takes those page faults off
    the critical path. With ``pandas`` (worker and kernel only) also :data:`PANDAS_WARM_UP`. Nothing is
    printed and no state is left behind (throw-away namespaces).
    """
    namespace: dict[str, Any] = {"__builtins__": builtins}
    with contextlib.suppress(Exception):
        exec(compile_cell("_ = [1]\n_", filename="<warm-up>", silent=True), namespace)
        exec(compile_cell("None", filename="<warm-up>"), namespace)
        json.dumps({"ok": True})
        if pandas and "pandas" in sys.modules:
            exec(compile(PANDAS_WARM_UP, "<warm-up>", "exec"), {"__builtins__": builtins})
        flush_std()


def flush_std() -> None:
    """Flush ``sys.stdout`` and ``sys.stderr``, whatever the cell did to them."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def install_std_streams() -> None:
    """One line-buffered text stream on fd 1 serves as stdout *and* stderr, so their order is kept."""
    stream = open(1, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.stdout = sys.stderr = stream

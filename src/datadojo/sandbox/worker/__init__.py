"""The process inside the sandbox: a pre-warmed zygote that forks one child per execution.

Started once per sandbox (by :mod:`datadojo.sandbox.session`, inside bubblewrap when available), it imports
the preload modules (numpy, pandas) once and then serves requests from the harness over length-prefixed
JSON frames on its stdin/stdout. Agent code never runs in this process: each execution runs in a child
forked from it, so a cell pays neither interpreter start-up nor the pandas import (a ``fork`` of the warm
process costs a few milliseconds), and whatever a cell does to its interpreter dies with the child.

* **chunked** (DataMind §4): the child replays the chunks that succeeded earlier, silently (the AST
  transformation of :func:`datadojo.sandbox.cells.compile_cell` with ``silent=True``; file descriptors 1
  and 2 also point at ``/dev/null`` meanwhile, for output written below Python), then runs the new chunk
  with its output captured. Nothing survives the child.
* **persistent**: a long-lived child (the *kernel*) holds the namespace and runs cells in-process; after a
  crash, a kill or a timeout it is replaced by a fresh fork and the observation says the state is lost.
* **SQL** runs in a fresh child too, via :func:`datadojo.sandbox.sql.run_sql`.

Every child: its own session (process group), stdin from ``/dev/null``, stdout+stderr into one pipe read by
this process (so their order is kept and output is capped at ``max_output_bytes``), ``RLIMIT_AS``,
``RLIMIT_FSIZE``, ``RLIMIT_NPROC``, ``RLIMIT_CPU``, no core dumps, the dedicated sandbox uid when the
worker runs as root, and ``PR_SET_PDEATHSIG`` so it cannot outlive the worker. This process enforces the
wall-clock limit (and measures CPU time of a persistent kernel), and after every execution kills whatever
the code left running: it is a child subreaper, so orphans of a cell become its children, and inside the
PID namespace it sees every process there.

The package, one job per module:

* :mod:`.procfs` — ``/proc`` reads, the process tree (:func:`live_descendants`), kill, reap, the sweep;
* :mod:`.execution` — running one chunk in an interpreter (:func:`run_code`), warm-up, std streams;
* :mod:`.child` — forking and setting up an execution process; the chunked/SQL child's program;
* :mod:`.kernel` — the persistent kernel and the worker's handle on it;
* :mod:`.supervisor` — watching one execution until it reports, ends or breaks a limit (:class:`CellOutcome`);
* :mod:`.reply` — the verdict and the observation text from an outcome;
* :mod:`.zygote` — :class:`Zygote` (set-up, request loop, clean-up) and :func:`main`.

It must stay importable without the harness-side modules' dependencies and must not start threads before
forking.
"""

from __future__ import annotations

from datadojo.sandbox.worker.execution import run_code
from datadojo.sandbox.worker.procfs import live_descendants
from datadojo.sandbox.worker.supervisor import CellOutcome
from datadojo.sandbox.worker.zygote import Finish, Zygote, main

__all__ = ["CellOutcome", "Finish", "Zygote", "live_descendants", "main", "run_code"]

"""Running a submitted program in each counterfactual copy: in the sandbox, or in-process for trusted code.

EnvLunch §3 executes "both trajectories in each copy". The reference trajectory's results τ(E'_k) are
computed once at synthesis and stored with the task, so scoring only has to run the *agent's* program
τ̂ in every copy. That program is untrusted, so :class:`SandboxExecutor` runs it with
:mod:`datadojo.sandbox` (one sandbox per submission; the K copy folders appear in its working directory
as ``copy1``…``copyK``; one cell per copy). :class:`InProcessExecutor` runs the *same cell text* in this
process — for programs we generated ourselves (the solver's search, the audit's constant programs,
tests) where a sandbox start-up per program would dominate the run time.

A cell is built from the submission:

* **SQL** — ``run_sql`` of :mod:`datadojo.sandbox.sql` (the agent's read-only SQL tool: ``mode=ro`` URI,
  authorizer, one statement, timeout) on the copy's database, all rows kept;
* **pandas** — the agent's code, with a trailing expression turned into ``result = <expr>`` (so
  ``df["x"].mean()`` as the last line is the answer, as in a notebook), run with the copy's folder as the
  working directory; then :data:`~datadojo.reward.canon.SHAPE_SOURCE` turns ``result`` into
  columns and rows.

Either way the cell prints one line ``<<envlunch-result>>{json}``; the last such line is the result.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from datadojo.reward.canon import SHAPE_SOURCE, Canonical, canonical_rows

__all__ = [
    "RESULT_MARKER",
    "InProcessExecutor",
    "Job",
    "ProgramExecutor",
    "ProgramOutcome",
    "SandboxExecutor",
    "build_cell",
    "parse_output",
    "prepare_python",
]

Backend = Literal["sql", "pandas"]
RESULT_MARKER = "<<envlunch-result>>"
SQL_ROW_LIMIT = 100_000
PROGRAM_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Job:
    """Run ``program`` (SQL text or pandas code) in each folder of ``copy_dirs``.

    For SQL, ``db_name`` is the database file name inside each folder.
    """

    backend: Backend
    program: str
    copy_dirs: tuple[Path, ...]
    db_name: str | None = None


@dataclass(frozen=True)
class ProgramOutcome:
    """One copy's result (canonical) or why there is none."""

    result: Canonical | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.result is not None


class ProgramExecutor(Protocol):
    """Runs jobs; returns, per job, one outcome per copy folder (in order)."""

    def run(self, jobs: Sequence[Job]) -> list[list[ProgramOutcome]]: ...


def _bound_names(tree: ast.Module) -> list[str]:
    """Names a program may bind at module level (over-approximated: every name stored outside function and
    class bodies, plus ``result``); deleting one that was never bound is harmless."""
    names: set[str] = set()
    for node in tree.body:
        for sub in (
            ast.walk(node)
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
            else [node]
        ):
            if isinstance(sub, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
                names.add(sub.name)
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                names.add(sub.id)
            elif isinstance(sub, ast.alias):
                names.add((sub.asname or sub.name).split(".")[0])
    names.add("result")
    return sorted(n for n in names if n.isidentifier())


def prepare_python(code: str) -> tuple[str, list[str]]:
    """The agent's code with a trailing expression assigned to ``result``, and the names it binds.

    Raises ``SyntaxError`` (with the line) when the code does not parse.
    """
    tree = ast.parse(code)
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        tree.body[-1] = ast.Assign(
            targets=[ast.Name("result", ast.Store())], value=last.value, lineno=last.lineno
        )
        ast.fix_missing_locations(tree)
        code = ast.unparse(tree)
    return code, _bound_names(tree)


_EMIT = f"""
def _envlunch_emit(obj):
    import json as _json
    cols, rows = _envlunch_shape(obj)
    print({RESULT_MARKER!r} + _json.dumps({{"columns": cols, "rows": rows}}, default=str))
"""


def build_cell(job: Job, copy_dir: str, *, names_to_clear: Sequence[str] = ()) -> str:
    """The Python cell that runs ``job`` in ``copy_dir`` (a path expression valid where the cell runs).

    ``copy_dir`` is inserted as Python source (e.g. ``'"/tmp/x/copy1"'`` or ``'_envlunch_root + "/copy1"'``).
    ``names_to_clear`` are deleted first so that a persistent interpreter does not leak one copy's variables
    into the next copy's run.
    """
    clear = "".join(f"try:\n    del {n}\nexcept NameError:\n    pass\n" for n in names_to_clear)
    if job.backend == "sql":
        if not job.db_name:
            raise ValueError("an SQL job needs db_name")
        return (
            f"{clear}import os as _envlunch_os\nimport json as _envlunch_json\n"
            f"from datadojo.sandbox.sql import run_sql as _envlunch_run_sql\n{SHAPE_SOURCE}\n"
            f"_envlunch_r = _envlunch_run_sql(_envlunch_os.path.join({copy_dir}, {job.db_name!r}), "
            f"{job.program!r}, row_limit={SQL_ROW_LIMIT}, timeout_s={PROGRAM_TIMEOUT_S})\n"
            f"if _envlunch_r.error:\n    raise RuntimeError(_envlunch_r.error)\n"
            f"if _envlunch_r.truncated:\n    raise RuntimeError('result larger than {SQL_ROW_LIMIT} rows')\n"
            f"print({RESULT_MARKER!r} + _envlunch_json.dumps({{'columns': list(_envlunch_r.columns), "
            f"'rows': [[_envlunch_plain(v) for v in r] for r in _envlunch_r.rows]}}, default=str))\n"
        )
    code, _ = prepare_python(job.program)
    return (
        f"{clear}import os as _envlunch_os\n_envlunch_os.chdir({copy_dir})\n"
        f"{code}\n{SHAPE_SOURCE}\n{_EMIT}\n_envlunch_emit(result)\n"
    )


def parse_output(text: str) -> ProgramOutcome:
    """The result from a cell's output (its last marker line), or an error naming what went wrong."""
    lines = [ln for ln in text.splitlines() if ln.startswith(RESULT_MARKER)]
    if not lines:
        tail = text.strip().splitlines()[-3:] if text.strip() else ["(no output)"]
        return ProgramOutcome(None, "the program produced no result: " + " | ".join(tail)[:500])
    try:
        payload = json.loads(lines[-1][len(RESULT_MARKER) :])
        return ProgramOutcome(canonical_rows(payload["columns"], [tuple(r) for r in payload["rows"]]))
    except (ValueError, KeyError, TypeError) as exc:
        return ProgramOutcome(None, f"unreadable result line ({exc})")


class InProcessExecutor:
    """Runs the cells in this process (``exec``, stdout captured). Only for programs we generated.

    The working directory is changed for a pandas cell and restored afterwards, so this is not
    thread-safe; it is meant for the solver, the audit and tests, which run one program at a time.
    """

    def run(self, jobs: Sequence[Job]) -> list[list[ProgramOutcome]]:
        return [[self._one(job, d) for d in job.copy_dirs] for job in jobs]

    def _one(self, job: Job, copy_dir: Path) -> ProgramOutcome:
        try:
            cell = build_cell(job, repr(str(Path(copy_dir).resolve())))
        except SyntaxError as exc:
            return ProgramOutcome(None, f"SyntaxError: {exc.msg} (line {exc.lineno})")
        buf = io.StringIO()
        cwd = os.getcwd()
        try:
            with contextlib.redirect_stdout(buf):
                exec(compile(cell, "<envlunch-cell>", "exec"), {"__name__": "__envlunch__"})
        except Exception as exc:  # the program's own error is its outcome
            return ProgramOutcome(None, f"{type(exc).__name__}: {exc}"[:500])
        finally:
            os.chdir(cwd)
        return parse_output(buf.getvalue())


class SandboxExecutor:
    """Runs each job in its own :class:`datadojo.sandbox.Sandbox` (persistent mode), ``concurrency`` at once.

    The sandbox gets the job's copy folders as ``copy1``…``copyK``; cell 0 records the working directory,
    cell k runs the program in ``copyk`` after deleting every name the program binds (so copy k starts
    from the same state as a fresh interpreter, as far as the program can tell).
    """

    def __init__(self, *, concurrency: int = 2, config: Any = None) -> None:
        from datadojo.sandbox import Limits, SandboxConfig

        self.concurrency = concurrency
        self.config = config or SandboxConfig(
            mode="persistent",
            limits=Limits(
                max_observation_chars=4_000_000, max_output_bytes=8_000_000, wall_s=PROGRAM_TIMEOUT_S * 2
            ),
        )

    def run(self, jobs: Sequence[Job]) -> list[list[ProgramOutcome]]:
        return asyncio.run(self._run_all(jobs))

    async def _run_all(self, jobs: Sequence[Job]) -> list[list[ProgramOutcome]]:
        from datadojo.sandbox import SandboxPool

        pool = SandboxPool(self.config, size=self.concurrency)
        try:
            return list(await asyncio.gather(*(self._job(pool, job) for job in jobs)))
        finally:
            await pool.close()

    async def _job(self, pool: Any, job: Job) -> list[ProgramOutcome]:
        from datadojo.types import DataFile

        files = [DataFile(path=str(d), kind="dir", name=f"copy{k}") for k, d in enumerate(job.copy_dirs, 1)]
        names: list[str] = []
        if job.backend == "pandas":
            try:
                _, names = prepare_python(job.program)
            except SyntaxError as exc:
                err = ProgramOutcome(None, f"SyntaxError: {exc.msg} (line {exc.lineno})")
                return [err for _ in job.copy_dirs]
        out: list[ProgramOutcome] = []
        async with pool.session(files) as sandbox:
            setup = await sandbox.run("import os as _envlunch_os\n_envlunch_root = _envlunch_os.getcwd()")
            if setup.error:
                return [
                    ProgramOutcome(None, f"sandbox setup failed: {setup.output[:300]}") for _ in job.copy_dirs
                ]
            for k in range(1, len(job.copy_dirs) + 1):
                cell = build_cell(job, f'_envlunch_root + "/copy{k}"', names_to_clear=names)
                res = await sandbox.run(cell)
                if res.status != "ok":
                    out.append(ProgramOutcome(None, f"{res.status}: {res.output.strip()[-500:]}"))
                else:
                    out.append(parse_output(res.output))
        return out

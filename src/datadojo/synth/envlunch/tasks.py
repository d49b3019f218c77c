"""EnvLunch tasks as :class:`datadojo.types.Task` records, and the environment files stored beside them.

EnvLunch §3, Eq. (2): the task is T(E, τ) = (E, o*) — the environment and the target observation, never
the trajectory. So a task's ``question`` renders an instruction and o*; its ``files`` are the environment
(the database, or the tables as Parquet files); everything the scorer needs lives in ``extra``:

``backend`` (``sql`` | ``pandas``), ``level``, ``n_operators``, ``operator``, ``operators`` (the action
kinds in order), ``env``, ``seed``, ``k``, ``w``, ``t_max``, ``copies`` (one folder per counterfactual copy,
relative to the task file's folder), ``db_name`` (SQL), ``target`` (o* canonical) and ``copy_targets``
(τ(E'_k) canonical, computed at synthesis, so scoring only runs the agent's program),
``foreign_keys`` and (pandas) ``table_files`` (the schema, for the reference solver), ``sample`` when
the environment is a sample of a larger database (:func:`sample_info`; the task is exact on that sample,
which is the file the agent gets), ``reads`` only when the question names the tables the program reads
(:func:`tell_apart`), and — for reference and for regenerating the results, never shown to the agent —
``program`` and ``actions``.

**What the agent sees** (:func:`visible_key`): the prompt is built from the question and the files (their
names, kinds and contents: :func:`datadojo.env.prompts.build_prompt`); an EnvLunch task has no
description. Two tasks of one environment and backend share their files, so their question alone tells
them apart. On a sampled database every cut table has exactly ``sample_rows`` rows, so ``len(df)`` of two
such tables gives the same o* ("Target value: 2000") from two programs with different answers in the
copies: no agent can score on both. A build therefore keeps no two tasks with the same visible question;
where two programs of different tables share one, both questions name the tables their program reads
(:func:`tell_apart`), which the paper's (E, o*) does not, but which keeps both tasks answerable.

Layout on disk, beside ``tasks.jsonl``::

    tasks.copies/<env>/<backend>/orig/<files>    what the agent sees (Task.files point here)
    tasks.copies/<env>/<backend>/<k>/<files>     counterfactual copy k = 1..K (never shown)

Every file is written to a temporary name and renamed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from datadojo.reward.envlunch import T_MAX, W_BREVITY
from datadojo.synth.envlunch.environment import Environment
from datadojo.synth.envlunch.perturb import sqlite_copy, write_atomic_bytes, write_sqlite_atomic
from datadojo.synth.envlunch.synthesis import EnvContext, Synthesized
from datadojo.types import DataFile, Task

__all__ = [
    "copies_root",
    "env_dir",
    "question_text",
    "render_target",
    "sample_info",
    "tables_read",
    "task_from_synth",
    "tell_apart",
    "visible_key",
    "write_env_files",
]


def copies_root(tasks_path: str | Path) -> Path:
    """``tasks.jsonl`` → ``tasks.copies`` (the folder that holds every environment and copy)."""
    p = Path(tasks_path)
    return p.with_name(p.name.split(".")[0] + ".copies") if "." in p.name else p.with_name(p.name + ".copies")


def env_dir(root: Path, env_id: str, backend: str) -> Path:
    return root / env_id / backend


def write_env_files(ctx: EnvContext, backend: str, root: Path) -> None:
    """Write the original environment and its K copies for ``backend`` under ``root`` (temp + rename)."""
    base = env_dir(root, ctx.env.env_id, backend)
    if backend == "sql":
        _, _, plans = ctx.sql
        name = db_file_name(ctx)
        # fresh copies: the in-memory ones carry synthesis-only indexes
        if ctx.env.image is not None:  # a sample: the agent's database is the sample's bytes
            write_atomic_bytes(base / "orig" / name, ctx.env.image)
        todo = [] if ctx.env.image is not None else [("orig", None)]
        for sub, plan in [*todo, *((str(k), p) for k, p in enumerate(plans, 1))]:
            con = sqlite_copy(ctx.env, plan)
            try:
                write_sqlite_atomic(con, base / sub / name)
            finally:
                con.close()
        return
    _frames, copies = ctx.pandas
    for table, data in ctx.orig_parquet.items():
        write_atomic_bytes(base / "orig" / ctx.files[table], data)
    for k, version in enumerate(copies, 1):
        for table, frame in version.items():
            write_atomic_bytes(base / str(k) / ctx.files[table], frame.to_parquet(index=False))


def db_file_name(ctx: EnvContext) -> str:
    return ctx.env.source.name if ctx.env.source.suffix else f"{ctx.env.env_id}.sqlite"


def sample_info(env: Environment) -> dict[str, Any]:
    """What a task's ``extra["sample"]`` says of a sampled environment: the cap, the seed and, per table
    that was cut, ``[rows kept, rows in the source]``."""
    return {
        "rows": env.sample_rows,
        "seed": env.sample_seed,
        "tables": {t: list(v) for t, v in sorted(env.sampled.items())},
    }


def render_target(display: dict[str, Any], *, max_cell: int = 80) -> str:
    """o* as the agent sees it: a ``|``-separated table (or the single value of a scalar)."""
    cols, rows = display["columns"], display["rows"]
    if len(rows) == 1 and len(cols) == 1 and cols[0] == "value":
        return f"Target value: {_cell(rows[0][0], max_cell)}"
    head = " | ".join(str(c) for c in cols)
    body = "\n".join(" | ".join(_cell(v, max_cell) for v in r) for r in rows)
    n = len(rows)
    return f"Target result ({n} row{'s' if n != 1 else ''} × {len(cols)} column{'s' if len(cols) != 1 else ''}):\n{head}\n{body}"


def _cell(v: Any, max_cell: int) -> str:
    if v is None:
        return "NULL"
    text = repr(v) if isinstance(v, float) else str(v).replace("\n", "\\n").replace("|", "\\|")
    return text if len(text) <= max_cell else text[: max_cell - 3] + "..."


def question_text(backend: str, files: list[str], target: str, reads: list[str] | None = None) -> str:
    """The instruction plus o* (EnvLunch §3: the agent gets E and o*, never τ).

    ``reads``: the tables (SQL) or files (pandas) the unknown program reads, named only to tell apart two
    tasks whose question would otherwise be the same (:func:`tell_apart`).
    """
    said = _reads_sentence(backend, reads) if reads else ""
    if backend == "sql":
        return (
            f"EnvLunch warm-up task (SQL). The SQLite database `{files[0]}` is in your working directory. "
            "An unknown SQL query, run on this database, produced the target result below. Query the "
            "database to find a query that reproduces it, then give that query (one SELECT statement) as "
            "your final answer. Your query is also run on hidden versions of the database with some rows "
            "removed and must match the unknown query's results there too, so a query that spells out the "
            "target values as constants will not be rewarded. Row order and column names do not matter.\n\n"
            f"{said}{target}"
        )
    listed = ", ".join(f"`{f}`" for f in files)
    return (
        f"EnvLunch warm-up task (pandas). The tables {listed} are in your working directory (read them "
        "with `pd.read_parquet`). An unknown pandas program computed the target below from these tables. "
        "Explore the data to find a program that reproduces it, then give the complete Python program "
        "(reading the files itself) as your final answer; it must store its answer in a variable named "
        "`result` or end with an expression. The program is also run on hidden versions of the tables with "
        "some rows removed and numeric measures rescaled, and must match the unknown program's results "
        "there too, so a program that writes the target value as a constant will not be rewarded.\n\n"
        f"{said}{target}"
    )


def _reads_sentence(backend: str, reads: list[str]) -> str:
    names = ", ".join(f"`{r}`" for r in reads)
    if backend == "sql":
        return f"The unknown query reads the table{'s' if len(reads) > 1 else ''} {names} (and no other).\n\n"
    return f"The unknown program reads {names} (and no other file).\n\n"


def tables_read(task: Task) -> list[str]:
    """What the question names when it must tell ``task`` apart: the tables its program reads (SQL), or
    their files (pandas), sorted."""
    tables = sorted(set(task.extra["tables"]))
    if task.extra["backend"] == "sql":
        return tables
    files: dict[str, str] = task.extra["table_files"]
    return sorted(files[t] for t in tables)


def tell_apart(task: Task) -> Task:
    """``task`` with a question that names what its program reads (``extra["reads"]`` says what).

    Used when another task of the same environment has the same visible question from a program over
    other tables; only the question changes (o*, the copies and the scoring are the task's own).
    """
    reads = tables_read(task)
    question = question_text(
        task.extra["backend"], [f.visible_name for f in task.files], render_target(task.answer), reads
    )
    return task.model_copy(update={"question": question, "extra": {**task.extra, "reads": reads}})


#: ``Task.extra`` keys the agent's prompt shows (``answer_format`` and ``agent.prompts.GUIDANCE_SECTIONS``;
#: named here, since synthesis is below the agent package).
_PROMPT_EXTRA = ("answer_format", "workflow", "feedback")


def visible_key(task: Task) -> tuple[Any, ...]:
    """Everything of ``task`` that goes into the agent's prompt: the question, the description, the
    prompt sections taken from ``extra`` and each file's name, kind, description and path (its contents:
    files at one path of a build are the same bytes). Two tasks with equal keys are one question to the
    agent."""
    shown = [task.extra.get(k) for k in _PROMPT_EXTRA]
    files = tuple((f.visible_name, f.kind, f.description, f.path) for f in task.files)
    return (task.question, task.description, tuple(map(str, shown)), files)


def task_from_synth(
    syn: Synthesized, ctx: EnvContext, *, task_id: str, rel_root: str, seed: int, task_seed: int
) -> Task:
    """Render a retained trajectory as a :class:`Task` (files relative to the task file's folder)."""
    backend = syn.backend
    base = f"{rel_root}/{syn.env_id}/{backend}"
    if backend == "sql":
        name = db_file_name(ctx)
        files = [DataFile(path=f"{base}/orig/{name}", kind="sqlite", name=name)]
        k = ctx.config.k_sql
    else:
        files = [
            DataFile(path=f"{base}/orig/{ctx.files[t]}", kind="parquet", name=ctx.files[t])
            for t in sorted(ctx.env.tables)
        ]
        k = ctx.config.k_pandas
    target_text = render_target(syn.target_display)
    question = question_text(backend, [f.visible_name for f in files], target_text)
    extra: dict[str, Any] = {
        "backend": backend,
        "level": syn.level,
        "n_operators": syn.n_operators,
        "operator": syn.operator,
        "operators": [a["kind"] for a in syn.actions],
        "env": syn.env_id,
        "seed": seed,
        "task_seed": task_seed,
        "k": k,
        "w": W_BREVITY,
        "t_max": T_MAX[backend],
        "copies": [f"{base}/{i}" for i in range(1, k + 1)],
        "orig": f"{base}/orig",
        "target": syn.target.to_json(),
        "copy_targets": [c.to_json() for c in syn.copy_results],
        "program": syn.program,
        "actions": syn.actions,
        "tables": syn.tables,
        "foreign_keys": [
            [fk.table, list(fk.columns), fk.ref_table, list(fk.ref_columns)] for fk in ctx.env.foreign_keys
        ],
    }
    if backend == "pandas":
        extra["table_files"] = {t: ctx.files[t] for t in sorted(ctx.env.tables)}
    if backend == "sql":
        extra["db_name"] = db_file_name(ctx)
    if ctx.env.sampled:
        extra["sample"] = sample_info(ctx.env)
    return Task(
        id=task_id,
        question=question,
        files=files,
        answer=syn.target_display,
        answer_kind="envlunch",
        source="envlunch",
        category=f"{backend}:{syn.operator}" if backend == "sql" else f"pandas:{syn.actions[-1]['kind']}",
        difficulty=syn.level,
        extra=extra,
    )

"""Online trajectory synthesis and counterfactual filtering (EnvLunch §3).

For one environment, :class:`EnvContext` holds everything synthesis executes against: the original
database in memory (SQL), the original tables as the agent will read them (pandas, after a Parquet round
trip), and the K counterfactual copies of both (:mod:`.perturb`). It is built once per environment and
shared by every task drawn from it.

:func:`synthesize` draws one trajectory (Eq. 1: each action uniformly from those valid on the current
observation, executed before the next is drawn), then applies the paper's filter: "We retain a trajectory
only if it executes and yields a non-degenerate result in every perturbed copy, and its result changes in
at least one copy". Degenerate = empty, all-NULL, or ±inf (:func:`.canon.is_degenerate`). One more check
of ours: the target must have at most ``max_target_rows`` rows, since the agent is shown all of it.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from datadojo.reward.canon import (
    Canonical,
    canonical_pandas,
    canonical_rows,
    is_degenerate,
    json_value,
    same_result,
)
from datadojo.synth.envlunch import pandas_actions as pa
from datadojo.synth.envlunch import sql_actions as sa
from datadojo.synth.envlunch.config import MAX_TARGET_ROWS, SynthConfig
from datadojo.synth.envlunch.environment import Environment, stable_int
from datadojo.synth.envlunch.keys import ColumnInfo, column_roles
from datadojo.synth.envlunch.perturb import (
    MIN_ROWS_TO_DELETE,
    CopyPlan,
    pandas_copy,
    parquet_roundtrip,
    plan_copies,
    sqlite_copy,
)

__all__ = [
    "MAX_TARGET_ROWS",
    "EnvContext",
    "SynthConfig",
    "Synthesized",
    "synthesize",
]

Backend = Literal["sql", "pandas"]


@dataclass
class Synthesized:
    """A retained trajectory: its program, actions, target o* and results in every copy."""

    backend: Backend
    env_id: str
    level: int
    operator: str
    actions: list[dict[str, Any]]
    program: str
    target: Canonical
    target_display: dict[str, Any]
    copy_results: list[Canonical]
    n_operators: int
    tables: list[str] = field(default_factory=list)


class EnvContext:
    """Per-environment state shared by all tasks drawn from it (built lazily, backend by backend)."""

    def __init__(self, env: Environment, config: SynthConfig) -> None:
        self.env = env
        self.config = config
        self.roles: dict[str, dict[str, ColumnInfo]] = column_roles(env)
        self._sql: tuple[sqlite3.Connection, list[sqlite3.Connection], list[CopyPlan]] | None = None
        self._pd: tuple[dict[str, pd.DataFrame], list[dict[str, pd.DataFrame]]] | None = None
        self.orig_parquet: dict[str, bytes] = {}
        self.sql_varying: frozenset[str] = frozenset()
        self.varying_tables: frozenset[str] = frozenset()
        self.variables = pa.table_variables(env)
        self.files = {t: f"{v}.parquet" for t, v in self.variables.items()}
        self.observe_cache: dict[str, sa.Obs] = {}

    # -- feasibility --------------------------------------------------------------------------------------
    @property
    def sql_feasible(self) -> bool:
        """Copies can only differ when some table has at least 20 rows (SQL copies only delete rows)."""
        return self.env.kind == "sqlite" and any(
            t.n_rows >= MIN_ROWS_TO_DELETE for t in self.env.tables.values()
        )

    @property
    def pandas_feasible(self) -> bool:
        has_rows = any(t.n_rows >= MIN_ROWS_TO_DELETE for t in self.env.tables.values())
        has_measure = any(i.role == "measure" for cols in self.roles.values() for i in cols.values())
        return any(t.n_rows > 0 for t in self.env.tables.values()) and (has_rows or has_measure)

    # -- SQL ----------------------------------------------------------------------------------------------
    @property
    def sql(self) -> tuple[sqlite3.Connection, list[sqlite3.Connection], list[CopyPlan]]:
        """(original in memory, copies in memory, copy plans).

        The in-memory databases get an index on every foreign-key column (anti-joins and joins on a
        65,000-row table would otherwise scan it per row). Indexes change no result, and the files written
        for the agent are fresh copies without them (:func:`.tasks.write_env_files`).
        """
        if self._sql is None:
            plans = plan_copies(self.env, self.roles, self.config.k_sql, self.config.seed, rescale=False)
            orig = sqlite_copy(self.env, None)
            copies = [sqlite_copy(self.env, p) for p in plans]
            for con in [orig, *copies]:
                _index_foreign_keys(self.env, con)
            self._sql = (orig, copies, plans)
            self.sql_varying = frozenset(t for p in plans for t, m in p.keep.items() if not m.all())
        return self._sql

    # -- pandas -------------------------------------------------------------------------------------------
    @property
    def pandas(self) -> tuple[dict[str, pd.DataFrame], list[dict[str, pd.DataFrame]]]:
        """(original frames, copies' frames).

        The original tables go through a Parquet round trip first, so every frame (and every copy derived
        from it, which keeps its dtypes) is what ``pd.read_parquet`` gives the agent.
        """
        if self._pd is None:
            plans = plan_copies(self.env, self.roles, self.config.k_pandas, self.config.seed, rescale=True)
            orig: dict[str, pd.DataFrame] = {}
            for name, table in self.env.tables.items():
                self.orig_parquet[name], orig[name] = parquet_roundtrip(table.frame())
            copies = [pandas_copy(self.env, p, orig) for p in plans]
            self.varying_tables = frozenset(t for p in plans for t, m in p.keep.items() if not m.all())
            self._pd = (orig, copies)
        return self._pd

    def pandas_can_vary(self, table: str) -> bool:
        """Whether a pandas trajectory from ``table`` can give a different answer in some copy: the table
        or a foreign-key neighbour loses rows or has a measure to rescale (else every draw is rejected)."""
        near = {table} | {x for fk in self.env.fks_of(table) for x in (fk.table, fk.ref_table)}
        if near & self.varying_tables:
            return True
        return any(i.role == "measure" for t in near for i in self.roles[t].values())

    def close(self) -> None:
        if self._sql is not None:
            self._sql[0].close()
            for c in self._sql[1]:
                c.close()
            self._sql = None


def _sql_tables(ctx: EnvContext) -> list[str]:
    return [t for t, d in ctx.env.tables.items() if d.n_rows > 0]


def _applicable(ctx: EnvContext, spec: sa.OperatorSpec, actx: sa.SqlContext) -> list[str]:
    """Source tables for ``spec``: it must apply, and some table it can reach must lose rows in a copy
    (SQL copies only delete rows; a query over tables no copy touches cannot pass the §3 filter)."""
    out = []
    for t in _sql_tables(ctx):
        if spec.source_filter is not None and not spec.source_filter(actx, t):
            continue
        reach = {t}
        if spec.needs_fk or spec.name == "anti_join_project":
            reach |= {x for fk in ctx.env.fks_of(t) for x in (fk.table, fk.ref_table)}
        if spec.needs_fk >= 2:
            reach |= {x for r in list(reach) for fk in ctx.env.fks_of(r) for x in (fk.table, fk.ref_table)}
        if reach & ctx.sql_varying:
            out.append(t)
    return out


def _index_foreign_keys(env: Environment, con: sqlite3.Connection) -> None:
    for i, fk in enumerate(env.foreign_keys):
        cols = ", ".join(sa.q_ident(c) for c in fk.columns)
        con.execute(f"CREATE INDEX IF NOT EXISTS envlunch_fk_{i} ON {sa.q_ident(fk.table)} ({cols})")
        rcols = ", ".join(sa.q_ident(c) for c in fk.ref_columns)
        con.execute(f"CREATE INDEX IF NOT EXISTS envlunch_ref_{i} ON {sa.q_ident(fk.ref_table)} ({rcols})")


def synthesize_sql(ctx: EnvContext, rng: random.Random, operator: str | None = None) -> Synthesized | str:
    """Draw one SQL trajectory; return it, or the reason it was rejected."""
    orig, copies, _ = ctx.sql  # also sets ctx.sql_varying
    # observations memoized per environment: every draw from a table starts with the same prefixes
    actx = sa.SqlContext(ctx.env, ctx.roles, rng, ctx.config.max_target_rows, ctx.observe_cache)
    allowed = [s for s in sa.OPERATORS.values() if s.level in ctx.config.levels]
    spec = sa.OPERATORS[operator] if operator else rng.choice(allowed)
    tables = _applicable(ctx, spec, actx)
    if not tables:
        return f"no_source:{spec.name}"
    table = rng.choice(tables)
    try:
        q, steps, _ = sa.build_query(actx, orig, spec, table)
    except sa.NoAction as exc:
        return f"no_action:{exc}"
    except sqlite3.Error as exc:
        return f"sql_error:{exc}"
    sql = q.render()
    cap = ctx.config.max_target_rows
    try:
        # a target over the cap is rejected before it is canonicalized or run in the copies (on a 60 MB
        # database such a result can hold 100,000s of rows)
        names, rows, _ = sa.execute_sql(orig, sql, row_cap=cap + 1, count_rest=False)
        if len(rows) > cap:
            return "too_many_rows"
        target = canonical_rows(names, rows)
        copy_results = [canonical_rows(*sa.execute_sql(c, sql)[:2]) for c in copies]
    except sqlite3.Error as exc:
        return f"sql_error:{exc}"
    reason = _filter(target, copy_results, cap)
    if reason:
        return reason
    display = {"columns": names, "rows": [[json_value(v) for v in r] for r in rows]}
    tables_used = tables_read(orig, sql, list(ctx.env.tables))
    return Synthesized(
        "sql",
        ctx.env.env_id,
        spec.level,
        spec.name,
        [s.to_dict() for s in steps],
        sql,
        target,
        display,
        copy_results,
        spec.level,
        tables_used,
    )


def tables_read(con: sqlite3.Connection, sql: str, tables: list[str]) -> list[str]:
    """The tables of ``tables`` that ``sql`` reads, in that order: SQLite's authorizer sees every read
    while the statement is prepared (joins, a ``NOT EXISTS`` subquery's table, a CTE's sources), which
    the query's FROM list alone misses. A task that names what its program reads says all of it."""
    read: set[str] = set()

    def note(action: int, arg1: str | None, *_: object) -> int:
        if action == sqlite3.SQLITE_READ and arg1:
            read.add(arg1.lower())
        return sqlite3.SQLITE_OK

    con.set_authorizer(note)
    try:
        con.execute(f"EXPLAIN {sql}").fetchall()
    finally:
        con.set_authorizer(None)
    return [t for t in tables if t.lower() in read]


def _run_body(body: str, frames: dict[str, pd.DataFrame], variables: dict[str, str]) -> tuple[Any, Any]:
    ns: dict[str, Any] = {"pd": pd}
    for t, var in variables.items():
        ns[var] = frames[t]
    exec(compile(body, "<envlunch-program>", "exec"), ns)
    return ns["result"], ns.get("df")


def synthesize_pandas(ctx: EnvContext, rng: random.Random, level: int | None = None) -> Synthesized | str:
    """Draw one pandas trajectory; return it, or the reason it was rejected."""
    frames, copies = ctx.pandas
    level = level if level is not None else rng.choice(ctx.config.levels)
    tables = [t for t, f in frames.items() if len(f) > 0 and ctx.pandas_can_vary(t)]
    if not tables:
        return "no_source"
    pctx = pa.PandasContext(ctx.env, ctx.roles, frames, ctx.variables, rng, ctx.files, ctx.varying_tables)
    table = rng.choice(tables)
    try:
        program, actions, before, result = pa.build_program(pctx, table, level)
    except pa.NoAction as exc:
        return f"no_action:{exc}"
    except Exception as exc:  # a pandas error in a generated action: drop the draw, say why
        return f"pandas_error:{type(exc).__name__}"
    if len(before) == 0:
        return "degenerate"
    target = canonical_pandas(result)
    body = program.body()
    copy_results = []
    for cf in copies:
        try:
            res, _ = _run_body(body, cf, ctx.variables)
        except Exception as exc:
            return f"copy_error:{type(exc).__name__}"
        copy_results.append(canonical_pandas(res))
    reason = _filter(target, copy_results, ctx.config.max_target_rows)
    if reason:
        return reason
    n_chain = pa.n_transforms(actions)
    real_level = pa.level_of_chain(n_chain)
    display = {
        "columns": ["value"],
        "rows": [[json_value(result.item() if hasattr(result, "item") else result)]],
    }
    used = sorted(t for t, v in ctx.variables.items() if v in program.files)
    return Synthesized(
        "pandas",
        ctx.env.env_id,
        real_level,
        f"chain{n_chain}",
        actions,
        program.text(),
        target,
        display,
        copy_results,
        len(actions),
        used,
    )


def _filter(target: Canonical, copies: list[Canonical], max_rows: int) -> str | None:
    """The §3 filter (plus our size cap); ``None`` when the trajectory is retained."""
    if is_degenerate(target):
        return "degenerate"
    if target.n_rows > max_rows:
        return "too_many_rows"
    if any(is_degenerate(c) for c in copies):
        return "degenerate_in_copy"
    if all(same_result(c, target) for c in copies):
        return "unchanged_in_copies"
    return None


def synthesize(ctx: EnvContext, backend: Backend, rng: random.Random) -> Synthesized | str:
    """One draw for ``backend``; a :class:`Synthesized` task or the rejection reason."""
    if backend == "sql":
        return synthesize_sql(ctx, rng)
    return synthesize_pandas(ctx, rng)


def task_rng(seed: int, index: int, attempt: int) -> random.Random:
    """The RNG of draw ``attempt`` for task ``index`` (reproducible from the build seed)."""
    return random.Random(stable_int(seed, "task", index, attempt))

"""A reference solver: recover a trajectory from (E, o*) by searching the same action space
(query-by-output, EnvLunch §2 "Recovering a query from its output").

The solver sees what an agent sees — the environment's files (plus, for pandas tasks, the schema's foreign
keys, which the database had) and the target o* — never the hidden program or the copies. It draws
compositions from the very action pools synthesis uses (:mod:`.sql_actions`, :mod:`.pandas_actions`), each
draw an independent random composition (a randomized enumeration; partial SQL results are memoized, so
shared prefixes run once), and stops at the first whose result on E equals o* or when its budget is spent.

Pruning with what o* shows: an SQL target with header ``(g, value)`` comes from a grouped operator, and its
group column ``g`` must be reachable from the source table; any other header lists projected columns, which
must be reachable. Pandas targets are scalars: no pruning, so the solver is weaker there, as expected.

Its trajectory is the found program's actions as turns (each partial SQL query / pandas line, with its
observation), then the answer turn holding the program; so ``t`` = the number of actions, and the
submission goes through the same scoring path (sandbox, copies, Eq. 4) as any agent's.
"""

from __future__ import annotations

import math
import random
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from datadojo.reward.canon import canonical_pandas, canonical_rows, same_result
from datadojo.reward.envlunch import EnvLunchTaskInfo
from datadojo.synth.envlunch import pandas_actions as pa
from datadojo.synth.envlunch import sql_actions as sa
from datadojo.synth.envlunch.config import SolverConfig
from datadojo.synth.envlunch.environment import (
    Environment,
    SchemaForeignKey,
    TableData,
    load_sqlite,
    stable_int,
)
from datadojo.synth.envlunch.keys import column_roles
from datadojo.types import Action, Observation, Trajectory, Turn

__all__ = ["SolveResult", "SolverConfig", "solve", "solver_trajectory"]


@dataclass
class SolveResult:
    """What the search found: the program and its steps (``None`` when the budget ran out)."""

    task_id: str
    program: str | None
    steps: list[tuple[str, str]]  # (code shown as one turn, observation text)
    candidates: int
    seconds: float
    budget: str = ""  # the budget it ran under, in words (SolverConfig.budget_text)


class _SqlEnv:
    def __init__(self, db: Path) -> None:
        self.env = load_sqlite(db)
        self.roles = column_roles(self.env)
        self.con = sqlite3.connect(":memory:")
        src = sqlite3.connect(f"file:{db.resolve().as_posix()}?mode=ro", uri=True)
        src.backup(self.con)
        src.close()
        for i, fk in enumerate(self.env.foreign_keys):
            cols = ", ".join(sa.q_ident(c) for c in fk.columns)
            self.con.execute(f"CREATE INDEX IF NOT EXISTS solver_fk_{i} ON {sa.q_ident(fk.table)} ({cols})")
        self.cache: dict[str, sa.Obs] = {}


class _PandasEnv:
    def __init__(self, info: EnvLunchTaskInfo) -> None:
        extra = info.task.extra
        files: dict[str, str] = extra["table_files"]
        tables: dict[str, TableData] = {}
        self.frames: dict[str, pd.DataFrame] = {}
        for table, name in files.items():
            frame = pd.read_parquet(info.orig_dir / name)
            rows = [tuple(None if _na(v) else v for v in r) for r in frame.itertuples(index=False, name=None)]
            data = TableData(table, [str(c) for c in frame.columns], [str(t) for t in frame.dtypes], rows)
            data._frame = frame
            tables[table] = data
            self.frames[table] = frame
        fks = [SchemaForeignKey(t, tuple(c), rt, tuple(rc)) for t, c, rt, rc in extra.get("foreign_keys", [])]
        self.env = Environment(extra["env"], info.orig_dir, "table", tables, fks)
        self.roles = column_roles(self.env)
        self.variables = {t: Path(f).stem for t, f in files.items()}
        self.files = dict(files)


def _na(v: Any) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _reach(env: Environment, table: str, hops: int) -> set[str]:
    out = {table}
    for _ in range(hops):
        out |= {x for t in list(out) for fk in env.fks_of(t) for x in (fk.table, fk.ref_table)}
    return out


def _hops(spec: sa.OperatorSpec) -> int:
    return spec.needs_fk if spec.name != "anti_join_project" else 0


def _render_rows(names: list[str], rows: list[tuple[Any, ...]], n: int = 5) -> str:
    head = " | ".join(names)
    body = "\n".join(" | ".join("NULL" if v is None else str(v) for v in r) for r in rows[:n])
    more = f"\n... ({len(rows)} rows)" if len(rows) > n else f"\n({len(rows)} rows)"
    return f"{head}\n{body}{more}"


def _solve_sql(info: EnvLunchTaskInfo, senv: _SqlEnv, cfg: SolverConfig, deadline: float) -> tuple[Any, int]:
    header: list[str] = list(info.task.answer["columns"])
    grouped = len(header) == 2 and header[1] == "value"
    env = senv.env
    pairs = []
    for spec in sa.OPERATORS.values():
        if spec.aggregates != grouped:
            continue
        for t, data in env.tables.items():
            if data.n_rows == 0:
                continue
            cols = {c for r in _reach(env, t, _hops(spec)) for c in env.tables[r].columns}
            need = {header[0]} if grouped else set(header)
            if need <= cols:
                pairs.append((spec, t))
    if not pairs:
        return None, 0
    rng = random.Random(stable_int(cfg.seed, info.task.id))
    seen: set[str] = set()
    tried = 0
    while tried < cfg.max_candidates and time.perf_counter() < deadline:
        spec, table = rng.choice(pairs)
        actx = sa.SqlContext(env, senv.roles, rng, max_rows=10_000, obs_cache=senv.cache)
        if spec.source_filter is not None and not spec.source_filter(actx, table):
            tried += 1
            continue
        try:
            q, steps, _ = sa.build_query(actx, senv.con, spec, table)
        except (sa.NoAction, sqlite3.Error):
            tried += 1
            continue
        sql = q.render()
        tried += 1
        if sql in seen:
            continue
        seen.add(sql)
        try:
            names, rows, _ = sa.execute_sql(senv.con, sql)
        except sqlite3.Error:
            continue
        if same_result(canonical_rows(names, rows), info.target):
            shown = []
            for st in steps:
                n2, r2, _ = sa.execute_sql(senv.con, st.sql, row_cap=50)
                shown.append((st.sql, _render_rows(n2, r2)))
            return (sql, shown), tried
    return None, tried


def _solve_pandas(
    info: EnvLunchTaskInfo, penv: _PandasEnv, cfg: SolverConfig, deadline: float
) -> tuple[Any, int]:
    rng = random.Random(stable_int(cfg.seed, info.task.id))
    everything = frozenset(penv.frames)  # the solver cannot know which tables the copies change
    tables = [t for t, f in penv.frames.items() if len(f) > 0]
    seen: set[str] = set()
    tried = 0
    while tried < cfg.max_candidates and time.perf_counter() < deadline and tables:
        pctx = pa.PandasContext(
            penv.env, penv.roles, penv.frames, penv.variables, rng, penv.files, everything
        )
        level = rng.choice((1, 2, 3, 4))
        tried += 1
        try:
            program, _, _, result = pa.build_program(pctx, rng.choice(tables), level)
        except pa.NoAction:
            continue
        except Exception:  # a generated action failing on this data: try another draw
            continue
        text = program.text()
        if text in seen:
            continue
        seen.add(text)
        if same_result(canonical_pandas(result), info.target):
            steps = [(program.prologue() + "\n" + program.lines[0], "")]
            steps += [(line, "") for line in program.lines[1:-1]]
            steps.append((program.lines[-1] + "\nprint(result)", repr(result)))
            return (text, steps), tried
    return None, tried


def solve(infos: list[EnvLunchTaskInfo], config: SolverConfig = SolverConfig()) -> list[SolveResult]:
    """Search each task; environments are loaded once per folder and shared by its tasks."""
    sql_envs: dict[Path, _SqlEnv] = {}
    pd_envs: dict[Path, _PandasEnv] = {}
    out = []
    for info in infos:
        start = time.perf_counter()
        deadline = math.inf if config.time_limit_s is None else start + config.time_limit_s
        if info.backend == "sql":
            assert info.db_name is not None
            key = info.orig_dir / info.db_name
            if key not in sql_envs:
                sql_envs[key] = _SqlEnv(key)
            found, tried = _solve_sql(info, sql_envs[key], config, deadline)
        else:
            if info.orig_dir not in pd_envs:
                pd_envs[info.orig_dir] = _PandasEnv(info)
            found, tried = _solve_pandas(info, pd_envs[info.orig_dir], config, deadline)
        program, steps = found if found is not None else (None, [])
        seconds = time.perf_counter() - start
        out.append(SolveResult(info.task.id, program, steps, tried, seconds, config.budget_text()))
    for senv in sql_envs.values():
        senv.con.close()
    return out


def solver_trajectory(info: EnvLunchTaskInfo, result: SolveResult) -> Trajectory:
    """The solver's run as a :class:`Trajectory` (DataMind tag dialect), scored like an agent's."""
    turns: list[Turn] = []
    lang = "sql" if info.backend == "sql" else "python"
    for code, obs in result.steps:
        fenced = f"```{lang}\n{code}\n```" if lang == "sql" else code
        turns.append(
            Turn(
                raw=f"<code>\n{fenced}\n</code>",
                action=Action(kind="sql" if lang == "sql" else "code", text=code),
                observation=Observation(text=obs or "(no output)"),
            )
        )
    if result.program is not None:
        turns.append(
            Turn(
                raw=f"<answer>\n{result.program}\n</answer>",
                action=Action(kind="answer", text=result.program),
            )
        )
        stop = "answer"
    else:
        stop = "max_turns"
    extra: dict[str, Any] = {"candidates": result.candidates, "seconds": round(result.seconds, 4)}
    if result.program is None:
        # a search, not an agent: it did not run out of turns, it found no program within its budget
        extra["outcome"] = f"no program found within the budget ({result.budget or 'unknown'})"
    return Trajectory(
        task_id=info.task.id,
        prompt=[{"role": "user", "content": info.task.question}],
        turns=turns,
        final_answer=result.program,
        stop_reason=stop,  # type: ignore[arg-type]
        model="envlunch-reference-solver",
        extra=extra,
    )

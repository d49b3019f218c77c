"""The SQL action pool of EnvLunch (§3, "Action Pool Construction"): fifteen operators.

Paper: "On the SQL side, the pool has fifteen operators: ten aggregate at increasing levels of
composition, from a grouped aggregate up to a three-table foreign-key chain or a common table expression
compared against its own average, and five do not aggregate, such as a projection under a filter or a top-k
ranking with a tie-break." and "They are further organized into different levels according to the number
of operators composed."

Here an operator is a *shape* of query, built by a sequence of clause actions (join, filter, group +
aggregate, having, order + limit, project, distinct, anti-join, CTE-vs-average) appended one at a time to
a FROM clause. Its **level** is the number of clause actions composed (1–4). The fifteen operators, each
with an example in ``docs/envlunch.md``:

======================  =====  =========================================================================
operator                level  actions after the source table
======================  =====  =========================================================================
filter_project          2      filter, project                         (non-aggregating)
topk_tiebreak           2      order-by + limit with a tie-break, project (non-aggregating)
anti_join_project       2      anti-join on a foreign key, project     (non-aggregating)
filter_distinct         3      filter, project one column, distinct    (non-aggregating)
join_filter_project     3      join, filter, project                   (non-aggregating)
group_agg               1      group + aggregate
filter_group_agg        2      filter, group + aggregate
group_agg_having        2      group + aggregate, having
group_agg_topk          2      group + aggregate, order-by + limit
join_group_agg          2      join, group + aggregate
join_filter_group_agg   3      join, filter, group + aggregate
join_group_agg_having   3      join, group + aggregate, having
cte_above_avg           3      join, group + aggregate in a CTE, keep groups above the CTE's own average
chain3_group_agg        3      join, join (three-table foreign-key chain), group + aggregate
chain3_filter_group_agg 4      join, join, filter, group + aggregate
======================  =====  =========================================================================

Online synthesis (§3, "Online Trajectory Synthesis and Filtering"): after each action the partial query is
executed and the next action's pool is rebuilt from that observation — "keeping an action only if its
operands exist in the current observation and it can still change it", with parameters "read off that
observation, so a threshold is an actual quantile of the column and a category filter names a value the
column holds". Concretely a filter must keep at least one row and drop at least one; a top-k needs
k < rows; a group-by column needs fewer distinct values than rows; a having clause must drop and keep
groups; a DISTINCT needs duplicates; a CTE-vs-average needs unequal group values; a join must leave rows.
"""

from __future__ import annotations

import bisect
import random
import sqlite3
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from datadojo.synth.envlunch.environment import Environment, NoAction, SchemaForeignKey
from datadojo.synth.envlunch.keys import ColumnInfo, is_number
from datadojo.synth.envlunch.sql_query import (  # the query model; re-exported for callers of this module
    Col,
    Obs,
    SqlQuery,
    SqlStep,
    execute_sql,
    observe,
    q_ident,
    sql_literal,
)

__all__ = [
    "AGGREGATING",
    "NON_AGGREGATING",
    "OPERATORS",
    "Col",
    "Obs",
    "OperatorSpec",
    "SqlQuery",
    "SqlStep",
    "execute_sql",
    "observe",
    "q_ident",
    "sql_literal",
]

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
AGG_FUNCS = ("SUM", "AVG", "MIN", "MAX")
TOPK_MAX = 10
# ---------------------------------------------------------------- actions ---------------------------------


@dataclass
class SqlContext:
    """What an action needs: the environment, column roles, RNG and the result-size cap."""

    env: Environment
    roles: dict[str, dict[str, ColumnInfo]]
    rng: random.Random
    max_rows: int
    obs_cache: dict[str, Obs] | None = None


def _cols_of(ctx: SqlContext, table: str, alias: str) -> list[Col]:
    t = ctx.env.tables[table]
    return [
        Col(alias, table, c, ctx.roles[table][c].role)
        for c in t.columns
        if ctx.roles[table][c].role != "empty"
    ]


def _quantile_values(values: list[Any]) -> list[Any]:
    """Actual values of the column at the pool's quantiles (nearest rank), deduplicated."""
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return []
    out: list[Any] = []
    for q in QUANTILES:
        v = vals[min(len(vals) - 1, int(q * len(vals)))]
        if v not in out:
            out.append(v)
    return out


def _homogeneous(values: list[Any]) -> str | None:
    present = [v for v in values if v is not None]
    if not present:
        return None
    if all(is_number(v) for v in present):
        return "num"
    if all(isinstance(v, str) for v in present):
        return "str"
    return None


def act_source(ctx: SqlContext, q: SqlQuery, table: str) -> SqlStep:
    q.tables = [(table, "T1")]
    q.row_cols = _cols_of(ctx, table, "T1")
    return SqlStep("source", {"table": table})


def join_options(ctx: SqlContext, q: SqlQuery, *, chain: bool) -> list[tuple[SchemaForeignKey, str, bool]]:
    """FKs that join a new table to the current ones: (fk, alias of the table already in, new is parent)."""
    present = {t: a for t, a in q.tables}
    anchor = [q.tables[-1]] if chain else q.tables
    out = []
    for t, a in anchor:
        for fk in ctx.env.fks_of(t):
            if fk.table == t and fk.ref_table not in present:
                out.append((fk, a, True))
            elif fk.ref_table == t and fk.table not in present:
                out.append((fk, a, False))
    return out


def act_join(ctx: SqlContext, q: SqlQuery, obs: Obs, con: sqlite3.Connection, *, chain: bool) -> SqlStep:
    opts = join_options(ctx, q, chain=chain)
    ctx.rng.shuffle(opts)
    for fk, alias, new_is_parent in opts:
        new_alias = f"T{len(q.tables) + 1}"
        new_table = fk.ref_table if new_is_parent else fk.table
        if new_is_parent:
            pairs = [
                (f"{alias}.{q_ident(c)}", f"{new_alias}.{q_ident(r)}")
                for c, r in zip(fk.columns, fk.ref_columns, strict=True)
            ]
        else:
            pairs = [
                (f"{alias}.{q_ident(r)}", f"{new_alias}.{q_ident(c)}")
                for c, r in zip(fk.columns, fk.ref_columns, strict=True)
            ]
        on = " AND ".join(f"{x} = {y}" for x, y in pairs)
        trial = q.copy()
        trial.tables.append((new_table, new_alias))
        trial.joins.append(f"JOIN {q_ident(new_table)} AS {new_alias} ON {on}")
        trial.row_cols = q.row_cols + _cols_of(ctx, new_table, new_alias)
        try:
            got = observe(con, trial, row_cap=1)
        except sqlite3.Error:
            continue
        if got.n_rows == 0:
            continue
        q.tables, q.joins, q.row_cols = trial.tables, trial.joins, trial.row_cols
        return SqlStep("join", {"fk": str(fk), "table": new_table})
    raise NoAction("join")


def act_filter(ctx: SqlContext, q: SqlQuery, obs: Obs, *, cap_rows: bool) -> SqlStep:
    """WHERE col op value, value an actual quantile (numbers, dates) or a held value (categories)."""
    cands: list[tuple[Col, str, Any, int]] = []
    n = len(obs.rows)
    for col in obs.cols:
        if col.role in ("key", "identifier", "text", "empty"):
            continue
        vals = obs.values(col)
        kind = _homogeneous(vals)
        if kind is None:
            continue
        if col.role in ("measure", "temporal") or (kind == "num" and col.role != "category"):
            srt = sorted(x for x in vals if x is not None)
            for v in _quantile_values(vals):
                lo, hi = bisect.bisect_left(srt, v), bisect.bisect_right(srt, v)
                counts = {">": len(srt) - hi, ">=": len(srt) - lo, "<": lo, "<=": hi}
                for op, cnt in counts.items():
                    cands.append((col, op, v, cnt))
        if col.role in ("category", "flag") or (col.role == "temporal" and kind == "str"):
            freq = Counter(x for x in vals if x is not None)
            distinct = sorted(freq, key=lambda x: (str(type(x)), x))
            ctx.rng.shuffle(distinct)
            for v in distinct[:8]:
                cands.append((col, "=", v, freq[v]))
    valid = [c for c in cands if 0 < c[3] < n and (not cap_rows or c[3] <= ctx.max_rows)]
    if not valid:
        raise NoAction("filter")
    col, op, v, _ = ctx.rng.choice(valid)
    q.where.append(f"{col.sql} {op} {sql_literal(v)}")
    return SqlStep("filter", {"column": f"{col.table}.{col.name}", "op": op, "value": v})


def _cmp(x: Any, op: str, v: Any) -> bool:
    try:
        return {">": x > v, ">=": x >= v, "<": x < v, "<=": x <= v}[op]
    except TypeError:
        return False


def act_group_agg(ctx: SqlContext, q: SqlQuery, obs: Obs, *, cap_rows: bool) -> SqlStep:
    """GROUP BY g with COUNT(*), COUNT(DISTINCT c) or SUM/AVG/MIN/MAX(measure)."""
    n = len(obs.rows)
    groups = []
    for col in obs.cols:
        if col.role not in ("category", "flag", "temporal", "key", "identifier"):
            continue
        d = len({v for v in obs.values(col)})
        if 2 <= d < n and (not cap_rows or d <= ctx.max_rows):
            groups.append(col)
    if not groups:
        raise NoAction("group")
    g = ctx.rng.choice(groups)
    measures = [c for c in obs.cols if c.role == "measure" and c != g]
    counts = [c for c in obs.cols if c.role in ("key", "category") and c != g and c.name != g.name]
    menu: list[tuple[str, Col | None]] = [("COUNT", None)]
    menu += [(f, m) for m in measures for f in AGG_FUNCS]
    menu += [("COUNT_DISTINCT", c) for c in counts[:4]]
    func, arg = ctx.rng.choice(menu)
    if func == "COUNT":
        expr = "COUNT(*)"
    elif func == "COUNT_DISTINCT":
        assert arg is not None
        expr = f"COUNT(DISTINCT {arg.sql})"
    else:
        assert arg is not None
        expr = f"{func}({arg.sql})"
    q.group = g
    q.agg = Col("", "", "value", "measure", expr=expr, agg=True)
    return SqlStep(
        "group_agg",
        {
            "group": f"{g.table}.{g.name}",
            "agg": func,
            "column": None if arg is None else f"{arg.table}.{arg.name}",
        },
    )


def act_having(ctx: SqlContext, q: SqlQuery, obs: Obs) -> SqlStep:
    assert q.agg is not None
    vals = [r[1] for r in obs.rows]
    n = len(vals)
    cands = []
    for v in _quantile_values(vals):
        for op in (">", ">=", "<", "<="):
            cnt = sum(1 for x in vals if x is not None and _cmp(x, op, v))
            if 0 < cnt < n:
                cands.append((op, v))
    if not cands:
        raise NoAction("having")
    op, v = ctx.rng.choice(cands)
    q.having = f"{q.agg.expr} {op} {sql_literal(v)}"
    return SqlStep("having", {"op": op, "value": v})


def act_order_limit(ctx: SqlContext, q: SqlQuery, obs: Obs) -> SqlStep:
    """ORDER BY a measure (or the aggregate) DESC/ASC with a tie-break, LIMIT k < rows."""
    n = obs.n_rows
    if n < 2:
        raise NoAction("topk")
    desc = ctx.rng.random() < 0.7
    k = ctx.rng.randint(1, min(TOPK_MAX, n - 1))
    direction = "DESC" if desc else "ASC"
    if q.grouped:
        assert q.group is not None
        q.order = [f"value {direction}", f"{q.group.sql} ASC"]
        q.limit = k
        return SqlStep("order_limit", {"by": "value", "desc": desc, "k": k, "tiebreak": q.group.name})
    measures = [c for c in obs.cols if c.role == "measure" and _homogeneous(obs.values(c)) == "num"]
    if not measures:
        raise NoAction("topk")
    m = ctx.rng.choice(measures)
    table = ctx.env.tables[m.table]
    pk = [c for c in table.primary_key if ctx.roles[m.table][c].role != "empty"]
    q.order = [f"{m.sql} {direction}"] + [f"{m.alias}.{q_ident(c)} ASC" for c in pk]
    q.tiebreak_projection = True  # remaining ties broken by the projected columns (deterministic multiset)
    q.limit = k
    return SqlStep(
        "order_limit", {"by": f"{m.table}.{m.name}", "desc": desc, "k": k, "tiebreak": pk or "projection"}
    )


def act_project(ctx: SqlContext, q: SqlQuery, obs: Obs, *, one: bool = False) -> SqlStep:
    usable = [c for c in obs.cols if c.role != "empty"]
    if not usable:
        raise NoAction("project")
    if one:
        dup = [
            c
            for c in usable
            if c.role in ("category", "flag", "temporal", "key", "measure")
            and len(set(obs.values(c))) < len(obs.rows)
        ]
        if not dup:
            raise NoAction("project")
        chosen = [ctx.rng.choice(dup)]
    else:
        size = ctx.rng.randint(1, min(3, len(usable)))
        picked = set(ctx.rng.sample(range(len(usable)), size))
        chosen = [c for i, c in enumerate(usable) if i in picked]
    # same-named columns from different tables would be ambiguous in the result header: keep the first
    seen: set[str] = set()
    chosen = [c for c in chosen if not (c.name in seen or seen.add(c.name))]
    q.select = chosen
    return SqlStep("project", {"columns": [f"{c.table}.{c.name}" for c in chosen]})


def act_distinct(ctx: SqlContext, q: SqlQuery, obs: Obs) -> SqlStep:
    if len(set(obs.rows)) >= len(obs.rows):
        raise NoAction("distinct")
    if len(set(obs.rows)) > ctx.max_rows:
        raise NoAction("distinct")
    q.distinct = True
    return SqlStep("distinct", {})


def act_anti_join(ctx: SqlContext, q: SqlQuery, obs: Obs, con: sqlite3.Connection) -> SqlStep:
    """Keep parent rows no child row references: ``NOT EXISTS (SELECT 1 FROM child WHERE fk = pk)``."""
    t, a = q.tables[0]
    fks = [fk for fk in ctx.env.foreign_keys if fk.ref_table == t and fk.table != t]
    ctx.rng.shuffle(fks)
    for fk in fks:
        cond = " AND ".join(
            f"S.{q_ident(c)} = {a}.{q_ident(r)}" for c, r in zip(fk.columns, fk.ref_columns, strict=True)
        )
        clause = f"NOT EXISTS (SELECT 1 FROM {q_ident(fk.table)} AS S WHERE {cond})"
        trial = q.copy()
        trial.where.append(clause)
        try:
            got = observe(con, trial, row_cap=1)
        except sqlite3.Error:
            continue
        if 0 < got.n_rows < obs.n_rows and got.n_rows <= ctx.max_rows:
            q.where = trial.where
            return SqlStep("anti_join", {"fk": str(fk)})
    raise NoAction("anti_join")


def act_cte_above_avg(ctx: SqlContext, q: SqlQuery, obs: Obs) -> SqlStep:
    vals = [r[1] for r in obs.rows if r[1] is not None]
    if len(set(vals)) < 2 or _homogeneous(vals) != "num":
        raise NoAction("cte_above_avg")
    q.cte_above_avg = True
    return SqlStep("cte_above_avg", {})


# ---------------------------------------------------------------- operators -------------------------------


@dataclass(frozen=True)
class OperatorSpec:
    """One of the fifteen SQL operators: its clause actions in order (after the source table)."""

    name: str
    aggregates: bool
    steps: tuple[str, ...]
    needs_fk: int = 0
    source_filter: Callable[[SqlContext, str], bool] | None = None

    @property
    def level(self) -> int:
        return len(self.steps)


def _is_parent(ctx: SqlContext, table: str) -> bool:
    return any(fk.ref_table == table and fk.table != table for fk in ctx.env.foreign_keys)


def _has_fk(ctx: SqlContext, table: str) -> bool:
    return bool(ctx.env.fks_of(table))


def _has_measure(ctx: SqlContext, table: str) -> bool:
    return any(i.role == "measure" for i in ctx.roles[table].values())


NON_AGGREGATING: tuple[OperatorSpec, ...] = (
    OperatorSpec("filter_project", False, ("filter", "project")),
    OperatorSpec("topk_tiebreak", False, ("order_limit", "project"), source_filter=_has_measure),
    OperatorSpec("anti_join_project", False, ("anti_join", "project"), needs_fk=1, source_filter=_is_parent),
    OperatorSpec("filter_distinct", False, ("filter", "project_one", "distinct")),
    OperatorSpec(
        "join_filter_project", False, ("join", "filter", "project"), needs_fk=1, source_filter=_has_fk
    ),
)
AGGREGATING: tuple[OperatorSpec, ...] = (
    OperatorSpec("group_agg", True, ("group_agg",)),
    OperatorSpec("filter_group_agg", True, ("filter", "group_agg")),
    OperatorSpec("group_agg_having", True, ("group_agg", "having")),
    OperatorSpec("group_agg_topk", True, ("group_agg", "order_limit")),
    OperatorSpec("join_group_agg", True, ("join", "group_agg"), needs_fk=1, source_filter=_has_fk),
    OperatorSpec(
        "join_filter_group_agg", True, ("join", "filter", "group_agg"), needs_fk=1, source_filter=_has_fk
    ),
    OperatorSpec(
        "join_group_agg_having", True, ("join", "group_agg", "having"), needs_fk=1, source_filter=_has_fk
    ),
    OperatorSpec(
        "cte_above_avg", True, ("join", "group_agg", "cte_above_avg"), needs_fk=1, source_filter=_has_fk
    ),
    OperatorSpec(
        "chain3_group_agg", True, ("join", "join_chain", "group_agg"), needs_fk=2, source_filter=_has_fk
    ),
    OperatorSpec(
        "chain3_filter_group_agg",
        True,
        ("join", "join_chain", "filter", "group_agg"),
        needs_fk=2,
        source_filter=_has_fk,
    ),
)
OPERATORS: dict[str, OperatorSpec] = {op.name: op for op in NON_AGGREGATING + AGGREGATING}
assert len(OPERATORS) == 15 and len(AGGREGATING) == 10 and len(NON_AGGREGATING) == 5

_REDUCING = {"filter", "group_agg", "having", "order_limit", "distinct", "anti_join", "cte_above_avg"}


# An action kind of an operator spec -> the clause action it runs, called as
# ``(ctx, query, observation, connection, cap_rows)``; ``cap_rows`` is true when no later step reduces rows.
_Action = Callable[[SqlContext, SqlQuery, Obs, sqlite3.Connection, bool], SqlStep]
_ACTIONS: dict[str, _Action] = {
    "join": lambda ctx, q, obs, con, cap: act_join(ctx, q, obs, con, chain=False),
    "join_chain": lambda ctx, q, obs, con, cap: act_join(ctx, q, obs, con, chain=True),
    "filter": lambda ctx, q, obs, con, cap: act_filter(ctx, q, obs, cap_rows=cap),
    "group_agg": lambda ctx, q, obs, con, cap: act_group_agg(ctx, q, obs, cap_rows=cap),
    "having": lambda ctx, q, obs, con, cap: act_having(ctx, q, obs),
    "order_limit": lambda ctx, q, obs, con, cap: act_order_limit(ctx, q, obs),
    "project": lambda ctx, q, obs, con, cap: act_project(ctx, q, obs),
    "project_one": lambda ctx, q, obs, con, cap: act_project(ctx, q, obs, one=True),
    "distinct": lambda ctx, q, obs, con, cap: act_distinct(ctx, q, obs),
    "anti_join": lambda ctx, q, obs, con, cap: act_anti_join(ctx, q, obs, con),
    "cte_above_avg": lambda ctx, q, obs, con, cap: act_cte_above_avg(ctx, q, obs),
}


def _observe(ctx: SqlContext, con: sqlite3.Connection, q: SqlQuery) -> Obs:
    """:func:`observe`, memoized per context when it has a cache (the solver re-runs the same prefixes)."""
    if ctx.obs_cache is None:
        return observe(con, q)
    sql = q.render()
    hit = ctx.obs_cache.get(sql)
    if hit is None:
        if len(ctx.obs_cache) > 512:
            ctx.obs_cache.clear()
        hit = ctx.obs_cache[sql] = observe(con, q)
    return Obs(q.output_cols(), hit.rows, hit.n_rows)


def build_query(
    ctx: SqlContext, con: sqlite3.Connection, spec: OperatorSpec, table: str
) -> tuple[SqlQuery, list[SqlStep], Obs]:
    """Compose ``spec``'s actions online on ``table``: execute after each, choose the next from the result.

    Raises :class:`NoAction` when some step's valid pool is empty (the trajectory is dropped).
    """
    q = SqlQuery()
    steps = [replace(act_source(ctx, q, table), sql=q.render())]
    obs = _observe(ctx, con, q)
    if obs.n_rows == 0:
        raise NoAction("source")
    for i, kind in enumerate(spec.steps):
        later_reduces = any(s in _REDUCING for s in spec.steps[i + 1 :])
        action = _ACTIONS.get(kind)
        if action is None:  # pragma: no cover - the specs above use only these kinds
            raise ValueError(f"unknown SQL action kind {kind!r}")
        step = action(ctx, q, obs, con, not later_reduces)
        steps.append(replace(step, sql=q.render()))
        obs = _observe(ctx, con, q)
        if obs.n_rows == 0:
            raise NoAction(kind)
    return q, steps, obs

"""The query model of EnvLunch's SQL action pool: a partial query, rendered, executed and observed.

Split from :mod:`datadojo.synth.envlunch.sql_actions` (the pool, which chooses the next clause action
from an observation): this module knows how a query is built up from clauses (:class:`SqlQuery`), how it
is written as SQL (``render``), run under a step budget (:func:`execute_sql`) and turned into the
observation the next action is chosen from (:func:`observe`). It knows nothing of which actions exist.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field, replace
from typing import Any

from datadojo.corpus.sqlite_reader import quote_ident

__all__ = [
    "OBS_ROW_CAP",
    "Col",
    "Obs",
    "SqlQuery",
    "SqlStep",
    "execute_sql",
    "observe",
    "q_ident",
    "sql_literal",
]

OBS_ROW_CAP = 5000


q_ident = quote_ident  # the one SQL identifier quoting (:func:`datadojo.corpus.sqlite_reader.quote_ident`)


def sql_literal(v: Any) -> str:
    """An SQL literal for a value read off an observation (``repr`` keeps a float's exact value)."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    return "'" + str(v).replace("'", "''") + "'"


@dataclass(frozen=True)
class Col:
    """A column of the current observation: where it comes from and how to write it in SQL."""

    alias: str
    table: str
    name: str
    role: str
    expr: str = ""
    agg: bool = False

    @property
    def sql(self) -> str:
        return self.expr or f"{self.alias}.{q_ident(self.name)}"


@dataclass
class Obs:
    """An executed partial query: its columns and (up to ``row_cap``) rows."""

    cols: list[Col]
    rows: list[tuple[Any, ...]]
    n_rows: int

    def values(self, col: Col) -> list[Any]:
        i = self.cols.index(col)
        return [r[i] for r in self.rows]


@dataclass(frozen=True)
class SqlStep:
    """One appended clause action (what the trajectory records)."""

    kind: str
    params: dict[str, Any]
    sql: str = ""  # the partial query after this action (what the trajectory executed)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.params, "sql": self.sql}


@dataclass
class SqlQuery:
    """A query under construction; :meth:`render` gives the SQL of the current prefix."""

    tables: list[tuple[str, str]] = field(default_factory=list)  # (table, alias)
    joins: list[str] = field(default_factory=list)  # "JOIN t AS T2 ON ..."
    where: list[str] = field(default_factory=list)
    group: Col | None = None
    agg: Col | None = None
    having: str | None = None
    order: list[str] = field(default_factory=list)
    tiebreak_projection: bool = False
    limit: int | None = None
    select: list[Col] | None = None
    distinct: bool = False
    cte_above_avg: bool = False
    row_cols: list[Col] = field(default_factory=list)

    def copy(self) -> SqlQuery:
        return replace(
            self,
            tables=list(self.tables),
            joins=list(self.joins),
            where=list(self.where),
            order=list(self.order),
            select=None if self.select is None else list(self.select),
            row_cols=list(self.row_cols),
        )

    @property
    def grouped(self) -> bool:
        return self.group is not None

    def output_cols(self) -> list[Col]:
        if self.group is not None and self.agg is not None:
            return [self.group, self.agg]
        if self.select is not None:
            return self.select
        return self.row_cols

    def render(self) -> str:
        t0, a0 = self.tables[0]
        from_sql = f"FROM {q_ident(t0)} AS {a0}" + "".join(" " + j for j in self.joins)
        where = f" WHERE {' AND '.join(self.where)}" if self.where else ""
        if self.group is not None and self.agg is not None:
            g = self.group
            body = (
                f"SELECT {g.sql} AS {q_ident(g.name)}, {self.agg.expr} AS value {from_sql}{where} "
                f"GROUP BY {g.sql}"
            )
            if self.cte_above_avg:
                return f"WITH grouped AS ({body}) SELECT * FROM grouped WHERE value > (SELECT AVG(value) FROM grouped)"
            if self.having:
                body += f" HAVING {self.having}"
            if self.order:
                body += f" ORDER BY {', '.join(self.order)}"
            if self.limit is not None:
                body += f" LIMIT {self.limit}"
            return body
        cols = self.select if self.select is not None else self.row_cols
        sel = ", ".join(c.sql for c in cols)
        order = list(self.order)
        if order and self.tiebreak_projection:
            order += [f"{c.sql} ASC" for c in cols if f"{c.sql} ASC" not in order]
        sql = f"SELECT {'DISTINCT ' if self.distinct else ''}{sel} {from_sql}{where}"
        if order:
            sql += f" ORDER BY {', '.join(order)}"
        if self.limit is not None:
            sql += f" LIMIT {self.limit}"
        return sql


def execute_sql(
    con: sqlite3.Connection,
    sql: str,
    *,
    row_cap: int | None = None,
    timeout_s: float = 10.0,
    count_rest: bool = True,
) -> tuple[list[str], list[tuple[Any, ...]], int]:
    """Run one query: ``(column names, rows (at most row_cap), total row count)``.

    A progress handler aborts the query after ``timeout_s`` (raises ``sqlite3.OperationalError``).
    """
    deadline = time.monotonic() + timeout_s
    con.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)
    try:
        cur = con.execute(sql)
        names = [d[0] for d in cur.description or ()]
        if row_cap is None:
            rows = cur.fetchall()
            return names, rows, len(rows)
        rows = cur.fetchmany(row_cap)
        extra = 0
        while count_rest:
            more = cur.fetchmany(4096)
            if not more:
                break
            extra += len(more)
        return names, rows, len(rows) + extra
    finally:
        con.set_progress_handler(None, 0)


def observe(con: sqlite3.Connection, query: SqlQuery, *, row_cap: int = OBS_ROW_CAP) -> Obs:
    """Execute the partial query and return the observation the next action is chosen from.

    At most ``row_cap`` rows are fetched (parameters of the next action are read off them); the row count
    is exact (a ``COUNT(*)`` over the query when the cap is hit).
    """
    sql = query.render()
    _, rows, _ = execute_sql(con, sql, row_cap=row_cap, count_rest=False)
    n = len(rows)
    if n >= row_cap:
        n = execute_sql(con, f"SELECT COUNT(*) FROM ({sql})")[1][0][0]
    return Obs(query.output_cols(), rows, n)

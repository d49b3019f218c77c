"""The pandas action pool of EnvLunch (§3, "Action Pool Construction").

Paper: "On the pandas side, a trajectory composes one source action (a table, or two tables merged on a
foreign key), a chain of 0, 1–2, 3–4 or 5–6 transforms depending on the level (filters, top-k, grouped
aggregates, column ratios or ranks), with a join added at the two highest levels with probability one
half, and one terminal action such as a scalar aggregate, a quantile or a row count."

Every action is a line of pandas code acting on ``df``; the trajectory's program is the lines joined, after
a prologue that reads each table from its Parquet file. Synthesis runs exactly those lines (``exec``) on
the current observation, so the program a task stores is the program that was verified. Actions:

* source — ``df = singer.copy()`` (a copy: later lines add columns to ``df``) or ``df = concert.merge(singer, on="Singer_ID", how="inner")`` (a foreign key);
* filter — ``df = df[df["Age"] > 32]`` (an actual quantile of the column) or ``df = df[df["Country"] ==
  "France"]`` (a value the column holds); must keep at least one row and drop at least one;
* top-k — ``df = df.sort_values(["Net_Worth", "Singer_ID"], ascending=[False, True], kind="stable")
  .head(3)`` with a key/identifier tie-break when the frame has one; needs k < rows;
* grouped aggregate — ``df = df.groupby("Country", as_index=False).agg(mean_Age=("Age", "mean"))``;
  needs 2 ≤ groups < rows;
* column ratio — ``df["a_per_b"] = df["a"] / df["b"]`` for two measure columns, ``b`` never 0;
* rank — ``df["Age_rank"] = df["Age"].rank(method="min", ascending=False)`` (of a measure, an aggregate or
  a ratio);
* join (levels 3–4, probability ½, at a random point of the chain where a foreign-key column is still in
  the frame) — ``df = df.merge(concert, left_on="Singer_ID", right_on="Singer_ID", how="inner", ...)``;
* terminal — ``result = df["Age"].mean()`` (sum, mean, min, max, median), ``result =
  df["Age"].quantile(0.75)``, or ``result = len(df)``.

Levels (the paper's chain lengths): level 1 = 0 transforms, 2 = 1–2, 3 = 3–4, 4 = 5–6. The chain is cut
short when no valid transform remains (§3), and the task's level is that of the chain actually built.
"""

from __future__ import annotations

import keyword
import random
import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from datadojo.synth.envlunch.environment import Environment, NoAction, SchemaForeignKey
from datadojo.synth.envlunch.keys import ColumnInfo

__all__ = [
    "CHAIN_LENGTHS",
    "TERMINALS",
    "TRANSFORMS",
    "PandasProgram",
    "PdState",
    "build_program",
    "level_of_chain",
    "n_transforms",
    "table_variables",
]

#: EnvLunch §3: "a chain of 0, 1–2, 3–4 or 5–6 transforms depending on the level".
CHAIN_LENGTHS: dict[int, tuple[int, int]] = {1: (0, 0), 2: (1, 2), 3: (3, 4), 4: (5, 6)}
JOIN_LEVELS = (3, 4)
JOIN_PROBABILITY = 0.5
TRANSFORMS = ("filter", "topk", "groupby", "ratio", "rank")
TERMINALS = ("agg", "quantile", "count")
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
AGG_FUNCS = ("sum", "mean", "min", "max", "median")
GROUP_FUNCS = ("sum", "mean", "min", "max", "size")
TOPK_MAX = 10
_NUMERIC_ROLES = ("measure", "agg", "ratio", "rank")


def level_of_chain(n: int) -> int:
    """The level whose chain-length range holds ``n`` transforms (1–4)."""
    for level, (lo, hi) in CHAIN_LENGTHS.items():
        if lo <= n <= hi:
            return level
    raise ValueError(f"chain length {n} is beyond level 4 (at most {CHAIN_LENGTHS[4][1]} transforms)")


def table_variables(env: Environment) -> dict[str, str]:
    """A Python variable name per table (``singer``, ``Concert_2``…), unique and never a keyword."""
    out: dict[str, str] = {}
    used = {"df", "pd", "np", "result"}
    for name in sorted(env.tables):
        base = re.sub(r"\W", "_", name)
        if not base or base[0].isdigit() or keyword.iskeyword(base):
            base = f"t_{base}"
        var, i = base, 2
        while var.lower() in used:
            var, i = f"{base}_{i}", i + 1
        used.add(var.lower())
        out[name] = var
    return out


@dataclass
class PandasProgram:
    """A pandas trajectory: file reads, then one line per action; ``result`` holds the answer."""

    files: dict[str, str]  # variable -> file name (visible name in the working directory)
    lines: list[str]

    def prologue(self) -> str:
        reads = "\n".join(f'{var} = pd.read_parquet("{name}")' for var, name in self.files.items())
        return "import pandas as pd\n" + reads

    def body(self) -> str:
        return "\n".join(self.lines)

    def text(self) -> str:
        return self.prologue() + "\n" + self.body()


@dataclass
class PdState:
    """The current observation: the frame, each column's role and origin, which tables it holds.

    ``varies`` marks columns whose values differ between the copies (rescaled measures and what is
    computed from them); ``rows_vary`` says the frame's rows can differ (a table with deleted rows, or a
    filter / top-k on a varying column). Terminal actions use them to skip answers that cannot change in
    any copy (the §3 filter would drop those anyway; skipping them early saves the executions).
    """

    df: pd.DataFrame
    roles: dict[str, str]
    origin: dict[str, tuple[str, str]]  # column -> (table, column in that table)
    tables: set[str]
    varies: dict[str, bool]
    rows_vary: bool
    grouped: bool = False
    last: str = "source"

    def numeric(self, col: str) -> bool:
        return self.roles.get(col) in _NUMERIC_ROLES and pd.api.types.is_numeric_dtype(self.df[col].dtype)

    def but(self, **changes: Any) -> PdState:
        return replace(self, **changes)


@dataclass
class PandasContext:
    """What the actions need: environment, roles, the frames they run on, variable and file names, RNG.

    ``varying_tables`` are tables some copy deletes rows from.
    """

    env: Environment
    roles: dict[str, dict[str, ColumnInfo]]
    frames: dict[str, pd.DataFrame]
    variables: dict[str, str]
    rng: random.Random
    files: dict[str, str] = field(default_factory=dict)
    varying_tables: frozenset[str] = frozenset()


def _lit(v: Any) -> str:
    if isinstance(v, np.generic):
        v = v.item()
    return repr(v)


def _run(ctx: PandasContext, line: str, state_df: pd.DataFrame | None) -> dict[str, Any]:
    ns: dict[str, Any] = {"pd": pd, "np": np, "df": state_df}
    for t, var in ctx.variables.items():
        ns[var] = ctx.frames[t]
    exec(compile(line, "<envlunch-action>", "exec"), ns)
    return ns


def _state_for_table(ctx: PandasContext, table: str, df: pd.DataFrame) -> PdState:
    roles = {c: ctx.roles[table][c].role for c in df.columns}
    varies = {c: r == "measure" for c, r in roles.items()}
    return PdState(
        df, roles, {c: (table, c) for c in df.columns}, {table}, varies, table in ctx.varying_tables
    )


def _merge_line(left: str, right_var: str, lcols: tuple[str, ...], rcols: tuple[str, ...]) -> str:
    if lcols == rcols:
        on = f"on={_lit(list(lcols)) if len(lcols) > 1 else _lit(lcols[0])}"
    else:
        lo = _lit(list(lcols)) if len(lcols) > 1 else _lit(lcols[0])
        ro = _lit(list(rcols)) if len(rcols) > 1 else _lit(rcols[0])
        on = f"left_on={lo}, right_on={ro}"
    return f'df = {left}.merge({right_var}, {on}, how="inner", suffixes=("", "_{right_var}"))'


def _merged_state(ctx: PandasContext, state: PdState, new_df: pd.DataFrame, right: str) -> PdState:
    var = ctx.variables[right]
    roles = dict(state.roles)
    origin = dict(state.origin)
    varies = dict(state.varies)
    for c in new_df.columns:
        if c in roles:
            continue
        base = c[: -len(f"_{var}")] if c.endswith(f"_{var}") else c
        if base in ctx.roles[right]:
            roles[c] = ctx.roles[right][base].role
            origin[c] = (right, base)
        else:
            roles[c] = "text"
        varies[c] = roles[c] == "measure"
    rows_vary = state.rows_vary or right in ctx.varying_tables
    return state.but(
        df=new_df,
        roles=roles,
        origin=origin,
        tables=state.tables | {right},
        varies=varies,
        rows_vary=rows_vary,
    )


def _fk_options(ctx: PandasContext, state: PdState) -> list[tuple[SchemaForeignKey, tuple[str, ...], bool]]:
    """Joins possible from the frame: (fk, frame columns holding the key, new table is the parent)."""
    by_origin = {v: c for c, v in state.origin.items()}
    out = []
    for fk in ctx.env.foreign_keys:
        if fk.table == fk.ref_table:
            continue
        if fk.ref_table not in state.tables and all((fk.table, c) in by_origin for c in fk.columns):
            out.append((fk, tuple(by_origin[(fk.table, c)] for c in fk.columns), True))
        elif fk.table not in state.tables and all((fk.ref_table, c) in by_origin for c in fk.ref_columns):
            out.append((fk, tuple(by_origin[(fk.ref_table, c)] for c in fk.ref_columns), False))
    return out


def act_source(ctx: PandasContext, table: str, *, merge: bool) -> tuple[str, PdState, dict[str, Any]]:
    var = ctx.variables[table]
    state = _state_for_table(ctx, table, ctx.frames[table])
    if merge:
        opts = _fk_options(ctx, state)
        ctx.rng.shuffle(opts)
        for fk, cols, new_is_parent in opts:
            right = fk.ref_table if new_is_parent else fk.table
            rcols = fk.ref_columns if new_is_parent else fk.columns
            line = _merge_line(var, ctx.variables[right], cols, rcols)
            try:
                new_df = _run(ctx, line, None)["df"]
            except Exception:  # a merge on incompatible key dtypes: not a valid action here
                continue
            if len(new_df) == 0:
                continue
            action = {"kind": "source", "table": table, "merge": str(fk)}
            return line, _merged_state(ctx, state, new_df, right), action
        raise NoAction("source merge")
    line = f"df = {var}.copy()"
    return line, state.but(df=_run(ctx, line, None)["df"]), {"kind": "source", "table": table}


def act_join(ctx: PandasContext, state: PdState) -> tuple[str, PdState, dict[str, Any]]:
    if state.grouped:
        raise NoAction("join")
    opts = _fk_options(ctx, state)
    ctx.rng.shuffle(opts)
    for fk, cols, new_is_parent in opts:
        right = fk.ref_table if new_is_parent else fk.table
        rcols = fk.ref_columns if new_is_parent else fk.columns
        line = _merge_line("df", ctx.variables[right], cols, rcols)
        try:
            new_df = _run(ctx, line, state.df)["df"]
        except Exception:
            continue
        if len(new_df) == 0:
            continue
        return (
            line,
            _merged_state(ctx, state, new_df, right).but(last="join"),
            {"kind": "join", "fk": str(fk)},
        )
    raise NoAction("join")


def _quantile_values(s: pd.Series) -> list[Any]:
    vals = s.dropna()
    if vals.empty:
        return []
    srt = np.sort(vals.to_numpy())
    out: list[Any] = []
    for q in QUANTILES:
        v = srt[min(len(srt) - 1, int(q * len(srt)))]
        v = v.item() if isinstance(v, np.generic) else v
        if v not in out:
            out.append(v)
    return out


def act_filter(ctx: PandasContext, state: PdState) -> tuple[str, PdState, dict[str, Any]]:
    """Keep rows by a quantile threshold (numbers) or a held value (categories); must change the rows."""
    df = state.df
    n = len(df)
    cands: list[tuple[str, str, Any]] = []
    for col in df.columns:
        role = state.roles.get(col)
        s = df[col]
        if state.numeric(col) or (role == "temporal" and pd.api.types.is_numeric_dtype(s.dtype)):
            arr = np.sort(s.to_numpy(dtype="float64", na_value=np.nan))
            arr = arr[~np.isnan(arr)]
            for v in _quantile_values(s):
                lo, hi = np.searchsorted(arr, float(v), "left"), np.searchsorted(arr, float(v), "right")
                counts = {">": len(arr) - hi, ">=": len(arr) - lo, "<": lo, "<=": hi}
                cands += [(col, op, v) for op, cnt in counts.items() if 0 < cnt < n]
        elif role in ("category", "flag") or (role == "temporal" and s.dtype != object):
            freq = s.value_counts(dropna=True)
            held = [
                v for v, c in freq.items() if c < n and isinstance(v, (str, int, float, bool, np.generic))
            ]
            ctx.rng.shuffle(held)
            cands += [(col, "==", v) for v in held[:8]]
    if not cands:
        raise NoAction("filter")
    col, op, v = ctx.rng.choice(cands)
    line = f"df = df[df[{_lit(col)}] {op} {_lit(v)}]"
    new_df = _run(ctx, line, df)["df"]
    if not 0 < len(new_df) < n:
        raise NoAction("filter")
    action = {"kind": "filter", "column": col, "op": op, "value": _lit_value(v)}
    return (
        line,
        state.but(df=new_df, rows_vary=state.rows_vary or state.varies.get(col, False), last="filter"),
        action,
    )


def _lit_value(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def act_topk(ctx: PandasContext, state: PdState) -> tuple[str, PdState, dict[str, Any]]:
    """The k rows with the largest (or smallest) value of a numeric column, with a key tie-break."""
    df = state.df
    n = len(df)
    measures = [c for c in df.columns if state.numeric(c) and df[c].notna().any()]
    if n < 2 or not measures or state.last == "topk":
        raise NoAction("topk")
    m = ctx.rng.choice(measures)
    k = ctx.rng.randint(1, min(TOPK_MAX, n - 1))
    desc = ctx.rng.random() < 0.7
    if state.grouped:
        ties = [c for c in df.columns if c != m and state.roles.get(c) not in _NUMERIC_ROLES][:1]
    else:
        ties = [
            c
            for c in df.columns
            if state.roles.get(c) in ("key", "identifier")
            and c != m
            and df[c].notna().all()
            and pd.api.types.is_numeric_dtype(df[c].dtype)
        ][:1]
    by = [m, *ties]
    asc = [not desc] + [True] * len(ties)
    line = f'df = df.sort_values({_lit(by)}, ascending={asc!r}, kind="stable").head({k})'
    new_df = _run(ctx, line, df)["df"]
    action = {"kind": "topk", "by": m, "k": k, "desc": desc, "tiebreak": ties}
    return (
        line,
        state.but(df=new_df, rows_vary=state.rows_vary or state.varies.get(m, False), last="topk"),
        action,
    )


def act_groupby(ctx: PandasContext, state: PdState) -> tuple[str, PdState, dict[str, Any]]:
    """Group by a category/key column and aggregate a numeric column (or count rows)."""
    df = state.df
    n = len(df)
    groups = [
        c
        for c in df.columns
        if state.roles.get(c) in ("category", "flag", "temporal", "key", "identifier")
        and 2 <= df[c].nunique(dropna=True) < n
    ]
    if not groups:
        raise NoAction("groupby")
    g = ctx.rng.choice(groups)
    measures = [c for c in df.columns if c != g and state.numeric(c)]
    menu: list[tuple[str, str]] = [("size", g)] + [
        (f, m) for m in measures for f in GROUP_FUNCS if f != "size"
    ]
    func, arg = ctx.rng.choice(menu)
    if func == "size":
        line = f"df = df.groupby({_lit(g)}, as_index=False).size()"
        out, out_varies = "size", state.rows_vary
    else:
        line = f"df = df.groupby({_lit(g)}, as_index=False)[{_lit(arg)}].{func}()"
        out, out_varies = arg, state.rows_vary or state.varies.get(arg, False)
    try:
        new_df = _run(ctx, line, df)["df"]
    except Exception:
        raise NoAction("groupby") from None
    if list(new_df.columns) != [g, out]:
        raise NoAction("groupby")
    roles = {g: state.roles[g], out: "agg"}
    origin = {g: state.origin[g]} if g in state.origin else {}
    varies = {g: state.varies.get(g, False), out: out_varies}
    new = state.but(df=new_df, roles=roles, origin=origin, varies=varies, grouped=True, last="groupby")
    return line, new, {"kind": "groupby", "by": g, "agg": func, "column": arg}


def act_ratio(ctx: PandasContext, state: PdState) -> tuple[str, PdState, dict[str, Any]]:
    """A new column: one measure divided by another (never by zero)."""
    df = state.df
    nums = [
        c
        for c in df.columns
        if state.roles.get(c) == "measure" and pd.api.types.is_numeric_dtype(df[c].dtype)
    ]
    pairs = [(a, b) for a in nums for b in nums if a != b and f"{a}_per_{b}" not in df.columns]
    pairs = [(a, b) for a, b in pairs if df[b].notna().all() and (df[b] != 0).all()]
    if not pairs:
        raise NoAction("ratio")
    a, b = ctx.rng.choice(pairs)
    name = f"{a}_per_{b}"
    line = f"df[{_lit(name)}] = df[{_lit(a)}] / df[{_lit(b)}]"
    new_df = _run(ctx, line, df)["df"]
    varies = {**state.varies, name: state.varies.get(a, False) or state.varies.get(b, False)}
    new = state.but(df=new_df, roles={**state.roles, name: "ratio"}, varies=varies, last="ratio")
    return line, new, {"kind": "ratio", "numerator": a, "denominator": b}


def act_rank(ctx: PandasContext, state: PdState) -> tuple[str, PdState, dict[str, Any]]:
    """A new column: the rank of a numeric column (ties share the lowest rank)."""
    df = state.df
    nums = [
        c
        for c in df.columns
        if state.roles.get(c) in ("measure", "agg", "ratio")
        and state.numeric(c)
        and df[c].nunique() >= 2
        and f"{c}_rank" not in df.columns
    ]
    if not nums:
        raise NoAction("rank")
    c = ctx.rng.choice(nums)
    desc = ctx.rng.random() < 0.5
    name = f"{c}_rank"
    line = f'df[{_lit(name)}] = df[{_lit(c)}].rank(method="min", ascending={not desc})'
    new_df = _run(ctx, line, df)["df"]
    # a rank is unchanged by rescaling: it varies only when the rows do
    new = state.but(
        df=new_df,
        roles={**state.roles, name: "rank"},
        varies={**state.varies, name: state.rows_vary},
        last="rank",
    )
    return line, new, {"kind": "rank", "column": c, "desc": desc}


_TRANSFORM_FUNCS = {
    "filter": act_filter,
    "topk": act_topk,
    "groupby": act_groupby,
    "ratio": act_ratio,
    "rank": act_rank,
}


def act_terminal(ctx: PandasContext, state: PdState) -> tuple[str, dict[str, Any]]:
    """A scalar aggregate, a quantile or a row count, among those that can differ in some copy."""
    df = state.df
    if len(df) == 0:
        raise NoAction("terminal")
    nums = [
        c
        for c in df.columns
        if state.numeric(c) and df[c].notna().any() and (state.varies.get(c, False) or state.rows_vary)
    ]
    menu: list[tuple[str, Any, Any]] = [("count", None, None)] if state.rows_vary else []
    menu += [("agg", c, f) for c in nums for f in AGG_FUNCS]
    menu += [("quantile", c, q) for c in nums for q in (0.1, 0.25, 0.75, 0.9)]
    if not menu:
        raise NoAction("terminal")
    kind, col, arg = ctx.rng.choice(menu)
    if kind == "count":
        return "result = len(df)", {"kind": "count"}
    if kind == "agg":
        return f"result = df[{_lit(col)}].{arg}()", {"kind": "agg", "column": col, "func": arg}
    return f"result = df[{_lit(col)}].quantile({arg})", {"kind": "quantile", "column": col, "q": arg}


def build_program(
    ctx: PandasContext, table: str, level: int
) -> tuple[PandasProgram, list[dict[str, Any]], pd.DataFrame, Any]:
    """Compose a pandas trajectory online on ``table`` for ``level``.

    Returns the program, its actions, the frame before the terminal action and the result. The chain may
    be cut short (§3); read the actual level from the actions with :func:`level_of_chain`.
    """
    lo, hi = CHAIN_LENGTHS[level]
    n_chain = ctx.rng.randint(lo, hi)
    want_join = level in JOIN_LEVELS and ctx.rng.random() < JOIN_PROBABILITY
    merge_source = ctx.rng.random() < 0.5 and bool(
        _fk_options(ctx, _state_for_table(ctx, table, ctx.frames[table]))
    )
    line, state, action = act_source(ctx, table, merge=merge_source)
    lines, actions = [line], [action]
    pending_join = want_join
    join_from = ctx.rng.randint(0, n_chain) if want_join else 0
    for pos in range(n_chain + 1):
        if pending_join and pos >= join_from:
            try:
                line, state, action = act_join(ctx, state)
                lines.append(line)
                actions.append(action)
                pending_join = False
            except NoAction:
                pass  # try again further down the chain
        if pos == n_chain:
            break
        kinds = list(TRANSFORMS)
        ctx.rng.shuffle(kinds)
        for kind in kinds:
            try:
                line, state, action = _TRANSFORM_FUNCS[kind](ctx, state)
                break
            except NoAction:
                continue
        else:
            break  # no valid transform remains: the chain is cut short (§3)
        lines.append(line)
        actions.append(action)
    line, action = act_terminal(ctx, state)
    lines.append(line)
    actions.append(action)
    result = _run(ctx, line, state.df)["result"]
    files = {ctx.variables[t]: ctx.files[t] for t in sorted(state.tables)}
    return PandasProgram(files, lines), actions, state.df, result


def n_transforms(actions: list[dict[str, Any]]) -> int:
    """Transforms in a trajectory's actions (the chain; source, join and terminal not counted)."""
    return sum(1 for a in actions if a["kind"] in TRANSFORMS)

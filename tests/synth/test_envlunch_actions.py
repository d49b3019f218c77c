"""The SQL and pandas action pools: fifteen operators, online composition, parameters read off observations."""

from __future__ import annotations

import random
import re
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from datadojo.synth.envlunch import pandas_actions as pa
from datadojo.synth.envlunch import sql_actions as sa
from datadojo.synth.envlunch.environment import load_sqlite
from datadojo.synth.envlunch.keys import column_roles
from datadojo.synth.envlunch.perturb import sqlite_copy

REPO = Path(__file__).resolve().parents[2]
SHOP = REPO / "examples" / "data" / "shop.sqlite"


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory):
    """The example shop database plus five customers without orders (so an anti-join has rows)."""
    path = tmp_path_factory.mktemp("shop") / "shop.sqlite"
    shutil.copy(SHOP, path)
    con = sqlite3.connect(path)
    con.executemany(
        "INSERT INTO customers VALUES (?, ?, ?, ?, ?)",
        [(1000 + i, f"New {i}", "Leeds", "retail", "2024-01-0{i + 1}") for i in range(5)],
    )
    con.commit()
    con.close()
    env = load_sqlite(path)
    return env, column_roles(env), sqlite_copy(env, None)


def test_fifteen_operators_ten_aggregating() -> None:
    assert len(sa.OPERATORS) == 15
    assert len(sa.AGGREGATING) == 10 and all(op.aggregates for op in sa.AGGREGATING)
    assert len(sa.NON_AGGREGATING) == 5 and not any(op.aggregates for op in sa.NON_AGGREGATING)
    assert sa.OPERATORS["group_agg"].level == 1
    assert sa.OPERATORS["chain3_filter_group_agg"].level == 4
    assert {op.level for op in sa.OPERATORS.values()} == {1, 2, 3, 4}
    # level = number of composed clause actions
    assert all(op.level == len(op.steps) for op in sa.OPERATORS.values())


@pytest.mark.parametrize("name", sorted(sa.OPERATORS))
def test_every_operator_composes_and_executes_on_the_shop_database(shop, name: str) -> None:
    env, roles, con = shop
    spec = sa.OPERATORS[name]
    built = None
    for seed in range(60):
        rng = random.Random(seed)
        ctx = sa.SqlContext(env, roles, rng, max_rows=30)
        tables = [t for t in env.tables if spec.source_filter is None or spec.source_filter(ctx, t)]
        try:
            built = sa.build_query(ctx, con, spec, rng.choice(tables))
            break
        except sa.NoAction:
            continue
    assert built is not None, f"{name}: no trajectory in 60 draws"
    q, steps, obs = built
    sql = q.render()
    names, _rows, n = sa.execute_sql(con, sql)
    assert n == obs.n_rows > 0
    assert next(s.kind for s in steps) == "source" and len(steps) == 1 + spec.level
    # every recorded partial query ran; the last one is the final query
    assert steps[-1].sql == sql
    if spec.aggregates:
        assert names[-1] == "value"  # computed columns never reveal the aggregate in the header
    if "join_chain" in spec.steps:
        assert sql.count(" JOIN ") == 2
    if name == "cte_above_avg":
        assert sql.startswith("WITH grouped AS") and "AVG(value)" in sql
    if name == "topk_tiebreak":
        assert re.search(r"ORDER BY .+ LIMIT \d+$", sql)


def test_filter_threshold_is_an_actual_value_and_changes_the_rows(shop) -> None:
    env, roles, con = shop
    for seed in range(30):
        ctx = sa.SqlContext(env, roles, random.Random(seed), max_rows=1000)
        q = sa.SqlQuery()
        sa.act_source(ctx, q, "order_items")
        before = sa.observe(con, q)
        try:
            step = sa.act_filter(ctx, q, before, cap_rows=False)
        except sa.NoAction:
            continue
        after = sa.observe(con, q)
        assert 0 < after.n_rows < before.n_rows  # "it can still change it"
        column = step.params["column"].split(".")[1]
        assert step.params["value"] in env.tables["order_items"].column_values(column)


def test_valid_pool_is_empty_when_no_action_can_change_the_observation(shop) -> None:
    env, roles, con = shop
    ctx = sa.SqlContext(env, roles, random.Random(0), max_rows=30)
    q = sa.SqlQuery()
    sa.act_source(ctx, q, "products")
    q.where.append('T1."product_id" = 1')
    obs = sa.observe(con, q)
    assert obs.n_rows == 1
    with pytest.raises(sa.NoAction):
        sa.act_order_limit(ctx, q, obs)  # top-k of a single row changes nothing
    with pytest.raises(sa.NoAction):
        sa.act_filter(ctx, q, obs, cap_rows=False)


def _pandas_ctx(rng: random.Random):
    env = load_sqlite(SHOP)
    roles = column_roles(env)
    frames = {t: d.frame() for t, d in env.tables.items()}
    variables = pa.table_variables(env)
    files = {t: f"{v}.parquet" for t, v in variables.items()}
    return pa.PandasContext(env, roles, frames, variables, rng, files, frozenset(env.tables)), env


def test_chain_lengths_by_level() -> None:
    assert [pa.level_of_chain(n) for n in range(7)] == [1, 2, 2, 3, 3, 4, 4]
    with pytest.raises(ValueError, match="beyond level 4"):
        pa.level_of_chain(7)


def test_pandas_program_text_reproduces_the_result_from_files(tmp_path: Path) -> None:
    """The stored program (prologue reading Parquet + action lines) gives the result synthesis saw."""
    made = 0
    for seed in range(40):
        ctx, env = _pandas_ctx(random.Random(seed))
        for t, f in ctx.frames.items():
            if not (tmp_path / ctx.files[t]).exists():
                f.to_parquet(tmp_path / ctx.files[t], index=False)
        try:
            program, actions, _, result = pa.build_program(
                ctx, ctx.rng.choice(sorted(env.tables)), 1 + seed % 4
            )
        except pa.NoAction:
            continue
        assert actions[0]["kind"] == "source" and actions[-1]["kind"] in pa.TERMINALS
        assert pa.n_transforms(actions) <= pa.CHAIN_LENGTHS[1 + seed % 4][1]
        ns: dict = {}
        cwd = Path.cwd()
        try:
            import os

            os.chdir(tmp_path)
            exec(program.text(), ns)
        finally:
            os.chdir(cwd)
        assert pd.Series([ns["result"]]).equals(pd.Series([result])) or ns["result"] == pytest.approx(result)
        made += 1
    assert made >= 20


def test_pandas_filter_reads_values_off_the_observation() -> None:
    ctx, _env = _pandas_ctx(random.Random(3))
    _, state, _ = pa.act_source(ctx, "orders", merge=False)
    for _ in range(10):
        line, new, action = pa.act_filter(ctx, state)
        assert 0 < len(new.df) < len(state.df)
        held = state.df[action["column"]].dropna().tolist()
        assert action["value"] in held
        assert line.startswith("df = df[df[")


def test_join_added_only_at_levels_three_and_four() -> None:
    joins = {1: 0, 2: 0, 3: 0, 4: 0}
    for seed in range(120):
        ctx, _ = _pandas_ctx(random.Random(seed))
        level = 1 + seed % 4
        try:
            _, actions, _, _ = pa.build_program(ctx, "order_items", level)
        except pa.NoAction:
            continue
        joins[level] += sum(a["kind"] == "join" for a in actions)
    assert joins[1] == joins[2] == 0
    assert joins[3] + joins[4] > 0

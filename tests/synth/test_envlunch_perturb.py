"""Counterfactual copies: 30% of rows of tables with ≥ 20 rows, FK cascade, measure rescaling (EnvLunch §3)."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from datadojo.synth.envlunch.environment import load_sqlite
from datadojo.synth.envlunch.keys import column_roles
from datadojo.synth.envlunch.perturb import RESCALE_RANGE, pandas_copy, plan_copies, plan_copy, sqlite_copy

REPO = Path(__file__).resolve().parents[2]
SHOP = REPO / "examples" / "data" / "shop.sqlite"


def _chain_db(path: Path) -> Path:
    """region (5 rows) <- city (20 rows) <- person (40 rows, 2 per city) <- pet (40, one per person), plus
    one pet whose owner never existed (dangling in the original)."""
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE region (rid INTEGER PRIMARY KEY, rname TEXT);
        CREATE TABLE city (cid INTEGER PRIMARY KEY, region INTEGER REFERENCES region(rid), pop INTEGER);
        CREATE TABLE person (pid INTEGER PRIMARY KEY, city INTEGER REFERENCES city(cid), income REAL);
        CREATE TABLE pet (id INTEGER PRIMARY KEY, owner INTEGER REFERENCES person(pid), weight REAL);
        """
    )
    con.executemany("INSERT INTO region VALUES (?,?)", [(i, f"R{i}") for i in range(5)])
    con.executemany("INSERT INTO city VALUES (?,?,?)", [(i, i % 5, 1000 + 37 * i) for i in range(20)])
    con.executemany("INSERT INTO person VALUES (?,?,?)", [(i, i // 2, 100.0 + i) for i in range(40)])
    con.executemany(
        "INSERT INTO pet VALUES (?,?,?)", [(i, i, 1.5 + i) for i in range(40)] + [(99, 12345, 9.9)]
    )
    con.commit()
    con.close()
    return path


def test_copy_deletes_thirty_percent_and_cascades(tmp_path: Path) -> None:
    env = load_sqlite(_chain_db(tmp_path / "chain.sqlite"))
    roles = column_roles(env)
    plan = plan_copy(env, roles, 1, seed=7, rescale=False)
    # region has 5 rows (< 20): no own deletion, and nothing references a deleted region
    assert plan.keep["region"].all()
    # city: 20 rows -> exactly round(0.3 * 20) = 6 deleted by the draw, no cascade into city
    assert (~plan.keep["city"]).sum() == 6
    deleted_cities = {r[0] for r, k in zip(env.tables["city"].rows, plan.keep["city"], strict=True) if not k}
    # person: 40 rows -> 12 drawn, plus every person of a deleted city (cascade)
    kept_person = {r[0] for r, k in zip(env.tables["person"].rows, plan.keep["person"], strict=True) if k}
    for pid, city, _ in env.tables["person"].rows:
        if city in deleted_cities:
            assert pid not in kept_person
    n_person_deleted = 40 - len(kept_person)
    assert n_person_deleted >= 12
    # pet: the cascade continues down the chain; the pet that dangled in the original stays
    for (_pet, owner, _), kept in zip(env.tables["pet"].rows, plan.keep["pet"], strict=True):
        if owner == 12345:
            assert kept
        elif owner not in kept_person:
            assert not kept
    # the SQL copy is exactly the plan, and stays referentially consistent
    con = sqlite_copy(env, plan)
    assert con.execute("SELECT COUNT(*) FROM city").fetchone()[0] == 14
    assert con.execute("SELECT COUNT(*) FROM person").fetchone()[0] == 40 - n_person_deleted
    orphans = con.execute("SELECT COUNT(*) FROM person WHERE city NOT IN (SELECT cid FROM city)").fetchone()[
        0
    ]
    assert orphans == 0
    assert con.execute("SELECT COUNT(*) FROM pet WHERE owner = 12345").fetchone()[0] == 1


def test_copies_are_reproducible_from_the_seed(tmp_path: Path) -> None:
    env = load_sqlite(_chain_db(tmp_path / "chain.sqlite"))
    roles = column_roles(env)
    a = plan_copies(env, roles, 3, seed=1, rescale=True)
    b = plan_copies(env, roles, 3, seed=1, rescale=True)
    c = plan_copies(env, roles, 3, seed=2, rescale=True)
    for x, y in zip(a, b, strict=True):
        assert all((x.keep[t] == y.keep[t]).all() for t in x.keep) and x.factors == y.factors
    assert any((x.keep["person"] != z.keep["person"]).any() for x, z in zip(a, c, strict=True))
    # copy k's deletions do not depend on rescaling (shared by SQL copy k and pandas copy k)
    plain = plan_copy(env, roles, 2, seed=1, rescale=False)
    assert all((plain.keep[t] == a[1].keep[t]).all() for t in plain.keep)


def test_pandas_copy_rescales_measures_only(tmp_path: Path) -> None:
    env = load_sqlite(_chain_db(tmp_path / "chain.sqlite"))
    roles = column_roles(env)
    plan = plan_copy(env, roles, 1, seed=3, rescale=True)
    frames = pandas_copy(env, plan)
    assert set(plan.factors) == {("city", "pop"), ("person", "income"), ("pet", "weight")}
    for f in plan.factors.values():
        assert RESCALE_RANGE[0] - 1e-9 <= max(f, 1 / f) <= RESCALE_RANGE[1] + 1e-9
    orig_person = env.tables["person"].frame()[plan.keep["person"]].reset_index(drop=True)
    person = frames["person"]
    f = plan.factors[("person", "income")]
    assert np.allclose(person["income"], orig_person["income"] * f)
    assert (person["pid"] == orig_person["pid"]).all() and (person["city"] == orig_person["city"]).all()
    # an integer measure is rounded back to integers and keeps its dtype
    city = frames["city"]
    assert city["pop"].dtype == env.tables["city"].frame()["pop"].dtype
    orig_city = env.tables["city"].frame()[plan.keep["city"]].reset_index(drop=True)
    assert (city["pop"] == (orig_city["pop"] * plan.factors[("city", "pop")]).round().astype("int64")).all()


def test_shop_example_copy_keeps_small_tables_and_cascades() -> None:
    env = load_sqlite(SHOP)
    plan = plan_copy(env, column_roles(env), 1, seed=0, rescale=False)
    assert plan.keep["products"].all()  # 8 rows
    assert (~plan.keep["customers"]).sum() == round(0.3 * 60)
    con = sqlite_copy(env, plan)
    assert (
        con.execute(
            "SELECT COUNT(*) FROM orders WHERE customer_id NOT IN (SELECT customer_id FROM customers)"
        ).fetchone()[0]
        == 0
    )
    assert (
        con.execute(
            "SELECT COUNT(*) FROM order_items WHERE order_id NOT IN (SELECT order_id FROM orders)"
        ).fetchone()[0]
        == 0
    )


@pytest.mark.parametrize("db", ["flight_2", "college_2", "chinook_1", "hr_1", "store_1"])
def test_spider_copies_add_no_dangling_reference(db: str, shared_data: Callable[..., Path]) -> None:
    path = shared_data("spider", "database", db, f"{db}.sqlite")
    env = load_sqlite(path)
    plan = plan_copy(env, column_roles(env), 1, seed=0, rescale=False)
    for name, table in env.tables.items():
        if table.n_rows >= 20:
            assert (~plan.keep[name]).sum() >= round(0.3 * table.n_rows)
    orig = sqlite_copy(env, None)
    copy = sqlite_copy(env, plan)

    def dangling(con: sqlite3.Connection) -> int:
        total = 0
        for fk in env.foreign_keys:
            cond = " AND ".join(f'p."{r}" = c."{c}"' for c, r in zip(fk.columns, fk.ref_columns, strict=True))
            notnull = " AND ".join(f'c."{c}" IS NOT NULL' for c in fk.columns)
            q = f'SELECT COUNT(*) FROM "{fk.table}" c WHERE {notnull} AND NOT EXISTS (SELECT 1 FROM "{fk.ref_table}" p WHERE {cond})'
            total += con.execute(q).fetchone()[0]
        return total

    assert dangling(copy) <= dangling(orig)


def test_rescale_factor_distribution_avoids_one() -> None:
    """|log f| is drawn in [log 1.1, log 2]: no factor within 10% of 1 (rounded integers would not move)."""
    import sqlite3 as s3
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.sqlite"
        con = s3.connect(p)
        con.execute(
            "CREATE TABLE t (k INTEGER PRIMARY KEY, " + ", ".join(f"m{i} REAL" for i in range(30)) + ")"
        )
        con.executemany(
            f"INSERT INTO t VALUES ({','.join('?' * 31)})",
            [(i, *[float(i * (j + 1) + 1) for j in range(30)]) for i in range(5)],
        )
        con.commit()
        con.close()
        env = load_sqlite(p)
        factors = [
            f
            for k in range(1, 4)
            for f in plan_copy(env, column_roles(env), k, seed=5, rescale=True).factors.values()
        ]
    assert len(factors) == 90
    assert all(abs(math.log(f)) >= math.log(1.1) - 1e-12 for f in factors)
    assert any(f < 1 for f in factors) and any(f > 1 for f in factors)

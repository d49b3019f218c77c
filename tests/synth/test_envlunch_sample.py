"""Sampling large databases when they are loaded (``BuildConfig.sample_rows``): every kept foreign-key value
still resolves, small tables stay whole, the draw is seeded, rowids and order are kept, and a build on a
sample writes that sample as the agent's database, on which its tasks are exact."""

from __future__ import annotations

import json
import os
import random
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datadojo.jsonl import read_tasks
from datadojo.reward.canon import canonical_from_json, same_result
from datadojo.reward.envlunch import score_programs, task_info
from datadojo.reward.programs import InProcessExecutor, Job
from datadojo.synth.envlunch.build import BuildConfig, build_tasks, load_environments
from datadojo.synth.envlunch.environment import Environment, load_environment, load_sqlite, stable_int
from datadojo.synth.envlunch.perturb import norm_key, sqlite_copy
from datadojo.synth.envlunch.sample import children_first, sample_database

CAP = 50


def _graph_db(path: Path, seed: int = 0) -> Path:
    """Tables over and under the cap, with every shape of foreign key the sampler must close:

    * a chain item (800) -> orders (500, sparse rowids) -> customer (300) -> region (10, whole);
    * a self-reference: customer.referrer -> customer (chains of referrals);
    * a cycle: dept (120).head -> emp (200), emp.dept -> dept;
    * a small table kept whole that references a large one: note (30) -> orders;
    * a table whose rowid is not its key (item has no INTEGER PRIMARY KEY), a two-column key
      (shipment (400) -> item_line (40, whole) on two columns), a WITHOUT ROWID table over the cap (tag, 90);
    * NULL references and references that already dangle in the file.
    """
    rng = random.Random(seed)
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE region (rid INTEGER PRIMARY KEY, rname TEXT);
        CREATE TABLE customer (cid INTEGER PRIMARY KEY, region INTEGER REFERENCES region(rid),
                               referrer INTEGER REFERENCES customer(cid), credit REAL);
        CREATE TABLE orders (oid INTEGER PRIMARY KEY, customer INTEGER REFERENCES customer(cid), total REAL);
        CREATE TABLE item (code TEXT, order_id INTEGER REFERENCES orders(oid), qty INTEGER);
        CREATE TABLE note (nid INTEGER PRIMARY KEY, order_id INTEGER REFERENCES orders, body TEXT);
        CREATE TABLE dept (did INTEGER PRIMARY KEY, head INTEGER REFERENCES emp(eid), budget REAL);
        CREATE TABLE emp (eid INTEGER PRIMARY KEY, dept INTEGER REFERENCES dept(did), salary REAL);
        CREATE TABLE item_line (a INTEGER, b TEXT, price REAL, PRIMARY KEY (a, b));
        CREATE TABLE shipment (sid INTEGER PRIMARY KEY, la INTEGER, lb TEXT, weight REAL,
                               FOREIGN KEY (la, lb) REFERENCES item_line(a, b));
        CREATE TABLE tag (name TEXT PRIMARY KEY, customer INTEGER REFERENCES customer(cid)) WITHOUT ROWID;
        CREATE INDEX orders_customer ON orders(customer);
        CREATE VIEW big_orders AS SELECT * FROM orders WHERE total > 100;
        """
    )
    con.executemany("INSERT INTO region VALUES (?,?)", [(i, f"R{i}") for i in range(10)])
    customers = []
    for i in range(1, 301):
        referrer = rng.choice([None, rng.randrange(1, i)]) if i > 1 else None
        customers.append((i, rng.randrange(12), referrer, rng.uniform(10, 1000)))  # region 10, 11 dangle
    con.executemany("INSERT INTO customer VALUES (?,?,?,?)", customers)
    oids = sorted(rng.sample(range(1, 2000), 500))  # sparse rowids
    con.executemany(
        "INSERT INTO orders VALUES (?,?,?)",
        [(o, rng.choice([None, rng.randrange(1, 320)]), rng.uniform(1, 300)) for o in oids],
    )
    con.executemany(
        "INSERT INTO item VALUES (?,?,?)",
        [(f"c{i}", rng.choice([*oids, None, 99999]), rng.randrange(1, 9)) for i in range(800)],
    )
    con.executemany(
        "INSERT INTO note VALUES (?,?,?)", [(i, rng.choice(oids), f"note {i}") for i in range(30)]
    )
    con.executemany(
        "INSERT INTO dept VALUES (?,?,?)",
        [(d, rng.randrange(1, 201), rng.uniform(1, 9)) for d in range(1, 121)],
    )
    con.executemany(
        "INSERT INTO emp VALUES (?,?,?)",
        [(e, rng.randrange(1, 121), rng.uniform(1, 9)) for e in range(1, 201)],
    )
    lines = [(a, b, rng.uniform(1, 5)) for a in range(20) for b in "xy"]
    con.executemany("INSERT INTO item_line VALUES (?,?,?)", lines)
    con.executemany(
        "INSERT INTO shipment VALUES (?,?,?,?)",
        [(s, *rng.choice(lines)[:2], rng.uniform(1, 5)) for s in range(400)],
    )
    con.executemany("INSERT INTO tag VALUES (?,?)", [(f"t{i:03d}", rng.randrange(1, 11)) for i in range(90)])
    con.commit()
    con.close()
    return path


@pytest.fixture(scope="module")
def graph_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _graph_db(tmp_path_factory.mktemp("sample") / "graph.sqlite")


def _rows_by_rowid(env: Environment, table: str) -> dict[Any, tuple[Any, ...]]:
    t = env.tables[table]
    assert t.rowids is not None
    return dict(zip(t.rowids, t.rows, strict=True))


def _key_set(env: Environment, table: str, columns: Iterable[str]) -> set[tuple[Any, ...]]:
    t = env.tables[table]
    idx = [t.columns.index(c) for c in columns]
    return {tuple(norm_key(r[i]) for i in idx) for r in t.rows}


def assert_consistent(sample: Environment, full: Environment) -> None:
    """Every foreign-key value of a kept row that matched a parent row in the file matches a kept one."""
    assert sample.foreign_keys == full.foreign_keys
    for fk in full.foreign_keys:
        in_file = _key_set(full, fk.ref_table, fk.ref_columns)
        kept = _key_set(sample, fk.ref_table, fk.ref_columns)
        child = sample.tables[fk.table]
        idx = [child.columns.index(c) for c in fk.columns]
        for row in child.rows:
            value = tuple(norm_key(row[i]) for i in idx)
            if value in in_file:
                assert value in kept, f"{fk}: {value} lost its parent row"


def test_every_kept_reference_resolves_and_small_tables_stay_whole(graph_db: Path) -> None:
    full = load_sqlite(graph_db)
    sample = load_sqlite(graph_db, sample_rows=CAP, seed=1)
    assert not full.sampled and full.image is None
    assert_consistent(sample, full)
    counts = {t: d.n_rows for t, d in full.tables.items()}
    # cut: every table with a rowid over the cap, to at least the cap (parents may go past it)
    over = {t for t, n in counts.items() if n > CAP and t != "tag"}
    assert set(sample.sampled) == over
    for t in over:
        kept, total = sample.sampled[t]
        assert total == counts[t] and kept == sample.tables[t].n_rows and CAP <= kept < total
    # nothing references item or shipment: a leaf is cut to exactly the cap
    assert sample.sampled["item"][0] == sample.sampled["shipment"][0] == CAP
    # whole: under the cap (region, note, item_line) and WITHOUT ROWID over it (tag)
    for t in ("region", "note", "item_line", "tag"):
        assert sample.tables[t].rows == full.tables[t].rows, t
    # the whole note table keeps its 30 orders; the whole tag table its customers
    notes = {r[1] for r in full.tables["note"].rows}
    assert notes <= {r[0] for r in sample.tables["orders"].rows}
    # children first: orders holds the rows its kept children reference, drawn up to the cap only if fewer
    file_orders = {r[0] for r in full.tables["orders"].rows}
    needed = {r[1] for r in sample.tables["item"].rows} | notes
    assert sample.sampled["orders"][0] == max(CAP, len(needed & file_orders))
    # ... and customer (after orders) the rows kept orders and tags reference, closed under referrals
    referrer = {r[0]: r[2] for r in full.tables["customer"].rows}
    todo = {r[1] for r in sample.tables["orders"].rows} | {r[1] for r in full.tables["tag"].rows}
    closure: set[int] = set()
    while todo:
        c = todo.pop()
        if c in referrer and c not in closure:
            closure.add(c)
            todo.add(referrer[c])
    kept_customers = {r[0] for r in sample.tables["customer"].rows}
    assert closure <= kept_customers and (len(closure) < CAP or kept_customers == closure)
    # a kept row is the file's row with the same rowid, rows in rowid order
    for t in over:
        mine, theirs = _rows_by_rowid(sample, t), _rows_by_rowid(full, t)
        assert all(theirs[rid] == row for rid, row in mine.items()), t
        assert sample.tables[t].rowids == sorted(mine)
    # item's rowid is not a column: the rowids kept are the file's
    assert set(sample.tables["item"].rowids or []) <= set(full.tables["item"].rowids or [])


def test_self_reference_and_cycle_are_closed(graph_db: Path) -> None:
    sample = load_sqlite(graph_db, sample_rows=CAP, seed=2)
    cust = {r[0]: r for r in sample.tables["customer"].rows}
    for row in cust.values():  # follow referral chains to their start: every step is kept
        while row[2] is not None:
            row = cust[row[2]]
    emp = {r[0] for r in sample.tables["emp"].rows}
    dept = {r[0] for r in sample.tables["dept"].rows}
    assert {r[1] for r in sample.tables["dept"].rows} <= emp
    assert {r[1] for r in sample.tables["emp"].rows} <= dept


def test_the_draw_depends_on_the_seed_only(graph_db: Path) -> None:
    columns = {t: d.columns for t, d in load_sqlite(graph_db).tables.items()}
    fks = load_sqlite(graph_db).foreign_keys
    a = sample_database(graph_db, columns, fks, CAP, lambda t: stable_int(7, "graph", t))
    b = sample_database(graph_db, columns, fks, CAP, lambda t: stable_int(7, "graph", t))
    c = sample_database(graph_db, columns, fks, CAP, lambda t: stable_int(8, "graph", t))
    assert a is not None and b is not None and c is not None
    assert {t: v.tolist() for t, v in a.keep.items()} == {t: v.tolist() for t, v in b.keep.items()}
    assert a.image == b.image
    assert a.keep["item"].tolist() != c.keep["item"].tolist()
    # nothing over the cap: no sample
    assert sample_database(graph_db, columns, fks, 10_000, lambda t: 0) is None
    # the loader seeds each table's draw from (seed, env_id, table)
    env = load_sqlite(graph_db, sample_rows=CAP, seed=7, env_id="graph")
    assert env.image == a.image


def test_sample_rows_zero_and_a_high_cap_give_whole_tables(graph_db: Path) -> None:
    full = load_sqlite(graph_db)
    for env in (load_sqlite(graph_db, sample_rows=0, seed=3), load_sqlite(graph_db, sample_rows=10_000)):
        assert not env.sampled and env.image is None
        assert {t: d.rows for t, d in env.tables.items()} == {t: d.rows for t, d in full.tables.items()}
    assert full.loaded_as(10_000, 5) and not full.loaded_as(CAP, 0)
    with pytest.raises(ValueError, match="sample_rows"):
        load_sqlite(graph_db, sample_rows=-1)


def test_the_sample_database_is_the_environment(graph_db: Path) -> None:
    """Copies start from the sample's bytes: same schema (index, view), the kept rows under their rowids."""
    sample = load_sqlite(graph_db, sample_rows=CAP, seed=4)
    con = sqlite_copy(sample, None)
    try:
        for t, d in sample.tables.items():
            if d.rowids is not None:
                got = con.execute(f'SELECT rowid FROM "{t}" ORDER BY rowid').fetchall()
                assert [r[0] for r in got] == d.rowids, t
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
        assert {"orders_customer", "big_orders"} <= names
        assert con.execute("SELECT count(*) FROM big_orders").fetchone()[0] > 0
    finally:
        con.close()


def test_samples_are_kept_per_file_settings_and_change_with_the_file(tmp_path: Path) -> None:
    db = _graph_db(tmp_path / "g.sqlite")
    a = load_sqlite(db, sample_rows=CAP, seed=0)
    assert load_sqlite(db, sample_rows=CAP, seed=0) is a
    assert load_environment(db, sample_rows=CAP, seed=1) is not a
    _graph_db(db, seed=5)  # rewritten: another file
    st = db.stat()
    os.utime(db, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    b = load_sqlite(db, sample_rows=CAP, seed=0)
    assert b is not a and b.tables["customer"].rows != a.tables["customer"].rows


def test_table_files_are_sampled_too(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("x,y\n" + "".join(f"{i},{i * 2}\n" for i in range(300)))
    env = load_environment(csv, sample_rows=CAP, seed=0)
    assert env.sampled == {"t": (CAP, 300)} and env.tables["t"].n_rows == CAP
    xs = [r[0] for r in env.tables["t"].rows]
    assert xs == sorted(xs) and all(y == 2 * x for x, y in env.tables["t"].rows)
    assert load_environment(csv, sample_rows=CAP, seed=0).tables["t"].rows == env.tables["t"].rows
    assert load_environment(csv).tables["t"].n_rows == 300


def test_a_schema_that_cannot_be_rebuilt_is_loaded_whole_and_says_why(tmp_path: Path) -> None:
    """An FTS5 table owns shadow tables that creating it makes again: the copy of the schema fails, and the
    loader keeps the whole database (with a warning naming the file) instead of failing the build."""
    db = tmp_path / "fts.sqlite"
    con = sqlite3.connect(db)
    try:
        con.execute("CREATE VIRTUAL TABLE docs USING fts5(body)")
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no FTS5")
    con.execute("CREATE TABLE big (id INTEGER PRIMARY KEY, v REAL)")
    con.executemany("INSERT INTO big VALUES (?, ?)", [(i, i / 2) for i in range(1, 501)])
    con.executemany("INSERT INTO docs VALUES (?)", [(f"note {i}",) for i in range(30)])
    con.commit()
    con.close()
    env = load_sqlite(db, sample_rows=CAP, seed=1)
    assert not env.sampled and env.image is None
    assert env.tables["big"].n_rows == 500
    assert any("cannot be sampled" in w and str(db) in w for w in env.warnings), env.warnings


def test_children_first_order() -> None:
    from datadojo.synth.envlunch.environment import SchemaForeignKey as FK

    fks = [
        FK("item", ("o",), "orders", ("id",)),
        FK("orders", ("c",), "customer", ("id",)),
        FK("customer", ("r",), "customer", ("id",)),  # a self-reference orders nothing
        FK("emp", ("d",), "dept", ("id",)),
        FK("dept", ("h",), "emp", ("id",)),
    ]
    order = children_first(["customer", "dept", "emp", "item", "orders"], fks)
    assert order.index("item") < order.index("orders") < order.index("customer")
    assert sorted(order) == ["customer", "dept", "emp", "item", "orders"]


@settings(max_examples=25)
@given(
    sizes=st.lists(st.integers(0, 60), min_size=1, max_size=4),
    edges=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=5),
    cap=st.integers(1, 30),
    seed=st.integers(0, 3),
    data_seed=st.integers(0, 1000),
)
def test_any_key_graph_is_closed(
    tmp_path_factory: pytest.TempPathFactory,
    sizes: list[int],
    edges: list[tuple[int, int]],
    cap: int,
    seed: int,
    data_seed: int,
) -> None:
    """Random tables and foreign keys (chains, self-references, cycles; NULL and dangling values)."""
    n = len(sizes)
    edges = sorted({(c % n, p % n) for c, p in edges})
    rng = random.Random(data_seed)
    db = tmp_path_factory.mktemp("h") / "h.sqlite"
    con = sqlite3.connect(db)
    for i in range(n):
        refs = "".join(f", f{j} INTEGER REFERENCES t{p}(id)" for j, (c, p) in enumerate(edges) if c == i)
        con.execute(f"CREATE TABLE t{i} (id INTEGER PRIMARY KEY{refs})")
    for i in range(n):
        cols = [j for j, (c, _) in enumerate(edges) if c == i]
        for r in range(1, sizes[i] + 1):
            vals = [rng.choice([None, 0, *range(1, sizes[edges[j][1]] + 2)]) for j in cols]
            con.execute(f"INSERT INTO t{i} VALUES ({', '.join('?' * (1 + len(cols)))})", (r * 3, *vals))
    con.commit()
    con.close()
    full = load_sqlite(db)
    sample = load_sqlite(db, sample_rows=cap, seed=seed)
    assert_consistent(sample, full)
    for t, d in full.tables.items():
        if d.n_rows <= cap:
            assert sample.tables[t].rows == d.rows
        else:
            assert cap <= sample.tables[t].n_rows <= d.n_rows and t in sample.sampled


# -- a build on a sample -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sampled_build(graph_db: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("sb") / "tasks.jsonl"
    config = BuildConfig(n=24, seed=5, workers=1, sample_rows=CAP)
    envs = load_environments([graph_db], sample_rows=config.sample_rows, seed=config.seed)
    return out, build_tasks(envs, out, config), envs[0]


def test_a_build_writes_the_sample_as_the_agents_database(sampled_build) -> None:
    out, report, env = sampled_build
    assert len(report.tasks) == 24 and env.sampled
    assert report.sampled == {"graph": env.sampled} and "item 50 of 800" in (report.sample_text() or "")
    tasks = list(read_tasks(out))
    sql = [t for t in tasks if t.extra["backend"] == "sql"]
    assert sql and any(t.extra["backend"] == "pandas" for t in tasks)
    for t in tasks:  # every task says it was built on a sample, and of what
        assert t.extra["sample"] == {
            "rows": CAP,
            "seed": 5,
            "tables": {k: list(v) for k, v in sorted(env.sampled.items())},
        }
    # and the funnel on disk says so too (what a reader of the run folder sees without the tasks)
    funnel = json.loads(report.funnel.read_text())
    assert funnel["sample"] == {
        "rows": CAP,
        "seed": 5,
        "environments": {"graph": {k: list(v) for k, v in sorted(env.sampled.items())}},
    }
    info = task_info(sql[0], out)
    db = info.orig_dir / "graph.sqlite"
    con = sqlite3.connect(db)
    try:
        for name, table in env.tables.items():
            assert con.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] == table.n_rows, name
    finally:
        con.close()
    pandas = next(t for t in tasks if t.extra["backend"] == "pandas")
    import pandas as pd

    pinfo = task_info(pandas, out)
    for table, file in pandas.extra["table_files"].items():
        assert len(pd.read_parquet(pinfo.orig_dir / file)) == env.tables[table].n_rows


def test_targets_reproduce_on_the_written_sample(sampled_build) -> None:
    out, _, _ = sampled_build
    infos = [task_info(t, out) for t in read_tasks(out)]
    jobs = [Job(i.backend, i.program, (i.orig_dir,), i.db_name) for i in infos]  # type: ignore[arg-type]
    for info, (outcome,) in zip(infos, InProcessExecutor().run(jobs), strict=True):
        # the same result, floats within the tolerance (a sum's order may differ without synthesis' indexes)
        assert outcome.result is not None and same_result(outcome.result, info.target), info.task.id
        assert canonical_from_json(info.task.extra["target"]) == info.target
    records = score_programs([(i, i.program, 2, 0) for i in infos], InProcessExecutor())
    assert all(r.solved for r in records), [(r.task_id, r.errors) for r in records if not r.solved]


def test_a_build_samples_environments_loaded_whole_and_any_worker_count_agrees(
    graph_db: Path, tmp_path: Path, sampled_build
) -> None:
    _, report, _ = sampled_build
    whole = load_environments([graph_db])  # loaded whole: the build samples them as its config says
    again = build_tasks(whole, tmp_path / "a.jsonl", BuildConfig(n=24, seed=5, workers=1, sample_rows=CAP))
    two = build_tasks(whole, tmp_path / "b.jsonl", BuildConfig(n=24, seed=5, workers=2, sample_rows=CAP))
    key = lambda r: [(t.id, t.extra["program"], json.dumps(t.extra["copy_targets"])) for t in r.tasks]  # noqa: E731
    assert key(again) == key(report) == key(two)
    off = build_tasks(whole, tmp_path / "c.jsonl", BuildConfig(n=6, seed=5, workers=1, sample_rows=0))
    assert not off.sampled and all("sample" not in t.extra for t in off.tasks)
    assert "sample" not in json.loads(off.funnel.read_text())  # type: ignore[union-attr]

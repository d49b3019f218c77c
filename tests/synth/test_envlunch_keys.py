"""Column roles (key / identifier / measure / …): the rules on hand-made tables and on the Spider databases."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from datadojo.synth.envlunch.environment import EnvError, load_environment, load_sqlite
from datadojo.synth.envlunch.keys import column_roles, name_tokens


def _db(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE team (team_id INTEGER PRIMARY KEY, name TEXT, city TEXT, founded_year INTEGER);
        CREATE TABLE player (
            pid INTEGER PRIMARY KEY, team INTEGER REFERENCES team, fullName TEXT, phone_number TEXT,
            salary REAL, goals INTEGER, active INTEGER, dob TEXT, position TEXT, shirtNo INTEGER);
        """
    )
    con.executemany(
        "INSERT INTO team VALUES (?,?,?,?)", [(i, f"T{i}", ["A", "B"][i % 2], 1900 + i) for i in range(1, 6)]
    )
    rows = [
        (
            i,
            1 + i % 5,
            f"Player {i}",
            f"555-{i:04d}",
            1000.5 * i,
            i % 7,
            i % 2,
            f"1990-01-{1 + i % 28:02d}",
            ["GK", "DF", "MF", "FW"][i % 4],
            i,
        )
        for i in range(1, 31)
    ]
    con.executemany("INSERT INTO player VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
    con.commit()
    con.close()
    return path


def test_roles_follow_the_documented_rules(tmp_path: Path) -> None:
    env = load_sqlite(_db(tmp_path / "club.sqlite"))
    roles = {t: {c: i.role for c, i in cols.items()} for t, cols in column_roles(env).items()}
    # rule 1: declared keys (PK, FK and the referenced column) win
    assert (
        roles["player"]["pid"] == "key"
        and roles["player"]["team"] == "key"
        and roles["team"]["team_id"] == "key"
    )
    # rule 2: identifier by last name token (phone_number -> "number", shirtNo -> "no")
    assert roles["player"]["phone_number"] == "identifier" and roles["player"]["shirtNo"] == "identifier"
    # rule 3: temporal by name (year, dob)
    assert roles["team"]["founded_year"] == "temporal" and roles["player"]["dob"] == "temporal"
    # rules 4-7
    assert roles["player"]["active"] == "flag"
    assert roles["player"]["salary"] == "measure" and roles["player"]["goals"] == "measure"
    assert roles["player"]["position"] == "category" and roles["team"]["city"] == "category"
    assert roles["player"]["fullName"] == "text"
    # REFERENCES without a column resolves to the parent's primary key
    assert [(fk.table, fk.columns, fk.ref_table, fk.ref_columns) for fk in env.foreign_keys] == [
        ("player", ("team",), "team", ("team_id",))
    ]


def test_name_tokens_split_snake_and_camel_case() -> None:
    assert name_tokens("StuID") == ["stu", "id"]
    assert name_tokens("phone_number") == ["phone", "number"]
    assert name_tokens("Net_Worth_Millions") == ["net", "worth", "millions"]
    assert name_tokens("HTMLParser2") == ["html", "parser", "2"]


def test_unreadable_sources_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.sqlite"
    bad.write_bytes(b"not a database at all" * 10)
    with pytest.raises(EnvError, match=r"broken\.sqlite"):
        load_sqlite(bad)
    with pytest.raises(EnvError, match="no such database"):
        load_sqlite(tmp_path / "missing.sqlite")
    with pytest.raises(EnvError, match=r"notes\.txt"):
        load_environment(tmp_path / "notes.txt")


@pytest.mark.requires_data("spider/database")
def test_roles_on_spider_known_columns(shared_data: Callable[..., Path]) -> None:
    root = shared_data("spider", "database")
    singer = {
        t: {c: i.role for c, i in cols.items()}
        for t, cols in column_roles(load_sqlite(root / "singer" / "singer.sqlite")).items()
    }
    assert singer["singer"]["Singer_ID"] == "key"
    assert singer["singer"]["Net_Worth_Millions"] == "measure"
    assert singer["singer"]["Birth_Year"] == "temporal"
    assert singer["singer"]["Citizenship"] == "category"
    assert singer["song"]["Sales"] == "measure"
    chinook = column_roles(load_sqlite(root / "chinook_1" / "chinook_1.sqlite"))
    assert chinook["Employee"]["PostalCode"].role == "identifier"
    assert chinook["Employee"]["Email"].role == "identifier"
    assert chinook["Employee"]["ReportsTo"].role == "key"  # a self-referencing foreign key
    assert chinook["Track"]["Milliseconds"].role == "measure"
    assert chinook["Track"]["AlbumId"].role == "key"


def test_roles_on_every_spider_database_never_rescale_keys(shared_data: Callable[..., Path]) -> None:
    """Across all Spider databases: every declared key column is a key, and measures are numeric
    non-key columns (what perturbation rescales on the dataframe side)."""
    root = shared_data("spider", "database")
    n_measures = n_keys = 0
    for db in sorted(root.glob("*/*.sqlite")):
        env = load_sqlite(db)
        roles = column_roles(env)
        declared = {(t, c) for t, d in env.tables.items() for c in d.primary_key}
        declared |= {(fk.table, c) for fk in env.foreign_keys for c in fk.columns}
        declared |= {(fk.ref_table, c) for fk in env.foreign_keys for c in fk.ref_columns}
        for t, c in declared:
            assert roles[t][c].role in ("key", "empty"), (db.name, t, c)
            n_keys += 1
        for t, cols in roles.items():
            for c, info in cols.items():
                if info.role == "measure":
                    n_measures += 1
                    assert (t, c) not in declared
                    values = [v for v in env.tables[t].column_values(c) if v is not None]
                    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values), (
                        db.name,
                        t,
                        c,
                    )
    assert n_keys > 1000 and n_measures > 300

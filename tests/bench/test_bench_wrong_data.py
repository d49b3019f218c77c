"""``--data`` pointing at the wrong thing: every file-reading benchmark refuses in one line naming its layout.

Before: Spider, BIRD and QRData given a SQLite database ended in a ``UnicodeDecodeError`` traceback
(exit 1); the JSONL benchmarks logged "skipping an unterminated last line" and then "no tasks".
"""

from __future__ import annotations

import sqlite3
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.bench import get_benchmark
from datadojo.bench.base import BenchmarkError
from datadojo.cli.app import app
from datadojo.errors import ExitCode

#: Every built-in benchmark that reads its tasks from files at ``--data`` (shop-sql's questions are bundled).
FILE_BENCHES = ["spider", "bird", "qrdata", "dabench", "databench", "tablebench", "scidata", "dabstep",
                "spider2-lite"]  # fmt: skip


def _sqlite(tmp_path: Path) -> Path:
    db = tmp_path / "shop.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE orders (id INTEGER, total REAL)")
    con.executemany("INSERT INTO orders VALUES (?, ?)", [(i, i * 1.5) for i in range(50)])
    con.commit()
    con.close()
    return db


def _zip(tmp_path: Path) -> Path:
    z = tmp_path / "spider_data.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("spider/dev.json", "[]")
    return z


def _latin1(tmp_path: Path) -> Path:
    p = tmp_path / "notes.txt"
    p.write_bytes("Größe;Maß\n".encode("latin-1"))
    return p


@pytest.mark.parametrize("bench", FILE_BENCHES)
@pytest.mark.parametrize(("make", "kind"), [(_sqlite, "a SQLite database"), (_zip, "a zip archive"),
                                            (_latin1, "not UTF-8 text")])  # fmt: skip
def test_a_binary_file_is_refused_naming_the_layout(tmp_path: Path, bench: str, make, kind: str) -> None:
    b = get_benchmark(bench)
    bad = make(tmp_path)
    with pytest.raises(BenchmarkError) as info:
        list(b.load(bad))
    msg = str(info.value)
    assert "\n" not in msg
    assert str(bad) in msg and kind in msg
    assert b.layout and msg.endswith(f"expected {b.layout}")


@pytest.mark.parametrize("bench", FILE_BENCHES)
def test_a_folder_without_the_files_names_the_layout(tmp_path: Path, bench: str) -> None:
    b = get_benchmark(bench)
    with pytest.raises(BenchmarkError) as info:
        list(b.load(tmp_path))
    assert str(tmp_path) in str(info.value)
    if bench != "scidata":  # scidata's own message already names qa.jsonl / meta.jsonl
        assert f"expected {b.layout}" in str(info.value)


@pytest.mark.parametrize("bench", ["spider", "qrdata", "tablebench", "dabstep", "spider2-lite"])
def test_text_that_is_not_the_records_names_the_layout(tmp_path: Path, bench: str) -> None:
    bad = tmp_path / "data.csv"
    bad.write_text("a,b\n1,2\n")
    b = get_benchmark(bench)
    with pytest.raises(BenchmarkError) as info:
        list(b.load(bad))
    assert str(bad) in str(info.value) and f"expected {b.layout}" in str(info.value)


@pytest.mark.parametrize("bench", ["spider", "bird", "qrdata", "dabench", "dabstep", "spider2-lite"])
def test_cli_eval_and_score_exit_2_in_one_line(tmp_path: Path, bench: str) -> None:
    db = _sqlite(tmp_path)
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"id": "x", "prediction": "1"}\n')
    for argv in (
        [
            "eval",
            bench,
            "--data",
            str(db),
            "--model",
            "openai:m@http://127.0.0.1:9/v1",
            "-o",
            str(tmp_path / "o"),
        ],
        ["score", bench, "--data", str(db), "-p", str(preds)],
    ):
        res = CliRunner().invoke(app, argv, env={"COLUMNS": "300"})
        assert res.exit_code == ExitCode.BAD_INPUT, res.output
        assert "Traceback" not in res.output and "UnicodeDecodeError" not in res.output
        errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "is a SQLite database" in errors[0] and "expected" in errors[0], (
            res.stderr
        )

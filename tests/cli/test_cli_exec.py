"""``datadojo exec``: turns run in one fresh workspace; text and JSON output; clear errors for bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.cli.app import app

pytestmark = pytest.mark.timeout(120)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"
runner = CliRunner()


@pytest.fixture
def turns(tmp_path: Path) -> dict[str, Path]:
    files = {
        "t1.py": "import csv\nrows = list(csv.DictReader(open('sales.csv')))\nlen(rows)\n",
        "t2.py": "print(rows[0]['region'] != '')\nmissing_name\n",
        "t3.sql": "SELECT count(*) AS n FROM orders;\n",
        "t4.py": "print(len(rows))\n",
    }
    out = {}
    for name, text in files.items():
        out[name] = tmp_path / name
        out[name].write_text(text)
    for name in ("sales.csv", "shop.sqlite"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    return out


def _args(turns: dict[str, Path], *extra: str) -> list[str]:
    data = turns["t1.py"].parent
    return [
        "exec",
        *(str(turns[n]) for n in ("t1.py", "t2.py", "t3.sql", "t4.py")),
        "--data",
        str(data / "sales.csv"),
        "--data",
        str(data / "shop.sqlite"),
        *extra,
    ]


@pytest.mark.parametrize("mode", ["chunked", "persistent"])
def test_json_lines(turns: dict[str, Path], mode: str) -> None:
    res = runner.invoke(app, _args(turns, "--json", "--mode", mode))
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["turn"] for r in records] == [1, 2, 3, 4]
    for r in records:
        assert {"observation", "error", "timed_out", "killed", "isolation", "status"} <= r.keys()
        assert r["isolation"] in ("bwrap", "reduced") and not r["timed_out"] and not r["killed"]
    assert records[0]["observation"] == "240\n" and not records[0]["error"]
    assert (
        records[1]["error"] and "NameError: name 'missing_name' is not defined" in records[1]["observation"]
    )
    assert records[1]["observation"].startswith("True\n")
    assert records[2]["status"] == "ok" and "200" in records[2]["observation"]
    assert records[3]["observation"] == "240\n"  # state carried over from turn 1


def test_text_output(turns: dict[str, Path]) -> None:
    res = runner.invoke(app, _args(turns, "--max-chars", "500"))
    assert res.exit_code == 0, res.output
    assert "── turn 1: t1.py · ok" in res.stdout and "── turn 2: t2.py · error" in res.stdout
    assert "NameError" in res.stdout and "── isolation:" in res.stdout


def test_policy_and_timeout_options(tmp_path: Path) -> None:
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(30)\n")
    banned = tmp_path / "banned.py"
    banned.write_text("import subprocess\n")
    res = runner.invoke(app, ["exec", str(banned), str(slow), "--timeout", "1", "--json"])
    assert res.exit_code == 0, res.output
    first, second = (json.loads(line) for line in res.stdout.splitlines())
    assert first["status"] == "rejected" and "subprocess" in first["observation"]
    assert second["status"] == "timeout" and second["timed_out"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["exec", "notes.txt"], "neither a .py nor a .sql"),
        (["exec", "absent.py"], "does not exist"),
        (["exec", "ok.py", "--data", "absent.csv"], "absent.csv does not exist"),
        (["exec", "ok.py", "--mode", "jupyter"], "chunked"),
        (["exec", "ok.py", "--isolation", "docker"], "bwrap"),
    ],
)
def test_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("hi")
    (tmp_path / "ok.py").write_text("print(1)\n")
    res = runner.invoke(app, argv)
    assert res.exit_code == 2
    assert message in " ".join(res.output.split()).replace("│", "").replace("  ", " ")

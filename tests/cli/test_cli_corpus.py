"""``datadojo corpus scan | show | overlap`` through the real typer app."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.corpus.scan import read_corpus

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "data"
runner = CliRunner()


def test_scan_writes_jsonl_and_prints_summary(tmp_path: Path) -> None:
    out = tmp_path / "corpus.jsonl"
    res = runner.invoke(app, ["corpus", "scan", str(EXAMPLES), "--out", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    recs = list(read_corpus(out))
    assert len(recs) == 8
    assert "accepted per format" in res.output and "rejections per reason" in res.output
    assert "too_few_rows" in res.output and "8 files found, 8 scanned" in res.output
    again = runner.invoke(app, ["corpus", "scan", str(EXAMPLES), "--out", str(out), "--no-progress"])
    assert "0 scanned, 8 already in" in again.output


def test_scan_json_summary_and_bounds(tmp_path: Path) -> None:
    out = tmp_path / "c.jsonl"
    res = runner.invoke(
        app,
        [
            "corpus",
            "scan",
            str(EXAMPLES / "station_survey"),
            "-o",
            str(out),
            "--json",
            "--no-progress",
            "--min-rows",
            "none",
            "--max-rows",
            "50",
        ],
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output.strip().splitlines()[-1])
    assert summary["accepted_by_kind"] == {"json": 1}  # sites.json (8 rows); measurements has 96 > 50
    assert summary["rejected_by_reason"]["too_many_rows"] == 1 and summary["seen"] == 5


def test_scan_progress_bar_runs(tmp_path: Path) -> None:
    res = runner.invoke(app, ["corpus", "scan", str(EXAMPLES / "sales.csv"), "-o", str(tmp_path / "c.jsonl")])
    assert res.exit_code == 0, res.output
    assert "1/1" in res.output


def test_scan_bad_arguments(tmp_path: Path) -> None:
    res = runner.invoke(app, ["corpus", "scan", str(tmp_path / "nope"), "-o", str(tmp_path / "c.jsonl")])
    assert res.exit_code != 0 and "no such file or folder" in res.output
    res = runner.invoke(
        app, ["corpus", "scan", str(EXAMPLES), "-o", str(tmp_path / "c.jsonl"), "--max-rows", "lots"]
    )
    assert res.exit_code != 0 and "whole number" in res.output
    res = runner.invoke(
        app, ["corpus", "scan", str(EXAMPLES), "-o", str(tmp_path / "c.jsonl"), "--row-scope", "some"]
    )
    assert res.exit_code != 0


def test_show_file_text_and_json() -> None:
    res = runner.invoke(app, ["corpus", "show", str(EXAMPLES / "shop.sqlite"), "--budget", "5000"])
    assert res.exit_code == 0 and "CREATE TABLE orders" in res.output
    res = runner.invoke(app, ["corpus", "show", str(EXAMPLES / "sales.csv"), "--json"])
    data = json.loads(res.output)
    assert data["kind"] == "csv" and data["tables"][0]["n_rows"] == 240


def test_show_folder_and_budget() -> None:
    res = runner.invoke(app, ["corpus", "show", str(EXAMPLES / "station_survey"), "-b", "1200"])
    assert res.exit_code == 0 and res.output.startswith("Folder: station_survey")
    assert len(res.output.rstrip("\n")) <= 1200
    res = runner.invoke(app, ["corpus", "show", str(EXAMPLES / "station_survey"), "--json"])
    assert json.loads(res.output)["kinds"]["csv"] == 1


def test_show_unreadable_file_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xlsx"
    bad.write_bytes(b"PK\x03\x04 truncated")
    res = runner.invoke(app, ["corpus", "show", str(bad)])
    assert res.exit_code == 1 and "cannot be read" in res.output


def test_overlap_command(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    bench.mkdir()
    shutil.copy(EXAMPLES / "sales.csv", bench / "renamed.csv")
    (bench / "other.csv").write_text("p,q\n1,2\n", encoding="utf-8")
    res = runner.invoke(app, ["corpus", "overlap", "--train", str(EXAMPLES), "--bench", str(bench)])
    assert res.exit_code == 0, res.output
    assert "header overlap: 50.00% (1 of 2 benchmark tables" in res.output and "renamed.csv" in res.output
    res = runner.invoke(
        app,
        ["corpus", "overlap", "--train", str(EXAMPLES), "--bench", str(bench), "--json", "--unit", "column"],
    )
    assert json.loads(res.output)["unit"] == "column"


def test_scan_with_worker_processes_writes_the_records_of_one_process(tmp_path: Path) -> None:
    def records(path: Path) -> list[str]:
        return sorted(
            json.dumps(r.model_dump(exclude={"seconds"}), sort_keys=True) for r in read_corpus(path)
        )

    one = runner.invoke(
        app, ["corpus", "scan", str(EXAMPLES), "-o", str(tmp_path / "one.jsonl"), "--no-progress"]
    )
    assert one.exit_code == 0, one.output
    # With the progress bar on (its refresh thread makes the workers spawn rather than fork).
    two = runner.invoke(
        app, ["corpus", "scan", str(EXAMPLES), "-o", str(tmp_path / "two.jsonl"), "-w", "2", "--json"]
    )
    assert two.exit_code == 0, two.output
    summary = json.loads(two.output.strip().splitlines()[-1])
    assert summary["nodes"][0]["workers"] == 2 and summary["nodes"][0]["done"] == 8
    assert records(tmp_path / "two.jsonl") == records(tmp_path / "one.jsonl")
    bad = runner.invoke(
        app, ["corpus", "scan", str(EXAMPLES), "-w", "2", "--executor", "ray", "--ray-address", "x"]
    )
    assert bad.exit_code == 2 and "--workers is for --executor local" in bad.output

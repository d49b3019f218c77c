"""`datadojo synth sailor`: clear one-line errors for bad input; a dead model server stops the run cleanly."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.llm.testing import ScriptedLLMServer, Status

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, ["synth", "sailor", *args], env={"DATADOJO_MODEL": "", "OPENAI_API_KEY": "x"})


def test_bad_input_names_what_is_wrong(dataset: Path, tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    res = invoke(str(tmp_path / "nope"), "--model", "openai:m@http://127.0.0.1:9/v1", "--out", out)
    assert res.exit_code == 2 and "not a folder" in res.output
    res = invoke(str(dataset), "--out", out)
    assert res.exit_code == 2 and "no model given" in res.output
    res = invoke(str(dataset), "--model", "openai:m@http://127.0.0.1:9/v1", "--out", out, "--only", "L7")
    assert res.exit_code == 2 and "L7" in res.output
    res = invoke(str(dataset), "--model", "openai:m@http://127.0.0.1:9/v1", "--out", out, "--k-min", "4")
    assert res.exit_code == 2 and "k_min" in res.output
    bad = tmp_path / "seeds.json"
    bad.write_text(json.dumps({"seeds": [{"id": "a", "level": "L5", "intent": "x"}]}))
    res = invoke(str(dataset), "--model", "openai:m@http://127.0.0.1:9/v1", "--out", out, "--seeds", str(bad))
    assert res.exit_code == 2 and "seed 1" in res.output and "level" in res.output
    assert not Path(out).exists()


def test_a_model_server_error_ends_the_run_with_one_line(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    with ScriptedLLMServer(lambda req: Status(401, message="bad key")) as srv:
        res = invoke(
            str(dataset), "--model", f"openai:m@{srv.base_url}", "--out", str(out), "--only", "L0-map"
        )
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert "error:" in text and "rerun the same command to resume" in text
    assert not (out / "units.jsonl").exists()

"""`datadojo synth sailor`: clear one-line errors for bad input; a dead model server stops the run cleanly."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.testing.server import ScriptedLLMServer, Status

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
    # a request that finally failed is the server's: ExitCode.MODEL_SERVER
    assert res.exit_code == 3, res.output
    text = " ".join(res.output.split())
    assert "error:" in text and "rerun the same command to resume" in text
    assert not (out / "units.jsonl").exists()


def test_a_run_writes_every_output_prints_the_table_and_a_rerun_sends_nothing(
    dataset: Path, tmp_path: Path
) -> None:
    from datadojo.testing.sailor_teacher import FakeSailor

    out = tmp_path / "out"
    args = ["--out", str(out), "--only", "L0-map", "--max-nodes", "3", "--max-depth", "2", "--no-logprobs"]
    with ScriptedLLMServer(FakeSailor()) as srv:
        res = invoke(str(dataset), "--model", f"openai:m@{srv.base_url}", *args)
        assert res.exit_code == 0, res.output
        first = len(srv.requests)
        again = invoke(str(dataset), "--model", f"openai:m@{srv.base_url}", *args)
        assert again.exit_code == 0, again.output
        assert len(srv.requests) == first > 0  # resume: the finished (folder, seed) unit sends no request
    for name in ("tree.jsonl", "trajectories.jsonl", "qc.jsonl", "qa.jsonl", "meta.jsonl", "summary.json"):
        assert (out / name).exists(), name
    assert (out / "report.html").exists()
    summary = json.loads((out / "summary.json").read_text())
    text = " ".join(res.output.split())
    # the closing table: per level and in all, units / nodes / probes / trajectories / kept / QA / meta
    for word in ("level", "units", "nodes", "probes", "trajectories", "kept", "QA", "meta", "L0", "all"):
        assert word in text
    row = [summary[k] for k in ("units", "nodes", "probes_run", "trajectories", "kept", "qa", "meta")]
    assert "│ all │ " + " │ ".join(str(v) for v in row) + " │" in text
    for reason, count in summary["removed"].items():
        assert f"{reason} {count}" in text
    assert "0 unit(s) explored, 1 already done" in " ".join(again.output.split())


def test_a_damaged_run_folder_is_named_by_file_and_line(dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "units.jsonl").write_text('{"unit": "a"}\n{"unit": broken\n{"unit": "b"}\n')
    with ScriptedLLMServer(lambda req: Status(500)) as srv:
        res = invoke(
            str(dataset), "--model", f"openai:m@{srv.base_url}", "--out", str(out), "--only", "L0-map"
        )
        assert not srv.requests
    assert res.exit_code == 2 and "Traceback" not in res.output
    squeezed = "".join(res.output.split())  # rich wraps long paths anywhere
    assert "error:" in squeezed and "units.jsonl:2:notvalidJSON" in squeezed and "new--out" in squeezed


def test_nothing_kept_warns_with_the_reasons_and_exits_5_unless_allowed(
    dataset: Path, tmp_path: Path
) -> None:
    from datadojo.errors import ExitCode
    from datadojo.testing.sailor_teacher import FakeSailor

    fake = FakeSailor()
    fake.strategies = [("statistics", 0.1), ("schema_inspection", 0.05)]  # every strategy under tau_pre (0.3)
    out = tmp_path / "out"
    args = ["--out", str(out), "--only", "L0-map", "--max-nodes", "3", "--max-depth", "2", "--no-logprobs"]
    with ScriptedLLMServer(fake) as srv:
        res = invoke(str(dataset), "--model", f"openai:m@{srv.base_url}", *args)
        assert res.exit_code == ExitCode.NOTHING_KEPT == 5, res.output
        text = " ".join(res.output.split())
        assert "0 trajectories kept" in text and "every proposed strategy scored under tau_pre" in text
        ok = invoke(str(dataset), "--model", f"openai:m@{srv.base_url}", *args, "--allow-empty")
        assert ok.exit_code == 0, ok.output and "0 trajectories kept" in ok.output
    page = (out / "report.html").read_text()
    # the report says what was run and why the tree is empty
    assert str(dataset.resolve()) in page and "policy model" in page and "tau_pre" in page
    assert "Units that kept nothing" in page and "every proposed strategy scored under tau_pre" in page

"""One error root: a DataDojoError from any command is one line and exit 2; anything else is a bug."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import datadojo.train.export.llamafactory as llamafactory
from datadojo.bench.registry import get_benchmark, get_source
from datadojo.cli.app import app
from datadojo.errors import DataDojoError, UnknownNameError
from datadojo.testing.server import ScriptedLLMServer, Status
from datadojo.train.registry import get_policy_loss
from datadojo.types import Trajectory


def _run(tmp_path: Path) -> object:
    data = tmp_path / "t.jsonl"
    # a well-formed input, so the command reaches the library call the test makes fail
    data.write_text(Trajectory(task_id="t1", stop_reason="answer").to_json() + "\n")
    return CliRunner().invoke(app, ["export", "llamafactory", "--data", str(data), "--out", str(tmp_path)])


def test_datadojo_error_is_one_line_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_a: object, **_k: object) -> None:
        raise DataDojoError("t.jsonl line 3: no messages")

    monkeypatch.setattr(llamafactory, "export_llamafactory", refuse)
    result = _run(tmp_path)
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: t.jsonl line 3: no messages"
    assert "Traceback" not in result.output


def test_bug_keeps_its_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def bug(*_a: object, **_k: object) -> None:
        raise KeyError("x")

    monkeypatch.setattr(llamafactory, "export_llamafactory", bug)
    result = _run(tmp_path)
    assert result.exit_code == 1
    assert isinstance(result.exception, KeyError)  # not turned into "error: 'x'"
    assert "error:" not in result.stderr


@pytest.mark.parametrize(
    ("lookup", "start"),
    [
        (lambda: get_benchmark("nope"), "unknown benchmark 'nope'; known: "),
        (lambda: get_source("nope"), "no download source for 'nope'; sources: "),
        (lambda: get_policy_loss("nope"), "unknown policy loss 'nope'; registered: "),
    ],
)
def test_registry_lookups_raise_unknown_name_without_quotes(lookup: object, start: str) -> None:
    with pytest.raises(UnknownNameError) as info:
        lookup()  # type: ignore[operator]
    assert isinstance(info.value, DataDojoError) and isinstance(info.value, KeyError)
    assert str(info.value).startswith(start)  # KeyError would have wrapped it in quotes


def test_a_value_error_bug_in_a_whole_run_keeps_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commands no longer wrap their whole run in ``except ValueError``: a bug is not an input error."""
    import datadojo.cli.score as score_cli

    def bug(*_a: object, **_k: object) -> None:
        raise ValueError("a bug, not bad input")

    real = get_benchmark("dabench")

    class Bench:  # the real benchmark (its rules make the --help text) whose loader finds nothing
        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        def load(self, *_a: object, **_k: object) -> list[object]:
            return []

    monkeypatch.setattr(score_cli, "get_benchmark", lambda _name: Bench())
    monkeypatch.setattr(score_cli, "score_predictions", bug)
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"id": "1", "answer": "2"}\n')
    result = CliRunner().invoke(
        app, ["score", "dabench", "--predictions", str(preds), "--data", str(tmp_path)]
    )
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, ValueError)
    assert "error:" not in result.stderr


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("bogus-spec", "model spec 'bogus-spec': unknown backend"),
        ("hf:{tmp}/no-such-checkpoint", "no such folder"),
        ("openai:m@http://127.0.0.1:9/v1?api_key_env=DATADOJO_TEST_UNSET_KEY", "DATADOJO_TEST_UNSET_KEY"),
    ],
)
def test_a_bad_model_spec_is_one_line_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, says: str
) -> None:
    """Backends are built inside the command's run, which no longer catches ValueError: a spec or backend
    setting that cannot be used is a ``ModelSpecError`` (a DataDojoError), so it still reads as one line."""
    monkeypatch.delenv("DATADOJO_TEST_UNSET_KEY", raising=False)
    data = tmp_path / "x.csv"
    data.write_text("a,b\n1,2\n")
    args = ["ask", str(data), "how many rows?", "--model", spec.format(tmp=tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, (result.output, result.exception)
    assert says in result.stderr and "Traceback" not in result.output


def test_a_run_where_every_episode_failed_on_the_server_exits_3(tmp_path: Path) -> None:
    """An unreachable model server is not an agent that scores 0: exit 3 with one line, records kept."""
    from datadojo.cli._ui import EXIT_SERVER_DOWN

    data = tmp_path / "x.csv"
    data.write_text("a,b\n1,2\n")
    tasks = tmp_path / "tasks.jsonl"
    record = {"question": "How many rows?", "files": [{"path": str(data)}]}
    tasks.write_text("".join(json.dumps({"id": f"t{i}", **record}) + "\n" for i in (1, 2)))
    out = tmp_path / "out"
    # Up (it answers GET /models, so the reachability check passes) but failing every completion: the
    # episodes end as llm_error, not as an agent that scored 0.
    with ScriptedLLMServer(lambda _req: Status(500), strict=False) as srv:
        spec = f"openai:m@{srv.base_url}?max_retries=0"
        result = CliRunner().invoke(app, ["rollout", str(tasks), "--model", spec, "--out", str(out)])
    assert result.exit_code == EXIT_SERVER_DOWN == 3, (result.output, result.exception)
    assert "all 2 episode(s) of this run failed on the model server" in result.stderr
    assert len((out / "trajectories.jsonl").read_text().splitlines()) == 2  # the records are kept


def test_eval_where_every_trial_failed_on_the_server_exits_3_after_writing_its_report(tmp_path: Path) -> None:
    shop = Path(__file__).resolve().parents[2] / "examples" / "data" / "shop.sqlite"
    out = tmp_path / "run"
    srv = ScriptedLLMServer(lambda _req: Status(500), strict=False).start()
    spec = f"openai:m@{srv.base_url}?max_retries=0"
    args = [
        "eval",
        "shop-sql",
        "--data",
        str(shop),
        "--model",
        spec,
        "--out",
        str(out),
        "--limit",
        "2",
        "-n",
        "1",
    ]
    try:
        result = CliRunner().invoke(app, args)
    finally:
        srv.stop()
    assert result.exit_code == 3, (result.output, result.exception)
    assert "all 2 episode(s) of this run failed on the model server" in result.stderr
    assert (out / "summary.json").exists() and (out / "report.html").exists()

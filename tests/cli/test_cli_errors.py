"""One error root: a DataDojoError from any command is one line and exit 2; anything else is a bug."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import datadojo.train.export.llamafactory as llamafactory
from datadojo.bench.registry import get_benchmark, get_source
from datadojo.cli.app import app
from datadojo.errors import DataDojoError, UnknownNameError
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


def test_every_public_error_class_has_the_root() -> None:
    from datadojo.bench.base import BenchmarkError
    from datadojo.bench.download import DownloadError
    from datadojo.corpus.tables import LoadError
    from datadojo.eval.harness import EvalError
    from datadojo.jsonl import JsonlError
    from datadojo.llm.base import LLMError
    from datadojo.llm.structured import StructuredOutputError
    from datadojo.messages import MessagesError
    from datadojo.reward.judge import JudgeError
    from datadojo.sandbox.isolation import IsolationUnavailable
    from datadojo.sandbox.protocol import ProtocolError
    from datadojo.sandbox.session import SandboxError
    from datadojo.synth.envlunch.environment import EnvError
    from datadojo.train.config import ConfigError
    from datadojo.train.export import ExportError
    from datadojo.train.tokenize import TemplateError

    classes = [
        BenchmarkError,
        DownloadError,
        LoadError,
        EvalError,
        JsonlError,
        LLMError,
        StructuredOutputError,
    ]
    classes += [MessagesError, JudgeError, IsolationUnavailable, ProtocolError, SandboxError]
    classes += [EnvError, ConfigError, ExportError, TemplateError]
    assert all(issubclass(c, DataDojoError) for c in classes)
    assert issubclass(JsonlError, ValueError) and issubclass(SandboxError, RuntimeError)  # old bases kept

"""One concurrency: a command's ``--concurrency`` is the requests its model backend admits in flight too.

Before: ``datadojo rollout -j 128`` kept 128 episodes waiting on the model while the OpenAI backend's own
default (64 requests) let only half of them reach the server: 45 % of ideal end to end. The verdicts here
read the backend the command built (its admitted requests), not a time.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import datadojo.llm
from datadojo.cli.app import app
from datadojo.llm import load_backend
from datadojo.llm.spec import DEFAULT_MAX_CONCURRENCY, requests_in_flight
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import Task

pytestmark = pytest.mark.timeout(300)

ANSWER = "<think>sure</think><answer>42</answer>"


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record every backend built through ``datadojo.llm.load_backend`` (where the commands get theirs)."""
    built: list[Any] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        backend = load_backend(*args, **kwargs)
        built.append(backend)
        return backend

    monkeypatch.setattr(datadojo.llm, "load_backend", spy)
    return built


def _rollout(tmp_path: Path, model: str, jobs: int) -> Any:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(Task(id=f"t{i}", question=f"q{i}").model_dump_json() + "\n" for i in range(3)))
    args = ["rollout", str(tasks), "--model", model, "--out", str(tmp_path / "run"), "-j", str(jobs)]
    return CliRunner().invoke(app, [*args, "--max-turns", "1"], env={"COLUMNS": "200"})


def test_rollout_concurrency_is_the_requests_its_backend_admits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = _spy(monkeypatch)
    with ScriptedLLMServer(lambda req: ANSWER, strict=False) as srv:
        res = _rollout(tmp_path, f"openai:fake@{srv.base_url}", 128)
    assert res.exit_code == 0, res.output
    assert [b.max_concurrency for b in built] == [128]  # was 64: half of -j 128 waited on the backend


def test_a_spec_max_concurrency_below_the_command_lowers_it_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    built = _spy(monkeypatch)
    with ScriptedLLMServer(lambda req: ANSWER, strict=False) as srv, caplog.at_level(logging.WARNING):
        res = _rollout(tmp_path, f"openai:fake@{srv.base_url}?max_concurrency=16", 128)
    assert res.exit_code == 0, res.output
    assert [b.max_concurrency for b in built] == [16]
    lines = [r.getMessage() for r in caplog.records if "max_concurrency" in r.getMessage()]
    assert len(lines) == 1 and "max_concurrency=16" in lines[0] and "--concurrency 128" in lines[0], lines


@pytest.mark.parametrize(
    ("spec", "concurrency", "expected"),
    [
        ("openai:m@http://h/v1", 128, 128),  # the command's units all reach the model
        ("openai:m@http://h/v1", 300, 300),
        ("openai:m@http://h/v1", 8, DEFAULT_MAX_CONCURRENCY),  # never below the default: a synthesis unit
        ("openai:m@http://h/v1?max_concurrency=256", 128, 256),  # the spec's own value wins
        ("openai:m@http://h/v1?max_concurrency=4", 128, 4),
    ],
)
def test_requests_in_flight(spec: str, concurrency: int, expected: int) -> None:
    assert requests_in_flight(spec, concurrency) == expected
    assert load_backend(spec, concurrency=concurrency).max_concurrency == expected


def test_an_explicit_override_wins_and_no_concurrency_keeps_the_default() -> None:
    assert load_backend("openai:m@http://h/v1", concurrency=128, max_concurrency=3).max_concurrency == 3
    assert load_backend("openai:m@http://h/v1").max_concurrency == DEFAULT_MAX_CONCURRENCY
    assert load_backend("openai:m@http://h/v1?max_concurrency=5").max_concurrency == 5


async def test_eval_concurrency_reaches_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from datadojo.eval.harness import EvalConfig, run_eval

    data = tmp_path / "dabench"  # the official layout, one question
    (data / "da-dev-tables").mkdir(parents=True)
    (data / "da-dev-tables" / "x.csv").write_text("a\n42\n")
    question = {"id": 1, "question": "What is a?", "file_name": "x.csv", "format": "@a[value]"}
    (data / "da-dev-questions.jsonl").write_text(json.dumps(question) + "\n")
    (data / "da-dev-labels.jsonl").write_text(json.dumps({"id": 1, "common_answers": [["a", "42"]]}) + "\n")
    built = _spy(monkeypatch)
    with ScriptedLLMServer(lambda req: "<think>t</think><answer>@a[42]</answer>", strict=False) as srv:
        cfg = EvalConfig(
            bench="dabench", data=data, out=tmp_path / "run", model=f"openai:fake@{srv.base_url}",
            n_trials=1, concurrency=100, max_turns=1,
        )  # fmt: skip
        result = await run_eval(cfg)
    assert result.rollout.finished == 1
    assert [b.max_concurrency for b in built] == [100]  # was 64

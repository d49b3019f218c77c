"""A model server that is down (nothing listens on its port): every command that talks to it checks it
before its first request and ends with one line and exit 3 (``ExitCode.MODEL_SERVER``), whatever the stage.

Before: ``synth datamind queries`` and ``synth sailor`` exited 2 after spending every request's retries,
``ask`` printed a failed trajectory and exited 0, ``rollout`` retried every task.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.errors import DataDojoError, ExitCode

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"


@pytest.fixture
def dead_url() -> str:
    """A loopback URL nothing listens on: a port the kernel gave us, closed again."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _invoke(args: list[str]) -> object:
    return CliRunner().invoke(app, args, env={"COLUMNS": "200"})


def _assert_server_down(result: object, url: str) -> None:
    assert result.exit_code == ExitCode.MODEL_SERVER, result.output  # type: ignore[attr-defined]
    assert "Traceback" not in result.output  # type: ignore[attr-defined]
    assert "cannot reach the model server" in result.stderr and url in result.stderr  # type: ignore[attr-defined]


def test_synth_datamind_queries_with_a_down_teacher_exits_3(tmp_path: Path, dead_url: str) -> None:
    res = _invoke(["synth", "datamind", "queries", str(EXAMPLES / "sales.csv"), "--teacher",
                   f"openai:teacher@{dead_url}", "--out", str(tmp_path / "dm")])  # fmt: skip
    _assert_server_down(res, dead_url)


def test_synth_sailor_with_a_down_model_exits_3(tmp_path: Path, dead_url: str) -> None:
    res = _invoke(["synth", "sailor", str(EXAMPLES / "station_survey"), "--model", f"openai:m@{dead_url}",
                   "--out", str(tmp_path / "sailor")])  # fmt: skip
    _assert_server_down(res, dead_url)
    assert "rerun the same command to resume" in res.stderr


def test_ask_with_a_down_model_exits_3(dead_url: str) -> None:
    res = _invoke(["ask", str(EXAMPLES / "sales.csv"), "How many rows?", "--model", f"openai:m@{dead_url}"])
    _assert_server_down(res, dead_url)


def test_rollout_with_a_down_model_exits_3_before_any_episode(tmp_path: Path, dead_url: str) -> None:
    from datadojo.types import DataFile, Task

    tasks = tmp_path / "tasks.jsonl"
    task = Task(id="t1", question="How many rows?", files=[DataFile.from_path(EXAMPLES / "sales.csv")])
    tasks.write_text(task.model_dump_json() + "\n")
    out = tmp_path / "run"
    res = _invoke(["rollout", str(tasks), "--model", f"openai:m@{dead_url}", "--out", str(out)])
    _assert_server_down(res, dead_url)
    assert not (out / "trajectories.jsonl").exists() or not (out / "trajectories.jsonl").read_text().strip()


def test_the_library_raises_datadojo_errors_for_bad_sailor_input_and_a_changed_training_setting(
    tmp_path: Path,
) -> None:
    import asyncio

    from datadojo.synth.sailor.pipeline import run_sailor
    from datadojo.train.modeling import check_resumable

    not_a_folder = tmp_path / "file.csv"
    not_a_folder.write_text("a\n1\n")
    with pytest.raises(DataDojoError, match="not a dataset folder") as info:
        asyncio.run(run_sailor([not_a_folder], ["seed"], policy=None, out=tmp_path / "o"))  # type: ignore[arg-type,list-item]
    assert isinstance(info.value, NotADirectoryError)
    with pytest.raises(DataDojoError, match="concurrency must be >= 1"):
        asyncio.run(run_sailor([tmp_path], ["seed"], policy=None, out=tmp_path / "o", concurrency=0))  # type: ignore[arg-type,list-item]
    with pytest.raises(DataDojoError, match=r"cannot resume: the configuration differs .* in lr"):
        check_resumable({"lr": 1e-5}, {"lr": 2e-5}, "runs/sft")


def test_input_errors_come_before_the_server_check(tmp_path: Path, dead_url: str) -> None:
    """A stage run without its input is the user's mistake (exit 2) even when the server is down too: the
    reachability probe waits for the first request, which a bad input never gets to."""
    res = _invoke(
        ["synth", "datamind", "compose", "--teacher", f"openai:m@{dead_url}", "--out", str(tmp_path / "dm")]
    )
    assert res.exit_code == ExitCode.BAD_INPUT, res.output
    assert "cannot reach the model server" not in res.output


def test_the_deferred_probe_runs_once_for_concurrent_first_requests(dead_url: str) -> None:
    import asyncio

    from datadojo.llm import load_backend
    from datadojo.llm.base import ServerUnreachableError

    backend = load_backend(f"openai:m@{dead_url}?max_retries=0")
    probes = 0
    real = backend.check_reachable

    async def counted() -> None:
        nonlocal probes
        probes += 1
        await real()

    backend.check_reachable = counted  # type: ignore[method-assign]
    backend.check_before_first_request()

    async def main() -> list[BaseException | object]:
        try:
            msgs = [{"role": "user", "content": "hi"}]
            return await asyncio.gather(*(backend.chat(msgs) for _ in range(5)), return_exceptions=True)
        finally:
            await backend.aclose()

    results = asyncio.run(main())
    assert probes == 1
    assert all(
        isinstance(r, ServerUnreachableError) and "cannot reach the model server" in str(r) for r in results
    )

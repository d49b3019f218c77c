"""What cannot travel to a remote executor is refused before any request or write, with one clear error
(:class:`~datadojo.executor.ExecutorError`, exit 2): a backend object, a sandbox factory. No Ray is started:
the refusal comes first."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from datadojo.agent import run_rollouts
from datadojo.errors import DataDojoError, ExitCode
from datadojo.executor import ExecutorError
from datadojo.executor.ray_executor import RayExecutor
from datadojo.llm import load_backend
from datadojo.synth.datamind import DataMindConfig, DataMindRun, run_pipeline, stage_sample
from datadojo.synth.sailor import load_seeds, run_sailor
from datadojo.testing import datamind_teacher
from datadojo.testing.sailor_teacher import FakeSailor
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import Task

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _refused(exc: pytest.ExceptionInfo[BaseException], role: str) -> None:
    assert isinstance(exc.value, DataDojoError) and exc.value.exit_code == ExitCode.BAD_INPUT
    assert f"the {role} must be given as a model spec string" in str(exc.value)
    assert "cannot travel" in str(exc.value) and "--executor ray" in str(exc.value)


def test_a_backend_object_is_refused_by_sailor_on_ray_before_anything_runs(tmp_path: Path) -> None:
    with ScriptedLLMServer(FakeSailor()) as srv:
        backend = load_backend(f"openai:fake@{srv.base_url}")

        async def go() -> None:
            try:
                await run_sailor(
                    [EXAMPLES / "data" / "station_survey"], load_seeds(only=["L0-map"]), policy=backend,
                    out=tmp_path / "run", executor=RayExecutor(),
                )  # fmt: skip
            finally:
                await backend.aclose()

        with pytest.raises(ExecutorError) as exc:
            asyncio.run(go())
        assert srv.requests == []
    _refused(exc, "policy")
    assert not (tmp_path / "run").exists()


def test_a_backend_object_is_refused_by_datamind_on_ray_before_any_request(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    datamind_teacher.write_csv(tmp_path / "data" / "orders.csv")
    cfg = DataMindConfig(chains_per_file=0, concurrency=2)
    with ScriptedLLMServer(datamind_teacher.teacher) as srv:
        teacher = load_backend(f"openai:teacher@{srv.base_url}")

        async def whole(run: DataMindRun) -> None:
            await run_pipeline(run, teacher, teacher)

        async def sample(run: DataMindRun, model: object, sandboxes: object = None) -> None:
            await stage_sample(run, model, sandboxes=sandboxes)  # type: ignore[arg-type]

        with pytest.raises(ExecutorError) as exc:
            asyncio.run(
                whole(DataMindRun([tmp_path / "data"], tmp_path / "out", cfg, executor=RayExecutor()))
            )
        _refused(exc, "teacher")
        with pytest.raises(ExecutorError) as exc:
            asyncio.run(sample(DataMindRun([], tmp_path / "out", cfg, executor=RayExecutor()), teacher))
        _refused(exc, "teacher")
        spec = f"openai:teacher@{srv.base_url}"  # a spec travels; this process's sandbox factory does not
        with pytest.raises(ExecutorError, match="sandboxes factory of this process cannot travel"):
            run = DataMindRun([], tmp_path / "out", cfg, executor=RayExecutor())
            asyncio.run(sample(run, spec, datamind_teacher.fake_sandboxes))
        assert srv.requests == []
    assert not (tmp_path / "out" / "queries.jsonl").exists()


def test_a_sandbox_factory_cannot_travel(tmp_path: Path) -> None:
    async def go() -> None:
        await run_rollouts(
            [Task(id="t", question="q?")], "openai:m@http://127.0.0.1:9/v1", tmp_path / "t.jsonl",
            sandboxes=datamind_teacher.fake_sandboxes, executor=RayExecutor(),
        )  # fmt: skip

    with pytest.raises(ExecutorError, match="builds sandboxes on its nodes") as exc:
        asyncio.run(go())
    assert exc.value.exit_code == ExitCode.BAD_INPUT

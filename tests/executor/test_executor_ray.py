"""The Ray executor on a real local Ray (2 CPUs, one instance shared by the session): the same records as
a local run for rollouts, corpus scans and warm-up builds; resume; a worker killed mid-run. The Ray instance
is the session's ``ray_cluster`` (tests/executor/conftest.py)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from datadojo.agent import AgentConfig, run_rollouts
from datadojo.cli.app import app
from datadojo.corpus import ScanConfig, scan_corpus
from datadojo.executor import ExecutorError, LocalExecutor, WorkerSpec
from datadojo.jsonl import iter_jsonl, read_tasks
from datadojo.sandbox import SandboxConfig
from datadojo.synth.envlunch.build import BuildConfig, build_tasks, load_environments
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import DataFile, Task

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'datadojo[ray]')")
from datadojo.executor.ray_executor import RayExecutor  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
SANDBOX = SandboxConfig(mode="persistent", preload=())


def reply(request: dict[str, Any]) -> str:
    """Three turns whose code depends on the task's question, so records differ by task."""
    done = sum(1 for m in request["messages"] if m["role"] == "assistant")
    question = next(m["content"] for m in request["messages"] if m["role"] == "user")
    if done < 2:
        return f"<think>step {done}</think>\n<code>\nprint(len({question!r}) * {done + 1})\n</code>"
    return f"<think>done</think>\n<answer>{len(question)}</answer>"


def make_tasks(n: int) -> list[Task]:
    csv = DataFile.from_path(DATA / "sales.csv")
    return [Task(id=f"t{i}", question=f"question number {i}" + "?" * i, files=[csv]) for i in range(n)]


def comparable(path: Path) -> dict[tuple[str, int], Any]:
    """Records keyed by (task, sample), without what differs between any two runs (times, timestamps)."""
    out: dict[tuple[str, int], Any] = {}
    for _, rec in iter_jsonl(path):
        key = (rec["task_id"], rec["sample"])
        assert key not in out, f"{key} written twice"
        rec["provenance"].pop("created")
        for turn in rec["turns"]:
            turn.pop("timings")
        out[key] = rec
    return out


def test_rollout_same_records_as_local_and_resume(ray_cluster, tmp_path: Path) -> None:
    tasks = make_tasks(4)
    cfg = AgentConfig(max_turns=4)
    with ScriptedLLMServer(reply) as server:
        model = f"openai:fake@{server.base_url}"

        async def run(out: Path, executor: Any, subset: list[Task]) -> Any:
            return await run_rollouts(
                subset, model, out, n_samples=2, config=cfg, concurrency=2, seed=7,
                sandbox_config=SANDBOX, executor=executor,
            )  # fmt: skip

        local = asyncio.run(run(tmp_path / "local.jsonl", None, tasks))
        # Ray: half the set, then the whole set into the same file (the resume rule skips the first half).
        first = asyncio.run(run(tmp_path / "ray.jsonl", RayExecutor(in_flight_per_worker=2), tasks[:2]))
        second = asyncio.run(run(tmp_path / "ray.jsonl", RayExecutor(in_flight_per_worker=2), tasks))
    assert local.finished == 8 and local.stop_reasons["answer"] == 8
    assert (first.finished, second.skipped, second.finished) == (4, 4, 4)
    assert second.executor == "ray" and sum(n["done"] for n in second.nodes) == 4
    want, got = comparable(tmp_path / "local.jsonl"), comparable(tmp_path / "ray.jsonl")
    assert got == want
    assert want[("t3", 1)]["final_answer"] == str(len(tasks[3].question))


def test_a_worker_killed_mid_run_loses_nothing(ray_cluster, tmp_path: Path) -> None:
    tasks = make_tasks(6)
    executor = RayExecutor(in_flight_per_worker=2, workers_per_node=2)
    killed: list[str] = []

    def kill_a_busy_worker(_traj: Any, _summary: Any) -> None:
        if not killed:
            slot = next(s for s in executor.slots if s.alive and s.in_flight > 0)
            ray.kill(slot.actor)
            killed.append(slot.node)

    with ScriptedLLMServer(reply, latency_s=0.05) as server:
        summary = asyncio.run(
            run_rollouts(
                tasks, f"openai:fake@{server.base_url}", tmp_path / "t.jsonl", n_samples=2,
                config=AgentConfig(max_turns=4), concurrency=2, sandbox_config=SANDBOX,
                executor=executor, on_trajectory=kill_a_busy_worker,
            )
        )  # fmt: skip
    records = comparable(tmp_path / "t.jsonl")
    assert set(records) == {(t.id, s) for t in tasks for s in range(2)}
    assert summary.finished == 12 and summary.stop_reasons["answer"] == 12
    (node,) = summary.nodes
    assert node["lost_workers"] == 1 and node["workers"] == 2 and node["done"] == 12


def test_corpus_scan_same_records_with_duplicates(ray_cluster, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("sales.csv", "budget.xlsx", "shop.sqlite"):
        shutil.copy(DATA / name, corpus / name)
    shutil.copy(DATA / "sales.csv", corpus / "a_copy_of_sales.csv")  # listed first: it is the original
    shutil.copy(DATA / "sales.csv", corpus / "z_copy_of_sales.csv")
    config = ScanConfig()
    local = scan_corpus([corpus], tmp_path / "local.jsonl", config)
    executor = RayExecutor()
    remote = scan_corpus([corpus], tmp_path / "ray.jsonl", config, executor=executor)
    assert (remote.processed, remote.accepted, remote.rejected) == (
        local.processed,
        local.accepted,
        local.rejected,
    )
    assert remote.rejected_by_reason.get("duplicate") == 2

    def records(path: Path) -> list[dict[str, Any]]:
        return [{k: v for k, v in rec.items() if k != "seconds"} for _, rec in iter_jsonl(path)]

    assert records(tmp_path / "ray.jsonl") == records(tmp_path / "local.jsonl")
    assert sum(s.done for s in executor.node_stats()) == 5
    again = scan_corpus([corpus], tmp_path / "ray.jsonl", config, executor=RayExecutor())
    assert (again.skipped, again.processed) == (5, 0)


def test_warmup_build_same_tasks_and_copies(ray_cluster, tmp_path: Path) -> None:
    envs = load_environments([DATA / "shop.sqlite", DATA / "sales.csv"])
    config = BuildConfig(n=6, seed=3, workers=1)
    local = build_tasks(envs, tmp_path / "local" / "tasks.jsonl", config)
    remote = build_tasks(envs, tmp_path / "ray" / "tasks.jsonl", config, executor=RayExecutor())
    assert len(local.tasks) == len(remote.tasks) == 6
    # Same lines (task files name their copies relative to themselves, so the two folders compare).
    text = (tmp_path / "ray" / "tasks.jsonl").read_text()
    assert text == (tmp_path / "local" / "tasks.jsonl").read_text()
    assert [t.id for t in read_tasks(tmp_path / "ray" / "tasks.jsonl")] == [t.id for t in local.tasks]

    def tree(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    assert tree(tmp_path / "ray" / "tasks.copies") == tree(tmp_path / "local" / "tasks.copies")


def test_cli_rollout_on_ray_and_a_worker_object_is_refused(ray_cluster, tmp_path: Path) -> None:
    tasks_file = tmp_path / "tasks.jsonl"
    tasks_file.write_text("".join(t.to_json() + "\n" for t in make_tasks(2)), encoding="utf-8")
    with ScriptedLLMServer(reply) as server:
        res = CliRunner().invoke(
            app,
            [
                "rollout", str(tasks_file), "--model", f"openai:fake@{server.base_url}", "--out",
                str(tmp_path / "run"), "-j", "2", "--mode", "persistent", "--executor", "ray",
            ],
        )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "Per node (ray)" in res.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["executor"] == "ray" and summary["finished"] == 2 and summary["nodes"][0]["done"] == 2

    async def objects_cannot_travel() -> None:
        stream = RayExecutor().map_unordered(LocalExecutor(), [1])  # type: ignore[arg-type]
        await stream.__anext__()

    with pytest.raises(ExecutorError, match="needs a WorkerSpec"):
        asyncio.run(objects_cannot_travel())
    with pytest.raises(ExecutorError, match="cannot be imported"):
        asyncio.run(WorkerSpec("datadojo.no_such_module:Worker").build())


def test_cli_eval_oracle_on_ray_scores_like_local(
    ray_cluster, tmp_path: Path, shared_data: Callable[..., Path]
) -> None:
    spider = shared_data("spider", "dev.json").parent
    records = json.loads((spider / "dev.json").read_text())
    subset = tmp_path / "spider"
    subset.mkdir()
    (subset / "dev.json").write_text(json.dumps(records[:: len(records) // 6][:6]))
    (subset / "database").symlink_to((spider / "database").resolve(), target_is_directory=True)
    res = CliRunner().invoke(
        app,
        [
            "eval", "spider", "--data", str(subset), "--agent", "oracle", "-n", "1", "-j", "3",
            "--out", str(tmp_path / "run"), "--no-report", "--executor", "ray",
        ],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "Per node (ray)" in res.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["metrics"]["pass@1"] == 1.0 and summary["n_tasks"] == 6
    assert summary["rollout"]["executor"] == "ray" and summary["rollout"]["nodes"][0]["done"] == 6


def test_node_actors_run_at_a_local_runs_niceness_not_rays(ray_cluster, tmp_path: Path) -> None:
    """Ray starts its workers at niceness 15; a rollout actor there (and every sandbox it starts) yields
    each turn's CPU to anything else on the node. Measured by benchmarks/scale.py: Ray 1.51 x local at 15,
    1.17 x at 0. The actor lowers it where allowed (CAP_SYS_NICE: root here); ``worker_nice=None`` keeps
    Ray's."""
    import os

    from datadojo.testing.workers import NICE

    spec = WorkerSpec("datadojo.testing.workers:RecordingWorker", {"marks": str(tmp_path)})

    async def niceness(executor: RayExecutor) -> int:
        try:
            (outcome,) = [o async for o in executor.map_unordered(spec, [NICE])]
        finally:
            await executor.aclose()
        return int(outcome.result[0])

    rays = int(os.environ.get("RAY_worker_niceness", "15"))  # noqa: SIM112 - Ray spells it so
    assert asyncio.run(niceness(RayExecutor(in_flight_per_worker=1, worker_nice=None))) == rays
    lowered = asyncio.run(niceness(RayExecutor(in_flight_per_worker=1)))
    assert lowered == (0 if os.geteuid() == 0 else rays)

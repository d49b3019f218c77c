"""The process executor: CPU-bound work on worker processes of this machine, each building its worker once;
the same results as in-process; a dead worker process is an error naming the work; refusals for what
cannot travel or is not CPU-bound; the corpus scan on it writes the records of a plain scan."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from datadojo.corpus import ScanConfig, scan_corpus
from datadojo.executor import ExecutorError, LocalExecutor, ProcessExecutor, WorkerSpec
from datadojo.jsonl import iter_jsonl
from datadojo.testing.workers import DIE, RecordingWorker

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"


def spec(marks: Path, *, cpu_bound: bool = True) -> WorkerSpec:
    return WorkerSpec(
        "datadojo.testing.workers:RecordingWorker",
        {"marks": str(marks)},
        cpu_bound=cpu_bound,
        label="squares",
    )


async def collect(executor: Any, worker: Any, items: list[Any]) -> list[Any]:
    stream = executor.map_unordered(worker, items)
    async with contextlib.aclosing(stream):
        return [outcome async for outcome in stream]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_results_match_in_process_and_each_process_builds_its_worker_once(
    tmp_path: Path, method: str
) -> None:
    items = list(range(23))
    executor = ProcessExecutor(2, start_method=method)
    try:
        outcomes = asyncio.run(collect(executor, spec(tmp_path / "marks"), items))
    finally:
        executor.close()
    local = asyncio.run(collect(LocalExecutor(), spec(tmp_path / "local"), items))
    assert sorted((o.item, o.result[0]) for o in outcomes) == sorted((o.item, o.result[0]) for o in local)
    assert {o.item for o in outcomes} == set(items)
    pids = {o.result[1] for o in outcomes}
    import os

    assert os.getpid() not in pids, "the work ran in the driver"
    assert 1 <= len(pids) <= 2
    built = sorted((tmp_path / "marks").glob("built-*"))
    assert {int(p.name.split("-")[1]) for p in built} >= pids
    assert all(p.read_text() == "x" for p in built), "a process built its worker more than once"
    closed = {int(p.name.split("-")[1]) for p in (tmp_path / "marks").glob("closed-*")}
    assert closed >= pids, "a worker process exited without closing its worker"
    stats = executor.node_stats()
    assert stats[0].done == len(items) and stats[0].workers == 2


def test_a_dead_worker_process_is_an_error_naming_the_work(tmp_path: Path) -> None:
    executor = ProcessExecutor(1, in_flight=1, start_method="fork")
    seen: list[Any] = []

    async def run() -> None:
        stream = executor.map_unordered(spec(tmp_path), [1, 2, DIE, 4])
        async with contextlib.aclosing(stream):
            async for outcome in stream:
                seen.append(outcome.item)

    try:
        with pytest.raises(ExecutorError, match="squares: a worker process died"):
            asyncio.run(run())
    finally:
        executor.close()
    assert seen == [1, 2], "results finished before the crash must have been yielded"
    assert executor.node_stats()[0].lost_workers == 1


def test_refuses_ready_objects_and_work_that_waits_on_a_server(tmp_path: Path) -> None:
    executor = ProcessExecutor(1)
    with pytest.raises(ExecutorError, match="needs a WorkerSpec"):
        asyncio.run(collect(executor, RecordingWorker(str(tmp_path)), [1]))
    with pytest.raises(ExecutorError, match="squares: the process executor runs CPU-bound work"):
        asyncio.run(collect(executor, spec(tmp_path, cpu_bound=False), [1]))
    with pytest.raises(ValueError, match="workers must be >= 1"):
        ProcessExecutor(0)
    with pytest.raises(ValueError, match="start_method"):
        ProcessExecutor(1, start_method="vfork")


def test_corpus_scan_on_processes_writes_the_records_of_a_plain_scan(tmp_path: Path) -> None:
    def records(path: Path) -> list[dict[str, Any]]:
        out = []
        for _, rec in iter_jsonl(path):
            rec.pop("seconds", None)
            out.append(json.dumps(rec, sort_keys=True))
        return sorted(out)

    plain = scan_corpus([DATA], tmp_path / "plain.jsonl", ScanConfig())
    executor = ProcessExecutor(2)
    try:
        on_procs = scan_corpus([DATA], tmp_path / "procs.jsonl", ScanConfig(), executor=executor)
    finally:
        executor.close()
    assert on_procs.accepted == plain.accepted and on_procs.processed == plain.processed > 0
    assert records(tmp_path / "procs.jsonl") == records(tmp_path / "plain.jsonl")

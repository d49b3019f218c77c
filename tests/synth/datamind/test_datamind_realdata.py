"""The DataMind pipeline over real DABench tables (skipped when ../shared/data is absent), real sandboxes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from datadojo.jsonl import iter_jsonl, read_tasks
from datadojo.llm import load_backend
from datadojo.synth.datamind import DataMindConfig, DataMindRun, run_pipeline
from datadojo.testing.datamind_teacher import judge, teacher
from datadojo.testing.server import ScriptedLLMServer


def _teacher(req: dict) -> str:
    """The scripted teacher, with questions that name no column (real tables have their own columns)."""
    reply = teacher(req)
    if req["messages"][0]["content"].startswith("You write") and reply.startswith("{"):
        data = json.loads(reply)
        for q in data["queries"]:
            q["columns"] = []
            q["question"] = q["question"].replace("`revenue`", "revenue")
        return json.dumps(data)
    return reply


def test_pipeline_over_real_dabench_tables(tmp_path, shared_data):
    tables = shared_data("dabench", "da-dev-tables")
    files = sorted(tables.glob("*.csv"))[:3]
    cfg = DataMindConfig(chains_per_file=1, max_chain=2, concurrency=2, n_samples=2, near_duplicate=0.95)

    async def main() -> dict:
        with ScriptedLLMServer(_teacher) as ts, ScriptedLLMServer(judge) as js:
            t, j = load_backend(f"openai:t@{ts.base_url}"), load_backend(f"openai:j@{js.base_url}")
            try:
                return await run_pipeline(DataMindRun(files, tmp_path, cfg), t, j)  # default: real sandboxes
            finally:
                await t.aclose()
                await j.aclose()

    summary = asyncio.run(main())
    assert summary["files"]["seen"] == 3
    accepted = summary["files"]["accepted"]
    rejected = [r for _, r in iter_jsonl(tmp_path / "rejected.jsonl") if r["stage"] == "files"]
    assert accepted + len(rejected) == 3 and accepted >= 1
    tasks = list(read_tasks(tmp_path / "queries.jsonl", resolve_paths=False))
    for t in tasks:  # every query is about a real file and carries its real profile
        assert Path(t.files[0].path).parent == tables and t.description
    traj = [r for _, r in iter_jsonl(tmp_path / "trajectories.jsonl")]
    assert len(traj) >= 2 * len(tasks)
    # the code cell really ran in a sandbox over the real file's folder
    assert all(r["turns"][0]["observation"]["text"].strip() == "42" for r in traj)
    assert summary["kept"]["non-con"] >= 1

"""Real scientific dataset folders (../shared/data/scirepos): probes run against the real files."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from datadojo.jsonl import iter_jsonl, read_tasks
from datadojo.llm.spec import load_backend
from datadojo.synth.sailor import SailorConfig, load_seeds, run_sailor
from datadojo.testing.sailor_teacher import FakeSailor
from datadojo.testing.server import ScriptedLLMServer

pytestmark = pytest.mark.requires_data("scirepos")


def test_two_real_folders_explored_concurrently(tmp_path: Path, shared_data: Callable[..., Path]) -> None:
    scirepos = shared_data("scirepos")
    folders = [scirepos / "zika-tutorial", scirepos / "co2-ppm"]
    config = SailorConfig(
        max_nodes=4, max_depth=2, min_depth=2, trajectories_per_seed=2, k_max=2, logprobs=False
    )
    out = tmp_path / "run"
    with ScriptedLLMServer(FakeSailor()) as srv:

        async def go():
            backend = load_backend(f"openai:fake@{srv.base_url}")
            try:
                return await run_sailor(folders, load_seeds(only=["L0-map"]), policy=backend, out=out,
                                        config=config, concurrency=2)  # fmt: skip
            finally:
                await backend.aclose()

        run = asyncio.run(go())
    assert run.units_done == 2
    nodes = [
        r for _, r in iter_jsonl(out / "tree.jsonl") if r["type"] == "node" and r["executed"] and r["code"]
    ]
    names = {Path(r["folder"]).name for r in nodes}
    text = {name: " ".join(r["excerpt"] for r in nodes if Path(r["folder"]).name == name) for name in names}
    # the probes listed the real files of each folder, read-only, from inside the sandbox
    assert "sequences.fasta" in text["zika-tutorial"] and "metadata.tsv" in text["zika-tutorial"]
    assert "co2-mm-mlo.csv" in text["co2-ppm"]
    schema = [
        r for r in nodes if r["strategy"] == "schema_inspection" and Path(r["folder"]).name == "co2-ppm"
    ]
    assert (
        schema
        and all(r["status"] == "ok" for r in schema)
        and "(67, 3) ['Year', 'Mean', 'Uncertainty']" in schema[0]["excerpt"]
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["units"] == 2 and summary["probes_run"] == 8
    for t in read_tasks(out / "meta.jsonl"):
        assert Path(t.files[0].path).parent == scirepos.resolve()

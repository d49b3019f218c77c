"""A sailor policy whose first probe is ``os.walk('.')`` sees every file of the folder (issue 21, defect 3)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from datadojo.jsonl import iter_jsonl
from datadojo.llm.spec import load_backend
from datadojo.synth.sailor import SailorConfig, load_seeds, run_sailor
from datadojo.testing.sailor import FIRST_PROBE, WalkingSailor
from datadojo.testing.server import ScriptedLLMServer

# Before the sandbox mounted data folders as real read-only trees (issue 21, defect 3), the data folder was a
# symlink in the workspace and os.walk('.') did not follow it, so this first probe printed nothing.


def test_the_first_probe_os_walk_sees_every_file(dataset: Path, tmp_path: Path) -> None:
    policy = WalkingSailor()
    out = tmp_path / "run"
    config = SailorConfig(
        max_nodes=3, max_depth=3, min_depth=2, trajectories_per_seed=1, k_max=1, logprobs=False
    )
    with ScriptedLLMServer(policy) as srv:

        async def go() -> None:
            backend = load_backend(f"openai:walker@{srv.base_url}")
            try:
                await run_sailor(
                    [dataset], load_seeds(only=["L0-map"]), policy=backend, out=out, config=config
                )
            finally:
                await backend.aclose()

        asyncio.run(go())
    # the folder is mounted under its own name in the working directory (the prompt lists `penguins` (dir))
    files = {f"{dataset.name}/{p.relative_to(dataset).as_posix()}" for p in dataset.rglob("*") if p.is_file()}
    first = next(r for _, r in iter_jsonl(out / "tree.jsonl") if r.get("type") == "node" and r["depth"] == 1)
    assert first["code"] == FIRST_PROBE
    assert files <= policy.files_seen(), f"the probes saw {sorted(policy.files_seen())} of {sorted(files)}"
    for f in files:
        assert f"FILE ./{f}" in first["excerpt"], f  # the first probe alone lists every file

"""A data folder is a tree the common listing idioms walk (issue 21, defect 3).

On main the bubblewrap workspace showed a folder as one symlink ``name -> /inputs/name``; ``os.walk('.')``
and ``Path('.').rglob('*')`` do not descend a symlinked directory, so SciDataSailor's first probe saw 0
files. Every listing idiom must now see every file, read-only, in both modes, at every isolation level.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.agent import run_rollouts
from datadojo.cli.app import app
from datadojo.llm import load_backend
from datadojo.sandbox import PolicyConfig, Sandbox, SandboxConfig
from datadojo.sandbox import isolation as isolation_mod
from datadojo.testing.sandbox import LISTING_PROBES, walk_first_model
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import DataFile, Task

pytestmark = pytest.mark.timeout(180)

HAS_BWRAP = shutil.which("bwrap") is not None and isolation_mod.bwrap_available()[0]
LANDLOCK, WHY_NOT = isolation_mod.landlock_available()
ISOLATIONS = [
    pytest.param("bwrap", marks=pytest.mark.skipif(not HAS_BWRAP, reason="bwrap unusable")),
    pytest.param("landlock", marks=pytest.mark.skipif(not LANDLOCK, reason=f"no Landlock here: {WHY_NOT}")),
    "none",
]
EXPECTED = ["repo/README.md", "repo/grids/deep/er/c.nc", "repo/grids/sst.nc", "repo/tables/t.csv"]


def _repo(root: Path) -> Path:
    folder = root / "repo"
    (folder / "grids" / "deep" / "er").mkdir(parents=True)
    (folder / "tables").mkdir()
    (folder / "README.md").write_text("readme\n")
    (folder / "grids" / "sst.nc").write_bytes(b"\x89HDF-ish")
    (folder / "grids" / "deep" / "er" / "c.nc").write_text("c\n")
    (folder / "tables" / "t.csv").write_text("a,b\n1,2\n")
    return folder


def _listed(output: str) -> list[str]:
    lines = output.strip().splitlines()
    assert lines and lines[-1].startswith("FILES "), output
    return [line[2:] if line.startswith("./") else line for line in lines[:-1]]


@pytest.mark.parametrize("mode", ["chunked", "persistent"])
@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_every_listing_idiom_sees_every_file(tmp_path: Path, iso: str, mode: str) -> None:
    folder = _repo(tmp_path)
    cfg = SandboxConfig(isolation=iso, mode=mode, preload=(), policy=PolicyConfig(enabled=False))  # type: ignore[arg-type]
    async with await Sandbox.create([DataFile(path=str(folder), kind="dir")], cfg) as sb:
        for name, probe in LISTING_PROBES.items():
            r = await sb.run(probe)
            assert r.status == "ok", (name, r.output)
            assert _listed(r.output) == EXPECTED, (name, r.output)
        # The shell tools too (the policy is off: a real user may allow them).
        r = await sb.run(
            "import subprocess\n"
            "print(subprocess.run(['find', '-L', '.', '-type', 'f'], capture_output=True, text=True).stdout)\n"
            "print(subprocess.run(['find', '.', '-name', '*.nc'], capture_output=True, text=True).stdout)\n"
            "print(subprocess.run(['ls', '-R'], capture_output=True, text=True).stdout)"
        )
        assert r.status == "ok", r.output
        for path in EXPECTED:
            assert f"./{path}\n" in r.output, r.output  # find -L
        assert "./repo/grids/deep/er/c.nc" in r.output and "./repo/grids/deep/er:\nc.nc" in r.output
        # Contents read through the listing; nothing can be written into the dataset.
        r = await sb.run(
            "import os\n"
            "print(sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk('repo') for f in fs))\n"
            "print(open('repo/tables/t.csv').read().splitlines()[1])"
        )
        assert r.status == "ok" and r.output.split() == ["25", "1,2"], r.output
        for attempt, kind in (
            ("open('repo/tables/t.csv', 'a').write('x')", "data"),
            (
                "import os; os.chmod('repo/tables/t.csv', 0o666); open('repo/tables/t.csv', 'a').write('x')",
                "data",
            ),
            ("open('repo/grids/new.txt', 'w').write('x')", "tree"),
        ):
            r = await sb.run(attempt)
            # The data files are read-only at bwrap and Landlock level (a read-only mount / a read-only
            # Landlock rule, whatever the uid). The mirror's folders are 0555, which binds cells that are
            # not root; cells running as root (no dedicated uid) may add files to their own workspace
            # copy of the tree. Reduced isolation works on a copy. The original never changes (below).
            non_root = sb.isolation == "bwrap" or sb.cell_uid is not None
            if (kind == "data" and sb.isolation != "reduced") or non_root:
                assert r.status == "error", (attempt, r.output)
    assert (folder / "tables" / "t.csv").read_text() == "a,b\n1,2\n"
    assert not (folder / "grids" / "new.txt").exists()


@pytest.mark.parametrize("mode", ["chunked", "persistent"])
@pytest.mark.parametrize("iso", ISOLATIONS)
def test_cli_exec_walk_counts_the_files(tmp_path: Path, iso: str, mode: str) -> None:
    folder = _repo(tmp_path)
    script = tmp_path / "walk.py"
    script.write_text(LISTING_PROBES["os.walk"])
    res = CliRunner().invoke(
        app, ["exec", str(script), "--data", str(folder), "--isolation", iso, "--mode", mode, "--json"]
    )
    assert res.exit_code == 0, res.output
    record = json.loads(res.stdout.splitlines()[0])
    assert _listed(record["observation"]) == EXPECTED, record


@pytest.mark.parametrize("iso", ISOLATIONS)
async def test_sailor_model_whose_first_probe_is_os_walk(tmp_path: Path, iso: str) -> None:
    folder = _repo(tmp_path)
    task = Task(
        id="walk",
        question="How many files does the repository hold?",
        files=[DataFile(path=str(folder), kind="dir")],
    )
    out = tmp_path / "traj.jsonl"
    cfg = SandboxConfig(isolation=iso, mode="persistent", preload=())  # type: ignore[arg-type]
    with ScriptedLLMServer(walk_first_model("datamind")) as server:
        backend = load_backend(f"openai:fake@{server.base_url}")
        await run_rollouts([task], backend, out, sandbox_config=cfg, concurrency=1)
        await backend.aclose()
    from datadojo.jsonl import read_trajectories

    (traj,) = list(read_trajectories(out))
    assert traj.final_answer == str(len(EXPECTED)), traj.turns[0].observation.text

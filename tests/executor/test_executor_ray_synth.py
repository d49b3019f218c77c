"""Synthesis on a real local Ray: DataMind's sampling rounds and SciDataSailor's units write the records a
local run writes, resume, and a recipe's synthesis stage records that it ran on Ray (issue 23: "every stage
can run on --executor ray, synthesis included")."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.jsonl import iter_jsonl
from datadojo.llm import load_backend
from datadojo.sandbox import SandboxConfig
from datadojo.synth.datamind import DataMindConfig, DataMindRun, stage_judge, stage_queries
from datadojo.synth.sailor import SailorConfig, load_seeds, run_sailor
from datadojo.testing import datamind_teacher
from datadojo.testing.sailor_teacher import FakeSailor
from datadojo.testing.server import ScriptedLLMServer

pytest.importorskip("ray", reason="Ray is not installed (pip install 'datadojo[ray]')")
from datadojo.executor.ray_executor import RayExecutor

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
#: Categories: one answered consistently, one rescued by reflection, one inconsistent forever.
CATEGORIES = ("Aggregation", "Counting", "Comparison")
runner = CliRunner()


def small_taxonomy(path: Path) -> Path:
    data = json.loads((REPO / "src" / "datadojo" / "synth" / "datamind" / "taxonomy.json").read_text())
    data["categories"] = [c for c in data["categories"] if c["name"] in CATEGORIES]
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def comparable(path: Path, key: tuple[str, ...] = ("task_id", "sample")) -> dict[tuple, Any]:
    """Records keyed by ``key``, without what differs between any two runs (times, timestamps, argv)."""
    out: dict[tuple, Any] = {}
    for _, rec in iter_jsonl(path):
        k = tuple(rec[f] for f in key)
        assert k not in out, f"{k} written twice"
        rec["provenance"].pop("created", None)
        rec["provenance"].pop("argv", None)
        for turn in rec["turns"]:
            turn.pop("timings", None)
        out[k] = rec
    return out


def test_datamind_sampling_on_ray_writes_what_local_writes_and_resumes(ray_cluster, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    datamind_teacher.write_csv(data / "orders.csv")
    tax = small_taxonomy(tmp_path / "taxonomy.json")
    cfg = DataMindConfig(
        taxonomy=str(tax), chains_per_file=0, concurrency=2, n_samples=2, near_duplicate=0.95
    )
    local, remote = tmp_path / "local", tmp_path / "ray"
    with (
        ScriptedLLMServer(datamind_teacher.teacher) as ts,
        ScriptedLLMServer(datamind_teacher.judge) as js,
    ):
        spec = f"openai:teacher@{ts.base_url}"

        async def queries() -> None:
            t = load_backend(spec)
            await stage_queries(DataMindRun([data], local, cfg), t)
            await t.aclose()

        async def judge(out: Path, round_: int) -> None:
            j = load_backend(f"openai:judge@{js.base_url}")
            await stage_judge(DataMindRun([], out, cfg), j, round_=round_)
            await j.aclose()

        def sample(out: Path, round_: int, *executor: str) -> str:
            args = ["synth", "datamind", "sample", "--teacher", spec, "--out", str(out), "--taxonomy",
                    str(tax), "-n", "2", "-j", "2", "--round", str(round_), "--no-progress", *executor]  # fmt: skip
            res = runner.invoke(app, args, env={"COLUMNS": "200"})
            assert res.exit_code == 0, res.output
            return res.output

        asyncio.run(queries())
        shutil.copytree(local, remote)  # the same queries in both folders
        sample(local, 0)
        output = sample(remote, 0, "--executor", "ray")
        assert "Per node (ray): sample" in output
        # a run killed mid-stage: its last three episodes are missing; the rerun on Ray runs those alone
        traj = remote / "trajectories.jsonl"
        lines = traj.read_text().splitlines(keepends=True)
        traj.write_text("".join(lines[:-3]))
        before = len(ts.requests)
        sample(remote, 0, "--executor", "ray")
        assert len(ts.requests) - before == 3 * 2  # three episodes of two turns, nothing else
        for out in (local, remote):  # judging is sent from this process; then the reflection round
            asyncio.run(judge(out, 0))
            sample(out, 1, *(("--executor", "ray") if out == remote else ()))
    want, got = comparable(local / "trajectories.jsonl"), comparable(remote / "trajectories.jsonl")
    assert got == want
    # round 0: samples 0..1, round 1 (reflection, the two inconsistent queries): samples 2..3, extra.round = 1
    rounds = {k: rec["extra"]["round"] for k, rec in want.items()}
    assert {s for (_, s), r in rounds.items() if r == 0} == {0, 1}
    assert {s for (_, s), r in rounds.items() if r == 1} == {2, 3}
    assert sum(r == 1 for r in rounds.values()) == 4 and len(rounds) == 3 * 2 + 4
    rescued = [rec for rec in want.values() if rec["extra"]["round"] == 1 and rec["final_answer"] == "25"]
    assert len(rescued) == 2  # the reflection prompt (feedback) reached the nodes' episodes


SMALL = SailorConfig(max_nodes=5, max_depth=3, min_depth=2, trajectories_per_seed=2, k_max=2, logprobs=False)


def test_sailor_units_on_ray_keep_what_local_keeps_and_resume(ray_cluster, tmp_path: Path) -> None:
    folder = EXAMPLES / "data" / "station_survey"
    seeds = load_seeds(only=["L0-map", "L1-fields"])
    sandbox = SandboxConfig(mode="persistent", preload=())
    with ScriptedLLMServer(FakeSailor()) as srv:
        spec = f"openai:fake@{srv.base_url}"

        def go(out: Path, executor: Any) -> Any:
            return asyncio.run(
                run_sailor([folder], seeds, policy=spec, out=out, config=SMALL, concurrency=2,
                           sandbox_config=sandbox, executor=executor)
            )  # fmt: skip

        local = go(tmp_path / "local", None)
        remote = go(tmp_path / "ray", RayExecutor(in_flight_per_worker=2))
        # the command on the same folder, same settings: resumes, every unit committed once, no request
        before = len(srv.requests)
        args = ["synth", "sailor", str(folder), "--model", spec, "--out", str(tmp_path / "ray"), "--only",
                "L0-map", "--only", "L1-fields", "--max-nodes", "5", "--max-depth", "3", "--min-depth", "2",
                "--trajectories-per-seed", "2", "--k-max", "2", "--no-logprobs", "-j", "2", "--executor", "ray"]  # fmt: skip
        res = runner.invoke(app, args, env={"COLUMNS": "200"})
        assert res.exit_code == 0, res.output
        assert "0 unit(s) explored, 2 already done" in res.output and len(srv.requests) == before
    assert (local.executor, remote.executor) == ("local", "ray")
    assert remote.units_done == 2 and sum(n["done"] for n in remote.nodes) == 2
    kept = comparable(tmp_path / "local" / "trajectories.jsonl", ("task_id", "sample"))
    assert kept and comparable(tmp_path / "ray" / "trajectories.jsonl", ("task_id", "sample")) == kept

    def by_unit(path: Path, drop: tuple[str, ...] = ()) -> dict[str, Any]:
        return {r["unit"]: {k: v for k, v in r.items() if k not in drop} for _, r in iter_jsonl(path)}

    timing = ("elapsed_s", "finished", "key")
    assert by_unit(tmp_path / "ray" / "units.jsonl", timing) == by_unit(
        tmp_path / "local" / "units.jsonl", timing
    )

    # QC decisions line for line; the fake numbers its QA questions by call order (units run concurrently),
    # so a QA pair is compared by its unit, evidence node and answer
    def qc(path: Path) -> list[Any]:
        lines = [r for _, r in iter_jsonl(path)]
        for r in lines:
            r.get("qa", {}).pop("question", None)
        return sorted(lines, key=lambda r: r["trajectory"])

    def qa(path: Path) -> list[tuple]:
        return sorted((r["extra"]["unit"], r["extra"]["tree_node"], r["answer"]) for _, r in iter_jsonl(path))

    assert qc(tmp_path / "ray" / "qc.jsonl") == qc(tmp_path / "local" / "qc.jsonl")
    assert qa(tmp_path / "ray" / "qa.jsonl") == qa(tmp_path / "local" / "qa.jsonl") != []
    assert remote.summary["models"] == local.summary["models"] == {"policy": "fake", "judge": "fake"}


def test_recipe_synthesis_stage_runs_on_ray(ray_cluster, tmp_path: Path) -> None:
    from datadojo.recipes import load_recipe
    from datadojo.recipes.datamind import STAGES
    from datadojo.recipes.engine import run_recipe

    (tmp_path / "data").mkdir()
    datamind_teacher.write_csv(tmp_path / "data" / "orders.csv")
    tax = small_taxonomy(tmp_path / "taxonomy.json")
    with (
        ScriptedLLMServer(datamind_teacher.teacher) as ts,
        ScriptedLLMServer(datamind_teacher.judge) as js,
    ):
        path = tmp_path / "datamind.toml"
        path.write_text(
            f'recipe = "datamind"\ninputs = ["data"]\nexecutor = "ray"\n[models]\n'
            f'teacher = "openai:teacher@{ts.base_url}"\njudge = "openai:judge@{js.base_url}"\n'
            f'student = "{tmp_path / "student"}"\n[stages.synthesis]\ntaxonomy = "{tax}"\n'
            "chains_per_file = 0\nconcurrency = 2\nnear_duplicate = 0.95\nrounds = 1\n",
            encoding="utf-8",
        )
        cfg = load_recipe(path)
        result = run_recipe(STAGES[:2], cfg, executor=RayExecutor(in_flight_per_worker=2))
        served = len(ts.requests)
    assert {i.stage: i.executor for i in result.items} == {"corpus": True, "synthesis": True}
    syn = result.entries["base"]["synthesis"].manifest
    assert {stage: where["executor"] for stage, where in syn["sampled"].items()} == {
        "sample": "ray",
        "reflect 1": "ray",
    }
    assert sum(n["done"] for n in syn["sampled"]["sample"]["nodes"]) == syn["queries"] * 3
    # the teacher's requests: queries from this process, episodes' turns from the nodes' own clients
    usage = syn["usage"]
    assert usage["teacher"]["requests"] + usage["teacher (nodes)"]["requests"] == served
    assert usage["teacher (nodes)"]["requests"] > 0

"""End to end over a real sandbox and the loopback model: outputs, UCT audit, task format, resume."""

from __future__ import annotations

import asyncio
import html
import json
import math
from pathlib import Path

from datadojo.bench.scidata import READERS_NOTE
from datadojo.jsonl import iter_jsonl, read_tasks, read_trajectories
from datadojo.llm.spec import load_backend
from datadojo.protocol import validate_trajectory
from datadojo.synth.sailor import SailorConfig, load_seeds, run_sailor, uct_df_fpu
from datadojo.testing.sailor_teacher import FakeSailor
from datadojo.testing.server import ScriptedLLMServer

SMALL = SailorConfig(max_nodes=5, max_depth=3, min_depth=2, trajectories_per_seed=2, k_max=2, logprobs=False)


def _run(
    fake: FakeSailor, folders: list[Path], out: Path, seeds: list[str], config: SailorConfig = SMALL, **kw
):
    with ScriptedLLMServer(fake) as srv:

        async def go():
            backend = load_backend(f"openai:fake@{srv.base_url}")
            try:
                return await run_sailor(
                    folders, load_seeds(only=seeds), policy=backend, out=out, config=config, **kw
                )
            finally:
                await backend.aclose()

        return asyncio.run(go()), srv


def lines(path: Path) -> list[dict]:
    return [rec for _, rec in iter_jsonl(path)]


def test_outputs_uct_audit_and_task_format(fake: FakeSailor, dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    _, srv = _run(fake, [dataset], out, ["L0-map"])
    for name in (
        "tree.jsonl",
        "trajectories.jsonl",
        "qc.jsonl",
        "qa.jsonl",
        "meta.jsonl",
        "summary.json",
        "report.html",
    ):
        assert (out / name).exists(), name
    summary = json.loads((out / "summary.json").read_text())
    cfg = summary["config"]
    assert summary["units"] == 1 and summary["probes_run"] == 5 and cfg["lam"] == 1.0 and cfg["beta"] == 0.1
    tree = lines(out / "tree.jsonl")
    nodes = {r["id"]: r for r in tree if r["type"] == "node"}
    selects = [r for r in tree if r["type"] == "select"]
    assert selects and all(
        set(r) == {"type", "node", "n_parent", "candidates", "chosen", "fpu_delta"} for r in selects
    )
    for s in selects:  # recompute every UCT value from the file and the config, and check every choice
        for c in s["candidates"]:
            assert set(c) == {"id", "q", "rho", "n", "depth", "uct"}
            # d_w = depth reached below the candidate when it was selected: at least its own depth, at most
            # the deepest executed node under it in the final tree
            below = [nodes[c["id"]]["depth"]]
            stack = [c["id"]]
            while stack:
                top = stack.pop()
                kids = [n for n in nodes.values() if n["parent"] == top and n["executed"]]
                below += [k["depth"] for k in kids]
                stack += [k["id"] for k in kids]
            own = nodes[c["id"]]["depth"] / cfg["max_depth"]
            assert own <= c["depth"] <= max(below) / cfg["max_depth"] + 1e-12
            if c["n"] == 0:  # first-play value from ρ, Δ the recorded sibling offset (or fpu_bonus)
                assert math.isclose(c["q"], c["rho"] + s["fpu_delta"] - cfg["fpu_reduction"])
            uct = uct_df_fpu(
                c["q"], c["rho"], s["n_parent"], c["n"], c["depth"], lam=cfg["lam"], beta=cfg["beta"]
            )
            assert math.isclose(uct, c["uct"], rel_tol=1e-12, abs_tol=1e-12)
        best = max(c["uct"] for c in s["candidates"])
        chosen = next(c for c in s["candidates"] if c["id"] == s["chosen"])
        assert chosen["uct"] == best
    for n in nodes.values():
        assert {
            "id",
            "parent",
            "depth",
            "seed",
            "strategy",
            "code",
            "status",
            "excerpt",
            "n",
            "q",
            "rho",
            "post",
        } <= set(n)
    executed = [n for n in nodes.values() if n["executed"] and n["parent"] is not None]
    assert len(executed) == 5 and all(n["status"] == "ok" for n in executed)
    # strategy→tool: every probe records its strategy; the weak one (0.1 < τ_pre) never became a node
    assert {n["strategy"] for n in executed} <= {"repository_inspection", "schema_inspection", "statistics"}
    assert all(n["strategy"] != "visualization" for n in nodes.values())
    # trajectories: sailor dialect, valid, anchored to the seed, strategies recorded
    trajs = list(read_trajectories(out / "trajectories.jsonl"))
    assert trajs and all(not validate_trajectory(t) for t in trajs)
    assert all(len(t.extra["strategies"]) == len(t.turns) - 1 >= 2 for t in trajs)
    # the policy was told which readers the sandbox has, in the words `eval scidata` uses (same prompt)
    assert all(any(READERS_NOTE in str(m["content"]) for m in t.prompt) for t in trajs)
    qc = lines(out / "qc.jsonl")
    assert len(qc) == summary["trajectories"] and sum(q["kept"] for q in qc) == len(trajs) == summary["kept"]
    # the task format shared with `eval scidata`
    qa = list(read_tasks(out / "qa.jsonl"))
    meta = list(read_tasks(out / "meta.jsonl"))
    assert len(meta) == 1 and meta[0].answer_kind == "sailor_meta" and meta[0].category == "meta"
    assert meta[0].question == load_seeds(only=["L0-map"])[0].intent and meta[0].answer.startswith("Merged")
    assert qa and all(
        t.answer_kind == "sailor_qa" and t.source == "scidata" and t.difficulty == "L0" for t in qa
    )
    for t in [*qa, *meta]:
        assert t.files[0].kind == "dir" and Path(t.files[0].path) == dataset.resolve()
        assert t.extra["track"] == t.category and t.extra["seed_id"] == "L0-map"
    assert qa[0].extra["tree_node"] in nodes and qa[0].extra["evidence"]
    # structured calls carried a JSON Schema
    rfs = [r.json.get("response_format") for r in srv.requests]
    assert any(rf and rf["type"] == "json_schema" for rf in rfs)
    assert summary["per_level"]["L0"]["units"] == 1 and summary["per_level"]["L1"]["units"] == 0
    # the HTML report shows the per-level table (with every QC reason that occurred) and the QA pairs
    report = (out / "report.html").read_text()
    assert "<h2>Per level</h2>" in report and "<th>L0</th>" in report and "<th>L1</th>" not in report
    assert all(f"<th>{r}</th>" in report for r in summary["removed"])
    assert f"<h2>QA pairs ({len(qa)})</h2>" in report
    assert all(html.escape(t.question) in report and t.extra["tree_node"] in report for t in qa)


def test_resume_skips_finished_units(fake: FakeSailor, dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    _run(fake, [dataset], out, ["L0-map"])
    before = {n: (out / n).read_bytes() for n in ("tree.jsonl", "qa.jsonl", "meta.jsonl", "qc.jsonl")}
    again, srv = _run(FakeSailor(), [dataset], out, ["L0-map"])
    assert again.units_skipped == 1 and again.units_done == 0 and len(srv.requests) == 0
    assert {n: (out / n).read_bytes() for n in before} == before


def _root_choices(out: Path) -> list[str]:
    tree = lines(out / "tree.jsonl")
    nodes = {r["id"]: r for r in tree if r["type"] == "node"}
    root = next(i for i, r in nodes.items() if r["parent"] is None)
    return [nodes[s["chosen"]]["strategy"] for s in tree if s["type"] == "select" and s["node"] == root]


def test_post_execution_feedback_changes_later_selections(dataset: Path, tmp_path: Path) -> None:
    """Dual feedback over the loopback model: the pre-judge prefers repository inspection (ρ 0.9 vs 0.8), but its
    observation is judged worthless (s_post = 0) and the schema probe's excellent (s_post = 1).

    Third root decision, N(root) = 2, both children visited once:
      η = 0.5: Q̂(repo) = 0.45, Q̂(schema) = 0.9 → UCT 0.45 + 0.9·sqrt(ln 3 / 2) = 1.117 < 0.9 + 0.8·0.741 = 1.493
      η = 0  : Q̂(repo) = 0.9,  Q̂(schema) = 0.8 → UCT 1.567 > 1.393: the pre-judgment alone keeps repo ahead.
    """
    choices, reasons = {}, {}
    for eta in (0.5, 0.0):
        fake = FakeSailor()
        fake.post = lambda prompt: 0.0 if "This step (repository_inspection)" in prompt else 1.0
        cfg = SailorConfig(
            max_nodes=3, max_depth=3, k_max=2, calibration=eta, logprobs=False, trajectories_per_seed=2
        )
        _run(fake, [dataset], tmp_path / f"eta{eta}", ["L0-map"], cfg)
        choices[eta] = _root_choices(tmp_path / f"eta{eta}")
        # two leaves: one two probes deep, one a single probe deep — rejected as too shallow without spending a
        # final-answer request on it
        qc = lines(tmp_path / f"eta{eta}" / "qc.jsonl")
        reasons[eta] = sorted(q["reason"] for q in qc)
        assert fake.calls["final"] == 1
    # η = 0.5 deepened the schema branch (s_post = 1): kept; η = 0 deepened the worthless repository branch,
    # whose observations QC finds unsubstantive
    assert reasons == {0.5: ["kept", "too_shallow"], 0.0: ["no_substantive_observation", "too_shallow"]}
    # first play: the unvisited repository probe (ρ + Δ = 1.0) goes first; then the unvisited schema probe
    assert choices[0.5][:2] == choices[0.0][:2] == ["repository_inspection", "schema_inspection"]
    assert choices[0.5][2] == "schema_inspection" and choices[0.0][2] == "repository_inspection"
    report = (tmp_path / "eta0.5" / "report.html").read_text()
    assert "schema_inspection" in report and "ρ=0.900" in report and "<ul class=tree>" in report


def test_run_kit_files_and_a_changed_search_config_is_refused_on_resume(
    fake: FakeSailor, dataset: Path, tmp_path: Path
) -> None:
    """Issue 23: sailor on the run kit. Before, a rerun with another λ silently mixed two searches' trees in
    one folder; now run.json refuses it (ResumeError naming the setting), and the funnel, the usage record
    and the progress hook are the kit's."""
    import pytest

    from datadojo.errors import ResumeError

    out = tmp_path / "run"
    seen: list[tuple[str, int, int]] = []
    run, _ = _run(fake, [dataset], out, ["L0-map"], progress=lambda *a: seen.append(a))
    assert seen[0] == ("units", 0, 1) and seen[-1] == ("units", 1, 1)
    funnel = json.loads((out / "funnel.json").read_text())
    summary = run.summary
    assert funnel["steps"][0]["in"] == summary["trajectories"] and funnel["kept"] == summary["kept"]
    from datadojo.runs import read_usage_totals

    usage = read_usage_totals(out / "usage.jsonl")["sailor"]  # batches and the last record, added up
    assert usage["invocations"] == 1
    assert usage["roles"]["policy+judge"]["requests"] == summary["requests"] > 0
    assert json.loads((out / "run.json").read_text())["kind"] == "sailor"
    with pytest.raises(ResumeError, match=r"config\.lam: was 1\.0, now 2\.0"):
        _run(fake, [dataset], out, ["L0-map"], config=SMALL.model_copy(update={"lam": 2.0}))
    again, srv = _run(fake, [dataset], out, ["L0-map"])
    assert again.units_skipped == 1 and not srv.requests

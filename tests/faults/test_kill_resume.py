"""Kill and resume, for every long command: SIGKILL at seeded points, rerun, same output as a clean run.

How the kill points are chosen and what is checked: see ``faultlib.py``. Each test runs the command once
uninterrupted (the reference, in its own folder), then for each seeded kill plan kills it (and possibly its
rerun) and runs it again to completion in a fresh folder, and compares. ``DATADOJO_FAULT_SEED=N`` replays
another set of kill points; ``DATADOJO_FAULT_POINTS=K`` draws K single-kill plans per command.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from faultlib import FaultRun, kill_plans

from datadojo.jsonl import append_jsonl
from datadojo.testing.server import ScriptedLLMServer
from datadojo.train.toy import synthetic_trajectory
from datadojo.types import DataFile, Task
from helpers.digests import file_digest, tree_digest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "examples" / "data"

pytestmark = pytest.mark.timeout(900)


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _exercise(run: FaultRun, tmp_path: Path, salt: str) -> None:
    expected, n_ops = run.reference(tmp_path / "reference")
    kills = 0
    for i, plan in enumerate(kill_plans(n_ops, seed_salt=salt)):
        out = tmp_path / f"killed-{i}"
        kills += run.kill_then_resume(out, plan)
        run.check_clean(out, expected)
    assert kills >= 1, "no kill landed: the kill points lie past the end of every run"


# ------------------------------------------------------------------------------------ deterministic stages
def test_warmup_build(tmp_path: Path) -> None:
    def normalize(out: Path) -> Any:
        return (out / "tasks.jsonl").read_text(), tree_digest(out / "tasks.copies")

    run = FaultRun(
        argv=lambda out: [
            "warmup",
            "build",
            str(DATA / "shop.sqlite"),
            str(DATA / "sales.csv"),
            "--n",
            "6",
            "--seed",
            "2",
            "--workers",
            "1",
            "--out",
            str(out / "tasks.jsonl"),
        ],
        normalize=normalize,
        key=lambda r: r.get("id"),
    )
    _exercise(run, tmp_path, "warmup-build")


def test_corpus_scan(tmp_path: Path) -> None:
    def normalize(out: Path) -> Any:
        recs = _records(out / "corpus.jsonl")
        return sorted(
            json.dumps({k: v for k, v in r.items() if k != "seconds"}, sort_keys=True) for r in recs
        )

    run = FaultRun(
        argv=lambda out: ["corpus", "scan", str(DATA), "--out", str(out / "corpus.jsonl"), "--no-progress"],
        normalize=normalize,
        appendable=["corpus.jsonl"],
        key=lambda r: r.get("path"),
    )
    _exercise(run, tmp_path, "corpus-scan")


@pytest.mark.parametrize("target", ["trl", "llamafactory"])
def test_export(tmp_path: Path, target: str) -> None:
    data = tmp_path / "trajectories.jsonl"
    append_jsonl(data, [synthetic_trajectory(f"t{i}", sample=i % 2) for i in range(40)])

    def argv(out: Path) -> list[str]:
        dest = out / "trl.jsonl" if target == "trl" else out / "lf"
        return ["export", target, "--data", str(data), "--out", str(dest)]

    run = FaultRun(argv=argv, normalize=tree_digest)
    _exercise(run, tmp_path, f"export-{target}")


# ------------------------------------------------------------------------------- runs with a (fake) model
def _reply(req: dict) -> str:
    """A deterministic model: one code turn, then the answer its task's question asks for."""
    question = req["messages"][1]["content"] if len(req["messages"]) > 1 else ""
    if not any(m["role"] == "assistant" for m in req["messages"]):
        return "<think>count</think><code>print(len(open('sales.csv').read().splitlines()))</code>"
    tag = next((w for w in question.split() if w.startswith("q")), "q?")
    return f"<think>done</think><answer>{tag}</answer>"


def _trajectory_view(path: Path) -> list[tuple[Any, ...]]:
    return sorted(
        (r["task_id"], r["sample"], r["final_answer"], r["stop_reason"], len(r["turns"]))
        for r in _records(path)
    )


def test_rollout(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    append_jsonl(tasks, [Task(id=f"t{i}", question=f"q{i} rows?", files=[DataFile.from_path(DATA / "sales.csv")])
                         for i in range(6)])  # fmt: skip
    with ScriptedLLMServer(_reply) as server:
        run = FaultRun(
            argv=lambda out: [
                "rollout",
                str(tasks),
                "--model",
                f"openai:fake@{server.base_url}",
                "-n",
                "2",
                "--concurrency",
                "2",
                "--isolation",
                "none",
                "--out",
                str(out),
            ],
            normalize=lambda out: _trajectory_view(out / "trajectories.jsonl"),
            appendable=["trajectories.jsonl"],
            key=lambda r: (r.get("task_id"), r.get("sample")),
        )
        _exercise(run, tmp_path, "rollout")


def test_eval(tmp_path: Path, shared_data: Callable[..., Path]) -> None:
    dabench = shared_data("dabench", "da-dev-questions.jsonl").parent

    def reply(req: dict) -> str:
        if not any(m["role"] == "assistant" for m in req["messages"]):
            return "<think>look</think><code>print(1 + 1)</code>"
        return "<think>ok</think><answer>@answer_name[2]</answer>"

    def normalize(out: Path) -> Any:
        scores = sorted(
            (r["id"], r["trial"], r["score"], r["correct"]) for r in _records(out / "scores.jsonl")
        )
        summary = json.loads((out / "summary.json").read_text())
        return _trajectory_view(out / "trajectories.jsonl"), scores, summary["metrics"]

    with ScriptedLLMServer(reply) as server:
        run = FaultRun(
            argv=lambda out: [
                "eval",
                "dabench",
                "--data",
                str(dabench),
                "--model",
                f"openai:fake@{server.base_url}",
                "-n",
                "2",
                "--limit",
                "3",
                "--concurrency",
                "2",
                "--isolation",
                "none",
                "--out",
                str(out),
            ],
            normalize=normalize,
            appendable=["trajectories.jsonl"],
            key=lambda r: (r.get("task_id", r.get("id")), r.get("sample", r.get("trial"))),
        )
        _exercise(run, tmp_path, "eval")


# ------------------------------------------------------------------------- training (checkpoint / resume)
def test_train_sft(tmp_path: Path, toy_ckpt: Path) -> None:
    pytest.importorskip("accelerate")
    data = tmp_path / "traj.jsonl"
    append_jsonl(data, [synthetic_trajectory(f"s{i}") for i in range(6)])

    def normalize(out: Path) -> Any:
        # the loss curve (one record per step, in order) and the final weights; timings are per run
        curve = [(r["step"], r["sft_loss"], r["lr"]) for r in _records(out / "metrics.jsonl")]
        weights = file_digest(out / "final" / "model.safetensors")
        return curve, weights, json.loads((out / "summary.json").read_text())["steps"]

    run = FaultRun(
        argv=lambda out: [
            *("train", "sft", "--model", f"hf:{toy_ckpt}", "--data", str(data), "--out", str(out)),
            *("--max-steps", "4", "--batch-size", "2", "--save-every", "1", "--lr", "1e-3", "--seed", "0"),
        ],
        normalize=normalize,
        appendable=["metrics.jsonl"],
        key=lambda r: r.get("step"),
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
    )
    _exercise(run, tmp_path, "train-sft")

"""The agent loop on the local transformers backend: the suite's tiny random toy checkpoint (no downloads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from datadojo.agent import AgentConfig, run_agent
from datadojo.llm import load_backend
from datadojo.llm.base import SamplingParams
from datadojo.types import DataFile, Task

REPO = Path(__file__).resolve().parents[2]


class _NoRun:
    calls = 0

    async def run(self, code: str, *, language: str = "python", db: str | None = None):
        raise AssertionError("a random model should not produce runnable code")


async def test_agent_runs_on_a_local_checkpoint(toy_ckpt: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    backend = load_backend(f"hf:{toy_ckpt}?device=cpu&dtype=float32")
    task = Task(
        id="hf-1", question="How many rows?", files=[DataFile.from_path(REPO / "examples/data/sales.csv")]
    )
    cfg = AgentConfig(max_turns=2, sampling=SamplingParams(temperature=1.0, max_tokens=12), profile_chars=0)
    traj = await run_agent(task, backend, _NoRun(), cfg, seed=3)
    await backend.aclose()
    # random text is never a valid turn: each gets recorded as void with feedback, until the budget ends
    assert traj.stop_reason == "max_turns"
    assert len(traj.turns) == 2 and all(t.void for t in traj.turns)
    assert all(t.tokens.prompt > 0 and 0 <= t.tokens.completion <= 12 for t in traj.turns)
    assert sum(t.tokens.completion for t in traj.turns) > 0
    # the second request carried the first reply and the feedback: its prompt is longer
    assert traj.turns[1].tokens.prompt > traj.turns[0].tokens.prompt
    assert traj.model and str(toy_ckpt) in traj.model


async def test_context_window_of_the_checkpoint_stops_the_episode(
    toy_ckpt: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    backend = load_backend(f"hf:{toy_ckpt}?device=cpu&dtype=float32&context_window=64")
    task = Task(id="hf-2", question="How many rows?")
    traj = await run_agent(task, backend, _NoRun(), AgentConfig(sampling=SamplingParams(max_tokens=8)))
    await backend.aclose()
    assert traj.stop_reason == "context_limit" and traj.turns == []

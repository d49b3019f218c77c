"""The ReAct loop end to end: real openai client → loopback server, real sandbox, every stop reason."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from datadojo.agent import AgentConfig, run_agent
from datadojo.llm import load_backend
from datadojo.llm.base import SamplingParams
from datadojo.sandbox import Sandbox, SandboxConfig
from datadojo.testing.server import Reply, ScriptedLLMServer, Status
from datadojo.types import DataFile, Task

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "data"


def _task(question: str = "How many rows?", files: tuple[str, ...] = ("sales.csv",), **kw: Any) -> Task:
    return Task(id="t1", question=question, files=[DataFile.from_path(EXAMPLES / f) for f in files], **kw)


def _backend(server: ScriptedLLMServer, **query: Any):
    q = "&".join(f"{k}={v}" for k, v in {"max_retries": 1, **query}.items())
    return load_backend(f"openai:fake@{server.base_url}?{q}")


@pytest.fixture
async def sandbox():
    async with await Sandbox.create([DataFile.from_path(EXAMPLES / "sales.csv")], SandboxConfig()) as sb:
        yield sb


def _assistant_turns(request_json: dict) -> int:
    return sum(1 for m in request_json["messages"] if m["role"] == "assistant")


async def test_code_then_answer_runs_code_and_feeds_back_the_observation(sandbox):
    script = [
        "<think>Load the file.</think>\n<code>\nimport pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(len(df))\n",
        "<think>240 rows.</think>\n<answer>240</answer>",
    ]
    with ScriptedLLMServer(script) as server:
        backend = _backend(server)
        traj = await run_agent(_task(), backend, sandbox)
        await backend.aclose()
        second = server.requests[1].json
    assert traj.stop_reason == "answer"
    assert traj.final_answer == "240"
    assert [t.action.kind for t in traj.turns] == ["code", "answer"]
    # the stop sequence cut </code>; the loop completed the tag so the recorded raw turn is well formed
    assert traj.turns[0].raw.rstrip().endswith("</code>")
    assert traj.turns[0].observation is not None and traj.turns[0].observation.text.strip() == "240"
    # the model saw the observation in the dialect's tags, and the stop sequences were sent
    assert second["messages"][-1] == {"role": "user", "content": "<interpreter>\n240\n</interpreter>"}
    assert "</code>" in server.requests[0].json["stop"] and "<interpreter>" in server.requests[0].json["stop"]
    assert traj.turns[0].tokens.completion > 0 and traj.turns[0].timings.exec_s > 0
    assert traj.prompt[0]["role"] == "system" and "sales.csv" in traj.prompt[0]["content"]


async def test_chunked_state_carries_variables_between_turns(sandbox):
    script = [
        "<think>a</think><code>x = 41</code>",
        "<think>b</think><code>print(x + 1)</code>",
        "<think>c</think><answer>42</answer>",
    ]
    with ScriptedLLMServer(script) as server:
        backend = _backend(server)
        traj = await run_agent(_task(), backend, sandbox)
        await backend.aclose()
    assert traj.turns[1].observation.text.strip() == "42"


async def test_invalid_turns_get_feedback_and_end_with_invalid(sandbox):
    script = [
        "I think the answer is 3.",
        Reply("<code>print(1)", finish_reason="length"),
        "<think>x</think> the answer is 1",
    ]
    with ScriptedLLMServer(script) as server:
        backend = _backend(server)
        cfg = AgentConfig(max_invalid_turns=3, sampling=SamplingParams(max_tokens=512))
        traj = await run_agent(_task(), backend, sandbox, cfg)
        await backend.aclose()
        feedback = server.requests[1].json["messages"][-1]["content"]
    assert traj.stop_reason == "invalid"
    assert len(traj.turns) == 3
    assert all(t.void and t.action.kind == "invalid" for t in traj.turns)
    assert all(t.invalid_reason for t in traj.turns)
    assert feedback.startswith("<interpreter>") and "No action" in feedback
    assert traj.turns[0].observation.status == "feedback"
    assert "cut off by the token limit" in traj.turns[1].observation.text


async def test_one_invalid_turn_then_recovery_keeps_going(sandbox):
    script = ["no tags at all", "<think>ok</think><answer>7</answer>"]
    with ScriptedLLMServer(script) as server:
        backend = _backend(server)
        traj = await run_agent(_task(), backend, sandbox)
        await backend.aclose()
    assert traj.stop_reason == "answer" and traj.final_answer == "7"
    assert traj.has_void_turn and [t.void for t in traj.turns] == [True, False]


async def test_max_turns_and_final_turn_reservation(sandbox):
    with ScriptedLLMServer(lambda req: "<think>look</think><code>print('hi')</code>") as server:
        backend = _backend(server)
        cfg = AgentConfig(max_turns=3, reserve_final_turn=True)
        traj = await run_agent(_task(), backend, sandbox, cfg)
        await backend.aclose()
        last = server.requests[-1].json["messages"][-1]["content"]
        first = server.requests[1].json["messages"][-1]["content"]
    assert traj.stop_reason == "max_turns" and len(traj.turns) == 3 and traj.final_answer is None
    assert "last turn" in last and "last turn" not in first


async def test_llm_error_after_retries_ends_the_trajectory(sandbox):
    with ScriptedLLMServer([Status(500), Status(500), Status(500)], strict=False) as server:
        backend = _backend(server, max_retries=1)
        traj = await run_agent(_task(), backend, sandbox)
        await backend.aclose()
    assert traj.stop_reason == "llm_error" and traj.error and "500" in traj.error
    assert traj.turns == []


async def test_retry_then_success(sandbox):
    with ScriptedLLMServer([Status(429, retry_after=0.01), "<think>t</think><answer>1</answer>"]) as server:
        backend = _backend(server, max_retries=2)
        traj = await run_agent(_task(), backend, sandbox)
        await backend.aclose()
    assert traj.stop_reason == "answer"


async def test_context_limit_stops_instead_of_truncating(sandbox):
    from datadojo.env.prompts import build_prompt, load_template
    from datadojo.protocol import get_dialect

    dialect = get_dialect("datamind")
    cfg = AgentConfig(sampling=SamplingParams(max_tokens=100))
    prompt = build_prompt(
        _task(),
        dialect,
        max_turns=cfg.max_turns,
        template=load_template(dialect),
        profile_chars=cfg.profile_chars,
    )
    # digits count one token each: the observation of this cell alone is > 1,000 tokens
    reply = "<think>t</think><code>print(list(range(3000)))</code>"
    with ScriptedLLMServer([reply], strict=False) as server:
        probe = _backend(server)
        window = probe.count_tokens(prompt) + 100 + 300  # the first request fits, the second cannot
        await probe.aclose()
        backend = _backend(server, context_window=window)
        traj = await run_agent(_task(), backend, sandbox, cfg)
        await backend.aclose()
        assert len(server.requests) == 1
    assert traj.stop_reason == "context_limit"
    assert len(traj.turns) == 1 and f"context window of {window}" in (traj.error or "")


class _BrokenSandbox:
    async def run(self, code: str, *, language: str = "python", db: str | None = None):
        raise RuntimeError("worker vanished")


async def test_env_error_when_the_sandbox_fails():
    with ScriptedLLMServer(["<think>t</think><code>print(1)</code>"]) as server:
        backend = _backend(server)
        traj = await run_agent(_task(), backend, _BrokenSandbox())
        await backend.aclose()
    assert traj.stop_reason == "env_error" and "worker vanished" in (traj.error or "")
    assert traj.turns[0].observation.status == "env_error"


async def test_sailor_dialect_with_boxed_answer(sandbox):
    script = [
        "<think>count</think><python>\nimport pandas as pd\nprint(pd.read_csv('sales.csv').shape[0])\n",
        "<think>done</think><answer>The file has \\boxed{240} rows.</answer>",
    ]
    with ScriptedLLMServer(script) as server:
        backend = _backend(server)
        traj = await run_agent(_task(), backend, sandbox, AgentConfig(dialect="sailor", max_turns=12))
        await backend.aclose()
        second = server.requests[1].json
    assert traj.dialect == "sailor" and traj.final_answer == "240"
    assert second["messages"][-1]["content"] == "<result>\n240\n</result>"
    assert "</python>" in server.requests[0].json["stop"]


async def test_sql_turn_runs_against_the_task_database():
    task = _task("How many customers?", files=("shop.sqlite",))
    script = [
        "<think>count</think><code>\n```sql\nSELECT COUNT(*) AS n FROM customers\n```\n</code>",
        "<think>60</think><answer>60</answer>",
    ]
    async with await Sandbox.create(task.files, SandboxConfig()) as sb:
        with ScriptedLLMServer(script) as server:
            backend = _backend(server)
            traj = await run_agent(task, backend, sb)
            await backend.aclose()
    assert traj.turns[0].action.kind == "sql"
    assert "60" in traj.turns[0].observation.text
    assert traj.final_answer == "60"


async def test_trajectory_round_trips_through_json(sandbox):
    with ScriptedLLMServer(
        ["<think>t</think><code>print(2)</code>", "<think>u</think><answer>2</answer>"]
    ) as server:
        backend = _backend(server)
        traj = await run_agent(_task(), backend, sandbox, seed=5)
        await backend.aclose()
    again = type(traj).model_validate(json.loads(traj.to_json()))
    assert again == traj
    assert traj.provenance.seed == 5 and traj.provenance.config_hash


async def test_a_real_dabench_table(shared_data: Callable[..., Path]):
    table = shared_data("dabench", "da-dev-tables", "abalone.csv")
    task = Task(
        id="dabench-abalone", question="How many rows does the table have?", files=[DataFile.from_path(table)]
    )
    script = [
        "<think>count rows</think><code>\nimport pandas as pd\ndf = pd.read_csv('abalone.csv')\nprint(df.shape)\n",
        lambda: None,
    ]
    observed: dict[str, str] = {}

    def reply(req: dict) -> str:
        if _assistant_turns(req) == 0:
            return script[0]
        observed["obs"] = req["messages"][-1]["content"]
        rows = observed["obs"].split("(")[1].split(",")[0]
        return f"<think>done</think><answer>{rows}</answer>"

    async with await Sandbox.create(task.files, SandboxConfig()) as sb:
        with ScriptedLLMServer(reply) as server:
            backend = _backend(server)
            traj = await run_agent(task, backend, sb)
            await backend.aclose()
    import pandas as pd

    assert traj.stop_reason == "answer"
    assert traj.final_answer == str(len(pd.read_csv(table)))
    assert "abalone.csv" in traj.prompt[0]["content"]


async def test_each_sample_draws_its_own_reproducible_random_stream():
    """Issue 38, finding 4: the samples of one task ran through one pool with one seed per sandbox, so
    every sample's ``df.sample()`` drew the same rows. Each trajectory's sandbox now gets a seed derived
    from the task and the sample, recorded in the trajectory, and the cell draws what that seed draws."""
    import random

    from datadojo.sandbox import SandboxPool
    from datadojo.sandbox.seeding import trajectory_seed

    script = "<think>Draw.</think>\n<code>\nimport random\nprint(repr(random.random()))\n"
    draws: dict[int, list[float]] = {0: [], 1: []}
    seeds: dict[int, list[int | None]] = {0: [], 1: []}
    async with SandboxPool(SandboxConfig(isolation="none", preload=()), size=1) as pool:
        for _round in range(2):
            for sample in (0, 1):
                with ScriptedLLMServer([script, "<answer>x</answer>"]) as server:
                    backend = _backend(server)
                    async with pool.session([]) as sb:
                        traj = await run_agent(_task(), backend, sb, sample=sample, seed=5)
                    await backend.aclose()
                draws[sample].append(float(traj.turns[0].observation.text))
                seeds[sample].append(traj.provenance.sandbox_seed)
    assert seeds[0] == [trajectory_seed("t1", 0, 5)] * 2 and seeds[1] == [trajectory_seed("t1", 1, 5)] * 2
    assert seeds[0][0] != seeds[1][0]
    assert draws[0] == [random.Random(seeds[0][0]).random()] * 2  # reproducible in a reused worker
    assert draws[1] == [random.Random(seeds[1][0]).random()] * 2 and draws[0][0] != draws[1][0]

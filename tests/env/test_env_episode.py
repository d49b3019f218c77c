"""The environment interface (issue 37): DataEnv → Episode → step, by hand, as an adapter drives it.

Scripted replies stand in for a model and a scripted runner (or a real sandbox pool) for the sandbox; each
test states what the episode must show after every step, and that stepping by hand gives the trajectory
the one driver (:func:`datadojo.env.run_agent`) gives for the same replies.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from datadojo.env import DataEnv, EnvConfig, EnvUsageError, Episode, StepResult, run_agent
from datadojo.llm.base import SamplingParams
from datadojo.sandbox.seeding import trajectory_seed
from datadojo.testing.env import ScriptedChat, ScriptedRunner, runner_factory
from datadojo.types import DataFile, Task

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"


def _task(*files: str) -> Task:
    return Task(id="e1", question="How many rows?", files=[DataFile.from_path(EXAMPLES / f) for f in files])


def _plain(traj: Any) -> dict[str, Any]:
    data = traj.to_dict()
    for turn in data["turns"]:
        turn["timings"] = turn["tokens"] = {}  # the driver records the server's counts and times
    data["provenance"] = {k: data["provenance"][k] for k in ("config_hash", "seed", "sandbox_seed")}
    return data


async def test_step_by_step_gives_observations_then_the_trajectory() -> None:
    cfg = EnvConfig(max_turns=4, profile_chars=0)
    sessions = runner_factory()
    env = DataEnv(cfg, sandboxes=sessions)
    episode = await env.reset(_task("sales.csv", "shop.sqlite"), sample=1, seed=9, model="me")
    assert isinstance(episode, Episode) and not episode.done and episode.stop_reason is None
    assert [m["role"] for m in episode.messages] == ["system", "user"]
    assert episode.messages[1]["content"] == "How many rows?"
    assert (
        episode.stop == ("</code>", "</answer>", "<interpreter>") == env.stop and episode.max_tokens is None
    )
    assert env.dialect.name == "datamind" and env.max_turns == 4
    # the config's own stop strings come first, the dialect's after them, each once
    sailor = DataEnv(EnvConfig(dialect="sailor", sampling=SamplingParams(stop=("\n\n\n", "</python>"))))
    assert sailor.stop == ("\n\n\n", "</python>", "</answer>", "<result>")
    assert episode.turn_seed == 9
    runner = sessions.opened[0]
    assert runner.seeds == [trajectory_seed("e1", 1, 9)]  # the session was reseeded for this trajectory

    # a server that cut the reply at </code> and said so
    t0 = time.perf_counter()
    r1 = await episode.step("<think>a</think><code>print(1)", stop_sequence="</code>")
    elapsed = time.perf_counter() - t0
    assert isinstance(r1, StepResult) and not r1.done
    # timings: what the caller measured for the model (none here), the sandbox's part of this step
    assert r1.turn.timings.llm_s == 0.0 and 0.0 <= r1.turn.timings.exec_s <= elapsed
    assert r1.observation == "<interpreter>\n[python] print(1)\n</interpreter>"
    assert r1.turn.raw == "<think>a</think><code>print(1)</code>" and r1.turn.action.kind == "code"
    assert episode.messages[-2:] == [
        {"role": "assistant", "content": "<think>a</think><code>print(1)</code>"},
        {"role": "user", "content": r1.observation},
    ]
    assert episode.turn_seed == 10
    # a malformed turn: a corrective message, recorded as void
    r2 = await episode.step("the answer is probably 3")
    assert not r2.done and r2.turn.void and r2.observation.startswith("<interpreter>\nNo action:")
    # SQL runs against the task's database
    r3 = await episode.step("<think>q</think><code>\n```sql\nSELECT 1\n```\n</code>")
    assert r3.observation == "<interpreter>\n[sql@shop.sqlite] SELECT 1\n</interpreter>"
    r4 = await episode.step("<think>done</think><answer>240</answer>")
    assert r4 == StepResult("", True, episode.turns[-1])
    assert episode.done and episode.stop_reason == "answer"
    traj = episode.trajectory()
    assert traj is episode.trajectory()  # one record, not rebuilt per call
    assert traj.final_answer == "240" and traj.model == "me" and traj.sample == 1 and len(traj.turns) == 4
    with pytest.raises(EnvUsageError, match="step after the episode ended"):
        await episode.step("<answer>1</answer>")
    await episode.close()
    await episode.close()  # idempotent
    assert sessions.closed == 1
    await env.aclose()

    # the same replies through the one driver give the same trajectory
    replies = [
        ("<think>a</think><code>print(1)", "stop", "</code>"),
        "the answer is probably 3",
        "<think>q</think><code>\n```sql\nSELECT 1\n```\n</code>",
        "<think>done</think><answer>240</answer>",
    ]
    backend = ScriptedChat(replies, model_id="me")
    driven = await run_agent(
        _task("sales.csv", "shop.sqlite"), backend, ScriptedRunner(), cfg, sample=1, seed=9
    )
    assert _plain(driven) == _plain(traj)
    assert [r["seed"] for r in backend.requests] == [9, 10, 11, 12]


async def test_turn_budget_final_turn_note_and_invalid_rule() -> None:
    cfg = EnvConfig(max_turns=2, reserve_final_turn=True, profile_chars=0)
    async with DataEnv(cfg, sandboxes=runner_factory()) as env, await env.reset(_task()) as episode:
        first = await episode.step("<code>x = 1</code>")
        # one turn left: the observation carries the note (the model must answer now)
        assert first.observation == (
            "<interpreter>\n[python] x = 1\n</interpreter>\n"
            "This is your last turn: give your final answer now in <answer>…</answer>."
        )
        last = await episode.step("<code>print(x)</code>")
        assert last.done and episode.stop_reason == "max_turns" and episode.trajectory().final_answer is None
    cfg = EnvConfig(max_invalid_turns=2, profile_chars=0)
    async with DataEnv(cfg, sandboxes=runner_factory()) as env:
        async with await env.reset(_task()) as episode:
            assert not (await episode.step("hmm")).done
            end = await episode.step("<code>a</code><code>b</code>")
            assert end.done and episode.stop_reason == "invalid"
            assert episode.error.startswith("2 malformed turns in a row; last: Two actions in one turn")
            # the last corrective message is still the observation (a trainer's record ends with it)
            assert end.observation.startswith("<interpreter>\nTwo actions in one turn")
            assert end.observation == episode.messages[-1]["content"]
        # *consecutive*: a valid turn in between starts the count again
        async with await env.reset(_task()) as episode:
            assert not (await episode.step("hmm")).done
            assert not (await episode.step("<code>x = 1</code>")).done
            assert not (await episode.step("hmm again")).done
            assert (await episode.step("still nothing")).done and episode.stop_reason == "invalid"


async def test_reply_cut_by_the_token_limit_is_invalid_and_says_so() -> None:
    cfg = EnvConfig(profile_chars=0, sampling=SamplingParams(max_tokens=8))
    async with DataEnv(cfg, sandboxes=runner_factory()) as env, await env.reset(_task()) as episode:
        assert episode.max_tokens == 8
        res = await episode.step("<think>long</think><code>print(", finish_reason="length")
        assert res.turn.raw == "<think>long</think><code>print("  # not closed: it was cut, not stopped
        assert res.turn.void and "cut off by the token limit" in res.observation


async def test_sandbox_failure_ends_with_env_error_and_driver_reasons() -> None:
    async with DataEnv(EnvConfig(profile_chars=0), sandboxes=runner_factory(fail_on="boom")) as env:
        async with await env.reset(_task()) as episode:
            res = await episode.step("<code>boom()</code>")
            assert res.done and res.observation == "" and episode.stop_reason == "env_error"
            assert episode.trajectory().error == "Environment failure: RuntimeError: worker vanished"
        async with await env.reset(_task()) as episode:
            with pytest.raises(EnvUsageError, match="has not ended"):
                episode.trajectory()
            with pytest.raises(EnvUsageError, match="not 'answer'"):
                episode.end("answer")
            episode.end("llm_error", "server said 500")
            assert (
                episode.trajectory().stop_reason == "llm_error"
                and episode.trajectory().error == "server said 500"
            )


async def test_a_sandbox_that_cannot_be_made_is_one_env_error_trajectory() -> None:
    def broken(task: Task) -> Any:
        raise OSError("no room for a workspace")

    env = DataEnv(EnvConfig(), sandboxes=broken)
    with pytest.raises(OSError, match="no room"):
        await env.reset(_task())
    traj = env.failed_trajectory(_task(), OSError("no room for a workspace"), sample=3, seed=4, model="m")
    assert traj.stop_reason == "env_error" and traj.error == "OSError: no room for a workspace"
    assert traj.sample == 3 and traj.provenance.seed == 4 and traj.provenance.config_hash


async def test_the_environment_owns_a_real_sandbox_pool() -> None:
    """No factory: the environment makes a pool from the sandbox settings, runs real code in it, keeps
    state across turns of one episode, and closes the pool."""
    from datadojo.sandbox import SandboxConfig

    sandbox = SandboxConfig(isolation="none", preload=())
    env = DataEnv(EnvConfig(profile_chars=0), sandbox_config=sandbox, pool_size=1)
    assert env.confinement == "none"
    async with await env.reset(_task("sales.csv")) as episode:
        await episode.step("<code>n = len(open('sales.csv').read().splitlines()) - 1</code>")
        res = await episode.step("<code>print(n * 2)</code>")
        assert res.observation == "<interpreter>\n480\n</interpreter>"  # sales.csv: 240 rows
    await env.aclose()
    await env.aclose()
    assert DataEnv(sandboxes=runner_factory()).confinement is None

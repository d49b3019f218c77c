"""The ReAct loop's trajectories, pinned: every path of one turn, from scripted replies, against a hand-checked record.

Why: the per-turn logic moved from ``agent/loop.py`` into :meth:`datadojo.env.Episode.step` (issue 37), and
``run_agent`` became a driver over it. A refactor of that size must not change one byte of what a trajectory
records (trainers tokenize ``raw``, reports count stop reasons, resumable runs hash the settings). This file
ran against the loop *before* the move and writes, per scenario, the trajectory's ``to_dict`` and every
request the model saw; ``data/loop_regression.json`` holds that record, read through by hand (the assertions
below state what each scenario must show, independently of the file). Only what the wall clock or the
machine decides is normalized: the timings, the creation time, ``argv`` and the interpreter version.

The model is an in-process scripted :class:`ChatBackend` (token counts from the approximate counter, so the
context check is deterministic) and the sandbox a scripted code runner (so observations do not depend on
pandas' formatting): the loop's own behaviour is what is pinned.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from datadojo.agent import AgentConfig, run_agent
from datadojo.llm.base import LLMError, SamplingParams, approx_message_tokens
from datadojo.sandbox.seeding import trajectory_seed
from datadojo.testing.env import ScriptedChat, ScriptedRunner
from datadojo.types import DataFile, Task

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "data"
RECORD = Path(__file__).parent / "data" / "loop_regression.json"


def _task() -> Task:
    return Task(
        id="reg",
        question="How many customers bought something?",
        files=[DataFile.from_path(EXAMPLES / "sales.csv"), DataFile.from_path(EXAMPLES / "shop.sqlite")],
    )


def _cfg(**kw: Any) -> AgentConfig:
    return AgentConfig(profile_chars=0, **kw)


#: name → (config, replies, runner failure, context window, seed, sample)
SCENARIOS: dict[str, tuple[AgentConfig, list[Any], str | None, int | None, int | None, int]] = {
    "code_sql_malformed_answer": (
        _cfg(),
        [
            # cut by the server at the stop string </code> (named): the loop re-appends it
            ("<think>Load.</think>\n<code>\nimport pandas as pd\nprint(1)\n", "stop", "</code>"),
            # a hosted API: stop matched but not named; the open block is closed by inference
            (
                "<think>Ask the db.</think>\n<code>\n```sql\nSELECT COUNT(*) FROM customers\n```\n",
                "stop",
                None,
            ),
            "I am not sure what to do.",  # malformed: no action
            "<think>Done.</think>\n<answer>60</answer>",
        ],
        None,
        None,
        7,
        2,
    ),
    "cut_by_length_then_answer": (
        _cfg(sampling=SamplingParams(max_tokens=64)),
        [("<think>Go.</think><code>print(1", "length", None), "<think>ok</think><answer>1</answer>"],
        None,
        None,
        None,
        0,
    ),
    "max_turns_reserve_final": (
        _cfg(max_turns=3, reserve_final_turn=True),
        [
            "<think>a</think><code>x = 1</code>",
            "<think>b</think><code>raise ValueError('no')</code>",
            "<think>c</think><code>print(x)</code>",
        ],
        None,
        None,
        None,
        0,
    ),
    "invalid_in_a_row": (
        _cfg(max_invalid_turns=2),
        ["<think>only thinking</think>", "<code>print(1)</code><code>print(2)</code>"],
        None,
        None,
        None,
        0,
    ),
    "env_failure": (
        _cfg(),
        ["<think>t</think><code>boom()</code>"],
        "boom",
        None,
        None,
        0,
    ),
    "context_limit": (
        _cfg(sampling=SamplingParams(max_tokens=20)),
        ["<think>t</think><code>" + "print(1234567890)\n" * 10 + "</code>"],
        None,
        "WINDOW",  # set below: the first request fits, the second does not
        None,
        0,
    ),
    "llm_error": (
        _cfg(),
        ["<think>t</think><code>print(2)</code>", LLMError("server said 500", retryable=True)],
        None,
        None,
        3,
        1,
    ),
}


def _normalize(data: Any) -> Any:
    """Zero what the machine decides (timings, creation time, argv, interpreter version)."""
    data = json.loads(json.dumps(data))
    for turn in data["turns"]:
        turn["timings"] = {"llm_s": 0.0, "exec_s": 0.0}
    prov = data["provenance"]
    prov["created"] = 0.0
    prov["argv"] = []
    prov["versions"] = {}
    return data


async def _run(name: str) -> dict[str, Any]:
    cfg, replies, fail_on, window, seed, sample = SCENARIOS[name]
    task = _task()
    if window == "WINDOW":
        from datadojo.env.prompts import episode_prompt

        opening = episode_prompt(task, cfg)
        window = approx_message_tokens(opening) + 20 + 5  # room for the first request only
    backend = ScriptedChat(replies, context_window=window)
    runner = ScriptedRunner(fail_on)
    traj = await run_agent(task, backend, runner, cfg, sample=sample, seed=seed)
    return {
        "trajectory": _normalize(traj.to_dict()),
        "requests": backend.requests,
        "runner_calls": [list(c) for c in runner.calls],
        "runner_seeds": runner.seeds,
        "unused_replies": len(backend.replies),
    }


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_trajectory_matches_the_record(name: str) -> None:
    got = await _run(name)
    if os.environ.get("DATADOJO_WRITE_LOOP_RECORD"):  # how the record was made, once, on the old loop
        record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
        record[name] = got
        RECORD.parent.mkdir(exist_ok=True)
        RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    want = json.loads(RECORD.read_text())[name]
    assert got == want


# --- what the record says, stated by hand ------------------------------------------------------------------


def _record(name: str) -> dict[str, Any]:
    return json.loads(RECORD.read_text())[name]


def test_record_code_sql_malformed_answer() -> None:
    rec = _record("code_sql_malformed_answer")
    traj, reqs = rec["trajectory"], rec["requests"]
    assert [t["action"]["kind"] for t in traj["turns"]] == ["code", "sql", "invalid", "answer"]
    assert traj["stop_reason"] == "answer" and traj["final_answer"] == "60" and traj["error"] is None
    # the stop-cut closing tag is re-appended, named or inferred
    assert traj["turns"][0]["raw"].endswith("</code>") and traj["turns"][1]["raw"].endswith("</code>")
    # SQL ran against the task's one database; Python with no database
    assert rec["runner_calls"] == [
        ["import pandas as pd\nprint(1)", "python", None],
        ["SELECT COUNT(*) FROM customers", "sql", "shop.sqlite"],
    ]
    # the sandbox was reseeded with the trajectory's seed, recorded in the provenance
    assert rec["runner_seeds"] == [trajectory_seed("reg", 2, 7)] == [traj["provenance"]["sandbox_seed"]]
    assert traj["provenance"]["seed"] == 7 and traj["sample"] == 2
    assert [r["seed"] for r in reqs] == [7, 8, 9, 10]  # seed + turn index
    # each request = opening (2) + 2 messages per earlier turn; the malformed turn got a corrective message
    assert [len(r["messages"]) for r in reqs] == [2, 4, 6, 8]
    assert reqs[3]["messages"][-1]["role"] == "user" and "<interpreter>" in reqs[3]["messages"][-1]["content"]
    assert traj["turns"][2]["observation"]["status"] == "feedback" and traj["turns"][2]["void"]
    assert reqs[0]["stop"] == traj["sampling"]["stop"] and "</code>" in reqs[0]["stop"]


def test_record_cut_by_length() -> None:
    traj = _record("cut_by_length_then_answer")["trajectory"]
    first = traj["turns"][0]
    assert first["action"]["kind"] == "invalid" and first["raw"] == "<think>Go.</think><code>print(1"
    assert first["observation"]["text"].startswith("Your reply was cut off by the token limit")
    assert traj["stop_reason"] == "answer" and traj["final_answer"] == "1"


def test_record_max_turns_with_final_turn_note() -> None:
    rec = _record("max_turns_reserve_final")
    traj, reqs = rec["trajectory"], rec["requests"]
    assert traj["stop_reason"] == "max_turns" and len(traj["turns"]) == 3 and traj["final_answer"] is None
    assert reqs[2]["messages"][-1]["content"].endswith(
        "\nThis is your last turn: give your final answer now in <answer>…</answer>."
    )
    assert "last turn" not in reqs[1]["messages"][-1]["content"]
    assert traj["turns"][1]["observation"]["status"] == "error"  # a code error is an observation, not an end


def test_record_invalid_in_a_row() -> None:
    traj = _record("invalid_in_a_row")["trajectory"]
    assert traj["stop_reason"] == "invalid" and len(traj["turns"]) == 2
    assert traj["error"].startswith("2 malformed turns in a row; last: ")


def test_record_env_failure() -> None:
    traj = _record("env_failure")["trajectory"]
    assert traj["stop_reason"] == "env_error"
    assert traj["error"] == "Environment failure: RuntimeError: worker vanished"
    assert traj["turns"][0]["observation"]["status"] == "env_error"


def test_record_context_limit() -> None:
    rec = _record("context_limit")
    traj = rec["trajectory"]
    assert traj["stop_reason"] == "context_limit" and len(traj["turns"]) == 1 and len(rec["requests"]) == 1
    assert "exceeds the context window of" in traj["error"]


def test_record_llm_error() -> None:
    rec = _record("llm_error")
    traj = rec["trajectory"]
    assert traj["stop_reason"] == "llm_error" and traj["error"] == "server said 500"
    assert len(traj["turns"]) == 1 and [r["seed"] for r in rec["requests"]] == [3, 4]

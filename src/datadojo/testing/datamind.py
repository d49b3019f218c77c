"""An adversarial scripted teacher and judge for DataMind synthesis (loopback ``ScriptedLLMServer`` scripts).

What a real teacher produces and a fake written beside the code does not: N samples of one question whose
answers differ *only* in a sign, a decimal point (scale), a percent sign, an entity name or an identifier with
digits — so a normalizer that drops any of them calls different answers consistent — and N samples that agree
on the answer but take different paths (turn counts), so a pre-check that picks the "best" itself (fewest
turns) is not the judge's choice. The judge double reads the answers as a careful judge would: the
adversarial groups are inconsistent; the agreeing group is consistent and its best is the *longest*
attempt (the one that checks its result), never the fewest-turns one.

Each question carries a scenario tag ``[s:NAME]`` (:data:`SCENARIOS`); :func:`query_task` makes such a query
for a file. The sample number is recovered from the per-turn seed the agent runner sends
(``seed = sample * 1009 + turn`` with ``DataMindConfig.seed = 0``).

Usage::

    with ScriptedLLMServer(teacher) as ts, ScriptedLLMServer(judge) as js: ...
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = [
    "ADVERSARIAL",
    "AGREEING",
    "SCENARIOS",
    "agent_reply",
    "judge",
    "query_task",
    "teacher",
]

#: Scenario → the final answers of samples 0, 1, 2 (sample k ≥ 3 repeats k mod 3).
SCENARIOS: dict[str, tuple[str, str, str]] = {
    "sign": ("-5", "5", "5"),
    "scale": ("1.5", "15", "1.5"),
    "percent": ("12.5%", "125%", "12.5%"),
    "percent_bare": ("5%", "5", "5"),
    "exponent": ("3.14e-2", "3.14e2", "3.14e-2"),
    "correlation_sign": (
        "-0.8 (strong negative correlation)",
        "0.8 (strong positive correlation)",
        "-0.8 (strong negative correlation)",
    ),
    "entity": (
        "Q1 has the highest sales: 50.2",
        "Q3 has the highest sales: 50.2",
        "Q1 has the highest sales: 50.2",
    ),
    "identifier": (
        "Store_12 ranks first with 830",
        "Store_7 ranks first with 830",
        "Store_12 ranks first with 830",
    ),
    # same answer, different paths: sample 0 runs 3 cells (and checks its result), 1 runs 1, 2 runs 2
    "paths": ("42", "42", "42"),
    # identical trajectories: nothing to choose, the rule may pick without a request
    "identical": ("42", "42", "42"),
}
#: Scenarios whose answers differ (a careful judge finds them inconsistent).
ADVERSARIAL: tuple[str, ...] = tuple(s for s in SCENARIOS if s not in ("paths", "identical"))
#: Scenarios whose answers agree.
AGREEING: tuple[str, ...] = ("paths", "identical")
#: Code cells per sample in the ``paths`` scenario.
_PATH_CELLS = (3, 1, 2)


def _user(req: dict[str, Any]) -> str:
    return next(m["content"] for m in req["messages"] if m["role"] == "user")


def _scenario(text: str) -> str:
    m = re.search(r"\[s:(\w+)\]", text)
    if m is None or m.group(1) not in SCENARIOS:
        raise AssertionError(f"no known scenario tag [s:NAME] in {text[:120]!r}")
    return m.group(1)


def agent_reply(req: dict[str, Any]) -> str:
    """One agent turn: code cells first (as many as the scenario's path takes), then the final answer."""
    scenario = _scenario(_user(req))
    sample = int(req.get("seed") or 0) // 1009
    done = sum(1 for m in req["messages"] if m["role"] == "assistant")
    cells = _PATH_CELLS[sample % 3] if scenario == "paths" else 1
    if done < cells:
        code = f"print(df['v'].sum())  # step {done + 1}" if scenario == "paths" else "print(df['v'].sum())"
        if scenario == "paths" and sample % 3 == 0 and done == cells - 1:
            code = "assert df['v'].notna().all(); print(df['v'].sum())  # check the result"
        return f"<think>Compute it from the data.</think><code>{code}</code>"
    answer = SCENARIOS[scenario][sample % 3]
    return f"<think>The output gives the answer.</think><answer>{answer}</answer>"


def teacher(req: dict[str, Any]) -> str:
    """The teacher's script (agent episodes only; queries are written with :func:`query_task`)."""
    return agent_reply(req)


def judge(req: dict[str, Any]) -> str:
    """A careful judge: differing answers are inconsistent; of agreeing ones the checked (longest) attempt wins."""
    user = _user(req)
    scenario = _scenario(user)
    if scenario in ADVERSARIAL:
        return json.dumps(
            {
                "critique": f"The attempts disagree ({scenario}): "
                + " vs ".join(dict.fromkeys(SCENARIOS[scenario])),
                "consistent": False,
                "best": None,
            }
        )
    return json.dumps(
        {
            "critique": "All attempts give 42; attempt 1 also checks the column before summing.",
            "consistent": True,
            "best": 1,
        }
    )


def query_task(path: str | Path, scenario: str) -> Any:  # Task; typed loosely: nothing imported at load
    """A DataMind query :class:`~datadojo.types.Task` over the CSV at ``path`` tagged with ``scenario``."""
    from datadojo.corpus import ScanConfig
    from datadojo.corpus.scan import scan_file
    from datadojo.synth.datamind.queries import FileEntry, make_task
    from datadojo.synth.datamind.taxonomy import load_taxonomy

    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r} (one of {', '.join(SCENARIOS)})")
    category = load_taxonomy(None).get("Aggregation")
    entry = FileEntry(scan_file(Path(path).resolve(), ScanConfig()))
    return make_task(entry, category, f"[s:{scenario}] What is the total of v?", ["v"])

"""A scripted stand-in for the policy and the judges of ``synth sailor``, for tests and benchmarks.

Serve it with :class:`datadojo.testing.server.ScriptedLLMServer` (``ScriptedLLMServer(FakeSailor())``).

It answers by what the request asks for: the JSON Schema name in ``response_format`` (StrategyPlan, Probe,
PreJudgement, PostJudgement, StepVerdict, FinalCheck, QAPair) or, for plain completions, the final-answer
and merge prompts. Each behaviour is a hook a test can replace to exercise one rule.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from datadojo.testing.server import Hang, Reply

__all__ = ["PROBES", "FakeSailor", "schema_name"]

PROBES = {
    "repository_inspection": "import os\nfor root, dirs, files in sorted(os.walk('.', followlinks=True)):\n    print(root, sorted(files))",
    "schema_inspection": (
        "import glob\nimport pandas as pd\nfor p in sorted(glob.glob('**/*.csv', recursive=True))[:3]:\n"
        "    df = pd.read_csv(p)\n    print(p, df.shape, list(df.columns)[:8])"
    ),
    "statistics": (
        "import glob\nimport pandas as pd\nfor p in sorted(glob.glob('**/*.csv', recursive=True))[:2]:\n"
        "    print(p)\n    print(pd.read_csv(p).describe().round(2).to_string()[:600])"
    ),
    "content_inspection": (
        "import glob\nfor p in sorted(glob.glob('**/README*', recursive=True))[:2]:\n    print(p)\n"
        "    print(open(p).read()[:400])"
    ),
}


def schema_name(req: dict[str, Any]) -> str:
    rf = req.get("response_format") or {}
    if rf.get("type") == "json_schema":
        return rf["json_schema"]["name"]
    text = " ".join(str(m.get("content", "")) for m in req["messages"])
    if "exploration budget is spent" in text:
        return "final"
    if "reference answers for meta-information" in text:
        return "merge"
    return "unknown"


class FakeSailor:
    """Callable script: ``(request_json) -> reply``; counts calls per kind in ``self.calls``."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.strategies: list[tuple[str, float]] = [
            ("repository_inspection", 0.9),
            ("schema_inspection", 0.7),
            ("statistics", 0.6),
            ("visualization", 0.1),
        ]
        self.pre: Callable[[int, int], float] = lambda i, n: [0.9, 0.8, 0.7, 0.6][i % 4]
        self.post: Callable[[str], float] = lambda obs: 0.8
        self.verdict: Callable[[str, int], dict[str, Any] | str] = lambda prompt, attempt: {
            "action": "supported",
            "grounding": "supported",
            "affects_later": False,
            "ambiguity": "none",
            "reason": "follows",
        }
        self.qa_check = "supported"
        self.plan_logprobs: Any = None
        self.hang_after: int | None = None  # hang (never answer) every request after this many
        self.requests = 0

    def __call__(self, req: dict[str, Any]) -> Any:
        with self.lock:
            self.requests += 1
            if self.hang_after is not None and self.requests > self.hang_after:
                return Hang(600.0)
            kind = schema_name(req)
            self.calls[kind] += 1
            count = self.calls[kind]
        msgs = req["messages"]
        last = msgs[-1]["content"]
        steps = sum(1 for m in msgs if m["role"] == "assistant" and "<python>" in m["content"])
        if kind == "StrategyPlan":
            body = {
                "strategies": [
                    {"strategy": s, "rationale": f"{s} next", "score": sc} for s, sc in self.strategies
                ]
            }
            return Reply(json.dumps(body), logprobs=self.plan_logprobs)
        if kind == "Probe":
            strategy = re.search(r'strategy "([a-z_]+)"', last).group(1)  # type: ignore[union-attr]
            code = PROBES.get(strategy, f"print({strategy!r}, 'probe')") + f"\nprint('step', {steps + 1})"
            return json.dumps({"thought": f"After {steps} steps, use {strategy}.", "code": code})
        if kind == "PreJudgement":
            n = len(re.findall(r"\[Candidate \d+\]", last))
            return json.dumps({"scores": [{"id": i, "score": self.pre(i, n)} for i in range(n)]})
        if kind == "PostJudgement":
            return json.dumps({"score": self.post(last), "reason": "evidence"})
        if kind == "StepVerdict":
            prompt = next(m["content"] for m in msgs if m["role"] == "user")  # the repair turn comes later
            v = self.verdict(prompt, count)
            return v if isinstance(v, str) else json.dumps(v)
        if kind == "FinalCheck":
            return json.dumps({"label": self.qa_check, "reason": "checked"})
        if kind == "QAPair":
            return json.dumps(
                {
                    "evidence": ["penguins.csv (5, 3)"],
                    "evidence_step": 1,
                    "question": f"How many rows does the table have? ({count})",
                    "answer": "5",
                }
            )
        if kind == "final":
            return "<think>I have seen the files.</think>\n<answer>The folder holds a CSV table with 5 rows.</answer>"
        if kind == "merge":
            return "Merged reference: a CSV table with 5 rows."
        raise AssertionError(f"unexpected request: {kind}")

"""Cost of scoring SciDataSailor QA answers: the scientific matcher vs DataMind's matcher vs the LLM judge.

Usage::

    python benchmarks/scidata_qa.py [--items 2000] [--judge-items 200] [--latency-ms 0]

Builds ``--items`` deterministic (reference, prediction) pairs in the shapes of SciDataSailor-Bench-QA
answers (a value with a unit restated in another unit, a wrong unit, a categorical value with a number,
two counts in a sentence, a percentage as a fraction) and prints, measured in this run:

* items per second of :func:`datadojo.reward.match_scientific` (``qa_scoring=rule``) and of the
  DataMind matcher :func:`datadojo.reward.match_answer` on the same pairs (the baseline), and the ratio;
* the share of pairs each rule gets right against the known truth of the generated pair (the DataMind
  matcher does not convert units, so restated units and wrong units are where they differ);
* items per second of :class:`datadojo.reward.LLMJudge` with structured output over the loopback server
  (a scripted verdict after ``--latency-ms``), on ``--judge-items`` pairs: what ``qa_scoring=judge``
  costs before any model time, and its ratio to the rule.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time

from datadojo.compare.judge import JudgeItem
from datadojo.llm import load_backend
from datadojo.reward import LLMJudge, match_answer, match_scientific
from datadojo.testing.server import Reply, ScriptedLLMServer


def _pairs(n: int, seed: int = 0) -> list[tuple[str, str, bool]]:
    """``(reference, prediction, truly_correct)`` in five shapes, cycling."""
    rng = random.Random(seed)
    out: list[tuple[str, str, bool]] = []
    for i in range(n):
        v = round(rng.uniform(0.5, 500.0), 2)
        shape = i % 5
        if shape == 0:
            out.append((f"{v} mg/L", f"The mean concentration is {v * 1000:.6g} µg/L.", True))
        elif shape == 1:
            out.append((f"{v} mg/L", f"The mean concentration is {v} g/L.", False))
        elif shape == 2:
            site = rng.choice(["meadow", "forest", "wetland"])
            other = "forest" if site != "forest" else "meadow"
            right = rng.random() < 0.5
            out.append(
                (f"{site}, {v} °C", f"{site if right else other} is warmest at {v + 273.15:.6g} K", right)
            )
        elif shape == 3:
            a, b = rng.randint(2, 90), rng.randint(100, 900)
            out.append(
                (
                    f"{a} sequences of {b} bases each",
                    f"The file holds {a} sequences, each {b} bases long.",
                    True,
                )
            )
        else:
            out.append((f"{v / 5:.4g}%", f"{v / 500:.6g}", True))
    return out


def _rate(fn, pairs) -> tuple[float, float]:
    t0 = time.perf_counter()
    hits = sum(bool(fn(p, r)) == truth for r, p, truth in pairs)
    return len(pairs) / (time.perf_counter() - t0), hits / len(pairs)


async def _judge_rate(pairs, latency_s: float) -> float:
    reply = json.dumps({"score": 1, "reason": "same quantity"})
    with ScriptedLLMServer(lambda req: Reply(reply, delay=latency_s)) as srv:
        backend = load_backend(f"openai:judge@{srv.base_url}?max_retries=0")
        judge = LLMJudge(backend, rubric="sailor_qa")
        items = [JudgeItem("What is the mean?", r, p) for r, p, _ in pairs]
        t0 = time.perf_counter()
        await judge.judge_many(items, concurrency=8)
        dt = time.perf_counter() - t0
        await backend.aclose()
    return len(pairs) / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--judge-items", type=int, default=200)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    args = ap.parse_args()
    pairs = _pairs(args.items)
    sci_rate, sci_acc = _rate(match_scientific, pairs)
    dm_rate, dm_acc = _rate(lambda p, r: match_answer(p, r), pairs)
    judge_rate = asyncio.run(_judge_rate(pairs[: args.judge_items], args.latency_ms / 1000))
    print(f"pairs: {len(pairs)} (judge: {min(args.judge_items, len(pairs))}, latency {args.latency_ms:g} ms)")
    print(f"{'scorer':<34}{'items/s':>12}{'right vs truth':>16}")
    print(f"{'match_scientific (qa_scoring=rule)':<34}{sci_rate:>12.0f}{sci_acc:>16.1%}")
    print(f"{'match_answer (DataMind, baseline)':<34}{dm_rate:>12.0f}{dm_acc:>16.1%}")
    print(f"{'LLMJudge structured, loopback':<34}{judge_rate:>12.0f}{'(scripted)':>16}")
    print(f"ratio scientific / DataMind matcher: {sci_rate / dm_rate:.2f}x")
    print(f"ratio scientific / loopback judge:   {sci_rate / judge_rate:.1f}x")


if __name__ == "__main__":
    main()

"""Stage 8: curation into SFT sets — DataMind Figure 4's four strategies — after the rule filters.

For each query the *consistent group* is the N trajectories of the first round whose verdict is consistent
(round 0, or the reflection round that rescued it). Rule filters (:mod:`.filters`) run on every trajectory
first; only those that pass can be kept. Then, per query:

* ``con-select`` — the judge's best trajectory of the consistent group (dropped if it failed a filter: the
  paper filters after selecting). The judge is asked for it whenever the N consistent trajectories differ
  (:mod:`.consistency`; ``rule_best = True`` keeps the pre-check's fewest-turns pick instead);
* ``random-select`` — one trajectory of the consistent group that passed the filters, drawn with a generator
  seeded by (``seed``, strategy, query id);
* ``non-select`` — every trajectory of the consistent group that passed the filters;
* ``non-con`` — no consistency filter: every round-0 trajectory that passed the filters, consistent or not
  (``non_con = all``, the default: DataMind §5.4, "uses all trajectories including inconsistent ones"), or one
  seeded random one per query (``non_con = one``).

Each record says who chose it (``chosen_by``): ``judge`` or ``rule`` (con-select: the verdict's
``chosen_by``), ``random`` (random-select, non-con ``one``) or ``all`` (non-select, non-con ``all``).

SFT examples carry the plain prompt (``sft_prompt = plain``): :func:`.prompts.policy_prompt`, the prompt
evaluation and RL build for the query — without the workflow *k*, the reflection feedback and the category's
answer-form hint, which steer the teacher only. ``as_sampled`` keeps the prompt exactly as the teacher saw
it. Each set is written to ``sft/<strategy>.jsonl`` as records ``{"messages": [...], "task_id", "sample",
"round", "category", "difficulty", "strategy", "chosen_by"}`` (OpenAI messages with ``train`` masks,
:func:`datadojo.protocol.messages.trajectory_to_messages`) and, for ``datadojo export …`` / ``datadojo train sft
--data``, which read trajectories, as ``sft/<strategy>.trajectories.jsonl``.

``rl_tasks.jsonl`` holds one :class:`~datadojo.types.Task` per consistent query — DataMind's u = (q, f, d, a)
(§3.1) with *a* the final answer of the verdict's best trajectory — as :func:`.prompts.policy_task` gives it
(what the RL policy is prompted with), ``answer_kind`` ``None`` (the tolerant matcher infers it) and
``extra.reference`` ``{sample, round, chosen_by, method, answers}``: how the answer was chosen. ``datadojo
train rl --tasks OUT/rl_tasks.jsonl`` reads it. A best trajectory that failed a rule filter still gives the
answer (the filters judge the trajectory as SFT data, not the answer). Files are written to a temporary name
and renamed.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from datadojo.jsonl import write_jsonl_atomic
from datadojo.protocol.messages import trajectory_to_messages
from datadojo.runs import Rejection
from datadojo.synth.datamind.config import STRATEGIES, DataMindConfig
from datadojo.synth.datamind.consistency import ConsistencyVerdict, read_verdicts, trajectories_by_round
from datadojo.synth.datamind.errors import DataMindError
from datadojo.synth.datamind.filters import FILTERS, FilterResult, run_filters, token_counter
from datadojo.synth.datamind.prompts import policy_prompt, policy_task
from datadojo.synth.datamind.store import Paths
from datadojo.types import Task, Trajectory

__all__ = ["CurationResult", "chosen_by", "curate", "rl_task", "select"]


@dataclass
class CurationResult:
    """What curation kept and filtered."""

    filtered: int = 0
    passed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FILTERS, 0))
    rejected: Counter[str] = field(default_factory=Counter)
    kept: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STRATEGIES, 0))
    rl_tasks: int = 0
    chosen_by: Counter[str] = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {
            "filtered": self.filtered,
            "passed": dict(self.passed),
            "rejected_by_filter": dict(self.rejected),
            "kept": dict(self.kept),
            "rl_tasks": self.rl_tasks,
            "best_chosen_by": dict(self.chosen_by),
        }


def _rng(seed: int, strategy: str, task_id: str) -> random.Random:
    return random.Random(f"{seed}:{strategy}:{task_id}")


def select(
    strategy: str,
    query_id: str,
    verdict: ConsistencyVerdict | None,
    group: Sequence[Trajectory],
    round0: Sequence[Trajectory],
    ok: set[tuple[str, int]],
    seed: int,
    non_con: str = "all",
) -> list[Trajectory]:
    """The trajectories ``strategy`` keeps for one query (module docstring); ``ok`` = keys that passed the filters."""
    if strategy == "non-con":
        pool = [t for t in round0 if t.key in ok]
        if non_con == "all":
            return pool
        return [_rng(seed, strategy, query_id).choice(pool)] if pool else []
    if verdict is None or not verdict.consistent:
        return []
    pool = [t for t in group if t.key in ok]
    if strategy == "con-select":
        return [t for t in pool if t.sample == verdict.best][:1]
    if strategy == "random-select":
        return [_rng(seed, strategy, query_id).choice(pool)] if pool else []
    if strategy == "non-select":
        return pool
    raise DataMindError(f"unknown curation strategy {strategy!r} (one of {', '.join(STRATEGIES)})")


def chosen_by(strategy: str, verdict: ConsistencyVerdict | None, non_con: str) -> str:
    """Who picked the trajectories ``strategy`` keeps (module docstring)."""
    if strategy == "con-select":
        if verdict is None:
            return "rule"
        return verdict.chosen_by or ("judge" if verdict.method == "llm" else "rule")
    if strategy == "non-con":
        return "all" if non_con == "all" else "random"
    return "random" if strategy == "random-select" else "all"


def rl_task(query: Task, verdict: ConsistencyVerdict, group: Sequence[Trajectory]) -> Task | None:
    """The RL task of a consistent query: the policy's task with the best trajectory's answer (module docstring)."""
    best = next((t for t in group if t.sample == verdict.best), None)
    if best is None or best.final_answer is None or not best.final_answer.strip():
        return None
    reference = {
        "sample": best.sample,
        "round": verdict.round,
        "chosen_by": chosen_by("con-select", verdict, "all"),
        "method": verdict.method,
        "answers": list(verdict.answers),
    }
    task = policy_task(query)
    return task.model_copy(
        update={"answer": best.final_answer, "extra": {**task.extra, "reference": reference}}
    )


def _record(traj: Trajectory, task: Task, strategy: str, chooser: str) -> dict[str, Any]:
    return {
        "messages": trajectory_to_messages(traj),
        "task_id": traj.task_id,
        "sample": traj.sample,
        "round": int(traj.extra.get("round", 0)),
        "category": task.category,
        "difficulty": task.difficulty,
        "strategy": strategy,
        "chosen_by": chooser,
    }


def curate(
    queries: Sequence[Task], paths: Paths, config: DataMindConfig, strategies: Sequence[str] = STRATEGIES
) -> CurationResult:
    """Filter every trajectory, log rejections, and write the SFT set of each strategy (module docstring)."""
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        raise DataMindError(f"unknown curation strategy {unknown[0]!r} (one of {', '.join(STRATEGIES)})")
    by_id = {q.id: q for q in queries}
    groups = trajectories_by_round(paths)
    verdicts = read_verdicts(paths)
    count = token_counter(config.tokenizer)
    result = CurationResult()
    ok: set[tuple[str, int]] = set()
    with paths.rejections() as rejects:
        for (task_id, _round), trajs in sorted(groups.items()):
            if task_id not in by_id:
                continue
            for t in trajs:
                res: FilterResult = run_filters(t, by_id[task_id], config, count)
                result.filtered += 1
                for name in res.passed:
                    result.passed[name] += 1
                if res.ok:
                    ok.add(t.key)
                else:
                    result.rejected[str(res.failed)] += 1
                    rejects.add(
                        Rejection(
                            "filter", f"{t.task_id}:{t.sample}", str(res.failed), res.reason,
                            {"task_id": t.task_id, "sample": t.sample, "round": int(t.extra.get("round", 0))},
                        )
                    )  # fmt: skip
    rounds = sorted({r for _, r in verdicts} | {0})
    sets: dict[str, list[dict[str, Any]]] = {s: [] for s in strategies}
    trajs_out: dict[str, list[Trajectory]] = {s: [] for s in strategies}
    rl_out: list[Task] = []
    for q in queries:
        first = next(
            (verdicts[(q.id, r)] for r in rounds if (q.id, r) in verdicts and verdicts[(q.id, r)].consistent),
            None,
        )
        group = groups.get((q.id, first.round), []) if first else []
        round0 = groups.get((q.id, 0), [])
        if first is not None:
            task = rl_task(q, first, group)
            if task is not None:
                rl_out.append(task)
                result.chosen_by[task.extra["reference"]["chosen_by"]] += 1
        plain = policy_prompt(q, config) if config.sft_prompt == "plain" else None
        for s in strategies:
            chooser = chosen_by(s, first, config.non_con)
            for t in select(s, q.id, first, group, round0, ok, config.seed, config.non_con):
                if plain is not None:
                    t = t.model_copy(update={"prompt": [dict(m) for m in plain]})
                sets[s].append(_record(t, q, s, chooser))
                trajs_out[s].append(t)
    for s in strategies:
        write_jsonl_atomic(paths.sft / f"{s}.jsonl", sets[s])
        write_jsonl_atomic(paths.sft / f"{s}.trajectories.jsonl", trajs_out[s])
        result.kept[s] = len(sets[s])
    write_jsonl_atomic(paths.rl_tasks, rl_out)
    result.rl_tasks = len(rl_out)
    return result

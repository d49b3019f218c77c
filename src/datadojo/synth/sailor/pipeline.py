"""``synth sailor`` as a library call: every (folder, seed) unit explored, verified and written, resumably.

Output folder (see ``docs/sailor.md``)::

    tree.jsonl          node lines and "select" lines of every tree (auditable, drawable)
    trajectories.jsonl  verified trajectories (sailor dialect), the SFT data
    sft.jsonl           the same as OpenAI messages with ``train`` masks and each turn's strategy label
    qc.jsonl            one QC decision per candidate trajectory, with its reason
    qa.jsonl            QA-track tasks   } the SciDataSailor task format, read by
    meta.jsonl          Meta-track tasks } ``datadojo eval scidata --data DIR/qa.jsonl``
    rl_tasks.jsonl      the QA tasks with their reference answers, for ``datadojo train rl --tasks``
    units.jsonl         one line per finished unit (the resume log, a :class:`~datadojo.runs.WorkLedger`)
    run.json            the settings snapshot (:class:`~datadojo.runs.RunFolder`): a resume with another
                        search configuration is refused (:class:`~datadojo.errors.ResumeError`)
    usage.jsonl         LLM requests and tokens of each invocation (:class:`~datadojo.runs.UsageLedger`)
    funnel.json         candidate trajectories → kept by QC, removed per reason (:class:`~datadojo.runs.Funnel`)
    summary.json        config (λ = ``lam``, β = ``beta``, …) and counts: nodes, probes, kept/removed per
                        QC reason, per level
    report.html         the trees drawn, with QC outcomes

**Resume** is per unit. A unit's lines are appended only when the unit is finished, and its line in
``units.jsonl`` comes last; on start, lines of units without that line (a run killed mid-write) are removed by
rewriting the file atomically, and an unterminated tail is cut, so a rerun never duplicates a line, never
leaves a torn one and never leaves a temporary file. Only the driver writes; units run concurrently.

**Where units run**: through :mod:`datadojo.executor` (``executor``). The unit of work is one (folder, seed)
search — the tree, its sandbox, the final answers, QC and QA synthesis — run by a :class:`UnitWorker`
(:func:`explore_unit`), which returns the unit's lines as data. Locally the worker holds this process's
backends; on Ray (``--executor ray``) each node builds its own from the model spec strings
(:func:`unit_worker_spec`) and opens its own sandboxes, and the lines come back here, where
:func:`_write_unit` appends them and commits the unit, so resume and the ledgers are the same either way.
The dataset folders must be at the same path on every node (shared storage, ``docs/scaling.md``).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datadojo.agent.runner import model_name
from datadojo.bench.scidata import READERS_NOTE
from datadojo.config import ConfigError
from datadojo.corpus.inputs import require_data_files
from datadojo.errors import DataDojoError
from datadojo.executor import Executor, LocalExecutor, Worker, WorkerSpec, require_spec
from datadojo.fs import write_json_atomic
from datadojo.jsonl import JsonlAppender, iter_jsonl, repair_tail, write_jsonl_atomic
from datadojo.llm.base import ChatBackend
from datadojo.llm.structured import StructuredMode
from datadojo.protocol.messages import trajectory_to_messages
from datadojo.runs import Funnel, ProgressHook, RunFolder, UsageLedger, WorkLedger, null_progress
from datadojo.sandbox.config import SandboxConfig
from datadojo.synth.sailor.config import SailorConfig
from datadojo.synth.sailor.env import ProbeEnv, default_sandbox_config
from datadojo.synth.sailor.explore import Explorer, LLMCalls, SearchStats
from datadojo.synth.sailor.mcts import Tree
from datadojo.synth.sailor.prompts import policy_task
from datadojo.synth.sailor.qc import QCDecision, StepVerifier, execution_problem
from datadojo.synth.sailor.seeds import LEVELS, Seed, SeedError
from datadojo.synth.sailor.synthesis import (
    build_trajectory,
    choose_leaves,
    final_answer,
    folder_digest,
    merge_reference,
    meta_task,
    qa_task,
    synthesize_qa,
)

__all__ = [
    "OUTPUT_FILES",
    "NotAFolderError",
    "SailorRun",
    "UnitOutput",
    "UnitWorker",
    "clean_unfinished",
    "run_sailor",
    "unit_key",
    "unit_of",
    "unit_worker",
    "unit_worker_spec",
]

#: Output files holding per-unit lines (cleaned of unfinished units on resume).
OUTPUT_FILES: tuple[str, ...] = (
    "tree.jsonl",
    "trajectories.jsonl",
    "sft.jsonl",
    "qc.jsonl",
    "qa.jsonl",
    "meta.jsonl",
    "rl_tasks.jsonl",
)
UNITS_FILE = "units.jsonl"


def unit_key(folder: Path, digest: str, seed_id: str) -> str:
    """``<folder name>-<digest[:10]>-<seed id>``: names the unit in node ids (``unit/N``) and every line."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", folder.resolve().name) or "folder"
    return f"{name}-{digest[:10]}-{seed_id}"


def unit_of(filename: str, record: Any) -> str | None:
    """The unit a line of an output file belongs to (``None``: not a line this stage writes)."""
    if not isinstance(record, dict):
        return None
    if filename == "tree.jsonl":
        if record.get("type") == "select":
            node = record.get("node")
            return node.rsplit("/", 1)[0] if isinstance(node, str) else None
        return record.get("unit")
    if filename in ("qc.jsonl", "sft.jsonl"):
        return record.get("unit")
    extra = record.get("extra")
    return extra.get("unit") if isinstance(extra, dict) else None


def clean_unfinished(out: Path, finished: set[str]) -> dict[str, int]:
    """Remove lines of unfinished units (and unterminated tails) from the output files; return lines removed."""
    removed: dict[str, int] = {}
    repair_tail(out / UNITS_FILE)
    for name in OUTPUT_FILES:
        path = out / name
        if not path.exists():
            continue
        cut = repair_tail(path)
        keep = []
        total = 0
        for _, rec in iter_jsonl(path):
            total += 1
            if unit_of(name, rec) in finished:
                keep.append(rec)
        if len(keep) != total:
            write_jsonl_atomic(path, keep)
        if len(keep) != total or cut:
            removed[name] = total - len(keep)
    for stale in out.glob(".*.tmp"):  # a temp file left by a write_jsonl_atomic killed before its rename
        stale.unlink(missing_ok=True)
    return removed


class NotAFolderError(DataDojoError, NotADirectoryError):
    """A path given as a dataset folder is not a folder (a ``NotADirectoryError`` too, as it was before)."""


@dataclass
class UnitOutput:
    """Everything one unit writes, plus its ``units.jsonl`` record."""

    tree_lines: list[dict[str, Any]]
    trajectories: list[Any]
    qc_lines: list[dict[str, Any]]
    qa: list[Any]
    meta: list[Any]
    record: dict[str, Any]
    sft: list[dict[str, Any]] = field(default_factory=list)
    rl_tasks: list[Any] = field(default_factory=list)


@dataclass
class SailorRun:
    """What :func:`run_sailor` did in this invocation (the totals are in ``summary.json``)."""

    out: Path
    units_total: int
    units_skipped: int
    units_done: int = 0
    cleaned: dict[str, int] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0
    #: Where this invocation's units ran (``local`` / ``ray``) and the executor's per-node figures.
    executor: str = "local"
    nodes: list[dict[str, Any]] = field(default_factory=list)
    #: This invocation's LLM use (requests, tokens, failures), summed from the units' records: on a remote
    #: executor the requests are sent by the nodes' clients, so this is the only count of them here.
    usage: dict[str, int] = field(default_factory=dict)


async def explore_unit(
    folder: Path,
    digest: str,
    seed: Seed,
    *,
    policy: ChatBackend,
    judge: ChatBackend,
    config: SailorConfig,
    sandbox_config: SandboxConfig,
    mode: StructuredMode = "auto",
) -> UnitOutput:
    """Search, extract, verify and synthesize one (folder, seed) unit; nothing is written here."""
    started = time.monotonic()
    unit = unit_key(folder, digest, seed.id)
    stats = SearchStats()
    calls = LLMCalls(policy, judge, config, mode, stats)
    tree = Tree(
        unit,
        lam=config.lam,
        beta=config.beta,
        fpu_bonus=config.fpu_bonus,
        fpu_reduction=config.fpu_reduction,
        max_depth=config.max_depth,
        fpu_mode=config.fpu_mode,
        depth_term=config.depth_term,
    )
    # the policy sees the same "About the data" note (readers available in the sandbox) as `eval scidata`
    # gives it, so SFT trajectories and benchmark episodes start from the same prompt
    task = meta_task(folder, digest, seed, None, unit).model_copy(update={"description": READERS_NOTE})
    env = ProbeEnv(folder, sandbox_config, head=config.obs_head, tail=config.obs_tail)
    async with env:
        explorer = Explorer(calls, env, seed, tree, task)
        await explorer.search()
    search_requests = stats.requests
    leaves = choose_leaves(tree, config.trajectories_per_seed, config.min_depth)
    paths = [tree.path(leaf)[1:] for leaf in leaves]
    deep = [len(p) >= config.min_depth for p in paths]

    async def final_for(i: int) -> str:
        # a path QC will reject as too shallow costs no final-answer request
        return await final_answer(calls, explorer.base_messages, paths[i], seed) if deep[i] else ""

    finals = await asyncio.gather(*(final_for(i) for i in range(len(paths))))
    trajectories = [
        build_trajectory(
            task=task,
            sample=i,
            base=explorer.base_messages,
            nodes=p,
            final_raw=f,
            seed=seed,
            unit=unit,
            model=policy.model_id,
            config=config.to_dict(),
        )
        for i, (p, f) in enumerate(zip(paths, finals, strict=True))
    ]
    verifier = StepVerifier(calls, seed.intent, explorer.full_output)
    decisions: list[QCDecision | None] = []
    for traj, p, ok in zip(trajectories, paths, deep, strict=True):
        shallow = ("too_shallow", f"{len(p)} probe(s), min_depth is {config.min_depth}")
        problem = execution_problem(traj, p, config) if ok else shallow
        decisions.append(QCDecision(False, *problem) if problem else None)
    pending = [i for i, d in enumerate(decisions) if d is None]
    verified = await asyncio.gather(
        *(verifier.verify(f"{unit}#{i}", paths[i], trajectories[i].final_answer or "") for i in pending)
    )
    for i, d in zip(pending, verified, strict=True):
        decisions[i] = d
    kept = [i for i, d in enumerate(decisions) if d is not None and d.kept]

    async def qa_for(i: int) -> tuple[Any, dict[str, Any]]:
        nodes = paths[i]
        qa, why = await synthesize_qa(calls, nodes, seed, trajectories[i].final_answer or "")
        if qa is None:
            return None, {"kept": False, "reason": why}
        check = await verifier.check_qa(nodes, qa.question, qa.answer)
        if check is None:
            return None, {"kept": False, "reason": "qa_ambiguous: the QA check stayed invalid"}
        if check.label != "supported":
            return None, {
                "kept": False,
                "reason": f"qa_{check.label}: {check.reason}",
                "question": qa.question,
            }
        node_id = nodes[qa.evidence_step - 1].id
        return qa_task(folder, digest, seed, qa, node_id, unit), {"kept": True, "question": qa.question}

    qa_results = await asyncio.gather(*(qa_for(i) for i in kept))
    qa_by_index = dict(zip(kept, qa_results, strict=True))
    meta: list[Any] = []
    if kept:
        reference = await merge_reference(
            calls, folder.name, seed, [trajectories[i].final_answer or "" for i in kept]
        )
        meta.append(meta_task(folder, digest, seed, reference, unit, candidates=len(kept)))

    qc_lines = []
    for i, (traj, d) in enumerate(zip(trajectories, decisions, strict=True)):
        assert d is not None
        line = {
            "unit": unit,
            "folder": str(folder.resolve()),
            "seed_id": seed.id,
            "level": seed.level,
            "trajectory": f"{traj.task_id}#{traj.sample}",
            "leaf": paths[i][-1].id if paths[i] else None,
            "kept": d.kept,
            "reason": d.reason,
            "detail": d.detail,
            "steps": d.steps,
        }
        if i in qa_by_index:
            line["qa"] = qa_by_index[i][1]
        qc_lines.append(line)
    tree_lines = [
        tree.node_record(
            n, seed=seed.id, unit=unit, folder=str(folder.resolve()), excerpt_chars=config.excerpt_chars
        )
        for n in tree.nodes.values()
    ] + [s.to_dict() for s in tree.selections]
    qa_tasks = [t for t, _ in qa_results if t is not None]
    reasons = Counter(d.reason for d in decisions if d is not None)
    qa_dropped = Counter(info["reason"].split(":")[0] for _, info in qa_results if not info["kept"])
    record = {
        "unit": unit,
        "folder": str(folder.resolve()),
        "digest": digest,
        "seed_id": seed.id,
        "level": seed.level,
        "nodes": len(tree.nodes) - 1,
        "probes_run": stats.probes_run,
        "replays": env.replays,
        "search_requests": search_requests,
        "requests": stats.requests,
        "prompt_tokens": stats.prompt_tokens,
        "completion_tokens": stats.completion_tokens,
        "stop": stats.stop,
        "widths": stats.widths,
        "strategies_dropped": stats.strategies_dropped,
        "duplicates_merged": stats.duplicates_merged,
        "structured_failures": stats.structured_failures,
        "trajectories": len(trajectories),
        "kept": len(kept),
        "reasons": dict(reasons),
        "qa": len(qa_tasks),
        "qa_dropped": dict(qa_dropped),
        "meta": len(meta),
        "elapsed_s": time.monotonic() - started,
        "finished": time.time(),
    }
    kept_trajectories = [trajectories[i] for i in kept]
    return UnitOutput(
        tree_lines, kept_trajectories, qc_lines, qa_tasks, meta, record,
        sft=[sft_record(t) for t in kept_trajectories], rl_tasks=[rl_task(t) for t in qa_tasks],
    )  # fmt: skip


class UnitWorker:
    """Runs one unit per item ``(folder, digest, seed)`` with :func:`explore_unit`: the unit of work of
    :func:`run_sailor`, in this process or on a Ray node. ``closers`` are what the worker made itself."""

    def __init__(
        self,
        policy: ChatBackend,
        judge: ChatBackend,
        config: SailorConfig,
        sandbox_config: SandboxConfig,
        mode: StructuredMode = "auto",
        closers: tuple[Callable[[], Any], ...] = (),
    ) -> None:
        self.policy, self.judge = policy, judge
        self.config, self.sandbox_config, self.mode = config, sandbox_config, mode
        self._closers = closers

    async def run(self, item: tuple[str, str, Seed]) -> UnitOutput:
        folder, digest, seed = item
        return await explore_unit(
            Path(folder), digest, seed, policy=self.policy, judge=self.judge, config=self.config,
            sandbox_config=self.sandbox_config, mode=self.mode,
        )  # fmt: skip

    async def close(self) -> None:
        for close in self._closers:
            with contextlib.suppress(Exception):
                await close()


async def unit_worker(
    *,
    policy: str,
    judge: str | None,
    config: SailorConfig,
    sandbox_config: SandboxConfig,
    mode: StructuredMode = "auto",
) -> UnitWorker:
    """Build a :class:`UnitWorker` from picklable settings (what a Ray node calls): its own policy and judge
    clients from their model specs (one client when the judge is the policy)."""
    from datadojo.llm.spec import load_backend

    p = load_backend(policy)
    j = load_backend(judge) if judge and judge != policy else p
    closers = (p.aclose,) if j is p else (p.aclose, j.aclose)
    return UnitWorker(p, j, config, sandbox_config, mode, closers)


def unit_worker_spec(
    policy: str, judge: str | None, config: SailorConfig, sandbox_config: SandboxConfig, mode: StructuredMode
) -> WorkerSpec:
    """The :class:`~datadojo.executor.WorkerSpec` of a sailor unit: every node builds its clients from the
    spec strings and a sandbox per unit it explores."""
    return WorkerSpec(
        "datadojo.synth.sailor.pipeline:unit_worker",
        {"policy": policy, "judge": judge, "config": config, "sandbox_config": sandbox_config, "mode": mode},
        label="sailor unit",
    )


def sft_record(traj: Any) -> dict[str, Any]:
    """``sft.jsonl``: the trajectory as OpenAI messages (``train`` masks) with the strategy of each assistant
    turn — the recorded action types (§4.1, "intermediate action-type supervision"); the answer turn's is None."""
    strategies = list(traj.extra.get("strategies", []))
    return {
        "messages": trajectory_to_messages(traj),
        "task_id": traj.task_id,
        "sample": traj.sample,
        "unit": traj.extra.get("unit"),
        "seed_id": traj.extra.get("seed_id"),
        "level": traj.extra.get("level"),
        "strategies": strategies,
        "turn_strategies": [*strategies, None][: len(traj.turns)],
    }


def rl_task(task: Any) -> Any:
    """``rl_tasks.jsonl``: a QA task as evaluation and RL prompt it (:func:`.prompts.policy_task`) with how its
    reference answer was chosen: the supported answer of a verified trajectory, checked by the judge (§4.1)."""
    reference = {
        "chosen_by": "qa_synthesis",
        "check": "supported",
        "tree_node": task.extra.get("tree_node"),
        "evidence": task.extra.get("evidence", []),
    }
    t = policy_task(task)
    return t.model_copy(update={"extra": {**t.extra, "reference": reference}})


def _write_unit(out: Path, result: UnitOutput, ledger: WorkLedger) -> None:
    """Append a finished unit's lines, its ``units.jsonl`` line last (the commit point of the unit)."""
    for name, lines in (
        ("tree.jsonl", result.tree_lines),
        ("trajectories.jsonl", result.trajectories),
        ("qc.jsonl", result.qc_lines),
        ("qa.jsonl", result.qa),
        ("meta.jsonl", result.meta),
        ("sft.jsonl", result.sft),
        ("rl_tasks.jsonl", result.rl_tasks),
    ):
        with JsonlAppender(out / name) as fh:
            for line in lines:
                fh.write(line)
    ledger.commit(result.record["unit"], **result.record)


def summarize(
    records: Sequence[dict[str, Any]], config: SailorConfig, extra: dict[str, Any]
) -> dict[str, Any]:
    """``summary.json``: the config (λ, β, …) and totals over every finished unit, overall and per level."""
    keys = (
        "nodes",
        "probes_run",
        "requests",
        "prompt_tokens",
        "completion_tokens",
        "trajectories",
        "kept",
        "qa",
        "meta",
    )
    totals = {k: sum(int(r.get(k, 0)) for r in records) for k in keys}
    reasons: Counter[str] = Counter()
    qa_dropped: Counter[str] = Counter()
    per_level: dict[str, dict[str, Any]] = {}
    by_level: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        reasons.update(r.get("reasons", {}))
        qa_dropped.update(r.get("qa_dropped", {}))
        by_level[r["level"]].append(r)
    for level in LEVELS:
        rs = by_level.get(level, [])
        lr: Counter[str] = Counter()
        for r in rs:
            lr.update(r.get("reasons", {}))
        per_level[level] = {
            "units": len(rs),
            **{k: sum(int(r.get(k, 0)) for r in rs) for k in keys},
            "reasons": dict(lr),
        }
    return {
        "config": config.to_dict(),
        "units": len(records),
        **totals,
        "removed": {k: v for k, v in sorted(reasons.items()) if k != "kept"},
        "qa_dropped": dict(sorted(qa_dropped.items())),
        "per_level": per_level,
        "stops": dict(Counter(r.get("stop", "") for r in records)),
        **extra,
    }


async def run_sailor(
    folders: Sequence[str | Path],
    seeds: Sequence[Seed],
    *,
    policy: ChatBackend | str,
    judge: ChatBackend | str | None = None,
    out: str | Path,
    config: SailorConfig | None = None,
    sandbox_config: SandboxConfig | None = None,
    concurrency: int = 1,
    mode: StructuredMode = "auto",
    on_unit: Callable[[dict[str, Any]], None] | None = None,
    progress: ProgressHook | None = None,
    report: bool = True,
    executor: Executor | None = None,
) -> SailorRun:
    """Explore every folder with every seed (``concurrency`` units at a time), resuming finished units.

    ``policy`` / ``judge``: backends, or model spec strings (loaded here and closed at the end). ``executor``:
    where the units run (default: this process). A remote one (Ray) needs both as spec strings (else an
    :class:`~datadojo.executor.ExecutorError`, exit 2): each node builds its own clients and sandboxes,
    at most the executor's in-flight bound of units per node, and this process writes every line.

    ``progress`` is the run kit's hook (``("units", done, total)``); ``on_unit`` gets each finished unit's
    record (the CLI prints it). After the summary, the run kit's failure policy
    (:class:`~datadojo.runs.FailurePolicy`) is applied to the invocation's structured-call failures: a run
    whose replies mostly failed ends with :class:`~datadojo.runs.TooManyFailures` (exit 3).
    """
    cfg = config or SailorConfig()
    judge = judge or policy
    remote = executor is not None and executor.remote
    if remote:  # refuse objects that cannot travel before anything is read or written
        assert executor is not None
        require_spec(policy, executor, "policy")
        require_spec(judge, executor, "judge")
    if concurrency < 1:
        raise ConfigError(f"concurrency must be >= 1, got {concurrency}")
    if not seeds:
        raise SeedError("no seeds to explore with")
    paths = [Path(f) for f in folders]
    for p in paths:
        if not p.is_dir():
            raise NotAFolderError(f"{p}: not a dataset folder")
    require_data_files(paths)  # an empty folder: refuse before any request (issue 25)
    sandbox_config = sandbox_config or default_sandbox_config(cfg.exec_timeout_s)
    out_dir = Path(out)
    # adopt: folders written before the run kit have units.jsonl but no run.json, and resume as before
    RunFolder(out_dir, "sailor", {"config": cfg.to_dict(), "structured_mode": mode}, adopt=True)
    started = time.monotonic()
    # a units.jsonl written before the run kit has "unit" and no "key": its units stay done
    ledger = WorkLedger(out_dir / UNITS_FILE, fsync=True, key_of=lambda r: r.get("key") or r.get("unit"))
    finished: dict[str, dict[str, Any]] = {k: ledger.get(k) or {} for k in ledger}
    cleaned = clean_unfinished(out_dir, set(finished))
    digests = {p: await asyncio.to_thread(folder_digest, p) for p in paths}
    todo = [(p, s) for p in paths for s in seeds if unit_key(p, digests[p], s.id) not in finished]
    run = SailorRun(out_dir, len(paths) * len(seeds), len(paths) * len(seeds) - len(todo), cleaned=cleaned)
    hook = progress or null_progress
    hook("units", run.units_skipped, run.units_total)
    invocation: list[dict[str, Any]] = []
    # counted per unit as it is written, so that an interrupted run's requests stay in usage.jsonl
    usage = UsageLedger(out_dir / "usage.jsonl", "sailor")
    executor = executor or LocalExecutor(max_in_flight=concurrency)
    run.executor = executor.name
    before = executor.snapshot()  # a recipe's executor serves several stages: count this run's units
    closers: list[Callable[[], Any]] = []
    worker: WorkerSpec | Worker
    if remote:
        assert isinstance(policy, str) and isinstance(judge, str)
        worker = unit_worker_spec(policy, judge, cfg, sandbox_config, mode)
    else:
        from datadojo.llm.spec import load_backend

        local_policy = load_backend(policy) if isinstance(policy, str) else policy
        if isinstance(policy, str):
            closers.append(local_policy.aclose)
        if judge is policy or judge == policy:
            local_judge = local_policy
        else:
            local_judge = load_backend(judge) if isinstance(judge, str) else judge
            if isinstance(judge, str):
                closers.append(local_judge.aclose)
        worker = UnitWorker(local_policy, local_judge, cfg, sandbox_config, mode)
    items = [(str(p), digests[p], s) for p, s in todo]
    try:
        # one unit failed (model server down, sandbox broken) or the run was cancelled: closing the stream
        # cancels the others; the units already written stay committed and a rerun resumes after them
        stream = executor.map_unordered(worker, items)
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            async for outcome in stream:
                result: UnitOutput = outcome.result
                _write_unit(out_dir, result, ledger)
                finished[result.record["unit"]] = result.record
                invocation.append(result.record)
                usage.add("policy+judge", **_unit_usage([result.record]), check=False)
                run.units_done += 1
                hook("units", run.units_skipped + run.units_done, run.units_total)
                if on_unit is not None:
                    on_unit(result.record)
    except BaseException:
        usage.flush()  # interrupted or failed: the requests of the units written stay counted
        raise
    finally:
        ledger.close()
        run.nodes = [n.to_dict() for n in executor.node_stats_since(before)]
        for close in closers:
            with contextlib.suppress(Exception):
                await close()
    run.elapsed_s = time.monotonic() - started
    extra = {
        "folders": [str(p.resolve()) for p in paths],
        "seeds": [s.id for s in seeds],
        "models": {"policy": model_name(policy), "judge": model_name(judge)},
        "structured_mode": mode,
    }
    run.summary = summarize(list(finished.values()), cfg, extra)
    write_json_atomic(out_dir / "summary.json", run.summary)
    funnel = Funnel()
    funnel.add("qc", run.summary["trajectories"], run.summary["kept"], run.summary["removed"])
    funnel.write(out_dir / "funnel.json")
    run.usage = _unit_usage(invocation)
    usage.save()
    if report:
        from datadojo.synth.sailor.report import write_report

        write_report(out_dir)
    usage.check()
    return run


def _unit_usage(records: list[dict[str, Any]]) -> dict[str, int]:
    """LLM use summed over units' records, as :meth:`~datadojo.runs.UsageLedger.add` takes it."""
    return {
        "requests": sum(int(r.get("requests", 0)) for r in records),
        "prompt_tokens": sum(int(r.get("prompt_tokens", 0)) for r in records),
        "completion_tokens": sum(int(r.get("completion_tokens", 0)) for r in records),
        "repaired": sum(int(r.get("repaired", 0)) for r in records),
        "failed": sum(int(r.get("structured_failures", 0)) for r in records),
    }

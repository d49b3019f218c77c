"""The evaluation harness: a benchmark's tasks → n trials each through the agent runtime → scores → figures.

What ``datadojo eval`` runs (see ``docs/evaluation.md``):

1. **Tasks**: the benchmark's loader reads its files (``--data``); the benchmark's answer-format hint is
   added to every task (``extra["answer_format"]``, which the system prompt shows), and the turn budget,
   tool language and tag dialect default to the benchmark's (:class:`~datadojo.bench.base.BenchmarkDefaults`:
   DataMind's T = 10, §3.1).
2. **Trials**: :func:`datadojo.agent.run_rollouts` runs ``n_trials`` episodes of the environment (:mod:`datadojo.env`) per task (DataMind §5.1:
   three independent trials) with a model, or with the :mod:`~datadojo.eval.oracle` agent. Trajectories
   are appended to ``OUT/trajectories.jsonl`` as they finish; rerunning the same command skips the
   (task, trial) pairs already there, so an interrupted run resumes, and a larger ``-n`` or ``--limit``
   extends a finished one. ``OUT/eval.json`` records the settings that must not change between the runs
   that share a folder (benchmark, data, agent, model, turn budget, dialect, sampling).
3. **Scores**: every trajectory's prediction (:func:`predicted_answer`) is scored with the benchmark's
   official rule (:func:`datadojo.eval.scoring.score_predictions`, shared with ``datadojo score``) and
   rewarded by the reward registry (:func:`datadojo.reward.registry.score_pairs`: DataMind's reward with
   this benchmark's rule deciding r_answer; each row logs the total and every weighted part). Scores are
   derived data: ``OUT/scores.jsonl`` is rebuilt from all trajectories on every run.
   A benchmark scored by an LLM judge (:class:`~datadojo.bench.judged.JudgedBenchmark`, e.g.
   SciDataSailor's ``scidata``) first has every distinct prediction judged (``judge`` model spec,
   verdicts cached in ``OUT/judge_cache.jsonl`` so a rerun asks nothing twice), then scores with them.
4. **Figures** (:func:`datadojo.eval.metrics.summarize`): pass@1 as the mean over trials, the unbiased
   pass@k, the any-of-n figure DataMind reports as pass@3, success rate (finished with an answer within
   the turn budget), average turns and tokens, per category; plus the benchmark's official totals
   averaged over trials and the behavioural metrics of SciDataSailor Table 4
   (:mod:`datadojo.eval.behaviour`: code error rate, error chains, code structure, total tokens).
   Written to ``OUT/summary.json``; the HTML and Markdown reports follow (:mod:`datadojo.eval.report`).
5. **Data-blind audit** (``audit="data-blind"``, :mod:`datadojo.eval.audit`): the same items again with the
   data withheld (``data_blind``: empty workspaces, no profile or description in the prompt) in
   ``OUT/blind``, compared item by item into ``summary["audit"]`` before the reports are written.
6. **Submission**: a benchmark whose answers are withheld (DABstep's test split) gets its leaderboard
   file, ``OUT/<benchmark.submission_file>``, from each task's first trial (:mod:`datadojo.eval.submission`).

**Predicted SQL** (Spider, BIRD, Spider 2.0-lite): which SQL of an episode is scored — the one in the final
answer, else the last successful SQL action — is :func:`datadojo.reward.answers.predicted_answer`'s rule,
shared with the reward registry so that `eval` and every trainer read the same prediction.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from datadojo.agent import RolloutSummary, run_rollouts
from datadojo.bench import Benchmark, BenchmarkError, get_benchmark
from datadojo.bench.judged import JudgedBenchmark
from datadojo.config import Settings, field_help
from datadojo.env import AgentConfig, CodeRunner, default_sandboxes
from datadojo.errors import DataDojoError
from datadojo.eval.audit import AuditMode
from datadojo.eval.behaviour import behaviour_metrics
from datadojo.eval.scoring import Prediction, ScoreReport, score_predictions
from datadojo.executor import Executor
from datadojo.fs import write_json_atomic
from datadojo.jsonl import read_trajectories, write_jsonl_atomic
from datadojo.llm.base import ChatBackend, SamplingParams
from datadojo.llm.spec import model_identity
from datadojo.llm.structured import StructuredMode
from datadojo.reward.answers import predicted_answer
from datadojo.reward.registry import RewardSpec, score_pairs_sync
from datadojo.runs import RunFolder
from datadojo.runs.folder import RUN_FILE
from datadojo.sandbox.result import isolation_counts
from datadojo.types import Task, Trajectory
from datadojo.version import __version__

__all__ = [
    "EvalConfig",
    "EvalError",
    "EvalResult",
    "benchmark_env_config",
    "count_eval_tasks",
    "default_ks",
    "judge_run",
    "load_eval_tasks",
    "predicted_answer",
    "run_eval",
    "run_eval_sync",
    "score_run",
]

log = logging.getLogger(__name__)

AgentKind = Literal["model", "oracle"]
SandboxFactory = Callable[[Task], AbstractAsyncContextManager[CodeRunner]]

TRAJECTORIES = "trajectories.jsonl"
SCORES = "scores.jsonl"
SUMMARY = "summary.json"
RUN_RECORD = "eval.json"
#: Stop reasons that are the model server's failure, not the agent's (left out of the figures until rerun).
SERVER_FAILURE_STOPS: frozenset[str] = frozenset({"llm_error"})
JUDGE_CACHE = "judge_cache.jsonl"


class EvalError(DataDojoError, ValueError):
    """An evaluation cannot start or continue; the message says which setting, file or task is at fault."""


def default_ks(n_trials: int) -> tuple[int, ...]:
    """The k of pass@k to report for ``n_trials`` trials: 1, 3, 5, 10, … up to n, and n itself."""
    if n_trials < 1:
        raise ValueError(f"n_trials must be >= 1, got {n_trials}")
    return tuple(sorted({k for k in (1, 3, 5, 10, 20, 50, 100) if k <= n_trials} | {n_trials}))


class EvalConfig(Settings):
    """One evaluation run. ``None`` settings take the benchmark's defaults.

    ``n_trials`` defaults to DataMind's three trials (§5.1); ``sampling`` to the benchmark's
    (:class:`~datadojo.bench.base.BenchmarkDefaults`: DataMind's temperature 0.7, top-p 0.95, §5.1;
    SciDataSailor's 0.6 / 0.95). ``loader_options`` are passed to the benchmark's loader (``split``,
    ``lite``, ``track``, …). ``sandbox`` is a :class:`datadojo.sandbox.SandboxConfig`; by default the
    benchmark's (:meth:`~datadojo.bench.base.Benchmark.sandbox_config`). ``judge`` is the model spec of the
    LLM judge, required by judged benchmarks (``scidata``) and unused by the others; ``judge_structured``
    its structured-output mode (``auto``, ``json_schema``, ``json_object``, ``off``; see
    :mod:`datadojo.llm.structured`).
    """

    bench: str = Field(..., description="benchmark name (see datadojo bench list)")
    data: str | Path = Field(..., description="the benchmark's files: a file or folder")
    out: str | Path = Field(..., description="run folder (trials, scores, report; reused to resume)")
    model: str | None = Field(None, description="model spec of the agent (None: the agent needs none)")
    agent: AgentKind = Field(
        "model", description="who answers: model (an LLM), or oracle (gold SQL through the agent loop)"
    )
    n_trials: int = Field(3, description="trials per task (DataMind §5.1: 3)")
    limit: int | None = Field(None, description="only the first N tasks")
    concurrency: int = Field(8, description="episodes (and sandboxes) in flight")
    max_turns: int | None = Field(
        None,
        description="turn budget (default: the benchmark's; DataMind 10, scidata 12; SciDataSailor reports "
        "12 and 24)",
    )
    dialect: str | None = Field(None, description="tag protocol (default: the benchmark's)")
    sampling: SamplingParams | None = Field(
        None, description="temperature / top-p / max tokens (None: the benchmark's defaults)"
    )
    reserve_final_turn: bool = Field(False, description=field_help(AgentConfig, "reserve_final_turn"))
    loader_options: dict[str, Any] = Field(
        default_factory=dict, description="options of the benchmark's loader (split, lite, track, ...)"
    )
    ks: tuple[int, ...] | None = Field(None, description="the k of pass@k reported (None: 1 to n_trials)")
    seed: int | None = Field(None, description="base seed for reproducible sampling")
    sandbox: Any = Field(None, description="the SandboxConfig (None: the benchmark's)")
    report: bool = Field(True, description="write report.html and report.md")
    judge: str | None = Field(
        None,
        description="model spec of the LLM judge, for benchmarks scored by one (scidata: SciDataSailor "
        "App. B.2 rubrics); verdicts are cached in OUT/judge_cache.jsonl",
    )
    audit: AuditMode | None = Field(
        None,
        description="data-blind: after the run, run the same items again with the data files withheld "
        "(empty workspace, no file profile or description in the prompt) into OUT/blind, and report "
        "which items were answered without the data and the data-dependent score (docs/evaluation.md)",
    )
    data_blind: bool = Field(
        False,
        description="withhold the data in every episode: the blind half of --audit data-blind "
        "(datadojo.eval.audit)",
    )
    judge_structured: StructuredMode = Field(
        "auto",
        description="how the judge is asked for its JSON verdict: auto sends a JSON Schema as "
        "response_format to OpenAI-compatible servers, stepping down if the server rejects it; off puts "
        "the schema in the prompt only; the reply is validated and repaired once in every mode",
    )

    @model_validator(mode="after")
    def _check(self) -> EvalConfig:
        if self.agent == "model" and not self.model:
            raise EvalError(
                "agent 'model' needs a model spec (--model), e.g. openai:MODEL@http://host:8000/v1"
            )
        if self.n_trials < 1:
            raise EvalError(f"n_trials must be >= 1, got {self.n_trials}")
        if self.limit is not None and self.limit < 1:
            raise EvalError(f"limit must be >= 1, got {self.limit}")
        if self.concurrency < 1:
            raise EvalError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.max_turns is not None and self.max_turns < 1:
            raise EvalError(f"max_turns must be >= 1, got {self.max_turns}")
        return self

    def agent_config(self, benchmark: Benchmark) -> AgentConfig:
        """The agent loop's settings: explicit ones, else the benchmark's defaults."""
        config = benchmark_env_config(
            benchmark,
            max_turns=self.max_turns,
            dialect=self.dialect,
            reserve_final_turn=self.reserve_final_turn,
            sampling=self.sampling,
        )
        # no file profile in a blind prompt (the data-blind audit)
        return config.replace(profile_chars=0) if self.data_blind else config

    def identity(self, benchmark: Benchmark) -> dict[str, Any]:
        """The settings every run sharing an output folder must agree on (n and limit may grow)."""
        cfg = self.agent_config(benchmark)
        return {
            "bench": benchmark.name,
            "data": str(Path(self.data).resolve()),
            "agent": self.agent,
            "model": model_identity(self.model or "") if self.agent == "model" else "oracle",
            "max_turns": cfg.max_turns,
            "dialect": cfg.dialect,
            "reserve_final_turn": cfg.reserve_final_turn,
            "sampling": cfg.to_dict()["sampling"],
            "loader_options": {k: str(v) for k, v in sorted(self.loader_options.items())},
            **({"data_blind": True} if self.data_blind else {}),  # a raw run's identity is as before
        }


def benchmark_env_config(
    benchmark: Benchmark,
    *,
    max_turns: int | None = None,
    dialect: str | None = None,
    reserve_final_turn: bool = False,
    sampling: SamplingParams | None = None,
) -> AgentConfig:
    """The agent loop's settings on ``benchmark``: the given ones, else the benchmark's defaults.

    The one place that reads them, so that ``datadojo eval`` and the harness adapters (inspect_ai's
    ``datadojo/benchmark``) run a benchmark's episodes alike.
    """
    d = benchmark.defaults
    return AgentConfig(
        max_turns=max_turns or d.max_turns,
        dialect=dialect or d.dialect,
        reserve_final_turn=reserve_final_turn,
        sampling=sampling or SamplingParams(temperature=d.temperature, top_p=d.top_p),
        language=d.language,
    )


@dataclass
class EvalResult:
    """What a run produced: the summary written to ``summary.json``, the score report and the file paths."""

    summary: dict[str, Any]
    report: ScoreReport
    rollout: RolloutSummary | None
    paths: dict[str, Path]


# --- tasks ----------------------------------------------------------------------------------------------


def _with_answer_format(task: Task, fmt: str | None) -> Task:
    if not fmt or task.extra.get("answer_format"):
        return task
    return task.model_copy(update={"extra": {**task.extra, "answer_format": fmt}})


def load_eval_tasks(
    benchmark: Benchmark,
    data: str | Path,
    *,
    limit: int | None = None,
    options: dict[str, Any] | None = None,
    work_dir: str | Path | None = None,
) -> list[Task]:
    """The benchmark's tasks from ``data`` (data files required), with the answer-format hint, first ``limit``.

    A loader that needs somewhere to write files for the agent (TableBench's inline tables:
    ``tables_dir``) gets ``work_dir/tables`` unless the options name a place.
    """
    opts = dict(options or {})
    params = inspect.signature(benchmark.load).parameters
    if "tables_dir" in params and "tables_dir" not in opts and work_dir is not None:
        opts["tables_dir"] = Path(work_dir) / "tables"
    try:
        tasks: list[Task] = []
        for task in benchmark.load(data, require_files=True, **opts):
            tasks.append(_with_answer_format(task, benchmark.defaults.answer_format))
            if limit is not None and len(tasks) >= limit:
                break
    except TypeError as exc:  # an option this loader does not take
        raise EvalError(f"{benchmark.name}: {exc}") from exc
    except BenchmarkError as exc:
        raise EvalError(str(exc)) from exc
    if not tasks:
        raise EvalError(f"{benchmark.name}: no tasks in {data}")
    return tasks


def count_eval_tasks(benchmark: Benchmark, data: str | Path, *, options: dict[str, Any] | None = None) -> int:
    """How many tasks the benchmark has in ``data``, so a ``--limit`` run can say "15 of 93 tasks".

    Read without the data files' check and without a ``tables_dir`` (nothing is written for tasks that
    will not run): the count is of the tasks :func:`load_eval_tasks` would yield without a limit."""
    opts = {k: v for k, v in (options or {}).items() if k != "tables_dir"}
    try:
        return sum(1 for _ in benchmark.load(data, require_files=False, **opts))
    except TypeError as exc:
        raise EvalError(f"{benchmark.name}: {exc}") from exc
    except BenchmarkError as exc:
        raise EvalError(str(exc)) from exc


# --- predictions ----------------------------------------------------------------------------------------


def _tokens(traj: Trajectory) -> tuple[int, int]:
    return sum(t.tokens.prompt for t in traj.turns), sum(t.tokens.completion for t in traj.turns)


def _trial_trajectories(
    path: Path, tasks: Sequence[Task], n_trials: int
) -> dict[tuple[str, int], Trajectory]:
    wanted = {t.id for t in tasks}
    out: dict[tuple[str, int], Trajectory] = {}
    if not path.exists():
        return out
    for traj in read_trajectories(path):
        if traj.task_id not in wanted or traj.sample >= n_trials:
            continue
        if traj.key in out:
            log.warning("%s: task %s trial %d appears twice; the first is scored", path, *traj.key)
            continue
        out[traj.key] = traj
    return out


def _predictions(
    trajs: dict[tuple[str, int], Trajectory], tasks: Sequence[Task]
) -> tuple[list[Prediction], dict[tuple[str, int], str]]:
    """Every trajectory's prediction (:func:`predicted_answer`) and where it came from."""
    by_id = {t.id: t for t in tasks}
    preds: list[Prediction] = []
    sources: dict[tuple[str, int], str] = {}
    for key, traj in trajs.items():
        text, source = predicted_answer(by_id[key[0]], traj)
        sources[key] = source
        prompt, completion = _tokens(traj)
        preds.append(
            Prediction(
                traj.task_id, text, traj.sample,
                turns=traj.n_turns, tokens=prompt + completion, finished=traj.stop_reason == "answer",
            )
        )  # fmt: skip
    return preds, sources


async def judge_run(
    benchmark: JudgedBenchmark,
    tasks: Sequence[Task],
    out: str | Path,
    backend: ChatBackend,
    *,
    n_trials: int,
    concurrency: int = 8,
    model: str | None = None,
    on_verdict: Callable[[int, int], None] | None = None,
    structured: StructuredMode = "auto",
) -> JudgedBenchmark:
    """Judge every prediction in ``OUT/trajectories.jsonl`` and return the benchmark holding the verdicts.

    Verdicts are cached in ``OUT/judge_cache.jsonl`` (keyed by judge model and prompt), so judging a
    resumed or re-scored run asks only about new predictions. A backend failure is an :class:`EvalError`
    that says the trajectories are kept.
    """
    from datadojo.llm import LLMError

    out = Path(out)
    trajs = await asyncio.to_thread(_trial_trajectories, out / TRAJECTORIES, tasks, n_trials)
    preds, _ = _predictions(trajs, tasks)
    by_id = {t.id: t for t in tasks}
    try:
        verdicts = await benchmark.gather_verdicts(
            [(by_id[p.task_id], p.answer) for p in preds], backend, cache=out / JUDGE_CACHE,
            concurrency=concurrency, model=model, on_verdict=on_verdict, structured=structured,
        )  # fmt: skip
    except LLMError as exc:
        raise EvalError(
            f"{benchmark.name}: the judge failed ({exc}); trajectories and the verdicts so far are kept, "
            "rerun the same command to resume"
        ) from exc
    except ValueError as exc:  # a bad judge cache file or a task without a reference
        raise EvalError(str(exc)) from exc
    return benchmark.with_verdicts(verdicts)


def decided_by_counts(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Which scorer decided the scored answers (``rule``, ``judge``, the benchmark's ``official`` rule) and
    how many rule verdicts were guesses (``undecided``: the rule was not certain and no judge was asked).

    Items without an answer are left out: nothing was decided about them.
    """
    by: Counter[str] = Counter()
    undecided = 0
    for row in rows:
        if row.get("answer") is None or row.get("stop_reason") == "missing":
            continue
        parts = row.get("parts") or {}
        who = parts.get("decided_by") or (
            "judge" if "judge" in parts or parts.get("judge_error") else "official"
        )
        by[str(who)] += 1
        undecided += bool(parts.get("undecided"))
    n = sum(by.values())
    return {
        "decided_by": dict(sorted(by.items())),
        "undecided": undecided,
        "undecided_share": undecided / n if n else None,
    }


def score_run(
    benchmark: Benchmark,
    tasks: Sequence[Task],
    out: str | Path,
    *,
    n_trials: int,
    ks: Sequence[int] | None = None,
    meta: dict[str, Any] | None = None,
    rollout: RolloutSummary | None = None,
    reward: RewardSpec | None = None,
) -> EvalResult:
    """Score ``OUT/trajectories.jsonl`` for ``tasks`` × ``n_trials`` and write ``scores.jsonl``/``summary.json``.

    A (task, trial) without a trajectory (an interrupted run) counts as wrong and unfinished, and is
    counted under ``missing_trials``. ``meta`` is merged into the summary (model, settings).

    A trial that stopped on ``llm_error`` (the model server failed, after the backend's retries) is not an
    agent failure: its row says ``excluded: "server_failure"``, it is left out of pass@k, the official
    totals, the rewards and the behaviour figures, and ``summary["server_failures"]`` counts it. Rerunning
    the same command resumes the run and samples those trials again (the runner drops ``llm_error``
    records before it reruns a trial), so the figures then cover them.
    """
    out = Path(out)
    ks = tuple(ks) if ks else default_ks(n_trials)
    trajs = _trial_trajectories(out / TRAJECTORIES, tasks, n_trials)
    preds, sources = _predictions(trajs, tasks)
    server_failed = {k for k, t in trajs.items() if t.stop_reason in SERVER_FAILURE_STOPS}
    # Every task gets n_trials trials even when no trajectory of its last trial exists yet.
    fillers = [
        Prediction(t.id, None, n_trials - 1, finished=False)
        for t in tasks
        if (t.id, n_trials - 1) not in trajs
    ]
    report = score_predictions(benchmark, tasks, preds + fillers, ks=ks, exclude=server_failed)
    excluding = bool(server_failed) and len(server_failed) < len(tasks) * n_trials
    rows: list[dict[str, Any]] = []
    stop_reasons: Counter[str] = Counter()
    source_counts: Counter[str] = Counter()
    rewards: list[dict[str, float]] = []
    # Each trajectory's reward from the registry; the answer part is decided by this benchmark's rule (as scored)
    scored = {(i.task.id, i.trial): i.task for i in report.items if (i.task.id, i.trial) in trajs}
    results = score_pairs_sync(
        [(t, trajs[k]) for k, t in scored.items()], reward or RewardSpec(benchmark=benchmark)
    )
    registry_rewards = dict(zip(scored, results, strict=True))
    for item in report.items:
        key = (item.task.id, item.trial)
        traj = trajs.get(key)
        row = item.to_dict()
        if traj is None:
            row.update(
                prediction_source="none",
                stop_reason="missing",
                finished=False,
                turns=0,
                tokens=0,
                prompt_tokens=0,
                completion_tokens=0,
                rewards={},
                error="no trajectory (run interrupted?)",
            )
        else:
            prompt, completion = _tokens(traj)
            reward_result = registry_rewards[key]
            row.update(
                prediction_source=sources[key], stop_reason=traj.stop_reason,
                finished=traj.stop_reason == "answer", turns=traj.n_turns, tokens=prompt + completion,
                prompt_tokens=prompt, completion_tokens=completion, rewards=reward_result.as_rewards(), error=traj.error,
                reward=reward_result.reward, reward_parts=reward_result.parts,
            )  # fmt: skip
            if excluding and key in server_failed:
                row["excluded"] = "server_failure"
            else:
                rewards.append(reward_result.as_rewards())
        stop_reasons[row["stop_reason"]] += 1
        source_counts[row["prediction_source"]] += 1
        rows.append(row)
    write_jsonl_atomic(out / SCORES, rows)
    decisions = decided_by_counts(rows)
    counted = [t for k, t in trajs.items() if not (excluding and k in server_failed)]
    behaviour = behaviour_metrics(counted).to_dict() if counted else None
    if behaviour is not None:
        behaviour["total_tokens"] = sum(sum(_tokens(t)) for t in trajs.values())
    summary: dict[str, Any] = {
        "benchmark": benchmark.name,
        "metric": benchmark.metric,
        "rule": benchmark.rule.to_dict(),
        **(meta or {}),
        "n_tasks": len(tasks),
        "n_trials": n_trials,
        "ks": list(ks),
        "metrics": report.summary.to_dict(),
        "official": report.totals,
        "stop_reasons": dict(sorted(stop_reasons.items())),
        "prediction_sources": dict(sorted(source_counts.items())),
        "rewards": {
            "mean_total": sum(r["total"] for r in rewards) / len(rewards) if rewards else None,
            "format_ok": sum(r.get("r_format", 0.0) for r in rewards) / len(rewards) if rewards else None,
        },
        "behaviour": behaviour,
        "decisions": decisions,
        "missing_trials": len(tasks) * n_trials - len(trajs),
        "server_failures": {
            "trials": len(server_failed),
            "tasks": len({tid for tid, _ in server_failed}),
            "excluded": excluding,
        },
        "rollout": rollout.to_dict() if rollout is not None else None,
        "isolation": isolation_counts(trajs.values()),
        "scored_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    write_json_atomic(out / SUMMARY, summary, default=str)
    paths = {"trajectories": out / TRAJECTORIES, "scores": out / SCORES, "summary": out / SUMMARY}
    return EvalResult(summary=summary, report=report, rollout=rollout, paths=paths)


# --- the run --------------------------------------------------------------------------------------------


def _open_run(out: Path, identity: dict[str, Any]) -> RunFolder:
    """The run folder (:class:`~datadojo.runs.RunFolder`, kind ``eval``, settings = the identity): a resume
    with other settings is refused with one :class:`~datadojo.errors.ResumeError` naming each difference.

    A folder made before the run kit has ``eval.json`` but no ``run.json``: its identity (with the model
    reduced to :func:`~datadojo.llm.spec.model_identity`, settings it did not record taken as now) seeds
    ``run.json``, so it resumes as before. Trajectories without either file were not made by ``eval``.
    """
    record = out / RUN_RECORD
    if not (out / RUN_FILE).exists():
        if record.exists():
            try:
                previous = dict(json.loads(record.read_text(encoding="utf-8")).get("identity", {}))
            except (OSError, json.JSONDecodeError, AttributeError) as exc:
                raise EvalError(f"{record}: cannot read the earlier run's settings ({exc})") from exc
            if previous.get("model") not in (None, "oracle"):
                previous["model"] = model_identity(str(previous["model"]))
            write_json_atomic(
                out / RUN_FILE,
                {"kind": "eval", "settings": {**identity, **previous}, "datadojo": __version__},
            )
        elif (out / TRAJECTORIES).exists():
            raise EvalError(
                f"{out / TRAJECTORIES} exists but {RUN_RECORD} does not: this folder was not made by "
                "`datadojo eval`; pass another --out"
            )
    return RunFolder(out, "eval", identity, adopt=True)


def _episode_tasks(cfg: EvalConfig, tasks: list[Task]) -> list[Task]:
    """The tasks as the episodes see them: as loaded, or without their data (``data_blind``); scoring
    always uses the tasks as loaded."""
    if not cfg.data_blind:
        return tasks
    from datadojo.eval.audit import withhold_data

    return [withhold_data(t) for t in tasks]


def _submission(benchmark: Benchmark, tasks: Sequence[Task], out: Path) -> Path:
    """The leaderboard file (``OUT/<benchmark.submission_file>``) from each task's first trial, whose
    answer is the prediction this harness scores (:func:`predicted_answer`); see
    :mod:`datadojo.eval.submission`."""
    from datadojo.eval.submission import write_submission

    first = _trial_trajectories(out / TRAJECTORIES, tasks, 1)
    by_task = {task_id: traj for (task_id, _), traj in first.items()}
    path = out / str(benchmark.submission_file)
    return write_submission(benchmark, tasks, by_task, lambda t, tr: predicted_answer(t, tr)[0], path)


def _sandbox_config(cfg: EvalConfig, benchmark: Benchmark) -> Any:
    return cfg.sandbox if cfg.sandbox is not None else benchmark.sandbox_config()


async def run_eval(
    cfg: EvalConfig,
    *,
    backend: ChatBackend | None = None,
    sandboxes: SandboxFactory | None = None,
    on_trajectory: Callable[[Trajectory, RolloutSummary], None] | None = None,
    on_tasks: Callable[[list[Task]], None] | None = None,
    judge_backend: ChatBackend | None = None,
    on_verdict: Callable[[int, int], None] | None = None,
    executor: Executor | None = None,
) -> EvalResult:
    """Run the evaluation ``cfg`` describes (module docstring) and return its summary.

    ``backend`` replaces the one ``cfg.model`` names (it is not closed here; an
    :class:`~datadojo.eval.oracle.OracleBackend` given here is bound to each episode's task).
    ``sandboxes`` replaces the default sandbox pool (tests pass a fake). ``on_tasks`` sees the task list
    before the trials start (the CLI sizes its progress bar with it); ``on_trajectory`` is called as each
    trajectory finishes. ``judge_backend`` replaces the judge ``cfg.judge`` names (not closed here);
    ``on_verdict(done, total)`` follows the judging of a judged benchmark. ``executor`` runs the
    trials elsewhere (Ray: see ``docs/scaling.md``); this process still writes every file.
    """
    from datadojo.eval.oracle import OracleBackend, oracle_worker_spec

    try:
        benchmark = get_benchmark(cfg.bench)
    except KeyError as exc:
        raise EvalError(str(exc.args[0])) from exc
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    identity = cfg.identity(benchmark)
    agent_cfg = cfg.agent_config(benchmark)
    tasks = load_eval_tasks(benchmark, cfg.data, limit=cfg.limit, options=cfg.loader_options, work_dir=out)
    # under --limit the report says "15 of 93 tasks": the benchmark's own total, counted once
    limited = cfg.limit is not None and len(tasks) >= cfg.limit
    total = count_eval_tasks(benchmark, cfg.data, options=cfg.loader_options) if limited else len(tasks)
    # A judged benchmark needs a judge unless no task is judged (scidata's QA track scored by rule).
    judged = isinstance(benchmark, JudgedBenchmark) and any(benchmark.wants_verdict(t) for t in tasks)
    if judged and judge_backend is None and not cfg.judge:
        raise EvalError(
            f"{benchmark.name} is scored by an LLM judge: pass its model spec (--judge SPEC, e.g. "
            "openai:MODEL@http://host:8000/v1)"
        )
    oracle: OracleBackend | None = backend if isinstance(backend, OracleBackend) else None
    if cfg.agent == "oracle" and oracle is None:
        try:
            oracle = OracleBackend(tasks, dialect=agent_cfg.dialect)
        except ValueError as exc:
            raise EvalError(f"{benchmark.name}: {exc}") from exc
    _open_run(out, identity)  # after the checks above: a refused start leaves no settings behind
    write_json_atomic(
        out / RUN_RECORD,
        {
            "identity": identity,
            "n_trials": cfg.n_trials,
            "limit": cfg.limit,
            "agent_config": agent_cfg.to_dict(),
        },
        default=str,
    )
    if on_tasks is not None:
        on_tasks(tasks)

    remote = executor is not None and executor.remote
    if remote and (backend is not None or sandboxes is not None):
        raise EvalError(
            f"the {executor.name} executor builds backends and sandboxes on its nodes; pass neither"
        )
    if remote and (cfg.audit or cfg.data_blind):
        raise EvalError(
            f"--audit data-blind runs locally: the {executor.name} executor's nodes mount the data"
        )
    own_backend = backend is None and oracle is None and not remote
    if backend is not None:
        chat: ChatBackend | str = backend
    elif oracle is not None:
        chat = oracle
    elif remote:
        chat = cfg.model or ""
    else:
        from datadojo.llm import load_backend

        chat = load_backend(cfg.model or "", concurrency=cfg.concurrency)
        try:  # a down server or wrong URL: one line and exit 3 now, not after every task's retries
            await chat.check_reachable()
        except BaseException:
            await chat.aclose()
            raise
    close_pool = None
    if remote:
        base_factory = None  # type: ignore[assignment]
    elif sandboxes is None:  # the environment's pool (datadojo.env), with the benchmark's sandbox settings
        base_factory, close_pool = default_sandboxes(cfg.concurrency, _sandbox_config(cfg, benchmark))
    else:
        base_factory = sandboxes

    if cfg.data_blind and base_factory is not None:  # an empty workspace (datadojo.eval.audit)
        from datadojo.eval.audit import withheld_sandboxes

        base_factory = withheld_sandboxes(base_factory)

    def factory(task: Task) -> AbstractAsyncContextManager[CodeRunner]:
        # Called by the runner inside the asyncio task of this episode: the oracle's binding stays private to it.
        if oracle is not None:
            oracle.bind(task)
        return base_factory(task)

    worker = None
    if remote and oracle is not None:  # the oracle is rebuilt on each node from the tasks
        worker = oracle_worker_spec(tasks, agent_cfg, sandbox=_sandbox_config(cfg, benchmark), pool_size=cfg.concurrency, seed=cfg.seed)  # fmt: skip
    try:
        rollout = await run_rollouts(
            _episode_tasks(cfg, tasks), chat, out / TRAJECTORIES, n_samples=cfg.n_trials,
            config=agent_cfg, concurrency=cfg.concurrency, sandboxes=None if remote else factory,
            sandbox_config=_sandbox_config(cfg, benchmark), seed=cfg.seed, on_trajectory=on_trajectory,
            executor=executor, worker=worker,
        )  # fmt: skip
    finally:
        if close_pool is not None:
            await close_pool()
        if own_backend and not isinstance(chat, str):
            await chat.aclose()

    meta = {
        "description": benchmark.description,
        "agent": cfg.agent,
        "model": cfg.model if cfg.agent == "model" else "oracle (gold SQL through the agent loop)",
        "data": str(Path(cfg.data).resolve()),
        "out": str(out.resolve()),
        "limit": cfg.limit,
        "n_tasks_total": max(total, len(tasks)),
        "agent_config": agent_cfg.to_dict(),
        "concurrency": cfg.concurrency,
        "seed": cfg.seed,
    }
    scorer: Benchmark = benchmark
    if judged and isinstance(benchmark, JudgedBenchmark):
        judge_chat = judge_backend
        if judge_chat is None:
            from datadojo.llm import load_backend

            judge_chat = load_backend(cfg.judge or "", concurrency=cfg.concurrency)
        try:
            scorer = await judge_run(
                benchmark, tasks, out, judge_chat, n_trials=cfg.n_trials, concurrency=cfg.concurrency,
                on_verdict=on_verdict, structured=cfg.judge_structured,
            )  # fmt: skip
        finally:
            if judge_backend is None:
                await judge_chat.aclose()
        meta["judge"] = cfg.judge or judge_chat.model_id
    # the reward registry: answer part by this run's scorer; an EnvLunch task file's copies lie beside it
    spec = RewardSpec(benchmark=scorer, tasks_path=str(cfg.data) if Path(cfg.data).is_file() else None)
    result = await asyncio.to_thread(
        score_run,
        scorer,
        tasks,
        out,
        n_trials=cfg.n_trials,
        ks=cfg.ks,
        meta=meta,
        rollout=rollout,
        reward=spec,
    )
    if benchmark.submission_file and benchmark.wants_submission(tasks):
        result.paths["submission"] = await asyncio.to_thread(_submission, benchmark, tasks, out)
    if cfg.audit is not None:  # the blind run in OUT/blind, compared into this summary
        from datadojo.eval.audit import run_data_blind_audit

        result = await run_data_blind_audit(
            cfg, result, run=run_eval, backend=backend, sandboxes=sandboxes, on_trajectory=on_trajectory,
            on_tasks=on_tasks, judge_backend=judge_backend, on_verdict=on_verdict, executor=executor,
        )  # fmt: skip
    if cfg.report:
        from datadojo.eval.report import write_report

        html_path, md_path = await asyncio.to_thread(write_report, out)
        result.paths.update(report_html=html_path, report_md=md_path)
    return result


def run_eval_sync(cfg: EvalConfig, **kwargs: Any) -> EvalResult:
    """Blocking :func:`run_eval` for scripts and notebooks."""
    return asyncio.run(run_eval(cfg, **kwargs))

"""The DataMind synthesis pipeline end to end, and each stage on its own (``datadojo synth datamind``).

Stages and their files in ``out`` (each resumable on its own output; a finished stage sends no request):

1. taxonomy (data; :mod:`.taxonomy`) and the corpus scan → ``corpus.jsonl``;
2. :func:`stage_queries` → ``queries.jsonl`` (difficulty 1);
3. :func:`stage_compose` → ``queries.jsonl`` (difficulty 2–5);
4. :func:`stage_sample` round 0 → ``trajectories.jsonl``;
5. :func:`stage_judge` → ``verdicts.jsonl``;
6. reflection: :func:`stage_sample` round r ≥ 1 for the queries still inconsistent, then :func:`stage_judge`;
7. + 8. :func:`stage_curate` → rule filters, ``rejected.jsonl``, ``sft/*.jsonl``;

and after every stage ``summary.json`` and ``report.html`` (:mod:`.funnel`). :func:`run_pipeline` runs them
in order with up to ``config.rounds`` reflection rounds.

Where the work runs: :attr:`DataMindRun.executor`. The sampling rounds (stages 4 and 6: agent episodes,
each a sandbox and a dozen teacher turns; the heavy part) fan out on it — on Ray every node builds the
teacher's client from its spec string and its own sandbox pool, and this process writes every line, so
resume is unchanged. The query, composition and judge stages are single requests with no sandbox; they are
sent from this process (their concurrency is requests in flight, ``config.concurrency``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datadojo.agent.runner import model_name
from datadojo.corpus.inputs import require_data_files
from datadojo.corpus.scan import read_corpus
from datadojo.env import SandboxFactory
from datadojo.executor import Executor
from datadojo.fs import write_json_atomic
from datadojo.llm.base import ChatBackend
from datadojo.runs import ProgressHook, UsageLedger, stage_progress
from datadojo.sandbox.config import SandboxConfig
from datadojo.synth.datamind.compose import compose_queries
from datadojo.synth.datamind.config import STRATEGIES, DataMindConfig
from datadojo.synth.datamind.consistency import judge_round, read_verdicts, trajectories_by_round
from datadojo.synth.datamind.curation import CurationResult, curate
from datadojo.synth.datamind.errors import DataMindError
from datadojo.synth.datamind.funnel import DEFAULT_TITLE, build_summary, write_summary
from datadojo.synth.datamind.queries import FileEntry, accepted_files, load_queries, synthesize_queries
from datadojo.synth.datamind.report import models_file, read_models
from datadojo.synth.datamind.sampling import agent_task, check_travel, reflection_feedback, sample_round
from datadojo.synth.datamind.store import Paths
from datadojo.synth.datamind.taxonomy import Taxonomy, load_taxonomy
from datadojo.types import Task

__all__ = [
    "DataMindRun",
    "run_pipeline",
    "stage_compose",
    "stage_curate",
    "stage_judge",
    "stage_queries",
    "stage_sample",
]

#: The settings that shape what each stage appends. A stage records its values in ``stages.json``; a later run
#: of any stage sharing a setting with a recorded one must use the same value — ``judge -n 3`` on trajectories
#: sampled with ``-n 5`` would judge 3 of 5, a resumed ``sample`` with another ``max_turns`` would mix two
#: runs' trajectories in one group. The query stages are not checked: ``queries.jsonl`` is a pool that later
#: requests may add to under other settings (each question is checked as it is kept), and curation rewrites
#: its outputs from scratch, so its settings may change freely.
STAGE_SETTINGS: dict[str, tuple[str, ...]] = {
    "sample": ("n_samples", "use_workflow", "detailed_workflow", "max_turns", "temperature", "top_p",
               "max_tokens", "seed"),
    "judge": ("n_samples", "tolerance", "context_chars", "rule_best"),
}  # fmt: skip


@dataclass
class DataMindRun:
    """One output folder and its settings; stages are methods of the module taking this.

    ``executor``: where the sampling rounds run (``None``: this process; a remote one, e.g.
    :class:`~datadojo.executor.ray_executor.RayExecutor`, needs the teacher as a model spec string).
    ``sandbox_config``: the sandboxes of those episodes (default :class:`SandboxConfig`). ``sampled``
    records, per sampling stage run here, where it ran (``executor``, per-node figures, episodes run).
    ``title``: the report page's title (a recipe's curation stage is not a synthesis run: it says so).
    """

    inputs: Sequence[str | Path]
    out: Path
    config: DataMindConfig = field(default_factory=DataMindConfig)
    progress: ProgressHook | None = None
    executor: Executor | None = None
    sandbox_config: SandboxConfig | None = None
    title: str = DEFAULT_TITLE
    taxonomy: Taxonomy = field(init=False)
    paths: Paths = field(init=False)
    files: list[FileEntry] = field(init=False, default_factory=list)
    files_seen: int = field(init=False, default=0)
    curation: CurationResult | None = field(init=False, default=None)
    sampled: dict[str, dict[str, Any]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.paths = Paths(self.out)
        self.taxonomy = load_taxonomy(self.config.taxonomy)
        write_json_atomic(
            self.out / "config.json", self.config.model_dump(mode="json")
        )  # of the latest stage run
        if self.inputs:
            require_data_files(self.inputs)  # an empty folder: refuse before any request (issue 25)
            with self.paths.rejections() as rejects:
                self.files, self.files_seen = accepted_files(self.inputs, self.paths, self.config, rejects)
        elif self.paths.corpus.exists():  # a later stage run alone: the files an earlier stage scanned
            latest = {r.path: r for r in read_corpus(self.paths.corpus)}
            self.files = [FileEntry(r) for _, r in sorted(latest.items()) if r.accepted]
            self.files_seen = len(latest)

    @property
    def stages_file(self) -> Path:
        return self.out / "stages.json"

    def record_model(self, role: str, backend: ChatBackend | str) -> None:
        """Note the model id of ``role`` (teacher, judge) in ``models.json`` for the report and the summary."""
        models = read_models(self.paths)
        name = model_name(backend)
        if models.get(role) != name:
            write_json_atomic(models_file(self.paths), {**models, role: name})

    def check_settings(self, stage: str) -> None:
        """Refuse ``stage`` when a setting it shares with a stage already run here differs, naming both values;
        then record the stage's settings (see :data:`STAGE_SETTINGS`)."""
        recorded: dict[str, dict[str, Any]] = {}
        if self.stages_file.exists():
            try:
                recorded = json.loads(self.stages_file.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise DataMindError(
                    f"{self.stages_file}: unreadable ({exc}); remove it to skip this check"
                ) from exc
        current = self.config.model_dump(mode="json")
        for other, values in recorded.items():
            for name in STAGE_SETTINGS.get(stage, ()):
                if name in values and values[name] != current.get(name):
                    raise DataMindError(
                        f"{self.out}: the {stage} stage would run with {name} = {current.get(name)!r}, but the "
                        f"{other} stage of this run used {name} = {values[name]!r} (recorded in "
                        f"{self.stages_file.name}); rerun with {name} = {values[name]!r}, or use a new --out"
                    )
        recorded[stage] = {n: current.get(n) for n in STAGE_SETTINGS.get(stage, ())}
        write_json_atomic(self.stages_file, recorded)

    def tick(self, stage: str) -> Callable[[int, int], None]:
        """``(done, total)`` of ``stage`` for the :data:`~datadojo.runs.ProgressHook` (no-op without one)."""
        return stage_progress(self.progress, stage)

    def finish(self, usage: UsageLedger | None) -> dict[str, Any]:
        """Record a stage's usage, rewrite ``summary.json`` / ``report.html``, then apply the run kit's one
        failure policy (:class:`~datadojo.runs.FailurePolicy`): a stage whose LLM requests mostly failed
        ends the run with :class:`~datadojo.runs.TooManyFailures` (exit 3) after its files are written,
        and a rerun resumes it."""
        if usage is not None:
            usage.save()
        summary = build_summary(
            self.paths,
            files_seen=self.files_seen,
            files_accepted=len(self.files),
            curation=self.curation,
            rounds=self.config.rounds,
        )
        write_summary(self.paths, summary, title=self.title)
        if usage is not None:
            usage.check()
        return summary


def _require(path: Path, stage: str) -> None:
    """A stage run alone on a folder without its input fails clearly instead of writing an empty funnel."""
    if not path.exists():
        raise DataMindError(f"{path}: not found; run the {stage} stage first (same --out)")


async def stage_queries(run: DataMindRun, teacher: ChatBackend) -> dict[str, Any]:
    """Stage 2: one request per (file, applicable category)."""
    run.record_model("teacher", teacher)
    usage = await synthesize_queries(
        run.files, teacher, run.paths, run.taxonomy, run.config, on_progress=run.tick("queries")
    )
    return run.finish(usage)


async def stage_compose(run: DataMindRun, teacher: ChatBackend) -> dict[str, Any]:
    """Stage 3: the easy→hard chains."""
    _require(run.paths.queries, "queries")
    run.record_model("teacher", teacher)
    usage = await compose_queries(
        run.files, teacher, run.paths, run.taxonomy, run.config, on_progress=run.tick("compose")
    )
    return run.finish(usage)


def reflection_tasks(run: DataMindRun, round_: int) -> list[Task]:
    """Agent tasks of reflection round ``round_``: queries inconsistent at ``round_ - 1`` (never consistent
    before), each with the earlier attempts and the critique in its prompt (Eq. 3)."""
    verdicts = read_verdicts(run.paths)
    groups = trajectories_by_round(run.paths)
    out = []
    for q in load_queries(run.paths):
        prev = verdicts.get((q.id, round_ - 1))
        if prev is None or prev.consistent:
            continue
        if any(
            verdicts.get((q.id, r)) is not None and verdicts[(q.id, r)].consistent for r in range(round_ - 1)
        ):
            continue
        feedback = reflection_feedback(
            groups.get((q.id, round_ - 1), []), prev.critique, run.config.context_chars
        )
        out.append(agent_task(q, run.taxonomy, run.config, feedback))
    return out


async def stage_sample(
    run: DataMindRun, teacher: ChatBackend | str, *, round_: int = 0, sandboxes: SandboxFactory | None = None
) -> dict[str, Any]:
    """Stage 4 (round 0: every query) or the sampling half of reflection (round ≥ 1), on ``run.executor``.

    ``teacher``: a backend, or a model spec string (what a remote executor needs: its nodes load it)."""
    check_travel(teacher, run.executor, sandboxes)  # refused before anything is read or written
    run.check_settings("sample")
    run.record_model("teacher", teacher)
    if round_ == 0:
        tasks = [agent_task(q, run.taxonomy, run.config) for q in load_queries(run.paths)]
        if not tasks:
            _require(run.paths.queries, "queries")
            raise DataMindError(
                f"{run.paths.queries}: no queries to sample (every synthesized question was rejected or no "
                f"request succeeded; see {run.paths.rejected} and the queries stage's log)"
            )
    else:
        if not any(r == round_ - 1 for _, r in read_verdicts(run.paths)):
            raise DataMindError(
                f"reflection round {round_} needs the verdicts of round {round_ - 1}; run judge first"
            )
        tasks = reflection_tasks(run, round_)
    stage = "sample" if round_ == 0 else f"reflect {round_}"
    total = len(tasks) * run.config.n_samples
    tick = run.tick(stage)
    tick(0, total)
    state = {"n": 0}

    def on_traj(_t: object, s: Any) -> None:
        state["n"] += 1
        tick(s.skipped + state["n"], total)

    summary, usage = await sample_round(
        tasks, teacher, run.paths, run.config, round_, sandboxes=sandboxes,
        sandbox_config=run.sandbox_config, executor=run.executor, on_trajectory=on_traj,
    )  # fmt: skip
    run.sampled[stage] = {
        "executor": summary.executor,
        "nodes": summary.nodes,
        "finished": summary.finished,
        "skipped": summary.skipped,
        # the teacher's use by these episodes (on a remote executor, counted on the nodes, not here)
        "requests": summary.turns,
        "prompt_tokens": summary.prompt_tokens,
        "completion_tokens": summary.completion_tokens,
        "failed": summary.errors,
    }
    return run.finish(usage)


async def stage_judge(run: DataMindRun, judge: ChatBackend, *, round_: int = 0) -> dict[str, Any]:
    """Stage 5: verdicts on round ``round_`` (rule pre-check, then the judge)."""
    _require(run.paths.trajectories, "sample")
    run.check_settings("judge")
    run.record_model("judge", judge)
    usage = await judge_round(
        load_queries(run.paths), judge, run.paths, run.config, round_, on_progress=run.tick(f"judge {round_}")
    )
    return run.finish(usage)


def stage_curate(run: DataMindRun, strategies: Sequence[str] = STRATEGIES) -> dict[str, Any]:
    """Stages 7–8: rule filters and the SFT sets."""
    _require(run.paths.trajectories, "sample")
    run.curation = curate(load_queries(run.paths), run.paths, run.config, strategies)
    return run.finish(None)


async def run_pipeline(
    run: DataMindRun,
    teacher: ChatBackend | str,
    judge: ChatBackend,
    *,
    sandboxes: SandboxFactory | None = None,
    compose: bool = True,
) -> dict[str, Any]:
    """Every stage in order, with ``config.rounds`` reflection rounds; returns the summary.

    ``teacher`` as a model spec string (needed when ``run.executor`` is remote) is loaded here for the
    query and composition requests, and closed at the end; the sampling rounds get the string."""
    from datadojo.llm import load_backend

    check_travel(teacher, run.executor, sandboxes)  # refused before any request, not at sampling
    own = load_backend(teacher, concurrency=run.config.concurrency) if isinstance(teacher, str) else None
    local = own if own is not None else teacher
    assert not isinstance(local, str)
    try:
        if own is not None:
            own.check_before_first_request()
        await stage_queries(run, local)
        if compose:
            await stage_compose(run, local)
        sampler = teacher if run.executor is not None and run.executor.remote else local
        await stage_sample(run, sampler, round_=0, sandboxes=sandboxes)
        await stage_judge(run, judge, round_=0)
        for r in range(1, run.config.rounds + 1):
            if not reflection_tasks(run, r):
                break
            await stage_sample(run, sampler, round_=r, sandboxes=sandboxes)
            await stage_judge(run, judge, round_=r)
    finally:
        if own is not None:
            await own.aclose()
    return stage_curate(run)

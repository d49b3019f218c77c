"""Building a warm-up task set: which environment each task comes from, parallel synthesis, output files.

EnvLunch §4 draws its 1,600 warm-up tasks "at random in a single pass" from its environment corpora. How
tasks are spread over environments and backends is not specified; ours (documented in
``docs/envlunch.md``):

* task ``i`` draws its backend (SQL with probability ``sql_fraction``, when any database can give SQL
  tasks) and then an environment uniformly among those *feasible* for that backend (SQL: a database with a
  table of at least 20 rows, otherwise no copy can differ; pandas: any table with rows, plus either 20 rows
  somewhere or a measure column to rescale), from an RNG seeded by ``(seed, i, round)``;
* within that environment up to ``attempts`` trajectories are drawn (seeded by ``(seed, i, attempt)``)
  until one passes the §3 filter, is not a duplicate (same program) of a task already kept there
  (``duplicate``), and does not ask what a kept task asks (``same_question``, below);
* task indices that found none are drawn again (new environment) in the next round, up to ``max_rounds``.

Environments are loaded as ``sample_rows`` says (tables over it cut to a referentially consistent sample
drawn from the seed, :mod:`.sample`; 0 keeps them whole, as in the paper), by the driver and again by each
worker from the source file, so both see the same sample. Every draw depends only on the seed and the task
index, so the output is the same for any number of worker processes. Workers are forked processes, each
handling whole environments (so an environment's copies are built once); they write that environment's
files themselves.

Next to ``OUT.jsonl`` the build writes ``OUT.funnel.json`` (:class:`datadojo.runs.Funnel`): the draws, the
tasks kept and the §3 filter's rejection reasons (and, for a build on sampled tables, ``sample``: the cap,
the seed and each cut table's rows kept of rows in the file), so the funnel is on disk for the CLI, the demo and the
recipe alike (before, only the recipe wrote it).

**No question twice** (issue 39). What the agent sees of a task is its question and its files
(:func:`.tasks.visible_key`); the tasks of one environment and backend share their files, so their
questions must differ. On a sample every cut table has ``sample_rows`` rows, and ``len(df)`` over two of
them reads "Target value: 2000" with two programs that differ in the copies; whole tables have such
coincidences too (two columns with the same minimum). Rule: a draw whose question, once it names the
tables its program reads, equals a kept task's (same o*, same tables) is rejected as ``same_question``
and the index draws again; after the last round, tasks whose plain question another task shares get the
question that names their tables (:func:`.tasks.tell_apart`; counted as ``told_apart``). Naming beats
dropping: both tasks stay, each answerable, and the other tasks keep the paper's (E, o*) unchanged.

**The reference solver's share** (:mod:`.solver_check`): after writing, the solver tries a seeded sample
of ``solve_sample`` tasks with a deterministic budget of ``solve_candidates`` compositions each, and its
programs are scored in the copies (in-process: they are ours); the share solved and the failure reasons
go into the report and the funnel file (``solver``), so a user can tell a hard task from a broken one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datadojo.executor import Executor, ProcessExecutor, WorkerSpec
from datadojo.fs import write_json_atomic
from datadojo.jsonl import write_jsonl_atomic
from datadojo.runs import Funnel
from datadojo.synth.envlunch.config import BuildConfig
from datadojo.synth.envlunch.environment import (
    EnvError,
    Environment,
    discover_sources,
    load_environment,
    stable_int,
)
from datadojo.synth.envlunch.solver_check import SolverCheck, check_with_solver
from datadojo.synth.envlunch.synthesis import EnvContext, SynthConfig, Synthesized, synthesize, task_rng
from datadojo.synth.envlunch.tasks import (
    copies_root,
    task_from_synth,
    tell_apart,
    visible_key,
    write_env_files,
)
from datadojo.tmpfiles import temp_sibling
from datadojo.types import Task

__all__ = ["BuildConfig", "BuildReport", "BuildWorker", "build_tasks", "funnel_path", "load_environments"]


@dataclass
class BuildReport:
    """What a build produced: tasks (in index order), rejection reasons, time, files."""

    tasks: list[Task]
    rejections: Counter[str]
    draws: int
    seconds: float  # synthesis and files, without the solver's check (``solver.seconds``)
    n_envs: int
    envs_used: int
    out: Path | None = None
    copies: Path | None = None
    missing: int = 0
    funnel: Path | None = None
    #: environments built on a sample: ``{env_id: {table: (rows kept, rows in the source)}}``
    sampled: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    sample_rows: int = 0
    #: tasks whose question names the tables its program reads, to tell it from another's (module doc)
    told_apart: int = 0
    #: the reference solver on a sample of the tasks (``None`` when ``solve_sample`` is 0)
    solver: SolverCheck | None = None

    def questions_text(self) -> str:
        """One line on the questions two programs shared: the draws dropped and the tasks told apart."""
        dropped = self.rejections.get("same_question", 0)
        return (
            f"visible questions: every task asks its own; {dropped} draws dropped as same_question (the "
            f"question of a kept task, even naming the tables read), {self.told_apart} tasks name the tables "
            "they read to tell apart a question another task shared"
        )

    def sample_text(self) -> str | None:
        """One line on the samples (``None`` when every environment is whole)."""
        if not self.sampled:
            return None
        parts = []
        for env, tables in sorted(self.sampled.items()):
            cut = ", ".join(f"{t} {k:,} of {n:,}" for t, (k, n) in sorted(tables.items()))
            parts.append(f"{env} ({cut})")
        return f"built on samples of about {self.sample_rows:,} rows per table: " + "; ".join(parts)

    def funnel_steps(self) -> Funnel:
        """The build's funnel: every draw in, the tasks kept, the rejections by reason."""
        funnel = Funnel()
        funnel.add("draw", self.draws, len(self.tasks), self.rejections)
        return funnel

    def by(self, key: Callable[[Task], Any]) -> Counter[Any]:
        return Counter(key(t) for t in self.tasks)


def funnel_path(out: str | Path) -> Path:
    """Where the build of ``out`` (``tasks.jsonl``) writes its funnel (``tasks.funnel.json``)."""
    out = Path(out)
    return out.with_name(f"{out.stem}.funnel.json")


def load_environments(
    paths: Sequence[str | Path],
    *,
    exclude: Sequence[str] = (),
    on_error: Callable[[str], None] | None = None,
    sample_rows: int = 0,
    seed: int = 0,
) -> list[Environment]:
    """Load every environment under ``paths`` (ids made unique); unreadable ones are reported and skipped.

    ``sample_rows`` and ``seed``: pass a build's ``BuildConfig.sample_rows`` and ``seed`` so that large
    tables are sampled as they are read (:func:`~.environment.load_sqlite`); :func:`build_tasks` would
    otherwise load them again, sampled.
    """
    envs: list[Environment] = []
    used: set[str] = set()
    for src in discover_sources(list(paths), exclude=tuple(exclude)):
        env_id, i = src.stem, 2
        while env_id in used:
            env_id, i = f"{src.stem}_{i}", i + 1
        try:
            env = load_environment(src, env_id=env_id, sample_rows=sample_rows, seed=seed)
        except EnvError as exc:
            if on_error is not None:
                on_error(str(exc))
            continue
        used.add(env_id)
        envs.append(env)
    return envs


@dataclass
class _Job:
    env_index: int
    backend: str
    indices: list[int]
    round: int
    seen: set[str]
    write_files: bool
    #: visible keys of the kept tasks' questions naming their tables (:func:`.tasks.tell_apart`)
    questions: set[tuple[Any, ...]] = field(default_factory=set)


@dataclass
class _JobResult:
    env_index: int
    backend: str
    tasks: list[tuple[int, Task, str, tuple[Any, ...]]]  # (index, task, program, told-apart visible key)
    failed: list[int]
    rejections: Counter[str]
    draws: int


class BuildWorker:
    """Runs build jobs where an executor puts them (a worker process of this machine, a Ray node):
    environments are loaded again there, from their source files, on first use; the copies are written to
    ``stage``, which must be on storage the driver sees (the output's folder)."""

    def __init__(
        self, sources: list[tuple[str, str]], config: BuildConfig, stage: str, rel_root: str
    ) -> None:
        self.sources = sources
        self.config = config
        self.stage = Path(stage)
        self.rel_root = rel_root
        self._envs: dict[int, Environment] = {}

    async def run(self, job: _Job) -> _JobResult:
        if job.env_index not in self._envs:
            source, env_id = self.sources[job.env_index]
            self._envs[job.env_index] = load_environment(
                Path(source), env_id=env_id, sample_rows=self.config.sample_rows, seed=self.config.seed
            )
        return _run_job_in(self._envs[job.env_index], self.config, self.stage, self.rel_root, job)

    async def close(self) -> None:
        self._envs.clear()


def _run_job_in(env: Environment, conf: BuildConfig, stage: Path, rel_root: str, job: _Job) -> _JobResult:
    ctx = EnvContext(env, conf.synth)
    out: list[tuple[int, Task, str, tuple[Any, ...]]] = []
    failed: list[int] = []
    rejections: Counter[str] = Counter()
    draws = 0
    seen = set(job.seen)
    questions = set(job.questions)
    for index in job.indices:
        got: Synthesized | None = None
        for attempt in range(conf.attempts):
            seed_attempt = job.round * 10_000 + attempt
            rng = task_rng(conf.seed, index, seed_attempt)
            draws += 1
            res = synthesize(ctx, job.backend, rng)  # type: ignore[arg-type]
            if isinstance(res, str):
                rejections[res.split(":")[0]] += 1
                continue
            if res.program in seen:
                rejections["duplicate"] += 1
                continue
            task = task_from_synth(
                res,
                ctx,
                task_id=f"envlunch-{index:05d}-{res.backend}-{env.env_id}",
                rel_root=rel_root,
                seed=conf.seed,
                task_seed=stable_int(conf.seed, "task", index, seed_attempt),
            )
            # same o* over the same tables: naming them would not tell the two questions apart
            told = visible_key(tell_apart(task))
            if told in questions:
                rejections["same_question"] += 1
                continue
            got = res
            seen.add(res.program)
            questions.add(told)
            out.append((index, task, res.program, told))
            break
        if got is None:
            failed.append(index)
    if out and job.write_files:
        write_env_files(ctx, job.backend, stage)
    ctx.close()
    return _JobResult(job.env_index, job.backend, out, failed, rejections, draws)


def _feasible(envs: list[Environment], synth: SynthConfig) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {"sql": [], "pandas": []}
    for i, env in enumerate(envs):
        ctx = EnvContext(env, synth)
        if ctx.sql_feasible:
            out["sql"].append(i)
        if ctx.pandas_feasible:
            out["pandas"].append(i)
    return out


def build_tasks(
    envs: list[Environment],
    out: str | Path,
    config: BuildConfig,
    *,
    progress: Callable[[int, int], None] | None = None,
    executor: Executor | None = None,
) -> BuildReport:
    """Synthesize ``config.n`` tasks over ``envs``; write ``out`` (JSONL) and its copies folder.

    ``progress(done, total)`` is called as environments finish. Returns the report (tasks in index order).
    ``executor`` (Ray) runs the jobs on its nodes; without one, ``config.workers > 1`` runs them on that
    many worker processes (:class:`~datadojo.executor.ProcessExecutor`, each loading the environments it
    is given once), and 1 runs them here. Every
    draw depends only on the seed and the task index, so the tasks are the same. The nodes must see the
    environments' source files and the output's folder at the same paths (shared storage).
    """
    start = time.perf_counter()
    out = Path(out)
    root = copies_root(out)
    # the environments as the config samples them (workers load them so from their source files)
    envs = [
        env
        if env.loaded_as(config.sample_rows, config.seed)
        else load_environment(env.source, env_id=env.env_id, sample_rows=config.sample_rows, seed=config.seed)
        for env in envs
    ]
    feasible = _feasible(envs, config.synth)
    if not feasible["sql"] and not feasible["pandas"]:
        raise EnvError(
            "no environment can give a task (every table is empty, or too small and without measures)"
        )
    stage = temp_sibling(root)
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    written: set[tuple[int, str]] = set()
    seen: dict[tuple[int, str], set[str]] = {}
    questions: dict[tuple[int, str], set[tuple[Any, ...]]] = {}
    results: dict[int, Task] = {}
    rejections: Counter[str] = Counter()
    draws = 0
    pending = list(range(config.n))
    own = executor is None and config.workers > 1
    if own:
        executor = ProcessExecutor(config.workers)
    sources = [(str(env.source), env.env_id) for env in envs]
    try:
        for rnd in range(config.max_rounds):
            if not pending:
                break
            groups: dict[tuple[int, str], list[int]] = {}
            for index in pending:
                rng = random.Random(stable_int(config.seed, "assign", index, rnd))
                want_sql = rng.random() < config.sql_fraction
                backend = "sql" if (want_sql and feasible["sql"]) or not feasible["pandas"] else "pandas"
                env_index = rng.choice(feasible[backend])
                groups.setdefault((env_index, backend), []).append(index)
            jobs = [
                _Job(
                    e,
                    b,
                    idx,
                    rnd,
                    seen.get((e, b), set()),
                    (e, b) not in written,
                    questions.get((e, b), set()),
                )
                for (e, b), idx in sorted(groups.items(), key=lambda kv: -_cost(envs[kv[0][0]], len(kv[1])))
            ]
            pending = []
            if executor is not None:
                spec = WorkerSpec(
                    "datadojo.synth.envlunch.build:BuildWorker",
                    {"sources": sources, "config": config, "stage": str(stage), "rel_root": root.name},
                    cpu_bound=True,
                    label="warm-up build",
                )
                it: Iterable[_JobResult] = _run_on(executor, spec, jobs)
            else:
                it = (_run_job_in(envs[j.env_index], config, stage, root.name, j) for j in jobs)
            for res in it:
                key = (res.env_index, res.backend)
                for index, task, program, told in res.tasks:
                    results[index] = task
                    seen.setdefault(key, set()).add(program)
                    questions.setdefault(key, set()).add(told)
                if res.tasks:
                    written.add(key)
                pending.extend(res.failed)
                rejections.update(res.rejections)
                draws += res.draws
                if progress is not None:
                    progress(len(results), config.n)
            pending.sort()
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    finally:
        if own:
            assert isinstance(executor, ProcessExecutor)
            executor.close()
    tasks, told_apart = _tell_apart_shared([results[i] for i in sorted(results)])
    write_jsonl_atomic(out, tasks)
    if root.exists():
        shutil.rmtree(root)
    os.replace(stage, root)
    seconds = time.perf_counter() - start  # the build's own time: the solver's is reported apart
    solver = None
    if config.solve_sample and tasks:
        solver = check_with_solver(
            tasks, out, sample=config.solve_sample, seed=config.seed, candidates=config.solve_candidates
        )
    report = BuildReport(
        tasks=tasks,
        rejections=rejections,
        draws=draws,
        seconds=seconds,
        n_envs=len(envs),
        envs_used=len({t.extra["env"] for t in tasks}),
        out=out,
        copies=root,
        missing=config.n - len(tasks),
        funnel=funnel_path(out),
        sampled={env.env_id: dict(env.sampled) for env in envs if env.sampled},
        sample_rows=config.sample_rows,
        told_apart=told_apart,
        solver=solver,
    )
    funnel = report.funnel_steps().to_dict()
    funnel["told_apart"] = told_apart
    if solver is not None:
        funnel["solver"] = solver.to_dict()
    if report.sampled:  # what the tasks were built on, for a reader of the run folder
        funnel["sample"] = {
            "rows": config.sample_rows,
            "seed": config.seed,
            "environments": {
                env: {table: list(counts) for table, counts in sorted(tables.items())}
                for env, tables in sorted(report.sampled.items())
            },
        }
    write_json_atomic(funnel_path(out), funnel)
    return report


def _tell_apart_shared(tasks: list[Task]) -> tuple[list[Task], int]:
    """``tasks`` with the question of every task whose visible question another shares naming the tables
    its program reads (the draw already rejected those that would still be equal); how many changed."""
    counts = Counter(visible_key(t) for t in tasks)
    out = [tell_apart(t) if counts[visible_key(t)] > 1 else t for t in tasks]
    return out, sum(a is not b for a, b in zip(tasks, out, strict=True))


def _run_on(executor: Executor, spec: WorkerSpec, jobs: list[_Job]) -> list[_JobResult]:
    """One round of jobs on ``executor``; results in the order they finished."""

    async def collect() -> list[_JobResult]:
        stream = executor.map_unordered(spec, jobs)
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            return [outcome.result async for outcome in stream]

    return asyncio.run(collect())


def _cost(env: Environment, n_tasks: int) -> float:
    """Rough cost of a job, to start the big environments first (better balance across workers)."""
    return env.n_rows * 0.01 + n_tasks

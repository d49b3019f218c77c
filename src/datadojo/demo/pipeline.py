"""``datadojo demo``: the product end to end on the bundled example data, with no model and no network.

Why: a newcomer should see DataDojo do its job — data in, verifiable tasks, programs run in the sandbox,
scores, an agent loop, a report — with one command, before serving a model. Every stage is the real code
path, not a mock:

1. **examples** — the example data (``examples/make_examples.py``; generated when absent);
2. **profile** — each example source profiled as the agent's system prompt shows it
   (:func:`datadojo.corpus.render_file_profile`, the budget of :class:`~datadojo.agent.AgentConfig`);
3. **build** — EnvLunch warm-up tasks over the shop database and the sales table, each with K hidden
   counterfactual copies (:func:`datadojo.synth.envlunch.build.build_tasks`);
4. **solve** — the reference query-by-output solver on every task (:mod:`datadojo.synth.envlunch.solver`);
5. **score** — every solver program run in the sandbox in every copy and rewarded by EnvLunch Eq. (4)
   (:func:`~datadojo.reward.envlunch.score_trajectories`), written as a run folder with its own report
   (:func:`~datadojo.synth.envlunch.report.write_warmup_report`);
6. **text2sql** — the oracle agent (gold SQL through the full agent loop and sandbox) on the bundled
   ``shop-sql`` set, scored by execution accuracy (:func:`datadojo.eval.harness.run_eval`);
7. **report** — ``OUT/report.html`` linking all of it (:mod:`datadojo.demo.page`) and ``OUT/demo.json``.

**Budgets are counts, not seconds**: the solver gets ``solver_candidates`` compositions per task and no
time limit, so a run's figures depend on the seed alone, never on the machine's speed. The defaults keep
a run under about a minute on 2 cores.

**The output folder** is the demo's: a rerun replaces a previous demo there; a folder holding anything
else is refused rather than mixed with demo files.
"""

from __future__ import annotations

import asyncio
import math
import os
import shlex
import shutil
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from datadojo.config import Settings
from datadojo.demo.examples import EXAMPLE_SOURCES, DemoError, ExampleData, ensure_example_data, find_examples
from datadojo.demo.result import DemoResult, StageResult

__all__ = ["STAGES", "DemoConfig", "DemoProgress", "DemoResult", "StageResult", "next_commands", "run_demo"]

#: The stages in order: (name, what it does).
STAGES: tuple[tuple[str, str], ...] = (
    ("examples", "example data"),
    ("profile", "profile the files (what the agent's prompt shows)"),
    ("build", "EnvLunch warm-up tasks + counterfactual copies"),
    ("solve", "reference solver (query-by-output search)"),
    ("score", "run every program in the sandbox, in every copy"),
    ("text2sql", "oracle agent on shop-sql (agent loop + sandbox)"),
    ("report", "HTML report"),
)
STAGE_TITLES = dict(STAGES)

#: ``progress(stage, done, total)``: called with ``done = 0`` when a stage starts, then as it advances.
DemoProgress = Callable[[str, int, int], None]

#: The files the demo writes in its folder (a rerun removes these and nothing else).
DEMO_OUTPUTS: tuple[str, ...] = ("examples", "profiles", "warmup", "text2sql", "report.html", "demo.json")
WARMUP_SOURCES: tuple[str, ...] = ("shop.sqlite", "sales.csv")


class DemoConfig(Settings):
    """What the demo runs. ``n_tasks`` warm-up tasks (EnvLunch §4 uses 1,600; a demo needs a handful),
    ``solver_candidates`` compositions per task for the reference solver (a count, so results do not depend
    on machine speed), ``workers`` processes for the task build, ``concurrency`` sandboxes at once."""

    out: str | Path = Field(
        Path("runs/demo"),
        description="folder for everything the demo writes (a previous demo there is replaced)",
    )
    examples: str | Path | None = Field(
        None,
        description="the examples folder of a DataDojo checkout (default: ./examples, else the installed "
        "checkout's, else OUT/examples written by the packaged generator)",
    )
    n_tasks: int = Field(12, description="EnvLunch warm-up tasks to build and solve")
    solver_candidates: int = Field(120, description="reference-solver budget: compositions tried per task")
    seed: int = Field(0, description="everything is reproducible from the seed")
    workers: int = Field(2, description="processes for the task build")
    concurrency: int = Field(2, description="sandboxes at once")

    @model_validator(mode="after")
    def _check(self) -> DemoConfig:
        for name in ("n_tasks", "solver_candidates", "workers", "concurrency"):
            if getattr(self, name) < 1:
                raise DemoError(f"{name} must be >= 1, got {getattr(self, name)}")
        return self


def _machine() -> dict[str, Any]:
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not on every platform
        load = None
    return {"cpus": os.cpu_count(), "load_average": load}


def _prepare_out(out: Path) -> None:
    """Make ``out`` the demo's folder: new, empty, or a previous demo (whose files are replaced)."""
    if out.exists() and not out.is_dir():
        raise DemoError(f"{out}: exists and is not a folder; pass another --out")
    if out.is_dir() and any(out.iterdir()):
        if not (out / "demo.json").is_file():
            raise DemoError(
                f"{out}: not empty and not a previous demo (no demo.json); pass another --out or empty it"
            )
        for name in DEMO_OUTPUTS:
            p = out / name
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
    out.mkdir(parents=True, exist_ok=True)


def _rel(path: Path, base: Path) -> str:
    return os.path.relpath(path, base)


def _shown(path: Path) -> str:
    """A path as a user types it: relative to the working directory when below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def next_commands(data: Path, out: Path) -> list[dict[str, str]]:
    """What to try next (``what`` it does, the ``command``): the same jobs with a served model."""

    def q(path: Path) -> str:
        return shlex.quote(_shown(path))

    model = "openai:MODEL@http://localhost:8000/v1"
    db, csv = q(data / "shop.sqlite"), q(data / "sales.csv")
    return [
        {
            "what": "ask one question about a file; every turn is shown live",
            "command": f'datadojo ask {csv} "Which region sold the most units in Q3 2024?" --model {model}',
        },
        {
            "what": "the shop-sql set with a model: 3 trials per question, pass@k, a report",
            "command": f"datadojo eval shop-sql --data {db} --model {model} -n 3 --out runs/shop-sql",
        },
        {
            "what": "warm-up tasks at the EnvLunch paper's scale (1,600), for training",
            "command": f"datadojo warmup build {db} {csv} --n 1600 --out runs/warmup/tasks.jsonl",
        },
        {
            "what": "rebuild this demo's text-to-SQL report",
            "command": f"datadojo report {q(out / 'text2sql')}",
        },
    ]


# --- stages ---------------------------------------------------------------------------------------------


class _Stages:
    """Runs the stages in order, timing each and reporting progress."""

    def __init__(self, config: DemoConfig, progress: DemoProgress | None) -> None:
        self.cfg = config
        self.out = Path(config.out)
        self.progress = progress or (lambda _s, _d, _t: None)
        self.results: list[StageResult] = []

    def _stage(self, name: str, total: int) -> float:
        self.progress(name, 0, total)
        return time.perf_counter()

    def _done(
        self, name: str, start: float, headline: str, figures: dict[str, Any], link: Path | None
    ) -> None:
        rel = _rel(link, self.out) if link is not None else None
        self.results.append(
            StageResult(name, STAGE_TITLES[name], time.perf_counter() - start, headline, figures, rel)
        )

    def examples(self) -> ExampleData:
        start = self._stage("examples", 1)
        own = self.out / "examples"  # written by the packaged generator when there is no checkout
        root = find_examples(self.cfg.examples, fallback=own)
        ex = ensure_example_data(root, packaged=root == own)
        self.progress("examples", 1, 1)
        what = "generated with make_examples.py" if ex.generated else "present"
        self._done(
            "examples",
            start,
            f"{len(EXAMPLE_SOURCES)} sources in {_shown(ex.data)} ({what})",
            {"data": str(ex.data), "generated": ex.generated, "sources": list(EXAMPLE_SOURCES)},
            None,
        )
        return ex

    def profile(self, ex: ExampleData) -> None:
        from datadojo.agent import AgentConfig
        from datadojo.corpus import profile_file, profile_folder, render_file_profile, render_folder_profile

        budget = AgentConfig().profile_chars
        folder = self.out / "profiles"
        folder.mkdir(parents=True, exist_ok=True)
        start = self._stage("profile", len(EXAMPLE_SOURCES))
        files: list[dict[str, Any]] = []
        for i, name in enumerate(EXAMPLE_SOURCES, 1):
            path = ex.path(name)
            if path.is_dir():
                fp = profile_folder(path)
                text = render_folder_profile(fp, budget)
                tables = [t for f in fp.files for t in f.tables]
                kind, error = "folder", None
            else:
                prof = profile_file(path)
                text = render_file_profile(prof, budget)
                tables, kind, error = prof.tables, prof.kind, prof.error
            target = folder / f"{name}.txt"
            target.write_text(text + "\n", encoding="utf-8")
            files.append(
                {
                    "name": name,
                    "kind": kind,
                    "tables": len(tables),
                    "rows": sum(t.n_rows for t in tables),
                    "chars": len(text),
                    "error": error,
                    "profile": _rel(target, self.out),
                }
            )
            self.progress("profile", i, len(EXAMPLE_SOURCES))
        bad = [f["name"] for f in files if f["error"]]
        if bad:
            raise DemoError(f"profile: cannot read {', '.join(bad)} in {ex.data}")
        n_tables = sum(f["tables"] for f in files)
        self._done(
            "profile",
            start,
            f"{len(files)} sources, {n_tables} tables, {sum(f['rows'] for f in files):,} rows profiled",
            {"files": files, "tables": n_tables, "budget_chars": budget},
            folder,
        )

    def build(self, ex: ExampleData) -> Path:
        from datadojo.synth.envlunch.build import BuildConfig, build_tasks, load_environments
        from datadojo.synth.envlunch.environment import EnvError

        n = self.cfg.n_tasks
        start = self._stage("build", n)
        tasks_path = self.out / "warmup" / "tasks.jsonl"
        tasks_path.parent.mkdir(parents=True, exist_ok=True)
        problems: list[str] = []
        conf = BuildConfig(n=n, seed=self.cfg.seed, workers=self.cfg.workers)
        envs = load_environments(
            [ex.path(s) for s in WARMUP_SOURCES],
            on_error=problems.append,
            sample_rows=conf.sample_rows,
            seed=conf.seed,
        )
        if problems or not envs:
            raise DemoError("build: " + ("; ".join(problems) or "no environment loaded"))
        try:
            report = build_tasks(
                envs,
                tasks_path,
                conf,
                progress=lambda done, total: self.progress("build", done, total),
            )
        except EnvError as exc:
            raise DemoError(f"build: {exc}") from exc
        if not report.tasks:
            raise DemoError(f"build: no task could be made from {', '.join(WARMUP_SOURCES)} in {ex.data}")
        by_backend = Counter(t.extra["backend"] for t in report.tasks)
        copies = sorted({len(t.extra["copies"]) for t in report.tasks})
        self._done(
            "build",
            start,
            f"{len(report.tasks)} tasks ({by_backend['sql']} SQL, {by_backend['pandas']} pandas), "
            f"{'/'.join(map(str, copies))} hidden copies each",
            {
                "tasks": len(report.tasks),
                "sql": by_backend["sql"],
                "pandas": by_backend["pandas"],
                "copies_per_task": copies,
                "environments": report.envs_used,
                "draws": report.draws,
                "rejections": dict(report.rejections),
                "missing": report.missing,
            },
            tasks_path,
        )
        return tasks_path

    def solve(self, tasks_path: Path) -> tuple[list[Any], list[Any]]:
        from datadojo.jsonl import read_tasks, write_jsonl_atomic
        from datadojo.reward.envlunch import task_info
        from datadojo.synth.envlunch.solver import SolverConfig, solve, solver_trajectory

        infos = [task_info(t, tasks_path) for t in read_tasks(tasks_path)]
        config = SolverConfig(
            max_candidates=self.cfg.solver_candidates, time_limit_s=math.inf, seed=self.cfg.seed
        )
        start = self._stage("solve", len(infos))
        trajs, candidates = [], 0
        for i, info in enumerate(infos, 1):
            res = solve([info], config)[0]
            candidates += res.candidates
            trajs.append(solver_trajectory(info, res))
            self.progress("solve", i, len(infos))
        path = tasks_path.with_name("solver.jsonl")
        write_jsonl_atomic(path, trajs)
        found = sum(t.final_answer is not None for t in trajs)
        self._done(
            "solve",
            start,
            f"a program for {found}/{len(trajs)} tasks ({candidates:,} candidates tried)",
            {"found": found, "tasks": len(trajs), "candidates": candidates,
             "max_candidates": self.cfg.solver_candidates},
            path,
        )  # fmt: skip
        return infos, trajs

    def score(self, tasks_path: Path, infos: list[Any], trajs: list[Any]) -> None:
        from datadojo.reward.registry import RewardSpec, envlunch_records
        from datadojo.synth.envlunch.report import write_warmup_report

        programs = sum(t.final_answer is not None for t in trajs)
        start = self._stage("score", programs)
        executor = _CountingExecutor(
            lambda done: self.progress("score", done, programs), self.cfg.concurrency
        )
        try:
            by_id = {i.task.id: i.task for i in infos}
            unknown = [t.task_id for t in trajs if t.task_id not in by_id]
            if unknown:
                raise ValueError(f"task {unknown[0]!r}: no such EnvLunch task in the task file")
            spec = RewardSpec(name="envlunch", tasks_path=str(tasks_path))
            records = envlunch_records([(by_id[t.task_id], t) for t in trajs], spec, executor=executor)
        except ValueError as exc:
            raise DemoError(f"score: {exc}") from exc
        html, _md = write_warmup_report(tasks_path.parent / "report", tasks_path, trajs, records)
        info_of = {i.task.id: i for i in infos}
        runs = sum(len(info_of[t.task_id].copy_dirs) for t in trajs if t.final_answer is not None)
        solved = sum(r.solved for r in records)
        answered = {t.task_id for t in trajs if t.final_answer is not None}
        per_backend = {}
        for backend in ("sql", "pandas"):
            rs = [r for r in records if r.backend == backend]
            if rs:
                per_backend[backend] = {
                    "tasks": len(rs),
                    "found": sum(r.task_id in answered for r in rs),
                    "solved": sum(r.solved for r in rs),
                    "mean_reward": statistics.fmean(r.reward for r in rs),
                }
        errors = sum(1 for r in records if r.errors and r.errors != ["no program submitted"])
        self._done(
            "score",
            start,
            f"{solved}/{len(records)} solved in every copy ({runs} sandbox runs), mean R "
            f"{statistics.fmean(r.reward for r in records):.3f}",
            {
                "programs": programs,
                "sandbox_runs": runs,
                "solved": solved,
                "tasks": len(records),
                "pass@1": solved / len(records) if records else 0.0,
                "mean_reward": statistics.fmean(r.reward for r in records) if records else 0.0,
                "programs_with_errors": errors,
                "by_backend": per_backend,
            },
            html,
        )

    def text2sql(self, ex: ExampleData) -> None:
        from datadojo.agent import RolloutSummary
        from datadojo.eval.harness import EvalConfig, EvalError, run_eval
        from datadojo.types import Task, Trajectory

        start = self._stage("text2sql", 0)
        total = [0]

        def on_tasks(tasks: list[Task]) -> None:
            total[0] = len(tasks)
            self.progress("text2sql", 0, len(tasks))

        def on_trajectory(_t: Trajectory, s: RolloutSummary) -> None:
            self.progress("text2sql", s.finished + s.skipped, total[0])

        cfg = EvalConfig(
            bench="shop-sql",
            data=ex.path("shop.sqlite"),
            out=self.out / "text2sql",
            agent="oracle",
            n_trials=1,
            concurrency=self.cfg.concurrency,
        )
        try:
            result = asyncio.run(run_eval(cfg, on_tasks=on_tasks, on_trajectory=on_trajectory))
        except (EvalError, OSError) as exc:
            raise DemoError(f"text2sql: {exc}") from exc
        s = result.summary
        m, official = s["metrics"], s.get("official") or {}
        self._done(
            "text2sql",
            start,
            f"execution accuracy {official.get('accuracy', 0.0):.0%} on {s['n_tasks']} questions, "
            f"{m.get('avg_turns') or 0:.1f} turns each",
            {
                "tasks": s["n_tasks"],
                "execution_accuracy": official.get("accuracy"),
                "table_match": official.get("table_match"),
                "gold_errors": official.get("gold_errors"),
                "success_rate": m.get("success_rate"),
                "avg_turns": m.get("avg_turns"),
                "per_category": {c: v.get("pass@1") for c, v in (m.get("per_category") or {}).items()},
            },
            result.paths.get("report_html"),
        )


class _CountingExecutor:
    """The sandbox executor, counting finished submissions for the progress bar."""

    def __init__(self, on_done: Callable[[int], None], concurrency: int) -> None:
        from datadojo.reward.programs import SandboxExecutor

        count = [0]

        class _Counting(SandboxExecutor):
            async def _job(self, pool: Any, job: Any) -> Any:
                out = await super()._job(pool, job)
                count[0] += 1
                on_done(count[0])
                return out

        self._inner = _Counting(concurrency=concurrency)

    def run(self, jobs: Sequence[Any]) -> list[Any]:
        return self._inner.run(jobs)


def run_demo(config: DemoConfig | None = None, *, progress: DemoProgress | None = None) -> DemoResult:
    """Run every stage (module docstring) into ``config.out``; return what each did.

    Writes ``OUT/report.html`` (links to every part), ``OUT/demo.json`` (this result), ``OUT/profiles/``,
    ``OUT/warmup/`` (tasks, copies, solver trajectories, scored run folder with its report) and
    ``OUT/text2sql/`` (an evaluation run folder). Raises :class:`DemoError` naming the stage at fault.
    """
    from datadojo.demo.page import write_page
    from datadojo.fs import write_json_atomic

    config = config or DemoConfig()
    out = Path(config.out)
    began = time.perf_counter()
    machine = _machine()
    _prepare_out(out)
    # marks the folder as the demo's from the start, so a rerun after an interruption replaces it
    write_json_atomic(out / "demo.json", {"status": "running", "out": str(out)})
    st = _Stages(config, progress)
    ex = st.examples()
    st.profile(ex)
    tasks_path = st.build(ex)
    infos, trajs = st.solve(tasks_path)
    st.score(tasks_path, infos, trajs)
    st.text2sql(ex)
    start = st._stage("report", 1)
    result = DemoResult(
        out=out,
        report=out / "report.html",
        stages=st.results,
        seconds=time.perf_counter() - began,
        machine=machine,
        next_commands=next_commands(ex.data, out),
        config={
            **config.to_dict(json=True),  # paths as strings
            "examples": str(ex.root),
        },
    )
    html = write_page(result)  # shows the stages before it and the time up to it
    st._done("report", start, f"{_shown(html)}", {}, html)
    result.seconds = time.perf_counter() - began
    write_json_atomic(out / "demo.json", result.to_dict(), default=str)
    st.progress("report", 1, 1)
    return result

"""The stages of ``datadojo demo`` as a stage graph of the recipe engine (:mod:`datadojo.recipes.engine`).

Why the engine: one orchestrator for every multi-stage job — the same timing, progress, per-stage folders,
manifests and in → out counts as the paper recipes, instead of a stage runner of the demo's own. Each stage
writes into its engine folder (``OUT/stages/<stage>/<key>/``) and returns its manifest: the one-line
``headline`` the terminal and the page show, its ``figures``, the file the page links to (``link``), and the
``files`` later stages and the page read.

1. **examples** — the example data (``examples/make_examples.py``; generated when absent);
2. **profile** — each example source profiled as the agent's system prompt shows it
   (:func:`datadojo.corpus.render_file_profile`, the budget of :class:`~datadojo.agent.AgentConfig`);
3. **build** — EnvLunch warm-up tasks over the shop database and the sales table, each with K hidden
   counterfactual copies (:func:`datadojo.synth.envlunch.build.build_tasks`);
4. **solve** — the reference query-by-output solver on every task (:mod:`datadojo.synth.envlunch.solver`);
5. **score** — every solver program run in the sandbox in every copy and rewarded by EnvLunch Eq. (4)
   (:func:`~datadojo.reward.registry.envlunch_records`), written as a run folder with its own report;
6. **text2sql** — the oracle agent (gold SQL through the full agent loop and sandbox) on the bundled
   ``shop-sql`` set, scored by execution accuracy (:func:`datadojo.eval.harness.run_eval`).

The page (``report``) is written after them, from their manifests (:mod:`datadojo.demo.page`).
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from datadojo.demo.config import DemoConfig
from datadojo.demo.examples import EXAMPLE_SOURCES, DemoError, ExampleData, ensure_example_data, find_examples
from datadojo.recipes.engine import Stage, StageContext

__all__ = ["DEMO_STAGES", "STAGES", "WARMUP_SOURCES", "demo_stages"]

#: The stages in order: (name, what it does); ``report`` is the page written after the engine's stages.
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
WARMUP_SOURCES: tuple[str, ...] = ("shop.sqlite", "sales.csv")
DEMO_CODE = ("datadojo.demo.stages",)


def _counts(n_in: int, what_in: str, n_out: int, what_out: str) -> dict[str, Any]:
    """In → out counts in the engine's manifest form (as the recipe stages record them)."""
    return {"in": n_in, "in_what": what_in, "out": n_out, "out_what": what_out}


def _manifest(
    headline: str, figures: dict[str, Any], link: Path | None, files: dict[str, Path], counts: Any = None
) -> dict[str, Any]:
    return {
        "headline": headline,
        "figures": figures,
        "link": str(link) if link is not None else None,
        "files": {k: str(v) for k, v in files.items()},
        **({"counts": counts} if counts else {}),
    }


def _examples(ctx: StageContext) -> ExampleData:
    """The example data of the run (the ``examples`` stage's manifest)."""
    f = ctx.dep("examples")["files"]
    return ExampleData(Path(f["root"]), Path(f["data"]), bool(ctx.dep("examples")["figures"]["generated"]))


def _shown(path: Path) -> str:
    """A path as a user types it: relative to the working directory when below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _run_examples(cfg: DemoConfig) -> Callable[[StageContext], dict[str, Any]]:
    def run(ctx: StageContext) -> dict[str, Any]:
        ctx.progress(0, 1)
        own = Path(cfg.out) / "examples"  # written by the packaged generator when there is no checkout
        root = find_examples(cfg.examples, fallback=own)
        ex = ensure_example_data(root, packaged=root == own)
        ctx.progress(1, 1)
        what = "generated with make_examples.py" if ex.generated else "present"
        return _manifest(
            f"{len(EXAMPLE_SOURCES)} sources in {_shown(ex.data)} ({what})",
            {"data": str(ex.data), "generated": ex.generated, "sources": list(EXAMPLE_SOURCES)},
            None,
            {"root": ex.root, "data": ex.data},
            _counts(len(EXAMPLE_SOURCES), "sources", len(EXAMPLE_SOURCES), "present"),
        )

    return run


def _run_profile(ctx: StageContext) -> dict[str, Any]:
    from datadojo.corpus import profile_file, profile_folder, render_file_profile, render_folder_profile
    from datadojo.env import AgentConfig

    ex = _examples(ctx)
    budget = AgentConfig().profile_chars
    ctx.progress(0, len(EXAMPLE_SOURCES))
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
        target = ctx.out / f"{name}.txt"
        target.write_text(text + "\n", encoding="utf-8")
        files.append(
            {
                "name": name,
                "kind": kind,
                "tables": len(tables),
                "rows": sum(t.n_rows for t in tables),
                "chars": len(text),
                "error": error,
                "profile": str(target),
            }
        )
        ctx.progress(i, len(EXAMPLE_SOURCES))
    bad = [f["name"] for f in files if f["error"]]
    if bad:
        raise DemoError(f"profile: cannot read {', '.join(bad)} in {ex.data}")
    n_tables = sum(f["tables"] for f in files)
    return _manifest(
        f"{len(files)} sources, {n_tables} tables, {sum(f['rows'] for f in files):,} rows profiled",
        {"files": files, "tables": n_tables, "budget_chars": budget},
        ctx.out,
        {"profiles": ctx.out},
        _counts(len(files), "sources", len(files), "profiles"),
    )


def _run_build(cfg: DemoConfig) -> Callable[[StageContext], dict[str, Any]]:
    def run(ctx: StageContext) -> dict[str, Any]:
        from datadojo.synth.envlunch.build import BuildConfig, build_tasks, load_environments
        from datadojo.synth.envlunch.environment import EnvError

        ex = _examples(ctx)
        ctx.progress(0, cfg.n_tasks)
        tasks_path = ctx.out / "tasks.jsonl"
        problems: list[str] = []
        conf = BuildConfig(n=cfg.n_tasks, seed=cfg.seed, workers=cfg.workers)
        envs = load_environments(
            [ex.path(s) for s in WARMUP_SOURCES],
            on_error=problems.append,
            sample_rows=conf.sample_rows,
            seed=conf.seed,
        )
        if problems or not envs:
            raise DemoError("build: " + ("; ".join(problems) or "no environment loaded"))
        try:
            report = build_tasks(envs, tasks_path, conf, progress=ctx.progress)
        except EnvError as exc:
            raise DemoError(f"build: {exc}") from exc
        if not report.tasks:
            raise DemoError(f"build: no task could be made from {', '.join(WARMUP_SOURCES)} in {ex.data}")
        by_backend = Counter(t.extra["backend"] for t in report.tasks)
        copies = sorted({len(t.extra["copies"]) for t in report.tasks})
        return _manifest(
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
            {"tasks": tasks_path, "copies": tasks_path.with_name("tasks.copies")},
            _counts(report.draws, "draws", len(report.tasks), "warm-up tasks"),
        )

    return run


def _run_solve(cfg: DemoConfig) -> Callable[[StageContext], dict[str, Any]]:
    def run(ctx: StageContext) -> dict[str, Any]:
        from datadojo.jsonl import read_tasks, write_jsonl_atomic
        from datadojo.reward.envlunch import task_info
        from datadojo.synth.envlunch.solver import SolverConfig, solve, solver_trajectory

        tasks_path = Path(ctx.dep("build")["files"]["tasks"])
        infos = [task_info(t, tasks_path) for t in read_tasks(tasks_path)]
        config = SolverConfig(max_candidates=cfg.solver_candidates, time_limit_s=math.inf, seed=cfg.seed)
        ctx.progress(0, len(infos))
        trajs, candidates = [], 0
        for i, info in enumerate(infos, 1):
            res = solve([info], config)[0]
            candidates += res.candidates
            trajs.append(solver_trajectory(info, res))
            ctx.progress(i, len(infos))
        path = ctx.out / "solver.jsonl"
        write_jsonl_atomic(path, trajs)
        found = sum(t.final_answer is not None for t in trajs)
        return _manifest(
            f"a program for {found}/{len(trajs)} tasks ({candidates:,} candidates tried)",
            {
                "found": found,
                "tasks": len(trajs),
                "candidates": candidates,
                "max_candidates": cfg.solver_candidates,
            },
            path,
            {"solver": path},
            _counts(len(trajs), "tasks", found, "programs found"),
        )

    return run


def _run_score(cfg: DemoConfig) -> Callable[[StageContext], dict[str, Any]]:
    def run(ctx: StageContext) -> dict[str, Any]:
        from datadojo.jsonl import read_tasks, read_trajectories
        from datadojo.reward.envlunch import task_info
        from datadojo.reward.registry import RewardSpec, envlunch_records
        from datadojo.synth.envlunch.report import write_warmup_report

        tasks_path = Path(ctx.dep("build")["files"]["tasks"])
        infos = [task_info(t, tasks_path) for t in read_tasks(tasks_path)]
        trajs = list(read_trajectories(ctx.dep("solve")["files"]["solver"]))
        programs = sum(t.final_answer is not None for t in trajs)
        ctx.progress(0, programs)
        executor = _CountingExecutor(lambda done: ctx.progress(done, programs), cfg.concurrency)
        try:
            by_id = {i.task.id: i.task for i in infos}
            unknown = [t.task_id for t in trajs if t.task_id not in by_id]
            if unknown:
                raise ValueError(f"task {unknown[0]!r}: no such EnvLunch task in the task file")
            spec = RewardSpec(name="envlunch", tasks_path=str(tasks_path))
            records = envlunch_records([(by_id[t.task_id], t) for t in trajs], spec, executor=executor)
        except ValueError as exc:
            raise DemoError(f"score: {exc}") from exc
        html, _md = write_warmup_report(ctx.out / "report", tasks_path, trajs, records)
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
        mean = statistics.fmean(r.reward for r in records) if records else 0.0
        return _manifest(
            f"{solved}/{len(records)} solved in every copy ({runs} sandbox runs), mean R {mean:.3f}",
            {
                "programs": programs,
                "sandbox_runs": runs,
                "solved": solved,
                "tasks": len(records),
                "pass@1": solved / len(records) if records else 0.0,
                "mean_reward": mean,
                "programs_with_errors": errors,
                "by_backend": per_backend,
            },
            html,
            {"scored_report": html, "scores": html.with_name("scores.jsonl")},
            _counts(programs, "programs", solved, "solved in every copy"),
        )

    return run


def _run_text2sql(cfg: DemoConfig) -> Callable[[StageContext], dict[str, Any]]:
    def run(ctx: StageContext) -> dict[str, Any]:
        from datadojo.agent import RolloutSummary
        from datadojo.eval.harness import EvalConfig, EvalError, run_eval
        from datadojo.types import Task, Trajectory

        ex = _examples(ctx)
        ctx.progress(0, 0)
        total = [0]

        def on_tasks(tasks: list[Task]) -> None:
            total[0] = len(tasks)
            ctx.progress(0, len(tasks))

        def on_trajectory(_t: Trajectory, s: RolloutSummary) -> None:
            ctx.progress(s.finished + s.skipped, total[0])

        conf = EvalConfig(
            bench="shop-sql",
            data=ex.path("shop.sqlite"),
            out=ctx.out / "eval",
            agent="oracle",
            n_trials=1,
            concurrency=cfg.concurrency,
        )
        try:
            result = asyncio.run(run_eval(conf, on_tasks=on_tasks, on_trajectory=on_trajectory))
        except (EvalError, OSError) as exc:
            raise DemoError(f"text2sql: {exc}") from exc
        s = result.summary
        m, official = s["metrics"], s.get("official") or {}
        page = result.paths.get("report_html")
        return _manifest(
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
            Path(page) if page else None,
            {"eval": ctx.out / "eval"},
            _counts(
                s["n_tasks"], "questions", round((official.get("accuracy") or 0.0) * s["n_tasks"]), "right"
            ),
        )

    return run


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


def demo_stages(cfg: DemoConfig) -> tuple[Stage, ...]:
    """The demo's stage graph for ``cfg``; each stage's key holds the settings that change what it makes
    (the task count, the seed, the solver budget; not the concurrency)."""
    build = {"n_tasks": cfg.n_tasks, "seed": cfg.seed}
    return (
        Stage(
            "examples",
            STAGE_TITLES["examples"],
            _run_examples(cfg),
            settings=lambda _c: {"examples": str(cfg.examples)},
            code=("datadojo.demo.examples", "datadojo.demo.make_examples"),
        ),
        Stage(
            "profile",
            STAGE_TITLES["profile"],
            _run_profile,
            deps=("examples",),
            code=(*DEMO_CODE, "datadojo.corpus"),
        ),
        Stage(
            "build",
            STAGE_TITLES["build"],
            _run_build(cfg),
            deps=("examples",),
            settings=lambda _c: build,
            code=(*DEMO_CODE, "datadojo.synth.envlunch"),
        ),
        Stage(
            "solve",
            STAGE_TITLES["solve"],
            _run_solve(cfg),
            deps=("build",),
            settings=lambda _c: {"candidates": cfg.solver_candidates, "seed": cfg.seed},
            code=(*DEMO_CODE, "datadojo.synth.envlunch"),
        ),
        Stage(
            "score",
            STAGE_TITLES["score"],
            _run_score(cfg),
            deps=("build", "solve"),
            code=(*DEMO_CODE, "datadojo.synth.envlunch", "datadojo.sandbox"),
        ),
        Stage(
            "text2sql",
            STAGE_TITLES["text2sql"],
            _run_text2sql(cfg),
            deps=("examples",),
            code=(*DEMO_CODE, "datadojo.eval", "datadojo.agent", "datadojo.bench"),
        ),
    )


#: The engine stages' names, in order (the page's ``report`` comes after them).
DEMO_STAGES: tuple[str, ...] = tuple(name for name, _ in STAGES if name != "report")

"""The DataMind recipe (arXiv 2509.25084): corpus → query synthesis, sampling, consistency judging and
reflection → curation (one of Fig. 4's strategies) → SFT → RL on the consistent queries (DAPO + γ mixing)
→ eval of base, SFT and RL → the Table 1-shaped report.

``[stages.synthesis]`` holds :class:`~datadojo.synth.datamind.DataMindConfig` keys (plus ``compose``,
default true); ``[stages.curation]`` ``strategy`` (``con-select`` default: DataMind's choice, §3.2);
``[stages.corpus]`` :class:`~datadojo.corpus.ScanConfig` keys.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from datadojo.config import Settings
from datadojo.jsonl import read_tasks, read_trajectories, write_jsonl_atomic
from datadojo.recipes.checks import Section, closest
from datadojo.recipes.config import RecipeConfig, model_identity
from datadojo.recipes.engine import RecipeError, Stage, StageContext
from datadojo.recipes.stages import (
    count_lines,
    counts,
    eval_section,
    eval_stages,
    record_usage,
    rl_section,
    rl_stage,
    rl_tasks_section,
    rl_tasks_stage,
    served_models,
    sft_section,
    sft_stage,
)

__all__ = ["SECTIONS", "STAGES", "DataMindCuration"]

SYNTH_CODE = ("datadojo.synth.datamind", "datadojo.agent", "datadojo.protocol")


def _inputs(cfg: RecipeConfig) -> list[Path]:
    return [cfg.path(p) for p in cfg.inputs]


def _run_corpus(ctx: StageContext) -> dict[str, Any]:
    from datadojo.corpus.config import ScanConfig
    from datadojo.corpus.scan import read_corpus, scan_corpus

    out = ctx.out / "corpus.jsonl"
    summary = scan_corpus(
        _inputs(ctx.config), out, ScanConfig.model_validate(ctx.config.stage("corpus")), executor=ctx.executor
    )
    latest = {r.path: r for r in read_corpus(out)}
    accepted = sorted(p for p, r in latest.items() if r.accepted)
    if not accepted:
        raise RecipeError(f"corpus: no usable data file among {', '.join(ctx.config.inputs)} (see {out})")
    return {
        "counts": counts(len(latest), "files", len(accepted), "accepted"),
        "corpus": str(out),
        "accepted": accepted,
        "seen": summary.seen,
        "rejected": len(latest) - len(accepted),
    }


def _dm_config(cfg: RecipeConfig) -> Any:
    from datadojo.synth.datamind import DataMindConfig

    section = cfg.stage("synthesis")
    section.pop("compose", None)
    section.pop("max_failed_fraction", None)
    if isinstance(section.get("taxonomy"), str):  # a path: read against the recipe file's folder
        section["taxonomy"] = str(cfg.path(section["taxonomy"]))
    return DataMindConfig.model_validate(section)


def _synthesis_inputs(cfg: RecipeConfig) -> list[Path]:
    """The taxonomy file the synthesis reads, when the recipe names one (an edit of it reruns synthesis)."""
    taxonomy = cfg.stage("synthesis").get("taxonomy")
    return [cfg.path(taxonomy)] if isinstance(taxonomy, str) else []


class DataMindCuration(Settings):
    """``[stages.curation]`` of the DataMind recipe: which of Fig. 4's strategies makes the SFT set."""

    strategy: str = Field("con-select", description="con-select | random-select | non-select | non-con")

    @field_validator("strategy")
    @classmethod
    def _known(cls, value: str) -> str:
        from datadojo.synth.datamind.config import STRATEGIES

        if value not in STRATEGIES:
            raise ValueError(
                f"strategy {value!r} is not one of {', '.join(STRATEGIES)}{closest(value, STRATEGIES)}"
            )
        return value


def _backends(cfg: RecipeConfig) -> tuple[Any, Any]:
    from datadojo.llm import load_backend

    if not cfg.models.teacher:
        raise RecipeError("synthesis: the DataMind recipe needs models.teacher")
    concurrency = _dm_config(cfg).concurrency  # the synthesis' requests in flight reach the model
    teacher = load_backend(cfg.models.teacher, concurrency=concurrency)
    judge = load_backend(cfg.models.judge, concurrency=concurrency) if cfg.models.judge else teacher
    for b in {id(teacher): teacher, id(judge): judge}.values():
        b.check_before_first_request()  # a server down since the plan: one line and exit 3, as the commands
    return teacher, judge


async def _synthesize(ctx: StageContext) -> dict[str, Any]:
    from datadojo.synth.datamind import DataMindRun
    from datadojo.synth.datamind.pipeline import (
        reflection_tasks,
        stage_compose,
        stage_judge,
        stage_queries,
        stage_sample,
    )

    cfg = _dm_config(ctx.config)
    files = ctx.dep("corpus")["accepted"]

    def hook(stage: str, done: int, total: int) -> None:
        ctx.progress(done, total)

    run = DataMindRun(files, ctx.out, cfg, progress=hook, executor=ctx.executor)
    remote = ctx.executor is not None and ctx.executor.remote
    teacher, judge = _backends(ctx.config)
    # on --executor ray the sampling rounds run on the nodes, which load the teacher from its spec string
    sampler: Any = ctx.config.models.teacher if remote else teacher
    try:
        await stage_queries(run, teacher)
        if ctx.config.stage("synthesis").get("compose", True):
            await stage_compose(run, teacher)
        await stage_sample(run, sampler, round_=0)
        await stage_judge(run, judge, round_=0)
        for r in range(1, cfg.rounds + 1):
            if not reflection_tasks(run, r):
                break
            await stage_sample(run, sampler, round_=r)
            await stage_judge(run, judge, round_=r)
    finally:
        await teacher.aclose()
        if judge is not teacher:
            await judge.aclose()
    counted = None
    if remote:  # the nodes' clients sent the sampling requests; this process's teacher never saw them
        keys = ("requests", "prompt_tokens", "completion_tokens", "failed")
        counted = {"teacher (nodes)": {k: sum(int(v[k]) for v in run.sampled.values()) for k in keys}}
    usage = record_usage(ctx, {"teacher": teacher, "judge": judge if judge is not teacher else None}, counted)
    n_queries, n_trajs = count_lines(run.paths.queries), count_lines(run.paths.trajectories)
    return {
        "counts": counts(n_queries, "queries", n_trajs, "trajectories"),
        "usage": usage,
        "folder": str(ctx.out),
        "queries": n_queries,
        "trajectories": count_lines(run.paths.trajectories),
        "verdicts": count_lines(run.paths.verdicts),
        # where each sampling round ran (executor, per-node figures): the stage record says "ray" when it did
        "sampled": {k: {"executor": v["executor"], "nodes": v["nodes"]} for k, v in run.sampled.items()},
    }


def _run_synthesis(ctx: StageContext) -> dict[str, Any]:
    manifest = asyncio.run(_synthesize(ctx))
    if not manifest["trajectories"]:
        rejected = ctx.out / "rejected.jsonl"
        see = (
            f" (see {rejected})" if rejected.exists() else f" ({manifest['queries']} queries; see {ctx.out})"
        )
        raise RecipeError(f"synthesis: no trajectory was sampled{see}")
    return manifest


#: What curation reads from the synthesis folder: linked (never appended to here) or copied (appended to).
_LINKED = ("corpus.jsonl", "queries.jsonl", "trajectories.jsonl", "verdicts.jsonl", "progress.jsonl")
_COPIED = ("rejected.jsonl", "usage.jsonl", "models.json")  # models.json: the teacher and judge of its input


def _bring(src: Path, dst: Path, link: bool) -> None:
    if not src.exists() or dst.exists():
        return
    if link:
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copy2(src, dst)


def _run_curation(ctx: StageContext) -> dict[str, Any]:
    from datadojo.synth.datamind import DataMindRun
    from datadojo.synth.datamind.pipeline import stage_curate
    from datadojo.synth.datamind.queries import load_queries

    strategy = DataMindCuration.model_validate(ctx.config.stage("curation")).strategy
    src = Path(ctx.dep("synthesis")["folder"])
    for name in _LINKED + _COPIED:
        _bring(src / name, ctx.out / name, name in _LINKED)
    title = f"DataMind curation ({strategy}) of the recipe's synthesis"
    run = DataMindRun([], ctx.out, _dm_config(ctx.config), title=title)
    summary = stage_curate(run, [strategy])
    trajs_file = run.paths.sft / f"{strategy}.trajectories.jsonl"
    trajs = list(read_trajectories(trajs_file))
    # RL tasks: each query curation kept, its answer the kept (judge-consistent) trajectory's final answer
    by_id = {q.id: q for q in load_queries(run.paths)}
    tasks, seen = [], set()
    for t in trajs:
        if t.task_id in seen or t.task_id not in by_id or not (t.final_answer or "").strip():
            continue
        seen.add(t.task_id)
        tasks.append(by_id[t.task_id].model_copy(update={"answer": t.final_answer}))
    rl_file = ctx.out / "rl_tasks.jsonl"
    write_jsonl_atomic(rl_file, tasks)
    offered = count_lines(ctx.out / "trajectories.jsonl")
    empty = None
    if not trajs:
        empty = (
            f"curation kept none of {offered} trajectories (strategy {strategy}; the funnel: "
            f"{run.paths.summary}): try another [stages.curation] strategy or more [stages.synthesis] rounds"
        )
    return {
        "empty": empty,
        "counts": counts(offered, "trajectories", len(trajs), "kept"),
        "strategy": strategy,
        "sft_data": str(trajs_file),
        "sft_records": str(run.paths.sft / f"{strategy}.jsonl"),
        "kept": len(trajs),
        "rl_tasks": str(rl_file),
        "n_rl_tasks": len(list(read_tasks(rl_file))),
        "summary": str(run.paths.summary),  # DataMind's funnel: files → queries → consistent → kept
        "kept_by_filters": summary.get("kept"),
    }


STAGES: tuple[Stage, ...] = (
    Stage(
        "corpus",
        "scan and filter the data files",
        _run_corpus,
        settings=lambda cfg: {"corpus": cfg.stage("corpus")},
        inputs=_inputs,
        code=("datadojo.corpus",),
        executor=True,
    ),
    Stage(
        "synthesis",
        "queries, sampling, consistency judge, reflection",
        _run_synthesis,
        deps=("corpus",),
        settings=lambda cfg: {
            "synthesis": cfg.stage("synthesis"),
            "teacher": model_identity(cfg.models.teacher),
            "judge": model_identity(cfg.models.judge),
        },
        inputs=_synthesis_inputs,
        servers=lambda cfg: served_models(cfg, "teacher", "judge"),
        code=SYNTH_CODE,
        executor=True,  # the sampling rounds (agent episodes) fan out; queries and judging stay here
    ),
    Stage(
        "curation",
        "rule filters and the SFT set of one strategy",
        _run_curation,
        deps=("synthesis",),
        settings=lambda cfg: {"curation": cfg.stage("curation"), "synthesis": cfg.stage("synthesis")},
        code=("datadojo.synth.datamind",),
    ),
    sft_stage(),
    rl_tasks_stage(),
    rl_stage(),
    *eval_stages(),
)


def _sections() -> tuple[Section, ...]:
    from datadojo.corpus.config import ScanConfig
    from datadojo.synth.datamind import DataMindConfig

    return (
        Section(
            "corpus",
            ScanConfig,
            build=lambda cfg: ScanConfig.model_validate(cfg.stage("corpus")),
            what="ScanConfig keys",
        ),
        Section(
            "synthesis",
            DataMindConfig,
            own=("compose", "max_failed_fraction"),
            build=_dm_config,
            what="DataMindConfig keys + compose, max_failed_fraction",
        ),
        Section(
            "curation",
            DataMindCuration,
            build=lambda cfg: DataMindCuration.model_validate(cfg.stage("curation")),
            what="strategy",
        ),
        sft_section(),
        rl_tasks_section(),
        rl_section(),
        eval_section(),
    )


#: The types of the recipe file's ``[stages.X]`` sections (checked before anything runs).
SECTIONS: tuple[Section, ...] = _sections()

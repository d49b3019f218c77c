"""The SciDataSailor recipe: dataset folders → DF-FPU tree-search exploration with strategy→tool expansion
and QC (§4) → curation (the trajectories QC kept; the QA pairs with evidence as RL tasks) → SFT → RL → eval of
base, SFT and RL → the Table 3-shaped report.

``[stages.synthesis]`` holds :class:`~datadojo.synth.sailor.SailorConfig` keys plus ``seeds`` (ids or levels
of the bundled seeds, default all), ``concurrency`` (units at once) and ``structured`` (how JSON is asked
for). The DF-FPU / branching ablations are sweeps over its keys (``stages.synthesis.fpu_reduction``,
``stages.synthesis.k_max``, ...). RL rewards answers with DataMind's reward (the tolerant matcher): the
sailor QA answers are short values.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import Field

from datadojo.config import Settings
from datadojo.jsonl import read_tasks
from datadojo.recipes.checks import Section
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

__all__ = ["SECTIONS", "STAGES", "SailorCuration"]

_OWN = ("seeds", "concurrency", "structured", "max_failed_fraction")


def _inputs(cfg: RecipeConfig) -> list[Path]:
    return [cfg.path(p) for p in cfg.inputs]


def _sailor_config(cfg: RecipeConfig) -> Any:
    from datadojo.synth.sailor import SailorConfig

    section = cfg.stage("synthesis")
    return SailorConfig.model_validate({k: v for k, v in section.items() if k not in _OWN})


class SailorCuration(Settings):
    """``[stages.curation]`` of the SciDataSailor recipe."""

    max_rl_tasks: int | None = Field(None, ge=1, description="only the first N QA pairs become RL tasks")


class _NoKeys(Settings):
    """A section without settings (the stage reads only the recipe's inputs)."""


def _run_corpus(ctx: StageContext) -> dict[str, Any]:
    folders = _inputs(ctx.config)
    bad = [str(p) for p in folders if not p.is_dir()]
    if bad:
        raise RecipeError(f"corpus: not a dataset folder: {', '.join(bad)}")
    files = {str(p): sum(1 for f in p.rglob("*") if f.is_file()) for p in folders}
    empty = [p for p, n in files.items() if n == 0]
    if empty:
        raise RecipeError(f"corpus: empty dataset folder: {', '.join(empty)}")
    return {
        "counts": counts(len(folders), "folders", sum(files.values()), "files"),
        "folders": [str(p) for p in folders],
        "files": files,
    }


async def _explore(ctx: StageContext) -> dict[str, Any]:
    from datadojo.llm import load_backend
    from datadojo.synth.sailor import load_seeds, run_sailor

    section = ctx.config.stage("synthesis")
    if not ctx.config.models.teacher:
        raise RecipeError("synthesis: the sailor recipe needs models.teacher (the exploring policy)")
    seeds = load_seeds(only=section.get("seeds"))
    remote = ctx.executor is not None and ctx.executor.remote
    # on --executor ray every unit's search runs on a node, which loads the models from their spec strings
    units = int(section.get("concurrency", 1))
    teacher = ctx.config.models.teacher
    policy: Any = teacher if remote else load_backend(teacher, concurrency=units)
    judge: Any = None
    if ctx.config.models.judge:
        judge = (
            ctx.config.models.judge if remote else load_backend(ctx.config.models.judge, concurrency=units)
        )
    for b in (policy, judge):
        if b is not None and not isinstance(b, str):
            b.check_before_first_request()  # a server down since the plan: one line and exit 3
    folders = ctx.dep("corpus")["folders"]
    try:
        run = await run_sailor(
            folders,
            seeds,
            policy=policy,
            judge=judge,
            out=_sailor_out(ctx),
            config=_sailor_config(ctx.config),
            concurrency=units,
            mode=section.get("structured", "auto"),
            progress=lambda _stage, done, total: ctx.progress(done, total),
            executor=ctx.executor,
        )
    finally:
        if not remote:
            await policy.aclose()
            if judge is not None:
                await judge.aclose()
    if remote:  # the nodes' clients sent the requests; the units' records counted them
        counts = {
            k: run.usage.get(k, 0) for k in ("requests", "prompt_tokens", "completion_tokens", "failed")
        }
        usage = record_usage(ctx, {}, {"policy+judge (nodes)": counts})
    else:
        usage = record_usage(ctx, {"policy": policy, "judge": judge})
    return {"usage": usage, "executor": run.executor, "nodes": run.nodes}


def _sailor_out(ctx: StageContext) -> Path:
    """The sailor run's own folder inside the stage's: each is a :class:`~datadojo.runs.RunFolder` with its
    own ``run.json`` (the stage's settings, the sailor search's settings)."""
    return ctx.out / "sailor"


def _run_synthesis(ctx: StageContext) -> dict[str, Any]:
    explored = asyncio.run(_explore(ctx))
    out = _sailor_out(ctx)
    manifest = {
        "counts": counts(
            count_lines(out / "qc.jsonl"),
            "QC'd trajectories",
            count_lines(out / "trajectories.jsonl"),
            "kept",
        ),
        **explored,
        "folder": str(out),
        "trajectories": count_lines(out / "trajectories.jsonl"),
        "qc": count_lines(out / "qc.jsonl"),
        "qa": count_lines(out / "qa.jsonl"),
        "meta": count_lines(out / "meta.jsonl"),
    }
    if not manifest["trajectories"]:
        raise RecipeError(f"synthesis: QC kept no trajectory (see {out / 'qc.jsonl'})")
    return manifest


def _run_curation(ctx: StageContext) -> dict[str, Any]:
    """QC already chose (§4.2): the kept trajectories are the SFT set; QA pairs with an answer are RL tasks."""
    from datadojo.jsonl import write_jsonl_atomic

    src = Path(ctx.dep("synthesis")["folder"])
    limit = ctx.config.stage("curation").get("max_rl_tasks")
    qa = [t for t in read_tasks(src / "qa.jsonl") if t.answer is not None and str(t.answer).strip()]
    if limit is not None:
        qa = qa[: int(limit)]
    rl = ctx.out / "rl_tasks.jsonl"
    write_jsonl_atomic(rl, qa)
    kept = count_lines(src / "trajectories.jsonl")
    return {
        "empty": None if kept else "QC kept no trajectory: nothing to train on",
        "counts": counts(kept, "kept trajectories", kept + len(qa), "SFT examples + RL tasks"),
        "sft_data": str(src / "trajectories.jsonl"),
        "kept": count_lines(src / "trajectories.jsonl"),
        "rl_tasks": str(rl),
        "n_rl_tasks": len(qa),
    }


STAGES: tuple[Stage, ...] = (
    Stage("corpus", "check the dataset folders", _run_corpus, inputs=_inputs),
    Stage(
        "synthesis",
        "DF-FPU exploration, QC, QA synthesis",
        _run_synthesis,
        deps=("corpus",),
        settings=lambda cfg: {
            "synthesis": cfg.stage("synthesis"),
            "teacher": model_identity(cfg.models.teacher),
            "judge": model_identity(cfg.models.judge),
        },
        servers=lambda cfg: served_models(cfg, "teacher", "judge"),
        inputs=_inputs,
        code=("datadojo.synth.sailor", "datadojo.sandbox", "datadojo.protocol"),
        executor=True,  # each (folder, seed) unit's search runs on a node
    ),
    Stage(
        "curation",
        "QC-kept trajectories; QA pairs as RL tasks",
        _run_curation,
        deps=("synthesis",),
        settings=lambda cfg: {"curation": cfg.stage("curation")},
        code=("datadojo.recipes.sailor",),
    ),
    sft_stage(),
    rl_tasks_stage(),
    rl_stage(),
    *eval_stages(),
)


def _sections() -> tuple[Section, ...]:
    from datadojo.synth.sailor import SailorConfig

    return (
        Section("corpus", _NoKeys, what="no keys: the stage checks the `inputs` folders"),
        Section(
            "synthesis",
            SailorConfig,
            own=_OWN,
            build=_sailor_config,
            what="SailorConfig keys + " + ", ".join(_OWN),
        ),
        Section(
            "curation",
            SailorCuration,
            build=lambda cfg: SailorCuration.model_validate(cfg.stage("curation")),
            what="max_rl_tasks",
        ),
        sft_section(),
        rl_tasks_section(),
        rl_section(),
        eval_section(),
    )


#: The types of the recipe file's ``[stages.X]`` sections (checked before anything runs).
SECTIONS: tuple[Section, ...] = _sections()

"""The EnvLunch recipe (warm-up tasks with counterfactual copies): environments → warm-up task synthesis
(§4, SQL and pandas action pools, K hidden copies each) → curation by the reference solver (programs that
are right in every copy, rewarded by Eq. (4), become expert trajectories) → SFT on them → RL (GRPO with the
copy-consistency reward) on the warm-up tasks, plus ``labels`` labelled tasks (Fig. 1's label budget) →
eval of base, SFT and RL on text-to-SQL → the Table 2-shaped report.

``[stages.synthesis]`` holds :class:`~datadojo.synth.envlunch.config.BuildConfig` keys; ``[stages.curation]``
:class:`~datadojo.synth.envlunch.config.SolverConfig` keys plus ``concurrency`` (sandboxes at once). Warm-up
off (Fig. 1) is ``[stages.rl] enabled = false``; the label budget is ``[stages.rl_tasks] labels``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from datadojo.jsonl import read_tasks, write_jsonl_atomic
from datadojo.recipes.config import RecipeConfig
from datadojo.recipes.engine import RecipeError, Stage, StageContext
from datadojo.recipes.stages import eval_stages, rl_stage, rl_tasks_stage, sft_stage
from datadojo.runs import Funnel, Rejection, RejectionWriter

__all__ = ["STAGES"]


def _inputs(cfg: RecipeConfig) -> list[Path]:
    return [cfg.path(p) for p in cfg.inputs]


def _environments(cfg: RecipeConfig) -> list[Any]:
    from datadojo.synth.envlunch.build import load_environments

    problems: list[str] = []
    envs = load_environments(_inputs(cfg), on_error=problems.append)
    if problems:
        raise RecipeError("corpus: " + "; ".join(problems))
    if not envs:
        raise RecipeError(f"corpus: no environment among {', '.join(cfg.inputs)}")
    return envs


def _run_corpus(ctx: StageContext) -> dict[str, Any]:
    envs = _environments(ctx.config)
    return {"environments": len(envs), "sources": [str(p) for p in _inputs(ctx.config)]}


def _run_synthesis(ctx: StageContext) -> dict[str, Any]:
    from datadojo.synth.envlunch.build import BuildConfig, build_tasks

    conf = BuildConfig.model_validate(ctx.config.stage("synthesis"))
    out = ctx.out / "tasks.jsonl"
    report = build_tasks(_environments(ctx.config), out, conf, progress=ctx.progress, executor=ctx.executor)
    if not report.tasks:
        raise RecipeError(f"synthesis: no warm-up task could be built ({dict(report.rejections)})")
    return {
        "tasks": str(out),
        "n_tasks": len(report.tasks),
        "draws": report.draws,
        "rejections": dict(report.rejections),
        "missing": report.missing,
        "funnel": str(report.funnel),
    }


def _run_curation(ctx: StageContext) -> dict[str, Any]:
    from datadojo.synth.envlunch.config import SolverConfig
    from datadojo.synth.envlunch.executor import SandboxExecutor
    from datadojo.synth.envlunch.reward import score_trajectories
    from datadojo.synth.envlunch.solver import solve, solver_trajectory
    from datadojo.synth.envlunch.tasks import task_info

    section = ctx.config.stage("curation")
    concurrency = int(section.pop("concurrency", 2))
    section.setdefault("time_limit_s", math.inf)  # a count budget, never the wall clock
    conf = SolverConfig.model_validate(section)
    tasks_path = Path(ctx.dep("synthesis")["tasks"])
    infos = [task_info(t, tasks_path) for t in read_tasks(tasks_path)]
    trajs = []
    for i, info in enumerate(infos, 1):
        trajs.append(solver_trajectory(info, solve([info], conf)[0]))
        ctx.progress(i, len(infos))
    records = score_trajectories(
        {i.task.id: i for i in infos}, trajs, SandboxExecutor(concurrency=concurrency)
    )
    solved = {r.task_id for r in records if r.solved}
    kept = [t.model_copy(update={"rewards": {"total": 1.0}}) for t in trajs if t.task_id in solved]
    sft = ctx.out / "solver.trajectories.jsonl"
    write_jsonl_atomic(sft, kept)
    with RejectionWriter(ctx.out / "rejected.jsonl") as rejects:
        for t, r in zip(trajs, records, strict=False):
            if t.final_answer is None:
                rejects.add(
                    Rejection("solve", t.task_id, "no_program", "the solver's budget found no program")
                )
            elif not r.solved:
                rejects.add(
                    Rejection("score", t.task_id, "not_solved_in_every_copy", "; ".join(r.errors)[:200])
                )
        reasons = rejects.reasons()
    funnel = Funnel()
    found = sum(t.final_answer is not None for t in trajs)
    funnel.add("solve", len(trajs), found, {"no_program": reasons.get("no_program", 0)})
    funnel.add(
        "score", found, len(kept), {"not_solved_in_every_copy": reasons.get("not_solved_in_every_copy", 0)}
    )
    funnel.write(ctx.out / "funnel.json")
    return {
        "sft_data": str(sft),
        "kept": len(kept),
        "solved": len(solved),
        "tasks": len(infos),
        "rl_tasks": str(tasks_path),  # the copies live beside this file: the reward needs them
        "funnel": str(ctx.out / "funnel.json"),
    }


STAGES: tuple[Stage, ...] = (
    Stage(
        "corpus",
        "load the environments (databases, tables)",
        _run_corpus,
        inputs=_inputs,
        code=("datadojo.synth.envlunch.environment",),
    ),
    Stage(
        "synthesis",
        "warm-up tasks + counterfactual copies",
        _run_synthesis,
        deps=("corpus",),
        settings=lambda cfg: {"synthesis": cfg.stage("synthesis")},
        inputs=_inputs,
        code=("datadojo.synth.envlunch",),
        executor=True,
    ),
    Stage(
        "curation",
        "reference solver; keep programs right in every copy",
        _run_curation,
        deps=("synthesis",),
        settings=lambda cfg: {"curation": cfg.stage("curation")},
        code=("datadojo.synth.envlunch", "datadojo.sandbox"),
    ),
    sft_stage(),
    rl_tasks_stage(),
    rl_stage(),
    *eval_stages(),
)

"""The EnvLunch recipe (warm-up tasks with counterfactual copies): environments → warm-up task synthesis
(§4, SQL and pandas action pools, K hidden copies each) → curation by the reference solver (programs that
are right in every copy, rewarded by Eq. (4), become expert trajectories) → SFT on them → RL (GRPO with the
copy-consistency reward) on the warm-up tasks → downstream fine-tuning (GRPO) on the first ``labels``
labelled examples (Fig. 1's label budget) → eval of base, SFT, RL and the fine-tuned model on text-to-SQL →
the Table 2-shaped report.

``[stages.synthesis]`` holds :class:`~datadojo.synth.envlunch.config.BuildConfig` keys; ``[stages.curation]``
:class:`~datadojo.synth.envlunch.config.SolverConfig` keys plus ``concurrency`` (sandboxes at once). Warm-up
off (Fig. 1) is ``[stages.rl] enabled = false``; the label budget is ``[stages.downstream] labels`` (the
first ``labels`` tasks of ``[stages.downstream] labelled``, a task file with answers). §4: "The two models on a
curve see the same examples in the same order and share the seed, limits, decoding and scorer, so they
differ only in their initial weights" — the downstream stage's settings are the same in both arms, its
tasks are the file's first ``labels`` in file order, and the trainer's seeded permutation orders them, so
the arms differ only in the checkpoint they start from. ``labels = 0`` is Fig. 1's 0: no downstream
fine-tuning, the warm-up (or SFT) checkpoint evaluated as it is. (``[stages.rl_tasks] labels`` instead mixes
labelled tasks into the warm-up RL itself.)
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from datadojo.config import Settings
from datadojo.jsonl import read_tasks, write_jsonl_atomic
from datadojo.recipes.checks import Section
from datadojo.recipes.config import RecipeConfig
from datadojo.recipes.engine import RecipeError, Stage, StageContext
from datadojo.recipes.stages import (
    TRAIN_CODE,
    _rl_servers,
    check_choices,
    counts,
    deep_merge,
    eval_section,
    eval_stages,
    rl_section,
    rl_stage,
    rl_tasks_section,
    rl_tasks_stage,
    rl_verdict,
    sft_section,
    sft_stage,
    stop_reasons,
)
from datadojo.runs import Funnel, Rejection, RejectionWriter

__all__ = ["SECTIONS", "STAGES"]


def _inputs(cfg: RecipeConfig) -> list[Path]:
    return [cfg.path(p) for p in cfg.inputs]


def _environments(cfg: RecipeConfig, sample_rows: int = 0, seed: int = 0) -> list[Any]:
    from datadojo.synth.envlunch.build import load_environments

    problems: list[str] = []
    envs = load_environments(_inputs(cfg), on_error=problems.append, sample_rows=sample_rows, seed=seed)
    if problems:
        raise RecipeError("corpus: " + "; ".join(problems))
    if not envs:
        raise RecipeError(f"corpus: no environment among {', '.join(cfg.inputs)}")
    return envs


def _run_corpus(ctx: StageContext) -> dict[str, Any]:
    envs = _environments(ctx.config)
    sources = [str(p) for p in _inputs(ctx.config)]
    return {
        "counts": counts(len(sources), "inputs", len(envs), "environments"),
        "environments": len(envs),
        "sources": sources,
    }


def _run_synthesis(ctx: StageContext) -> dict[str, Any]:
    from datadojo.synth.envlunch.build import BuildConfig, build_tasks

    conf = BuildConfig.model_validate(ctx.config.stage("synthesis"))
    out = ctx.out / "tasks.jsonl"
    envs = _environments(ctx.config, conf.sample_rows, conf.seed)
    report = build_tasks(envs, out, conf, progress=ctx.progress, executor=ctx.executor)
    if not report.tasks:
        raise RecipeError(f"synthesis: no warm-up task could be built ({dict(report.rejections)})")
    return {
        "counts": counts(report.draws, "draws", len(report.tasks), "warm-up tasks"),
        "tasks": str(out),
        "n_tasks": len(report.tasks),
        "draws": report.draws,
        "rejections": dict(report.rejections),
        "missing": report.missing,
        "funnel": str(report.funnel),
        "sampled": {e: {t: list(v) for t, v in tables.items()} for e, tables in report.sampled.items()},
        "told_apart": report.told_apart,
        "solver": report.solver.to_dict() if report.solver is not None else None,
    }


def _run_curation(ctx: StageContext) -> dict[str, Any]:
    from datadojo.reward.envlunch import task_info
    from datadojo.reward.registry import RewardSpec, envlunch_records
    from datadojo.synth.envlunch.config import SolverConfig
    from datadojo.synth.envlunch.solver import solve, solver_trajectory

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
    spec = RewardSpec(name="envlunch", tasks_path=str(tasks_path), concurrency=concurrency)
    records = envlunch_records([(i.task, t) for i, t in zip(infos, trajs, strict=True)], spec)
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
    empty = None
    if not kept:
        empty = (
            f"the reference solver solved none of the {len(infos)} warm-up tasks in every copy "
            f"(see {ctx.out / 'rejected.jsonl'}): raise [stages.curation] max_candidates"
        )
    return {
        "empty": empty,
        "counts": counts(len(infos), "warm-up tasks", len(kept), "expert trajectories"),
        "sft_data": str(sft),
        "kept": len(kept),
        "solved": len(solved),
        "tasks": len(infos),
        "rl_tasks": str(tasks_path),  # the copies live beside this file: the reward needs them
        "funnel": str(ctx.out / "funnel.json"),
    }


# --- downstream fine-tuning on labelled examples (Fig. 1) ------------------------------------------------

#: Keys of ``[stages.downstream]`` that are not :class:`~datadojo.train.config.RLConfig` fields.
DOWNSTREAM_KEYS = ("labels", "labelled", "reward", "preset")


def _downstream_config(cfg: RecipeConfig, model: str = "", out: Path | None = None) -> tuple[Any, str]:
    """The downstream GRPO run: the envlunch preset (§4: "Both the warm-up and downstream fine-tuning use
    GRPO"), then ``[stages.rl]`` (the same optimizer, limits and decoding as the warm-up), then
    ``[stages.downstream]`` on top; the reward defaults to DataMind's tolerant answer match (labelled tasks
    carry answers, not counterfactual copies)."""
    from datadojo.train.config import RLConfig

    rl = cfg.stage("rl")
    for k in ("enabled", "preset", "reward"):
        rl.pop(k, None)
    section = cfg.stage("downstream")
    reward = str(section.get("reward", "datamind"))
    preset = section.get("preset", "envlunch")
    for k in DOWNSTREAM_KEYS:
        section.pop(k, None)
    base = RLConfig.datamind() if preset == "datamind" else RLConfig.envlunch()
    data = deep_merge(deep_merge({**base.model_dump(mode="python"), "dialect": "datamind"}, rl), section)
    data.update(model=model or "student", output_dir=str(out or "run"))
    return RLConfig.model_validate(data), reward


def _labels(cfg: RecipeConfig) -> int:
    raw = cfg.stage("downstream").get("labels", 0)
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise RecipeError(f"[stages.downstream] labels: expected a number of examples ≥ 0, got {raw!r}")
    return raw


def _check_downstream(cfg: RecipeConfig) -> None:
    check_choices("[stages.downstream]", cfg.stage("downstream"))
    if _labels(cfg) == 0:
        return
    if not cfg.stage("downstream").get("labelled"):
        raise RecipeError("[stages.downstream] labels > 0 needs `labelled`, a task file with answers")
    _downstream_config(cfg)


def _run_downstream(ctx: StageContext) -> dict[str, Any]:
    from datadojo.reward.registry import spec_for_cli
    from datadojo.train.rewards import registry_reward_fn
    from datadojo.train.rl import RLTrainer
    from datadojo.train.rollouts import rollout_source

    start = ctx.dep("rl")["model_dir"]
    n = _labels(ctx.config)
    if n == 0:
        return {"skipped": True, "model_dir": start, "labels": 0}
    source = ctx.config.path(ctx.config.stage("downstream")["labelled"])
    tasks = list(read_tasks(source))[:n]
    if len(tasks) < n:
        raise RecipeError(f"downstream: {source} holds {len(tasks)} tasks, {n} asked")
    missing = [t.id for t in tasks if t.answer is None or str(t.answer).strip() == ""]
    if missing:
        raise RecipeError(f"downstream: {source}: task {missing[0]} has no answer to reward against")
    path = ctx.out / "labelled.jsonl"
    write_jsonl_atomic(path, tasks)
    cfg, reward = _downstream_config(ctx.config, start, ctx.out / "run")
    trainer = RLTrainer(
        cfg,
        tasks,
        registry_reward_fn(spec_for_cli(reward, tasks_path=path)),
        lambda acc: rollout_source(cfg, acc),
    )
    try:
        summary = trainer.train(resume=True)
    finally:
        trainer.source.close()
    stops = stop_reasons(sorted((Path(summary.run_dir) / "rollouts").glob("*.scored.jsonl")))
    return {
        "empty": rl_verdict(summary.updates, stops, cfg.max_new_tokens, "[stages.downstream]"),
        "counts": counts(sum(stops.values()), "rollouts", summary.updates, "optimizer updates"),
        "stop_reasons": stops,
        "skipped": False,
        "model_dir": summary.model_dir,
        "from": start,
        "labels": n,
        "tasks": str(path),
        "task_ids": [t.id for t in tasks],
        "reward": reward,
        "steps": summary.steps,
        "metrics": str(Path(summary.run_dir) / "metrics.jsonl"),
    }


def downstream_stage() -> Stage:
    def inputs(cfg: RecipeConfig) -> list[Path]:
        lab = cfg.stage("downstream").get("labelled")
        return [cfg.path(lab)] if lab and _labels(cfg) else []

    def settings(cfg: RecipeConfig) -> dict[str, Any]:
        if _labels(cfg) == 0:  # nothing trained: every other downstream setting is moot
            return {"labels": 0}
        rl = {k: v for k, v in cfg.stage("rl").items() if k != "enabled"}
        return {"downstream": cfg.stage("downstream"), "rl": rl}

    return Stage(
        "downstream",
        "fine-tune on the first N labelled examples",
        _run_downstream,
        deps=("rl",),
        settings=settings,
        inputs=inputs,
        code=(*TRAIN_CODE, "datadojo.reward", "datadojo.agent"),
        servers=lambda cfg: _rl_servers(cfg, "downstream") if _labels(cfg) else {},
    )


def eval_downstream_stage(eval_rl: Stage) -> Stage:
    """Eval of the fine-tuned checkpoint; with no downstream training (``labels = 0``) the checkpoint is the
    RL one, already evaluated under the same settings, so its results are taken over instead of rerun."""
    fine_tuned = eval_rl.run

    def run(ctx: StageContext) -> dict[str, Any]:
        if ctx.dep("downstream").get("skipped"):
            prior = ctx.dep("eval_rl")
            return {**prior, "checkpoint": "downstream", "skipped_training": True, "taken_from": "eval_rl"}
        ctx.upstream = {**ctx.upstream, "rl": ctx.upstream["downstream"]}
        out = fine_tuned(ctx)
        return {**out, "checkpoint": "downstream"}

    return dataclasses.replace(
        eval_rl,
        name="eval_downstream",
        title="eval the fine-tuned checkpoint",
        run=run,
        deps=("downstream", "eval_rl"),
    )


_EVALS = eval_stages()

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
    *_EVALS,
    downstream_stage(),
    eval_downstream_stage(_EVALS[-1]),
)


class _NoKeys(Settings):
    """A section without settings (the stage reads only the recipe's inputs)."""


def _curation_config(cfg: RecipeConfig) -> Any:
    from datadojo.synth.envlunch.config import SolverConfig

    section = cfg.stage("curation")
    concurrency = section.pop("concurrency", 2)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise RecipeError(
            f"[stages.curation] concurrency: expected a number of sandboxes ≥ 1, got {concurrency!r}"
        )
    return SolverConfig.model_validate(section)


def _sections() -> tuple[Section, ...]:
    from datadojo.synth.envlunch.config import BuildConfig, SolverConfig
    from datadojo.train.config import RLConfig

    return (
        Section("corpus", _NoKeys, what="no keys: the stage loads the `inputs` environments"),
        Section(
            "synthesis",
            BuildConfig,
            build=lambda cfg: BuildConfig.model_validate(cfg.stage("synthesis")),
            what="BuildConfig keys",
        ),
        Section(
            "curation",
            SolverConfig,
            own=("concurrency",),
            build=_curation_config,
            what="SolverConfig keys + concurrency",
        ),
        sft_section(),
        rl_tasks_section(),
        rl_section(),
        Section(
            "downstream",
            RLConfig,
            own=DOWNSTREAM_KEYS,
            filled=("model", "output_dir"),
            build=_check_downstream,
            what="RLConfig keys + " + ", ".join(DOWNSTREAM_KEYS),
        ),
        eval_section(),
    )


#: The types of the recipe file's ``[stages.X]`` sections (checked before anything runs).
SECTIONS: tuple[Section, ...] = _sections()

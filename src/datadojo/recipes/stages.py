"""Stages every recipe shares: ``train sft``, RL tasks, ``train rl``, ``eval`` of each checkpoint.

Each calls the library (:func:`datadojo.train.sft.train_sft`, :class:`datadojo.train.rl.RLTrainer`,
:func:`datadojo.eval.harness.run_eval`), never the CLI, and checks that what it was handed carries data:
an SFT stage whose curated file is empty, RL tasks without answers, or an eval that scored no task is a
:class:`~datadojo.recipes.engine.RecipeError` naming the stage and file, not a silent zero.

``enabled = false`` in ``[stages.sft]`` or ``[stages.rl]`` skips that training and passes the previous
checkpoint on (EnvLunch's warm-up on/off, DataMind's SFT-only rows); the report marks it.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

from datadojo.jsonl import iter_jsonl, read_tasks, read_trajectories, write_jsonl_atomic
from datadojo.recipes.config import RecipeConfig
from datadojo.recipes.engine import RecipeError, Stage, StageContext

__all__ = [
    "count_lines",
    "deep_merge",
    "eval_stages",
    "record_usage",
    "rl_stage",
    "rl_tasks_stage",
    "sft_stage",
]

TRAIN_CODE = ("datadojo.train",)
EVAL_CODE = ("datadojo.eval", "datadojo.agent", "datadojo.bench")


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on ``base``, sections merged key by key (``[stages.rl.optim] lr`` keeps the other optim keys)."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def count_lines(path: str | Path) -> int:
    path = Path(path)
    return sum(1 for _ in iter_jsonl(path)) if path.exists() else 0


def record_usage(
    ctx: StageContext, backends: dict[str, Any], counted: dict[str, dict[str, int]] | None = None
) -> dict[str, dict[str, int]]:
    """Append the stage's LLM use by role to ``usage.jsonl`` in its folder, then apply the one failure policy
    (:class:`datadojo.runs.FailurePolicy`; ``[stages.X] max_failed_fraction``): a stage whose requests mostly
    failed is not committed (exit 3), and the rerun resumes it.

    ``counted``: use counted elsewhere, by role (``requests``, ``prompt_tokens``, ``completion_tokens``,
    ``failed``): the requests a remote executor's nodes sent with their own clients, which this process's
    backends never saw."""
    from datadojo.runs import FailurePolicy, UsageLedger

    section = ctx.config.stage(ctx.stage.name)
    policy = FailurePolicy(max_failed_fraction=float(section.get("max_failed_fraction", 0.5)))
    ledger = UsageLedger(ctx.out / "usage.jsonl", ctx.stage.name, policy)
    for role, backend in backends.items():
        if backend is not None:
            ledger.add_backend(role, backend)
    for role, counts in (counted or {}).items():
        ledger.add(role, **counts, check=False)
    ledger.save()
    ledger.check()
    return {k: dict(v) for k, v in ledger.roles.items()}


def _student(cfg: RecipeConfig) -> Path:
    return cfg.path(cfg.models.student.removeprefix("hf:").split("?")[0])


def _enabled(section: dict[str, Any]) -> bool:
    return bool(section.pop("enabled", True))


def _keyed(section: dict[str, Any]) -> dict[str, Any]:
    """A training section as its key sees it: ``enabled = true`` is the default, so it is the same run."""
    return {k: v for k, v in section.items() if not (k == "enabled" and v is True)}


# --- SFT ---------------------------------------------------------------------------------------------------


def _sft_config(cfg: RecipeConfig, out: Path | None = None) -> Any:
    from datadojo.train.config import SFTConfig

    section = cfg.stage("sft")
    section.pop("enabled", None)
    return SFTConfig.model_validate({**section, "model": str(_student(cfg)), "output_dir": str(out or "run")})


def _run_sft(ctx: StageContext) -> dict[str, Any]:
    from datadojo.train.sft import train_sft

    cur = ctx.dep("curation")
    data = Path(cur["sft_data"])
    if not _enabled(ctx.config.stage("sft")):
        return {"skipped": True, "model_dir": str(_student(ctx.config)), "data": str(data), "n_examples": 0}
    n = count_lines(data)
    if n == 0:
        raise RecipeError(f"sft: the curated file {data} holds no trajectory; nothing to train on")
    summary = train_sft(_sft_config(ctx.config, ctx.out / "run"), data, resume=True)
    if summary.n_examples == 0:
        raise RecipeError(f"sft: none of the {n} trajectories of {data} could be trained on")
    return {
        "skipped": False,
        "model_dir": summary.model_dir,
        "data": str(data),
        "data_lines": n,
        "n_examples": summary.n_examples,
        "steps": summary.steps,
        "first_loss": summary.first_loss,
        "last_loss": summary.last_loss,
        "agent_tokens": summary.agent_tokens,
    }


def _check_sft(cfg: RecipeConfig) -> None:
    if cfg.stage("sft").get("enabled", True) is not False:
        _sft_config(cfg)


def sft_stage() -> Stage:
    return Stage(
        "sft",
        "train sft on the curated set",
        _run_sft,
        deps=("curation",),
        settings=lambda cfg: {"sft": _keyed(cfg.stage("sft")), "student": cfg.models.student},
        inputs=lambda cfg: [_student(cfg)],
        code=TRAIN_CODE,
        check=lambda cfg: (
            None if cfg.stage("sft").get("enabled", True) is False else _sft_config(cfg) and None
        ),
    )


# --- RL tasks --------------------------------------------------------------------------------------------


def _run_rl_tasks(ctx: StageContext) -> dict[str, Any]:
    """The synthesis stage's tasks (manifest ``rl_tasks``), plus ``labels`` labelled tasks from ``labelled``
    (EnvLunch Fig. 1's label budget), each required to carry an answer."""
    section = ctx.config.stage("rl_tasks")
    src = ctx.dep("curation").get("rl_tasks")
    tasks = list(read_tasks(src)) if src else []
    limit = section.get("limit")
    if limit is not None:
        tasks = tasks[: int(limit)]
    labels = int(section.get("labels", 0))
    if labels:
        if not section.get("labelled"):
            raise RecipeError("rl_tasks: labels > 0 needs `labelled`, a task file with answers")
        extra = list(read_tasks(ctx.config.path(section["labelled"])))[:labels]
        if len(extra) < labels:
            raise RecipeError(f"rl_tasks: {section['labelled']} holds {len(extra)} tasks, {labels} asked")
        tasks += extra
    missing = [t.id for t in tasks if t.answer is None or str(t.answer).strip() == ""]
    if missing:
        raise RecipeError(
            f"rl_tasks: {len(missing)} tasks have no answer to reward against (first: {missing[0]})"
        )
    if not tasks:
        raise RecipeError("rl_tasks: no task with an answer came out of curation")
    # EnvLunch tasks keep their counterfactual copies beside their file: keep the synthesis file when untouched
    if src and not labels and limit is None:
        path = Path(src)
    else:
        path = ctx.out / "tasks.jsonl"
        write_jsonl_atomic(path, tasks)
    return {"tasks": str(path), "n": len(tasks), "labelled": labels, "synthetic": len(tasks) - labels}


def rl_tasks_stage() -> Stage:
    def inputs(cfg: RecipeConfig) -> list[Path]:
        lab = cfg.stage("rl_tasks").get("labelled")
        return [cfg.path(lab)] if lab else []

    return Stage(
        "rl_tasks",
        "RL tasks with answers",
        _run_rl_tasks,
        deps=("curation",),
        settings=lambda cfg: cfg.stage("rl_tasks"),
        inputs=inputs,
        code=("datadojo.recipes.stages",),
    )


# --- RL ----------------------------------------------------------------------------------------------------

#: The RL preset, reward and dialect of each recipe. DataMind: DAPO + γ mixing with the curated set as experts
#: (§3.3); EnvLunch: GRPO, no SFT term (§4); SciDataSailor: the GRPO preset (its exploration trajectories
#: answer the meta task, not the QA tasks RL trains on, so they cannot be per-task experts), in its own
#: ``<python>/<result>`` dialect, answers rewarded by DataMind's tolerant matcher.
RL_DEFAULTS = {
    "datamind": ("datamind", "datamind", "datamind"),
    "envlunch": ("envlunch", "envlunch", "datamind"),
    "sailor": ("envlunch", "datamind", "sailor"),
}


def _rl_config(cfg: RecipeConfig, model: str = "", out: Path | None = None) -> tuple[Any, str]:
    from datadojo.train.config import RLConfig

    section = cfg.stage("rl")
    section.pop("enabled", None)
    preset, reward, dialect = RL_DEFAULTS[cfg.recipe]
    preset = section.pop("preset", preset)
    reward = section.pop("reward", reward)
    base = RLConfig.datamind() if preset == "datamind" else RLConfig.envlunch()
    data = deep_merge({**base.model_dump(mode="python"), "dialect": dialect}, section)
    data.update(model=model or str(_student(cfg)), output_dir=str(out or "run"))
    return RLConfig.model_validate(data), reward


def _run_rl(ctx: StageContext) -> dict[str, Any]:
    from datadojo.train.rewards import make_reward_fn
    from datadojo.train.rl import RLTrainer
    from datadojo.train.rollouts import rollout_source

    start = ctx.dep("sft")["model_dir"]
    if not _enabled(ctx.config.stage("rl")):
        return {"skipped": True, "model_dir": start}
    tasks_file = ctx.dep("rl_tasks")["tasks"]
    tasks = list(read_tasks(tasks_file))
    cfg, reward = _rl_config(ctx.config, start, ctx.out / "run")
    reward_fn = make_reward_fn(reward, tasks_path=tasks_file)
    experts = list(read_trajectories(ctx.dep("curation")["sft_data"])) if cfg.uses_sft else []
    trainer = RLTrainer(cfg, tasks, reward_fn, lambda acc: rollout_source(cfg, acc), experts=experts)
    try:
        summary = trainer.train(resume=True)
    finally:
        trainer.source.close()
    rollouts = sorted((Path(summary.run_dir) / "rollouts").glob("*.scored.jsonl"))
    return {
        "skipped": False,
        "model_dir": summary.model_dir,
        "from": start,
        "tasks": tasks_file,
        "n_tasks": len(tasks),
        "reward": reward,
        "policy_loss": cfg.policy_loss,
        "dialect": cfg.dialect,
        "steps": summary.steps,
        "updates": summary.updates,
        "rollout_files": [str(p) for p in rollouts],
        "last_metrics": summary.last_metrics,
    }


def _check_rl(cfg: RecipeConfig) -> None:
    if cfg.stage("rl").get("enabled", True) is not False:
        _rl_config(cfg)


def rl_stage() -> Stage:
    return Stage(
        "rl",
        "train rl on the RL tasks",
        _run_rl,
        deps=("sft", "rl_tasks", "curation"),
        settings=lambda cfg: {"rl": _keyed(cfg.stage("rl")), "recipe": cfg.recipe},
        code=(*TRAIN_CODE, "datadojo.reward", "datadojo.agent"),
        check=_check_rl,
    )


# --- eval --------------------------------------------------------------------------------------------------


def _eval_one(ctx: StageContext, model_dir: str, spec: Any, index: int) -> dict[str, Any]:
    from datadojo.eval.harness import EvalConfig, run_eval
    from datadojo.llm.base import SamplingParams

    section = ctx.config.stage("eval")
    sampling = None
    if spec.max_tokens is not None or "temperature" in section:
        sampling = SamplingParams(
            temperature=float(section.get("temperature", 0.7)),
            top_p=float(section.get("top_p", 0.95)),
            max_tokens=spec.max_tokens,
            seed=section.get("seed"),
        )
    cfg = EvalConfig(
        bench=spec.bench,
        data=ctx.config.path(spec.data),
        out=ctx.out / f"{index:02d}-{spec.title}",
        model=f"hf:{model_dir}" + (f"?{section['model_options']}" if section.get("model_options") else ""),
        n_trials=spec.n_trials,
        limit=spec.limit,
        concurrency=int(section.get("concurrency", 4)),
        max_turns=spec.max_turns,
        sampling=sampling,
        loader_options=spec.options,
        seed=section.get("seed", 0),
        judge=ctx.config.models.judge if section.get("judge") else None,
    )
    result = asyncio.run(run_eval(cfg, executor=ctx.executor))
    s = result.summary
    if not s.get("n_tasks"):
        raise RecipeError(f"eval: {spec.title} loaded no task from {spec.data}")
    return {
        "bench": spec.bench,
        "n_tasks": s["n_tasks"],
        "n_trials": s["n_trials"],
        "metrics": s["metrics"],
        "official": s.get("official"),
        "missing_trials": s.get("missing_trials"),
        "summary": str(result.paths["summary"]),
        "scored_trajectories": count_lines(result.paths["scores"]),
    }


def _eval_run(checkpoint: str, dep: str | None) -> Any:
    def run(ctx: StageContext) -> dict[str, Any]:
        model_dir = ctx.dep(dep)["model_dir"] if dep else str(_student(ctx.config))
        if not ctx.config.benchmarks:
            raise RecipeError("eval: the recipe names no [[benchmarks]]")
        results = {}
        for i, spec in enumerate(ctx.config.benchmarks):
            ctx.progress(i, len(ctx.config.benchmarks))
            results[spec.title] = _eval_one(ctx, model_dir, spec, i)
        ctx.progress(len(ctx.config.benchmarks), len(ctx.config.benchmarks))
        skipped = bool(ctx.dep(dep).get("skipped")) if dep else False
        return {
            "checkpoint": checkpoint,
            "model_dir": model_dir,
            "skipped_training": skipped,
            "results": results,
        }

    return run


def eval_stages() -> list[Stage]:
    """``eval_base``, ``eval_sft``, ``eval_rl``: every benchmark on each checkpoint."""

    def settings(cfg: RecipeConfig) -> dict[str, Any]:
        return {"eval": cfg.stage("eval"), "benchmarks": [b.model_dump(mode="json") for b in cfg.benchmarks]}

    def inputs(cfg: RecipeConfig, base: bool) -> list[Path]:
        data = [cfg.path(b.data) for b in cfg.benchmarks]
        return data + ([_student(cfg)] if base else [])

    out = []
    for checkpoint, dep in (("base", None), ("sft", "sft"), ("rl", "rl")):
        out.append(
            Stage(
                f"eval_{checkpoint}",
                f"eval the {checkpoint} checkpoint",
                _eval_run(checkpoint, dep),
                deps=(dep,) if dep else (),
                settings=settings,
                inputs=lambda cfg, base=dep is None: inputs(cfg, base),
                code=EVAL_CODE,
                executor=True,
            )
        )
    return out

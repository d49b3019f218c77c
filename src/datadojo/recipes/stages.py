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

from pydantic import Field, model_validator

from datadojo.config import Settings
from datadojo.jsonl import iter_jsonl, read_tasks, read_trajectories, write_jsonl_atomic
from datadojo.recipes.checks import Generation, Section
from datadojo.recipes.config import RecipeConfig
from datadojo.recipes.engine import RecipeError, Stage, StageContext
from datadojo.recipes.problems import Problem

__all__ = [
    "EvalSection",
    "RLTasksSection",
    "count_lines",
    "counts",
    "deep_merge",
    "eval_section",
    "eval_stages",
    "eval_verdict",
    "expert_verdict",
    "record_usage",
    "rl_section",
    "rl_stage",
    "rl_tasks_section",
    "rl_tasks_stage",
    "rl_verdict",
    "served_models",
    "sft_section",
    "sft_stage",
    "sft_verdict",
    "stop_reasons",
    "student_generations",
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


def counts(n_in: int, what_in: str, n_out: int, what_out: str) -> dict[str, Any]:
    """A stage's in → out counts, as its manifest records them and the report shows them."""
    return {"in": n_in, "in_what": what_in, "out": n_out, "out_what": what_out}


def _most(part: int, whole: int) -> bool:
    return whole > 0 and 2 * part > whole


def sft_verdict(
    lines: int, n_examples: int, n_void: int, n_untrainable: int, steps: int, max_length: int | None
) -> str | None:
    """Why an SFT run did nothing useful (``None``: it did something): no optimizer step, or most of the
    curated trajectories not trained on — named by cause, with the setting to change."""
    if steps == 0:
        return f"0 optimizer updates on {n_examples} examples: set [stages.sft] epochs or max_steps"
    dropped = lines - n_examples
    if not _most(dropped, lines):
        return None
    if n_untrainable >= n_void:
        return (
            f"trained on {n_examples} of {lines} curated trajectories: {n_untrainable} have no agent token "
            f"within max_length = {max_length} (their prompt alone fills it), {n_void} have a void turn; "
            "raise [stages.sft] max_length"
        )
    return (
        f"trained on {n_examples} of {lines} curated trajectories: {n_void} have a void turn (never trained "
        f"on, DataMind §4), {n_untrainable} no agent token within max_length = {max_length}; check the curation"
    )


def rl_verdict(updates: int, stop_reasons: dict[str, int], max_new_tokens: int, where: str) -> str | None:
    """Why an RL run did nothing useful: most rollouts cut at the context window (the reply budget), or no
    optimizer update (every group filtered by dynamic sampling)."""
    n = sum(stop_reasons.values())
    cut = stop_reasons.get("context_limit", 0)
    if _most(cut, n):
        return (
            f"{cut} of {n} rollouts ended at context_limit: lower {where} max_new_tokens ({max_new_tokens}) "
            "so that the prompt and a reply fit the student's context window"
        )
    if updates == 0:
        return (
            f"0 optimizer updates over {n} rollouts: every group was filtered (dynamic sampling keeps a task "
            f"only when 0 < #correct < G); raise {where} group_size, use tasks the student sometimes solves, "
            "or set dynamic_sampling = false"
        )
    return None


def eval_verdict(title: str, stop_reasons: dict[str, int]) -> str | None:
    """Why an eval of one benchmark measured nothing: most trials cut at the context window."""
    n = sum(stop_reasons.values())
    cut = stop_reasons.get("context_limit", 0)
    if _most(cut, n):
        return (
            f"{cut} of {n} trials of {title} ended at context_limit: lower its max_tokens in [[benchmarks]] "
            "(or evaluate a model with a longer context window)"
        )
    return None


def expert_verdict(
    experts: list[Any], task_ids: set[str], tokenizer: Any, max_length: int | None, end_of_turn: Any
) -> str | None:
    """When none of the expert trajectories the mixed objective needs can be trained on, the real cause:
    off the RL tasks, void, or nothing of the agent's left within ``max_length`` (the trainer's own tokenizer
    and rule) — not "pass experts" when experts were passed."""
    from datadojo.train.tokenize import TemplateError, tokenize_trajectory

    off = void = cut = 0
    for traj in experts:
        if traj.task_id not in task_ids:
            off += 1
            continue
        if traj.has_void_turn:
            void += 1
            continue
        try:
            ex = tokenize_trajectory(traj, tokenizer, max_length=max_length, end_of_turn=end_of_turn)
        except TemplateError:
            cut += 1
            continue
        if sum(ex.loss_mask[1:]) > 0:
            return None  # at least one expert trains: the trainer has its SFT term
        cut += 1
    if not experts:
        return "the mixed objective (γ > 0) needs expert trajectories and curation kept none"
    return (
        f"none of the {len(experts)} expert trajectories can be trained on: {cut} have no agent token within "
        f"max_length = {max_length}, {off} are not of an RL task, {void} have a void turn; raise [stages.rl] "
        'max_length (or use a fixed γ of 0: gamma_mode = "fixed", gamma_value = 0)'
    )


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


def served_models(cfg: RecipeConfig, *roles: str) -> dict[str, str]:
    """``models.ROLE`` → spec of the roles a stage calls that are set (for the plan's reachability probe)."""
    specs = {f"models.{r}": getattr(cfg.models, r) for r in roles}
    return {k: v for k, v in specs.items() if v}


def _rl_servers(cfg: RecipeConfig, name: str = "rl") -> dict[str, str]:
    sampler = cfg.stage(name).get("sampler") or cfg.stage("rl").get("sampler")
    return (
        {f"[stages.{name}] sampler": sampler}
        if isinstance(sampler, str) and sampler.startswith("openai:")
        else {}
    )


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
    from datadojo.train.modeling import TrainingError
    from datadojo.train.sft import train_sft

    cur = ctx.dep("curation")
    data = Path(cur["sft_data"])
    if not _enabled(ctx.config.stage("sft")):
        return {"skipped": True, "model_dir": str(_student(ctx.config)), "data": str(data), "n_examples": 0}
    n = count_lines(data)
    if n == 0:
        raise RecipeError(f"sft: the curated file {data} holds no trajectory; nothing to train on")
    conf = _sft_config(ctx.config, ctx.out / "run")
    try:
        summary = train_sft(conf, data, resume=True)
    except TrainingError as exc:  # nothing trainable: the stage did nothing, by its cause
        if "no trainable trajectories" not in str(exc):
            raise
        raise RecipeError(
            f"sft: none of the {n} trajectories of {data} could be trained on ({exc}; max_length = "
            f"{conf.max_length}): raise [stages.sft] max_length"
        ) from exc
    if summary.n_examples == 0:
        raise RecipeError(f"sft: none of the {n} trajectories of {data} could be trained on")
    verdict = sft_verdict(
        n, summary.n_examples, summary.n_void, summary.n_untrainable, summary.steps, conf.max_length
    )
    return {
        "empty": verdict,
        "counts": counts(n, "curated trajectories", summary.n_examples, "trained on"),
        "n_void": summary.n_void,
        "n_untrainable": summary.n_untrainable,
        "n_truncated": summary.n_truncated,
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


def _sft_precheck(cfg: RecipeConfig, upstream: dict[str, Any]) -> list[Problem]:
    """The curated set is already there (curation cached): tokenize it as the trainer will (its own rule,
    :func:`~datadojo.train.sft.prepare_sft_examples`, with the student's tokenizer) and refuse now a run
    that would train on less than half of it."""
    if cfg.stage("sft").get("enabled", True) is False or "curation" not in upstream:
        return []
    try:
        from transformers import AutoTokenizer

        from datadojo.train.sft import prepare_sft_examples

        conf = _sft_config(cfg)
        trajs = list(read_trajectories(upstream["curation"].manifest["sft_data"]))
        tokenizer = AutoTokenizer.from_pretrained(str(_student(cfg)))
        examples, dropped = prepare_sft_examples(trajs, tokenizer, conf)
    except Exception:
        return []
    why = sft_verdict(len(trajs), len(examples), dropped["void"], dropped["untrainable"], 1, conf.max_length)
    return [Problem("[stages.sft] max_length", f"on the curated set already made: {why}")] if why else []


def sft_section() -> Section:
    from datadojo.train.config import SFTConfig

    return Section(
        "sft",
        SFTConfig,
        own=("enabled",),
        filled=("model", "output_dir"),
        build=_check_sft,
        what="SFTConfig keys + enabled",
    )


def sft_stage() -> Stage:
    return Stage(
        "sft",
        "train sft on the curated set",
        _run_sft,
        deps=("curation",),
        settings=lambda cfg: {"sft": _keyed(cfg.stage("sft")), "student": cfg.models.student},
        inputs=lambda cfg: [_student(cfg)],
        code=TRAIN_CODE,
        precheck=_sft_precheck,
    )


# --- RL tasks --------------------------------------------------------------------------------------------


class RLTasksSection(Settings):
    """``[stages.rl_tasks]``: which tasks RL trains on."""

    limit: int | None = Field(None, ge=1, description="only the first N curated tasks")
    labels: int = Field(0, ge=0, description="labelled tasks added from `labelled` (EnvLunch Fig. 1)")
    labelled: str | None = Field(None, description="a task file with answers (read when labels > 0)")

    @model_validator(mode="after")
    def _labelled_needed(self) -> RLTasksSection:
        if self.labels and not self.labelled:
            raise ValueError("labels > 0 needs `labelled`, a task file with answers")
        return self


def rl_tasks_section() -> Section:
    return Section(
        "rl_tasks",
        RLTasksSection,
        build=lambda cfg: RLTasksSection.model_validate(cfg.stage("rl_tasks")),
        what="limit, labels, labelled",
    )


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
    n_in = len(list(read_tasks(src))) if src else 0
    return {
        "tasks": str(path),
        "n": len(tasks),
        "labelled": labels,
        "synthetic": len(tasks) - labels,
        "counts": counts(n_in + labels, "tasks offered", len(tasks), "RL tasks"),
    }


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
    from datadojo.reward.registry import spec_for_cli
    from datadojo.train.rewards import registry_reward_fn
    from datadojo.train.rl import RLTrainer
    from datadojo.train.rollouts import rollout_source

    start = ctx.dep("sft")["model_dir"]
    if not _enabled(ctx.config.stage("rl")):
        return {"skipped": True, "model_dir": start}
    tasks_file = ctx.dep("rl_tasks")["tasks"]
    tasks = list(read_tasks(tasks_file))
    cfg, reward = _rl_config(ctx.config, start, ctx.out / "run")
    reward_fn = registry_reward_fn(spec_for_cli(reward, tasks_path=tasks_file))
    experts = list(read_trajectories(ctx.dep("curation")["sft_data"])) if cfg.uses_sft else []
    if cfg.uses_sft:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(start)
        why = expert_verdict(experts, {t.id for t in tasks}, tokenizer, cfg.max_length, cfg.end_of_turn)
        if why is not None:
            raise RecipeError(f"rl: {why}")
    trainer = RLTrainer(cfg, tasks, reward_fn, lambda acc: rollout_source(cfg, acc), experts=experts)
    try:
        summary = trainer.train(resume=True)
    finally:
        trainer.source.close()
    rollouts = sorted((Path(summary.run_dir) / "rollouts").glob("*.scored.jsonl"))
    stops = stop_reasons(rollouts)
    return {
        "empty": rl_verdict(summary.updates, stops, cfg.max_new_tokens, "[stages.rl]"),
        "counts": counts(sum(stops.values()), "rollouts", summary.updates, "optimizer updates"),
        "stop_reasons": stops,
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


PRESETS = ("datamind", "envlunch")


def check_choices(where: str, section: dict[str, Any]) -> None:
    """``preset`` and ``reward`` of an RL section among the known ones (a wrong one is not a silent default)."""
    from datadojo.reward.registry import reward_names

    for key, known in (("preset", PRESETS), ("reward", tuple(reward_names()))):
        if key in section and section[key] not in known:
            raise RecipeError(f"{where} {key} = {section[key]!r}: not one of {', '.join(known)}")


def stop_reasons(files: list[Path]) -> dict[str, int]:
    """How the rollouts in ``files`` (scored JSONL) ended, by stop reason."""
    out: dict[str, int] = {}
    for f in files:
        for t in read_trajectories(f):
            out[t.stop_reason] = out.get(t.stop_reason, 0) + 1
    return dict(sorted(out.items()))


def _rl_precheck(cfg: RecipeConfig, upstream: dict[str, Any]) -> list[Problem]:
    """The RL tasks and the curated set are already there: the mixed objective's experts checked against
    ``max_length`` with the student's tokenizer (:func:`expert_verdict`), before the SFT stage trains."""
    if cfg.stage("rl").get("enabled", True) is False or not {"curation", "rl_tasks"} <= set(upstream):
        return []
    try:
        from transformers import AutoTokenizer

        conf, _ = _rl_config(cfg)
        if not conf.uses_sft:
            return []
        experts = list(read_trajectories(upstream["curation"].manifest["sft_data"]))
        ids = {t.id for t in read_tasks(upstream["rl_tasks"].manifest["tasks"])}
        tokenizer = AutoTokenizer.from_pretrained(str(_student(cfg)))
        why = expert_verdict(experts, ids, tokenizer, conf.max_length, conf.end_of_turn)
    except Exception:
        return []
    return [Problem("[stages.rl] max_length", f"on the curated set already made: {why}")] if why else []


def _check_rl(cfg: RecipeConfig) -> None:
    section = cfg.stage("rl")
    check_choices("[stages.rl]", section)
    if not isinstance(section.get("enabled", True), bool):
        raise RecipeError(f"[stages.rl] enabled: expected true or false, got {section['enabled']!r}")
    if section.get("enabled", True):
        _rl_config(cfg)


def rl_section() -> Section:
    from datadojo.train.config import RLConfig

    return Section(
        "rl",
        RLConfig,
        own=("enabled", "preset", "reward"),
        filled=("model", "output_dir"),
        build=_check_rl,
        what="RLConfig keys + enabled, preset, reward",
    )


def rl_stage() -> Stage:
    return Stage(
        "rl",
        "train rl on the RL tasks",
        _run_rl,
        deps=("sft", "rl_tasks", "curation"),
        settings=lambda cfg: {"rl": _keyed(cfg.stage("rl")), "recipe": cfg.recipe},
        code=(*TRAIN_CODE, "datadojo.reward", "datadojo.agent"),
        servers=lambda cfg: _rl_servers(cfg) if cfg.stage("rl").get("enabled", True) else {},
        precheck=_rl_precheck,
    )


# --- eval --------------------------------------------------------------------------------------------------


class EvalSection(Settings):
    """``[stages.eval]``: how every checkpoint is evaluated (the benchmarks are ``[[benchmarks]]``)."""

    concurrency: int = Field(4, ge=1, description="episodes at once")
    temperature: float = Field(0.7, ge=0, description="sampling temperature (DataMind §5.1: 0.7)")
    top_p: float = Field(0.95, gt=0, le=1, description="nucleus sampling")
    seed: int | None = Field(None, description="sampling seed")
    judge: bool = Field(False, description="score with models.judge (SciDataSailor's scidata)")
    model_options: str | None = Field(None, description="the hf: spec's options (device=cuda&dtype=bfloat16)")


def eval_section() -> Section:
    return Section(
        "eval",
        EvalSection,
        build=lambda cfg: EvalSection.model_validate(cfg.stage("eval")),
        what="concurrency, temperature, top_p, seed, judge, model_options",
    )


def _first_task(cfg: RecipeConfig, spec: Any) -> Any:
    """The first task of a benchmark entry (its prompt carries the data profile), ``None`` when it cannot be
    loaded here (the benchmark checks say why)."""
    from datadojo.recipes.checks import first_task

    try:
        return first_task(spec.bench, cfg.path(spec.data), spec.options)
    except Exception:
        return None


def student_generations(cfg: RecipeConfig) -> list[Generation]:
    """Where the recipe generates with the student and with what reply budget: RL rollouts (``[stages.rl]
    max_new_tokens``, the preset's default otherwise: 8192; the agent loop ends an episode at
    ``context_limit`` when the prompt plus this budget does not fit) and every benchmark's eval (its first
    task's prompt plus ``max_tokens``; without ``max_tokens`` the hf backend fits the reply to the room
    left, so only the prompt must fit). Checked against the student's window before anything runs."""
    from datadojo.bench.registry import benchmark_names, get_benchmark

    out: list[Generation] = []
    student = str(_student(cfg))
    section = cfg.stage("rl")
    if section.get("enabled", True) is not False:
        try:
            rl, _ = _rl_config(cfg)
        except Exception:
            rl = None
        if rl is not None:
            source = student if rl.sampler == "hf" else rl.sampler
            budget = (
                "max_new_tokens" if "max_new_tokens" in section else "max_new_tokens (the preset's default)"
            )
            agent = {"dialect": rl.dialect, "max_turns": rl.max_turns}
            out.append(Generation(f"[stages.rl] {budget}", rl.max_new_tokens, agent, source))
    known = {n.lower() for n in benchmark_names()}
    for i, spec in enumerate(cfg.benchmarks, 1):
        if spec.bench.lower() not in known:
            continue
        d = get_benchmark(spec.bench).defaults
        agent = {"dialect": d.dialect, "max_turns": spec.max_turns or d.max_turns, "language": d.language}
        what = "max_tokens" if spec.max_tokens is not None else "prompt (no max_tokens)"
        out.append(
            Generation(
                f"[[benchmarks]] #{i} ({spec.title}) {what}",
                spec.max_tokens or 0,
                agent,
                student,
                _first_task(cfg, spec),
            )
        )
    return out


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
        "empty": eval_verdict(spec.title, s.get("stop_reasons") or {}),
        "stop_reasons": s.get("stop_reasons"),
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
        verdicts = [r["empty"] for r in results.values() if r.get("empty")]
        trials = sum(int(r["n_tasks"]) * int(r["n_trials"]) for r in results.values())
        scored = sum(int(r["scored_trajectories"]) for r in results.values())
        return {
            "empty": "; ".join(verdicts) or None,
            "counts": counts(trials, "trials", scored, "scored"),
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
                servers=lambda cfg: served_models(cfg, "judge") if cfg.stage("eval").get("judge") else {},
            )
        )
    return out

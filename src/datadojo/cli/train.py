"""``datadojo train sft|rl`` and ``datadojo export llamafactory|trl|verl``: thin over :mod:`datadojo.train`.

Training runs on whatever ``accelerate launch`` set up (CPU, one GPU, DDP, DeepSpeed, FSDP): run
``accelerate launch -m datadojo.cli.app train sft ...`` for several devices, plain ``datadojo train sft``
for one. A configuration file (``--config``, JSON or TOML, keys as in :class:`~datadojo.train.config.SFTConfig`
/ :class:`~datadojo.train.config.RLConfig`) is read first, flags override it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from datadojo.cli._ui import error_exit
from datadojo.config import config_help
from datadojo.train.config import RLConfig, SFTConfig

__all__ = ["register"]

train_app = typer.Typer(
    help="Train agents: SFT with environment masking (the cold start), RL with the mixed SFT + DAPO objective "
    "or EnvLunch's GRPO warm-up. See docs/training.md.",
    no_args_is_help=True,
)
export_app = typer.Typer(
    help="Export trajectories / tasks for LLaMA-Factory, TRL or verl.",
    no_args_is_help=True,
)


def _print(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str, indent=1) + "\n")


def _model_path(model: str | None, config_model: str) -> str | None:
    spec = model or config_model
    if spec and spec.startswith("hf:"):
        spec = spec[3:].split("?", 1)[0]
    return spec or None


def _check_model(model: str, command: str) -> None:
    """Refuse, in one line, what would otherwise end in a traceback deep in torch or the Hugging Face hub:
    the training extra not installed, or a model path that is not a local folder (a typo)."""
    from datadojo.errors import require_extra
    from datadojo.train.config import ConfigError

    if not Path(model).is_dir():
        raise ConfigError(
            f"--model {model}: no such folder (a local checkpoint folder, e.g. /models/Qwen2.5-7B-Instruct; "
            "nothing is downloaded)"
        )
    require_extra("train", f"datadojo train {command}", "torch", "transformers", "accelerate")


@train_app.command("sft")
def sft(
    data: Path = typer.Option(
        ..., "--data", "-d", help="Trajectories JSONL (e.g. curated expert trajectories)."
    ),
    model: str | None = typer.Option(None, "--model", "-m", help=config_help(SFTConfig, "model")),
    out: Path | None = typer.Option(None, "--out", "-o", help=config_help(SFTConfig, "output_dir")),
    config: Path | None = typer.Option(None, "--config", "-c", help="SFTConfig as .json or .toml."),
    epochs: float | None = typer.Option(None, "--epochs", help=config_help(SFTConfig, "epochs")),
    max_steps: int | None = typer.Option(None, "--max-steps", help=config_help(SFTConfig, "max_steps")),
    batch_size: int | None = typer.Option(None, "--batch-size", help=config_help(SFTConfig, "batch_size")),
    micro_batch_size: int | None = typer.Option(
        None, "--micro-batch-size", help=config_help(SFTConfig, "micro_batch_size")
    ),
    lr: float | None = typer.Option(None, "--lr", help=config_help(SFTConfig, "lr", path="optim.lr")),
    max_length: int | None = typer.Option(None, "--max-length", help=config_help(SFTConfig, "max_length")),
    save_every: int | None = typer.Option(None, "--save-every", help=config_help(SFTConfig, "save_every")),
    seed: int | None = typer.Option(None, "--seed", help=config_help(SFTConfig, "seed")),
    no_resume: bool = typer.Option(False, "--no-resume", help="Refuse to continue an existing run folder."),
) -> None:
    """Fine-tune on trajectories, training only the agent's tokens (prompts and observations masked)."""
    from datadojo.cli.inputs import load_trajectories
    from datadojo.train.config import ConfigError, load_config

    trajectories = load_trajectories(data, "--data")  # a bad file is refused before a model is loaded

    try:
        cfg = load_config(config, SFTConfig) if config else SFTConfig()
        optim = cfg.optim if lr is None else cfg.optim.replace(lr=lr)
        cfg = cfg.replace(
            model=_model_path(model, cfg.model),
            output_dir=str(out) if out else None,
            epochs=epochs,
            max_steps=max_steps,
            batch_size=batch_size,
            micro_batch_size=micro_batch_size,
            max_length=max_length,
            save_every=save_every,
            seed=seed,
            optim=optim,
        )
        if not cfg.model:
            raise ConfigError("no model: pass --model PATH or set 'model' in the config file")
        _check_model(cfg.model, "sft")
        from datadojo.train.sft import train_sft

        summary = train_sft(cfg, trajectories, resume=not no_resume)
    except (OSError, ImportError) as exc:  # a file the OS refuses; the training extra not installed
        raise error_exit(exc) from exc
    _print(summary.to_dict())


@train_app.command("rl")
def rl(
    tasks: Path = typer.Option(..., "--tasks", "-t", help="Tasks JSONL to roll out on."),
    model: str | None = typer.Option(None, "--model", "-m", help=config_help(RLConfig, "model")),
    experts: Path | None = typer.Option(
        None,
        "--experts",
        "-e",
        help="Expert trajectories JSONL for the SFT term (by task_id); needed when γ > 0.",
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help=config_help(RLConfig, "output_dir")),
    config: Path | None = typer.Option(
        None, "--config", "-c", help="RLConfig as .json or .toml (over the preset)."
    ),
    preset: str = typer.Option(
        "datamind", "--preset", help="datamind (γ·SFT + (1−γ)·DAPO) or envlunch (GRPO warm-up)."
    ),
    reward: str = typer.Option(
        "auto",
        "--reward",
        help="A registered reward (datamind, envlunch, benchmark, scientific, judge), or auto: envlunch for "
        "EnvLunch tasks, judge with --judge, else datamind.",
    ),
    judge: str | None = typer.Option(
        None, "--judge", help="Model spec of an LLM judge for r_answer (datamind reward)."
    ),
    sampler: str | None = typer.Option(
        None,
        "--sampler",
        help=config_help(RLConfig, "sampler"),
    ),
    steps: int | None = typer.Option(None, "--steps", help=config_help(RLConfig, "total_steps")),
    tasks_per_step: int | None = typer.Option(
        None, "--tasks-per-step", help=config_help(RLConfig, "tasks_per_step")
    ),
    group_size: int | None = typer.Option(None, "--group-size", help=config_help(RLConfig, "group_size")),
    updates_per_step: int | None = typer.Option(
        None, "--updates-per-step", help=config_help(RLConfig, "updates_per_step")
    ),
    micro_batch_size: int | None = typer.Option(
        None, "--micro-batch-size", help=config_help(RLConfig, "micro_batch_size")
    ),
    max_turns: int | None = typer.Option(None, "--max-turns", help=config_help(RLConfig, "max_turns")),
    max_new_tokens: int | None = typer.Option(
        None, "--max-new-tokens", help=config_help(RLConfig, "max_new_tokens")
    ),
    max_length: int | None = typer.Option(None, "--max-length", help=config_help(RLConfig, "max_length")),
    lr: float | None = typer.Option(None, "--lr", help=config_help(RLConfig, "lr", path="optim.lr")),
    gamma_mode: str | None = typer.Option(None, "--gamma-mode", help=config_help(RLConfig, "gamma_mode")),
    gamma: float | None = typer.Option(None, "--gamma", help=config_help(RLConfig, "gamma_value")),
    concurrency: int | None = typer.Option(None, "--concurrency", help=config_help(RLConfig, "concurrency")),
    save_every: int | None = typer.Option(None, "--save-every", help=config_help(RLConfig, "save_every")),
    publish_every: int | None = typer.Option(
        None, "--publish-every", help=config_help(RLConfig, "publish_every")
    ),
    weight_update: str | None = typer.Option(
        None, "--weight-update", help=config_help(RLConfig, "weight_update")
    ),
    max_policy_lag: int | None = typer.Option(
        None, "--max-policy-lag", help=config_help(RLConfig, "max_policy_lag")
    ),
    seed: int | None = typer.Option(None, "--seed", help=config_help(RLConfig, "seed")),
    no_resume: bool = typer.Option(False, "--no-resume", help="Refuse to continue an existing run folder."),
    allow_reduced_isolation: bool = typer.Option(
        False,
        "--allow-reduced-isolation",
        help="Run even where the sandbox has neither bubblewrap nor Landlock (cells could read the answers).",
    ),
) -> None:
    """Online RL: rollouts through the agent runtime and sandbox, rewards, and the mixed objective."""
    from datadojo.cli.inputs import load_tasks, load_trajectories
    from datadojo.reward.registry import spec_for_cli
    from datadojo.train.config import ConfigError
    from datadojo.train.rewards import registry_reward_fn
    from datadojo.train.rollouts import rollout_source

    try:
        if preset not in ("datamind", "envlunch"):
            raise ConfigError(f"--preset must be datamind or envlunch, got {preset!r}")
        spec_for_cli(reward, judge=judge)  # an unknown --reward is the registry's one line, before any work
        base = RLConfig.datamind() if preset == "datamind" else RLConfig.envlunch()
        if config:
            from datadojo.train.config import load_config

            base = load_config(config, RLConfig, base=base)
        optim = base.optim if lr is None else base.optim.replace(lr=lr)
        cfg = base.replace(
            model=_model_path(model, base.model),
            output_dir=str(out) if out else None,
            sampler=sampler,
            total_steps=steps,
            tasks_per_step=tasks_per_step,
            group_size=group_size,
            updates_per_step=updates_per_step,
            micro_batch_size=micro_batch_size,
            max_turns=max_turns,
            max_new_tokens=max_new_tokens,
            max_length=max_length,
            gamma_mode=gamma_mode,
            gamma_value=gamma,
            concurrency=concurrency,
            save_every=save_every,
            publish_every=publish_every,
            weight_update=weight_update,
            max_policy_lag=max_policy_lag,
            seed=seed,
            optim=optim,
        )
        if not cfg.model:
            raise ConfigError("no model: pass --model PATH or set 'model' in the config file")
        _check_model(cfg.model, "rl")
        task_list = load_tasks(tasks, "--tasks")
        from datadojo.sandbox.isolation import require_confinement

        require_confinement("auto", allow_reduced=allow_reduced_isolation, purpose="train rl")
        spec = spec_for_cli(reward, judge=judge, tasks_path=tasks, cache_dir=str(cfg.output_dir))
        reward_fn = registry_reward_fn(spec)

        from datadojo.train.rl import RLTrainer

        expert_list = load_trajectories(experts, "--experts") if experts else []
        trainer = RLTrainer(
            cfg, task_list, reward_fn, lambda acc: rollout_source(cfg, acc), experts=expert_list
        )
        try:
            summary = trainer.train(resume=not no_resume)
        finally:
            trainer.source.close()
    except (OSError, ImportError) as exc:  # a file the OS refuses; the training extra not installed
        raise error_exit(exc) from exc
    _print(summary.to_dict())


@train_app.command("gateway")
def gateway_cmd(
    upstream: str = typer.Option(
        ..., "--upstream", help="The engine's OpenAI base URL (http://HOST:PORT/v1)."
    ),
    out: Path = typer.Option(..., "--out", "-o", help="JSONL of every completion's token ids and log-probs."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address the gateway listens on."),
    port: int = typer.Option(8100, "--port", help="Port the gateway listens on."),
) -> None:
    """Token-exact gateway: an OpenAI-compatible proxy recording token ids + log-probs of every completion."""
    from datadojo.train.gateway import RecordingGateway

    gw = RecordingGateway(upstream, out, host=host, port=port)
    sys.stderr.write(f"gateway on http://{host}:{port}/v1 -> {upstream}; recording to {out}\n")
    try:
        gw.serve_forever()
    except OSError as exc:
        raise error_exit(exc) from exc


@train_app.command("toy-model")
def toy_model_cmd(
    out: Path = typer.Argument(..., help="Folder for the checkpoint (tokenizer + model)."),
    hidden: int = typer.Option(32, "--hidden", help="Hidden size."),
    layers: int = typer.Option(2, "--layers", help="Transformer layers."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random weights."),
) -> None:
    """A tiny random Llama + byte-level BPE tokenizer with Qwen2.5's chat template, built offline: a model to
    try `train sft` / `train rl` / the engine adapters on a laptop (it learns nothing useful)."""
    from datadojo.train.toy import save_toy_checkpoint

    try:
        path = save_toy_checkpoint(out, hidden=hidden, layers=layers, seed=seed)
    except (OSError, ImportError) as exc:
        raise error_exit(exc) from exc
    _print({"checkpoint": str(path), "model": f"hf:{path}"})


@export_app.command("llamafactory")
def export_llamafactory_cmd(
    data: Path = typer.Option(..., "--data", "-d", help="Trajectories JSONL."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for <name>.jsonl and dataset_info.json."),
    name: str = typer.Option("datadojo", "--name", help="Dataset name in dataset_info.json."),
    observation_role: str = typer.Option(
        "observation", "--observation-role", help="observation (LLaMA-Factory's tool role) or human."
    ),
) -> None:
    """ShareGPT SFT data with observation turns masked, plus the dataset_info.json entry."""
    from datadojo.cli.inputs import load_trajectories
    from datadojo.train.export.llamafactory import export_llamafactory

    trajectories = load_trajectories(data, "--data")
    try:
        report = export_llamafactory(trajectories, out, name=name, observation_role=observation_role)  # type: ignore[arg-type]
    except OSError as exc:  # bad records and settings are DataDojoErrors: one line from the root handler
        raise error_exit(exc) from exc
    _print(report.to_dict())


@export_app.command("trl")
def export_trl_cmd(
    data: Path = typer.Option(..., "--data", "-d", help="Trajectories JSONL."),
    out: Path = typer.Option(..., "--out", "-o", help="Output JSONL file."),
    with_masks: bool = typer.Option(False, "--with-masks", help="Keep each message's train flag."),
) -> None:
    """Conversational `messages` records for TRL's SFTTrainer (assistant_only_loss)."""
    from datadojo.cli.inputs import load_trajectories
    from datadojo.train.export.trl import export_trl

    trajectories = load_trajectories(data, "--data")
    try:
        report = export_trl(trajectories, out, with_masks=with_masks)
    except OSError as exc:  # bad records and settings are DataDojoErrors: one line from the root handler
        raise error_exit(exc) from exc
    _print(report.to_dict())


@export_app.command("verl")
def export_verl_cmd(
    tasks: Path = typer.Option(..., "--tasks", "-t", help="Tasks JSONL."),
    out: Path = typer.Option(
        ..., "--out", "-o", help="Folder for train/val parquet files and agent_loops.yaml."
    ),
    val_fraction: float = typer.Option(0.0, "--val-fraction", help="Share of tasks for val.parquet."),
    max_turns: int = typer.Option(10, "--max-turns", help="Turn budget of the agent loop verl runs."),
    dialect: str = typer.Option(
        "datamind", "--dialect", help="Tag protocol of the prompts: datamind or sailor."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the train / val split."),
    agent_loop: str = typer.Option(
        "datadojo",
        "--agent-loop",
        help="verl agent loop of the rows: datadojo (DataDojo's ReAct loop and reward; tool_agent was removed).",
    ),
) -> None:
    """verl parquet files (data_source, prompt, ability, reward_model, extra_info, agent_name) rolled out by
    DataDojo's agent loop, and agent_loops.yaml naming it."""
    from datadojo.cli.inputs import load_tasks
    from datadojo.train.export import ExportError
    from datadojo.train.export.verl import AGENT_LOOPS, TOOL_AGENT_REMOVED, export_verl

    if agent_loop == "tool_agent":
        raise error_exit(ExportError(f"--agent-loop tool_agent: {TOOL_AGENT_REMOVED}"))
    if agent_loop not in AGENT_LOOPS:
        raise error_exit(ExportError(f"--agent-loop {agent_loop}: unknown; use {', '.join(AGENT_LOOPS)}"))
    task_list = load_tasks(tasks, "--tasks")
    try:
        report = export_verl(
            task_list,
            out,
            val_fraction=val_fraction,
            seed=seed,
            max_turns=max_turns,
            dialect=dialect,
            tasks_path=tasks,
            agent_loop=agent_loop,
        )
    except OSError as exc:  # bad records and settings are DataDojoErrors: one line from the root handler
        raise error_exit(exc) from exc
    _print(report.to_dict())


def register(app: typer.Typer) -> None:
    app.add_typer(train_app, name="train")
    app.add_typer(export_app, name="export")

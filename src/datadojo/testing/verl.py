"""Build one of verl's registered agent loops the way verl's ``AgentLoopWorker`` does, outside a cluster.

The verl engine tests and ``benchmarks/train_gpu.py`` drive DataDojo's agent loops (``datadojo_agent``,
``datadojo_expert``) with a tokenizer and a server manager of their own (a tiny model behind a fake
``AsyncLLMServerManager``) and no Ray: this is the one place that knows how verl instantiates a loop from
its registry (hydra ``instantiate`` of the registered config with the trainer and data configs wrapped).
Needs the ``verl`` engine environment (``verl``, ``hydra-core``, ``omegaconf``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["agent_loop"]


def agent_loop(
    name: str,
    *,
    tokenizer: Any,
    server_manager: Any = None,
    response_length: int = 4096,
    prompt_length: int = 4096,
    max_assistant_turns: int | None = None,
) -> Any:
    """The agent loop registered as ``name`` (register it first), for rollout lengths and a turn cap."""
    import hydra
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry

    rollout: dict[str, Any] = {"response_length": response_length, "prompt_length": prompt_length}
    if max_assistant_turns is not None:
        rollout["multi_turn"] = {"max_assistant_turns": max_assistant_turns}
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": rollout}, "data": {}})
    return hydra.utils.instantiate(
        config=_agent_loop_registry[name],
        trainer_config=DictConfigWrap(config=config),
        server_manager=server_manager,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=None,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap([]),
    )


def dapo_actor_config(*, rollout_n: int, mini_batch: int, micro_batch: int) -> Any:
    """verl's FSDP actor config with DataMind's DAPO clipping (ε_low 0.2, ε_high 0.28, token-mean, no KL,
    no entropy bonus: DataMind §3.3), as the loss tests and the GPU benchmark use it."""
    from verl.workers.config import FSDPActorConfig, PolicyLossConfig

    return FSDPActorConfig(
        strategy="fsdp",
        rollout_n=rollout_n,
        ppo_mini_batch_size=mini_batch,
        ppo_micro_batch_size_per_gpu=micro_batch,
        clip_ratio=0.2,
        clip_ratio_low=0.2,
        clip_ratio_high=0.28,
        loss_agg_mode="token-mean",
        entropy_coeff=0.0,
        use_kl_loss=False,
        policy_loss=PolicyLossConfig(loss_mode="vanilla"),
    )

"""``train_gpu.py --engine verl``: DataDojo's agent loop and γ-mixed loss inside verl vs verl's plain DAPO loss.

Needs verl 0.9.1 (imported lazily: ``train_gpu.py --dry-run`` works without it). See ``train_gpu.py``.
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch

SALES = Path(__file__).resolve().parents[1] / "examples" / "data" / "sales.csv"


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _peak_gib() -> float | None:
    return torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def build_model(spec: dict[str, Any]) -> Any:
    """A randomly initialized Qwen2 (the architecture of Qwen2.5) from a config: no download."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(**spec["model"], max_position_embeddings=32768)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    dtype = getattr(torch, spec["dtype"])
    return Qwen2ForCausalLM(cfg).to(device=_device(), dtype=dtype)


class HFServer:
    """verl's server manager, answered by ``transformers`` ``generate`` on the benchmark's model."""

    def __init__(self, model: Any, tok: Any, max_new_tokens: int) -> None:
        self.model, self.tok, self.max_new_tokens = model, tok, max_new_tokens
        self.generated = 0

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ):
        from transformers import LogitsProcessor, LogitsProcessorList
        from verl.workers.rollout.replica import TokenOutput

        n_tok = len(self.tok)

        class OnlyTokenizerIds(LogitsProcessor):  # the model's vocabulary is larger than the toy tokenizer's
            def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
                scores[:, n_tok:] = -float("inf")
                return scores

        ids = torch.tensor([prompt_ids], device=_device())
        with torch.no_grad():
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=min(
                    self.max_new_tokens, int(sampling_params.get("max_tokens") or self.max_new_tokens)
                ),
                do_sample=True,
                temperature=float(sampling_params.get("temperature", 1.0)) or 1.0,
                logits_processor=LogitsProcessorList([OnlyTokenizerIds()]),
                stop_strings=sampling_params.get("stop") or None,
                tokenizer=self.tok,
                output_scores=True,
                return_dict_in_generate=True,
                pad_token_id=self.tok.pad_token_id,
            )
            lps = self.model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True)
        new = out.sequences[0, ids.shape[1] :].tolist()
        self.generated += len(new)
        return TokenOutput(token_ids=new, log_probs=lps[0].float().tolist(), stop_reason="completed")


def run_agent_loop(
    model: Any, tok: Any, episodes: int, max_new_tokens: int
) -> tuple[list[Any], dict[str, Any]]:
    """``episodes`` real DataDojo episodes in verl's agent-loop class (sandbox per trajectory)."""
    from datadojo.testing.verl import agent_loop
    from datadojo.train.export import verl_agent
    from datadojo.train.export.verl import task_to_verl_row
    from datadojo.types import DataFile, Task

    verl_agent.register()
    server = HFServer(model, tok, max_new_tokens)
    loop = agent_loop(verl_agent.AGENT_NAME, tokenizer=tok, server_manager=server, max_assistant_turns=3)
    task = Task(id="bench", question="How many rows?", files=[DataFile.from_path(SALES)], answer=240)
    row = task_to_verl_row(task, 0, "train", max_turns=3)
    outs = []
    t0 = time.perf_counter()
    for _ in range(episodes):
        outs.append(asyncio.run(loop.run({"temperature": 1.0, "top_p": 1.0}, **row)))
    wall = time.perf_counter() - t0
    return outs, {
        "agent_episodes": episodes,
        "agent_generated_tokens": server.generated,
        "agent_wall_s": round(wall, 2),
        "agent_tokens_per_s": round(server.generated / wall, 1) if wall > 0 else None,
    }


def build_batch(spec: dict[str, Any], vocab: int, rollouts: list[Any], seed: int = 0) -> Any:
    """One verl-format batch: G rollout rows per prompt (the agent loop's first), then the expert rows."""
    from tensordict import NonTensorStack, TensorDict

    g = torch.Generator().manual_seed(seed)
    n_roll = spec["prompts"] * spec["group"]
    n = n_roll + spec["experts"]
    P, R = spec["prompt_len"], spec["response_len"]
    prompts = torch.zeros(n, P, dtype=torch.long)
    responses = torch.zeros(n, R, dtype=torch.long)
    attention = torch.zeros(n, P + R, dtype=torch.long)
    response_mask = torch.zeros(n, R, dtype=torch.long)
    for i in range(n):
        if i < len(rollouts) and i < n_roll:
            p = list(rollouts[i].prompt_ids)[-P:]
            r = list(rollouts[i].response_ids)[:R]
            m = list(rollouts[i].response_mask)[:R]
        else:
            pl = int(torch.randint(P // 2, P + 1, (1,), generator=g))
            rl = int(torch.randint(R // 2, R + 1, (1,), generator=g))
            p = torch.randint(5, vocab, (pl,), generator=g).tolist()
            r = torch.randint(5, vocab, (rl,), generator=g).tolist()
            m = [1] * rl
            for k in range(rl // 4, rl // 4 + rl // 8):  # an observation inside the response
                m[k] = 0
        prompts[i, P - len(p) :] = torch.tensor(p)
        responses[i, : len(r)] = torch.tensor(r)
        attention[i, P - len(p) : P + len(r)] = 1
        response_mask[i, : len(m)] = torch.tensor(m)
    input_ids = torch.cat([prompts, responses], 1)
    position_ids = (attention.cumsum(-1) - 1).clamp_min(0)
    acc = [float(i % 2) for i in range(n_roll)] + [0.0] * spec["experts"]
    uids = [f"p{i // spec['group']}" for i in range(n_roll)] + [f"e{i}" for i in range(spec["experts"])]
    extra = [
        {"datadojo_expert": int(i >= n_roll), "datadojo_void": 0, "reward_extra_info": {"acc": acc[i]}}
        for i in range(n)
    ]
    adv = torch.tensor([(1.0 if a else -1.0) if i < n_roll else 0.0 for i, a in enumerate(acc)])
    return TensorDict(
        {
            "prompts": prompts,
            "responses": responses,
            "input_ids": input_ids,
            "attention_mask": attention,
            "position_ids": position_ids,
            "response_mask": response_mask,
            "advantages": (adv.unsqueeze(1) * response_mask).float(),
            "extra_fields": NonTensorStack(*extra),
            "uid": NonTensorStack(*uids),
        },
        batch_size=[n],
    )


def _logprobs(model: Any, mb: Any) -> tuple[Any, int]:
    """The actor's per-token log-probs as verl's engine hands them to the loss (jagged, left-shifted)."""
    ids = mb["input_ids"]
    offsets = ids.offsets()
    lens = offsets.diff().tolist()
    padded = ids.to_padded_tensor(0).to(_device())
    mask = (torch.arange(padded.shape[1])[None, :] < torch.tensor(lens)[:, None]).long().to(_device())
    logits = model(input_ids=padded, attention_mask=mask, use_cache=False).logits.float()
    lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, padded[:, 1:, None]).squeeze(-1)
    lp = torch.cat([lp, torch.zeros_like(lp[:, :1])], 1)
    values = torch.cat([lp[i, : lens[i]] for i in range(len(lens))])
    return torch.nested.nested_tensor_from_jagged(values, offsets=offsets.to(values.device)), sum(lens)


def _old_logprobs(model: Any, td: Any, micro: int) -> torch.Tensor:
    """verl's old-log-prob pass (no grad) on the response positions."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.utils import prepare_micro_batches
    from verl.workers.utils.padding import left_right_2_no_padding, no_padding_2_padding

    data = left_right_2_no_padding(td.clone())
    tu.assign_non_tensor(data, use_dynamic_bsz=False, micro_batch_size_per_gpu=micro)
    out = []
    with torch.no_grad():
        for mb in prepare_micro_batches(data)[0]:
            nested, _ = _logprobs(model, mb)
            out.append(no_padding_2_padding(nested, mb.to(nested.device)).float().cpu())
    return torch.cat(out)


def train_steps(
    model: Any, td: Any, loss_fn: Any, spec: dict[str, Any], steps: int, gamma: float, mixed: bool
):
    """``steps`` optimizer updates on ``td`` (one mini-batch) through verl's micro-batching; returns figures."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.utils import prepare_micro_batches
    from verl.workers.utils.padding import left_right_2_no_padding

    from datadojo.train.export import verl_mixed

    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.98), weight_decay=0.01)
    times, tokens = [], 0
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    for step in range(steps + 1):  # step 0 is warm-up
        _sync()
        t0 = time.perf_counter()
        data = left_right_2_no_padding(td.clone())
        mask = data["loss_mask"]
        tu.assign_non_tensor(
            data,
            use_dynamic_bsz=False,
            micro_batch_size_per_gpu=spec["micro"],
            dp_size=1,
            batch_num_tokens=int((mask.values() if mask.is_nested else mask).sum()),
            global_batch_size=data.shape[0],
            datadojo_gamma=gamma,
        )
        if mixed:
            verl_mixed.annotate_step_batch(data, None)
            verl_mixed.annotate_mini_batch(data, None)
        n_tok = 0
        for mb in prepare_micro_batches(data)[0]:
            mb = mb.to(_device())
            nested, k = _logprobs(model, mb)
            loss, _ = loss_fn(model_output={"log_probs": nested}, data=mb, dp_group=None)
            loss.backward()
            n_tok += k
        opt.step()
        opt.zero_grad(set_to_none=True)
        _sync()
        if step > 0:
            times.append(time.perf_counter() - t0)
            tokens += n_tok
    total = sum(times)
    return {
        "tokens_per_s": round(tokens / total, 1) if total else None,
        "step_s": round(total / steps, 3),
    }, _peak_gib()


def run_verl_bench(plan: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """The ``--engine verl`` run (``train_gpu.py`` docstring): agent loop, then both losses on one batch."""
    from verl.workers.utils.losses import ppo_loss

    from datadojo.testing.verl import dapo_actor_config
    from datadojo.train.export import verl_mixed
    from datadojo.train.toy import build_toy_tokenizer

    tok = build_toy_tokenizer()
    model = build_model(spec)
    n_params = sum(p.numel() for p in model.parameters())
    t0 = time.perf_counter()
    rollouts, figures = (
        run_agent_loop(model, tok, plan["episodes"], spec["max_new_tokens"])
        if plan["episodes"]
        else ([], {"agent_episodes": 0})
    )
    td = build_batch(spec, len(tok), rollouts)
    td["old_log_probs"] = _old_logprobs(model, td, spec["micro"])
    config = dapo_actor_config(rollout_n=spec["group"], mini_batch=spec["prompts"], micro_batch=spec["micro"])
    model.train()
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    dapo, mem_dapo = train_steps(
        model, td, partial(ppo_loss, config), spec, plan["steps"], plan["gamma"], False
    )
    model.load_state_dict(initial)  # the same starting weights for the second run
    mixed, mem_mixed = train_steps(
        model, td, partial(verl_mixed.datadojo_mixed_loss, config), spec, plan["steps"], plan["gamma"], True
    )
    figures.update(
        {
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
            "size": plan["size"],
            "params_m": round(n_params / 1e6, 1),
            "rows": plan["rows"],
            "expert_rows": plan["expert_rows"],
            "gamma": plan["gamma"],
            "verl_dapo_tokens_per_s": dapo["tokens_per_s"],
            "mixed_tokens_per_s": mixed["tokens_per_s"],
            "mixed_vs_dapo_throughput": round(mixed["tokens_per_s"] / dapo["tokens_per_s"], 3)
            if dapo["tokens_per_s"] and mixed["tokens_per_s"]
            else None,
            "verl_dapo_peak_gib": None if mem_dapo is None else round(mem_dapo, 2),
            "mixed_peak_gib": None if mem_mixed is None else round(mem_mixed, 2),
            "mixed_vs_dapo_memory": round(mem_mixed / mem_dapo, 3) if mem_dapo and mem_mixed else None,
            "wall_s": round(time.perf_counter() - t0, 1),
        }
    )
    return figures

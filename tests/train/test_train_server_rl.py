"""`train rl` with a server sampler: token-exact rollouts, the server's log-probs as rollout log-probs
(truncated IS ≠ 1 while the server lags), and in-place weight updates through the server's HTTP route."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from datadojo.env.tokens import openai_completions_generate  # noqa: E402
from datadojo.llm.base import SamplingParams  # noqa: E402
from datadojo.reward.registry import RewardResult  # noqa: E402
from datadojo.testing.token_server import TokenServer, hf_handler  # noqa: E402
from datadojo.train.config import OptimConfig, RLConfig  # noqa: E402
from datadojo.train.rl import RLTrainer  # noqa: E402
from datadojo.train.rollouts import TokenRollouts  # noqa: E402
from datadojo.train.weight_sync import WeightSync, server_root  # noqa: E402
from datadojo.types import Task  # noqa: E402

TASKS = [Task(id=f"t{i}", question="How much?") for i in range(2)]


def _reward(pairs: Any) -> list[RewardResult]:
    # Rewards that differ within a group so advantages are not all 0.
    return [RewardResult(float(tr.sample % 2), bool(tr.sample % 2)) for _, tr in pairs]


@pytest.mark.parametrize("kind", ["sglang", "vllm"])
def test_server_logprobs_drive_tis_and_weights_update_in_place(
    tmp_path: Path, toy_tok: Any, make_model: Any, kind: str
) -> None:
    served = make_model(seed=1)  # the server starts from other weights than the trainer's, and sharper
    with torch.no_grad():  # (a random tiny model is near-uniform: two of them give nearly equal log-probs)
        served.lm_head.weight.mul_(40.0)
    handler, reload = hf_handler(served, eos_token_id=toy_tok.eos_token_id)
    run = tmp_path / "rl"
    cfg = RLConfig(
        output_dir=str(run),
        total_steps=2,
        tasks_per_step=2,
        group_size=2,
        updates_per_step=1,
        micro_batch_size=4,
        save_every=0,
        policy_loss="grpo",
        kl_coef=0.0,
        entropy_coef=0.0,
        dynamic_sampling=False,
        void_masking=False,  # a random model never writes a valid action: every turn is void
        gamma_mode="fixed",
        gamma_value=0.0,
        max_turns=2,
        max_new_tokens=12,
        optim=OptimConfig(lr=1e-3, scheduler="constant", warmup_ratio=0.0),
    )
    with TokenServer(handler, reload=reload) as srv:
        weights = WeightSync(server_root(srv.base_url + "/v1"), kind, run / "policy", max_lag=0)
        source = TokenRollouts(
            openai_completions_generate(srv.base_url + "/v1", "toy"),
            toy_tok,
            max_turns=2,
            sampling=SamplingParams(temperature=1.0, top_p=1.0, max_tokens=12),
            concurrency=2,
            weights=weights,
        )
        trainer = RLTrainer(cfg, TASKS, _reward, source, model=make_model(seed=0), tokenizer=toy_tok)
        trainer.train()
        calls = [c for c in srv.calls if not c[0].endswith("/completions")]
    recs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    # Step 1: the server's weights are not the trainer's, so the IS weights leave [0.5, 1.5] somewhere.
    assert recs[0]["tis_clip_frac"] > 0.1
    # After step 1 the server loaded the trainer's weights in place: step 2's server log-probs are the
    # trainer's old log-probs, every IS weight is 1 (within float noise), none clipped.
    assert recs[1]["tis_clip_frac"] == 0.0
    assert [r["policy_lag"] for r in recs] == [0, 0]
    route = "/update_weights_from_disk" if kind == "sglang" else "/collective_rpc"
    loads = [body for path, body in calls if path == route]
    assert len(loads) == 2
    first = loads[0]["model_path"] if kind == "sglang" else loads[0]["kwargs"]["weights_path"]
    assert first == str((run / "policy" / "step_000001").resolve())
    assert any(path in ("/flush_cache", "/reset_prefix_cache") for path, _ in calls)
    # Rollouts carry their exact tokens and the server's log-probs.
    raw = [
        json.loads(line) for line in (run / "rollouts" / "step_000001.rank0.jsonl").read_text().splitlines()
    ]
    assert len(raw) == 4 and all(r["extra"]["tokens"]["has_logprobs"] for r in raw)
    ep = raw[0]["extra"]["tokens"]
    assert sum(ep["response_mask"]) > 0 and len(ep["response_ids"]) == len(ep["response_logprobs"])


def test_lag_setting_spaces_the_pushes(tmp_path: Path) -> None:
    class Acc:
        is_main_process = True

        def wait_for_everyone(self) -> None:
            pass

    ws = WeightSync("http://127.0.0.1:9", "sglang", tmp_path, max_lag=2)
    pushed: list[int] = []
    import datadojo.train.weight_sync as mod

    orig = mod.save_hf_model
    mod.save_hf_model = lambda acc, m, t, p: Path(p)  # type: ignore[assignment]
    ws.load = lambda p: pushed.append(ws.steps)  # type: ignore[method-assign]
    try:
        lags = []
        for _ in range(7):
            ws.step(Acc(), None, None)
            lags.append(ws.policy_lag)
    finally:
        mod.save_hf_model = orig
    assert pushed == [3, 6] and lags == [1, 2, 0, 1, 2, 0, 1]

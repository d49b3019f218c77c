"""SFT on a tiny random Llama: masked tokens get no gradient, the loss goes down, runs checkpoint and resume."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from datadojo.train.config import OptimConfig, SFTConfig  # noqa: E402
from datadojo.train.losses import sft_loss, token_logprobs  # noqa: E402
from datadojo.train.modeling import collate, forward_logprobs  # noqa: E402
from datadojo.train.sft import SFTTrainer  # noqa: E402
from datadojo.train.tokenize import tokenize_trajectory  # noqa: E402
from datadojo.train.toy import synthetic_trajectory  # noqa: E402


def _batch(tok: Any, n: int = 3) -> Any:
    return collate(
        [tokenize_trajectory(synthetic_trajectory(f"b{i}"), tok) for i in range(n)], tok.pad_token_id
    )


def test_masked_tokens_get_zero_gradient(toy_tok: Any, make_model: Callable[..., Any]) -> None:
    model = make_model()
    tb = _batch(toy_tok)
    out = model(input_ids=tb.input_ids, attention_mask=tb.attention_mask)
    logits = out.logits
    logits.retain_grad()
    logp = token_logprobs(logits[:, :-1], tb.input_ids[:, 1:])
    sft_loss(logp, tb.target_mask).backward()
    grad = logits.grad[:, :-1].abs().sum(-1)  # position t predicts token t + 1
    masked = tb.target_mask == 0
    assert torch.all(grad[masked] == 0)
    assert torch.all(grad[~masked] > 0)


def test_a_few_sft_steps_lower_the_loss_on_a_fixed_batch(
    toy_tok: Any, make_model: Callable[..., Any]
) -> None:
    model = make_model()
    tb = _batch(toy_tok)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(6):
        logp, _ = forward_logprobs(model, tb)
        loss = sft_loss(logp, tb.target_mask)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.3
    assert all(b < a for a, b in itertools.pairwise(losses))


def _cfg(tmp: Path, **kw: Any) -> SFTConfig:
    base = {
        "output_dir": str(tmp),
        "batch_size": 4,
        "micro_batch_size": 2,
        "max_steps": 3,
        "save_every": 2,
        "optim": OptimConfig(lr=3e-3, scheduler="constant", warmup_ratio=0.0),
    }
    return SFTConfig(**{**base, **kw})


def _data() -> list:
    return [synthetic_trajectory(f"s{i}") for i in range(6)] + [synthetic_trajectory("void", void=True)]


def test_trainer_runs_checkpoints_and_resumes(
    tmp_path: Path, toy_tok: Any, make_model: Callable[..., Any]
) -> None:
    run = tmp_path / "run"
    s1 = SFTTrainer(_cfg(run), model=make_model(), tokenizer=toy_tok).train(_data())
    assert (s1.steps, s1.resumed_from, s1.n_examples, s1.n_void) == (3, 0, 6, 1)
    assert s1.last_loss is not None and s1.first_loss is not None and s1.last_loss < s1.first_loss
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3]
    assert all({"sft_loss", "lr", "grad_norm", "tokens_per_s"} <= r.keys() for r in records)
    svg = (run / "curves.svg").read_text()
    assert svg.startswith("<svg") and "sft_loss" in svg and "<polyline" in svg
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_000002", "step_000003"]
    assert (run / "final" / "config.json").exists() and (run / "final" / "tokenizer_config.json").exists()

    # a longer budget continues from step 3 with the same data order
    s2 = SFTTrainer(_cfg(run, max_steps=5), model=make_model(), tokenizer=toy_tok).train(_data())
    assert (s2.resumed_from, s2.steps) == (3, 5)
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [
        1,
        2,
        3,
        4,
        5,
    ]
    # rerunning the finished run trains nothing and keeps the run's figures (before: nulls over summary.json)
    s3 = SFTTrainer(_cfg(run, max_steps=5), model=make_model(), tokenizer=toy_tok).train(_data())
    assert (s3.resumed_from, s3.steps) == (5, 5)
    assert (s3.first_loss, s3.last_loss) == (s1.first_loss, s2.last_loss) and s3.agent_tokens > 0
    assert json.loads((run / "summary.json").read_text())["last_loss"] == s2.last_loss
    # a changed learning rate is a different run: refused
    other = _cfg(run, max_steps=6, optim=OptimConfig(lr=1e-4, scheduler="constant", warmup_ratio=0.0))
    with pytest.raises(ValueError, match="optim"):
        SFTTrainer(other, model=make_model(), tokenizer=toy_tok).train(_data())


def test_a_rerun_of_a_finished_run_repairs_its_torn_metrics(
    tmp_path: Path, toy_tok: Any, make_model: Callable[..., Any]
) -> None:
    """A kill mid-write of a metrics record after the last checkpoint, then a rerun: the run is finished, no
    step appends, and the torn record must still go (before: it stayed, and every strict reader of the
    run's metrics failed on it; tests/faults/test_kill_resume.py::test_train_sft on a 2-core machine)."""
    from datadojo.jsonl import iter_jsonl

    run = tmp_path / "run"
    SFTTrainer(_cfg(run), model=make_model(), tokenizer=toy_tok).train(_data())
    whole = (run / "metrics.jsonl").read_bytes()
    with (run / "metrics.jsonl").open("ab") as fh:
        fh.write(b'{"step": 3, "epoch": 1.5, "sft_loss": 0.81')  # what a kill mid-append leaves
    again = SFTTrainer(_cfg(run), model=make_model(), tokenizer=toy_tok).train(_data())
    assert (again.resumed_from, again.steps) == (3, 3)  # nothing was left to do
    assert (run / "metrics.jsonl").read_bytes() == whole
    steps = [r["step"] for _, r in iter_jsonl(run / "metrics.jsonl", skip_partial_tail=False)]
    assert steps == [1, 2, 3]


def test_micro_batch_size_does_not_change_the_update(
    tmp_path: Path, toy_tok: Any, make_model: Callable[..., Any]
) -> None:
    weights = []
    for micro in (1, 4):
        model = make_model()
        cfg = _cfg(tmp_path / f"m{micro}", micro_batch_size=micro, max_steps=1, save_every=0)
        SFTTrainer(cfg, model=model, tokenizer=toy_tok).train(_data()[:4])
        weights.append(model.lm_head.weight.detach().clone())
    assert torch.allclose(weights[0], weights[1], atol=1e-6)

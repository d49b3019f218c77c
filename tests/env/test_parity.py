"""Reward parity, main-suite rows: ``datadojo eval`` and ``train rl``'s rollouts give every parity task the
same reward (docs/environment.md, "Parity"), and those rewards are the papers' by hand.

Both consumers run the fixture's tasks (:mod:`datadojo.testing.parity`) against the loopback scripted server,
through their own code paths: ``run_eval`` (``tasks`` and ``dabench``) and one ``RLTrainer`` step whose
rollouts come from the agent runtime (``AgentRollouts``) and whose reward function is the one the CLI builds
(``--reward auto``). With ``DATADOJO_PARITY_DIR`` set (``scripts/engine_tests.sh``), both row files are
written there for the table beside the engines' rows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from datadojo.eval.harness import EvalConfig, run_eval
from datadojo.jsonl import iter_jsonl, read_trajectories
from datadojo.llm import load_backend
from datadojo.testing.parity import (
    CASES,
    ParityFixture,
    chat_script,
    parity_row,
    table_problems,
    write_parity_fixture,
    write_rows,
)
from datadojo.testing.server import ScriptedLLMServer

NOT_IN_EVAL = "eval has no benchmark that scores EnvLunch tasks (`datadojo warmup score` does)"


@pytest.fixture(scope="module")
def fixture(tmp_path_factory: pytest.TempPathFactory) -> ParityFixture:
    return write_parity_fixture(tmp_path_factory.mktemp("parity"))


@pytest.fixture(scope="module")
def server(fixture: ParityFixture) -> Any:
    with ScriptedLLMServer(chat_script(fixture)) as srv:
        yield srv


def _out_dir(tmp_path: Path) -> Path:
    return Path(os.environ.get("DATADOJO_PARITY_DIR") or tmp_path / "parity")


async def _eval_rows(fixture: ParityFixture, server: Any, tmp_path: Path) -> dict[str, dict[str, Any]]:
    plain = [
        t for t in fixture.tasks if fixture.kind.get(t.id) in ("csv-total", "csv-top-region", "sqlite-orders")
    ]
    own = tmp_path / "own.jsonl"
    own.write_text("".join(t.model_dump_json() + "\n" for t in plain), encoding="utf-8")
    rows: dict[str, dict[str, Any]] = {}
    backend = load_backend(f"openai:parity@{server.base_url}?max_retries=0")
    try:
        for bench, data in (("tasks", own), ("dabench", fixture.dabench_dir)):
            out = tmp_path / f"eval-{bench}"
            cfg = EvalConfig(bench=bench, data=data, out=out, model="openai:parity", n_trials=1, concurrency=4,
                             max_turns=4, report=False)  # fmt: skip
            await run_eval(cfg, backend=backend)
            for _, row in iter_jsonl(out / "scores.jsonl"):
                rows[f"{row['id']}/{row['trial']}"] = parity_row(row["rewards"]["total"], row["rewards"])
    finally:
        await backend.aclose()
    return rows


def _train_rl_rows(
    fixture: ParityFixture, server: Any, tmp_path: Path, toy_tok: Any
) -> dict[str, dict[str, Any]]:
    from datadojo.reward.registry import spec_for_cli
    from datadojo.train.config import OptimConfig, RLConfig
    from datadojo.train.rewards import registry_reward_fn
    from datadojo.train.rl import RLTrainer
    from datadojo.train.rollouts import AgentRollouts
    from datadojo.train.toy import build_toy_model

    run = tmp_path / "rl"
    cfg = RLConfig(
        output_dir=str(run), total_steps=1, tasks_per_step=len(fixture.tasks), group_size=2,
        updates_per_step=1, micro_batch_size=4, save_every=0, policy_loss="grpo", kl_coef=0.0,
        entropy_coef=0.0, dynamic_sampling=False, gamma_mode="fixed", gamma_value=0.0, max_turns=4,
        optim=OptimConfig(lr=1e-4, scheduler="constant", warmup_ratio=0.0),
    )  # fmt: skip
    # what `datadojo train rl --reward auto --tasks TASKS` builds
    reward_fn = registry_reward_fn(spec_for_cli("auto", tasks_path=fixture.tasks_path, cache_dir=run))

    def source(acc: Any) -> AgentRollouts:
        return AgentRollouts(load_backend(f"openai:parity@{server.base_url}?max_retries=0"), max_turns=4)

    trainer = RLTrainer(
        cfg, list(fixture.tasks), reward_fn, source, model=build_toy_model(toy_tok), tokenizer=toy_tok
    )
    try:
        trainer.train(resume=False)
    finally:
        trainer.source.close()
    (scored,) = sorted((run / "rollouts").glob("*.scored.jsonl"))
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert {"reward_answer", "reward_format", "reward_agreement"} <= set(metrics[0])  # parts logged per step
    rows = {
        f"{t.task_id}/{t.sample}": parity_row(t.rewards["total"], t.rewards)
        for t in read_trajectories(scored)
    }
    # a group of two: the scripted replies do not depend on the sample, so neither does the reward
    assert all(rows[f"{t.id}/1"] == rows[f"{t.id}/0"] for t in fixture.tasks)
    return {k: v for k, v in rows.items() if k.endswith("/0")}


async def test_eval_and_train_rl_agree_on_every_task(
    fixture: ParityFixture, server: Any, tmp_path: Path, toy_tok: Any
) -> None:
    import asyncio

    pytest.importorskip("torch")
    eval_rows = await _eval_rows(fixture, server, tmp_path)
    rl_rows = await asyncio.to_thread(_train_rl_rows, fixture, server, tmp_path, toy_tok)
    envlunch = {f"{t.id}/0": NOT_IN_EVAL for t in fixture.tasks if fixture.kind.get(t.id) == "envlunch-sql"}
    out = _out_dir(tmp_path)
    write_rows(out, "eval", eval_rows, not_covered=envlunch)
    write_rows(out, "train_rl", rl_rows)

    assert len(rl_rows) == len(fixture.tasks) == 5 * len(CASES)
    assert set(eval_rows) == set(rl_rows) - set(envlunch)
    files = {c: json.loads((out / f"{c}.json").read_text()) for c in ("eval", "train_rl")}
    assert table_problems(files, ("eval", "train_rl")) == []
    for key, row in rl_rows.items():  # the papers' values, by hand (HAND_TOTALS)
        assert row["total"] == pytest.approx(fixture.expected_total(key.split("/")[0]), abs=1e-12), key
        assert sum(row["parts"].values()) == pytest.approx(row["total"], abs=1e-12), key


def test_the_table_catches_a_difference_and_a_missing_consumer(tmp_path: Path) -> None:
    a = {"rows": {"t/0": {"total": 1.0, "parts": {"answer": 1.0}}}, "not_covered": {}}
    b = {"rows": {"t/0": {"total": 1.0 + 2e-9, "parts": {"answer": 1.0}}}, "not_covered": {}}
    c = {"rows": {}, "not_covered": {"t/0": "cannot run it"}}
    assert table_problems({"a": a, "c": c}, ("a", "c")) == []
    assert table_problems({"a": a, "b": b}, ("a", "b")) == [f"t/0: total a=1.0 b={1.0 + 2e-9}"]
    assert table_problems({"a": a}, ("a", "verl")) == ["verl: no verl.json (the consumer did not run)"]
    assert table_problems({"a": a, "d": {"rows": {}, "not_covered": {}}}, ("a", "d")) == ["t/0: d has no row"]

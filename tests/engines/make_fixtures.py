"""Fixtures for the engine tests: real trajectories, every export kind, a tiny Qwen2 checkpoint.

Run by ``scripts/engine_tests.sh`` with the Python that has DataDojo installed (the engines' own
environments need not have it)::

    python tests/engines/make_fixtures.py --spider ../shared/data/spider --out /tmp/fx

writes under ``--out``:

* ``spider/`` — the first ``--spider-tasks`` Spider dev tasks and their trajectories by the oracle agent
  (``datadojo eval spider --agent oracle``: gold SQL through the real agent loop and sandbox);
* ``warmup/`` — EnvLunch warm-up tasks built from Spider databases (``datadojo warmup build``), the reference
  solver's trajectories (``datadojo warmup solve``) and their EnvLunch rewards (``datadojo warmup score``);
* ``exports/llamafactory/`` — one dataset directory holding ``spider``, ``spider_human``, ``warmup`` and
  ``warmup_human`` (observation turns as ``observation`` or as ``human``) and their ``dataset_info.json``;
* ``exports/trl/{spider,warmup}.jsonl``; ``exports/verl_{spider,warmup}/`` (parquet + ``agent_loops.yaml``);
* ``model/`` — a randomly initialized 2-layer Qwen2 with DataDojo's byte-level BPE tokenizer and Qwen2.5's
  chat template; ``qwen25_generation.jinja`` — the same template with ``{% generation %}`` marks (TRL's
  ``assistant_only_loss`` needs them);
* ``manifest.json`` — counts and the expected EnvLunch rewards, read by the tests.

Every step is bounded by counts (tasks, candidates), not by time: the warm-up solver's per-task time limit is
set far above what its 400 candidates take, so the same tasks are solved on a slow machine; the tests need at
least one solved warm-up task (the build is seeded, so the tasks are the same on every run).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from datadojo.bench.spider import Spider
from datadojo.jsonl import read_tasks, read_trajectories, write_jsonl_atomic
from datadojo.train.export.llamafactory import export_llamafactory
from datadojo.train.export.trl import export_trl
from datadojo.train.export.verl import export_verl
from datadojo.train.toy import QWEN25_TEMPLATE, build_toy_tokenizer

#: Qwen2.5's chat template with TRL's ``{% generation %}`` marks around each assistant reply and its <|im_end|>.
QWEN25_GENERATION_TEMPLATE = QWEN25_TEMPLATE.replace(
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}",
    "{%- if message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}{% generation %}{{- message.content + '<|im_end|>' }}{% endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}",
)

#: Spider databases the warm-up tasks are built from (small ones present in the shared copy).
WARMUP_DATABASES = ("flight_2", "academic", "activity_1")


def _cli(*args: str) -> None:
    """Run ``datadojo ARGS`` as a user would (the same Python), failing loudly with its output."""
    cmd = [sys.executable, "-m", "datadojo.cli.app", *args]
    env = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")


def build_model(out: Path) -> None:
    """A tiny random Qwen2 (``Qwen2ForCausalLM``) with the toy tokenizer and Qwen2.5's chat template."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = build_toy_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32768,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(out / "model")
    tok.save_pretrained(out / "model")
    (out / "qwen25_generation.jinja").write_text(QWEN25_GENERATION_TEMPLATE, encoding="utf-8")


def build(spider: Path, out: Path, *, spider_tasks: int, warmup_tasks: int) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict = {"spider": str(spider)}

    # Spider: the oracle agent's trajectories (real agent loop, real sandbox, gold SQL)
    sp = out / "spider"
    sp.mkdir(exist_ok=True)
    tasks = [t for _, t in zip(range(spider_tasks), Spider().load(spider), strict=False)]
    write_jsonl_atomic(sp / "tasks.jsonl", tasks)
    _cli(
        "eval", "spider", "--data", str(spider), "--agent", "oracle", "-n", "1",
        "--limit", str(spider_tasks), "--out", str(sp / "run"), "--no-report", "--json",
    )  # fmt: skip
    spider_trajs = list(read_trajectories(sp / "run" / "trajectories.jsonl"))

    # EnvLunch warm-up: tasks from Spider databases, the reference solver's trajectories, their rewards
    wu = out / "warmup"
    dbs = [spider / "database" / d / f"{d}.sqlite" for d in WARMUP_DATABASES]
    dbs = [d for d in dbs if d.exists()]
    if not dbs:
        raise SystemExit(f"none of {WARMUP_DATABASES} is under {spider / 'database'}")
    _cli(
        "warmup",
        "build",
        *map(str, dbs),
        "--n",
        str(warmup_tasks),
        "--workers",
        "1",
        "--out",
        str(wu / "tasks.jsonl"),
    )
    _cli(
        "warmup", "solve", str(wu / "tasks.jsonl"), "--out", str(wu / "solved.jsonl"),
        "--max-candidates", "400", "--time-limit", "300",
    )  # fmt: skip
    _cli(
        "warmup", "score", str(wu / "tasks.jsonl"), str(wu / "solved.jsonl"),
        "--out", str(wu / "scored.jsonl"), "--in-process",
    )  # fmt: skip
    warm_trajs = [t for t in read_trajectories(wu / "scored.jsonl") if t.turns]
    if not warm_trajs:
        raise SystemExit("the warm-up solver found no program for any task: no warm-up trajectory to export")

    # every export kind
    ex = out / "exports"
    reports = {}
    for name, trajs in (("spider", spider_trajs), ("warmup", warm_trajs)):
        reports[f"llamafactory/{name}"] = export_llamafactory(trajs, ex / "llamafactory", name=name).written
        reports[f"llamafactory/{name}_human"] = export_llamafactory(
            trajs, ex / "llamafactory", name=f"{name}_human", observation_role="human"
        ).written
        reports[f"trl/{name}"] = export_trl(trajs, ex / "trl" / f"{name}.jsonl").written
    reports["verl/spider"] = export_verl(read_tasks(sp / "tasks.jsonl"), ex / "verl_spider").written
    reports["verl/warmup"] = export_verl(
        read_tasks(wu / "tasks.jsonl"), ex / "verl_warmup", tasks_path=wu / "tasks.jsonl"
    ).written
    manifest["written"] = reports
    # what `datadojo warmup score` gave each solved trajectory: the engines' rewards must agree
    manifest["warmup_rewards"] = [
        {
            "task_id": t.task_id,
            "final_answer": t.final_answer,
            # turns before the answer (code or SQL): one tool call each in a verl response
            "tool_turns": next((i for i, x in enumerate(t.turns) if x.action.kind == "answer"), len(t.turns)),
            "reward": t.rewards["envlunch"],
        }
        for t in warm_trajs
    ]
    manifest["spider_oracle"] = [
        {
            "task_id": t.task_id,
            "final_answer": t.final_answer,
            "gold": next(x.answer for x in tasks if x.id == t.task_id),
        }
        for t in spider_trajs
    ]
    build_model(out)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return manifest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spider", type=Path, required=True, help="Spider in its official layout")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--spider-tasks", type=int, default=4)
    ap.add_argument("--warmup-tasks", type=int, default=6)
    args = ap.parse_args()
    manifest = build(
        args.spider.resolve(),
        args.out.resolve(),
        spider_tasks=args.spider_tasks,
        warmup_tasks=args.warmup_tasks,
    )
    print(json.dumps(manifest["written"]))


if __name__ == "__main__":
    main()

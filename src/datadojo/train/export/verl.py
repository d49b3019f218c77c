"""Tasks → verl RL data: parquet files in verl's schema, rolled out by DataDojo's agent loop.

One row per task, in the columns verl's ``RLHFDataset`` reads (:data:`VERL_SCHEMA`):

* ``data_source`` — the task's ``source`` (benchmark name, ``envlunch``, …) or ``datadojo``;
* ``prompt`` — the opening chat messages the agent loop sends (:func:`datadojo.env.prompts.episode_prompt`
  under the row's dialect and turn budget), so verl's prompt-length filter measures the real prompt;
* ``ability`` — ``data_analysis``;
* ``reward_model`` — ``{"style": "rule", "ground_truth": <the reference answer as JSON>}``;
* ``extra_info`` — ``split``, ``index``, ``task_id``, the whole task as JSON (``task``, what the agent loop
  runs and scores), ``dialect``, ``max_turns``, ``tasks_dir`` (EnvLunch copies), ``expert`` (an expert
  trajectory's JSON on the ``datadojo_expert`` rows of
  :func:`~datadojo.train.export.verl_mixed.export_verl_mixed`, else null);
* ``agent_name`` — ``datadojo``: :class:`~datadojo.train.export.verl_agent.DataDojoAgentLoop`, DataDojo's ReAct
  loop token-in / token-out with the sandbox and DataDojo's reward of the real trajectory.

``<out>/agent_loops.yaml`` names the loop for ``actor_rollout_ref.rollout.agent.agent_loop_config_path``.
verl's ``tool_agent`` path (a sandbox tool that re-tokenized every turn, a reward re-scored from flat text)
was removed (:data:`TOOL_AGENT_REMOVED`). The data files are referenced by absolute path: every verl node must
see them at the same path (a shared file system). The command lines are in ``docs/engines/verl.md``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from datadojo.env import AgentConfig
from datadojo.env.prompts import episode_prompt
from datadojo.fs import atomic_path, write_text_atomic
from datadojo.train.export import ExportError, ExportReport
from datadojo.types import Task

__all__ = [
    "ABILITY",
    "AGENT_LOOPS",
    "AGENT_NAME",
    "TOOL_AGENT_REMOVED",
    "VERL_SCHEMA",
    "agent_loop_config",
    "export_verl",
    "task_to_verl_row",
]

ABILITY = "data_analysis"
#: The name :class:`datadojo.train.export.verl_agent.DataDojoAgentLoop` is registered under in verl.
AGENT_NAME = "datadojo"
#: The agent loops ``export_verl`` can configure (the rows' ``agent_name``).
AGENT_LOOPS: tuple[str, ...] = (AGENT_NAME,)
#: The one-line migration note for the removed ``tool_agent`` path (CLI error, docs).
TOOL_AGENT_REMOVED = (
    "verl's tool_agent path (verl_tool.py, verl_reward.py) was removed: `datadojo export verl` configures "
    "DataDojo's agent loop (agent_name datadojo, token-exact, DataDojo's reward); run verl with "
    "actor_rollout_ref.rollout.agent.agent_loop_config_path=<out>/agent_loops.yaml and "
    "--config-name datamind (docs/engines/verl.md)"
)

VERL_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        (
            "extra_info",
            pa.struct(
                [
                    ("split", pa.string()),
                    ("index", pa.int64()),
                    ("task_id", pa.string()),
                    ("task", pa.string()),
                    ("dialect", pa.string()),
                    ("max_turns", pa.int64()),
                    ("tasks_dir", pa.string()),
                    ("expert", pa.string()),
                ]
            ),
        ),
        ("agent_name", pa.string()),
    ]
)


def task_to_verl_row(
    task: Task,
    index: int,
    split: str,
    *,
    max_turns: int = 10,
    dialect: str = "datamind",
    profile_chars: int = 6000,
    tasks_dir: str | None = None,
) -> dict[str, Any]:
    """One task as a verl row (module docstring)."""
    for f in task.files:
        if not Path(f.path).is_absolute():
            raise ExportError(
                f"task {task.id!r}: data file {f.path!r} is relative; read tasks with read_tasks()"
            )
    prompt = episode_prompt(
        task, AgentConfig(max_turns=max_turns, dialect=dialect, profile_chars=profile_chars)
    )
    return {
        "data_source": task.source or "datadojo",
        "prompt": [{"role": m["role"], "content": m["content"]} for m in prompt],
        "ability": ABILITY,
        "reward_model": {
            "style": "rule",
            "ground_truth": json.dumps(task.answer, ensure_ascii=False, default=str),
        },
        "extra_info": {
            "split": split,
            "index": index,
            "task_id": task.id,
            "task": task.to_json(),
            "dialect": dialect,
            "max_turns": max_turns,
            "tasks_dir": tasks_dir,
            "expert": None,
        },
        "agent_name": AGENT_NAME,
    }


def agent_loop_config(path: str | Path) -> Path:
    """Write the YAML that ``actor_rollout_ref.rollout.agent.agent_loop_config_path`` names (atomically)."""
    # JSON is valid YAML (verl reads this file with OmegaConf), and needs no YAML writer.
    text = json.dumps(
        [{"name": AGENT_NAME, "_target_": "datadojo.train.export.verl_agent.DataDojoAgentLoop"}]
    )
    return write_text_atomic(Path(path), text + "\n")


def _write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    table = pa.Table.from_pylist(rows, schema=VERL_SCHEMA)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def export_verl(
    tasks: Iterable[Task],
    out_dir: str | Path,
    *,
    val_fraction: float = 0.0,
    seed: int = 0,
    max_turns: int = 10,
    dialect: str = "datamind",
    profile_chars: int = 6000,
    tasks_path: str | Path | None = None,
    agent_loop: str = AGENT_NAME,
) -> ExportReport:
    """Write ``train.parquet`` (and ``val.parquet`` when ``val_fraction`` > 0) and ``agent_loops.yaml``.

    ``tasks_path`` is the task file the tasks came from; EnvLunch rows need its folder (their
    counterfactual copies live there). The validation split is a seeded random ``val_fraction`` of tasks.
    ``agent_loop`` is the rows' ``agent_name``: ``datadojo`` (the only one; ``tool_agent`` was removed and is
    refused with :data:`TOOL_AGENT_REMOVED`).
    """
    if agent_loop == "tool_agent":
        raise ExportError(TOOL_AGENT_REMOVED)
    if agent_loop not in AGENT_LOOPS:
        raise ExportError(f"unknown agent loop {agent_loop!r}; use {', '.join(AGENT_LOOPS)}")
    if not 0 <= val_fraction < 1:
        raise ExportError(f"val_fraction must be in [0, 1), got {val_fraction}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    items = list(tasks)
    if not items:
        raise ExportError("no tasks to export")
    order = list(range(len(items)))
    random.Random(seed).shuffle(order)
    n_val = round(len(items) * val_fraction)
    val_ids = set(order[:n_val])
    tasks_dir = str(Path(tasks_path).resolve().parent) if tasks_path is not None else None
    splits: dict[str, list[dict[str, Any]]] = {"train": [], "val": []}
    for i, task in enumerate(items):
        split = "val" if i in val_ids else "train"
        row = task_to_verl_row(
            task,
            len(splits[split]),
            split,
            max_turns=max_turns,
            dialect=dialect,
            profile_chars=profile_chars,
            tasks_dir=tasks_dir,
        )
        splits[split].append(row)
    report = ExportReport("verl")
    for split, rows in splits.items():
        if not rows:
            continue
        path = out / f"{split}.parquet"
        _write_parquet(rows, path)
        report.files.append(str(path))
        report.written += len(rows)
    loops = agent_loop_config(out / "agent_loops.yaml")
    report.files.append(str(loops))
    report.notes.append(
        f"agent loop: {agent_loop} (DataDojo's ReAct loop and reward); run verl with "
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops} and "
        "+ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=datadojo.train.export.verl_agent.register "
        "(or --config-name datamind / envlunch from datadojo.train.export.verl_configs)"
    )
    return report

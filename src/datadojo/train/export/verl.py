"""Tasks → verl RL data: parquet files in verl's schema, plus the tool config for multi-turn rollouts.

One row per task, in the columns verl's ``RLHFDataset`` reads (:data:`VERL_SCHEMA`):

* ``data_source`` — the task's ``source`` (benchmark name, ``envlunch``, …) or ``datadojo``;
* ``prompt`` — the opening chat messages (system prompt describing the data files and the ``python`` tool,
  then the question), built by :func:`datadojo.agent.prompts.build_prompt` with :data:`VERL_TEMPLATE`;
* ``ability`` — ``data_analysis``;
* ``reward_model`` — ``{"style": "rule", "ground_truth": <the reference answer as JSON>}``;
* ``extra_info`` — ``split``, ``index``, ``task_id``, the whole task as JSON (``task``, what
  :mod:`~datadojo.train.export.verl_reward` scores against), ``dialect``, ``tasks_dir`` (EnvLunch copies),
  ``expert`` (an expert trajectory's JSON on the ``datadojo_expert`` rows of
  :func:`~datadojo.train.export.verl_mixed.export_verl_mixed`, else null),
  and ``tools_kwargs`` / ``need_tools_kwargs``: the data files handed to
  :class:`~datadojo.train.export.verl_tool.DataDojoSandboxTool` when the rollout starts;
* ``agent_name`` — ``tool_agent``, verl's multi-turn tool-calling agent loop.

The data files are referenced by absolute path: every verl node must see them at the same path (a shared
file system). ``<out>/tool_config.yaml`` registers the sandbox tool; the command lines are in
``docs/training.md``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from datadojo.agent.prompts import build_prompt
from datadojo.fs import atomic_path, write_json_atomic
from datadojo.protocol import get_dialect
from datadojo.train.export import ExportError, ExportReport
from datadojo.train.export.verl_tool import TOOL_NAME, TOOL_SCHEMA
from datadojo.types import Task

__all__ = [
    "ABILITY",
    "TOOL_CLASS",
    "VERL_SCHEMA",
    "VERL_TEMPLATE",
    "export_verl",
    "task_to_verl_row",
    "tool_config",
]

ABILITY = "data_analysis"
TOOL_CLASS = "datadojo.train.export.verl_tool.DataDojoSandboxTool"

#: The system prompt for verl rollouts: DataDojo's contract, with the ``python`` tool as the action.
VERL_TEMPLATE = """You are a data analyst. You answer the user's question about the data files below by running code
with the `python` tool, one step at a time, and then giving a final answer.

## Data
The files are in the tool's working directory. Read them by the names given here.
{{files}}

{{description}}

## Tools
{{tools}}

## How to reply
Reason in `<think>...</think>`, then either call the `python` tool with code to run ({{code_note}} The tool
replies with the printed output or the error; print what you need to see), or give your final answer in
`<answer>...</answer>`, which ends the conversation. You have at most {{max_turns}} replies in total.
{{answer_format}}
"""

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
                    ("tasks_dir", pa.string()),
                    ("expert", pa.string()),
                    ("need_tools_kwargs", pa.bool_()),
                    (
                        "tools_kwargs",
                        pa.struct(
                            [
                                (
                                    TOOL_NAME,
                                    pa.struct([("create_kwargs", pa.struct([("files_json", pa.string())]))]),
                                )
                            ]
                        ),
                    ),
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
    prompt = build_prompt(
        task, get_dialect(dialect), max_turns=max_turns, template=VERL_TEMPLATE, profile_chars=profile_chars
    )
    files_json = json.dumps([f.to_dict() for f in task.files], ensure_ascii=False)
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
            "tasks_dir": tasks_dir,
            "expert": None,
            "need_tools_kwargs": True,
            "tools_kwargs": {TOOL_NAME: {"create_kwargs": {"files_json": files_json}}},
        },
        "agent_name": "tool_agent",
    }


def tool_config(max_output_chars: int | None = None) -> dict[str, Any]:
    """verl's tool config registering :class:`DataDojoSandboxTool` under the ``python`` schema."""
    config: dict[str, Any] = {"type": "native"}
    if max_output_chars:
        config["max_output_chars"] = max_output_chars
    return {"tools": [{"class_name": TOOL_CLASS, "config": config, "tool_schema": TOOL_SCHEMA}]}


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
) -> ExportReport:
    """Write ``train.parquet`` (and ``val.parquet`` when ``val_fraction`` > 0) and ``tool_config.yaml``.

    ``tasks_path`` is the task file the tasks came from; EnvLunch rows need its folder (their
    counterfactual copies live there). The validation split is a seeded random ``val_fraction`` of tasks.
    """
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
    cfg_path = out / "tool_config.yaml"
    # JSON is valid YAML (verl reads this file with OmegaConf), and needs no YAML writer.
    write_json_atomic(cfg_path, tool_config(), ensure_ascii=True)
    report.files.append(str(cfg_path))
    report.notes.append(
        f"reward: custom_reward_function.path={Path(__file__).with_name('verl_reward.py')} "
        "custom_reward_function.name=compute_score"
    )
    return report

"""Trajectories → LLaMA-Factory SFT data: ShareGPT records and the ``dataset_info.json`` entry.

One JSONL record per trajectory::

    {"conversations": [{"from": "human", "value": "<question>"},
                       {"from": "gpt", "value": "<think>…</think>\\n<code>…</code>"},
                       {"from": "observation", "value": "<interpreter>\\n…\\n</interpreter>"},
                       {"from": "gpt", "value": "<think>…</think>\\n<answer>…</answer>"}],
     "system": "<system prompt>"}

``system`` is in every record ("" when the trajectory had no system message: LLaMA-Factory then uses its
template's default system prompt, as the chat template itself does).

LLaMA-Factory trains on ``gpt`` turns and masks ``human`` and ``observation`` turns, which is DataMind's
𝕀(y_t ∉ o) (§4). Its ShareGPT reader requires human/observation turns at odd positions and gpt turns at
even ones, so a trailing observation (an episode that ran out of turns after a code step) is dropped — it
is never a training target — and a prompt that is not one system message plus one user message is an
error, since few-shot assistant messages would become training targets there.

Template caveat: LLaMA-Factory renders ``observation`` turns with its template's tool-result format (Qwen
templates wrap them in ``<tool_response>`` inside a user turn), while DataDojo's runtime sends observations
as plain user messages. ``observation_role="human"`` exports them as human turns instead — still masked, and
rendered exactly as the agent sees them at inference.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from datadojo.fs import write_json_atomic
from datadojo.jsonl import write_jsonl_atomic
from datadojo.protocol.messages import trajectory_to_messages
from datadojo.train.export import ExportError, ExportReport
from datadojo.types import Trajectory

__all__ = ["dataset_info_entry", "export_llamafactory", "trajectory_to_sharegpt", "update_dataset_info"]

ObservationRole = Literal["observation", "human"]


def trajectory_to_sharegpt(
    traj: Trajectory, *, observation_role: ObservationRole = "observation"
) -> dict[str, Any]:
    """One trajectory as a ShareGPT record (module docstring); :class:`ExportError` names the trajectory."""
    where = f"trajectory {traj.task_id!r} (sample {traj.sample})"
    messages = trajectory_to_messages(traj)
    n_prompt = len(traj.prompt)
    prompt, rest = messages[:n_prompt], messages[n_prompt:]
    system: str | None = None
    if prompt and prompt[0]["role"] == "system":
        system = str(prompt[0]["content"])
        prompt = prompt[1:]
    if len(prompt) != 1 or prompt[0]["role"] != "user":
        roles = [m["role"] for m in messages[:n_prompt]]
        raise ExportError(
            f"{where}: the prompt must be an optional system message and one user message for ShareGPT, got {roles}"
        )
    conv = [{"from": "human", "value": str(prompt[0]["content"])}]
    for m in rest:
        if m["role"] == "assistant":
            conv.append({"from": "gpt", "value": str(m["content"])})
        else:
            conv.append({"from": observation_role, "value": str(m["content"])})
    if conv[-1]["from"] != "gpt":
        conv.pop()  # a trailing observation is never a training target
    if len(conv) < 2:
        raise ExportError(f"{where}: no assistant turn to train on")
    # Always present: dataset_info.json declares the column, and LLaMA-Factory's converter reads it from
    # every record (a file of records without it fails with KeyError: 'system'). An empty system prompt
    # makes LLaMA-Factory use its template's default, as the chat template does for a prompt without one.
    return {"conversations": conv, "system": system if system is not None else ""}


def dataset_info_entry(file_name: str) -> dict[str, Any]:
    """The ``dataset_info.json`` entry describing an exported file (ShareGPT tags spelled out)."""
    return {
        "file_name": file_name,
        "formatting": "sharegpt",
        "columns": {"messages": "conversations", "system": "system"},
        "tags": {
            "role_tag": "from",
            "content_tag": "value",
            "user_tag": "human",
            "assistant_tag": "gpt",
            "observation_tag": "observation",
            "function_tag": "function_call",
            "system_tag": "system",
        },
    }


def update_dataset_info(path: str | Path, name: str, entry: dict[str, Any]) -> Path:
    """Add or replace ``name`` in a ``dataset_info.json`` (created if absent), keeping other entries."""
    path = Path(path)
    info: dict[str, Any] = {}
    if path.exists():
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ExportError(f"{path}: not valid JSON ({exc}); fix or remove it") from None
        if not isinstance(info, dict):
            raise ExportError(f"{path}: expected a JSON object of datasets")
    info[name] = entry
    return write_json_atomic(path, info)


def export_llamafactory(
    trajectories: Iterable[Trajectory],
    out_dir: str | Path,
    *,
    name: str = "datadojo",
    observation_role: ObservationRole = "observation",
) -> ExportReport:
    """Write ``<out_dir>/<name>.jsonl`` and its entry in ``<out_dir>/dataset_info.json``.

    Void trajectories are skipped (DataMind §4); so are trajectories without an assistant turn. Point
    LLaMA-Factory's ``dataset_dir`` at ``out_dir`` and set ``dataset: <name>``.
    """
    if observation_role not in ("observation", "human"):
        raise ExportError(f"observation_role must be 'observation' or 'human', got {observation_role!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = ExportReport("llamafactory")
    records = [
        trajectory_to_sharegpt(traj, observation_role=observation_role)
        for traj in report.trainable(trajectories)
    ]
    data = out / f"{name}.jsonl"
    report.written = write_jsonl_atomic(data, records)
    info = update_dataset_info(out / "dataset_info.json", name, dataset_info_entry(data.name))
    report.files = [str(data), str(info)]
    if observation_role == "observation":
        report.notes.append(
            "observation turns use LLaMA-Factory's tool-result formatting of your template; "
            "--observation-role human renders them exactly as DataDojo's runtime does"
        )
    return report

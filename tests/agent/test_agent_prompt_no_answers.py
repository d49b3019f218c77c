"""The scidata benchmark prompt never gives the answer away: a dataset folder is shown as its tree only.

SciDataSailor's questions ask for statistics of the folder's files (the bundled QA task: the mean pH of
raw/measurements.csv, 6.93). A file profile carries exactly those (ranges, means, top values), so a
prompt that included one would answer the question. Before: a folder that is one dataset stored as many
files (a Parquet dataset, a Zarr store) was profiled as a single file, with every column's range.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from datadojo.agent import AgentConfig
from datadojo.bench import get_benchmark
from datadojo.bench.scidata import READERS_NOTE
from datadojo.env.prompts import episode_prompt

REPO = Path(__file__).resolve().parents[2]
SURVEY = REPO / "examples" / "data" / "station_survey"
MEASUREMENTS = pd.read_csv(SURVEY / "raw" / "measurements.csv")


def _figures(col: str) -> list[str]:
    """How the statistics of ``col`` would be written in a profile (2 and 3 decimals, min/max/mean)."""
    s = MEASUREMENTS[col]
    values = (s.mean(), s.min(), s.max())
    return sorted({f"{v:.2f}" for v in values} | {f"{v:.3f}" for v in values} | {f"{v:g}" for v in values})


def _system_prompt(task_file: Path) -> list[str]:
    cfg = AgentConfig(dialect="sailor")
    return [episode_prompt(t, cfg)[0]["content"] for t in get_benchmark("scidata").load(task_file)]


def _task_file(tmp_path: Path, folder: Path, question: str, answer: str) -> Path:
    rec = {"id": "q", "question": question, "files": [{"path": str(folder), "kind": "dir"}], "answer": answer,
           "answer_kind": "sailor_qa", "category": "qa", "difficulty": "L1"}  # fmt: skip
    out = tmp_path / "qa.jsonl"
    out.write_text(json.dumps(rec) + "\n")
    return out


def test_the_bundled_qa_task_prompt_holds_no_statistics() -> None:
    prompts = _system_prompt(REPO / "examples" / "scidata_tasks.jsonl")
    assert prompts
    for system in prompts:
        assert "measurements.csv" in system  # the tree is there ...
        assert READERS_NOTE in system  # ... and, without a task description, only the readers note
        for figure in _figures("ph") + _figures("nitrate_mg_l"):
            assert figure not in system, figure
        assert "mean" not in system.split("## About the data")[0]


@pytest.mark.parametrize("store", ["parquet dataset", "single csv"])
def test_a_folder_of_one_table_is_outlined_not_profiled(tmp_path: Path, store: str) -> None:
    folder = tmp_path / "ph_survey"
    folder.mkdir()
    if store == "parquet dataset":  # profiled as one file by the corpus reader: a Parquet dataset
        MEASUREMENTS.iloc[:48].to_parquet(folder / "part-0.parquet")
        MEASUREMENTS.iloc[48:].to_parquet(folder / "part-1.parquet")
    else:
        MEASUREMENTS.to_csv(folder / "measurements.csv", index=False)
    tasks = _task_file(tmp_path, folder, "What are the lowest and highest pH measured?", "5.52 and 8.18")
    (system,) = _system_prompt(tasks)
    assert "ph_survey" in system
    for figure in _figures("ph") + _figures("temperature_c"):
        assert figure not in system, (figure, system)
    assert "S01" not in system  # no sample rows or top values either


def test_a_data_file_keeps_its_profile_outside_scidata() -> None:
    """DataMind's metadata text *d* (§3.1) for a single file is unchanged: statistics included."""
    from datadojo.types import DataFile, Task

    task = Task(id="t", question="q", files=[DataFile.from_path(SURVEY / "raw" / "measurements.csv")])
    system = episode_prompt(task, AgentConfig())[0]["content"]
    assert "mean 6.93" in system

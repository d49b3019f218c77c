"""The data model: validation names the field, defaults (void, Observation.error), kinds, JSON round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from datadojo.types import (
    Action,
    DataFile,
    Observation,
    Provenance,
    Task,
    Trajectory,
    Turn,
    config_hash,
    infer_data_kind,
)


def _fields(exc: ValidationError) -> list[str]:
    return [".".join(str(p) for p in e["loc"]) for e in exc.errors()]


def test_validation_errors_name_the_field() -> None:
    with pytest.raises(ValidationError) as info:
        Task.model_validate({"id": "t"})
    assert _fields(info.value) == ["question"]
    with pytest.raises(ValidationError) as info:
        Task.model_validate({"id": "t", "question": "q", "qestion": "typo"})
    assert _fields(info.value) == ["qestion"]  # unknown keys are errors
    with pytest.raises(ValidationError) as info:
        Turn.model_validate({"raw": "x", "action": {"kind": "bash", "text": "ls"}})
    assert _fields(info.value) == ["action.kind"]
    with pytest.raises(ValidationError) as info:
        Trajectory.model_validate({"task_id": "t", "stop_reason": "bored"})
    assert _fields(info.value) == ["stop_reason"]
    with pytest.raises(ValidationError) as info:
        Task.model_validate({"id": "t", "question": "q", "files": [{"path": "a.csv"}, {"path": "b.docx"}]})
    assert _fields(info.value) == ["files.1"] and "b.docx" in str(info.value)


def test_empty_task_id_is_rejected() -> None:
    with pytest.raises(ValidationError, match="task id must not be empty"):
        Task(id="  ", question="q")


@pytest.mark.parametrize(
    ("kind", "void"), [("invalid", True), ("code", False), ("sql", False), ("answer", False)]
)
def test_void_defaults_from_action_kind(kind: str, void: bool) -> None:
    assert Turn.model_validate({"raw": "r", "action": {"kind": kind}}).void is void
    assert Turn(raw="r", action=Action(kind=kind)).void is void  # type: ignore[arg-type]


def test_void_explicit_value_wins() -> None:
    assert Turn(raw="r", action=Action(kind="code", text="x"), void=True).void is True
    assert Turn(raw="r", action=Action(kind="invalid"), void=False).void is False


@pytest.mark.parametrize(
    ("status", "error"),
    [
        ("ok", False),
        ("feedback", False),
        ("error", True),
        ("timeout", True),
        ("killed", True),
        ("rejected", True),
        ("env_error", True),
    ],
)
def test_observation_error_default(status: str, error: bool) -> None:
    assert Observation(text="x", status=status).error is error  # type: ignore[arg-type]
    assert Observation.model_validate({"text": "x", "status": status}).error is error


def test_observation_error_explicit_and_default_status() -> None:
    assert Observation(text="x").status == "ok" and Observation(text="x").error is False
    assert Observation(text="x", status="ok", error=True).error is True


def test_infer_data_kind(tmp_path: Path) -> None:
    assert infer_data_kind("a/b.CSV") == "csv"
    assert infer_data_kind("x.tsv") == "csv"
    assert infer_data_kind("book.xlsx") == "xlsx"
    assert infer_data_kind("db.sqlite3") == "sqlite"
    assert infer_data_kind("t.parquet") == "parquet"
    assert infer_data_kind(tmp_path) == "dir"
    with pytest.raises(ValueError, match=r"notes\.docx: cannot tell the data kind from the suffix '\.docx'"):
        infer_data_kind("notes.docx")


def test_datafile_kind_and_name() -> None:
    f = DataFile(path="/data/sales.csv")
    assert f.kind == "csv" and f.visible_name == "sales.csv"
    assert DataFile(path="/data/x.bin", kind="parquet", name="x.parquet").visible_name == "x.parquet"
    assert DataFile.from_path("shop.sqlite", name="db").kind == "sqlite"


def test_trajectory_json_round_trip() -> None:
    traj = Trajectory(
        task_id="t",
        sample=2,
        prompt=[{"role": "user", "content": "q"}],
        turns=[
            Turn(
                raw="<code>1</code>", action=Action(kind="code", text="1"), observation=Observation(text="1")
            ),
            Turn(raw="?", action=Action(kind="invalid"), invalid_reason="No action"),
        ],
        stop_reason="invalid",
        rewards={"format": 0.0},
        provenance=Provenance(config_hash="abc", seed=1),
    )
    line = traj.to_json()
    assert "\n" not in line
    back = Trajectory.model_validate_json(line)
    assert back == traj
    assert back.key == ("t", 2) and back.n_turns == 2 and back.has_void_turn
    assert json.loads(line) == traj.to_dict()
    assert traj.provenance.versions["datadojo"]


def test_config_hash_is_order_independent() -> None:
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})
    assert len(config_hash({})) == 16

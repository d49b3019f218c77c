"""What a new user meets first: a model path with a typo, an extra not installed. One line naming the
folder or the ``pip install`` to run, exit 2; before, a Hugging Face hub traceback or
``No module named 'torch'``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.errors import DataDojoError, MissingExtraError, require_extra
from datadojo.types import Trajectory


def _trajectories(tmp_path: Path) -> Path:
    data = tmp_path / "t.jsonl"
    data.write_text(Trajectory(task_id="t1", stop_reason="answer").to_json() + "\n")
    return data


def test_train_sft_with_a_model_typo_says_no_such_folder(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["train", "sft", "--data", str(_trajectories(tmp_path)), "--model",
                                   "Qwen/Qwen2.5-7B-Instrcut", "--out", str(tmp_path / "run")])  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "--model Qwen/Qwen2.5-7B-Instrcut: no such folder" in res.stderr
    assert "Traceback" not in res.output and len(res.stderr.strip().splitlines()) == 1


def test_hf_spec_with_no_such_folder_says_so_before_loading_anything(tmp_path: Path) -> None:
    from datadojo.llm import load_backend

    with pytest.raises(DataDojoError, match=r"/no/such/dir: no such folder"):
        load_backend("hf:/no/such/dir")


def test_a_missing_extra_is_one_line_with_the_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    with pytest.raises(
        MissingExtraError, match=r"needs torch, not installed here: pip install 'datadojo\[hf\]'"
    ):
        require_extra("hf", "the hf backend", "torch", "transformers")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    res = CliRunner().invoke(app, ["train", "sft", "--data", str(_trajectories(tmp_path)), "--model", str(ckpt),
                                   "--out", str(tmp_path / "run")])  # fmt: skip
    assert res.exit_code == 2, res.output
    assert (
        res.stderr.strip()
        == "error: datadojo train sft needs torch, not installed here: pip install 'datadojo[train]'"
    )
    from datadojo.llm import load_backend

    with pytest.raises(MissingExtraError, match=r"pip install 'datadojo\[hf\]'"):
        load_backend(f"hf:{ckpt}")

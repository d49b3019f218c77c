"""benchmarks/train_gpu.py --engine verl: the CPU-side plan (argument parsing, --dry-run), no verl needed."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(BENCH))


def test_dry_run_prints_the_gpu_plan(capsys: pytest.CaptureFixture[str]) -> None:
    bench = _load("train_gpu")
    plan = bench.main(["--engine", "verl", "--size", "gpu", "--dry-run", "--json", "--gamma", "0.3"])
    assert json.loads(capsys.readouterr().out) == plan
    assert plan["model"]["architecture"] == "Qwen2ForCausalLM" and plan["model"]["hidden_size"] == 896
    assert plan["rows"] == plan["rollout_rows"] + plan["expert_rows"] == 40
    assert plan["gamma"] == 0.3 and plan["dtype"] == "bfloat16" and plan["episodes"] == 4


def test_bad_arguments_are_refused() -> None:
    bench = _load("train_gpu")
    with pytest.raises(SystemExit):
        bench.main(["--engine", "verl", "--gamma", "1.5", "--dry-run"])
    with pytest.raises(SystemExit):
        bench.main(["--dry-run"])  # the datadojo engine has no dry run


def test_the_verl_helper_imports_without_verl() -> None:
    helper = _load("_verl_bench")
    assert callable(helper.run_verl_bench)
    assert not [k for k, v in vars(helper).items() if getattr(v, "__name__", "").startswith("verl")]

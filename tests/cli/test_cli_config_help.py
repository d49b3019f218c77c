"""Config flags take their help, allowed values and default from the configuration field, so the text
lives once; and building the CLI (for every ``datadojo`` command) loads neither pandas nor torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from datadojo.cli.app import app
from datadojo.config import ConfigError, Settings, choices, config_default, config_help, field_help
from datadojo.corpus.config import FilterConfig, OverlapConfig, ScanConfig
from datadojo.demo.pipeline import DemoConfig
from datadojo.env.config import AgentConfig
from datadojo.eval.harness import EvalConfig
from datadojo.sandbox.config import Limits, SandboxConfig
from datadojo.synth.datamind.config import DataMindConfig
from datadojo.synth.envlunch.config import BuildConfig, SolverConfig
from datadojo.synth.sailor.config import SailorConfig
from datadojo.train.config import RLConfig, SFTConfig

SRC = Path(__file__).resolve().parents[2] / "src"

# (command path, flag, model, field, the flag has the field's default)
CASES: list[tuple[tuple[str, ...], str, type[Settings], str, bool]] = [
    (("corpus", "scan"), "--min-rows", FilterConfig, "min_rows", True),
    (("corpus", "scan"), "--row-scope", FilterConfig, "row_scope", True),
    (("corpus", "scan"), "--profile-chars", ScanConfig, "profile_chars", True),
    (("corpus", "overlap"), "--match", OverlapConfig, "match", True),
    (("corpus", "overlap"), "--threshold", OverlapConfig, "threshold", True),
    (("eval",), "--trials", EvalConfig, "n_trials", True),
    (("eval",), "--agent", EvalConfig, "agent", True),
    (("eval",), "--judge-structured", EvalConfig, "judge_structured", True),
    (("eval",), "--mode", SandboxConfig, "mode", False),
    (("demo",), "--tasks", DemoConfig, "n_tasks", True),
    (("demo",), "--candidates", DemoConfig, "solver_candidates", True),
    (("warmup", "build"), "--n", BuildConfig, "n", True),
    (("warmup", "build"), "--sql-fraction", BuildConfig, "sql_fraction", True),
    (("warmup", "build"), "--workers", BuildConfig, "workers", False),  # the CLI uses 2 of 2 cores
    (("warmup", "build"), "--sample-rows", BuildConfig, "sample_rows", True),
    (("warmup", "solve"), "--max-candidates", SolverConfig, "max_candidates", True),
    (("warmup", "solve"), "--time-limit", SolverConfig, "time_limit_s", True),
    (("synth", "datamind", "run"), "-n", DataMindConfig, "n_samples", True),
    (("synth", "datamind", "run"), "--non-con", DataMindConfig, "non_con", True),
    (("synth", "datamind", "curate"), "--max-answer-tokens", DataMindConfig, "max_answer_tokens", True),
    (("synth", "datamind", "judge"), "--tolerance", DataMindConfig, "tolerance", True),
    (("synth", "sailor"), "--lambda", SailorConfig, "lam", True),
    (("synth", "sailor"), "--fpu-mode", SailorConfig, "fpu_mode", True),
    (("synth", "sailor"), "--obs-head", SailorConfig, "obs_head", True),
    (("synth", "sailor"), "--isolation", SandboxConfig, "isolation", True),
    (("ask",), "--max-turns", AgentConfig, "max_turns", True),
    (("ask",), "--mode", SandboxConfig, "mode", True),
    (("rollout",), "--reserve-final-turn", AgentConfig, "reserve_final_turn", True),
    (("exec",), "--max-chars", Limits, "max_observation_chars", True),
    (("exec",), "--timeout", Limits, "wall_s", True),
    (("exec",), "--isolation", SandboxConfig, "isolation", True),
]


def _option(path: tuple[str, ...], flag: str) -> Any:
    cmd: Any = typer.main.get_command(app)
    ctx = typer.Context(cmd)
    for name in path:
        cmd = cmd.get_command(ctx, name)
        assert cmd is not None, f"no command {' '.join(path)}"
    for param in cmd.params:
        if param.param_type_name == "option" and flag in param.opts:
            return param
    raise AssertionError(f"{' '.join(path)} has no option {flag}")


def _described(model: type[Settings], name: str) -> str:
    """The field's description as a flag's help starts with it (first letter up, no final stop)."""
    text = field_help(model, name).rstrip(".")
    return text[:1].upper() + text[1:] if text[:1].isascii() else text


@pytest.mark.parametrize(("path", "flag", "model", "name", "same_default"), CASES)
def test_config_flag_help_is_the_field_description(
    path: tuple[str, ...], flag: str, model: type[Settings], name: str, same_default: bool
) -> None:
    option = _option(path, flag)
    assert field_help(model, name), f"{model.__name__}.{name} has no description"
    assert option.help is not None and option.help.startswith(_described(model, name))
    assert option.help.startswith(config_help(model, name, default=False).rstrip("."))
    try:
        allowed = choices(model, name)
    except ConfigError:
        allowed = ()
    for value in allowed:
        assert value in option.help
    if same_default:
        default = config_default(model, name)
        shown = option.default
        if (
            shown is None
        ):  # a flag generated from the settings: the default is the configuration's, in the help
            assert option.help.endswith(f"(default {default})."), option.help
            return
        if flag == "--min-rows":  # the row bounds are text: a number or 'none'
            shown = int(shown)
        assert shown == default, (flag, shown, default)


@pytest.mark.parametrize(
    ("path", "flag", "model", "name", "nested"),
    [
        (("train", "sft"), "--lr", SFTConfig, "lr", "optim.lr"),
        (("train", "sft"), "--max-length", SFTConfig, "max_length", None),
        (("train", "rl"), "--gamma-mode", RLConfig, "gamma_mode", None),
        (("train", "rl"), "--group-size", RLConfig, "group_size", None),
    ],
)
def test_train_flag_help_names_the_configurations_default(
    path: tuple[str, ...], flag: str, model: type[Settings], name: str, nested: str | None
) -> None:
    option = _option(path, flag)
    assert option.default is None  # the configuration (or preset, or file) decides
    assert option.help == config_help(model, name, path=nested)
    default = config_default(model, name, path=nested)
    assert option.help.endswith(f"(default {default}).")


def test_config_help_refuses_a_field_without_description() -> None:
    class Undocumented(Settings):
        levels: tuple[int, ...] = (1, 2)

    with pytest.raises(ConfigError, match=r"Undocumented\.levels has no description"):
        config_help(Undocumented, "levels")


def test_cli_start_up_loads_neither_pandas_nor_torch() -> None:
    code = (
        "import sys, datadojo.cli.app\n"
        "print(','.join(sorted(m for m in ('pandas', 'numpy', 'torch') if m in sys.modules)))"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "", f"datadojo.cli.app imported {out.stdout.strip()}"

"""Training configurations: paper defaults, presets, strict files, validation; metrics files and the SVG plot."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from datadojo.train.config import ConfigError, OptimConfig, RLConfig, SFTConfig, load_config
from datadojo.train.metrics import MetricsLog, read_metrics
from datadojo.train.plots import render_svg, write_curves


def test_datamind_defaults() -> None:
    cfg = RLConfig.datamind()
    assert (cfg.policy_loss, cfg.group_size, cfg.tasks_per_step, cfg.updates_per_step) == ("dapo", 4, 32, 8)
    assert (cfg.eps_low, cfg.eps_high, cfg.max_turns, cfg.dynamic_sampling, cfg.void_masking) == (
        0.2,
        0.28,
        10,
        True,
        True,
    )
    g = cfg.gamma_schedule()
    assert g(0) == pytest.approx(0.9) and g(cfg.total_steps - 1) == pytest.approx(0.05)
    assert cfg.uses_sft


def test_envlunch_preset() -> None:
    cfg = RLConfig.envlunch()
    assert (cfg.policy_loss, cfg.group_size, cfg.kl_coef, cfg.entropy_coef) == ("grpo", 8, 0.01, 0.001)
    assert (cfg.tis_low, cfg.tis_high, cfg.max_new_tokens, cfg.temperature) == (0.5, 1.5, 8192, 1.0)
    assert cfg.tasks_per_step * cfg.group_size // cfg.updates_per_step == 32  # 4 updates of 32 trajectories
    assert (cfg.optim.lr, cfg.optim.betas, cfg.optim.weight_decay) == (1e-6, (0.9, 0.98), 0.01)
    assert not cfg.uses_sft and not cfg.dynamic_sampling


def test_files_round_trip_and_merge_over_a_preset(tmp_path: Path) -> None:
    toml = tmp_path / "rl.toml"
    toml.write_text('total_steps = 7\ngamma_mode = "fixed"\ngamma_value = 0.2\n[optim]\nlr = 2e-6\n')
    cfg = load_config(toml, RLConfig, base=RLConfig.envlunch())
    assert (cfg.total_steps, cfg.gamma_schedule()(3), cfg.optim.lr) == (7, 0.2, 2e-6)
    assert cfg.policy_loss == "grpo" and cfg.optim.betas == (0.9, 0.98)  # the rest of the preset stays
    js = tmp_path / "sft.json"
    js.write_text(json.dumps(SFTConfig(model="m", epochs=1.5).to_dict()))
    assert load_config(js, SFTConfig) == SFTConfig(model="m", epochs=1.5)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("epoch = 3\n", "unknown key 'epoch'"),
        ("[optim]\nlrr = 1\n", "optim.lrr"),
        ("batch_size = 0\n", "batch_size"),
        ("normalization = 'group'\n", "normalization"),
        ("[optim]\nbetas = [0.9, 1.5]\n", "betas"),
    ],
)
def test_bad_sft_files_name_the_key_and_file(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match) as info:
        load_config(path, SFTConfig)
    assert "bad.toml" in str(info.value)


def test_rl_validation() -> None:
    with pytest.raises(ConfigError, match="updates_per_step"):
        RLConfig(tasks_per_step=2, updates_per_step=4)
    with pytest.raises(ConfigError, match="group_size"):
        RLConfig(group_size=1)
    with pytest.raises(ConfigError, match="gamma"):
        RLConfig(gamma_mode="fixed")
    with pytest.raises(ConfigError, match="tis"):
        RLConfig(tis_low=0.0)
    with pytest.raises(ConfigError):
        OptimConfig(lr=0)
    with pytest.raises(ConfigError, match="loss_aggregation"):  # dapo's one setting is loss_aggregation
        RLConfig(normalization="token")
    with pytest.raises(ConfigError, match="loss_aggregation"):
        RLConfig(loss_aggregation="token-mean")  # type: ignore[arg-type]
    assert RLConfig(policy_loss="grpo", normalization="token").normalization == "token"
    assert RLConfig().replace(total_steps=None, seed=3).seed == 3  # None = flag not given


def test_metrics_log_truncate_and_clean(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path / "m.jsonl")
    for s in (1, 2, 3):
        log.append({"step": s, "loss": float("nan") if s == 2 else 1.0 / s})
    assert [r["loss"] for r in read_metrics(tmp_path / "m.jsonl")] == [1.0, None, pytest.approx(1 / 3)]
    assert log.truncate_after(1) == 2 and [r["step"] for r in log.read()] == [1]
    with pytest.raises(ValueError, match="step"):
        log.append({"loss": 1.0})
    assert read_metrics(tmp_path / "absent.jsonl") == []


def test_svg_plot_has_one_panel_per_metric_and_gaps() -> None:
    records = [{"step": s, "a": (None if s == 3 else math.sin(s)), "b": 1.0} for s in range(1, 7)]
    svg = render_svg(records, ["a", "b", "c"], title="run")
    assert svg.startswith("<svg") and svg.count('<g transform="translate') == 3
    assert svg.count("<polyline") == 3  # "a" is split in two by its gap, "b" is one line, "c" has none
    assert "no data" in svg and ">run<" in svg


def test_write_curves_is_atomic(tmp_path: Path) -> None:
    out = write_curves([{"step": 1, "x": 2.0}], tmp_path / "c.svg", ["x"])
    assert out.read_text().startswith("<svg") and [p.name for p in tmp_path.iterdir()] == ["c.svg"]


def test_shared_run_fields_are_declared_once() -> None:
    from datadojo.config import field_help
    from datadojo.train.config import RunConfig

    for name in RunConfig.model_fields:
        # the same help text (and checks) in both trainers; only the default may differ
        assert field_help(SFTConfig, name) == field_help(RLConfig, name) == field_help(RunConfig, name)
    assert (SFTConfig().output_dir, RLConfig().output_dir) == ("runs/sft", "runs/rl")
    assert (SFTConfig().optim.lr, RLConfig().optim.lr) == (1e-5, 1e-6)
    with pytest.raises(ConfigError, match="save_every must be >= 0"):
        RLConfig(save_every=-1)  # RunConfig's check, inherited with RL's own default
    with pytest.raises(ConfigError, match=r"RLConfig\.mixed_precision: .*'bf16'"):
        RLConfig(mixed_precision="fp8")  # allowed values come from the Literal


def test_train_cli_help_comes_from_the_config_fields() -> None:
    from typer.testing import CliRunner

    from datadojo.cli.app import app
    from datadojo.config import choices

    out = CliRunner().invoke(app, ["train", "rl", "--help"], env={"COLUMNS": "400"}).output
    assert "Rollouts per task (G) (default 4)." in out
    assert f"one of {', '.join(choices(RLConfig, 'gamma_mode'))}" in out

"""Flags generated from the settings, ``--config FILE``, and the help every user reads.

Tried as a user would: the real ``datadojo`` commands through typer's CliRunner, with the step that would
contact a model server replaced by a recorder of the settings it was given.
"""

from __future__ import annotations

import collections
import importlib
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from datadojo.cli._options import SettingsGroup, flag_fields
from datadojo.cli.app import app
from datadojo.config import Settings
from datadojo.synth.datamind.config import DataMindConfig
from datadojo.synth.sailor.config import SailorConfig

SRC = Path(__file__).resolve().parents[2] / "src"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"


def _invoke(args: list[str]) -> Any:
    return CliRunner().invoke(app, args, env={"COLUMNS": "200"})


def _commands(cmd: Any = None, path: tuple[str, ...] = ()) -> Any:
    """Every (command path, click command) of ``datadojo``, sub-groups walked."""
    cmd = cmd or typer.main.get_command(app)
    ctx = typer.Context(cmd)
    if hasattr(cmd, "list_commands"):
        for name in cmd.list_commands(ctx):
            yield from _commands(cmd.get_command(ctx, name), (*path, name))
    else:
        yield path, cmd


def _command(*path: str) -> Any:
    return dict(_commands())[path]


def _settings_classes() -> list[type[Settings]]:
    """Every Settings class defined in src/datadojo (found in the source, so a new one is not missed)."""
    found = []
    for file in sorted((SRC / "datadojo").rglob("*.py")):
        text = file.read_text(encoding="utf-8")
        names = re.findall(r"^class (\w+)\(Settings\):", text, flags=re.M)
        if names:
            module = importlib.import_module(".".join(file.relative_to(SRC).with_suffix("").parts))
            found += [getattr(module, n) for n in names]
    return found


def test_every_settings_field_has_a_description() -> None:
    classes = _settings_classes()
    assert len(classes) >= 20  # the scan found them (DataMindConfig, SailorConfig, SandboxConfig, ...)
    missing = [f"{c.__module__}.{c.__name__}.{n}" for c in classes for n, f in c.model_fields.items()
               if not (f.description or "").strip()]  # fmt: skip
    assert not missing, f"fields without a description (the help of their flag): {missing}"


@pytest.mark.parametrize(
    ("path", "model"), [(("synth", "datamind", "run"), DataMindConfig), (("synth", "sailor"), SailorConfig)]
)
def test_every_scalar_field_is_a_flag(path: tuple[str, ...], model: type[Settings]) -> None:
    """Before the flags were generated, 16 of DataMind's 32 and 21 of the sailor's 32 fields had one."""
    cmd = _command(*path)
    options = {p.name for p in cmd.params if p.param_type_name == "option"}
    fields = flag_fields(SettingsGroup(model))
    nested = [n for n in model.model_fields if n not in fields]
    assert not [n for n in fields if f"_s0_{n}" not in options]
    assert nested == (["filters"] if model is DataMindConfig else [])  # a table in the --config file
    for name in ("temperature", "top_p", "max_tokens"):  # the teacher's / policy's sampling
        assert f"_s0_{name}" in options


def test_generated_flags_carry_choices_bounds_and_the_default_in_the_help() -> None:
    params = {p.name: p for p in _command("synth", "datamind", "run").params}
    structured = params["_s0_structured"]
    assert structured.help.endswith("one of auto, json_schema, json_object, off (default auto).")
    res = _invoke(["synth", "datamind", "run", "x.csv", "--out", "o", "--structured", "xml"])
    assert res.exit_code == 2 and "xml" in res.output
    res = _invoke(["synth", "datamind", "run", "x.csv", "--out", "o", "--max-turns", "0"])  # ge=1
    assert res.exit_code == 2 and "--max-turns" in res.output


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The DataMindConfig each `synth datamind` command would run with (nothing is contacted)."""
    import datadojo.cli.synth_datamind as module

    seen: list[Any] = []
    monkeypatch.setattr(module, "_execute", lambda inputs, out, config, *a, **k: seen.append(config))
    return seen


def _run(extra: list[str]) -> list[str]:
    return ["synth", "datamind", "run", str(EXAMPLES / "sales.csv"), "--teacher", "openai:t@http://h/v1",
            "--judge", "openai:j@http://h/v1", "--out", "o", *extra]  # fmt: skip


def test_config_file_overrides_defaults_and_flags_override_the_file(tmp_path: Path, recorded: list) -> None:
    toml = tmp_path / "dm.toml"
    toml.write_text('n_samples = 5\ntemperature = 0.2\nnon_con = "one"\n[filters]\nmin_rows = 5\n')
    assert _invoke(_run(["--config", str(toml)])).exit_code == 0
    assert _invoke(_run(["-c", str(toml), "-n", "7", "--top-p", "0.5"])).exit_code == 0
    assert _invoke(_run([])).exit_code == 0
    from_file, with_flags, plain = recorded
    assert (from_file.n_samples, from_file.temperature, from_file.non_con) == (5, 0.2, "one")
    assert from_file.filters.min_rows == 5 and from_file.filters.max_rows == 1000  # a table, merged
    assert from_file.top_p == 0.95  # not in the file: the field's default
    assert (with_flags.n_samples, with_flags.temperature, with_flags.top_p) == (7, 0.2, 0.5)
    assert plain == DataMindConfig()


def test_a_stage_reads_the_same_config_file(tmp_path: Path, recorded: list) -> None:
    toml = tmp_path / "dm.toml"
    toml.write_text("judge_max_tokens = 256\ntolerance = 0.05\n")
    res = _invoke(
        ["synth", "datamind", "judge", "--judge", "openai:j@http://h/v1", "--out", "o", "-c", str(toml)]
    )
    assert res.exit_code == 0, res.output
    assert (recorded[0].judge_max_tokens, recorded[0].tolerance) == (256, 0.05)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("n_smples = 3\n", r"dm\.toml: DataMindConfig has no field 'n_smples'; known: "),
        ("top_p = 2.0\n", r"dm\.toml: DataMindConfig\.top_p: input should be less than or equal to 1"),
        ("[filters]\nmin_rowz = 1\n", r"dm\.toml: FilterConfig\.min_rowz: extra inputs are not permitted"),
        ("n_samples = \n", r"dm\.toml: cannot read the settings file"),
    ],
)
def test_a_bad_config_file_is_one_line_naming_the_file_and_field(
    tmp_path: Path, recorded: list, text: str, expected: str
) -> None:
    toml = tmp_path / "dm.toml"
    toml.write_text(text)
    res = _invoke(_run(["--config", str(toml)]))
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert re.search(expected, lines[0]), lines[0]
    assert not recorded


def test_a_missing_config_file_is_one_line(tmp_path: Path, recorded: list) -> None:
    res = _invoke(_run(["--config", str(tmp_path / "nope.toml")]))
    assert res.exit_code == 2 and "nope.toml" in res.output and not recorded


def test_sailor_takes_a_config_file_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datadojo.cli.synth_sailor as module

    seen: list[Any] = []
    monkeypatch.setattr(module, "_explore", lambda *a: seen.append(a[5]))
    monkeypatch.setattr(module, "_show", lambda *a: None)
    toml = tmp_path / "s.toml"
    toml.write_text("max_nodes = 4\ntop_p = 0.8\nmax_tokens = 512\n")
    folder = EXAMPLES / "station_survey"
    res = _invoke(["synth", "sailor", str(folder), "-m", "openai:m@http://h/v1", "-o", "o", "-c", str(toml),
                   "--max-nodes", "6"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert (seen[0].max_nodes, seen[0].top_p, seen[0].max_tokens) == (6, 0.8, 512)


def test_teacher_and_model_fall_back_to_datadojo_model(
    recorded: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["synth", "datamind", "queries", str(EXAMPLES / "sales.csv"), "--out", "o"]
    monkeypatch.delenv("DATADOJO_MODEL", raising=False)
    res = _invoke(args)
    assert res.exit_code == 2 and "pass --teacher SPEC or set $DATADOJO_MODEL" in " ".join(res.output.split())
    res = CliRunner().invoke(app, args, env={"DATADOJO_MODEL": "openai:t@http://h/v1"})
    assert res.exit_code == 0, res.output
    assert len(recorded) == 1


def _helps(cmd: Any) -> list[tuple[str, str]]:
    out = [("(command)", cmd.help or "")]
    out += [(p.name, getattr(p, "help", None) or "") for p in cmd.params if p.name != "help"]
    return out


def test_every_argument_and_option_of_every_command_has_help() -> None:
    missing = [f"{' '.join(path)} {name}" for path, cmd in _commands() for name, text in _helps(cmd)
               if name != "(command)" and not text.strip()]  # fmt: skip
    assert not missing, missing


def test_help_has_no_process_words_nor_paths_users_do_not_have() -> None:
    words = re.compile(
        r"\bissue\b|issue's|\bhelper\b|the lead\b|\bgit branch\b|\(the reading|shared/data|\.\./"
    )
    found = [f"{' '.join(path)} {name}: {text[:80]}" for path, cmd in _commands() for name, text in _helps(cmd)
             if words.search(text)]  # fmt: skip
    assert not found, found


#: A short flag means one thing in every command. ``-n`` is the per-task count, called trials by eval (the
#: papers' word) and samples elsewhere.
SHORT_FLAGS = {
    "-c": {"--config"}, "-j": {"--concurrency"}, "-w": {"--workers"}, "-o": {"--out"}, "-m": {"--model"},
    "-n": {"--samples", "--trials"}, "-T": {"--max-turns"}, "-d": {"--data"}, "-t": {"--tasks"},
    "-p": {"--predictions"}, "-b": {"--budget"}, "-e": {"--experts"},
}  # fmt: skip


def test_short_flags_mean_one_thing_everywhere() -> None:
    seen: dict[str, set[str]] = collections.defaultdict(set)
    for path, cmd in _commands():
        for p in cmd.params:
            longs = [o for o in p.opts if o.startswith("--")]
            for short in (o for o in p.opts if re.fullmatch(r"-[a-zA-Z]", o)):
                seen[short].add(longs[0] if longs else f"{' '.join(path)}: {short} alone")
    wrong = {s: sorted(v) for s, v in seen.items() if not v <= SHORT_FLAGS.get(s, set())}
    assert not wrong, wrong


def test_a_second_settings_group_is_its_own_table(tmp_path: Path) -> None:
    """rollout: AgentConfig at the top of the file, SandboxConfig in [sandbox]; errors name the table's class."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "t", "question": "q?"}\n')
    toml = tmp_path / "r.toml"
    toml.write_text('max_turns = 4\n[sandbox]\nmode = "forked"\n')
    res = _invoke(["rollout", str(tasks), "-m", "openai:m@http://127.0.0.1:9/v1", "-o", str(tmp_path / "o"),
                   "-c", str(toml)])  # fmt: skip
    assert res.exit_code == 2, res.output
    assert re.search(r"^error: .*r\.toml: SandboxConfig\.mode: .*'forked'", res.output.strip()), res.output
    toml.write_text("mode = 'persistent'\n")  # a sandbox field at the top level: not an AgentConfig field
    res = _invoke(["rollout", str(tasks), "-m", "openai:m@http://127.0.0.1:9/v1", "-o", str(tmp_path / "o"),
                   "-c", str(toml)])  # fmt: skip
    assert (
        res.exit_code == 2 and "AgentConfig has no field 'mode'" in res.output and "[sandbox]" in res.output
    )


def test_eval_takes_a_config_file_with_its_sandbox_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """eval: EvalConfig fields at the top (bench, data, out from the command line), [sampling], [sandbox]."""
    import datadojo.cli.eval as module

    seen: list[Any] = []
    monkeypatch.setattr(
        module, "_run_eval", lambda cfg, *a: seen.append(cfg) or (_ for _ in ()).throw(SystemExit(0))
    )
    toml = tmp_path / "e.toml"
    toml.write_text(
        'n_trials = 2\nagent = "oracle"\n[sampling]\ntemperature = 0.1\n[sandbox]\nsql_row_limit = 7\n'
    )
    args = [
        "eval",
        "shop-sql",
        "--data",
        str(EXAMPLES / "shop.sqlite"),
        "-o",
        str(tmp_path / "o"),
        "-c",
        str(toml),
    ]
    res = _invoke([*args, "--top-p", "0.5"])
    assert res.exit_code == 0, res.output
    cfg = seen[0]
    assert (cfg.n_trials, cfg.agent, cfg.sampling.temperature, cfg.sampling.top_p) == (2, "oracle", 0.1, 0.5)
    assert cfg.sandbox.sql_row_limit == 7
    assert _invoke([*args, "-n", "4"]).exit_code == 0 and seen[1].n_trials == 4  # the flag over the file
    toml.write_text("n_trials = 'three'\n")
    res = _invoke(args)
    assert res.exit_code == 2 and re.search(r"e\.toml: EvalConfig\.n_trials: .*'three'", res.output), (
        res.output
    )


def test_corpus_scan_reads_filters_from_the_config_file_and_the_row_flags_win(tmp_path: Path) -> None:
    import json

    toml = tmp_path / "scan.toml"
    toml.write_text("[filters]\nmin_rows = 100000\nsqlite_min_rows = 100000\n")  # more than any example has
    base = ["corpus", "scan", str(EXAMPLES), "--no-progress", "--json", "-c", str(toml)]
    strict = _invoke([*base, "-o", str(tmp_path / "a.jsonl")])
    loose = _invoke([*base, "-o", str(tmp_path / "b.jsonl"), "--min-rows", "none"])
    assert strict.exit_code == 0 and loose.exit_code == 0, (strict.output, loose.output)
    assert json.loads(strict.stdout)["accepted"] == 0
    assert json.loads(loose.stdout)["accepted"] > 0

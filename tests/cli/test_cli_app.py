"""The root command: ``datadojo --help`` lists every command without importing the heavy libraries, and
its table of commands (``cli/app.py`` :data:`COMMANDS`) says what the commands themselves say."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from datadojo.cli.app import COMMAND_MODULES, COMMANDS, app, module_commands

SRC = Path(__file__).resolve().parents[2] / "src"
#: What the top-level help must not import: the cost of each is seconds on a cold start.
HEAVY = ("pandas", "numpy", "openai", "aiohttp", "pyarrow", "datadojo.types", "datadojo.sandbox", "torch")


def test_top_level_help_imports_no_heavy_library() -> None:
    """Measured by what is imported, not by the clock (the clock depends on the machine's load)."""
    probe = (
        "import sys\nfrom datadojo.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"import json\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "120"}
    proc = subprocess.run(
        [sys.executable, "-c", probe, "--help"], capture_output=True, text=True, env=env, check=True
    )
    *help_lines, imported = proc.stdout.strip().splitlines()
    assert json.loads(imported) == [], proc.stdout
    shown = "\n".join(help_lines)
    for name in COMMANDS:
        assert f" {name} " in shown


def test_every_registered_command_is_in_the_table_with_its_own_first_line() -> None:
    registered: dict[str, Any] = {}
    for module in COMMAND_MODULES:
        for name, cmd in module_commands(module).items():
            assert COMMANDS.get(name, (None,))[0] == module, f"{name} (from cli/{module}.py) not in COMMANDS"
            registered[name] = cmd
    assert set(registered) == set(COMMANDS)
    for name, (_, line) in COMMANDS.items():
        own = " ".join((registered[name].help or "").split())
        assert own, f"{name} has no help"
        # the table's line is the command's first sentence, or a shortening of it that keeps its start
        assert own.startswith(line.rstrip(".")[:25]), (name, line, own[:120])


def test_a_lazy_command_runs_and_reports_errors_through_the_root_handler(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["exec", "--help"])
    assert res.exit_code == 0 and "--data" in res.output
    res = runner.invoke(
        app, ["score", "no-such-bench", "--data", str(tmp_path), "--predictions", str(tmp_path)]
    )
    assert res.exit_code == 2, res.output
    group = typer.main.get_command(app)
    assert group.get_command(typer.Context(group), "ask") is not None


def _walk(cmd: Any, path: tuple[str, ...]) -> Any:
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _walk(sub, (*path, name))


def test_no_help_text_loses_words_to_rich_markup() -> None:
    """The help is rendered as rich markup: an unescaped ``[ray]`` (in ``pip install 'datadojo[ray]'``) is
    taken for a style tag and vanishes. Every help text must render to itself (``\\[`` is the escape)."""
    from rich.text import Text

    eaten = []
    for module in COMMAND_MODULES:
        for name, cmd in module_commands(module).items():
            for path, c in _walk(cmd, (name,)):
                for what, text in [
                    ("help", c.help or ""),
                    *((p.name, getattr(p, "help", "") or "") for p in c.params),
                ]:
                    if Text.from_markup(text).plain != text.replace("\\[", "["):
                        eaten.append(f"{' '.join(path)} {what}: {text[:80]}")
    assert not eaten, eaten

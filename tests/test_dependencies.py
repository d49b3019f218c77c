"""Every third-party package DataDojo's code imports is declared in ``pyproject.toml`` (base or an extra).

A static scan of every ``import`` in ``src/datadojo`` (also those inside functions), so that an undeclared
import fails here, in seconds, and not only in the clean-environment check of ``.ci/run``
(``scripts/check_imports.py``), which imports every module in environments made from ``pyproject.toml`` alone.
``click`` was the case that prompted it: ``cli/app.py`` imported it while only typer, which stopped
depending on it (it carries its own copy), was declared; the CLI now uses typer's names alone.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "datadojo"

#: Import name → distribution name where they differ (lower-cased, ``-`` as ``_``).
DIST_OF = {"netCDF4": "netcdf4", "openenv": "openenv_core"}
#: Imported only inside ``try: … except ImportError`` (or behind a check that names the install line) for an
#: engine that is not an extra: verl (with its ``hydra``, ``omegaconf``) and TRL (with its ``datasets``) are tested in their own pinned
#: environments (scripts/engine_tests.sh, docs/training.md "Engines tested").
GUARDED = {"verl", "trl", "datasets", "hydra", "omegaconf"}


def _dist(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("-", "_")


def _declared() -> dict[str, str]:
    """Declared distribution name → where (``base`` or the extra)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = {_dist(r): "base" for r in project["dependencies"]}
    for extra, reqs in project["optional-dependencies"].items():
        for r in reqs:
            out.setdefault(_dist(r), extra)
    return out


def _third_party_imports() -> dict[str, list[str]]:
    """Top-level third-party module → the files importing it."""
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "datadojo" and top not in sys.stdlib_module_names and top != "__future__":
                    found.setdefault(top, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_imported_package_is_declared() -> None:
    declared = _declared()
    undeclared = {
        top: files
        for top, files in _third_party_imports().items()
        if top not in GUARDED and DIST_OF.get(top, top).lower() not in declared
    }
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


def test_the_scan_sees_the_cli_framework() -> None:
    """The scan is not vacuous: it finds the packages the CLI is built on, declared in the base install."""
    found, declared = _third_party_imports(), _declared()
    for top in ("typer", "rich", "pydantic"):
        assert top in found
        assert declared[top] == "base"

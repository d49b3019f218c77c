"""Import every module of the installed ``datadojo`` and fail on an import that no dependency declares.

Run it with the Python of an environment made from ``pyproject.toml`` alone (``.ci/run`` does, in fresh
virtual environments), naming the extras that environment was installed with::

    python scripts/check_imports.py                 # base install: only the base dependencies
    python scripts/check_imports.py --extras dev,train,sci,ray

A module may fail to import only for want of a package that an extra *not installed here* declares (it
is then reported as needing that extra); any other missing module -- a package the code imports but
``pyproject.toml`` does not declare, like ``click`` was -- or any other import error fails the check.
Why an import and not a static scan: a static scan (``tests/test_dependencies.py`` has one) cannot see
that a declared package is missing from the environment or that a dependency stopped pulling another in.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
import sys
import tomllib
import traceback
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

#: Import names that differ from the distribution's name (lower-cased, ``-`` as ``_``).
IMPORT_NAMES: dict[str, str] = {"pydantic_core": "pydantic_core", "netcdf4": "netCDF4"}


def _import_name(requirement: str) -> str:
    dist = re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("-", "_")
    return IMPORT_NAMES.get(dist, dist)


def declared() -> tuple[set[str], dict[str, set[str]]]:
    """The import names of the base dependencies, and of each extra's."""
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    base = {_import_name(r) for r in project["dependencies"]}
    extras = {
        name: {_import_name(r) for r in reqs}
        for name, reqs in project.get("optional-dependencies", {}).items()
    }
    return base, extras


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extras", default="", help="comma-separated extras installed in this environment")
    args = parser.parse_args(argv)
    installed = {e for e in args.extras.split(",") if e}
    base, extras = declared()
    unknown = installed - set(extras)
    if unknown:
        print(f"error: no such extra in {PYPROJECT}: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    available = base | {m for e in installed for m in extras[e]}
    optional: dict[str, str] = {}  # import name → the extras that provide it ("hf' or 'train")
    for extra, mods in sorted(extras.items()):
        for m in sorted(mods - available):
            optional[m] = f"{optional[m]}' or '{extra}" if m in optional else extra

    import datadojo

    where = Path(datadojo.__file__).resolve().parent
    if (where.parents[1] / "pyproject.toml").exists():
        print(f"[imports] datadojo imported from the checkout at {where.parents[1]} (editable install)")
    # ``__main__`` modules run the command when imported; they are one line over ``datadojo.cli.app``
    names = ["datadojo"] + [
        m.name
        for m in pkgutil.walk_packages(datadojo.__path__, "datadojo.")
        if not m.name.endswith("__main__")
    ]
    failures: list[str] = []
    needs: dict[str, list[str]] = {}
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            top = (exc.name or "").split(".")[0]
            if top in optional:
                needs.setdefault(optional[top], []).append(name)
            elif top.startswith("datadojo"):
                failures.append(f"{name}: {exc}")
            else:
                failures.append(
                    f"{name}: imports {top!r}, which no dependency installed here declares ({exc})"
                )
        except (Exception, SystemExit):  # any import-time error fails the check, with its traceback
            failures.append(f"{name}: import failed:\n{traceback.format_exc()}")
    label = "base" + ("+" + ",".join(sorted(installed)) if installed else "")
    for extra, mods in sorted(needs.items()):
        print(
            f"[imports] {len(mods)} module(s) need the '{extra}' extra: {', '.join(mods[:6])}{' …' if len(mods) > 6 else ''}"
        )
    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    ok = len(names) - len(failures) - sum(len(m) for m in needs.values())
    print(f"[imports] {label}: {ok}/{len(names)} modules imported, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

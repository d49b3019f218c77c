"""Check the wheel and the sdist that ``python -m build`` wrote: each holds what it must and nothing stray.

    python scripts/check_dist.py DIST_FOLDER

The wheel must hold every file of the package that git tracks under ``src/datadojo`` (modules, ``py.typed``,
the package data: the bundled shop-sql set, the example-data generator the demo runs without a checkout),
the ``datadojo`` console script, and nothing outside ``datadojo/`` but its metadata. The sdist must hold
every tracked file of ``src``, ``examples``, ``tests``, ``docs`` and ``scripts`` plus ``pyproject.toml`` and
``README.md``. Listing each missing file beats "the demo fails on a user's machine".
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tracked(*folders: str) -> set[str]:
    out = subprocess.run(["git", "ls-files", *folders], cwd=ROOT, capture_output=True, text=True, check=True)
    return {line for line in out.stdout.splitlines() if line and (ROOT / line).is_file()}


def check_wheel(path: Path) -> list[str]:
    problems = []
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        want = {p.removeprefix("src/") for p in tracked("src/datadojo")}
        problems += [f"{path.name}: missing {n}" for n in sorted(want - names)]
        stray = [n for n in names if not n.startswith("datadojo/") and ".dist-info/" not in n]
        problems += [f"{path.name}: stray file {n}" for n in sorted(stray)]
        problems += [f"{path.name}: compiled file {n}" for n in sorted(names) if n.endswith(".pyc")]
        points = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        text = zf.read(points[0]).decode() if points else ""
        if "datadojo = datadojo.cli.app:main" not in text:
            problems.append(f"{path.name}: no 'datadojo' console script in entry_points.txt")
    return problems


def check_sdist(path: Path) -> list[str]:
    with tarfile.open(path) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    want = tracked("src", "examples", "tests", "docs", "scripts") | {"pyproject.toml", "README.md"}
    return [f"{path.name}: missing {n}" for n in sorted(want - names)]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    dist = Path(argv[0])
    wheels, sdists = sorted(dist.glob("datadojo-*.whl")), sorted(dist.glob("datadojo-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        print(f"error: {dist}: expected one wheel and one sdist, found {wheels + sdists}", file=sys.stderr)
        return 2
    problems = check_wheel(wheels[0]) + check_sdist(sdists[0])
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    print(f"[dist] {wheels[0].name}, {sdists[0].name}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

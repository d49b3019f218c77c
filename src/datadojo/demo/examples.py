"""Where the example data is, and making it when it is absent (``examples/make_examples.py``).

The example data is small, generated from a fixed seed by the project's own generator
(:mod:`datadojo.demo.make_examples`), and committed, so a fresh clone has it. The demo looks for the
``examples`` folder of a DataDojo checkout: the one given, else ``./examples``, else the checkout this
package was installed from in editable mode (``pip install -e``, what ``scripts/install.sh`` does). When a
file the demo needs is missing there, it runs the folder's ``make_examples.py`` (which writes
``examples/data/``). With no checkout at all (``pip install datadojo`` from a wheel, run in an empty
folder) the demo writes the same files with the packaged generator into its own output folder.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from datadojo.errors import DataDojoError

__all__ = ["EXAMPLE_SOURCES", "DemoError", "ExampleData", "ensure_example_data", "find_examples"]

#: What the demo uses under ``examples/data``: a CSV, a workbook, a SQLite database, a dataset folder.
EXAMPLE_SOURCES: tuple[str, ...] = ("sales.csv", "budget.xlsx", "shop.sqlite", "station_survey")
#: The script that writes them (next to ``data/``).
GENERATOR = "make_examples.py"
#: The checkout an editable install came from (src/datadojo/demo/ -> the checkout); a wheel has none.
CHECKOUT_EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


class DemoError(DataDojoError, ValueError):
    """The demo cannot run or continue; the message names the folder, file or stage at fault."""


@dataclass(frozen=True)
class ExampleData:
    """The example folder, its data folder, and whether this run generated the data."""

    root: Path
    data: Path
    generated: bool

    def path(self, name: str) -> Path:
        return self.data / name


def _usable(folder: Path) -> bool:
    return (folder / GENERATOR).is_file() or all((folder / "data" / n).exists() for n in EXAMPLE_SOURCES)


def find_examples(explicit: str | Path | None = None, *, fallback: Path | None = None) -> Path:
    """The ``examples`` folder to use (module docstring): ``fallback`` (where the packaged generator will
    write) when no checkout's is found and none was given; else :class:`DemoError` saying where it looked."""
    if explicit is not None:
        folder = Path(explicit)
        if not _usable(folder):
            raise DemoError(
                f"{folder}: not a DataDojo examples folder (it has neither {GENERATOR} nor "
                f"data/{{{','.join(EXAMPLE_SOURCES)}}})"
            )
        return folder
    tried = []
    for folder in (Path.cwd() / "examples", CHECKOUT_EXAMPLES):
        tried.append(str(folder))
        if _usable(folder):
            return folder
    if fallback is not None:
        return fallback
    raise DemoError(
        "no DataDojo examples folder found (looked in " + ", ".join(dict.fromkeys(tried)) + "); run the "
        "demo from a DataDojo checkout or pass --examples PATH/TO/datadojo/examples"
    )


def ensure_example_data(examples: str | Path, *, packaged: bool = False) -> ExampleData:
    """The example data under ``examples/data``, generated with ``make_examples.py`` when any is missing.

    ``packaged``: a folder with no ``make_examples.py`` is written by the packaged generator instead
    (the demo's own copy when there is no checkout).
    """
    root = Path(examples)
    data = root / "data"
    missing = [n for n in EXAMPLE_SOURCES if not (data / n).exists()]
    if not missing:
        return ExampleData(root, data, generated=False)
    script = root / GENERATOR
    if not script.is_file() and packaged:
        from datadojo.demo.make_examples import write_examples

        try:
            write_examples(root)
        except OSError as exc:
            raise DemoError(f"{root}: cannot write the example data: {exc}") from exc
        return ExampleData(root, data, generated=True)
    if not script.is_file():
        raise DemoError(f"{data}: missing {', '.join(missing)} and no {script} to generate them")
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=root, check=False
    )
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip()[-800:]
        raise DemoError(f"{script} failed (exit {proc.returncode}): {tail}")
    still = [n for n in EXAMPLE_SOURCES if not (data / n).exists()]
    if still:
        raise DemoError(f"{script} ran but {data} still lacks {', '.join(still)}")
    return ExampleData(root, data, generated=True)

"""Write the example data of this folder (``data/`` and ``scidata_tasks.jsonl``) from a fixed seed.

The generator is part of the package (:mod:`datadojo.demo.make_examples`, which says what each file is),
so that ``datadojo demo`` from a wheel can write the same files; this script runs it for the checkout.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

try:
    from datadojo.demo.make_examples import write_examples
except ImportError:  # a checkout that is not installed: use its sources
    sys.path.insert(0, str(HERE.parent / "src"))
    from datadojo.demo.make_examples import write_examples

if __name__ == "__main__":
    print(f"wrote example data to {write_examples(HERE)}")

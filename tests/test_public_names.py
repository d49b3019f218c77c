"""No two public classes of the package share a name (issue 25, part 6).

Seven names were defined twice with different meanings (``Executor``, ``Worker``, ``Outcome``,
``ExecOutcome``, ``Verdict``, ``ForeignKey``, ``Ctx``): a reader of ``from … import Verdict`` had to look up
which one. Each top-level class not starting with ``_`` must be defined once in ``src/datadojo``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "datadojo"


def test_every_public_class_name_is_defined_once() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where[node.name].append(str(path.relative_to(SRC)))
    twice = {name: files for name, files in where.items() if len(files) > 1}
    assert not twice, twice

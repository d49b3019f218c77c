"""A sailor policy double that explores like a real model: its first probe of a repository is ``os.walk('.')``.

:class:`datadojo.testing.sailor_teacher.FakeSailor` lists the folder with ``os.walk('.', followlinks=True)``,
which is exactly the argument that hides a workspace whose inputs are symlinks (issue 21, defect 3): a real
policy writes the plain call, or ``pathlib.Path('.').rglob('*')``, and sees nothing when the inputs are links.
:class:`WalkingSailor` answers every request as ``FakeSailor`` does except the probes: the first probe of a
tree is the plain ``os.walk('.')`` listing (printing every file path with ``FILE`` in front), later
repository probes use ``rglob`` and ``glob``, and :meth:`WalkingSailor.files_seen` reads back which file paths
the probes' observations named (from the request history), so a test can assert that the first probe saw
every file of the folder.

Serve it with :class:`datadojo.testing.server.ScriptedLLMServer` (``ScriptedLLMServer(WalkingSailor())``).
"""

from __future__ import annotations

import re
from typing import Any

from datadojo.testing.sailor_teacher import FakeSailor, schema_name

__all__ = ["FIRST_PROBE", "LATER_PROBES", "WalkingSailor"]

#: The first probe of every tree: what a real model writes first (no ``followlinks``).
FIRST_PROBE = (
    "import os\n"
    "for root, dirs, files in os.walk('.'):\n"
    "    for name in sorted(files):\n"
    "        print('FILE', os.path.join(root, name))"
)
#: Later repository listings: the other common ways to list a tree.
LATER_PROBES = (
    "import pathlib\nfor p in sorted(pathlib.Path('.').rglob('*')):\n    if p.is_file():\n        print('FILE', p)",
    "import glob\nfor p in sorted(glob.glob('**/*', recursive=True)):\n    print('FILE', p)",
)


class WalkingSailor(FakeSailor):
    """:class:`FakeSailor` whose probes list the tree the way real models do (module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.observations: list[str] = []

    def __call__(self, req: dict[str, Any]) -> Any:
        msgs = req.get("messages", [])
        for m in msgs:  # record the <result> observations the policy has been shown
            content = str(m.get("content", ""))
            if (
                m.get("role") == "user"
                and content.startswith("<result>")
                and content not in self.observations
            ):
                with self.lock:
                    self.observations.append(content)
        if schema_name(req) != "Probe":
            return super().__call__(req)
        import json

        with self.lock:
            self.calls["Probe"] += 1
        steps = sum(1 for m in msgs if m["role"] == "assistant" and "<python>" in m["content"])
        code = FIRST_PROBE if steps == 0 else LATER_PROBES[(steps - 1) % len(LATER_PROBES)]
        return json.dumps({"thought": "List every file of the repository first.", "code": code})

    def files_seen(self) -> set[str]:
        """File paths (without a leading ``./``) that some probe's observation printed after ``FILE``."""
        seen: set[str] = set()
        for obs in self.observations:
            for m in re.finditer(r"^FILE (.+)$", obs, re.MULTILINE):
                seen.add(m.group(1).strip().removeprefix("./"))
        return seen

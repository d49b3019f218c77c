"""The module inspect_ai's ``inspect_ai`` entry point loads (pyproject.toml): registers DataDojo's tasks.

inspect imports it when a command names ``datadojo/...``; importing it without inspect_ai installed
registers nothing (so that importing every module of the package, as the layering test does, works).
"""

from __future__ import annotations

import importlib.util

from datadojo.integrations.inspect.tasks import register

if importlib.util.find_spec("inspect_ai") is not None:
    register()

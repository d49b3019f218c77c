"""Engine tests run inside each engine's own environment (``scripts/engine_tests.sh``), never in the unit suite.

The plain ``python3 -m pytest`` of the unit suite collects nothing here: the engines are not installed in
DataDojo's environment and the tests need fixtures the script builds. The script runs them with
``DATADOJO_ENGINE_FIXTURES`` pointing at those fixtures and ``-c tests/engines/pytest.ini``.
"""

from __future__ import annotations

import os

if not os.environ.get("DATADOJO_ENGINE_FIXTURES"):
    collect_ignore_glob = ["test_*.py"]

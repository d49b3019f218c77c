"""The README's Python snippet runs as written (against the loopback server) and leaves nothing unclosed.

Before: it built the backend without closing it, and every run ended with aiohttp's "Unclosed client
session" / "Unclosed connector" warnings.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from datadojo.testing.server import ScriptedLLMServer

REPO = Path(__file__).resolve().parents[1]
PLACEHOLDER = "openai:MODEL@http://localhost:8000/v1"


def _snippet() -> str:
    """The one ```python block under "## In Python" in README.md."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## In Python", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, "README.md: no ```python block under '## In Python'"
    return blocks[0]


def test_the_readme_snippet_runs_and_closes_its_backend(tmp_path: Path) -> None:
    code = _snippet()
    assert PLACEHOLDER in code  # the model spec a user replaces; the test points it at the loopback server
    with ScriptedLLMServer(["<think>count them</think><answer>7</answer>"]) as srv:
        script = tmp_path / "snippet.py"
        script.write_text(code.replace(PLACEHOLDER, f"openai:scripted@{srv.base_url}"))
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO / "src"),
            "PYTHONWARNINGS": "default",
            "PYTHONDEVMODE": "1",
        }
        proc = subprocess.run(
            [sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True, timeout=240
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["7", "answer"], proc.stdout
    assert "Unclosed" not in proc.stderr and "ResourceWarning" not in proc.stderr, proc.stderr

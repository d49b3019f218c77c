"""The examples of docs/environment.md's "The interface" section run as written and print what it says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _blocks() -> list[str]:
    text = (REPO / "docs" / "environment.md").read_text(encoding="utf-8")
    section = text.split("## The interface", 1)[1].split("\n## ", 1)[0]
    return [b for b in re.findall(r"```python\n(.*?)```", section, flags=re.S) if "asyncio.run" in b]


def _run(code: str, tmp_path: Path) -> list[str]:
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "PYTHONWARNINGS": "default"}
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.splitlines()


def test_the_step_by_step_example(tmp_path: Path) -> None:
    out = _run(_blocks()[0], tmp_path)
    assert out == [
        "How many rows does sales.csv have?",
        "False '<interpreter>\\n240\\n</interpreter>'",  # sales.csv has 240 rows
        "True ''",
        "answer 240 True",
        "1.0 {'answer': 1.0, 'length': 0.0, 'format': 0.0}",  # DataMind's R of a right, short answer
    ]


def test_the_token_exact_example(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    out = _run(_blocks()[1], tmp_path)
    # Qwen2.5's template: the end of the reply's turn, the observation as a user turn, the next header
    env_text = (
        "<|im_end|>\n<|im_start|>user\n<interpreter>\n240\n</interpreter><|im_end|>\n<|im_start|>assistant\n"
    )
    assert "\n".join(out) == f"False {env_text}\nTrue \nanswer True True"

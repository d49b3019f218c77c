"""The exploration environment: read-only folder, persistent state per path with replay, head/tail truncation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from datadojo.sandbox.cells import truncate_marker
from datadojo.synth.sailor.env import ProbeEnv, default_sandbox_config, truncate_head_tail


def test_truncate_head_tail_keeps_the_papers_split() -> None:
    text = "h" * 4000 + "m" * 100 + "t" * 1500
    cut, truncated = truncate_head_tail(text, 4000, 1500)
    assert truncated and cut == "h" * 4000 + truncate_marker(100) + "t" * 1500
    assert truncate_head_tail("short", 4000, 1500) == ("short", False)
    assert truncate_head_tail("abcdef", 2, 0) == ("ab" + truncate_marker(4), True)


def test_probes_run_in_their_paths_state_and_the_folder_is_read_only(dataset: Path) -> None:
    async def go() -> list:
        env = ProbeEnv(dataset, default_sandbox_config(30.0), head=4000, tail=1500)
        async with env:
            out = []
            a = ["x = 1\nopen('scratch.txt', 'w').write('branch a')"]
            out.append(await env.run(a, "print(x)"))
            b = ["x = 2"]
            out.append(await env.run(b, "import os\nprint(x, os.path.exists('scratch.txt'))"))
            replays = env.replays
            # continuing the path just run needs no replay
            out.append(
                await env.run([*b, "import os\nprint(x, os.path.exists('scratch.txt'))"], "print(x + 1)")
            )
            assert env.replays == replays
            out.append(await env.run([], "open('penguins/README.md', 'a').write('x')"))
            out.append(await env.run([], "print('y' * 9000)"))
            return out

    results = asyncio.run(go())
    assert results[0][0].output == "1\n"
    assert results[1][0].output == "2 False\n"  # branch b does not see branch a's state or files
    assert results[2][0].output == "3\n"
    assert results[3][0].status == "error" and "Permission denied" in results[3][0].output
    long = results[4]
    assert long[2] and long[1].startswith("y" * 4000) and "characters truncated" in long[1]
    assert len(long[3]) == 9001  # the untruncated output is kept for re-verification


def test_env_needs_persistent_mode(dataset: Path) -> None:
    from datadojo.sandbox.config import SandboxConfig

    with pytest.raises(ValueError, match="persistent"):
        ProbeEnv(dataset, SandboxConfig(mode="chunked"), head=10, tail=10)

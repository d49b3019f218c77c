"""The harness's file access by the agent's names (``Sandbox.read_file`` / ``write_file``) stays confined.

What a hostile or careless agent leaves behind: symlinks out of the sandbox (``ln -s /etc``, ``../../..``),
absolute host paths, a name shadowing its data file. None may make the unconfined host process read or
write outside the working directory and the inputs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from datadojo.sandbox import Sandbox

SALES = Path(__file__).resolve().parents[2] / "examples" / "data" / "sales.csv"


async def test_reads_and_writes_by_the_agents_names() -> None:
    async with await Sandbox.create([SALES]) as sb:
        assert await sb.read_file("sales.csv") == SALES.read_bytes()
        assert await sb.read_file(f"{sb.code_workspace}/sales.csv") == SALES.read_bytes()
        await sb.write_file("out/deep/a.txt", b"hello")
        result = await sb.run(
            "print(open('out/deep/a.txt').read())\n_ = open('b.txt', 'w').write('from code')"
        )
        assert result.status == "ok" and result.output.strip() == "hello"
        assert await sb.read_file("b.txt") == b"from code"
        await sb.write_file("c.txt", b"harness")
        assert (await sb.run("print(open('c.txt').read())")).output.strip() == "harness"


async def test_symlinks_out_of_the_sandbox_are_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    async with await Sandbox.create([SALES]) as sb:
        # links an agent's subprocess could have made, made here directly on the host
        os.symlink(str(tmp_path), sb.workspace / "host")
        os.symlink("../../..", sb.workspace / "up")
        os.symlink(str(secret), sb.workspace / "direct")
        os.symlink("sales.csv", sb.workspace / "alias")  # a link inside the sandbox is followed
        for name in (
            "host/secret.txt",
            "up/etc/passwd",
            "direct",
            "../secret.txt",
            "/etc/passwd",
            str(secret),
        ):
            with pytest.raises(PermissionError, match="outside the sandbox"):
                await sb.read_file(name)
        assert await sb.read_file("alias") == SALES.read_bytes()
        for name in ("host/new.txt", "up/new.txt", "direct"):
            with pytest.raises(PermissionError):
                await sb.write_file(name, b"x")
        assert secret.read_text() == "host secret" and not (tmp_path / "new.txt").exists()


async def test_data_files_cannot_be_overwritten_and_missing_files_say_so() -> None:
    async with await Sandbox.create([SALES]) as sb:
        with pytest.raises(PermissionError, match=r"sales\.csv"):
            await sb.write_file("sales.csv", b"a,b\n")
        assert await sb.read_file("sales.csv") == SALES.read_bytes()
        with pytest.raises(FileNotFoundError, match=r"nope\.txt"):
            await sb.read_file("nope.txt")
        await sb.write_file("d/x.txt", b"1")
        with pytest.raises(IsADirectoryError):
            await sb.read_file("d")
        with pytest.raises(PermissionError, match="bytes"):
            await sb.read_file("sales.csv", max_bytes=10)

"""One spelling throughout (issue 25, part 6): Oxford ``-ize`` (synthesize, normalize, tokenize, optimizer),
the spelling of the third-party names DataDojo uses every day (Hugging Face's ``tokenizer``, torch's
``optimizer``, pytest's ``parametrize``), with ``analyse``/``analysis`` as they are. A ``-ise`` form of
these verbs in code, docs or tests fails here, with its file and line."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STEMS = (
    "synthes|normal|optim|summar|token|visual|organ|canonical|serial|memo|initial|parenthes|maxim|minim|recogn|"
    "vector|material|standard|random|priorit|parameter|real|util|special|general|custom|character|stabil|"
    "categor|formal|penal|quant|final|author|central|local|item|critic|neutral|harmon|symbol|equal|global|"
    "individual|natural|popular|rational|synchron|digit|binar|linear|tensor|emphas|apolog|theor"
)
ISE = re.compile(
    r"(?<![A-Za-z])((?:de|re|un|non|pre|internation)?(?:"
    + STEMS
    + r"))is(e|es|ed|ing|er|ers|ation|ations|able)(?![a-z])",
    re.I,
)
SUFFIXES = {".py", ".md", ".toml", ".sh", ".txt", ".cfg", ".ini", ".yaml", ".yml", ".html"}


def _tracked() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [ROOT / f for f in out.split() if Path(f).suffix in SUFFIXES and f != "tests/test_spelling.py"]


def test_one_spelling_ize_throughout() -> None:
    found = []
    for path in _tracked():
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for i, line in enumerate(text.splitlines(), 1):
            for m in ISE.finditer(line):
                if m.group(0).lower() != "advertising":
                    found.append(f"{path.relative_to(ROOT)}:{i}: {m.group(0)}")
    assert not found, "\n".join(found[:40])


def test_the_pattern_catches_what_it_should() -> None:
    assert (
        ISE.search("the normalised answer") and ISE.search("synthesise_qa(") and ISE.search("deserialisation")
    )
    assert not ISE.search("synthesis of analysis") and not ISE.search("raise otherwise noise")

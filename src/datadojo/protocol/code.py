"""What runs: the code inside a code tag, its language, and the fences around it.

DataMind's ``<code>`` block carries Python or SQL (DataMind §3.2 trains on .csv/.xlsx files analysed with
pandas and .sqlite databases queried with SQL). Models often wrap the code in a Markdown fence; a
```` ```sql ```` fence marks SQL, a ```` ```python ```` fence Python, and the fence itself is stripped. An
unfenced block runs in the tag's default language, which the caller may override per task with
``default_language``:

* ``"python"`` / ``"sql"``: every unfenced block is in that language;
* ``"auto"``: :func:`guess_language` decides per block (SQL only if the block starts with a SQL keyword
  *and* is not valid Python). :func:`default_language_for_task` returns ``"auto"`` for a task whose only
  data are SQLite databases (BIRD-style, where models write bare ``SELECT …``), ``"python"`` otherwise.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Literal

from datadojo.types import Task

__all__ = [
    "LANGUAGES",
    "CodeLanguage",
    "ExtractedCode",
    "canonical_code",
    "default_language_for_task",
    "extract_code",
    "guess_language",
]

CodeLanguage = Literal["python", "sql"]
LANGUAGES: tuple[str, ...] = ("python", "sql")

#: Fence info strings understood, mapped to the language they mean.
FENCE_LANGUAGES: dict[str, str] = {
    "python": "python",
    "python3": "python",
    "py": "python",
    "ipython": "python",
    "sql": "sql",
    "sqlite": "sql",
    "sqlite3": "sql",
    "mysql": "sql",
    "postgresql": "sql",
    "postgres": "sql",
    "psql": "sql",
}

_FENCE_LINE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+.-]*)[ \t]*\r?$")
_SQL_START = re.compile(
    r"^\s*(select|with|pragma|explain|insert|update|delete|create|drop|alter|values)\b", re.IGNORECASE
)
_SQL_COMMENT = re.compile(r"^\s*(--[^\n]*|/\*.*?\*/)", re.DOTALL)


def _dedent(text: str) -> str:
    """Remove the leading whitespace common to all non-blank lines, leaving blank lines untouched.

    Unlike :func:`textwrap.dedent` this never rewrites whitespace-only lines, so code inside triple-quoted
    strings keeps its exact bytes when nothing is indented.
    """
    lines = text.split("\n")
    indents = [line[: len(line) - len(line.lstrip())] for line in lines if line.strip()]
    prefix = indents[0] if indents else ""
    for indent in indents[1:]:
        while not indent.startswith(prefix):
            prefix = prefix[:-1]
    if not prefix:
        return text
    return "\n".join(
        line[len(prefix) :] if line.strip() and line.startswith(prefix) else line for line in lines
    )


def canonical_code(text: str) -> str:
    """The code as it will run: leading blank lines and trailing whitespace dropped, common indent removed."""
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    return _dedent("\n".join(lines).rstrip())


def guess_language(code: str, allowed: tuple[str, ...] = LANGUAGES) -> str:
    """``"sql"`` when the code starts with a SQL keyword and does not parse as Python, else ``"python"``.

    Only a block that *cannot* be Python is taken for SQL, so a Python variable named ``select`` never
    flips the language. When only one language is allowed, that one is returned.
    """
    if len(allowed) == 1:
        return allowed[0]
    body = code
    while (m := _SQL_COMMENT.match(body)) is not None:
        body = body[m.end() :]
    if "sql" in allowed and _SQL_START.match(body):
        try:
            ast.parse(code)
        except (SyntaxError, ValueError, RecursionError):
            return "sql"
    return "python" if "python" in allowed else allowed[0]


def default_language_for_task(task: Task) -> str:
    """The ``default_language`` an agent should parse this task's turns with.

    ``"auto"`` when every data file is a SQLite database (the model may write bare SQL or Python with
    ``sqlite3``; :func:`guess_language` tells them apart), ``"python"`` otherwise (and for tasks without
    files).
    """
    if task.files and all(f.kind == "sqlite" for f in task.files):
        return "auto"
    return "python"


@dataclass
class ExtractedCode:
    """The code of one code block, its language, and what was wrong (``errors``) or tolerated (``warnings``)."""

    code: str
    language: str | None
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _fence_language(info: str, tag: str, allowed: tuple[str, ...]) -> tuple[str | None, str | None]:
    """Map a fence info string to a language; return ``(language, error)``."""
    if not info:
        return None, None
    lang = FENCE_LANGUAGES.get(info.lower())
    if lang is None:
        runs = " or ".join(allowed)
        return None, f"```{info} fence inside <{tag}>: <{tag}> runs {runs} only."
    if lang not in allowed:
        runs = " or ".join(allowed)
        return None, f"```{info} fence inside <{tag}>: <{tag}> runs {runs} only; write {runs} code instead."
    return lang, None


def extract_code(
    content: str, *, tag: str, allowed: tuple[str, ...], default_language: str, strict: bool
) -> ExtractedCode:
    """Strip a Markdown fence from a code block's content and decide the language.

    A clean fence (only whitespace around it) is accepted in both modes. A fence with text around it, or
    an opening fence never closed, is an error when ``strict`` and a warning otherwise (the fenced part, or
    everything after the opening fence, is taken as the code). Two fenced blocks, an unknown fence
    language, or one the tag cannot run, are errors in both modes.
    """
    out = ExtractedCode(code="", language=None)
    lines = content.split("\n")
    fences = [i for i, line in enumerate(lines) if _FENCE_LINE.match(line)]
    nonblank = [i for i, line in enumerate(lines) if line.strip()]
    fence_info = ""
    body_lines = lines
    report = out.errors if strict else out.warnings
    if len(fences) > 2:
        out.errors.append(
            f"Several fenced blocks inside one <{tag}> ({len(fences)} ``` lines): "
            f"put a single block of code in each <{tag}>."
        )
        return out
    if len(fences) == 2:
        first, last = fences
        fence_info = _FENCE_LINE.match(lines[first]).group(1)  # type: ignore[union-attr]
        if any(lines[i].strip() for i in range(first)) or any(
            lines[i].strip() for i in range(last + 1, len(lines))
        ):
            report.append(f"Text around the ``` fence inside <{tag}>: put only code inside <{tag}>…</{tag}>.")
        body_lines = lines[first + 1 : last]
    elif len(fences) == 1:
        only = fences[0]
        info = _FENCE_LINE.match(lines[only]).group(1)  # type: ignore[union-attr]
        if nonblank and only == nonblank[0]:
            report.append(f"Unclosed ``` fence inside <{tag}>: end the fenced code with a ``` line.")
            fence_info, body_lines = info, lines[only + 1 :]
        elif nonblank and only == nonblank[-1] and not info:
            report.append(f"A closing ``` inside <{tag}> has no opening fence: remove it.")
            body_lines = lines[:only]
        # a lone ``` line in the middle is code (e.g. inside a string literal); leave it alone
    if strict and out.errors:
        return out
    lang, err = _fence_language(fence_info, tag, allowed)
    if err:
        out.errors.append(err)
        return out
    out.code = canonical_code("\n".join(body_lines))
    if lang is None:
        lang = guess_language(out.code, allowed) if default_language == "auto" else default_language
    out.language = lang
    return out

r"""Unwrap a LaTeX ``\boxed{…}`` final answer (SciDataSailor §5.1: the final answer may be boxed).

Braces nest (``\boxed{\frac{1}{2}}``) and may be escaped (``\boxed{\{1, 2\}}``), so a regex cannot find
the end of the box; :func:`unwrap_boxed` counts braces instead.
"""

from __future__ import annotations

import re

__all__ = ["find_boxed", "unwrap_boxed"]

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")


def _brace_pairs(text: str) -> dict[int, int]:
    """Map each unescaped ``{`` to its matching ``}`` in one pass (unmatched braces are left out)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            pairs[stack.pop()] = i
        i += 1
    return pairs


def find_boxed(text: str) -> list[tuple[int, int, str]]:
    r"""Every balanced ``\boxed{…}`` (or ``\fbox{…}``) in ``text``: ``(start, end, content)``, in order.

    A box whose braces never balance is skipped; boxes nested in a box are not listed separately.
    """
    pairs = _brace_pairs(text)
    found: list[tuple[int, int, str]] = []
    pos = 0
    while (m := _BOXED.search(text, pos)) is not None:
        close = pairs.get(m.end() - 1)
        if close is None:
            pos = m.end()
            continue
        found.append((m.start(), close + 1, text[m.end() : close]))
        pos = close + 1
    return found


def unwrap_boxed(text: str) -> str:
    r"""The content of the last balanced ``\boxed{…}`` in ``text`` (stripped), or ``text`` unchanged if none.

    The last box wins, as in the usual math-answer convention: a model that boxes an intermediate value
    and then the final one means the final one.
    """
    boxes = find_boxed(text)
    return boxes[-1][2].strip() if boxes else text

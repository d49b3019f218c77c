"""Find the tag blocks of one assistant turn: the shared core under every dialect's parser.

A dialect knows a handful of tag names (``think``, ``code``, ``answer``, ``interpreter`` …). The scanner
finds every opening and closing tag with one of those names and pairs them, left to right, into
:class:`Block` objects. Everything the parser later reports (an unclosed tag, two actions, text outside
tags, a tag nested inside another block) is read off this one structure, so both dialects and both
leniency levels agree on what the turn *is* and differ only in what they accept.

Pairing rule: an opening tag is closed by the next closing tag *of the same name*; whatever lies between
is the block's content and is opaque (a ``<`` in code is just code). Known tags found inside a content are
kept in :attr:`Block.inner` so that the parser can report nesting. An opening tag with no closing tag
anywhere after it makes an unclosed block whose content runs up to the next known tag (or the end of the
text), and scanning resumes at that tag. A closing tag with no opening tag before it is a stray.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["Block", "Scan", "Tag", "scan", "tag_pattern"]


@dataclass(frozen=True)
class Tag:
    """One ``<name>`` or ``</name>`` occurrence; ``start``/``end`` are character offsets in the turn."""

    name: str
    closing: bool
    start: int
    end: int

    @property
    def text(self) -> str:
        return f"</{self.name}>" if self.closing else f"<{self.name}>"


@dataclass(frozen=True)
class Block:
    """A tag block: ``<name>content</name>``, or an opening tag that was never closed.

    ``start`` is the offset of the opening ``<``; ``end`` is just after the closing tag (or, for an unclosed
    block, where its content stops). ``content_start``/``content_end`` delimit the content.
    """

    name: str
    start: int
    end: int
    content_start: int
    content_end: int
    closed: bool
    inner: tuple[Tag, ...] = ()

    def content(self, text: str) -> str:
        return text[self.content_start : self.content_end]


@dataclass(frozen=True)
class Scan:
    """The blocks of a turn in order, the stray closing tags, and the non-blank spans outside all blocks.

    Each outside span is trimmed of surrounding whitespace, so whitespace between blocks never counts as
    text outside tags.
    """

    text: str
    blocks: tuple[Block, ...]
    strays: tuple[Tag, ...]
    outside: tuple[tuple[int, int], ...]


@lru_cache(maxsize=64)
def tag_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    """A regex matching ``<name>`` and ``</name>`` for the given tag names (exact, case-sensitive)."""
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"<(/?)({alternatives})>")


def _tags(text: str, names: tuple[str, ...]) -> list[Tag]:
    return [
        Tag(name=m.group(2), closing=bool(m.group(1)), start=m.start(), end=m.end())
        for m in tag_pattern(names).finditer(text)
    ]


def _outside_spans(text: str, covered: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    spans: list[tuple[int, int]] = []
    pos = 0
    for start, end in [*sorted(covered), (len(text), len(text))]:
        if start > pos:
            gap = text[pos:start]
            stripped = gap.strip()
            if stripped:
                lead = len(gap) - len(gap.lstrip())
                spans.append((pos + lead, pos + lead + len(stripped)))
        pos = max(pos, end)
    return tuple(spans)


def scan(text: str, names: Iterable[str]) -> Scan:
    """Pair the known tags of ``text`` into blocks (see the module docstring for the rule)."""
    tags = _tags(text, tuple(names))
    # next_close[i]: index of the first closing tag after i with tags[i]'s name (one right-to-left pass,
    # so a turn with thousands of unclosed tags still scans in linear time)
    next_close: list[int | None] = [None] * len(tags)
    seen: dict[str, int] = {}
    for k in range(len(tags) - 1, -1, -1):
        next_close[k] = seen.get(tags[k].name)
        if tags[k].closing:
            seen[tags[k].name] = k
    blocks: list[Block] = []
    strays: list[Tag] = []
    covered: list[tuple[int, int]] = []
    i = 0
    while i < len(tags):
        tag = tags[i]
        if tag.closing:
            strays.append(tag)
            covered.append((tag.start, tag.end))
            i += 1
            continue
        j = next_close[i]
        if j is None:
            stop = tags[i + 1].start if i + 1 < len(tags) else len(text)
            blocks.append(Block(tag.name, tag.start, stop, tag.end, stop, closed=False))
            covered.append((tag.start, stop))
            i += 1
        else:
            close = tags[j]
            blocks.append(
                Block(
                    tag.name,
                    tag.start,
                    close.end,
                    tag.end,
                    close.start,
                    closed=True,
                    inner=tuple(tags[i + 1 : j]),
                )
            )
            covered.append((tag.start, close.end))
            i = j + 1
    return Scan(text=text, blocks=tuple(blocks), strays=tuple(strays), outside=_outside_spans(text, covered))

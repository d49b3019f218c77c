"""Tag dialects: how an assistant turn is written, parsed and completed, and how the environment replies.

Two dialects ship (see ``docs/formats.md``):

* ``datamind`` (DataMind §3.2, §4): ``<think>…</think>`` then ``<code>…</code>`` (Python, or SQL when fenced
  with ```` ```sql ````) or ``<answer>…</answer>``; the environment replies ``<interpreter>…</interpreter>``.
* ``sailor`` (SciDataSailor §4.1, §5.1, App. B.1): ``<think>``, ``<python>``, ``<result>``, ``<answer>``; the
  final answer may be wrapped in ``\\boxed{…}``.

Both share one parser (:meth:`Dialect.parse_turn`, built on :func:`datadojo.protocol.scan.scan`), with two
leniency levels:

* **lenient** (``strict=False``, the agent loop): whitespace anywhere is fine; text outside tags, a missing
  or repeated ``<think>``, a ``<think>`` after the action, an unclosed ``<think>`` before a complete action,
  a ``</think>`` with no opening (chat templates that open the think block in the prompt), text around a
  code fence and an environment block the model wrote itself are *warnings*: the action still runs.
  Things that leave the action ambiguous are *errors* (the turn is invalid): no action, two actions, an
  unclosed action tag, a tag nested in the action, an empty action, an unknown fence language.
* **strict** (``strict=True``, the format reward and :func:`datadojo.protocol.validate_trajectory`): every
  warning above is an error, a ``<think>`` block is required before the action, and known tags may not
  appear even inside ``<think>``.

Errors are sentences written for the model (the agent loop sends them back as feedback), naming the tag
and the character offsets in the turn.

Stop sequences: generation should stop after an action is closed (``</code>``, ``</answer>``) and before
the model starts writing the environment's block (``<interpreter>``); see :attr:`Dialect.stop_sequences`.
OpenAI-compatible servers usually *drop* the matched stop string, so the parser does **not** accept a
turn whose final action tag is unclosed; call :meth:`Dialect.complete_turn` first, which re-appends the
closing tag the stop sequence cut. Keeping the two steps apart means a completion cut by the token limit
(unclosed for a different reason) is still reported as unclosed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from datadojo.protocol.boxed import find_boxed, unwrap_boxed
from datadojo.protocol.code import LANGUAGES, extract_code
from datadojo.protocol.scan import Block, Scan, scan
from datadojo.registry import Registry
from datadojo.types import Action, ActionKind, Observation, Turn

__all__ = [
    "DATAMIND",
    "SAILOR",
    "CodeTag",
    "Dialect",
    "ParsedTurn",
    "dialect_names",
    "get_dialect",
    "register_dialect",
]


@dataclass(frozen=True)
class ParsedTurn:
    """One assistant turn, parsed.

    ``kind`` is ``code`` (Python), ``sql``, ``answer`` or ``invalid``; ``text`` is the code to run (fence
    stripped) or the answer block's content, empty when invalid. ``errors`` say why a turn is invalid,
    ``warnings`` what a lenient parse tolerated. ``raw`` is the text that was parsed.
    """

    raw: str
    kind: ActionKind
    text: str = ""
    thought: str | None = None
    language: str | None = None
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def error(self) -> str | None:
        """All errors in one model-facing message, or ``None`` when the turn is valid."""
        return " ".join(self.errors) if self.errors else None

    @property
    def ok(self) -> bool:
        return self.kind != "invalid"

    @property
    def action(self) -> Action:
        return Action(kind=self.kind, text=self.text if self.ok else "")

    def to_turn(self, observation: Observation | None = None, **fields: Any) -> Turn:
        """A :class:`~datadojo.types.Turn` with this parse (``raw`` verbatim, ``invalid_reason`` = errors)."""
        return Turn(
            raw=self.raw,
            thought=self.thought,
            action=self.action,
            observation=observation,
            invalid_reason=self.error,
            **fields,
        )


@dataclass(frozen=True)
class CodeTag:
    """A tag whose content is executed, and the languages it may hold (the first is the default)."""

    name: str
    languages: tuple[str, ...] = ("python",)

    def __post_init__(self) -> None:
        bad = [lang for lang in self.languages if lang not in LANGUAGES]
        if not self.languages or bad:
            raise ValueError(f"code tag <{self.name}>: languages must be a non-empty subset of {LANGUAGES}")


def _excerpt(text: str, limit: int = 40) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _join_positions(items: Sequence[str], limit: int = 4) -> str:
    """``a``, ``a and b``, ``a, b and c``; past ``limit`` items, ``a, b, c, d and 7 more``."""
    if len(items) > limit:
        return ", ".join(items[:limit]) + f" and {len(items) - limit} more"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


@dataclass(frozen=True)
class Dialect:
    """A tag protocol: names of the think / code / answer / observation tags and how to read them.

    ``boxed_answers``: the final answer may be ``\\boxed{…}``; :meth:`extract_answer` unwraps it, and a
    lenient parse accepts a boxed answer written outside ``<answer>`` (with a warning).
    """

    name: str
    code_tags: tuple[CodeTag, ...]
    observation: str
    think: str = "think"
    answer: str = "answer"
    boxed_answers: bool = False
    description: str = ""
    _names: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = (self.think, *(t.name for t in self.code_tags), self.answer, self.observation)
        if len(set(names)) != len(names) or not all(n.isidentifier() for n in names):
            raise ValueError(f"dialect {self.name!r}: tag names must be distinct identifiers, got {names}")
        object.__setattr__(self, "_names", names)

    # -- tags -------------------------------------------------------------------------------------

    @property
    def tag_names(self) -> tuple[str, ...]:
        """Every tag name the dialect knows (think, code tags, answer, observation)."""
        return self._names

    @property
    def action_tags(self) -> tuple[str, ...]:
        return (*(t.name for t in self.code_tags), self.answer)

    @property
    def stop_sequences(self) -> tuple[str, ...]:
        """Where a backend should stop generating: after an action closes, before an environment block."""
        return (*(f"</{t}>" for t in self.action_tags), f"<{self.observation}>")

    def _code_tag(self, name: str) -> CodeTag | None:
        return next((t for t in self.code_tags if t.name == name), None)

    def _action_list(self) -> str:
        return " or ".join(f"<{t}>" for t in self.action_tags)

    # -- parsing ----------------------------------------------------------------------------------

    def scan(self, text: str) -> Scan:
        """The tag blocks of ``text`` (see :mod:`datadojo.protocol.scan`)."""
        return scan(text, self._names)

    def parse_turn(
        self, text: str, *, strict: bool = False, default_language: str | None = None
    ) -> ParsedTurn:
        """Parse one assistant turn into thought and action, saying precisely what is wrong if it is malformed.

        ``default_language`` is the language of an unfenced code block: ``"python"``, ``"sql"`` or ``"auto"``
        (see :mod:`datadojo.protocol.code`); ``None`` means the code tag's first language. Never raises on
        any text; raises ``ValueError`` only for a ``default_language`` the dialect cannot run.

        The checks are the rules in :data:`_TURN_RULES`, each a small function over a :class:`_TurnCheck`,
        run in order (the order of the messages a model sees).
        """
        self._check_default_language(default_language)
        turn = _TurnCheck.start(self, text, strict)
        for rule in _TURN_RULES:
            rule(self, turn)
        thought = self._thought(text, turn.thinks, turn.actions, turn.outside, turn.implicit_thought)

        kind: ActionKind = "invalid"
        body = ""
        language: str | None = None
        actions = turn.actions
        if len(actions) == 1 and actions[0].closed and not actions[0].inner:
            kind, body, language = self._read_action(
                text, actions[0], turn.errors, turn.warnings, strict=strict, default_language=default_language
            )
        elif not actions and turn.boxed_outside is not None:
            kind, body = "answer", turn.boxed_outside

        if turn.errors:
            return ParsedTurn(
                raw=text,
                kind="invalid",
                thought=thought,
                errors=tuple(turn.errors),
                warnings=tuple(turn.warnings),
            )
        return ParsedTurn(
            raw=text, kind=kind, text=body, thought=thought, language=language, warnings=tuple(turn.warnings)
        )

    def _check_default_language(self, default_language: str | None) -> None:
        if default_language is not None and default_language != "auto":
            runnable = {lang for t in self.code_tags for lang in t.languages}
            if default_language not in runnable:
                raise ValueError(
                    f"dialect {self.name!r} cannot run {default_language!r} code "
                    f"(runs {', '.join(sorted(runnable))}); use default_language='auto' or one of those"
                )

    def _read_action(
        self,
        text: str,
        block: Block,
        errors: list[str],
        warnings: list[str],
        *,
        strict: bool,
        default_language: str | None,
    ) -> tuple[ActionKind, str, str | None]:
        content = block.content(text)
        if block.name == self.answer:
            answer = content.strip()
            if not answer:
                errors.append(
                    f"<{self.answer}> is empty: write your final answer between <{self.answer}> and </{self.answer}>."
                )
            return "answer", answer, None
        tag = self._code_tag(block.name)
        assert tag is not None  # block.name is an action tag and not the answer tag
        default = default_language or tag.languages[0]
        if default not in (*tag.languages, "auto"):
            default = tag.languages[0]
        got = extract_code(
            content, tag=tag.name, allowed=tag.languages, default_language=default, strict=strict
        )
        errors.extend(got.errors)
        warnings.extend(got.warnings)
        if not got.errors and not got.code:
            errors.append(
                f"<{tag.name}> is empty: write the code to run between <{tag.name}> and </{tag.name}>."
            )
        kind: ActionKind = "sql" if got.language == "sql" else "code"
        return kind, got.code, got.language

    def _thought(
        self,
        text: str,
        thinks: list[Block],
        actions: list[Block],
        outside: list[tuple[int, int]],
        implicit: str | None,
    ) -> str | None:
        parts = [b.content(text).strip() for b in thinks]
        if implicit is not None:
            parts.insert(0, implicit)
        if parts:
            return "\n\n".join(parts)
        # No think block: text written before the action is the reasoning (lenient models do this).
        limit = actions[0].start if actions else len(text)
        before = [text[s:e] for s, e in outside if e <= limit]
        return "\n\n".join(before) if before else None

    def _no_action_message(self) -> str:
        codes = " or ".join(f"<{t.name}>…</{t.name}>" for t in self.code_tags)
        return (
            f"No action: write your code inside {codes} "
            f"or your final answer inside <{self.answer}>…</{self.answer}>."
        )

    def _unclosed_action_message(self, name: str) -> str:
        what = "your final answer" if name == self.answer else "your code"
        return f"Unclosed <{name}> tag: add </{name}> after {what}."

    def _nested_message(self, block: Block) -> str:
        inner = block.inner[0]
        return (
            f"Tag {inner.text} inside <{block.name}> (char {inner.start}): "
            f"close </{block.name}> before starting another block, and do not write tags inside it."
        )

    # -- writing ----------------------------------------------------------------------------------

    def format_turn(self, thought: str | None, action: Action) -> str:
        """Write a turn: ``<think>`` block (omitted when ``thought`` is None), then the action block.

        ``code`` goes in the first code tag that runs Python, ``sql`` in a tag whose default is SQL or,
        fenced with ```` ```sql ````, in one that accepts SQL. Parsing the result gives back ``thought``
        (stripped) and ``action``.
        """
        parts: list[str] = []
        if thought is not None:
            parts.append(f"<{self.think}>\n{thought}\n</{self.think}>")
        if action.kind == "answer":
            parts.append(f"<{self.answer}>{action.text}</{self.answer}>")
        elif action.kind in ("code", "sql"):
            lang = "python" if action.kind == "code" else "sql"
            tag = next((t for t in self.code_tags if t.languages[0] == lang), None)
            if tag is not None:
                body = action.text
            else:
                tag = next((t for t in self.code_tags if lang in t.languages), None)
                if tag is None:
                    raise ValueError(f"dialect {self.name!r} has no tag that runs {lang}")
                body = f"```{lang}\n{action.text}\n```"
            parts.append(f"<{tag.name}>\n{body}\n</{tag.name}>")
        else:
            raise ValueError(f"cannot format an action of kind {action.kind!r}; give code, sql or answer")
        return "\n".join(parts)

    def format_observation(self, text: str) -> str:
        """The environment's message: ``<interpreter>\\n{text}\\n</interpreter>``.

        Trailing line breaks of ``text`` are dropped (program output nearly always ends with one, and a
        blank line before the closing tag only costs tokens), so :meth:`parse_observation` gives back
        ``text.rstrip("\\r\\n")``: exact for every text that does not end in a line break.
        """
        body = text.rstrip("\r\n")
        return f"<{self.observation}>\n{body}\n</{self.observation}>"

    def is_observation(self, content: str) -> bool:
        """Whether a message is an environment observation of this dialect (wrapped in its tags)."""
        stripped = content.strip()
        return stripped.startswith(f"<{self.observation}>") and stripped.endswith(f"</{self.observation}>")

    def parse_observation(self, content: str) -> str:
        """Inverse of :meth:`format_observation`; ``ValueError`` when the message is not wrapped in the tags.

        Only the outer tags and the newline next to each are removed, so an observation containing the tag
        text itself (a program that prints ``</interpreter>``) survives.
        """
        if not self.is_observation(content):
            raise ValueError(
                f"an environment message must be wrapped in <{self.observation}>…</{self.observation}>, "
                f"got {_excerpt(content)!r}"
            )
        inner = content.strip()[len(self.observation) + 2 : -(len(self.observation) + 3)]
        inner = inner.removeprefix("\n")
        return inner.removesuffix("\n")

    def complete_turn(self, text: str, stop: str | None = None) -> str:
        """Re-append the closing action tag a stop sequence cut from a completion.

        ``stop`` is the stop string the backend matched (vLLM reports it as ``stop_reason``); pass ``None``
        when generation ended on a stop sequence but the server did not say which. Then the text is
        completed only if it ends inside an open action block. Do not call this for a completion cut by
        the token limit: that turn really is unclosed. A stop on ``<interpreter>`` cuts nothing and leaves
        the text as it is. Idempotent.
        """
        closers = {f"</{t}>": t for t in self.action_tags}
        if stop is not None and stop not in closers:
            return text
        sc = self.scan(text)
        if not sc.blocks:
            return text
        last = sc.blocks[-1]
        if last.closed or last.name not in self.action_tags or last.end != len(text):
            return text
        if any(t.start > last.start for t in sc.strays):
            return text
        if stop is not None and closers[stop] != last.name:
            return text
        return f"{text}</{last.name}>"

    def extract_answer(self, text: str) -> str:
        """The final answer in a turn, or in an answer block's content, as a string for scoring.

        Takes the content of the last closed ``<answer>`` block when there is one (else the whole text),
        then, for dialects with ``boxed_answers``, the content of its last ``\\boxed{…}``.
        """
        blocks = [b for b in self.scan(text).blocks if b.name == self.answer and b.closed]
        answer = blocks[-1].content(text).strip() if blocks else text.strip()
        if self.boxed_answers:
            answer = unwrap_boxed(answer)
        return answer


DATAMIND = Dialect(
    name="datamind",
    code_tags=(CodeTag("code", ("python", "sql")),),
    observation="interpreter",
    description="DataMind (arXiv 2509.25084 §3.2, §4): <think>, <code> (Python or ```sql), <interpreter>, <answer>",
)

SAILOR = Dialect(
    name="sailor",
    code_tags=(CodeTag("python", ("python",)),),
    observation="result",
    boxed_answers=True,
    description="SciDataSailor (§4.1, §5.1, App. B.1): <think>, <python>, <result>, <answer> (\\boxed{} allowed)",
)

# --- the rules of a well-formed turn ------------------------------------------------------------------------


@dataclass
class _TurnCheck:
    """One turn being checked: its scan, its blocks by kind, and the problems found so far.

    ``soft`` is where problems go that do not make the action ambiguous: errors when strict, else warnings.
    """

    text: str
    strict: bool
    scan: Scan
    thinks: list[Block]
    actions: list[Block]
    observations: list[Block]
    outside: list[tuple[int, int]]
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    implicit_thought: str | None = None
    boxed_outside: str | None = None

    @property
    def soft(self) -> list[str]:
        return self.errors if self.strict else self.warnings

    @classmethod
    def start(cls, d: Dialect, text: str, strict: bool) -> _TurnCheck:
        sc = d.scan(text)
        return cls(
            text=text,
            strict=strict,
            scan=sc,
            thinks=[b for b in sc.blocks if b.name == d.think],
            actions=[b for b in sc.blocks if b.name in d.action_tags],
            observations=[b for b in sc.blocks if b.name == d.observation],
            outside=list(sc.outside),
        )


def _rule_strays(d: Dialect, t: _TurnCheck) -> None:
    """Closing tags with no opening one; a leading ``</think>`` means the chat template opened the block.

    Problems tied to a position are reported for their first occurrence only, so a model stuck repeating a
    tag gets one readable message rather than thousands.
    """
    reported: set[str] = set()
    first_block = t.scan.blocks[0].start if t.scan.blocks else len(t.text)
    for tag in t.scan.strays:
        first_stray_think = (
            tag.name == d.think
            and not t.strict
            and t.implicit_thought is None
            and not t.thinks
            and tag.start < first_block
        )
        if first_stray_think:
            t.implicit_thought = t.text[: tag.start].strip()
            t.outside = [s for s in t.outside if s[0] >= tag.end]
            t.warnings.append(
                f"</{d.think}> at char {tag.start} has no opening <{d.think}>: "
                f"took the text before it as your reasoning."
            )
            continue
        if f"stray {tag.name}" in reported:
            continue
        reported.add(f"stray {tag.name}")
        msg = (
            f"Stray </{tag.name}> at char {tag.start} with no opening <{tag.name}>: "
            f"open the block with <{tag.name}> before closing it."
        )
        (t.errors if tag.name in d.action_tags else t.soft).append(msg)


def _rule_no_observation(d: Dialect, t: _TurnCheck) -> None:
    """Only the environment writes the observation block."""
    if t.observations:
        t.soft.append(
            f"You wrote an <{d.observation}> block (char {t.observations[0].start}): only the environment "
            f"writes <{d.observation}>; stop after your action and wait for it."
        )


def _rule_think_closed(d: Dialect, t: _TurnCheck) -> None:
    """The think block is closed (soft when a closed action follows it) and, when strict, not nested."""
    last_closed_action = max((a.start for a in t.actions if a.closed), default=-1)
    unclosed_think = next((b for b in t.thinks if not b.closed), None)
    if unclosed_think is not None:
        msg = f"Unclosed <{d.think}> tag: add </{d.think}> after your reasoning."
        (t.soft if last_closed_action > unclosed_think.start else t.errors).append(msg)
    nested_think = next((b for b in t.thinks if b.closed and b.inner), None)
    if t.strict and nested_think is not None:
        t.errors.append(d._nested_message(nested_think))


def _rule_actions_closed(d: Dialect, t: _TurnCheck) -> None:
    """Every action block is closed and holds no other block."""
    for name in dict.fromkeys(b.name for b in t.actions if not b.closed):
        t.errors.append(d._unclosed_action_message(name))
    nested_action = next((b for b in t.actions if b.closed and b.inner), None)
    if nested_action is not None:
        t.errors.append(d._nested_message(nested_action))


def _rule_boxed_outside(d: Dialect, t: _TurnCheck) -> None:
    """Lenient: a ``\\boxed{}`` answer written outside any tag stands for the answer."""
    if t.actions or not d.boxed_answers or t.strict:
        return
    for start, end in t.outside:
        boxes = find_boxed(t.text[start:end])
        if boxes:
            s, e, _ = boxes[-1]
            t.boxed_outside = t.text[start + s : start + e]
    if t.boxed_outside is not None:
        t.warnings.append(
            f"Final answer given as \\boxed{{}} outside <{d.answer}>: wrap it in <{d.answer}>…</{d.answer}>."
        )


def _rule_one_action(d: Dialect, t: _TurnCheck) -> None:
    """Exactly one action per turn."""
    if not t.actions and t.boxed_outside is None:
        t.errors.append(d._no_action_message())
    elif len(t.actions) > 1:
        where = _join_positions([f"<{a.name}> at char {a.start}" for a in t.actions])
        count = "Two" if len(t.actions) == 2 else str(len(t.actions))
        t.errors.append(
            f"{count} actions in one turn ({where}): write exactly one {d._action_list()} per turn."
        )


def _rule_one_think_first(d: Dialect, t: _TurnCheck) -> None:
    """One think block (required when strict), before the action."""
    if len(t.thinks) > 1:
        where = _join_positions([str(b.start) for b in t.thinks])
        t.soft.append(
            f"{len(t.thinks)} <{d.think}> blocks (at chars {where}): "
            f"write one <{d.think}> block per turn, before the action."
        )
    elif not t.thinks and t.strict:
        t.errors.append(
            f"No <{d.think}> block: start the turn with your reasoning inside <{d.think}>…</{d.think}>."
        )
    if t.actions:
        first_action = t.actions[0]
        late = next((b for b in t.thinks if b.start > first_action.start), None)
        if late is not None:
            t.soft.append(
                f"<{d.think}> at char {late.start} comes after the <{first_action.name}> action: "
                f"reason first, then act."
            )


def _rule_no_text_outside(d: Dialect, t: _TurnCheck) -> None:
    """Reasoning goes inside the think block, not around the tags."""
    if t.outside:
        (s0, e0) = t.outside[0]
        more = f" and {len(t.outside) - 1} more place(s)" if len(t.outside) > 1 else ""
        t.soft.append(
            f"Text outside tags: '{_excerpt(t.text[s0:e0])}' (chars {s0}-{e0}){more}; "
            f"put reasoning inside <{d.think}>…</{d.think}>."
        )


_TURN_RULES = (
    _rule_strays,
    _rule_no_observation,
    _rule_think_closed,
    _rule_actions_closed,
    _rule_boxed_outside,
    _rule_one_action,
    _rule_one_think_first,
    _rule_no_text_outside,
)


_REGISTRY: Registry[Dialect] = Registry("dialect", aliases={"scidatasailor": "sailor", "react": "datamind"})


def register_dialect(dialect: Dialect, *, replace: bool = False) -> Dialect:
    """Make a dialect available by name (for ``Trajectory.dialect`` and ``--dialect`` options)."""
    return _REGISTRY.register(dialect.name, dialect, replace=replace)


def get_dialect(dialect: Dialect | str) -> Dialect:
    """Look a dialect up by name (case-insensitive, aliases ``scidatasailor``, ``react``); pass objects through."""
    if isinstance(dialect, Dialect):
        return dialect
    return _REGISTRY.get(dialect)


def dialect_names() -> tuple[str, ...]:
    return tuple(_REGISTRY.names())


register_dialect(DATAMIND)
register_dialect(SAILOR)

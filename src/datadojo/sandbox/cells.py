"""Pure helpers the sandbox worker uses to run a cell: AST transforms, value display, output cleaning.

Nothing here starts a process; everything is deterministic and testable in-process.

**Notebook display** (``compile_cell(..., display_last=True)``): when the last top-level statement is an
expression statement, its value is shown the way Jupyter shows ``Out[n]``: ``repr(value)`` (for a pandas
DataFrame/Series that *is* Jupyter's text/plain output, truncated by pandas' own display options),
``pprint`` layout for builtin containers, and nothing for ``None``. As in Jupyter, a trailing ``;``
(``df.plot();``) suppresses the display.

**Silent replay** (``compile_cell(..., silent=True)``): DataMind's chunked code maintenance (§4) re-runs the
chunks that succeeded earlier before the new chunk; their output was already shown and must not be shown
again. This is done on the AST (not by rewriting lines that contain ``print(`` -- which breaks on
``print`` inside strings, multi-line calls or ``f = print``), in two layers that are each correct alone:

1. Every top-level-executed call ``print(...)`` becomes ``__dd_cells__.silent_print(...)``: the arguments
   are still evaluated (``print(xs.pop())`` still pops), nothing is written to the console, but a print
   aimed at a file (``print(row, file=fh)`` or under ``contextlib.redirect_stdout(fh)``) still writes the
   file, so replay rebuilds the same files. Calls inside ``def``/``lambda`` bodies and generator
   expressions are *not* rewritten: those run later, possibly in a new, non-silent chunk that must print.
   When the chunk binds the name ``print`` itself (``def print``, ``from rich import print``), no call is
   rewritten (layer 2 still applies).
2. The whole body runs inside ``with __dd_cells__.quiet():``, which swaps ``sys.stdout``/``sys.stderr``
   for sinks that discard everything. That covers the rest of Python-level output: ``f = print; f(x)``,
   ``df.info()``, IPython-style ``display()``, ``warnings``. Output written by C code directly to file
   descriptors 1/2 is beyond an AST transform; the worker additionally points the descriptors at a null
   device during replay.

The trailing expression of a silent chunk is evaluated but never displayed.

The generated code imports this module as ``__dd_cells__`` (one name in the cell's namespace), so a
compiled cell runs in any namespace without the worker injecting helpers.

**Observation text**: :func:`decode_output` turns raw captured bytes into safe text; and
:func:`truncate_observation` keeps a head and a tail with a marker (the default budget of 2,048 characters
follows the sandbox contract's ``max_observation_chars``); :func:`truncate_head_tail` keeps fixed, unequal
head and tail lengths instead (SciDataSailor's 4,000 + 1,500, ``Limits.observation_head_chars`` /
``observation_tail_chars``).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import linecache
import pprint
import re
import sys
import types
from collections.abc import Iterator
from typing import Any

__all__ = [
    "HELPER_NAME",
    "compile_cell",
    "decode_output",
    "display_value",
    "escape_cell_text",
    "format_value",
    "quiet",
    "register_source",
    "render_parts",
    "silent_print",
    "truncate_head_tail",
    "truncate_head_tail_parts",
    "truncate_marker",
    "truncate_observation",
    "truncate_observation_parts",
]

HELPER_NAME = "__dd_cells__"
"""The name under which compiled cells import this module (the only name they add to a namespace)."""

_CONTAINERS = (dict, list, tuple, set, frozenset)


# --- display -------------------------------------------------------------------------------------------


_PRETTY_WIDTH = 79  # IPython's pretty-printer width
_PRETTY_MAX_CHARS = 100_000  # beyond this the observation is cut anyway; pprint would only cost time


def format_value(value: Any) -> str:
    """The text a notebook shows for ``value`` (Jupyter's text/plain): ``repr``, containers pretty-printed.

    A builtin container whose ``repr`` does not fit on one line is laid out by :mod:`pprint` (one item
    per line, insertion order kept) like IPython does; a huge one keeps its plain ``repr``.
    """
    text = repr(value)
    if type(value) in _CONTAINERS and _PRETTY_WIDTH < len(text) <= _PRETTY_MAX_CHARS:
        return pprint.pformat(value, width=_PRETTY_WIDTH, sort_dicts=False)
    return text


def display_value(value: Any) -> None:
    """Print ``value`` as a notebook's ``Out[n]`` would; ``None`` shows nothing."""
    if value is None:
        return
    text = format_value(value)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


# --- silent replay helpers ----------------------------------------------------------------------------


class _NullWriter(io.TextIOBase):
    """A text stream that accepts and discards everything (with a binary ``buffer`` that does the same)."""

    def __init__(self) -> None:
        super().__init__()
        self.buffer = _NullBinary()

    def write(self, s: str) -> int:
        return len(s)

    def writelines(self, lines: Any) -> None:
        for _ in lines:
            pass

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


class _NullBinary(io.RawIOBase):
    def write(self, b: Any) -> int:
        return len(memoryview(b))

    def writable(self) -> bool:
        return True


_console_streams: list[Any] = []


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Discard everything written to ``sys.stdout`` and ``sys.stderr`` inside the block."""
    saved = (sys.stdout, sys.stderr)
    _console_streams.extend(saved)
    sys.stdout, sys.stderr = _NullWriter(), _NullWriter()
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
        del _console_streams[-2:]


def _is_console(stream: Any) -> bool:
    if stream is None or isinstance(stream, _NullWriter):
        return True
    console = (sys.__stdout__, sys.__stderr__, *_console_streams)
    if not _console_streams:  # used without quiet(): the current streams are the console
        console = (*console, sys.stdout, sys.stderr)
    return any(stream is c for c in console)


def silent_print(
    *args: Any, sep: str | None = " ", end: str | None = "\n", file: Any = None, flush: bool = False
) -> None:
    """``print`` for replayed chunks: writes only when aimed at something other than the console.

    The arguments have already been evaluated by the caller (their side effects happen); a print to a
    file (or to a stream installed by ``redirect_stdout``) still happens so replay rebuilds the file.
    """
    target = sys.stdout if file is None else file
    if _is_console(target):
        return
    builtins.print(*args, sep=sep, end=end, file=target, flush=flush)


# --- the AST transforms --------------------------------------------------------------------------------


def _helper_attr(name: str) -> ast.Attribute:
    return ast.Attribute(value=ast.Name(id=HELPER_NAME, ctx=ast.Load()), attr=name, ctx=ast.Load())


def _helper_import() -> ast.stmt:
    # ``import datadojo.sandbox.cells as __dd_cells__`` binds only the alias name.
    return ast.Import(names=[ast.alias(name=__name__, asname=HELPER_NAME)])


def _binds_print(tree: ast.Module) -> bool:
    """Whether the module binds the name ``print`` anywhere (then print calls are not the builtin)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "print" and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == "print":
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == "print":
            return True
        if isinstance(node, ast.arg) and node.arg == "print":
            return True
        if isinstance(node, ast.Global | ast.Nonlocal) and "print" in node.names:
            return True
    return False


class _SilencePrints(ast.NodeTransformer):
    """Rewrite ``print(...)`` calls that run now; leave deferred code (function bodies, genexps) alone."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "print":
            node.func = ast.copy_location(_helper_attr("silent_print"), node.func)
        return node

    def _deferred(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> ast.AST:
        # Decorators and default values are evaluated at definition time; the body runs later.
        args = node.args
        args.defaults = [self.visit(d) for d in args.defaults]
        args.kw_defaults = [self.visit(d) if d is not None else None for d in args.kw_defaults]
        if not isinstance(node, ast.Lambda):
            node.decorator_list = [self.visit(d) for d in node.decorator_list]
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return self._deferred(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        return self._deferred(node)

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        return self._deferred(node)

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> ast.AST:
        # Only the first iterable is evaluated eagerly; the rest runs whenever the generator is consumed.
        node.generators[0].iter = self.visit(node.generators[0].iter)
        return node


def _split_preamble(body: list[ast.stmt]) -> int:
    """Index of the first statement after a leading docstring and ``from __future__`` imports."""
    i = 0
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        i = 1
    while i < len(body) and isinstance(body[i], ast.ImportFrom) and body[i].module == "__future__":  # type: ignore[attr-defined]
        i += 1
    return i


def _ends_with_semicolon(code: str, stmt: ast.stmt) -> bool:
    """Whether the source has ``;`` right after ``stmt`` (Jupyter's "do not display" marker)."""
    end_line, end_col = stmt.end_lineno, stmt.end_col_offset
    if end_line is None or end_col is None:
        return False
    lines = code.splitlines()
    if end_line - 1 >= len(lines):
        return False
    rest = lines[end_line - 1].encode("utf-8")[end_col:].decode("utf-8", "replace")
    return rest.lstrip().startswith(";")


def _silence(tree: ast.Module) -> ast.Module:
    if not _binds_print(tree):
        tree = _SilencePrints().visit(tree)
    start = _split_preamble(tree.body)
    preamble, rest = tree.body[:start], tree.body[start:]
    if not rest:
        return tree
    # A docstring-only preamble keeps working as a statement; it has no output either way.
    with_stmt = ast.With(
        items=[ast.withitem(context_expr=ast.Call(func=_helper_attr("quiet"), args=[], keywords=[]))],
        body=rest,
    )
    ast.copy_location(with_stmt, rest[0])
    tree.body = [*preamble, _helper_import(), with_stmt]
    return tree


def _display_last(tree: ast.Module, code: str) -> ast.Module:
    if not tree.body:
        return tree
    last = tree.body[-1]
    if not isinstance(last, ast.Expr) or _ends_with_semicolon(code, last):
        return tree
    call = ast.Call(func=_helper_attr("display_value"), args=[last.value], keywords=[])
    new_last = ast.copy_location(ast.Expr(value=ast.copy_location(call, last.value)), last)
    start = _split_preamble(tree.body)
    if start >= len(tree.body):  # the trailing expression is a lone docstring: no future imports exist
        start = 0
    tree.body = [*tree.body[:start], _helper_import(), *tree.body[start:-1], new_last]
    return tree


def compile_cell(
    code: str, *, filename: str = "<cell>", display_last: bool = True, silent: bool = False
) -> types.CodeType:
    """Compile one cell of agent code for ``exec`` in the worker.

    ``display_last``: show a trailing expression's value as a notebook would (see the module docstring).
    ``silent``: replay mode for chunked execution -- no console output at all, no display.
    A ``SyntaxError`` propagates unchanged (with ``filename`` and the user's line numbers): the worker
    reports it to the model as ordinary Python output. Line numbers of the user's statements are kept.
    """
    tree = ast.parse(code, filename=filename, mode="exec")
    if silent:
        tree = _silence(tree)
    elif display_last:
        tree = _display_last(tree, code)
    ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec", dont_inherit=True)


def register_source(code: str, filename: str = "<cell>") -> None:
    """Make ``code`` visible to ``linecache`` so tracebacks of a cell quote its lines like a notebook."""
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)


# --- observation text ---------------------------------------------------------------------------------


def truncate_marker(n_removed: int) -> str:
    """The marker that replaces the middle of a long observation."""
    return f"\n... [{n_removed} characters truncated] ...\n"


#: One piece of an observation: ``(source, text)``, source ``"cell"`` (what the code printed) or
#: ``"harness"`` (a note, a truncation marker, a separator the harness wrote).
Part = tuple[str, str]


def _cut_sizes(text: str, limit: int) -> tuple[int, int, int] | None:
    """``(head, removed, tail)`` for :func:`truncate_observation` (``removed`` < 0: plain head), or None."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if len(text) <= limit:
        return None
    fixed = len(truncate_marker(0)) - 1  # the marker without its digits
    keep = removed = 0
    for digits in range(1, 25):
        keep = limit - fixed - digits
        if keep < 2:
            return limit, -1, 0
        removed = len(text) - keep
        if len(str(removed)) == digits:
            break
        if len(str(removed)) < digits:
            # At a power of ten (999 vs 1000) no count fits exactly: drop one more character.
            keep, removed = keep - 1, removed + 1
            break
    if keep < 2:
        return limit, -1, 0
    head = (keep + 1) // 2
    return head, removed, keep - head


def _cut_parts(text: str, head: int, removed: int, tail: int) -> list[Part]:
    if removed < 0:
        return [("cell", text[:head])]
    parts: list[Part] = [("cell", text[:head]), ("harness", truncate_marker(removed))]
    if tail:
        parts.append(("cell", text[len(text) - tail :]))
    return parts


def truncate_observation_parts(text: str, limit: int = 2048) -> tuple[list[Part], bool]:
    """:func:`truncate_observation` as parts: the cell's head and tail, the harness's marker between."""
    sizes = _cut_sizes(text, limit)
    if sizes is None:
        return [("cell", text)], False
    return _cut_parts(text, *sizes), True


def truncate_observation(text: str, limit: int = 2048) -> tuple[str, bool]:
    """Keep the head and tail of ``text`` so the result is at most ``limit`` characters, marker included.

    Returns ``(text, truncated)``. The budget left after the marker is split evenly (the head gets the odd
    character): the head shows what the code printed first, the tail the final result or traceback. The
    marker counts the characters actually removed. When ``limit`` is too small for a marker plus a
    character of each side, the plain head ``text[:limit]`` is returned. ``limit < 0`` is an error.
    """
    parts, cut = truncate_observation_parts(text, limit)
    return "".join(t for _s, t in parts), cut


def truncate_head_tail_parts(text: str, head: int, tail: int) -> tuple[list[Part], bool]:
    """:func:`truncate_head_tail` as parts (see :func:`truncate_observation_parts`)."""
    if head < 0 or tail < 0:
        raise ValueError(f"head and tail must be >= 0, got head={head}, tail={tail}")
    if len(text) <= head + tail:
        return [("cell", text)], False
    return _cut_parts(text, head, len(text) - head - tail, tail), True


def truncate_head_tail(text: str, head: int, tail: int) -> tuple[str, bool]:
    """Keep the first ``head`` and the last ``tail`` characters of ``text`` with the marker between them.

    Returns ``(text, truncated)``. Unlike :func:`truncate_observation` the two sides are fixed lengths (the
    marker comes on top): SciDataSailor's public code shows the model a head of 4,000 and a tail of 1,500
    characters of every observation, so the start of a long listing and the end of a traceback both
    survive. Text of at most ``head + tail`` characters is returned unchanged.
    """
    parts, cut = truncate_head_tail_parts(text, head, tail)
    return "".join(t for _s, t in parts), cut


#: The tags of the built-in dialects' framing (``tests/protocol`` checks that every registered dialect's
#: tags are here): cell output that writes one is escaped, so it cannot close the observation block or
#: open a turn the model would take for its own or the environment's.
FRAMING_TAGS = ("answer", "code", "interpreter", "python", "result", "think")
_TAG_LIKE = re.compile(r"<(\\*)(/?(?:" + "|".join(FRAMING_TAGS) + r")\s*>)", re.IGNORECASE)
#: A line that reads like a harness note (``[timeout: …]``, ``[note: …]``, ``[the interpreter was
#: restarted: …]``, ``[the process exited …]``) or the truncation marker (``... [N characters truncated] ...``).
_NOTE_LIKE = re.compile(
    r"^([ \t]*)(\\*)(\[(?:[a-z][a-z -]*:|the process exited|the interpreter was restarted)"
    r"|\.\.\. \[\d+ characters truncated\])",
    re.MULTILINE,
)


def escape_cell_text(text: str) -> str:
    """Cell output as the model sees it: what imitates the harness's notes or the framing is escaped.

    A backslash goes before the ``[`` of a line that reads like a harness note (or before the truncation
    marker) and after the ``<`` of a framing tag (``<\\/interpreter>``). Backslashes already there get one
    more, so the escaping is reversible and a cell cannot produce an escaped form that reads as raw.
    Only a harness part of an observation (see :func:`render_parts`) starts a line with a bare note.
    """
    text = _NOTE_LIKE.sub(lambda m: f"{m.group(1)}\\{m.group(2)}{m.group(3)}", text)
    return _TAG_LIKE.sub(lambda m: f"<\\{m.group(1)}{m.group(2)}", text)


def render_parts(parts: list[Part] | list[list[str]]) -> str:
    """The model-visible text of an observation: harness parts as written, cell parts escaped.

    The one rendering of an observation's text: :class:`~datadojo.sandbox.result.ExecResult` and
    ``Observation.text`` hold its result, and the agent loop, the chat messages and the training
    episodes all wrap that same text in the dialect's tags.
    """
    return "".join(text if source == "harness" else escape_cell_text(text) for source, text in parts)


_ANSI_CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def decode_output(data: bytes) -> str:
    """Captured bytes -> text that is safe in a terminal, in JSON and in a prompt.

    Invalid UTF-8 becomes U+FFFD; ANSI colour/cursor sequences are removed; ``\\r\\n`` and lone ``\\r``
    (progress bars) become ``\\n``; every other control character except ``\\n`` and ``\\t`` is shown
    escaped as ``\\xNN`` so binary output is visible but harmless.
    """
    text = data.decode("utf-8", errors="replace")
    text = _ANSI_CSI.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)

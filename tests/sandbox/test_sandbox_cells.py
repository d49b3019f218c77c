"""Cell compilation (notebook display, silent replay), observation truncation and output decoding."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datadojo.sandbox.cells import (
    HELPER_NAME,
    compile_cell,
    decode_output,
    display_value,
    format_value,
    quiet,
    register_source,
    silent_print,
    truncate_head_tail,
    truncate_marker,
    truncate_observation,
)


def run(code: str, ns: dict[str, Any] | None = None, **kw: Any) -> str:
    """Execute a compiled cell, returning everything it wrote to stdout and stderr."""
    ns = {} if ns is None else ns
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        exec(compile_cell(code, **kw), ns)
    return buf.getvalue()


# --- display_last ---------------------------------------------------------------------------------------


def test_trailing_expression_is_displayed() -> None:
    assert run("x = 41\nx + 1") == "42\n"
    assert run("'abc'") == "'abc'\n"  # a string shows its repr, as in Jupyter
    assert run("[1, 2]") == "[1, 2]\n"


def test_none_and_statements_are_not_displayed() -> None:
    assert run("None") == ""
    assert run("x = 5") == ""
    assert run("print('hi')") == "hi\n"  # print returns None: shown once, not twice
    assert run("for i in range(2):\n    i") == ""
    assert run("") == ""
    assert run("# only a comment") == ""


def test_only_the_last_expression_is_displayed() -> None:
    assert run("1\n2\n3") == "3\n"
    assert run("1; 2") == "2\n"


def test_trailing_semicolon_suppresses_display() -> None:
    assert run("x = 1\nx;") == ""
    assert run("x = 1\nx ;  # comment") == ""
    assert run("s = 'a;b'\ns") == "'a;b'\n"


def test_dataframe_display_matches_its_repr() -> None:
    df = pd.DataFrame({"city": ["Brno", "Cork"], "sales": [1.5, 2.25]})
    out = run("import pandas as pd\ndf = pd.DataFrame({'city': ['Brno', 'Cork'], 'sales': [1.5, 2.25]})\ndf")
    assert out == repr(df) + "\n"
    assert run("import pandas as pd\npd.Series([1, 2], name='n')") == repr(pd.Series([1, 2], name="n")) + "\n"


def test_containers_are_pretty_printed() -> None:
    big = {f"key{i}": list(range(10)) for i in range(8)}
    assert format_value(big).count("\n") >= 7  # one entry per line once it does not fit
    assert format_value({"b": 1, "a": 2}) == "{'b': 1, 'a': 2}"  # insertion order kept, like Jupyter
    huge = list(range(100_000))
    assert format_value(huge) == repr(huge)  # too big to lay out: plain repr (it is truncated later anyway)


def test_display_value_direct() -> None:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        display_value(None)
        display_value(3.5)
    assert buf.getvalue() == "3.5\n"


def test_display_can_be_turned_off() -> None:
    assert run("1 + 1", display_last=False) == ""


def test_future_import_and_docstring_kept_valid() -> None:
    assert run("from __future__ import annotations\nx: int = 3\nx") == "3\n"
    assert run('"""doc"""\nfrom __future__ import annotations\n7') == "7\n"
    assert run('"""only a docstring"""') == "'only a docstring'\n"


def test_line_numbers_are_preserved_in_tracebacks() -> None:
    code = "x = 1\ny = 2\n1 / 0\nz = 3\nz"
    ns: dict[str, Any] = {}
    with pytest.raises(ZeroDivisionError) as info:
        exec(compile_cell(code, filename="<cell-7>"), ns)
    frames = [f for f in traceback.extract_tb(info.value.__traceback__) if f.filename == "<cell-7>"]
    assert frames[-1].lineno == 3


def test_error_in_the_displayed_expression_keeps_its_line() -> None:
    with pytest.raises(KeyError) as info:
        exec(compile_cell("d = {}\n\nd['missing']", filename="<c>"), {})
    frames = [f for f in traceback.extract_tb(info.value.__traceback__) if f.filename == "<c>"]
    assert frames[-1].lineno == 3


def test_syntax_error_propagates_with_user_location() -> None:
    with pytest.raises(SyntaxError) as info:
        compile_cell("x = 1\ny = (\n", filename="<cell-3>")
    assert info.value.filename == "<cell-3>"
    assert info.value.lineno == 2


def test_register_source_feeds_tracebacks() -> None:
    code = "a = 1\nraise ValueError('boom')"
    register_source(code, "<cell-rs>")
    try:
        exec(compile_cell(code, filename="<cell-rs>"), {})
    except ValueError:
        text = traceback.format_exc()
    assert "raise ValueError('boom')" in text


def test_compiled_cell_adds_only_one_helper_name() -> None:
    ns: dict[str, Any] = {}
    run("x = 1\nx", ns)
    assert {k for k in ns if k != "__builtins__"} == {"x", HELPER_NAME}


def test_persistent_namespace_across_cells() -> None:
    ns: dict[str, Any] = {}
    assert run("total = 10", ns) == ""
    assert run("total * 2", ns) == "20\n"


# --- silent replay --------------------------------------------------------------------------------------


def test_silent_suppresses_print_and_display() -> None:
    assert run("print('hello')\nx = 5\nx", silent=True) == ""


def test_silent_still_evaluates_print_arguments() -> None:
    ns: dict[str, Any] = {}
    run("xs = [1, 2, 3]\nprint(xs.pop())\nprint('%d' % len(xs))", ns, silent=True)
    assert ns["xs"] == [1, 2]


def test_silent_trailing_expression_is_evaluated_not_shown() -> None:
    ns: dict[str, Any] = {}
    assert run("log = []\nlog.append(1)", ns, silent=True) == ""
    assert ns["log"] == [1]


def test_silent_print_used_as_a_value() -> None:
    assert run("f = print\nf('x')\nlist(map(print, [1, 2]))", silent=True) == ""


def test_silent_print_to_stderr_and_info_and_warnings() -> None:
    """Run in a fresh interpreter: pytest records warnings instead of printing them to stderr."""
    code = (
        "import sys, warnings\n"
        "import pandas as pd\n"
        "print('e', file=sys.stderr)\n"
        "print('o', file=sys.stdout)\n"
        "pd.DataFrame({'a': [1]}).info()\n"
        "warnings.warn('careful')\n"
        "sys.stdout.write('raw')\n"
    )
    driver = (
        "import sys\n"
        "from datadojo.sandbox.cells import compile_cell\n"
        "exec(compile_cell(sys.argv[1], silent=sys.argv[2] == 'silent'), {})\n"
    )

    def run_fresh(mode: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-W", "always", "-c", driver, code, mode],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout + proc.stderr

    assert run_fresh("silent") == ""
    loud = run_fresh("loud")  # control: the same chunk, not silent, writes all of it
    assert "e\n" in loud and "o\n" in loud and "RangeIndex" in loud and "careful" in loud and "raw" in loud


def test_silent_print_to_a_file_still_writes_it(tmp_path: Path) -> None:
    target = tmp_path / "rows.txt"
    code = f"with open({str(target)!r}, 'w') as fh:\n    for i in range(3):\n        print('row', i, file=fh)\nprint('done')"
    assert run(code, silent=True) == ""
    assert target.read_text() == "row 0\nrow 1\nrow 2\n"


def test_silent_print_under_redirect_stdout_to_a_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    code = (
        "import contextlib\n"
        f"with open({str(target)!r}, 'w') as fh, contextlib.redirect_stdout(fh):\n"
        "    print('into the file')\n"
    )
    assert run(code, silent=True) == ""
    assert target.read_text() == "into the file\n"


def test_functions_defined_in_a_replayed_chunk_print_later() -> None:
    """A print inside a def runs later, possibly in a non-silent cell: it must not be rewritten."""
    ns: dict[str, Any] = {}
    assert run("def show(x):\n    print('show', x)\nshow(1)\ng = lambda: print('lam')", ns, silent=True) == ""
    assert run("show(2)\ng()", ns) == "show 2\nlam\n"


def test_generator_created_in_replay_prints_when_consumed_later() -> None:
    ns: dict[str, Any] = {}
    run("gen = (print(i) for i in range(2))", ns, silent=True)
    assert run("list(gen);", ns) == "0\n1\n"


def test_decorators_and_defaults_are_silenced() -> None:
    assert run("def f(x=print('default')):\n    return x", silent=True) == ""


def test_chunk_that_rebinds_print_is_not_rewritten() -> None:
    ns: dict[str, Any] = {}
    code = "seen = []\ndef print(*a):\n    seen.append(a)\nprint(1, 2)"
    assert run(code, ns, silent=True) == ""
    assert ns["seen"] == [(1, 2)]  # the user's own print ran


def test_silent_replay_then_new_chunk_shows_only_new_output() -> None:
    """The chunked-mode contract: replay earlier chunks silently, then show the new chunk's output."""
    chunks = [
        "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})\nprint(df.shape)\ndf",
        "df['a'].sum()",
    ]
    ns: dict[str, Any] = {}
    out = "".join(run(c, ns, silent=True) for c in chunks[:-1]) + run(chunks[-1], ns)
    assert out == repr(pd.Series([1, 2, 3]).sum()) + "\n"  # the numpy scalar's repr, as Jupyter shows it


def test_silent_replay_restores_streams_after_an_error() -> None:
    before = (sys.stdout, sys.stderr)
    with pytest.raises(ZeroDivisionError):
        exec(compile_cell("print('x')\n1/0", silent=True), {})
    assert (sys.stdout, sys.stderr) == before


def test_silent_future_import_still_first() -> None:
    assert run("from __future__ import annotations\nprint('x')", silent=True) == ""


def test_silent_star_import_inside_quiet_block() -> None:
    ns: dict[str, Any] = {}
    assert run("from math import *\nprint(pi)", ns, silent=True) == ""
    assert "sqrt" in ns


def test_silent_print_helper_directly(tmp_path: Path) -> None:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        silent_print("nothing")  # console without quiet(): suppressed
    assert buf.getvalue() == ""
    fh = io.StringIO()
    silent_print("a", "b", sep="-", end="!", file=fh)
    assert fh.getvalue() == "a-b!"
    with quiet():
        silent_print("x", file=sys.__stdout__)
        print("hidden")
    sink = io.StringIO()
    with quiet(), contextlib.redirect_stdout(sink):
        silent_print("kept")
    assert sink.getvalue() == "kept\n"


def test_quiet_sink_accepts_binary_and_isatty() -> None:
    with quiet():
        assert sys.stdout.buffer.write(b"\x00\xff") == 2
        assert sys.stdout.isatty() is False
        assert sys.stdout.write("abc") == 3


# --- truncation -----------------------------------------------------------------------------------------


def test_short_text_untouched() -> None:
    assert truncate_observation("abc", 10) == ("abc", False)
    assert truncate_observation("a" * 2048) == ("a" * 2048, False)


def test_truncation_keeps_head_tail_and_counts_removed() -> None:
    text = "".join(f"line {i}\n" for i in range(1000))
    out, truncated = truncate_observation(text, 300)
    assert truncated and len(out) <= 300
    m = re.search(r"\n\.\.\. \[(\d+) characters truncated\] \.\.\.\n", out)
    assert m is not None
    head, tail = out[: m.start()], out[m.end() :]
    assert text.startswith(head) and text.endswith(tail)
    assert int(m.group(1)) == len(text) - len(head) - len(tail)
    assert abs(len(head) - len(tail)) <= 1
    assert out.startswith("line 0\n") and out.endswith("line 999\n")


def test_truncation_marker_format() -> None:
    assert truncate_marker(12345) == "\n... [12345 characters truncated] ...\n"


def test_tiny_limits() -> None:
    assert truncate_observation("abcdef", 0) == ("", True)
    assert truncate_observation("abcdefghijklmnopqrstuvwxyz" * 3, 10) == ("abcdefghij", True)
    with pytest.raises(ValueError, match="limit"):
        truncate_observation("x", -1)


def test_truncation_at_digit_boundary() -> None:
    """Where the removed count crosses a power of ten the result still fits and the count is exact."""
    fixed = len(truncate_marker(0)) - 1
    limit = 100
    for n in range(limit + 1, limit + 2000):
        text = "x" * n
        out, _ = truncate_observation(text, limit)
        assert len(out) <= limit
        m = re.search(r"\[(\d+) characters truncated\]", out)
        assert m is not None
        assert int(m.group(1)) == n - (len(out) - fixed - len(m.group(1)))


@settings(max_examples=400, deadline=None)
@given(st.text(), st.integers(min_value=0, max_value=5000))
def test_truncation_properties(text: str, limit: int) -> None:
    out, truncated = truncate_observation(text, limit)
    assert len(out) <= limit
    assert truncated == (len(text) > limit)
    if not truncated:
        assert out == text
        return
    m = re.search(r"\n\.\.\. \[(\d+) characters truncated\] \.\.\.\n", out)
    if m is None:  # limit too small for a marker: plain head
        assert out == text[:limit]
        return
    head, tail = out[: m.start()], out[m.end() :]
    assert text.startswith(head) and text.endswith(tail)
    assert int(m.group(1)) == len(text) - len(head) - len(tail)


# --- decoding -------------------------------------------------------------------------------------------


def test_decode_invalid_utf8_and_binary() -> None:
    out = decode_output(b"ok \xff\xfe caf\xc3\xa9 \x00\x01\x7f")
    assert "\ufffd" in out and "café" in out
    assert "\\x00" in out and "\\x01" in out and "\\x7f" in out
    assert "\x00" not in out


def test_decode_keeps_newlines_tabs_and_strips_ansi() -> None:
    assert decode_output(b"a\tb\nc") == "a\tb\nc"
    assert decode_output(b"\x1b[31mred\x1b[0m plain") == "red plain"
    assert decode_output(b"\x1b]0;title\x07text") == "text"
    assert decode_output(b"10%\r50%\r100%\r\n") == "10%\n50%\n100%\n"
    assert decode_output("\u0085".encode()) == "\\x85"  # C1 control (NEL)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_decode_output_is_always_safe(data: bytes) -> None:
    out = decode_output(data)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", out)
    json.loads(json.dumps(out))  # representable in JSON
    out.encode("utf-8")  # no lone surrogates


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_compile_cell_never_crashes_unexpectedly(text: str) -> None:
    """Arbitrary text either compiles (in both modes) or raises SyntaxError/ValueError, never anything else."""
    try:
        compile_cell(text)
        compile_cell(text, silent=True)
    except (SyntaxError, ValueError):
        pass


def test_head_tail_truncation_keeps_fixed_sides() -> None:
    """SciDataSailor's truncation: exactly ``head`` characters, the marker, exactly ``tail`` characters."""
    text = "".join(f"{i:05d}\n" for i in range(2000))  # 12,000 characters
    out, truncated = truncate_head_tail(text, 4000, 1500)
    marker = truncate_marker(len(text) - 5500)
    assert truncated and out == text[:4000] + marker + text[-1500:]
    assert truncate_head_tail(text[:5500], 4000, 1500) == (text[:5500], False)
    assert truncate_head_tail("abcdef", 2, 0) == ("ab" + truncate_marker(4), True)
    with pytest.raises(ValueError, match="head"):
        truncate_head_tail("x", -1, 3)


@settings(max_examples=200, deadline=None)
@given(st.text(), st.integers(min_value=0, max_value=300), st.integers(min_value=0, max_value=300))
def test_head_tail_properties(text: str, head: int, tail: int) -> None:
    out, truncated = truncate_head_tail(text, head, tail)
    assert truncated == (len(text) > head + tail)
    if not truncated:
        assert out == text
        return
    m = re.search(r"\n\.\.\. \[(\d+) characters truncated\] \.\.\.\n", out)
    assert m is not None and m.start() == head
    assert out[:head] == text[:head] and out[m.end() :] == text[len(text) - tail :]
    assert int(m.group(1)) == len(text) - head - tail

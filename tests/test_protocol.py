"""Tag protocol: parsing, error messages, formatting, completion, answers, validation, and properties."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from datadojo.protocol import (
    DATAMIND,
    SAILOR,
    CodeTag,
    Dialect,
    default_language_for_task,
    dialect_names,
    find_boxed,
    get_dialect,
    guess_language,
    register_dialect,
    unwrap_boxed,
    validate_trajectory,
)
from datadojo.protocol.code import canonical_code
from datadojo.types import Action, DataFile, Observation, Task, Trajectory

DIALECTS = [DATAMIND, SAILOR]


def code_tag(d: Dialect) -> str:
    return d.code_tags[0].name


def turn(d: Dialect, think: str | None, body: str, tag: str | None = None) -> str:
    tag = tag or code_tag(d)
    head = f"<think>{think}</think>\n" if think is not None else ""
    return f"{head}<{tag}>\n{body}\n</{tag}>"


# --------------------------------------------------------------------------------------------
# valid turns


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
@pytest.mark.parametrize("strict", [False, True])
def test_valid_code_turn(d: Dialect, strict: bool) -> None:
    p = d.parse_turn(turn(d, "Load the file.", "import pandas as pd\nprint(pd.__version__)"), strict=strict)
    assert p.ok and p.error is None and p.errors == () and p.warnings == ()
    assert (p.kind, p.language) == ("code", "python")
    assert p.thought == "Load the file."
    assert p.text == "import pandas as pd\nprint(pd.__version__)"
    assert p.action == Action(kind="code", text=p.text)


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_valid_answer_turn(d: Dialect) -> None:
    p = d.parse_turn("<think>Done.</think>\n<answer>\n  42 rows\n</answer>\n", strict=True)
    assert p.ok and (p.kind, p.text, p.thought, p.language) == ("answer", "42 rows", "Done.", None)


def test_code_is_dedented_and_blank_lines_dropped() -> None:
    p = DATAMIND.parse_turn("<think>t</think><code>\n\n    x = 1\n    if x:\n        print(x)\n   \n</code>")
    assert p.text == "x = 1\nif x:\n    print(x)"


def test_to_turn_keeps_raw_and_marks_void() -> None:
    bad = "<think>t</think><code>print(1)"
    t = DATAMIND.parse_turn(bad).to_turn()
    assert t.raw == bad and t.void and t.action.kind == "invalid" and t.action.text == ""
    assert t.invalid_reason == "Unclosed <code> tag: add </code> after your code."
    good = DATAMIND.parse_turn(turn(DATAMIND, "t", "print(1)")).to_turn(Observation(text="1"), void=False)
    assert not good.void and good.observation is not None and good.invalid_reason is None


# --------------------------------------------------------------------------------------------
# every error kind, both dialects


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
@pytest.mark.parametrize("strict", [False, True])
def test_unclosed_code_tag(d: Dialect, strict: bool) -> None:
    c = code_tag(d)
    p = d.parse_turn(f"<think>t</think>\n<{c}>\nprint(1)\n", strict=strict)
    assert p.kind == "invalid" and p.text == ""
    assert p.errors == (f"Unclosed <{c}> tag: add </{c}> after your code.",)


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_unclosed_answer_tag(d: Dialect) -> None:
    p = d.parse_turn("<think>t</think><answer>42")
    assert p.errors == ("Unclosed <answer> tag: add </answer> after your final answer.",)


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_two_actions_names_both_offsets(d: Dialect) -> None:
    c = code_tag(d)
    text = f"<think>t</think>\n<{c}>print(1)</{c}>\nthen\n<answer>1</answer>"
    p = d.parse_turn(text)
    i, j = text.index(f"<{c}>"), text.index("<answer>")
    assert p.kind == "invalid"
    assert p.errors[0] == (
        f"Two actions in one turn (<{c}> at char {i} and <answer> at char {j}): "
        f"write exactly one <{c}> or <answer> per turn."
    )


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_three_actions(d: Dialect) -> None:
    c = code_tag(d)
    text = f"<{c}>a=1</{c}><{c}>b=2</{c}><answer>3</answer>"
    p = d.parse_turn(text)
    assert p.errors[0].startswith(f"3 actions in one turn (<{c}> at char 0, <{c}> at char ")
    assert f"and <answer> at char {text.index('<answer>')})" in p.errors[0]


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
@pytest.mark.parametrize("strict", [False, True])
def test_no_action(d: Dialect, strict: bool) -> None:
    c = code_tag(d)
    p = d.parse_turn("<think>I will look at the data.</think>", strict=strict)
    assert p.kind == "invalid"
    assert p.errors == (
        f"No action: write your code inside <{c}>…</{c}> or your final answer inside <answer>…</answer>.",
    )
    assert p.thought == "I will look at the data."


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_text_outside_tags_is_a_warning_when_lenient_and_an_error_when_strict(d: Dialect) -> None:
    c = code_tag(d)
    text = f"Let me inspect the columns first, then decide.\n<{c}>\nprint(1)\n</{c}>"
    msg = (
        "Text outside tags: 'Let me inspect the columns first, then…' (chars 0-46); "
        "put reasoning inside <think>…</think>."
    )
    lenient = d.parse_turn(text)
    assert lenient.ok and lenient.text == "print(1)"
    assert lenient.warnings == (msg,)
    assert lenient.thought == "Let me inspect the columns first, then decide."  # the text before the action
    strict = d.parse_turn(text, strict=True)
    assert strict.kind == "invalid" and msg in strict.errors
    assert "No <think> block: start the turn with your reasoning inside <think>…</think>." in strict.errors


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_text_after_action_counts_places(d: Dialect) -> None:
    c = code_tag(d)
    text = f"Hmm.<think>t</think><{c}>x=1</{c}>Now run it."
    p = d.parse_turn(text)
    assert p.ok
    assert p.warnings == (
        "Text outside tags: 'Hmm.' (chars 0-4) and 1 more place(s); put reasoning inside <think>…</think>.",
    )


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_unclosed_think(d: Dialect) -> None:
    c = code_tag(d)
    msg = "Unclosed <think> tag: add </think> after your reasoning."
    with_action = f"<think>plan\n<{c}>x=1</{c}>"
    lenient = d.parse_turn(with_action)
    assert lenient.ok and lenient.thought == "plan" and lenient.warnings == (msg,)
    assert d.parse_turn(with_action, strict=True).errors == (msg,)
    alone = d.parse_turn("<think>plan and plan")
    assert alone.kind == "invalid" and alone.errors[0] == msg and len(alone.errors) == 2  # + no action


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_stray_closing_think_is_template_opened_reasoning(d: Dialect) -> None:
    text = "The sum is 10.\n</think>\n<answer>10</answer>"
    p = d.parse_turn(text)
    assert p.ok and p.thought == "The sum is 10." and p.text == "10"
    assert p.warnings == (
        "</think> at char 15 has no opening <think>: took the text before it as your reasoning.",
    )
    s = d.parse_turn(text, strict=True)
    assert (
        "Stray </think> at char 15 with no opening <think>: open the block with <think> before closing it."
        in s.errors
    )


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_stray_action_closer_is_an_error(d: Dialect) -> None:
    c = code_tag(d)
    text = f"<think>t</think>print(1)\n</{c}>"
    p = d.parse_turn(text)
    assert p.kind == "invalid"
    assert p.errors[0] == (
        f"Stray </{c}> at char {text.rindex('</')} with no opening <{c}>: open the block with <{c}> before closing it."
    )


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
@pytest.mark.parametrize("strict", [False, True])
def test_tag_nested_in_action(d: Dialect, strict: bool) -> None:
    c = code_tag(d)
    text = f"<think>t</think><{c}>x = 1\n<answer>1</answer></{c}>"
    p = d.parse_turn(text, strict=strict)
    assert p.kind == "invalid"
    assert p.errors == (
        f"Tag <answer> inside <{c}> (char {text.index('<answer>')}): "
        f"close </{c}> before starting another block, and do not write tags inside it.",
    )


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_tag_mentioned_in_think_only_fails_strict(d: Dialect) -> None:
    c = code_tag(d)
    text = f"<think>I will use a <{c}> block.</think><{c}>x=1</{c}>"
    assert d.parse_turn(text).ok
    assert d.parse_turn(text, strict=True).errors[0].startswith(f"Tag <{c}> inside <think> (char 20)")


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_empty_actions(d: Dialect) -> None:
    c = code_tag(d)
    assert d.parse_turn(f"<think>t</think><{c}>\n  \n</{c}>").errors == (
        f"<{c}> is empty: write the code to run between <{c}> and </{c}>.",
    )
    assert d.parse_turn("<think>t</think><answer> </answer>").errors == (
        "<answer> is empty: write your final answer between <answer> and </answer>.",
    )


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_model_written_observation(d: Dialect) -> None:
    c, o = code_tag(d), d.observation
    text = f"<think>t</think><{c}>print(1)</{c}>\n<{o}>\n1\n</{o}>"
    msg = (
        f"You wrote an <{o}> block (char {text.index(f'<{o}>')}): only the environment writes <{o}>; "
        "stop after your action and wait for it."
    )
    lenient = d.parse_turn(text)
    assert lenient.ok and lenient.text == "print(1)" and lenient.warnings == (msg,)
    assert d.parse_turn(text, strict=True).errors == (msg,)


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_two_thinks_and_think_after_action(d: Dialect) -> None:
    c = code_tag(d)
    two = f"<think>a</think><think>b</think><{c}>x=1</{c}>"
    p = d.parse_turn(two)
    assert p.ok and p.thought == "a\n\nb"
    assert p.warnings == (
        "2 <think> blocks (at chars 0 and 16): write one <think> block per turn, before the action.",
    )
    assert d.parse_turn(two, strict=True).kind == "invalid"
    after = f"<{c}>x=1</{c}><think>why</think>"
    q = d.parse_turn(after)
    assert q.ok
    at = after.index("<think>")
    assert q.warnings == (f"<think> at char {at} comes after the <{c}> action: reason first, then act.",)
    assert d.parse_turn(after, strict=True).errors == q.warnings


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_missing_think_is_fine_lenient(d: Dialect) -> None:
    p = d.parse_turn("<answer>7</answer>")
    assert p.ok and p.thought is None and p.warnings == ()
    assert d.parse_turn("<answer>7</answer>", strict=True).errors == (
        "No <think> block: start the turn with your reasoning inside <think>…</think>.",
    )


# --------------------------------------------------------------------------------------------
# code fences and languages


@pytest.mark.parametrize("fence", ["sql", "SQL", "sqlite", "postgresql"])
def test_datamind_sql_fence(fence: str) -> None:
    p = DATAMIND.parse_turn(
        f"<think>t</think>\n<code>\n```{fence}\nSELECT name\nFROM t;\n```\n</code>", strict=True
    )
    assert (p.kind, p.language, p.text) == ("sql", "sql", "SELECT name\nFROM t;")
    assert p.action == Action(kind="sql", text="SELECT name\nFROM t;")


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
@pytest.mark.parametrize("fence", ["python", "py", ""])
def test_python_and_bare_fences(d: Dialect, fence: str) -> None:
    c = code_tag(d)
    p = d.parse_turn(f"<think>t</think><{c}>```{fence}\nprint(1)\n```</{c}>", strict=True)
    assert (p.kind, p.language, p.text) == ("code", "python", "print(1)")


def test_unknown_fence_language_is_an_error() -> None:
    p = DATAMIND.parse_turn("<think>t</think><code>\n```bash\nls\n```\n</code>")
    assert p.errors == ("```bash fence inside <code>: <code> runs python or sql only.",)


def test_sql_fence_in_sailor_python_is_an_error() -> None:
    p = SAILOR.parse_turn("<think>t</think><python>\n```sql\nSELECT 1\n```\n</python>")
    assert p.errors == (
        "```sql fence inside <python>: <python> runs python only; write python code instead.",
    )


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_fence_problems_lenient_vs_strict(d: Dialect) -> None:
    c = code_tag(d)
    unclosed = f"<think>t</think><{c}>\n```python\nprint(1)\n</{c}>"
    msg = f"Unclosed ``` fence inside <{c}>: end the fenced code with a ``` line."
    p = d.parse_turn(unclosed)
    assert p.ok and p.text == "print(1)" and p.warnings == (msg,)
    assert d.parse_turn(unclosed, strict=True).errors == (msg,)

    around = f"<think>t</think><{c}>\nHere it is:\n```python\nprint(2)\n```\n</{c}>"
    msg = f"Text around the ``` fence inside <{c}>: put only code inside <{c}>…</{c}>."
    p = d.parse_turn(around)
    assert p.ok and p.text == "print(2)" and p.warnings == (msg,)
    assert d.parse_turn(around, strict=True).errors == (msg,)

    closer = f"<think>t</think><{c}>\nprint(3)\n```\n</{c}>"
    p = d.parse_turn(closer)
    assert p.ok and p.text == "print(3)"
    assert p.warnings == (f"A closing ``` inside <{c}> has no opening fence: remove it.",)

    two = f"<think>t</think><{c}>\n```python\na=1\n```\n```python\nb=2\n```\n</{c}>"
    assert d.parse_turn(two).errors == (
        f"Several fenced blocks inside one <{c}> (4 ``` lines): put a single block of code in each <{c}>.",
    )


def test_lone_fence_line_in_middle_is_code() -> None:
    code = 'doc = """\n```\n"""\nprint(doc)'
    p = DATAMIND.parse_turn(f"<think>t</think><code>\n{code}\n</code>", strict=True)
    assert p.ok and p.text == code


def test_default_language_hook() -> None:
    text = "<think>t</think><code>\nSELECT COUNT(*) FROM orders\n</code>"
    assert DATAMIND.parse_turn(text).kind == "code"  # python by default: the sandbox will report the error
    assert DATAMIND.parse_turn(text, default_language="sql").kind == "sql"
    assert DATAMIND.parse_turn(text, default_language="auto").kind == "sql"
    py = "<think>t</think><code>\nselect = [1, 2]\nprint(select)\n</code>"
    assert DATAMIND.parse_turn(py, default_language="auto").kind == "code"
    fenced = "<think>t</think><code>\n```python\nprint(1)\n```\n</code>"
    assert DATAMIND.parse_turn(fenced, default_language="sql").kind == "code"  # the fence wins
    sailor = text.replace("code>", "python>")
    assert SAILOR.parse_turn(sailor, default_language="auto").kind == "code"  # sailor runs python only
    with pytest.raises(ValueError, match="cannot run 'sql'"):
        SAILOR.parse_turn(sailor, default_language="sql")


def test_guess_language() -> None:
    assert guess_language("-- count\nSELECT 1") == "sql"
    assert guess_language("/* c */ WITH a AS (SELECT 1) SELECT * FROM a") == "sql"
    assert guess_language("import sqlite3\nprint(1)") == "python"
    assert guess_language("select(1)") == "python"  # valid Python, even if it reads like SQL
    assert guess_language("SELECT 1", ("python",)) == "python"


def test_default_language_for_task(tmp_path) -> None:
    db = DataFile(path="shop.sqlite")
    csv = DataFile(path="sales.csv")
    assert default_language_for_task(Task(id="a", question="q", files=[db])) == "auto"
    assert default_language_for_task(Task(id="b", question="q", files=[db, csv])) == "python"
    assert default_language_for_task(Task(id="c", question="q")) == "python"


def test_canonical_code_keeps_blank_lines_inside() -> None:
    assert canonical_code("\n\n  a = 1\n   \n  b = 2  \n\n") == "a = 1\n   \nb = 2"


# --------------------------------------------------------------------------------------------
# formatting, completion, observations, answers


def test_format_turn_layouts() -> None:
    assert DATAMIND.format_turn("plan", Action(kind="code", text="print(1)")) == (
        "<think>\nplan\n</think>\n<code>\nprint(1)\n</code>"
    )
    assert (
        DATAMIND.format_turn(None, Action(kind="sql", text="SELECT 1"))
        == "<code>\n```sql\nSELECT 1\n```\n</code>"
    )
    assert SAILOR.format_turn("x", Action(kind="answer", text="\\boxed{3}")) == (
        "<think>\nx\n</think>\n<answer>\\boxed{3}</answer>"
    )
    with pytest.raises(ValueError, match="no tag that runs sql"):
        SAILOR.format_turn(None, Action(kind="sql", text="SELECT 1"))
    with pytest.raises(ValueError, match="kind 'invalid'"):
        DATAMIND.format_turn(None, Action(kind="invalid"))


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_complete_turn(d: Dialect) -> None:
    c, o = code_tag(d), d.observation
    cut = f"<think>t</think>\n<{c}>\nprint(1)\n"
    done = d.complete_turn(cut, f"</{c}>")
    assert done == cut + f"</{c}>" and d.parse_turn(done, strict=True).ok
    assert d.complete_turn(cut) == done  # stop string unknown: inferred from the open block
    assert d.complete_turn(done, f"</{c}>") == done  # idempotent / stop string already included
    assert d.complete_turn(cut, "</answer>") == cut  # the stop does not close this block
    assert d.complete_turn(cut, f"<{o}>") == cut  # stopped before an environment block: nothing cut
    answer = "<think>t</think><answer>5"
    assert d.complete_turn(answer, "</answer>") == answer + "</answer>"
    assert d.complete_turn("<think>no action yet") == "<think>no action yet"
    assert d.parse_turn(cut).errors == (f"Unclosed <{c}> tag: add </{c}> after your code.",)


def test_stop_sequences() -> None:
    assert DATAMIND.stop_sequences == ("</code>", "</answer>", "<interpreter>")
    assert SAILOR.stop_sequences == ("</python>", "</answer>", "<result>")


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_observation_round_trip_and_errors(d: Dialect) -> None:
    o = d.observation
    for text in ["", "1", "\n\nx", "  x\n  y  ", f"prints </{o}> and <{o}>"]:
        wrapped = d.format_observation(text)
        assert wrapped.startswith(f"<{o}>\n") and wrapped.endswith(f"\n</{o}>")
        assert d.is_observation(wrapped) and d.parse_observation(wrapped) == text
    # program output ends with a line break: no blank line before the closing tag
    assert d.format_observation("240\n") == f"<{o}>\n240\n</{o}>"
    assert d.parse_observation(d.format_observation("a\r\n\n")) == "a"
    assert d.parse_observation(f"<{o}>inline</{o}>") == "inline"
    with pytest.raises(ValueError, match=f"must be wrapped in <{o}>"):
        d.parse_observation("plain text")


def test_extract_answer() -> None:
    assert (
        SAILOR.extract_answer("<think>t</think><answer>The mean is \\boxed{\\frac{1}{2}}.</answer>")
        == "\\frac{1}{2}"
    )
    assert SAILOR.extract_answer("\\boxed{\\{1, 2\\}}") == "\\{1, 2\\}"
    assert SAILOR.extract_answer("first \\boxed{1} then \\boxed{ 2 }") == "2"
    assert SAILOR.extract_answer("<answer>\\boxed{unbalanced</answer>") == "\\boxed{unbalanced"
    assert SAILOR.extract_answer("<answer>plain</answer>") == "plain"
    assert (
        DATAMIND.extract_answer("<answer>\\boxed{4}</answer>") == "\\boxed{4}"
    )  # datamind answers are not boxed
    assert DATAMIND.extract_answer("  just text ") == "just text"


def test_boxed_helpers() -> None:
    assert find_boxed("a \\boxed{x{y}} b \\fbox {z}") == [(2, 14, "x{y}"), (17, 26, "z")]
    assert unwrap_boxed("no box") == "no box"


def test_sailor_boxed_answer_outside_tags_lenient_only() -> None:
    text = "<think>t</think>\nSo the answer is \\boxed{12}."
    p = SAILOR.parse_turn(text)
    assert (p.kind, p.text) == ("answer", "\\boxed{12}")
    assert "Final answer given as \\boxed{} outside <answer>: wrap it in <answer>…</answer>." in p.warnings
    assert SAILOR.extract_answer(p.text) == "12"
    assert SAILOR.parse_turn(text, strict=True).kind == "invalid"
    assert DATAMIND.parse_turn(text).kind == "invalid"


# --------------------------------------------------------------------------------------------
# registry


def test_registry() -> None:
    assert set(dialect_names()) >= {"datamind", "sailor"}
    assert get_dialect("DataMind") is DATAMIND and get_dialect("scidatasailor") is SAILOR
    assert get_dialect(SAILOR) is SAILOR
    with pytest.raises(ValueError, match=r"unknown dialect 'nope'; known: .*datamind.*sailor"):
        get_dialect("nope")
    with pytest.raises(ValueError, match="already registered"):
        register_dialect(Dialect(name="datamind", code_tags=(CodeTag("code"),), observation="out"))
    custom = Dialect(name="test-sqlonly", code_tags=(CodeTag("sql", ("sql",)),), observation="rows")
    register_dialect(custom)
    assert get_dialect("test-sqlonly") is custom
    assert custom.format_turn(None, Action(kind="sql", text="SELECT 1")) == "<sql>\nSELECT 1\n</sql>"
    assert custom.parse_turn("<sql>SELECT 1</sql>").kind == "sql"


def test_dialect_rejects_bad_tags() -> None:
    with pytest.raises(ValueError, match="distinct identifiers"):
        Dialect(name="x", code_tags=(CodeTag("think"),), observation="o")
    with pytest.raises(ValueError, match="languages must be"):
        CodeTag("code", ("bash",))


# --------------------------------------------------------------------------------------------
# whole-trajectory validation


def messages(d: Dialect, *steps: str) -> list[dict]:
    out = [{"role": "system", "content": "sys"}, {"role": "user", "content": "question"}]
    for s in steps:
        if s.startswith("OBS:"):
            out.append({"role": "user", "content": d.format_observation(s[4:])})
        else:
            out.append({"role": "assistant", "content": s})
    return out


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_validate_valid(d: Dialect) -> None:
    ms = messages(d, turn(d, "look", "print(1)"), "OBS:1", "<think>ok</think>\n<answer>1</answer>")
    assert validate_trajectory(ms, d) == []
    assert validate_trajectory(ms, d.name) == []


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_validate_each_violation(d: Dialect) -> None:
    c, o = code_tag(d), d.observation
    code = turn(d, "look", "print(1)")
    answer = "<think>ok</think><answer>1</answer>"
    assert validate_trajectory(messages(d, code, answer), d) == [
        f"message 2 (turn 1): the <{c}> block is not followed by its <{o}>…</{o}> observation"
    ]
    ms = messages(d, code, "OBS:1", answer)
    ms[3]["content"] = "1"
    assert validate_trajectory(ms, d) == [
        f"message 3: the observation of turn 1 must be wrapped in <{o}>…</{o}>"
    ]
    assert validate_trajectory(messages(d, code, "OBS:1"), d) == [
        "no final answer: the trajectory must end with <answer>…</answer>"
    ]
    assert validate_trajectory(messages(d, answer, answer), d) == [
        "2 final answers (turns 1, 2): give exactly one <answer>, in the last turn"
    ]
    assert validate_trajectory(messages(d, answer, code, "OBS:1"), d) == [
        "the final answer (turn 1, message 2) is not last: 2 message(s) follow it"
    ]
    sloppy = validate_trajectory(messages(d, "I think.\n" + code, "OBS:1", answer), d)
    assert sloppy == [
        "message 2 (turn 1): Text outside tags: 'I think.' (chars 0-8); put reasoning inside <think>…</think>."
    ]
    chatty = messages(d, code, "OBS:1", answer)
    chatty.insert(4, {"role": "user", "content": "hurry up"})
    assert validate_trajectory(chatty, d) == [
        f"message 4: a user message; after the prompt only assistant turns and their <{o}>…</{o}> may follow"
    ]


def test_validate_feedback_after_invalid_turn_is_attributed_to_it() -> None:
    d = DATAMIND
    ms = messages(
        d, "<think>t</think><code>x", "OBS:Unclosed <code> tag", "<think>ok</think><answer>1</answer>"
    )
    assert validate_trajectory(ms, d) == [
        "message 2 (turn 1): Unclosed <code> tag: add </code> after your code."
    ]


def test_validate_trajectory_object_and_bad_inputs() -> None:
    d = SAILOR
    t1 = d.parse_turn(turn(d, "look", "print(1)")).to_turn(Observation(text="1"))
    t2 = d.parse_turn("<think>ok</think><answer>\\boxed{1}</answer>").to_turn()
    traj = Trajectory(task_id="t", dialect="sailor", turns=[t1, t2], stop_reason="answer")
    assert validate_trajectory(traj) == []
    # the cut closing tag of a stop sequence is completed before validating
    t1_cut = t1.model_copy(update={"raw": t1.raw.removesuffix("</python>")})
    assert validate_trajectory(traj.model_copy(update={"turns": [t1_cut, t2]})) == []
    assert validate_trajectory(traj.model_copy(update={"turns": [t2, t1]})) == [
        "the final answer (turn 1, message 0) is not last: 2 message(s) follow it"
    ]
    with pytest.raises(ValueError, match="give the dialect"):
        validate_trajectory([{"role": "user", "content": "q"}])
    assert validate_trajectory([{"role": "user", "content": None}], d) == [
        "message 0: content must be a string, got NoneType"
    ]
    assert validate_trajectory([{"role": "user", "content": "q"}], d) == [
        "no assistant turn: the trajectory has only prompt messages"
    ]


# --------------------------------------------------------------------------------------------
# properties (hypothesis)

FAST = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow]
)


def _tagless(d: Dialect):
    pattern = re.compile(r"</?(" + "|".join(d.tag_names) + r")>")
    return st.text(min_size=1, max_size=60).map(str.strip).filter(lambda s: bool(s) and not pattern.search(s))


def _code_strings(d: Dialect):
    # no backticks: a line of ``` would be read as a fence; no \boxed: irrelevant here
    return _tagless(d).filter(lambda s: "`" not in s)


@st.composite
def valid_turn(draw, d: Dialect):
    thought = draw(st.none() | _tagless(d))
    kinds = ["code", "answer"] + (["sql"] if d is DATAMIND else [])
    kind = draw(st.sampled_from(kinds))
    text = draw(_code_strings(d) if kind != "answer" else _tagless(d))
    return thought, Action(kind=kind, text=text)


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_property_format_parse_round_trip(d: Dialect) -> None:
    @FAST
    @given(valid_turn(d))
    def check(parts: tuple[str | None, Action]) -> None:
        thought, action = parts
        text = d.format_turn(thought, action)
        p = d.parse_turn(text, strict=thought is not None)
        assert p.ok, p.errors
        assert p.thought == thought and p.action == action and p.warnings == ()
        assert d.format_turn(p.thought, p.action) == text  # format(parse(x)) == x
        assert d.complete_turn(text) == text

    check()


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_property_arbitrary_text_never_crashes(d: Dialect) -> None:
    fragments = st.sampled_from(
        [f"<{n}>" for n in d.tag_names]
        + [f"</{n}>" for n in d.tag_names]
        + ["```sql\n", "```\n", "\\boxed{", "}", "\n"]
    )
    texts = st.text() | st.lists(fragments | st.text(max_size=8), max_size=12).map("".join)

    @FAST
    @given(texts, st.booleans(), st.sampled_from([None, "auto", "python"]))
    def check(text: str, strict: bool, lang: str | None) -> None:
        p = d.parse_turn(text, strict=strict, default_language=lang)
        assert p.ok == (not p.errors)
        assert p.raw == text
        if p.ok:
            assert p.kind != "invalid" and p.text
        else:
            assert p.text == "" and p.error
        d.extract_answer(text)
        done = d.complete_turn(text)
        assert d.complete_turn(done) == done
        validate_trajectory([{"role": "assistant", "content": text}], d)

    check()


def test_property_validate_never_crashes() -> None:
    role = st.sampled_from(["system", "user", "assistant", "tool", None])
    content = st.text(max_size=40) | st.none() | st.integers()
    msg = st.fixed_dictionaries({"role": role, "content": content})

    @FAST
    @given(st.lists(msg, max_size=6), st.sampled_from(DIALECTS))
    def check(ms: list[dict], d: Dialect) -> None:
        problems = validate_trajectory(ms, d)
        assert isinstance(problems, list) and all(isinstance(p, str) for p in problems)

    check()


def test_property_code_with_angle_brackets_round_trips() -> None:
    @FAST
    @given(
        st.lists(
            st.sampled_from(["a < b", "x > 1", "print('<div>')", "s = '</'", "if a<b>c: pass"]), min_size=1
        )
    )
    def check(lines: list[str]) -> None:
        code = "\n".join(lines)
        text = DATAMIND.format_turn("t", Action(kind="code", text=code))
        assume(DATAMIND.parse_turn(text).ok)
        assert DATAMIND.parse_turn(text, strict=True).text == code

    check()


@pytest.mark.parametrize("d", DIALECTS, ids=lambda d: d.name)
def test_pathological_turns_parse_in_linear_time(d: Dialect) -> None:
    """A model stuck repeating an opening tag (or an open \\boxed{) must not stall the agent loop."""
    c = code_tag(d)
    for text in [
        f"<{c}>" * 10_000,
        "<think>" * 10_000 + "</think>",
        "\\boxed{" * 10_000,
        "<answer>" + "{" * 50_000,
    ]:
        t0 = time.process_time()  # this process's CPU time: other processes' load does not count
        p = d.parse_turn(text)
        d.extract_answer(text)
        d.complete_turn(text)
        assert time.process_time() - t0 < 5.0  # linear: milliseconds; quadratic scanning: minutes
        assert p.kind in ("invalid", "answer")


def test_guess_language_survives_unparsable_python() -> None:
    assert guess_language("SELECT 1 \x00") == "sql"
    assert guess_language("SELECT " + "(" * 5000) == "sql"

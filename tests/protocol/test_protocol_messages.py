"""Trajectories ⇄ OpenAI chat messages with train masks."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datadojo.protocol import DATAMIND, SAILOR, Dialect
from datadojo.protocol.messages import (
    MessagesError,
    messages_to_trajectory,
    strip_masks,
    trajectory_to_messages,
)
from datadojo.types import Action, Observation, Timings, Trajectory

PROMPT = [
    {"role": "system", "content": "You are a data analyst."},
    {"role": "user", "content": "How many rows?"},
]


def build(d: Dialect, *, cut: bool = False) -> Trajectory:
    code = d.format_turn(
        "Count them.", Action(kind="code", text="import pandas as pd\nprint(len(pd.read_csv('s.csv')))")
    )
    if cut:  # what a backend returns when it stops on </code> and drops the stop string
        code = code.removesuffix(f"</{d.code_tags[0].name}>")
    t1 = d.parse_turn(d.complete_turn(code)).to_turn(
        Observation(text="12", status="ok"), timings=Timings(llm_s=1.0, exec_s=0.5)
    )
    t1 = t1.model_copy(update={"raw": code})
    bad = d.parse_turn("<think>oops</think> no action here").to_turn(
        Observation(text="No action: ...", status="feedback")
    )
    t3 = d.parse_turn(d.format_turn("Done.", Action(kind="answer", text="\\boxed{12}"))).to_turn()
    return Trajectory(
        task_id="t1",
        dialect=d.name,
        prompt=PROMPT,
        turns=[t1, bad, t3],
        stop_reason="answer",
        final_answer="12",
    )


@pytest.mark.parametrize("d", [DATAMIND, SAILOR], ids=lambda d: d.name)
def test_trajectory_to_messages_masks_and_tags(d: Dialect) -> None:
    traj = build(d)
    ms = trajectory_to_messages(traj)
    assert [m["role"] for m in ms] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert [m["train"] for m in ms] == [False, False, True, False, True, False, True]
    assert ms[2]["content"] == traj.turns[0].raw
    assert ms[3]["content"] == f"<{d.observation}>\n12\n</{d.observation}>"
    assert ms[4]["content"] == traj.turns[1].raw  # invalid turns are kept verbatim
    assert ms[5]["content"] == d.format_observation("No action: ...")
    assert trajectory_to_messages(traj, include_prompt=False) == ms[2:]
    assert PROMPT[0] == {"role": "system", "content": "You are a data analyst."}  # input not mutated


@pytest.mark.parametrize("d", [DATAMIND, SAILOR], ids=lambda d: d.name)
def test_stop_cut_closing_tag_is_completed(d: Dialect) -> None:
    traj = build(d, cut=True)
    closer = f"</{d.code_tags[0].name}>"
    assert not traj.turns[0].raw.endswith(closer)
    ms = trajectory_to_messages(traj)
    assert ms[2]["content"] == traj.turns[0].raw + closer


@pytest.mark.parametrize("d", [DATAMIND, SAILOR], ids=lambda d: d.name)
def test_round_trips(d: Dialect) -> None:
    traj = build(d)
    ms = trajectory_to_messages(traj, with_status=True)
    back = messages_to_trajectory(ms, task_id="t1", dialect=d.name)
    assert back.prompt == PROMPT and back.dialect == d.name
    assert back.stop_reason == "answer"
    assert back.final_answer == ("12" if d.boxed_answers else "\\boxed{12}")
    for a, b in zip(traj.turns, back.turns, strict=True):
        assert (a.raw, a.thought, a.action, a.invalid_reason, a.void) == (
            b.raw,
            b.thought,
            b.action,
            b.invalid_reason,
            b.void,
        )
        assert a.observation == b.observation  # status restored from with_status
    assert trajectory_to_messages(back, with_status=True) == ms
    # without status the observation text survives and status falls back to its default
    plain = messages_to_trajectory(trajectory_to_messages(traj), task_id="t1", dialect=d)
    assert plain.turns[1].observation is not None and plain.turns[1].observation.text == "No action: ..."
    assert plain.turns[1].observation.status == "ok"


def test_pure_openai_messages_and_stop_reason_inference() -> None:
    d = DATAMIND
    ms = [
        *PROMPT,
        {"role": "assistant", "content": d.format_turn("a", Action(kind="code", text="print(1)"))},
        {"role": "user", "content": d.format_observation("1")},
        {"role": "assistant", "content": "<think>b</think><code>print(2)"},
    ]
    traj = messages_to_trajectory(ms, task_id="x", sample=3, model="m", rewards={"format": 0.0})
    assert traj.stop_reason == "invalid" and traj.key == ("x", 3) and traj.model == "m"
    assert traj.final_answer is None and traj.has_void_turn
    assert traj.turns[1].invalid_reason == "Unclosed <code> tag: add </code> after your code."
    assert messages_to_trajectory(ms[:4], task_id="x").stop_reason == "max_turns"
    assert (
        messages_to_trajectory(ms[:4], task_id="x", stop_reason="context_limit").stop_reason
        == "context_limit"
    )
    two = messages_to_trajectory([*ms[:3], ms[2]], task_id="x")  # assistant after assistant: no observation
    assert [t.observation for t in two.turns] == [None, None]


def test_default_language_passes_through() -> None:
    ms = [*PROMPT, {"role": "assistant", "content": "<think>t</think><code>SELECT 1</code>"}]
    assert messages_to_trajectory(ms, task_id="x").turns[0].action.kind == "code"
    assert messages_to_trajectory(ms, task_id="x", default_language="auto").turns[0].action == Action(
        kind="sql", text="SELECT 1"
    )


def test_few_shot_assistant_in_prompt_is_kept_by_train_flag() -> None:
    d = DATAMIND
    prompt = [*PROMPT, {"role": "assistant", "content": "example"}, {"role": "user", "content": "now you"}]
    answer = d.parse_turn("<think>t</think><answer>4</answer>").to_turn()
    traj = Trajectory(task_id="x", prompt=prompt, turns=[answer], stop_reason="answer", final_answer="4")
    back = messages_to_trajectory(trajectory_to_messages(traj), task_id="x")
    assert back.prompt == prompt and len(back.turns) == 1


@pytest.mark.parametrize(
    ("messages", "index", "fragment"),
    [
        ([{"role": "tool", "content": "x"}], 0, "role 'tool' is not one of system, user, assistant"),
        ([{"role": "user", "content": None}], 0, "content must be a string, got NoneType"),
        (["hello"], 0, "expected a mapping"),
        (
            [
                *PROMPT,
                {"role": "assistant", "content": "<answer>1</answer>"},
                {"role": "user", "content": "thanks"},
            ],
            3,
            "must be wrapped in <interpreter>…</interpreter>",
        ),
        (
            [
                *PROMPT,
                {"role": "assistant", "content": "<answer>1</answer>"},
                {"role": "system", "content": "x"},
            ],
            3,
            "a system message cannot follow an assistant turn",
        ),
        (
            [
                *PROMPT,
                {"role": "assistant", "content": "<answer>1</answer>"},
                {"role": "user", "content": "<interpreter>\na\n</interpreter>"},
                {"role": "user", "content": "<interpreter>\nb\n</interpreter>"},
            ],
            4,
            "a user message after the prompt must follow an assistant turn",
        ),
        (
            [
                *PROMPT,
                {"role": "assistant", "content": "<answer>1</answer>"},
                {"role": "user", "content": "<interpreter>\na\n</interpreter>", "status": "weird"},
            ],
            3,
            "bad observation fields",
        ),
    ],
)
def test_errors_name_the_message_index(messages: list, index: int, fragment: str) -> None:
    with pytest.raises(MessagesError) as info:
        messages_to_trajectory(messages, task_id="x")
    assert info.value.index == index
    assert str(info.value).startswith(f"message {index}: ") and fragment in str(info.value)


def test_bad_prompt_and_stop_reason() -> None:
    traj = Trajectory(task_id="x", prompt=[{"content": "no role"}], stop_reason="answer")
    with pytest.raises(MessagesError, match="message 0: prompt message of trajectory 'x' has no 'role'"):
        trajectory_to_messages(traj)
    with pytest.raises(ValueError, match="stop_reason 'done'"):
        messages_to_trajectory(PROMPT, task_id="x", stop_reason="done")  # type: ignore[arg-type]


def test_strip_masks() -> None:
    ms = trajectory_to_messages(build(DATAMIND), with_status=True)
    pure = strip_masks(ms)
    assert all(set(m) == {"role", "content"} for m in pure)
    assert [m["content"] for m in pure] == [m["content"] for m in ms]
    assert strip_masks([{"role": "user", "content": "x", "name": "bob", "train": False}]) == [
        {"role": "user", "content": "x", "name": "bob"}
    ]


_TEXT = st.text(max_size=30)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(_TEXT, st.none() | _TEXT), max_size=5),
    st.sampled_from([DATAMIND, SAILOR]),
)
def test_property_messages_round_trip(steps: list[tuple[str, str | None]], d: Dialect) -> None:
    """Any assistant text with any observation: messages → trajectory → messages is the identity."""
    ms: list[dict] = [
        {"role": "system", "content": "s", "train": False},
        {"role": "user", "content": "q", "train": False},
    ]
    for raw, obs in steps:
        ms.append({"role": "assistant", "content": raw, "train": True})
        if obs is not None:
            ms.append({"role": "user", "content": d.format_observation(obs), "train": False})
    traj = messages_to_trajectory(ms, task_id="p", dialect=d)
    again = trajectory_to_messages(traj)
    # a turn that parses as valid never ends inside an open action, so nothing is completed: identity
    assert again == ms

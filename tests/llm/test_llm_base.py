"""The backend protocol's pieces: sampling parameters, message checks, stop cutting, token approximation."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datadojo.llm.base import (
    ChatBackend,
    Completion,
    LLMError,
    SamplingParams,
    apply_stop,
    approx_message_tokens,
    approx_token_count,
    approx_tokenize,
    normalize_stop,
    split_total,
    validate_messages,
)


def test_sampling_defaults_follow_datamind_inference_settings() -> None:
    p = SamplingParams()
    assert (p.temperature, p.top_p, p.n, p.max_tokens, p.seed, p.stop) == (0.7, 0.95, 1, None, None, ())
    assert not p.greedy
    assert SamplingParams(temperature=0).greedy


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"n": 0}, "n must"),
        ({"n": True}, "n must"),
        ({"seed": 1.5}, "seed"),
        ({"stop": [""]}, "empty"),
        ({"stop": [1]}, "strings"),
    ],
)
def test_sampling_rejects_bad_values(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        SamplingParams(**kwargs)


def test_stop_normalized_to_distinct_tuple() -> None:
    assert normalize_stop("</code>") == ("</code>",)
    assert normalize_stop(["</code>", "</answer>", "</code>"]) == ("</code>", "</answer>")
    assert SamplingParams(stop=["a", "b"]).stop == ("a", "b")
    assert normalize_stop(None) == ()


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ([], "must not be empty"),
        ("hello", "list of dicts"),
        ([{"role": "user", "content": "a"}, "b"], "message 1"),
        ([{"role": "robot", "content": "a"}], "message 0: role"),
        ([{"role": "user", "content": None}], r"message 0 \(user\): content"),
    ],
)
def test_validate_messages_names_bad_message(messages: object, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        validate_messages(messages)  # type: ignore[arg-type]


def test_apply_stop_cuts_at_earliest_and_reports_it() -> None:
    text = "think <code>x=1</code> more <interpreter>out</interpreter>"
    assert apply_stop(text, ["<interpreter>", "</code>"]) == ("think <code>x=1", "</code>")
    assert apply_stop(text, []) == (text, None)
    assert apply_stop("ab", ["b", "ab"]) == ("", "ab")
    assert apply_stop("abc", ["ab", "a"]) == ("", "ab")  # same start: the longer one


@given(st.text(max_size=60), st.lists(st.text(min_size=1, max_size=4), max_size=4))
def test_apply_stop_properties(text: str, stops: list[str]) -> None:
    kept, matched = apply_stop(text, stops)
    assert text.startswith(kept)
    assert not any(s in kept for s in stops)
    if matched is None:
        assert kept == text
    else:
        assert text[len(kept) :].startswith(matched)


@given(st.text(max_size=200))
def test_approx_tokenize_is_lossless(text: str) -> None:
    pieces = approx_tokenize(text)
    assert "".join(pieces) == text
    assert all(pieces)
    assert approx_token_count(text) == len(pieces)


def test_approx_counts_digits_singly_and_words_as_units() -> None:
    assert approx_token_count("12345") == 5
    assert approx_token_count("hello world") == 2
    assert approx_token_count("internationalisation") == 4  # 6-letter chunks
    assert approx_token_count("df.groupby('region')['sales'].sum()") > approx_token_count("df groupby region")


def test_approx_message_tokens_adds_framing() -> None:
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello world"}]
    content = approx_token_count("be brief") + approx_token_count("hello world")
    assert approx_message_tokens(msgs) == content + 2 * 4 + 3
    assert approx_message_tokens(msgs, counter=len) == len("be brief") + len("hello world") + 11


@given(st.integers(0, 10_000), st.lists(st.integers(0, 500), min_size=1, max_size=8))
def test_split_total_sums_exactly(total: int, weights: list[int]) -> None:
    parts = split_total(total, weights)
    assert sum(parts) == total
    assert all(p >= 0 for p in parts)


def test_split_total_is_proportional() -> None:
    assert split_total(30, [1, 2]) == [10, 20]
    assert split_total(3, [0, 0, 0]) == [1, 1, 1]


class _Echo(ChatBackend):
    """Minimal backend: echoes the last user message; fails on demand."""

    def __init__(self) -> None:
        super().__init__(model_id="echo", context_window=20)
        self.seen: list[SamplingParams] = []

    async def _generate(self, messages, params):  # type: ignore[no-untyped-def]
        self.seen.append(params)
        if messages[-1]["content"] == "fail":
            raise LLMError("boom", retryable=True)
        return [
            Completion(
                text=messages[-1]["content"], finish_reason="stop", prompt_tokens=3, completion_tokens=2
            )
        ] * params.n

    def count_tokens(self, messages):  # type: ignore[no-untyped-def]
        return approx_message_tokens(messages)


async def test_chat_merges_params_and_records_usage() -> None:
    b = _Echo()
    base = SamplingParams(temperature=0.2, stop=("x",))
    out = await b.chat([{"role": "user", "content": "hi"}], n=3, params=base, max_tokens=5, seed=7)
    assert [c.text for c in out] == ["hi"] * 3
    assert all(c.latency_s > 0 for c in out)
    assert b.seen[-1] == SamplingParams(temperature=0.2, stop=("x",), n=3, max_tokens=5, seed=7)
    assert (b.usage.requests, b.usage.completions, b.usage.prompt_tokens, b.usage.completion_tokens) == (
        1,
        3,
        3,
        6,
    )
    with pytest.raises(LLMError):
        await b.chat([{"role": "user", "content": "fail"}])
    assert b.usage.failures == 1
    with pytest.raises(ValueError, match="message 0"):
        await b.chat([{"role": "user"}])


def test_fits_uses_context_window() -> None:
    b = _Echo()
    short = [{"role": "user", "content": "hi"}]
    assert b.fits(short)
    assert not b.fits(short, max_tokens=20)
    b.context_window = None
    assert b.fits([{"role": "user", "content": "word " * 1000}])


def test_chat_sync_runs_without_a_loop() -> None:
    assert _Echo().chat_sync([{"role": "user", "content": "yo"}])[0].text == "yo"


def test_context_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="context_window"):
        ChatBackend.__init__(_Echo.__new__(_Echo), model_id="x", context_window=0)


async def test_backend_is_an_async_context_manager() -> None:
    async with _Echo() as b:
        assert (await b.chat([{"role": "user", "content": "a"}]))[0].text == "a"


def test_llm_error_survives_pickling() -> None:
    import pickle

    err = pickle.loads(
        pickle.dumps(LLMError("gave up", retryable=True, attempts=3, status=503, context_overflow=False))
    )
    assert (str(err), err.retryable, err.attempts, err.status, err.context_overflow) == (
        "gave up",
        True,
        3,
        503,
        False,
    )

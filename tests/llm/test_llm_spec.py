"""Model spec strings: parsing, canonical printing, clear errors, and building backends from them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datadojo.llm import OpenAIBackend, load_backend, parse_model_spec
from datadojo.llm.spec import DEFAULT_OPENAI_BASE_URL, ModelSpec


def test_openai_spec_with_url_and_options() -> None:
    ms = parse_model_spec(
        "openai:Qwen2.5-Coder-7B-Instruct@http://localhost:8000/v1?api_key_env=MY_KEY&context_window=32768"
        "&max_concurrency=64&split_n=true&timeout=30.5"
    )
    assert ms.backend == "openai"
    assert ms.model == "Qwen2.5-Coder-7B-Instruct"
    assert ms.base_url == "http://localhost:8000/v1"
    assert dict(ms.options) == {
        "api_key_env": "MY_KEY",
        "context_window": 32768,
        "max_concurrency": 64,
        "split_n": True,
        "timeout": 30.5,
    }


def test_openai_spec_without_url_and_with_at_in_model_name() -> None:
    assert parse_model_spec("openai:gpt-4o-mini") == ModelSpec("openai", "gpt-4o-mini", None, {})
    # Vertex-style ids contain '@'; only an '@' followed by a URL scheme starts the base URL.
    ms = parse_model_spec("openai:claude-3@20240229@https://proxy.example/v1")
    assert (ms.model, ms.base_url) == ("claude-3@20240229", "https://proxy.example/v1")
    assert parse_model_spec("openai:claude-3@20240229").model == "claude-3@20240229"
    ms = parse_model_spec("openai:org/Model-7B@http://10.0.0.5:30000/v1")
    assert (ms.model, ms.base_url) == ("org/Model-7B", "http://10.0.0.5:30000/v1")


def test_hf_spec() -> None:
    ms = parse_model_spec("hf:/ckpt/qwen-0.5b?device=cpu&dtype=float32&max_batch_size=8&trust_remote_code=no")
    assert ms == ModelSpec(
        "hf",
        "/ckpt/qwen-0.5b",
        None,
        {"device": "cpu", "dtype": "float32", "max_batch_size": 8, "trust_remote_code": False},
    )


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("", "empty model spec"),
        ("gpt-4o", "unknown backend 'gpt-4o'"),
        ("vllm:model@http://x/v1", "unknown backend 'vllm'"),
        ("openai:", "missing model name"),
        ("openai:@http://localhost:8000/v1", "missing model name"),
        ("hf:", "missing checkpoint path"),
        ("openai:m@localhost:8000/v1", "needs a scheme"),
        ("openai:m@ftp://host/v1", "must be http"),
        ("openai:m@http://user:pw@host/v1", "credentials"),
        ("openai:m@http://host:99999/v1", "bad port"),
        ("openai:m@http://h/v1?api_key=sk-123", "never put credentials"),
        ("openai:m@http://h/v1?colour=red", "unknown option 'colour'.*known: api_key_env"),
        ("openai:m@http://h/v1?context_window=big", "context_window='big': expected an integer"),
        ("openai:m@http://h/v1?context_window=1&context_window=2", "given twice"),
        ("openai:m@http://h/v1?split_n=maybe", "expected true or false"),
        ("openai:m@http://h/v1?api_key_env=MY-KEY", "environment variable name"),
        ("openai:m@http://h/v1?novalue", "malformed options"),
        ("hf:/x?device=cpu&max_concurrency=4", "unknown option 'max_concurrency' for the hf backend"),
        ("hf:/x?timeout=-1", "unknown option"),
        ("openai:m@http://h/v1?timeout=-1", "non-negative"),
    ],
)
def test_malformed_specs_fail_clearly(spec: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_model_spec(spec)


_model = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,20}", fullmatch=True)
_url = st.builds(
    "http://{}:{}/{}".format,
    st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True),
    st.integers(1, 65535),
    st.from_regex(r"[a-z0-9]{0,5}", fullmatch=True),
)
_opts = st.fixed_dictionaries(
    {},
    optional={
        "context_window": st.integers(1, 10**6),
        "max_concurrency": st.integers(1, 512),
        "timeout": st.floats(0.5, 1000, allow_nan=False).map(lambda f: round(f, 2)),
        "split_n": st.booleans(),
        "tokenizer": st.from_regex(r"/[a-z0-9/_.-]{1,20}", fullmatch=True),
    },
)


@given(_model, st.none() | _url, _opts)
def test_spec_string_round_trips(model: str, url: str | None, opts: dict) -> None:
    ms = ModelSpec("openai", model, url, opts)
    assert parse_model_spec(str(ms)) == ms


def test_load_openai_backend_reads_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-test-secret-123")
    b = load_backend(
        "openai:m@http://127.0.0.1:9/v1?api_key_env=MY_KEY&context_window=4096&max_concurrency=3"
    )
    assert isinstance(b, OpenAIBackend)
    assert (b.model_id, b.base_url, b.context_window, b.max_concurrency) == (
        "m",
        "http://127.0.0.1:9/v1",
        4096,
        3,
    )
    assert "sk-test-secret-123" not in repr(b) and "sk-test-secret-123" not in str(vars(b))


def test_load_openai_backend_base_url_fallbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert load_backend("openai:gpt-4o-mini").base_url == DEFAULT_OPENAI_BASE_URL
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:1234/v1/")
    assert load_backend("openai:local").base_url == "http://localhost:1234/v1"


def test_load_backend_overrides_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE_KEY", raising=False)
    b = load_backend("openai:m@http://h/v1?max_retries=2", max_retries=7, extra_body={"top_k": 20})
    assert (b.max_retries, b.extra_body) == (7, {"top_k": 20})
    with pytest.raises(ValueError, match=r"unknown option.*colour"):
        load_backend("openai:m@http://h/v1", colour="red")
    with pytest.raises(ValueError, match="NOPE_KEY"):
        load_backend("openai:m@http://h/v1?api_key_env=NOPE_KEY")
    with pytest.raises(ValueError, match="max_concurrency"):
        load_backend("openai:m@http://h/v1?max_concurrency=0")


def test_load_hf_backend_missing_checkpoint_is_clear(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    with pytest.raises(ValueError, match="no such folder"):
        load_backend(f"hf:{tmp_path / 'nothing-here'}?device=cpu")
    with pytest.raises(ValueError, match="dtype must be one of"):
        load_backend(f"hf:{tmp_path}?dtype=float8")

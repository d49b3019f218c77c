"""The transformers backend on tiny checkpoints from :mod:`datadojo.train.toy` (no downloads).

Two models: the suite's random toy checkpoint (sampling, seeds, batching), and a "scripted" one whose weights
are set so that greedy decoding walks a fixed chain of words — with every attention and MLP output
zeroed, the last hidden state is the current token's (normalized) embedding, and the output row of
token ``succ(t)`` is that embedding, so the argmax after ``t`` is ``succ(t)``. That makes stop strings,
EOS and length limits checkable against exact expected text.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from datadojo.llm import LLMError, load_backend  # noqa: E402
from datadojo.llm.hf_backend import HFBackend  # noqa: E402
from datadojo.train.toy import build_toy_model, build_toy_tokenizer  # noqa: E402

WORDS = [
    "user",
    "system",
    "assistant",
    "Let",
    "me",
    "look",
    "print",
    "rows",
    "hello",
    "world",
    "the",
    "answer",
]
CODE_TOKENS = ["<code>", "</code>"]
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }} {{ m['content'] }}<|im_end|>{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant{% endif %}"
)
# What the scripted model says after the generation prompt, then EOS.
CHAIN_TEXT = " Let me look<code> print rows</code> the answer"
MSGS = [{"role": "user", "content": "hello world"}]


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def _tokenizer() -> transformers.PreTrainedTokenizerFast:
    """The toy byte-level BPE learnt on WORDS alone (each a single token), with a ChatML-like template."""
    return build_toy_tokenizer(
        400, corpus=[" ".join(WORDS)] * 20 + WORDS * 20, chat_template=TEMPLATE, extra_tokens=CODE_TOKENS
    )


def _save(model: torch.nn.Module, tok: transformers.PreTrainedTokenizerFast, path: Path) -> Path:
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def scripted_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tok = _tokenizer()
    hidden = 64
    model = build_toy_model(tok, hidden=hidden, max_positions=128)
    prompt = tok.apply_chat_template(MSGS, tokenize=False, add_generation_prompt=True)
    last = tok(prompt, add_special_tokens=False)["input_ids"][-1]  # the generation prompt's last token
    ids = [last, *_chain_ids(tok)]
    assert len(set(ids)) == len(ids), "the chain must not repeat a token"
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        emb = torch.randn(len(tok), hidden, generator=torch.Generator().manual_seed(0))
        model.model.embed_tokens.weight.copy_(emb)
        normed = emb / emb.pow(2).mean(-1, keepdim=True).sqrt()  # what the final RMSNorm produces
        head = torch.zeros(len(tok), hidden)
        for cur, nxt in itertools.pairwise(ids):
            head[nxt] = normed[cur]
        model.lm_head.weight.copy_(head)
    return _save(model, tok, tmp_path_factory.mktemp("scripted-llama"))


@pytest.fixture(scope="module")
def scripted(scripted_ckpt: Path) -> HFBackend:
    b = load_backend(f"hf:{scripted_ckpt}?device=cpu&dtype=float32")
    assert isinstance(b, HFBackend)
    return b


def _chain_ids(tok: transformers.PreTrainedTokenizerFast) -> list[int]:
    """Token ids the scripted model emits after the generation prompt: CHAIN_TEXT, then EOS."""
    return [*tok(CHAIN_TEXT, add_special_tokens=False)["input_ids"], tok.eos_token_id]


def _expected(tok: transformers.PreTrainedTokenizerFast, k: int | None = None) -> str:
    """The text of the first ``k`` chain tokens (all but EOS by default)."""
    ids = _chain_ids(tok)
    return tok.decode(ids[: len(ids) - 1 if k is None else k], skip_special_tokens=True)


async def test_greedy_follows_the_script_and_stops_at_eos(scripted: HFBackend) -> None:
    (c,) = await scripted.chat(MSGS, temperature=0, max_tokens=50)
    assert c.text == _expected(scripted.tokenizer)
    assert (c.finish_reason, c.stop_sequence) == ("stop", None)
    assert c.text == CHAIN_TEXT
    assert c.completion_tokens == len(_chain_ids(scripted.tokenizer))  # EOS included, as servers count it
    assert c.prompt_tokens == scripted.count_tokens(MSGS)


async def test_stop_string_cuts_text_like_an_openai_server(scripted: HFBackend) -> None:
    full = _expected(scripted.tokenizer)
    (c,) = await scripted.chat(
        MSGS, temperature=0, max_tokens=50, stop=["</code>", "</answer>", "<interpreter>"]
    )
    assert c.text == full[: full.index("</code>")] == " Let me look<code> print rows"
    assert (c.finish_reason, c.stop_sequence) == ("stop", "</code>")
    chain = _chain_ids(scripted.tokenizer)
    assert c.completion_tokens == chain.index(scripted.tokenizer.convert_tokens_to_ids("</code>")) + 1


async def test_max_tokens_gives_length(scripted: HFBackend) -> None:
    (c,) = await scripted.chat(MSGS, temperature=0, max_tokens=3)
    assert c.text == _expected(scripted.tokenizer, 3)
    assert (c.finish_reason, c.completion_tokens) == ("length", 3)


async def test_concurrent_callers_are_batched_with_left_padding(scripted: HFBackend) -> None:
    prompts = [[{"role": "user", "content": " ".join(["hello"] * k)}] for k in (1, 4, 9)]
    before = scripted.batches_run
    outs = await asyncio.gather(*(scripted.chat(p, temperature=0, max_tokens=50, n=2) for p in prompts))
    assert scripted.batches_run - before == 1  # three callers x two samples in one generate() call
    full = _expected(scripted.tokenizer)
    for p, out in zip(prompts, outs, strict=True):
        assert [c.text for c in out] == [full, full]
        assert all(c.prompt_tokens == scripted.count_tokens(p) for c in out)


async def test_different_sampling_settings_run_as_separate_batches(scripted: HFBackend) -> None:
    before = scripted.batches_run
    a, b = await asyncio.gather(
        scripted.chat(MSGS, temperature=0, max_tokens=50), scripted.chat(MSGS, temperature=0, max_tokens=2)
    )
    assert scripted.batches_run - before == 2
    assert a[0].finish_reason == "stop" and b[0].finish_reason == "length"


def test_count_tokens_is_exact_under_the_chat_template(scripted: HFBackend) -> None:
    tok = scripted.tokenizer
    text = tok.apply_chat_template(MSGS, tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user hello world<|im_end|><|im_start|>assistant"
    # <|im_start|> user Ġhello Ġworld <|im_end|> <|im_start|> assistant
    assert scripted.count_tokens(MSGS) == len(tok(text, add_special_tokens=False)["input_ids"]) == 7
    assert scripted.context_window == 128


async def test_prompt_beyond_context_window_is_refused(scripted_ckpt: Path) -> None:
    b = load_backend(f"hf:{scripted_ckpt}?device=cpu&context_window=8")
    with pytest.raises(LLMError, match="context window") as info:
        await b.chat([{"role": "user", "content": "hello " * 10}], temperature=0)
    assert info.value.context_overflow and not info.value.retryable
    (c,) = await b.chat(MSGS, temperature=0, max_tokens=50)  # 7-token prompt: 1 token of room
    assert (c.completion_tokens, c.finish_reason) == (1, "length")
    await b.aclose()
    with pytest.raises(LLMError, match="closed"):
        await b.chat(MSGS)


async def test_random_model_sampling_is_seeded(toy_ckpt: Path) -> None:
    b = load_backend(f"hf:{toy_ckpt}?device=cpu&dtype=float32")
    assert isinstance(b, HFBackend)
    kw = {"temperature": 1.0, "top_p": 1.0, "max_tokens": 12}
    first = await b.chat(MSGS, n=4, seed=123, **kw)
    again = await b.chat(MSGS, n=4, seed=123, **kw)
    other = await b.chat(MSGS, n=4, seed=124, **kw)
    assert [c.text for c in first] == [c.text for c in again]
    assert [c.text for c in first] != [c.text for c in other]
    assert len({c.text for c in first}) > 1  # n samples differ from one another
    for c in first:
        assert c.finish_reason in ("stop", "length")
        assert 1 <= c.completion_tokens <= 12
        assert (c.finish_reason == "length") == (c.completion_tokens == 12 and c.stop_sequence is None)
    assert b.usage.completions == 12
    await b.aclose()


async def test_batched_greedy_matches_unbatched(toy_ckpt: Path) -> None:
    """Left padding with an attention mask: a short prompt batched with longer ones decodes as it does alone."""
    b = load_backend(f"hf:{toy_ckpt}?device=cpu&dtype=float32")
    assert isinstance(b, HFBackend)
    prompts = [[{"role": "user", "content": "hello " * k}] for k in (1, 5, 12)]
    alone = [(await b.chat(p, temperature=0, max_tokens=10))[0].text for p in prompts]
    before = b.batches_run
    together = await asyncio.gather(*(b.chat(p, temperature=0, max_tokens=10) for p in prompts))
    assert b.batches_run - before == 1
    assert [out[0].text for out in together] == alone
    await b.aclose()


def test_missing_chat_template_is_a_clear_error(tmp_path: Path, toy_ckpt: Path) -> None:
    tok = transformers.AutoTokenizer.from_pretrained(toy_ckpt)
    tok.chat_template = None
    model = transformers.AutoModelForCausalLM.from_pretrained(toy_ckpt)
    _save(model, tok, tmp_path)
    for name in os.listdir(tmp_path):
        if name.endswith(".jinja"):
            (tmp_path / name).unlink()
    with pytest.raises(ValueError, match="no chat template"):
        HFBackend(tmp_path, device="cpu")


def test_openai_backend_counts_exactly_with_a_local_tokenizer(
    scripted_ckpt: Path, scripted: HFBackend
) -> None:
    """``openai:...?tokenizer=PATH`` counts prompt tokens with the served model's own chat template."""
    remote = load_backend(f"openai:m@http://127.0.0.1:9/v1?tokenizer={scripted_ckpt}&context_window=8")
    long = [{"role": "user", "content": "hello " * 10}]
    assert remote.count_tokens(MSGS) == scripted.count_tokens(MSGS) == 7
    assert remote.count_tokens(long) == scripted.count_tokens(long)
    assert remote.fits(MSGS, max_tokens=1) and not remote.fits(long)

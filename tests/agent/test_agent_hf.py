"""The agent loop on the local transformers backend: a tiny random model the test builds (no downloads)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from datadojo.agent import AgentConfig, run_agent  # noqa: E402
from datadojo.llm import load_backend  # noqa: E402
from datadojo.llm.base import SamplingParams  # noqa: E402
from datadojo.types import DataFile, Task  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    corpus = ["<think> look at the data </think> <code> print(df.head()) </code> <answer> 42 </answer>"] * 30
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<pad>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer)
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<|im_end|>"
    )
    fast.chat_template = TEMPLATE
    config = transformers.LlamaConfig(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        pad_token_id=fast.pad_token_id,
        eos_token_id=fast.eos_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    model.generation_config.pad_token_id = fast.pad_token_id
    model.generation_config.eos_token_id = fast.eos_token_id
    path = tmp_path_factory.mktemp("tiny-agent-llama")
    model.save_pretrained(path)
    fast.save_pretrained(path)
    return path


class _NoRun:
    calls = 0

    async def run(self, code: str, *, language: str = "python", db: str | None = None):
        raise AssertionError("a random model should not produce runnable code")


async def test_agent_runs_on_a_local_checkpoint(tiny_ckpt: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    backend = load_backend(f"hf:{tiny_ckpt}?device=cpu&dtype=float32")
    task = Task(
        id="hf-1", question="How many rows?", files=[DataFile.from_path(REPO / "examples/data/sales.csv")]
    )
    cfg = AgentConfig(max_turns=2, sampling=SamplingParams(temperature=1.0, max_tokens=12), profile_chars=0)
    traj = await run_agent(task, backend, _NoRun(), cfg, seed=3)
    await backend.aclose()
    # random text is never a valid turn: each gets recorded as void with feedback, until the budget ends
    assert traj.stop_reason == "max_turns"
    assert len(traj.turns) == 2 and all(t.void for t in traj.turns)
    assert all(t.tokens.prompt > 0 and 0 <= t.tokens.completion <= 12 for t in traj.turns)
    assert sum(t.tokens.completion for t in traj.turns) > 0
    # the second request carried the first reply and the feedback: its prompt is longer
    assert traj.turns[1].tokens.prompt > traj.turns[0].tokens.prompt
    assert traj.model and str(tiny_ckpt) in traj.model


async def test_context_window_of_the_checkpoint_stops_the_episode(
    tiny_ckpt: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    backend = load_backend(f"hf:{tiny_ckpt}?device=cpu&dtype=float32&context_window=64")
    task = Task(id="hf-2", question="How many rows?")
    traj = await run_agent(task, backend, _NoRun(), AgentConfig(sampling=SamplingParams(max_tokens=8)))
    await backend.aclose()
    assert traj.stop_reason == "context_limit" and traj.turns == []

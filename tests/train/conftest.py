"""Shared fixtures for the training tests: a tiny tokenizer with Qwen2.5's chat template and tiny Llama models.

Everything is built locally (no downloads); the tokenizer is built once per session because training a BPE
takes about a second.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def toy_tok() -> Any:
    from datadojo.train.toy import build_toy_tokenizer

    return build_toy_tokenizer()


@pytest.fixture()
def make_model(toy_tok: Any) -> Callable[..., Any]:
    """A fresh tiny Llama (same seed → same weights) for each call."""
    from datadojo.train.toy import build_toy_model

    def make(**kwargs: Any) -> Any:
        return build_toy_model(toy_tok, **kwargs)

    return make


@pytest.fixture(scope="session")
def toy_ckpt(tmp_path_factory: pytest.TempPathFactory, toy_tok: Any) -> Path:
    """A saved tiny checkpoint (tokenizer + model) that trainers and the hf backend load by path."""
    from datadojo.train.toy import build_toy_model

    path = tmp_path_factory.mktemp("toy-ckpt")
    model = build_toy_model(toy_tok)
    model.save_pretrained(path)
    toy_tok.save_pretrained(path)
    return path

"""Fixtures for the training tests: fresh tiny Llama models built on the suite's toy tokenizer.

Everything is built locally (no downloads). The tokenizer (``toy_tok``) and the saved checkpoint
(``toy_ckpt``) are the suite's, in ``tests/conftest.py``, built once per run.
"""

from __future__ import annotations

from collections.abc import Callable
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


@pytest.fixture()
def make_model(toy_tok: Any) -> Callable[..., Any]:
    """A fresh tiny Llama (same seed → same weights) for each call."""
    from datadojo.train.toy import build_toy_model

    def make(**kwargs: Any) -> Any:
        return build_toy_model(toy_tok, **kwargs)

    return make

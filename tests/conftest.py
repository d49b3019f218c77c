"""Suite-wide fixtures and settings.

**Real public data** in ``../shared/data`` (relative to the repository root): tests that read real benchmark
files take the :func:`shared_data` fixture (``shared_data("spider", "database")`` returns that path, or skips
the test with a visible reason naming it when it is absent), or carry
``@pytest.mark.requires_data("spider/database")`` when they only need it to exist. The data is never copied
into the repository; see ``../shared/data/README``.

**The tiny test model**: tests that need a transformers model or tokenizer take :func:`toy_tok` (the tokenizer
of :mod:`datadojo.train.toy`) or :func:`toy_ckpt` (a saved random toy checkpoint, what ``hf:PATH`` loads), each
built once per run and shared: a test must not change them (copy first). They skip the test when torch or
transformers is not installed.

**Verdicts independent of the machine's speed**: Hypothesis fails an example that runs longer than its
``deadline`` (200 ms by default): on a loaded machine that is a verdict decided by the wall clock, so the
suite turns the deadline off, and the ``too_slow`` health check (data generation timed against the clock)
with it. Properties are still checked on every example; a genuinely slow function is caught by benchmarks,
not by tests.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("datadojo", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("datadojo")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def need_shared_data(*parts: str) -> Path:
    """``SHARED_DATA / parts``, or skip the calling test naming the absent path."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data absent: {path}")
    return path


@pytest.fixture(scope="session")
def shared_data() -> Callable[..., Path]:
    """``shared_data(*parts)``: a path under ``../shared/data``; the test is skipped when it is absent."""
    return need_shared_data


@pytest.fixture(scope="session")
def toy_tok() -> Any:
    """The toy tokenizer (byte-level BPE, Qwen2.5's chat template): training it takes about a second."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from datadojo.train.toy import build_toy_tokenizer

    return build_toy_tokenizer()


@pytest.fixture(scope="session")
def toy_ckpt(tmp_path_factory: pytest.TempPathFactory, toy_tok: Any) -> Path:
    """A saved toy checkpoint (tokenizer + random tiny Llama) that trainers and the hf backend load by path."""
    from datadojo.train.toy import save_toy_checkpoint

    return save_toy_checkpoint(tmp_path_factory.mktemp("toy-ckpt"), tokenizer=toy_tok)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "requires_data(*paths): skip unless every path exists under ../shared/data"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("requires_data"):
        for rel in mark.args:
            need_shared_data(*Path(rel).parts)

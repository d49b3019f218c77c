"""``models.student = "toy"``: DataDojo's toy checkpoint, made by the recipe itself in its run folder.

Why: the bundled examples' small variants (``examples/recipes/*-small.toml``) must run as shipped — on a
laptop, in CI — without a downloaded model. Naming the toy student in the file (rather than a path the
user must first fill with ``datadojo train toy-model``) makes the recipe self-contained: the first
``recipe plan`` or ``recipe run`` writes ``OUT/toy-student`` (tokenizer and a randomly initialized tiny
Llama, :mod:`datadojo.train.toy`, from a fixed seed) and every stage reads it as the base checkpoint.

It is made once and then reused as it is: its files are an input of the stages' keys, so rewriting them
on every run would change nothing but would hash them again; a folder that is half written (a killed run)
is never seen, because the checkpoint is written beside it and renamed into place.

Its context window is :data:`TOY_WINDOW` tokens, not the 4,096 of the tests' toy model: its byte-level
tokenizer spends about one token per 1.25 characters, so a first prompt with the data profile of the
bundled example data (the EnvLunch warm-up tasks, shop-sql) is 3,400 to 4,500 tokens, and a smaller window
would end every episode at ``context_limit``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from datadojo.recipes.config import RecipeConfig
from datadojo.recipes.engine import RecipeError

__all__ = ["TOY_FOLDER", "TOY_STUDENT", "TOY_WINDOW", "is_toy_student", "with_toy_student"]

#: The value of ``models.student`` that asks for the toy checkpoint.
TOY_STUDENT = "toy"
#: Where it is written, inside the recipe's run folder.
TOY_FOLDER = "toy-student"
#: Its ``max_position_embeddings``: room for the bundled data's first prompts (module docstring) and turns.
TOY_WINDOW = 16384


def is_toy_student(spec: str) -> bool:
    """Whether ``models.student`` names the toy checkpoint (``toy``, also as ``hf:toy``)."""
    return spec.removeprefix("hf:").split("?")[0].strip() == TOY_STUDENT


def _build(target: Path) -> None:
    """Write the toy checkpoint to ``target`` through a sibling folder renamed into place (atomic)."""
    try:
        import tokenizers  # noqa: F401  (what the toy tokenizer and model are built with)
        import torch  # noqa: F401
        import transformers  # noqa: F401

        from datadojo.train.toy import save_toy_checkpoint
    except ImportError as exc:
        raise RecipeError(
            f'models.student = "toy": building the toy checkpoint needs torch and transformers ({exc}); '
            "install them with `pip install 'datadojo[train]'` (scripts/install.sh does)"
        ) from exc
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        save_toy_checkpoint(tmp, max_positions=TOY_WINDOW, seed=0)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def with_toy_student(config: RecipeConfig, out: Path) -> RecipeConfig:
    """``config`` with ``models.student = "toy"`` replaced by the toy checkpoint in ``out/toy-student``
    (written when absent); any other student is returned as it is."""
    if not is_toy_student(config.models.student):
        return config
    target = Path(out) / TOY_FOLDER
    if not (target / "config.json").is_file():
        _build(target)
    models = config.models.model_copy(update={"student": str(target)})
    return config.model_copy(update={"models": models})

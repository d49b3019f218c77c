"""Helpers shared by the sailor tests (a module of its own: ``conftest`` names clash across test folders)."""

from __future__ import annotations

from pathlib import Path


def make_explorer(backend, dataset: Path, config, env=None, seed_id: str = "L0-map"):
    """An Explorer over ``dataset`` for one seed, with a fresh tree; ``env`` may be a stand-in (or None)."""
    from datadojo.synth.sailor import load_seeds
    from datadojo.synth.sailor.explore import Explorer, LLMCalls, SearchStats
    from datadojo.synth.sailor.mcts import Tree
    from datadojo.synth.sailor.synthesis import meta_task

    seed = load_seeds(only=[seed_id])[0]
    tree = Tree("u", lam=config.lam, beta=config.beta, fpu_bonus=config.fpu_bonus,
                fpu_reduction=config.fpu_reduction, max_depth=config.max_depth)  # fmt: skip
    calls = LLMCalls(backend, backend, config, "auto", SearchStats())
    return Explorer(calls, env, seed, tree, meta_task(dataset, "0" * 64, seed, None, "u"))

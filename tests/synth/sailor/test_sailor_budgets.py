"""Search budgets (§4.1 settings): probes, requests, depth — deterministic, with an in-memory environment."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sailor_helpers import make_explorer

from datadojo.llm.spec import load_backend
from datadojo.sandbox.result import ExecResult
from datadojo.synth.sailor import SailorConfig
from datadojo.synth.sailor.explore import SearchStats
from datadojo.synth.sailor.mcts import Tree
from datadojo.testing.sailor_teacher import FakeSailor
from datadojo.testing.server import ScriptedLLMServer


class EchoEnv:
    """Stands in for the sandbox: every probe 'prints' a line naming its path length."""

    def __init__(self) -> None:
        self.paths: list[int] = []

    async def run(self, path_codes, code):
        self.paths.append(len(path_codes))
        text = f"path of {len(path_codes)} probes, then a substantive finding about the table\n"
        return ExecResult.make(text, "ok"), text, False, text


def search(dataset: Path, config: SailorConfig) -> tuple[SearchStats, Tree, EchoEnv]:
    env = EchoEnv()
    with ScriptedLLMServer(FakeSailor()) as srv:

        async def go():
            backend = load_backend(f"openai:fake@{srv.base_url}")
            explorer = make_explorer(backend, dataset, config, env)
            await explorer.search()
            await backend.aclose()
            return explorer.stats, explorer.tree

        stats, tree = asyncio.run(go())
    return stats, tree, env


def test_probe_budget(dataset: Path) -> None:
    stats, tree, env = search(dataset, SailorConfig(max_nodes=3, logprobs=False))
    assert stats.stop == "max_nodes" and stats.probes_run == 3 == len(env.paths)
    assert sum(n.executed for n in tree.nodes.values()) == 4  # the root and three probes


def test_request_budget(dataset: Path) -> None:
    stats, _, _ = search(dataset, SailorConfig(max_nodes=100, max_requests=7, logprobs=False))
    # one expansion costs 1 + 3 + 1 requests and each probe one post-judgment: the budget is checked between
    # iterations, so the search stops at the first check past 7
    assert stats.stop == "max_requests" and 7 <= stats.requests < 7 + 6


def test_depth_budget_exhausts_the_tree(dataset: Path) -> None:
    stats, tree, env = search(
        dataset, SailorConfig(max_nodes=100, max_depth=1, min_depth=1, k_max=3, logprobs=False)
    )
    assert stats.stop == "exhausted" and max(env.paths) == 0  # every probe ran straight from the root
    assert all(n.depth <= 1 for n in tree.nodes.values()) and tree.closed(tree.root)
    assert stats.probes_run == len(tree.root.children) >= 2

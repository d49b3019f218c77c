"""Hierarchical strategy→tool expansion and entropy-adaptive branching against the loopback model."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest
from sailor_helpers import make_explorer

from datadojo.llm.spec import load_backend
from datadojo.synth.sailor import SailorConfig
from datadojo.synth.sailor.explore import SearchStats
from datadojo.synth.sailor.mcts import Tree
from datadojo.synth.sailor.strategies import Candidate, diversify, tool_identity
from datadojo.testing.sailor_teacher import FakeSailor
from datadojo.testing.server import ScriptedLLMServer


def expand_root(fake: FakeSailor, dataset: Path, config: SailorConfig) -> tuple[Tree, SearchStats, list]:
    with ScriptedLLMServer(fake) as srv:

        async def go() -> tuple[Tree, SearchStats]:
            backend = load_backend(f"openai:fake@{srv.base_url}")
            explorer = make_explorer(backend, dataset, config, seed_id="L1-fields")
            await explorer.expand(explorer.tree.root)
            await backend.aclose()
            return explorer.tree, explorer.stats

        tree, stats = asyncio.run(go())
        return tree, stats, list(srv.requests)


def children(tree: Tree) -> list:
    return [tree.nodes[c] for c in tree.root.children]


def test_strategies_below_tau_pre_are_dropped_and_every_child_records_its_strategy(fake, dataset) -> None:
    fake.pre = lambda i, n: 0.5  # all probes alike: the widest branching
    tree, stats, requests = expand_root(fake, dataset, SailorConfig(k_max=4, tau_pre=0.3, logprobs=False))
    kids = children(tree)
    assert {k.strategy for k in kids} == {"repository_inspection", "schema_inspection", "statistics"}
    assert stats.strategies_dropped == 1  # visualization scored 0.1 < τ_pre
    info = tree.root.extra["expansion"]
    assert [s["kept"] for s in info["strategies"]] == [True, True, True, False]
    assert info["h_prior"] == pytest.approx(1.0) and info["width"] == 3 and all(k.rho == 0.5 for k in kids)
    kinds = [r.json.get("response_format", {}).get("json_schema", {}).get("name") for r in requests]
    assert kinds.count("StrategyPlan") == 1 and kinds.count("Probe") == 3 and kinds.count("PreJudgement") == 1
    # the strategy proposal is the policy's decision: it asks for token log-probabilities only when configured
    assert "logprobs" not in requests[0].json or not requests[0].json["logprobs"]


def test_tau_pre_above_every_score_leaves_nothing_to_expand(fake, dataset) -> None:
    tree, stats, _ = expand_root(fake, dataset, SailorConfig(tau_pre=0.95, logprobs=False))
    assert tree.root.children == [] and stats.strategies_dropped == 4


def test_width_narrows_when_one_probe_dominates(fake, dataset) -> None:
    fake.pre = lambda i, n: 0.95 if i == 0 else 0.05
    tree, _, _ = expand_root(fake, dataset, SailorConfig(k_min=1, k_max=3, logprobs=False))
    kids = children(tree)
    assert len(kids) == 1 and kids[0].rho == 0.95
    # π = softmax((0.95, 0.05, 0.05)/0.2) ≈ (0.978, 0.011, 0.011): H_prior ≈ 0.109 → width 1 + round(0.22) = 1
    assert tree.root.extra["expansion"]["h_prior"] == pytest.approx(0.109, abs=1e-3)


def test_token_entropy_widens_a_state_the_judge_found_obvious(fake, dataset) -> None:
    fake.pre = lambda i, n: 0.95 if i == 0 else 0.05
    half = math.log(0.5)
    fake.plan_logprobs = tuple((t, half, ((t, half), (t + "'", half))) for t in ("{", "strategies", ":"))
    tree, _, requests = expand_root(
        fake, dataset, SailorConfig(k_min=1, k_max=3, token_weight=0.5, top_logprobs=2)
    )
    info = tree.root.extra["expansion"]
    assert requests[0].json["logprobs"] is True and requests[0].json["top_logprobs"] == 2
    assert info["h_token"] == 1.0  # every token a coin flip
    # H = 0.5·H_prior + 0.5·1.0 ≈ 0.55 → width 1 + round(2·0.52) = 2, where H_prior alone gave 1
    assert (
        info["entropy"] == 0.5 * info["h_prior"] + 0.5 and info["width"] == 2 and len(tree.root.children) == 2
    )


def test_tool_identity_ignores_formatting_and_comments() -> None:
    a = "import pandas as pd\nprint(pd.read_csv('x.csv').shape)"
    b = "import pandas as pd   # load\n\nprint( pd.read_csv( 'x.csv' ).shape )\n"
    c = "import pandas as pd\nprint(pd.read_csv('y.csv').shape)"
    assert tool_identity(a) == tool_identity(b) != tool_identity(c)
    assert tool_identity("def (") == tool_identity("def  (")  # unparsable: whitespace-normalized text


def test_diversify_merges_duplicates_and_alternates_strategies() -> None:
    cands = [
        Candidate("statistics", 0.9, "t", "print(1)"),
        Candidate("statistics", 0.8, "t", "print(2)"),
        Candidate("schema_inspection", 0.7, "t", "print(3)"),
        Candidate("debugging", 0.6, "t", "print( 1 )"),  # same tool use as the first: merged away
    ]
    out = diversify(cands)
    assert [c.code for c in out] == ["print(1)", "print(3)", "print(2)"]
    # a probe already run on the path is not proposed again
    assert [c.code for c in diversify(cands, {tool_identity("print(1)")})] == ["print(2)", "print(3)"]

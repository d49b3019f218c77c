"""Quality control (§4.2): execution-validity rules, step verifier removal, branch removal, re-verification."""

from __future__ import annotations

import asyncio
import json

import pytest

from datadojo.llm.spec import load_backend
from datadojo.synth.sailor import SailorConfig, load_seeds
from datadojo.synth.sailor.explore import LLMCalls, SearchStats
from datadojo.synth.sailor.mcts import Node, Tree
from datadojo.synth.sailor.qc import QC_REASONS, StepVerifier, execution_problem
from datadojo.synth.sailor.synthesis import build_trajectory, meta_task
from datadojo.testing.sailor_teacher import FakeSailor
from datadojo.testing.server import ScriptedLLMServer

CFG = SailorConfig(min_depth=2, min_substantive_chars=10, substantive_score=0.5)
SEED = load_seeds(only=["L1-statistics"])[0]
ANSWER = "<think>done</think><answer>The table has 5 rows.</answer>"


def chain(tree: Tree, specs: list[tuple[str, str, float]], parent: Node | None = None) -> list[Node]:
    """Executed probes under ``parent``: (status, observation, post) each."""
    nodes, at = [], parent or tree.root
    for i, (status, obs, post) in enumerate(specs):
        at = tree.add_child(
            at, strategy="statistics", thought=f"step {i}", code=f"print({i})  # {at.id}", rho=0.5
        )
        at.executed, at.status, at.observation, at.post, at.n, at.w = True, status, obs, post, 1, 0.5
        nodes.append(at)
    return nodes


def traj(nodes: list[Node], final: str = ANSWER, tmp=None):
    task = meta_task(tmp, "0" * 64, SEED, None, "u") if tmp else None
    return build_trajectory(task=task, sample=0, base=[{"role": "system", "content": "s"},
                            {"role": "user", "content": SEED.intent}], nodes=nodes, final_raw=final, seed=SEED,
                            unit="u", model="m", config={})  # fmt: skip


GOOD = ("ok", "species,count\nAdelie,2\nGentoo,2", 0.8)


@pytest.mark.parametrize(
    ("specs", "final", "reason"),
    [
        ([GOOD, GOOD], ANSWER, None),
        ([GOOD, GOOD], "<think>no answer</think><python>print(1)</python>", "no_final_answer"),
        ([GOOD, ("ok", "   ", 0.0)], ANSWER, "empty_observation"),
        ([GOOD, ("error", "Traceback ... KeyError", 0.0)], ANSWER, "unresolved_error"),
        ([("error", "Traceback ... KeyError", 0.0), GOOD], ANSWER, None),  # recovered by the next probe
        ([("timeout", "[timeout]", 0.0), GOOD, ("killed", "[killed]", 0.0)], ANSWER, "unresolved_error"),
        ([GOOD], ANSWER, "too_shallow"),
        ([("ok", "done", 0.9), ("ok", "a long, well-formed but judged useless output", 0.2)], ANSWER,
         "no_substantive_observation"),
    ],
)  # fmt: skip
def test_execution_validity_rules(specs, final, reason, tmp_path) -> None:
    tree = Tree("u", lam=1, beta=0, fpu_bonus=0, fpu_reduction=0, max_depth=6)
    nodes = chain(tree, specs)
    problem = execution_problem(traj(nodes, final, tmp_path), nodes, CFG)
    assert (problem[0] if problem else None) == reason
    assert reason is None or reason in QC_REASONS


def test_tags_and_state_consistency(tmp_path) -> None:
    tree = Tree("u", lam=1, beta=0, fpu_bonus=0, fpu_reduction=0, max_depth=6)
    nodes = chain(tree, [GOOD, GOOD])
    nodes[0].thought = "I will run <python>print(1)</python> next"  # a tag inside <think>: malformed for SFT
    assert execution_problem(traj(nodes, ANSWER, tmp_path), nodes, CFG)[0] == "missing_tags"
    nodes[0].thought = "fine"
    t = traj(nodes, ANSWER, tmp_path)
    other = chain(tree, [GOOD])  # a node from another branch
    assert execution_problem(t, [nodes[0], other[0]], CFG)[0] == "inconsistent_state"
    t.turns[1].action.text = "print('edited')"
    assert execution_problem(t, nodes, CFG)[0] == "inconsistent_state"
    t2 = traj(nodes, ANSWER, tmp_path)
    t2.turns[0].observation = None
    assert execution_problem(t2, nodes, CFG)[0] == "malformed_observation"


def verify(fake: FakeSailor, jobs, config: SailorConfig = CFG, full: dict | None = None):
    """Run StepVerifier.verify for each (key, nodes, answer) job; returns (decisions, requests)."""
    with ScriptedLLMServer(fake) as srv:

        async def go():
            backend = load_backend(f"openai:fake@{srv.base_url}")
            verifier = StepVerifier(
                LLMCalls(backend, backend, config, "auto", SearchStats()), SEED.intent, full or {}
            )
            out = await asyncio.gather(*(verifier.verify(k, n, a) for k, n, a in jobs))
            await backend.aclose()
            return out

        return asyncio.run(go()), list(srv.requests)


def verdict(action="supported", grounding="supported", affects=False, ambiguity="none"):
    return {
        "action": action,
        "grounding": grounding,
        "affects_later": affects,
        "ambiguity": ambiguity,
        "reason": "r",
    }


def _tree3():
    tree = Tree("u", lam=1, beta=0, fpu_bonus=0, fpu_reduction=0, max_depth=6)
    return tree, chain(tree, [GOOD, GOOD, GOOD])


def test_unsupported_step_that_affects_later_steps_removes_the_trajectory(fake) -> None:
    _, nodes = _tree3()
    fake.verdict = lambda prompt, n: (
        verdict(grounding="unsupported", affects=True) if "Step 2 (" in prompt else verdict()
    )
    (d,), _ = verify(fake, [("t", nodes, "answer")])
    assert (
        not d.kept and d.reason == "unsupported_step" and d.detail.startswith("step 2: grounding unsupported")
    )
    assert [s["grounding"] for s in d.steps] == ["supported", "unsupported", "supported"]


def test_unsupported_step_without_consequence_is_kept_but_the_last_step_always_counts(fake) -> None:
    _, nodes = _tree3()
    fake.verdict = lambda prompt, n: verdict(action="unsupported") if "Step 2 (" in prompt else verdict()
    (d,), _ = verify(fake, [("t", nodes, "answer")])
    assert d.kept and d.reason == "kept"
    fake2 = FakeSailor()
    fake2.verdict = lambda prompt, n: verdict(grounding="contradicted") if "Step 3 (" in prompt else verdict()
    (d2,), _ = verify(fake2, [("t", nodes, "answer")])  # step 3's next text is the final answer
    assert not d2.kept and d2.reason == "contradicted_step"


def test_a_bad_transition_removes_the_whole_branch_and_is_verified_once(fake) -> None:
    tree, nodes = _tree3()
    sibling = chain(tree, [GOOD], parent=nodes[1])  # a second leaf sharing the edge nodes[0] → nodes[1]
    fake.verdict = lambda prompt, n: (
        verdict(grounding="unsupported", affects=True) if "Step 1 (" in prompt else verdict()
    )
    decisions, requests = verify(fake, [("a", nodes, "x"), ("b", [*nodes[:2], sibling[0]], "y")])
    assert [d.reason for d in decisions] == ["unsupported_step", "unsupported_step"]
    step1 = [r for r in requests if "Step 1 (" in r.json["messages"][-1]["content"]]
    assert len(step1) == 1  # the shared edge was verified once, its verdict applied to both trajectories


def test_processing_failures_are_reverified_against_the_original_trace(fake) -> None:
    _, nodes = _tree3()
    nodes[0].truncated = True
    full = {nodes[0].id: "the complete, untruncated output " * 3}
    fake.verdict = lambda prompt, n: (
        verdict(ambiguity="processing")
        if "Step 1 (" in prompt and "complete original output" not in prompt
        else verdict()
    )
    (d,), requests = verify(fake, [("t", nodes, "answer")], full=full)
    assert d.kept and d.steps[0]["attempts"] == 2
    retry = [
        r.json["messages"][-1]["content"] for r in requests if "Step 1 (" in r.json["messages"][-1]["content"]
    ]
    assert "truncated" in retry[0] and "the complete, untruncated output" in retry[1]


def test_invalid_verifier_replies_then_ambiguity_are_discarded(fake) -> None:
    _, nodes = _tree3()
    fake.verdict = lambda prompt, n: "not json" if "Step 2 (" in prompt else verdict()
    (d,), requests = verify(fake, [("t", nodes, "answer")], config=SailorConfig(max_reverify=1))
    assert not d.kept and d.reason == "ambiguous" and "processing failure" in d.detail
    step2 = [r for r in requests if "Step 2 (" in r.json["messages"][1]["content"]]
    assert len(step2) == 2 * 2  # two attempts, each one reply + one repair
    fake2 = FakeSailor()
    fake2.verdict = lambda prompt, n: verdict(ambiguity="intrinsic") if "Step 3 (" in prompt else verdict()
    (d2,), _ = verify(fake2, [("t", nodes, "answer")])
    assert not d2.kept and d2.reason == "ambiguous"


def test_structured_requests_carry_the_verdict_schema(fake) -> None:
    _, nodes = _tree3()
    _, requests = verify(fake, [("t", nodes[:1], "answer")])
    rf = requests[0].json["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["name"] == "StepVerdict"
    props = rf["json_schema"]["schema"]["properties"]
    assert props["action"]["enum"] == ["supported", "unsupported", "contradicted"] or "action" in json.dumps(
        props
    )

"""The search rules of §4.1, each against a worked example: DF-FPU, first play, calibration, depth, entropy."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from datadojo.llm.base import TokenLogprob
from datadojo.synth.sailor import SailorConfig
from datadojo.synth.sailor.mcts import (
    Tree,
    branching_width,
    calibrated_value,
    combined_entropy,
    prior_entropy,
    sibling_offset,
    softmax,
    token_entropy,
    uct_df_fpu,
)


def make_tree(**kw) -> Tree:
    args = {"lam": 1.0, "beta": 0.1, "fpu_bonus": 0.1, "fpu_reduction": 0.0, "max_depth": 4} | kw
    return Tree("u", **args)


def test_uct_worked_example() -> None:
    # Q̂ = 0.5, ρ = 0.8, N(v) = 3, N(w) = 1, d = 0.5, λ = 1, β = 0.1:
    # 0.5 + 0.8·sqrt(ln 4 / 2) + 0.1·0.5 = 0.5 + 0.8·0.8325546 + 0.05 = 1.2160437
    assert uct_df_fpu(0.5, 0.8, 3, 1, 0.5, lam=1.0, beta=0.1) == pytest.approx(1.2160437, abs=1e-7)
    # ρ scales the exploration term: a child the pre-judge dislikes gets no exploration bonus
    assert uct_df_fpu(0.5, 0.0, 3, 1, 0.5, lam=1.0, beta=0.1) == pytest.approx(0.55)
    # N(v) = 0: log(1) = 0, no exploration yet
    assert uct_df_fpu(0.3, 0.9, 0, 0, 0.0, lam=2.0, beta=0.0) == pytest.approx(0.3)
    with pytest.raises(ValueError):
        uct_df_fpu(0.0, 0.0, -1, 0, 0.0, lam=1.0, beta=0.0)


def _fpu_tree(**kw) -> tuple[Tree, str, str]:
    tree = make_tree(**({"fpu_mode": "constant"} | kw))
    a = tree.add_child(tree.root, strategy="statistics", code="a", rho=0.3)
    b = tree.add_child(tree.root, strategy="schema_inspection", code="b", rho=0.9)
    a.executed = True
    tree.root.n, a.n, a.w = 3, 3, 2.7  # A has been visited three times with mean value 0.9
    return tree, a.id, b.id


def test_first_play_value_changes_the_selection() -> None:
    tree, a, b = _fpu_tree()
    # Unvisited B is valued ρ + Δ − δ = 0.9 + 0.1 = 1.0 (first play), not 0.
    assert tree.nodes[b].q_hat(0.1, 0.0) == pytest.approx(1.0)
    assert tree.select_child(tree.root).id == b
    terms = {c["id"]: c for c in tree.selections[-1].candidates}
    # UCT(B) = 1.0 + 0.9·sqrt(ln 4) + 0.1·0.25 = 1.0 + 1.0596 + 0.025; UCT(A) = 0.9 + 0.3·sqrt(ln 4 / 4) + 0.025
    assert terms[b]["uct"] == pytest.approx(1.0 + 0.9 * math.sqrt(math.log(4)) + 0.025)
    assert terms[a]["uct"] == pytest.approx(0.9 + 0.3 * math.sqrt(math.log(4) / 4) + 0.025)
    # the reference code's behaviour (FPU branch never ran: unvisited valued 0) would have picked A
    assert uct_df_fpu(0.0, 0.9, 3, 0, 0.25, lam=1.0, beta=0.1) < terms[a]["uct"]
    # a large first-play reduction δ makes the proven branch win again: the rule is what decides
    tree2, a2, _ = _fpu_tree(fpu_reduction=1.5)
    assert tree2.select_child(tree2.root).id == a2


def test_sibling_offset_first_play_uses_the_visited_siblings_outcomes() -> None:
    # S_v = {A, C}: A judged ρ=0.9 but its probes backed up 0.7 on average; C judged 0.4, backed up 0.2.
    # Δ_v = mean(0.7 − 0.9, 0.2 − 0.4) = −0.2: the judge has been 0.2 too optimistic at this state.
    assert sibling_offset([(0.7, 0.9), (0.2, 0.4)]) == pytest.approx(-0.2)
    assert sibling_offset([]) is None

    def tree_with(mode: str) -> tuple[Tree, str, str]:
        tree = make_tree(fpu_mode=mode, beta=0.0)
        a = tree.add_child(tree.root, strategy="statistics", code="a", rho=0.9)
        c = tree.add_child(tree.root, strategy="statistics", code="c", rho=0.4)
        b = tree.add_child(tree.root, strategy="schema_inspection", code="b", rho=0.8)
        a.executed = c.executed = True
        a.n, a.w, c.n, c.w = 1, 0.7, 1, 0.2
        tree.root.n = 2
        return tree, a.id, b.id

    sib, a, b = tree_with("sibling")
    assert sib.fpu_delta(sib.root) == pytest.approx(-0.2)
    chosen = sib.select_child(sib.root)
    terms = {c["id"]: c for c in sib.selections[-1].candidates}
    assert terms[b]["q"] == pytest.approx(0.8 - 0.2)  # ρ_B + Δ_v − δ
    assert sib.selections[-1].fpu_delta == pytest.approx(-0.2)
    # UCT(A) = 0.7 + 0.9·sqrt(ln 3 / 2) = 1.3670; UCT(B) = 0.6 + 0.8·sqrt(ln 3) = 1.4385 → B
    assert chosen.id == b
    assert terms[a]["uct"] == pytest.approx(0.7 + 0.9 * math.sqrt(math.log(3) / 2))
    const, _, b2 = tree_with("constant")
    const.select_child(const.root)
    assert {c["id"]: c for c in const.selections[-1].candidates}[b2]["q"] == pytest.approx(0.9)  # 0.8 + 0.1
    # with no visited sibling, Δ falls back to fpu_bonus
    fresh = make_tree(fpu_mode="sibling")
    fresh.add_child(fresh.root, code="x", rho=0.5)
    assert fresh.fpu_delta(fresh.root) == pytest.approx(0.1)


def test_sibling_offset_changes_a_selection() -> None:
    # One visited sibling A (ρ_A, Q̂_A), one untried B (ρ_B); λ = 0.1, β = 0, N(v) = 1.
    def pick(mode: str, rho_a: float, q_a: float, rho_b: float) -> str:
        tree = make_tree(fpu_mode=mode, beta=0.0, lam=0.1)
        a = tree.add_child(tree.root, code="a", rho=rho_a)
        tree.add_child(tree.root, code="b", rho=rho_b)
        a.executed, a.n, a.w, tree.root.n = True, 1, q_a, 1
        return "a" if tree.select_child(tree.root).id == a.id else "b"

    # The judge over-rated A (0.9 → 0.8): calibrated, B's 0.75 is worth 0.65 and the proven A wins
    # (UCT 0.65 + 0.1·0.75·√ln2 = 0.712 < 0.8 + 0.1·0.9·√(ln2/2) = 0.853); constant Δ would take B (0.912).
    assert (pick("sibling", 0.9, 0.8, 0.75), pick("constant", 0.9, 0.8, 0.75)) == ("a", "b")
    # The judge under-rated A (0.3 → 0.8): B's 0.5 is worth 1.0 and B is tried (1.042 > 0.818);
    # constant Δ leaves B at 0.6 (0.642) and exploits A.
    assert (pick("sibling", 0.3, 0.8, 0.5), pick("constant", 0.3, 0.8, 0.5)) == ("b", "a")


def test_dual_feedback_calibrates_the_backed_up_value() -> None:
    assert calibrated_value(0.8, 0.2, 0.5) == pytest.approx(0.5)
    assert calibrated_value(0.8, 0.2, 1.0) == pytest.approx(0.2)
    assert calibrated_value(0.8, 0.2, 0.0) == pytest.approx(0.8)
    tree = make_tree()
    w = tree.add_child(tree.root, code="x", rho=0.8)
    assert w.q_hat(0.1, 0.0) == pytest.approx(0.9)  # before the probe runs: first play from ρ
    w.executed, w.post = True, 0.2
    tree.backup(w, calibrated_value(w.rho, w.post, 0.5))
    # after: Q̂ is the calibrated value — a probe the pre-judge liked but whose observation was poor drops
    assert w.q_hat(0.1, 0.0) == pytest.approx(0.5) and tree.root.n == 1 and tree.root.w == pytest.approx(0.5)


def test_depth_term_is_normalized() -> None:
    tree = make_tree(max_depth=4, beta=1.0)
    a = tree.add_child(tree.root, code="a")
    b = tree.add_child(a, code="b")
    assert tree.normalized_depth(a) == 0.25 and tree.normalized_depth(b) == 0.5
    a.executed = True
    terms = tree.uct_terms(a, b)
    assert terms["depth"] == 0.5 and terms["uct"] == pytest.approx(b.q_hat(0.1, 0.0) + 0.5)


def test_softmax_and_prior_entropy_worked_examples() -> None:
    assert prior_entropy([0.5, 0.5, 0.5], 0.2) == pytest.approx(1.0)  # indistinguishable: widest
    assert prior_entropy([0.7], 0.2) == 0.0 and prior_entropy([], 0.2) == 0.0
    # ρ = (1, 0), T_p = 0.2: π = (1/(1+e^-5), e^-5/(1+e^-5)) = (0.993307, 0.006693)
    p = 1 / (1 + math.exp(-5))
    assert softmax([1.0, 0.0], 0.2) == pytest.approx([p, 1 - p])
    expected = -(p * math.log(p) + (1 - p) * math.log(1 - p)) / math.log(2)  # = 0.05795
    assert prior_entropy([1.0, 0.0], 0.2) == pytest.approx(expected) and expected == pytest.approx(
        0.05795, abs=1e-4
    )
    # a higher temperature flattens π: more uncertainty
    assert prior_entropy([1.0, 0.0], 1.0) > prior_entropy([1.0, 0.0], 0.2)


@given(st.lists(st.floats(0, 1), min_size=2, max_size=8), st.floats(0.05, 5))
def test_prior_entropy_is_normalized(rhos: list[float], t: float) -> None:
    assert 0.0 <= prior_entropy(rhos, t) <= 1.0 + 1e-12


def test_token_entropy_from_logprobs() -> None:
    even = TokenLogprob("a", math.log(0.5), (("a", math.log(0.5)), ("b", math.log(0.5))))
    sure = TokenLogprob("{", 0.0, ())
    skewed = TokenLogprob("x", math.log(0.9), (("x", math.log(0.9)), ("y", math.log(0.1))))
    assert token_entropy([even, sure]) == pytest.approx(1.0)  # the token without alternatives is skipped
    h_skew = -(0.9 * math.log(0.9) + 0.1 * math.log(0.1)) / math.log(2)  # 0.469
    assert token_entropy([skewed]) == pytest.approx(h_skew)
    assert token_entropy([even, skewed]) == pytest.approx((1 + h_skew) / 2)
    assert token_entropy([sure]) is None and token_entropy(None) is None and token_entropy(()) is None
    assert combined_entropy(0.2, None, 0.5) == 0.2 and combined_entropy(0.2, 1.0, 0.5) == pytest.approx(0.6)


def test_branching_width_widens_uncertain_and_narrows_obvious_states() -> None:
    assert branching_width(1.0, 1, 3, 5) == 3
    assert branching_width(0.0, 1, 3, 5) == 1
    assert branching_width(0.5, 1, 3, 5) == 2
    assert branching_width(0.74, 1, 3, 5) == 2 and branching_width(0.76, 1, 3, 5) == 3
    assert branching_width(1.0, 1, 3, 2) == 2  # never more than the candidates
    assert branching_width(1.0, 1, 3, 0) == 0


def test_closed_nodes_are_not_selected_and_backup_reaches_the_root() -> None:
    tree = make_tree(max_depth=1)
    a = tree.add_child(tree.root, code="a", rho=0.9)
    b = tree.add_child(tree.root, code="b", rho=0.1)
    a.executed = True
    tree.backup(a, 0.7)
    assert tree.closed(a)  # ran and sits at max depth
    assert tree.select_child(tree.root).id == b.id  # only B is open
    assert [c["id"] for c in tree.selections[-1].candidates] == [b.id]
    b.executed = True
    tree.backup(b, 0.4)
    assert tree.closed(tree.root) and tree.select_child(tree.root) is None
    assert tree.root.n == 2 and tree.root.w == pytest.approx(1.1)
    assert {n.id for n in tree.leaves()} == {a.id, b.id}


def test_config_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match="k_min"):
        SailorConfig(k_min=4, k_max=2)
    with pytest.raises(ValueError, match="calibration"):
        SailorConfig(calibration=1.5)
    with pytest.raises(ValueError, match="max_nodes"):
        SailorConfig(max_nodes=0)


def test_beta_flips_a_selection_by_the_depth_reached_below_each_child() -> None:
    # Root → A (ran; its child A1 ran too: reached depth 2) and B (ran; nothing below: reached depth 1).
    # Q̂(A) = 0.5, Q̂(B) = 0.6, ρ = 0 for both (no exploration term), max_depth = 4.
    def pick(beta: float, depth_term: str = "reached") -> str:
        tree = make_tree(beta=beta, **({} if depth_term == "reached" else {"depth_term": depth_term}))
        a = tree.add_child(tree.root, code="a", rho=0.0)
        b = tree.add_child(tree.root, code="b", rho=0.0)
        a1 = tree.add_child(a, code="a1", rho=0.0)
        a.executed = b.executed = a1.executed = True
        a.n, a.w, b.n, b.w, a1.n, a1.w, tree.root.n = 2, 1.0, 1, 0.6, 1, 0.5, 3
        chosen = tree.select_child(tree.root)
        return "a" if chosen.id == a.id else "b"

    # β = 0: UCT(A) = 0.5 < UCT(B) = 0.6 → B. β = 1: 0.5 + 0.5 = 1.0 > 0.6 + 0.25 = 0.85 → A.
    assert (pick(0.0), pick(1.0), pick(5.0)) == ("b", "a", "a")
    tree = make_tree(beta=1.0)
    a, b = tree.add_child(tree.root, code="a"), tree.add_child(tree.root, code="b")
    a1 = tree.add_child(a, code="a1")
    a.executed = b.executed = a1.executed = True
    a.n = b.n = a1.n = tree.root.n = 1
    tree.select_child(tree.root)
    terms = {c["id"]: c for c in tree.selections[-1].candidates}
    assert (terms[a.id]["depth"], terms[b.id]["depth"]) == (0.5, 0.25)  # the d_w recorded in tree.jsonl
    # the node's own depth is the same for both children: β cannot change anything (the defect, kept as a setting)
    assert (pick(0.0, "node"), pick(1.0, "node"), pick(5.0, "node")) == ("b", "b", "b")
    # an unvisited or childless node's reached depth is its own
    tree = make_tree()
    c = tree.add_child(tree.root, code="c")
    tree.add_child(c, code="c1")  # not executed: does not count
    assert tree.reached_depth(c) == 1 and tree.depth_value(c) == 0.25
    with pytest.raises(ValueError, match="depth_term"):
        make_tree(depth_term="raw")

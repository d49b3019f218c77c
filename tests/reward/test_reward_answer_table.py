"""The adversarial answer table (issue 28) against the three users of the comparison core, and the
defects of issue 21 it covers: the consistency pre-check (defect 1) and the SciData QA scorer (defect 4).

Every pair is what a real model writes; the verdict is the careful grader's (datadojo.testing.answers).
On the code before the core, 20+ of the pairs fail (percent vs percent, the 3% boundary, n=100 beside
the value, ranges, 1.2M, 1.234,5, wrong names beside the right number, …).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from datadojo.bench.scidata import SciData
from datadojo.compare.core import compare_answers, find_numbers, within
from datadojo.compare.matchers import MatchConfig, match_answer
from datadojo.compare.scientific import ScientificConfig, match_scientific
from datadojo.eval.harness import decided_by_counts
from datadojo.eval.report import render_html, render_markdown
from datadojo.llm import load_backend
from datadojo.reward import default_answer_check
from datadojo.runs import UsageLedger
from datadojo.synth.datamind.config import DataMindConfig
from datadojo.synth.datamind.consistency import judge_one, rule_check
from datadojo.testing.answers import ANSWER_PAIRS, TOLERANCE, AnswerPair
from datadojo.testing.judge import DisagreeingJudge
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import Action, Task, Trajectory, Turn


def _id(p: AnswerPair) -> str:
    return f"{p.kind}:{p.prediction}|{p.reference}"


@pytest.mark.parametrize("pair", ANSWER_PAIRS, ids=_id)
def test_the_three_users_of_the_core_agree_with_the_careful_grader(pair: AnswerPair) -> None:
    q = pair.question
    m = match_answer(pair.prediction, pair.reference, config=MatchConfig(rel_tol=TOLERANCE), question=q)
    assert (m.correct, m.decided) == (pair.correct, pair.decided), f"matcher: {m.reason} ({pair.section})"
    s = match_scientific(pair.prediction, pair.reference, ScientificConfig(rel_tol=TOLERANCE), question=q)
    assert (s.correct, s.decisive) == (pair.correct, pair.decided), f"scientific: {s.reason} ({pair.section})"
    r = rule_check([pair.reference, pair.prediction], TOLERANCE, question=q)
    assert r.consistent == pair.consistent, f"consistency: {r.reason} ({pair.section})"
    core = compare_answers(pair.prediction, pair.reference, question=q, rel_tol=TOLERANCE)
    assert (core.correct, core.decided) == (pair.correct, pair.decided), core.reason


def test_the_table_covers_every_way_of_writing_the_issue_names() -> None:
    kinds = {p.kind for p in ANSWER_PAIRS}
    assert {"percent", "tolerance", "context", "hedge", "magnitude", "sign", "locale", "units", "entity",
            "rounding"} <= kinds  # fmt: skip
    assert any(not p.correct for p in ANSWER_PAIRS) and any(not p.decided for p in ANSWER_PAIRS)


def test_the_tolerance_boundary_is_inclusive_in_both_matchers() -> None:
    assert within(1.03, 1.0, 0.03) and not within(1.0300001, 1.0, 0.03)
    assert match_answer("1.03", "1.0").correct
    assert match_scientific("1.01", "1.0").correct  # its own 1%
    assert not match_scientific("1.0101", "1.0").correct


def test_the_reward_check_rejects_percent_a_hundred_times_apart() -> None:
    task = Task(id="t", question="What share of orders were late?", answer="12.5%")
    check = default_answer_check(task, "0.125%")
    assert not check.correct and check.decided
    hedged = default_answer_check(task.model_copy(update={"answer": "46"}), "Between 40 and 46")
    assert not hedged.correct and not hedged.decided


def test_magnitude_letters_are_a_setting() -> None:
    assert match_answer("1.2M", 1200000).correct
    assert not match_answer("1.2M", 1200000, config=MatchConfig(magnitude_letters="never")).correct
    assert match_answer("1.2 M", 1200000, config=MatchConfig(magnitude_letters="always")).correct
    assert find_numbers("5 M NaCl")[0].unit is not None  # spaced: molar, by default


# --- issue 21 defect 1: the consistency pre-check -------------------------------------------------------

DEFECT_1 = [
    ["-5", "5", "5"],
    ["1.5", "15", "1.5"],
    ["12.5%", "125%", "12.5%"],
    ["5%", "5", "5"],
    ["3.14e-2", "3.14e2", "3.14e-2"],
    [
        "-0.8 (strong negative correlation)",
        "0.8 (strong negative correlation)",
        "-0.8 (strong negative correlation)",
    ],
    ["Q1 has the highest sales: 50.2", "Q3 has the highest sales: 50.2", "Q1 has the highest sales: 50.2"],
    ["Store_12 ranks first with 830", "Store_7 ranks first with 830", "Store_12 ranks first with 830"],
]


@pytest.mark.parametrize("answers", DEFECT_1, ids=lambda a: a[1])
def test_the_pre_check_sends_answers_that_differ_to_the_judge(answers: list[str]) -> None:
    assert rule_check(answers).consistent is None


def test_the_pre_check_still_decides_what_it_is_certain_of() -> None:
    assert rule_check(["1.2M", "1,200,000", "1.2 million"]).consistent is True
    assert rule_check(["12.5%", "12.50%", "12.5 %"]).consistent is True


def _traj(sample: int, answer: str) -> Trajectory:
    turn = Turn(raw=f"<answer>{answer}</answer>", thought="", action=Action(kind="answer", text=answer))
    return Trajectory(
        task_id="q", sample=sample, turns=[turn], final_answer=answer, stop_reason="answer", extra={"round": 0},
        prompt=[{"role": "system", "content": "s"}, {"role": "user", "content": "q"}],
    )  # fmt: skip


@pytest.mark.parametrize("answers", DEFECT_1[-2:], ids=["Q1/Q3", "Store_12/Store_7"])
async def test_the_judge_decides_and_its_no_stands(answers: list[str]) -> None:
    double = DisagreeingJudge(careful=True, consistent=False)
    query = Task(id="q", question="Which quarter had the highest sales?")
    trajs = [_traj(i, a) for i, a in enumerate(answers)]
    with ScriptedLLMServer(double) as srv:
        backend = load_backend(f"openai:judge@{srv.base_url}")
        verdict = await judge_one(
            query, 0, trajs, backend, DataMindConfig(), UsageLedger(Path("unused-usage.jsonl"), "judge")
        )
        await backend.aclose()
    assert (verdict.method, verdict.consistent) == ("llm", False)
    assert double.seen == [("consistency", "", "")]


# --- issue 21 defect 4: the SciData QA scorer -----------------------------------------------------------


def _qa_tasks(tmp_path: Path, references: list[str], mode: str) -> list[Task]:
    (tmp_path / "repo").mkdir(exist_ok=True)
    rows = [
        {"id": f"qa-{i}", "question": f"question {i}", "files": [{"path": "repo", "kind": "dir"}], "answer": ref,
         "answer_kind": "sailor_qa", "source": "scidata", "category": "qa", "difficulty": "L1",
         "extra": {"track": "qa", "seed_id": f"s{i}", "intent": "x"}}
        for i, ref in enumerate(references)
    ]  # fmt: skip
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return list(SciData().load(path, qa_scoring=mode))


async def _scored_by_lenient_judge(tasks: list[Task], answers: list[str]) -> list[Any]:
    """SciData scores under rule+judge with a judge that says "correct" to every answer."""
    double = DisagreeingJudge(rule=lambda cand, ref: False)
    with ScriptedLLMServer(double) as srv:
        backend = load_backend(f"openai:judge@{srv.base_url}")
        verdicts = await SciData().gather_verdicts(zip(tasks, answers, strict=True), backend, concurrency=1)
        await backend.aclose()
    scorer = SciData().with_verdicts(verdicts)
    return [scorer.score(t, a) for t, a in zip(tasks, answers, strict=True)]


WRONG_NAMES = [
    ("The warmest month is January with 25.3 °C", "The warmest month is July with 25.3 °C"),
    ("Site_7 has the highest mean, 12.4 mg/L", "Site_3 has the highest mean, 12.4 mg/L"),
    ("a.csv", "b.csv"),
]


async def test_a_wrong_name_is_wrong_whatever_a_lenient_judge_says(tmp_path: Path) -> None:
    tasks = _qa_tasks(tmp_path, [r for r, _ in WRONG_NAMES], "rule+judge")
    answers = [a for _, a in WRONG_NAMES]
    scores = await _scored_by_lenient_judge(tasks, answers)
    assert [s.parts["judge"]["correct"] for s in scores] == [True, True, True]
    assert [(s.correct, s.parts["decided_by"]) for s in scores] == [(False, "rule")] * 3
    assert all("wrong entity" in s.reason for s in scores)


async def test_the_judge_decides_where_the_rule_is_not_certain(tmp_path: Path) -> None:
    refs = ["46 °C", "0.76", "January, 25.3 °C"]
    answers = ["Between 40 and 46 °C", "0.76 or 0.81", "25.3 °C"]
    tasks = _qa_tasks(tmp_path, refs, "rule+judge")
    # the rule's guesses here are "wrong"; a judge that says "correct" must win (and would lose if the rule
    # were taken as certain)
    scores = await _scored_by_lenient_judge(tasks, answers)
    assert [s.parts["rule"]["decisive"] for s in scores] == [False, False, False]
    assert [(s.correct, s.parts["decided_by"]) for s in scores] == [(True, "judge")] * 3


def test_without_a_judge_guesses_are_counted_as_undecided(tmp_path: Path) -> None:
    refs = ["46 °C", "2.89 mg/L", "a.csv"]
    answers = ["Between 40 and 46 °C", "2890 µg/L", "b.csv"]
    tasks = _qa_tasks(tmp_path, refs, "rule")
    scores = [SciData().score(t, a) for t, a in zip(tasks, answers, strict=True)]
    assert [s.correct for s in scores] == [False, True, False]
    rows = [
        {"answer": a, "stop_reason": "answer", "parts": s.parts} for a, s in zip(answers, scores, strict=True)
    ]
    rows.append({"answer": None, "stop_reason": "missing", "parts": {}})
    decisions = decided_by_counts(rows)
    assert decisions == {"decided_by": {"rule": 3}, "undecided": 1, "undecided_share": pytest.approx(1 / 3)}
    summary = {"benchmark": "scidata", "model": "m", "n_trials": 1, "n_tasks": 3, "ks": [1], "metrics": {},
               "decisions": decisions}  # fmt: skip
    html, md = render_html(summary, []), render_markdown(summary, [])
    assert 'data-metric="undecided_share"' in html and "33.33% (1)" in html and "rule 3" in html
    assert "undecided share" in md and "verdicts decided by" in md


# --- RL answer reward under rule+judge ------------------------------------------------------------------


async def test_the_reward_asks_the_judge_only_when_the_rule_is_not_certain() -> None:
    from datadojo.compare.judge import LLMJudge
    from datadojo.reward import DataMindReward

    def answered(text: str) -> Trajectory:
        turn = Turn(raw=f"<think>Done.</think>\n<answer>{text}</answer>", thought="Done.",
                    action=Action(kind="answer", text=text))  # fmt: skip
        return Trajectory(task_id="t", sample=0, turns=[turn], final_answer=text, stop_reason="answer",
                          prompt=[{"role": "user", "content": "q"}])  # fmt: skip

    task = Task(id="t", question="What is the mean?", answer="46")
    double = DisagreeingJudge(careful=False, rule=lambda cand, ref: False)  # says correct to everything
    with ScriptedLLMServer(double) as srv:
        backend = load_backend(f"openai:judge@{srv.base_url}?max_retries=0")
        reward = DataMindReward(judge=LLMJudge(backend), rule_first=True)
        certain = await reward.ascore(answered("-46"), task)  # the rule is certain: no request
        assert len(srv.requests) == 0
        hedged = await reward.ascore(answered("Between 40 and 46"), task)  # a hedge: the judge decides
        await backend.aclose()
    assert (certain.answer, certain.answer_decided) == (0.0, True)
    assert hedged.answer == 1.0 and hedged.answer_source == "judge:judge" and len(srv.requests) == 1


def test_a_column_of_numbers_is_read_whole_and_is_not_an_answer() -> None:
    # a model that dumps a column of numbers: work per number must not grow with the answer's length
    # (every number read, none taken as the answer)
    short, long_ = "1, " * 500, "1, " * 2000
    assert len(find_numbers(long_)) == 4 * len(find_numbers(short)) == 2000
    assert not match_scientific(long_, "5 mg/L").correct and not match_answer(long_, 5).correct


def test_the_eval_header_names_who_decided() -> None:
    from rich.console import Console

    from datadojo.cli.eval import _summary_table

    summary = {"benchmark": "scidata", "model": "m", "n_trials": 1, "n_tasks": 4, "ks": [1], "metrics": {},
               "decisions": {"decided_by": {"judge": 1, "rule": 3}, "undecided": 2, "undecided_share": 0.5}}  # fmt: skip
    console = Console(width=120, record=True)
    console.print(_summary_table(summary))
    text = console.export_text()
    assert "verdicts decided by" in text and "judge 1, rule 3" in text and "50.00% (2)" in text


# --- issue 39 item 5: an undecided guess of "correct" still goes to the judge ---------------------------


async def test_the_reward_asks_the_judge_when_the_undecided_guess_says_correct() -> None:
    """A strict judge (0 for everything) against a rule whose undecided guess is "correct": the judge is
    asked once per undecided answer and its 0 stands (skipping it would pay 1.0 for an unchecked answer)."""
    from datadojo.compare.judge import LLMJudge
    from datadojo.reward import DataMindReward

    def answered(text: str) -> Trajectory:
        turn = Turn(raw=f"<think>Done.</think>\n<answer>{text}</answer>", thought="Done.",
                    action=Action(kind="answer", text=text))  # fmt: skip
        return Trajectory(task_id="t", sample=0, turns=[turn], final_answer=text, stop_reason="answer",
                          prompt=[{"role": "user", "content": "q"}])  # fmt: skip

    task = Task(id="t", question="On which day did sales peak?", answer="2021-03-04")
    guess = default_answer_check(task, "04/03/2021")  # day/month order ambiguous: a guess of "correct"
    assert (guess.correct, guess.decided) == (True, False)
    double = DisagreeingJudge(rule=lambda cand, ref: True)  # answers the opposite: 0 for everything
    with ScriptedLLMServer(double) as srv:
        backend = load_backend(f"openai:judge@{srv.base_url}?max_retries=0")
        reward = DataMindReward(judge=LLMJudge(backend), rule_first=True)
        undecided = await reward.ascore(answered("04/03/2021"), task)
        calls_after_undecided = len(srv.requests)
        certain = await reward.ascore(answered("2021-03-04"), task)  # identical: decided, no request
        await backend.aclose()
    assert calls_after_undecided == 1 and len(srv.requests) == 1
    assert (undecided.answer, undecided.answer_source) == (0.0, "judge:judge")
    assert (certain.answer, certain.answer_decided) == (1.0, True)


async def test_scidata_rule_and_judge_lets_the_judge_decide_an_undecided_correct_guess(
    tmp_path: Path,
) -> None:
    tasks = _qa_tasks(tmp_path, ["2021-03-04", "5.3%"], "rule+judge")
    answers = ["04/03/2021", "Revenue fell by 5.3%"]  # both undecided guesses of "correct"
    double = DisagreeingJudge(rule=lambda cand, ref: True)  # a strict judge: 0 for everything
    with ScriptedLLMServer(double) as srv:
        backend = load_backend(f"openai:judge@{srv.base_url}")
        verdicts = await SciData().gather_verdicts(zip(tasks, answers, strict=True), backend, concurrency=1)
        await backend.aclose()
    assert len(srv.requests) == 2
    scores = [SciData().with_verdicts(verdicts).score(t, a) for t, a in zip(tasks, answers, strict=True)]
    assert [(s.parts["rule"]["correct"], s.parts["rule"]["decisive"]) for s in scores] == [(True, False)] * 2
    assert [(s.correct, s.parts["decided_by"]) for s in scores] == [(False, "judge")] * 2

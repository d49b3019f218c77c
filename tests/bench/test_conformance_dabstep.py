"""DABstep conformance with the leaderboard's ``scorer.py`` (Space ``adyen/DABstep``,
``dabstep_benchmark/evaluation/scorer.py``: ``question_scorer(agent_answer, gold)``).

Every expected verdict below was worked out by hand from the official code's rules, not by running
DataDojo. The rules, in the order the official function applies them:

* both sides ``.strip().lower()``;
* ``is_numeric_with_commas`` (``^\\$?(?:\\d{1,3}(?:,\\d{3})+(?:\\.\\d+)?|\\d+[.,]\\d+)$``) true for either
  side → both through ``extract_numeric`` (``,`` and ``$`` removed, first ``(\\d*\\.\\d+|\\d+\\.?\\d*)%?``:
  no sign, ``%`` ignored) and ``compare_numeric``; no number on a side → False;
* else ``,`` or ``;`` on either side → ``compare_lists`` (one ``[``/``]`` stripped, split at ``[,;]``,
  empty items dropped, sorted as text; equal → True; other length → False; else item-wise
  ``question_scorer``);
* else both contain a number → ``compare_numeric``: equal; both < 1 → ``isclose(rel 1e-4, abs 1e-4)``;
  round both to the fewer of their ``str()`` decimals → equal; else ``isclose(rel 1e-4, abs 1e-4)``;
* else ``compare_strings``: equal after ``re.sub(r'[^\\w]', '', …)``; one side one word → word-set subset
  either way; else ``SequenceMatcher(None, a, b).ratio() > 0.95``.

The references are the released dev answers (``data/tasks/dev.jsonl``: tasks 5, 49, 70, 1273, 1464,
1681, 1871, 2697) and the leaderboard's answer types.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datadojo.bench import get_benchmark
from datadojo.bench.dabstep import CONTEXT_FILES, question_scorer
from datadojo.types import Task

# (agent answer, gold answer, official verdict, why)
CASES: list[tuple[str, str, bool, str]] = [
    # task 5 (country code)
    ("NL", "NL", True, "identical"),
    ("nl", "NL", True, "lower-cased"),
    ("  NL\n", "NL", True, "stripped"),
    ("The country is NL.", "NL", True, "gold is one word: its word set is a subset of the answer's"),
    ("BE", "NL", False, "different word"),
    # task 49 ('X. Y' options)
    ("B. BE", "B. BE", True, "identical"),
    ("BE", "B. BE", True, "answer is one word contained in the gold's words {b, be}"),
    ("C. ES", "B. BE", False, "two words each, no subset test; ratio of 'c. es'/'b. be' is 0.6"),
    # task 70
    ("Not applicable.", "Not Applicable", True, "equal once punctuation and case are gone"),
    ("no", "Not Applicable", False, "'no' is not a word of {not, applicable}"),
    # task 1273 (6 decimals)
    ("0.120132", "0.120132", True, "identical"),
    ("0.1201", "0.120132", True, "both < 1: |diff| 3.2e-5 <= 1e-4"),
    ("0.12", "0.120132", False, "both < 1: |diff| 1.32e-4 > 1e-4"),
    ("0.120132 EUR", "0.120132", True, "first number of the answer"),
    ("€0.120132", "0.120132", True, "first number; currency ignored"),
    # task 1871 (a negative reference): extract_numeric has no sign
    ("-0.94000000000005", "-0.94000000000005", True, "identical"),
    ("0.94", "-0.94000000000005", True, "sign dropped on both sides, then |diff| 5e-14"),
    ("-0.95", "-0.94000000000005", False, "0.95 vs 0.94: |diff| 0.01 > 1e-4"),
    # task 2697 ({card_scheme}:{fee}): only the number is compared
    ("E:13.57", "E:13.57", True, "identical"),
    ("F:13.57", "E:13.57", True, "no comma number, no list: both contain 13.57, the letter is never read"),
    ("E:13.6", "E:13.57", True, "13.57 rounded to 1 decimal ('13.6') is 13.6"),
    ("E:13.5", "E:13.57", False, "13.57 rounded to 1 decimal is 13.6, not 13.5; diff 0.07 > 1e-4 relative"),
    # task 1464/1681 (lists of fee ids)
    ("741, 709, 454", "741, 709, 454", True, "identical"),
    ("454, 709, 741", "741, 709, 454", True, "both sorted before comparing"),
    ("[741, 709, 454]", "741, 709, 454", True, "one pair of brackets stripped"),
    ("741; 709; 454", "741, 709, 454", True, "';' splits too"),
    ("741, 709", "741, 709, 454", False, "other length"),
    ("741, 709, 454, ", "741, 709, 454", True, "an empty trailing item is dropped"),
    ("10, 9", "9.0, 10.0", True, "sorted as text, then '10' vs '10.0' and '9' vs '9.0' as numbers"),
    ("741, 709, 455", "741, 709, 454", False, "454 vs 455 item-wise"),
    # numbers (task 1: 138236 transactions)
    ("138,236", "138236", True, "comma number: separators removed"),
    (
        "138236.4",
        "138236",
        True,
        "decimal → numeric; same 1 decimal ('138236.0'), diff 0.4 <= 1e-4 × 138236.4",
    ),
    ("138240", "138236", True, "plain integers: diff 4 <= 1e-4 × 138240 = 13.8"),
    ("138250", "138236", False, "diff 14 > 13.825"),
    ("There are 138236 transactions", "138236", True, "first number of the sentence"),
    ("In 2023 there were 138236", "138236", False, "the first number is 2023"),
    ("12.3", "12.34", True, "rounded to the coarser 1 decimal: 12.3 == 12.3"),
    ("12", "12.34", False, "str(12.0) has 1 decimal: 12.0 vs 12.3"),
    ("0.96", "1.0", True, "not both below 1: rounded to 1.0's one decimal, 0.96 is 1.0"),
    ("0.96", "1", True, "str(1.0) also has one decimal"),
    ("0.94", "1", False, "0.94 rounds to 0.9"),
    # percentages: the released answers are percentages, '%' is ignored, fractions are wrong
    ("73.15%", "73.15", True, "'%' ignored"),
    ("0.7315", "73.15", False, "a fraction is not the percentage"),
    ("73.15", "0.7315", False, "nor the other way round"),
    # empty-list answers ('reply with an empty string')
    ("", "", True, "both empty"),
    ("Not Applicable", "", False, "ratio 0 against the empty string"),
    # free text
    ("GlobalCard", "globalcard", True, "case"),
    ("Global Card", "GlobalCard", True, "equal once spaces are removed"),
    ("SwiftCharge", "GlobalCard", False, "different words"),
]


@pytest.mark.parametrize(("answer", "gold", "verdict", "why"), CASES)
def test_question_scorer_verdicts(answer: str, gold: str, verdict: bool, why: str) -> None:
    assert question_scorer(answer, gold) is verdict, why


def test_none_is_wrong() -> None:
    assert question_scorer(None, "NL") is False


def _dev_task(answer: str, tid: str = "5", level: str = "easy") -> Task:
    return Task(
        id=tid, question="q", answer=answer, answer_kind="dabstep", category=level, extra={"hidden": False}
    )


@pytest.mark.parametrize(("answer", "gold", "verdict", "why"), CASES[:12])
def test_benchmark_score_uses_the_rule(answer: str, gold: str, verdict: bool, why: str) -> None:
    s = get_benchmark("dabstep").score(_dev_task(gold), answer)
    assert s.correct is verdict and s.score == float(verdict), why


def test_totals_per_level_and_withheld_answers() -> None:
    bench = get_benchmark("dabstep")
    hidden = Task(
        id="9", question="q", answer=None, answer_kind="dabstep", category="hard", extra={"hidden": True}
    )
    items = [
        (_dev_task("NL", "5"), bench.score(_dev_task("NL", "5"), "NL")),
        (_dev_task("E:13.57", "2697", "hard"), bench.score(_dev_task("E:13.57", "2697", "hard"), "E:99")),
        (_dev_task("1, 2", "1464", "hard"), bench.score(_dev_task("1, 2", "1464", "hard"), "2, 1")),
        (hidden, bench.score(hidden, "anything")),
    ]
    totals = bench.totals(items)
    assert totals["accuracy"] == pytest.approx(2 / 3)  # the withheld item is not in the denominator
    assert totals["hidden"] == 1.0
    assert totals["level:easy"] == 1.0 and totals["level:hard"] == pytest.approx(1 / 2)
    assert items[3][1].parts["hidden"] and not items[3][1].correct


def _layout(root: Path, dev: list[dict], test: list[dict]) -> Path:
    (root / "data" / "tasks").mkdir(parents=True)
    (root / "data" / "context").mkdir(parents=True)
    for name in CONTEXT_FILES:
        (root / "data" / "context" / name).write_text("x\n")
    (root / "data" / "tasks" / "dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in dev))
    (root / "data" / "tasks" / "all.jsonl").write_text("".join(json.dumps(r) + "\n" for r in test))
    return root


DEV = [
    {"task_id": "5", "question": "Which issuing country has the highest number of transactions?",
     "guidelines": "Answer must be just the country code.", "level": "easy", "answer": "NL"},
    {"task_id": "1464", "question": "What is the fee ID or IDs that apply to account_type = R and aci = B?",
     "answer": "", "guidelines": "If the answer is an empty list, reply with an empty string.", "level": "hard"},
]  # fmt: skip
TEST = [
    {"task_id": 1, "question": "How many total transactions are there in the dataset?", "level": "easy",
     "answer": "", "guidelines": "Answer must be just a number."},
    {"task_id": 2, "question": "What is the average transaction amount (in EUR)?", "level": "easy",
     "answer": "", "guidelines": "Answer must be just a number."},
]  # fmt: skip


def test_loader_reads_the_official_layout(tmp_path: Path) -> None:
    root = _layout(tmp_path / "DABstep", DEV, TEST)
    bench = get_benchmark("dabstep")
    dev = list(bench.load(root))
    assert [t.id for t in dev] == ["5", "1464"]
    assert dev[0].answer == "NL" and dev[0].extra["answer_format"] == DEV[0]["guidelines"]
    assert dev[0].files[0].kind == "dir" and Path(dev[0].files[0].path) == root / "data" / "context"
    assert dev[0].category == "easy" and not dev[0].extra["hidden"]
    # in dev.jsonl an empty answer is a released answer (an empty list), not a withheld one
    assert dev[1].answer == "" and not dev[1].extra["hidden"]
    assert bench.score(dev[1], "").correct
    test = list(bench.load(root, split="test"))
    assert [t.id for t in test] == ["1", "2"] and all(t.extra["hidden"] and t.answer is None for t in test)
    # the data folder itself, and a tasks file, are accepted too
    assert [t.id for t in bench.load(root / "data")] == ["5", "1464"]
    assert [t.id for t in bench.load(root / "data" / "tasks" / "all.jsonl")] == ["1", "2"]


def test_loader_errors_name_the_expected_layout(tmp_path: Path) -> None:
    root = _layout(tmp_path / "DABstep", DEV, TEST)
    (root / "data" / "context" / "fees.json").unlink()
    bench = get_benchmark("dabstep")
    with pytest.raises(
        Exception, match=r"fees.json not found.*expected the Hugging Face dataset adyen/DABstep"
    ):
        list(bench.load(root))
    assert len(list(bench.load(root, require_files=False))) == 2
    with pytest.raises(Exception, match=r"tasks/dev.jsonl not found: .*expected the Hugging Face dataset"):
        list(bench.load(tmp_path / "elsewhere"))
    with pytest.raises(Exception, match="unknown split 'train'"):
        list(bench.load(root, split="train"))


def test_submission_record_is_the_leaderboard_format() -> None:
    bench = get_benchmark("dabstep")
    task = Task(id="1", question="q", answer=None, answer_kind="dabstep", extra={"hidden": True})
    assert bench.submission_record(task, " 138236 \n", "steps") == {
        "task_id": "1", "agent_answer": "138236", "reasoning_trace": "steps"
    }  # fmt: skip
    assert bench.submission_record(task, None, "")["agent_answer"] == ""
    assert bench.wants_submission([task]) and not bench.wants_submission([_dev_task("NL")])


def test_the_rule_is_documented_where_it_links() -> None:
    rule = get_benchmark("dabstep").rule
    doc = Path(__file__).resolve().parents[2] / rule.doc.split("#")[0]
    assert f'<a id="{rule.doc.split("#")[1]}"></a>' in doc.read_text(encoding="utf-8")


#: The scorer's own test cases, shipped beside ``scorer.py`` in the Space (a ``tests`` module importing
#: ``..evaluation.scorer``): the official code's verdicts, stated by its authors.
UPSTREAM: list[tuple[str, str, bool]] = [
    ("42", "42", True), ("$42.00", "42", True), ("43", "42", False), ("10,765", "10765", True),
    ("22520", "22520", True),
    ("hello world", "Hello World", True), (" sea  gull ", "seagull", True), ("hello", "world", False),
    ("Other", "Other", True), ("", "Inditex", False), (" ", "Inditex", False),
    ("The average transaction amount is 91.85 EUR.", "91.852", True),
    ("The top 2 merchants account for approx 59.96% of all transactions.", "0.5996", False),
    ("Netherlands", "NL", False), ("", "", True),
    ("1, 2, 3", "1,2,3", True), ("apple; banana; cherry", "apple;banana;cherry", True),
    ("1, 2", "1, 2, 3", False), ("apple; banana", "apple; banana; cherry", False),
    ("uber, spotify, nike, netflix, inditex", "Nike, Netflix, Uber, Inditex, Spotify", True),
    ("a, b, c", "['a', 'b', 'c']", True),
    ("C: 69.36, F: 77.90, B: 86.22, A: 87.79, D: 94.34, G: 115.23",
     "[C: 69.36, F: 77.9, B: 86.22, A: 87.79, D: 94.34, G: 115.23]", True),
    ("[BE: 85.3, IT: 93.82, FR: 98.57, NL: 99.87, LU: 111.42, SE: 114.36, ES: 134.41, GR: 169.92, ]",
     "BE: 85.3, IT: 93.82, FR: 98.57, NL: 99.87, LU: 111.42, SE: 114.36, ES: 134.41, GR: 169.92", True),
    ("42, hello", "42, hello", True), ("42, world", "42, hello", False),
    ("64", "64, 53, 454, 231, 473, 381", False),
    ("3.14", "3.1483", False), ("3.14", "3.20", False), ("1", "1.0", True), ("1.0", "1", True),
    ("0.731495413640441", "0.731495", True), ("C", "C) both ip_address and email_address", True),
    ("0.36706256984345176", "0.3670625698434518", True), ("$0.10", "$0.10 per retry", True),
    ("D", "D) Apples", True), ("D", "A) Oranges", False), ("25.0", "0.250", False),
    ("5.760000", "5.715872", False), ("8.68000000000000", "8.66999999999916", False),
    ("73.15%", "73.1495", True), ("42%", "42", True), ("30%", "30.1", False), ("25", "25%", True),
    ("100%", "100", True), ("0.1%", "0.1", True), ("73%", "74", False), ("90%", "89.99971063977545", True),
    ("7.79%", "7.787407043027865", True),
]  # fmt: skip


@pytest.mark.parametrize(("answer", "gold", "verdict"), UPSTREAM)
def test_the_scorers_own_test_cases(answer: str, gold: str, verdict: bool) -> None:
    assert question_scorer(answer, gold) is verdict

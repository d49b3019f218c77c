"""DataMind synthesis building blocks: taxonomy, query checks, consistency pre-check, rule filters, selection."""

from __future__ import annotations

import json

import pytest

from datadojo.synth.datamind import CATEGORY_NAMES, DataMindConfig, load_taxonomy
from datadojo.synth.datamind.consistency import numbers_agree, rule_best, rule_check
from datadojo.synth.datamind.curation import select
from datadojo.synth.datamind.filters import garbled_reason, mixed_language_reason, run_filters, token_counter
from datadojo.synth.datamind.queries import QueryChecker, query_id
from datadojo.synth.datamind.taxonomy import TaxonomyError, column_counts
from datadojo.types import Action, Observation, Task, Trajectory, Turn

# --- taxonomy -----------------------------------------------------------------------------------------


def test_bundled_taxonomy_has_the_papers_18_categories_with_exemplars_and_workflows():
    tax = load_taxonomy()
    assert tax.names == list(CATEGORY_NAMES) and len(tax.names) == 18
    for c in tax.categories:
        assert 4 <= len(c.exemplars) <= 6 and len(set(c.exemplars)) == len(c.exemplars)
        assert c.workflow and c.answer_form and c.definition
        if c.hard:  # §3.2: finer step-by-step instructions for the hard categories
            assert c.workflow_detailed and c.knowledge("auto") == c.workflow_detailed
        assert c.knowledge("never") == c.workflow
    assert sum(c.hard for c in tax.categories) >= 5


def test_applicability_rules_follow_the_file_columns():
    tax = load_taxonomy()
    no_time = column_counts([(["region", "units"], ["string", "integer"])])
    names = {c.name for c in tax.applicable(no_time)}
    assert "Time-based Calculation" not in names  # needs a date/time column
    assert "Correlation Analysis" not in names  # needs two numeric columns
    assert {"Aggregation", "Counting", "Comparison"} <= names
    with_time = column_counts(
        [(["order_date", "units", "price", "year"], ["datetime", "integer", "float", "integer"])]
    )
    assert with_time.datetime == 2 and with_time.numeric == 2  # a year column is a period, not a measure
    names = {c.name for c in tax.applicable(with_time)}
    assert {"Time-based Calculation", "Correlation Analysis"} <= names


def test_a_bad_taxonomy_file_names_the_file_and_category(tmp_path):
    data = json.loads(json.dumps(load_taxonomy().model_dump()))
    data["categories"][2]["exemplars"] = ["only one"]
    bad = tmp_path / "tax.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(TaxonomyError, match=r"tax\.json.*categories\.2 \(Comparison\)\.exemplars"):
        load_taxonomy(bad)
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(TaxonomyError, match=r"broken\.json: not valid JSON"):
        load_taxonomy(tmp_path / "broken.json")


# --- query checks -------------------------------------------------------------------------------------


def test_query_checker_rejects_each_kind_with_its_reason():
    c = QueryChecker(["Region", "units"], max_chars=80, near_duplicate=0.8)
    assert c.check("   ")[0] == "empty"
    assert c.check("x" * 81)[0] == "too_long"
    assert c.check("Total units per region?", ["units", "revenue"]) == (
        "unknown_column",
        "names column(s) the file does not have: revenue",
    )
    assert c.check("Sum of `profit` per region?")[0] == "unknown_column"
    assert c.check("Total `units` per region?", ["region"]) is None  # case-insensitive column match
    c.keep("What is the total number of units sold in each region?")
    assert c.check("what is the total number of units sold in each region")[0] == "duplicate"
    assert c.check("What is the total number of units sold in every region?")[0] == "near_duplicate"
    assert c.check("Which region has the highest median units?") is None


def test_query_ids_are_stable_and_depend_on_file_category_and_text():
    a = query_id("abc", "Counting", "How many rows?")
    assert a == query_id("abc", "Counting", "how many rows")  # normalized text
    assert (
        len({a, query_id("abd", "Counting", "How many rows?"), query_id("abc", "Ranking", "How many rows?")})
        == 3
    )


# --- consistency pre-check ----------------------------------------------------------------------------


def test_numeric_tolerance_is_the_papers_three_percent():
    assert numbers_agree(100.0, 103.0, 0.03) and not numbers_agree(100.0, 103.2, 0.03)
    assert numbers_agree(0.0, 0.0, 0.03) and not numbers_agree(0.0, 0.001, 0.03)


def test_rule_check_decides_only_the_clear_cases():
    assert rule_check(["42", "42.", " 42 "]).consistent is True
    assert rule_check(["Mean: 100", "mean: 102.9", "Mean: 101"]).consistent is True  # within 3%
    assert rule_check(["Mean: 100", "Mean: 104", "Mean: 100"]).consistent is None  # judge decides
    assert rule_check(["North", "the North region", "north"]).consistent is None
    missing = rule_check(["42", None, ""])
    assert missing.consistent is False and "2, 3" in missing.reason


def _traj(
    sample: int, answer: str | None, turns: int = 1, round_: int = 0, raw_answer: str | None = None
) -> Trajectory:
    ts = [
        Turn(raw="<think>x</think><code>print(1)</code>", thought="x", action=Action(kind="code", text="print(1)"),
             observation=Observation(text="1"))
        for _ in range(turns - 1)
    ]  # fmt: skip
    if answer is not None:
        raw = raw_answer or f"<think>done</think><answer>{answer}</answer>"
        ts.append(Turn(raw=raw, thought="done", action=Action(kind="answer", text=answer)))
    return Trajectory(
        task_id="q", sample=sample, turns=ts, final_answer=answer,
        stop_reason="answer" if answer is not None else "max_turns", extra={"round": round_},
        prompt=[{"role": "system", "content": "s"}, {"role": "user", "content": "q"}],
    )  # fmt: skip


def test_rule_best_prefers_fewer_turns_then_shorter_answers():
    trajs = [_traj(0, "42 units", 2), _traj(1, "42 units", 1), _traj(2, "42", 1)]
    assert rule_best(trajs).sample == 2


# --- rule filters -------------------------------------------------------------------------------------


def test_garbled_text_is_detected():
    assert "U+FFFD" in garbled_reason("total \ufffd 3")
    assert "U+0007" in garbled_reason("bell\x07")
    assert "mojibake" in garbled_reason("the cafÃ© sold 3")
    assert garbled_reason("the café sold 3 — naïve, 東京\ttab\n") is None


def test_intermingled_languages_in_prose_but_not_in_data_or_code():
    vocab = {"東京", "大阪"}
    assert mixed_language_reason("The city 東京 has the most sales.", vocab, 0.1, 6) is None
    assert mixed_language_reason('The answer is `売上高合計` and "北海道札幌".', set(), 0.1, 6) is None
    why = mixed_language_reason("The total is 42. 这个结果显示销售额最高的是北方地区", set(), 0.1, 6)
    assert why and "cjk" in why
    assert mixed_language_reason("Use α = 0.05 for the test of the mean difference.", set(), 0.1, 6) is None


def test_run_filters_in_order_with_reasons():
    cfg = DataMindConfig()
    count = token_counter("approx")
    task = Task(id="q", question="How many?")
    assert run_filters(_traj(0, "42"), task, cfg, count).ok
    bad_format = _traj(0, "42", raw_answer="I think <answer>42</answer>")
    res = run_filters(bad_format, task, cfg, count)
    assert res.failed == "format" and res.passed == ()
    res = run_filters(_traj(0, None), task, cfg, count)
    assert res.failed == "format"
    long = " ".join(["word"] * 1100)
    res = run_filters(_traj(0, long), task, cfg, count)
    assert res.failed == "length" and res.passed == ("format",) and "> 1024" in res.reason
    assert run_filters(_traj(0, " ".join(["word"] * 1000)), task, cfg, count).ok
    res = run_filters(_traj(0, "The cafÃ© sold 42"), task, cfg, count)
    assert res.failed == "language" and res.passed == ("format", "length")


# --- curation strategies ------------------------------------------------------------------------------


def test_selection_strategies():
    from datadojo.synth.datamind.consistency import ConsistencyVerdict

    group = [_traj(s, "42", round_=1) for s in (3, 4, 5)]
    round0 = [_traj(s, str(s)) for s in (0, 1, 2)]
    ok = {("q", s) for s in (0, 1, 3, 5)}  # samples 2 and 4 failed a filter
    v = ConsistencyVerdict(task_id="q", round=1, consistent=True, critique="", best=4, method="llm", samples=[3, 4, 5],
                answers=["42"] * 3)  # fmt: skip
    assert select("con-select", "q", v, group, round0, ok, 0) == []  # the judge's best was filtered out
    v2 = v.model_copy(update={"best": 5})
    assert [t.sample for t in select("con-select", "q", v2, group, round0, ok, 0)] == [5]
    assert [t.sample for t in select("non-select", "q", v, group, round0, ok, 0)] == [3, 5]
    rs = select("random-select", "q", v, group, round0, ok, 0)
    assert len(rs) == 1 and rs[0].sample in (3, 5)
    assert rs == select("random-select", "q", v, group, round0, ok, 0)  # seeded
    nc = select("non-con", "q", None, [], round0, ok, 0, "one")
    assert len(nc) == 1 and nc[0].sample in (0, 1)
    # the paper's reading of non-con (the default): every round-0 trajectory that passed the filters
    assert [t.sample for t in select("non-con", "q", None, [], round0, ok, 0)] == [0, 1]
    inconsistent = v.model_copy(update={"consistent": False})
    assert select("non-select", "q", inconsistent, group, round0, ok, 0) == []
    with pytest.raises(ValueError, match="unknown curation strategy"):
        select("best-of", "q", v, group, round0, ok, 0)


def test_backticked_cell_values_are_not_unknown_columns():
    # issue 21 (8): docs/datamind.md says quoted values are not checked; `active` was rejected as a column
    plain = QueryChecker(["id", "status", "amount"])
    assert plain.check("How many rows have status equal to `active`?") is None  # rejected on main
    assert plain.check("How many rows have `status` = `closed`?") is None
    profile = "  - status: string, category · 3 distinct · top active (14), closed (13), pending (13)"
    c = QueryChecker(["id", "status", "amount"], profile=profile)
    assert c.check("How many rows have a status of `active`?") is None  # a value the profile shows
    assert c.check("What is the mean amount where `status` = `pending-review`?") is None  # after '='
    assert c.check("Is the share of rows whose status is `archived` above 10%?") is None  # after 'is'
    # still checked: back-quoted names called columns, and back-quoted names that read as columns
    assert c.check("What is the mean of the `active` column?")[0] == "unknown_column"
    assert c.check("Sum of `profit` per status?")[0] == "unknown_column"
    assert c.check("Mean `amount` per `status`?") is None

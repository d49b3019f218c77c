"""SciDataSailor-Bench: the task-format loader, judge verdicts per rubric, scoring and totals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datadojo.bench import BenchmarkError, get_benchmark
from datadojo.bench.judged import JudgeFailure, verdict_key
from datadojo.bench.scidata import HEAD_CHARS, READERS_NOTE, TAIL_CHARS, SciData, task_files
from datadojo.compare.judge_prompts import JUDGE_RUBRICS
from datadojo.llm import load_backend
from datadojo.testing.server import ScriptedLLMServer


def _record(i: int, track: str, folder: str = "repo", level: str = "L1", **over: object) -> dict:
    rec = {
        "id": f"{track}-{i}",
        "question": f"{track} question {i}",
        "files": [{"path": folder, "kind": "dir"}],
        "answer": f"reference {i}",
        "answer_kind": f"sailor_{track}",
        "source": "scidata",
        "category": track,
        "difficulty": level,
        "extra": {"track": track, "seed_id": f"s{i}", "intent": "summarize"},
    }
    rec.update(over)
    return rec


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    (tmp_path / "repo" / "data").mkdir(parents=True)
    (tmp_path / "repo" / "data" / "x.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    _write(tmp_path / "qa.jsonl", [_record(0, "qa", level="L1"), _record(1, "qa", level="L2")])
    _write(tmp_path / "meta.jsonl", [_record(2, "meta", level="L0")])
    return tmp_path


def test_registered_with_the_papers_protocol() -> None:
    b = get_benchmark("scidata")
    assert isinstance(b, SciData)
    assert (b.defaults.max_turns, b.defaults.dialect, b.defaults.temperature, b.defaults.top_p) == (
        12, "sailor", 0.6, 0.95,
    )  # fmt: skip
    cfg = b.sandbox_config()
    assert cfg.mode == "persistent"
    assert (cfg.limits.observation_head_chars, cfg.limits.observation_tail_chars) == (4000, 1500)
    assert (HEAD_CHARS, TAIL_CHARS) == (4000, 1500)


def test_load_a_folder_resolves_paths_and_filters_tracks(run_dir: Path) -> None:
    tasks = list(SciData().load(run_dir))
    assert [t.id for t in tasks] == ["qa-0", "qa-1", "meta-2"]
    assert all(t.files[0].path == str((run_dir / "repo").resolve()) for t in tasks)
    assert tasks[0].description == READERS_NOTE and tasks[0].extra["seed_id"] == "s0"
    assert [t.id for t in SciData().load(run_dir, track="meta")] == ["meta-2"]
    assert [t.id for t in SciData().load(run_dir / "qa.jsonl")] == ["qa-0", "qa-1"]
    assert task_files(run_dir) == [run_dir / "qa.jsonl", run_dir / "meta.jsonl"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"answer_kind": "datamind"}, "answer_kind must be sailor_qa or sailor_meta"),
        ({"category": "meta"}, "category 'meta' disagrees"),
        ({"answer": "  "}, "reference answer must be non-empty"),
        ({"files": [{"path": "missing", "kind": "dir"}]}, "dataset folder not found"),
        (
            {"files": [{"path": "repo", "kind": "dir"}, {"path": "repo/data/x.csv", "kind": "csv"}]},
            "exactly one",
        ),
        ({"difficulty": "L7"}, "difficulty must be one of"),
    ],
)
def test_bad_records_name_file_record_and_id(tmp_path: Path, change: dict, message: str) -> None:
    (tmp_path / "repo" / "data").mkdir(parents=True)
    (tmp_path / "repo" / "data" / "x.csv").write_text("a\n1\n", encoding="utf-8")
    path = _write(tmp_path / "t.jsonl", [_record(0, "qa"), _record(1, "qa", **change)])
    with pytest.raises(BenchmarkError, match=message) as info:
        list(SciData().load(path))
    assert f"{path} record 2 (id 'qa-1')" in str(info.value)


def test_missing_inputs_and_options(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match=r"neither qa\.jsonl nor meta\.jsonl"):
        list(SciData().load(tmp_path))
    with pytest.raises(BenchmarkError, match="task file not found"):
        list(SciData().load(tmp_path / "nope.jsonl"))
    with pytest.raises(TypeError, match="unknown option"):
        list(SciData().load(tmp_path, split="dev"))
    (tmp_path / "qa.jsonl").write_text('{"id": "x"}\n', encoding="utf-8")
    with pytest.raises(BenchmarkError, match=r"qa\.jsonl:1"):
        list(SciData().load(tmp_path))
    assert "looks like" not in str(_load_error(tmp_path))
    # another output of synth sailor given by mistake: the error says which and what to give instead
    outputs = {
        "trajectories.jsonl": {"task_id": "t", "sample": 0, "turns": [], "prompt": []},
        "tree.jsonl": {"type": "node", "id": "u/0", "parent": None},
        "qc.jsonl": {"unit": "u", "reason": "kept", "kept": True},
    }
    for name, record in outputs.items():
        _write(tmp_path / name, [record])
        message = str(_load_error(tmp_path / name))
        assert f"{name}:1" in message and "looks like a synth sailor" in message and "qa.jsonl" in message


def _load_error(path: Path) -> BenchmarkError:
    with pytest.raises(BenchmarkError) as info:
        list(SciData().load(path))
    return info.value


def test_qa_is_scored_by_rule_without_a_judge_and_meta_needs_one(run_dir: Path) -> None:
    qa0, _, meta = SciData().load(run_dir)
    assert qa0.extra["qa_scoring"] == {"mode": "rule", "rel_tol": 0.01, "abs_tol": 1e-6}
    assert "qa_scoring" not in meta.extra
    b = SciData()
    assert b.score(qa0, None).reason == "no prediction"
    assert b.score(qa0, "   ").reason == "empty answer"
    s = b.score(qa0, "It is reference 0.")  # the reference "reference 0" holds a number: 0
    assert s.correct and s.metric == "sailor_qa/rule" and s.parts["decided_by"] == "rule"
    assert s.parts["rule"] == {"correct": True, "reason": s.reason.removeprefix("rule: "), "kind": "number",
                               "decisive": True}  # fmt: skip
    assert not b.score(qa0, "reference 1").correct
    assert not b.wants_verdict(qa0) and b.wants_verdict(meta)
    with pytest.raises(BenchmarkError, match=r"Meta task.*--option track=qa"):
        b.score(meta, "a summary")
    judged_qa = next(iter(SciData().load(run_dir, qa_scoring="judge")))
    with pytest.raises(BenchmarkError, match=r"qa_scoring=judge needs a judge verdict.*qa_scoring=rule"):
        b.score(judged_qa, "an answer")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"qa_scoring": "vote"}, "qa_scoring must be one of rule, judge, rule\\+judge"),
        ({"qa_rel_tol": "lots"}, "qa_rel_tol must be a number"),
        ({"qa_rel_tol": 1.5}, "rel_tol must be in"),
    ],
)
def test_bad_qa_scoring_options(run_dir: Path, options: dict, message: str) -> None:
    with pytest.raises(BenchmarkError, match=message):
        list(SciData().load(run_dir, **options))


def test_tolerance_options_reach_the_matcher(run_dir: Path) -> None:
    records = [_record(0, "qa", answer="2.89 mg/L")]
    path = _write(run_dir / "tol.jsonl", records)
    (default,) = SciData().load(path)
    (loose,) = SciData().load(path, qa_rel_tol="0.03")  # a string, as from the command line
    assert not SciData().score(default, "2.95 mg/L").correct
    assert SciData().score(loose, "2.95 mg/L").correct


async def test_rule_and_judge_are_combined_and_both_recorded(run_dir: Path) -> None:
    records = [
        _record(0, "qa", answer="2.89 mg/L"),
        _record(1, "qa", answer="Measurements are grouped by site and then by month, one file per year"),
        _record(2, "qa", answer="meadow"),
    ]
    path = _write(run_dir / "mixed.jsonl", records)
    tasks = list(SciData().load(path, qa_scoring="rule+judge"))
    answers = ["2.89 g/L", "grouped by site, then month; a file per year", "meadow"]
    # The judge wrongly accepts the wrong unit, accepts the paraphrase, and (wrongly) rejects "meadow".
    replies = iter(['{"score": 1, "reason": "same"}', '{"score": 1, "reason": "paraphrase"}',
                    '{"score": 0, "reason": "no"}'])  # fmt: skip
    with ScriptedLLMServer(lambda req: next(replies)) as srv:
        backend = load_backend(f"openai:judge@{srv.base_url}")
        verdicts = await SciData().gather_verdicts(zip(tasks, answers, strict=True), backend, concurrency=1)
        await backend.aclose()
        assert len(srv.requests) == 3
        assert srv.requests[0].json["response_format"]["type"] == "json_schema"
    scorer = SciData().with_verdicts(verdicts)
    scores = [scorer.score(t, a) for t, a in zip(tasks, answers, strict=True)]
    assert [s.correct for s in scores] == [False, True, True]
    assert [s.parts["decided_by"] for s in scores] == ["rule", "judge", "rule"]
    assert "incompatible" not in scores[0].reason and "2890 mg/L" in scores[0].reason
    assert [s.parts["rule"]["correct"] for s in scores] == [False, False, True]
    assert [s.parts["judge"]["correct"] for s in scores] == [True, True, False]
    assert scores[1].parts["rule"]["decisive"] is False and scores[1].reason == "judge: paraphrase"
    totals = scorer.totals(list(zip(tasks, scores, strict=True)))
    assert totals["qa"] == pytest.approx(2 / 3) and totals["qa_rule"] == pytest.approx(1 / 3)
    assert totals["qa_judge"] == pytest.approx(2 / 3) and totals["qa_rule_judge_agreement"] == 0.0


async def test_verdicts_use_each_tracks_rubric_and_are_cached(run_dir: Path) -> None:
    tasks = list(SciData().load(run_dir, qa_scoring="judge"))
    qa0, qa1, meta = tasks

    def judge(req: dict) -> str:
        user = req["messages"][1]["content"]
        if "garbled" in user:
            return "I cannot decide."
        return json.dumps({"score": int("reference" in user.split("Candidate answer:")[1]), "reason": "r"})

    pairs = [(qa0, "the reference 0"), (qa1, "wrong"), (meta, "reference 2 summary"), (qa1, "garbled"),
             (qa0, "the reference 0"), (meta, None), (meta, "")]  # fmt: skip
    cache = run_dir / "cache.jsonl"
    with ScriptedLLMServer(judge) as srv:
        backend = load_backend(f"openai:judge@{srv.base_url}")
        verdicts = await SciData().gather_verdicts(pairs, backend, cache=cache, concurrency=2)
        first = len(srv.requests)
        again = await SciData().gather_verdicts(pairs, backend, cache=cache)
        # Valid verdicts come from the cache; only the judge failure is asked again (twice: one repair).
        assert len(srv.requests) == first + 2
        # The duplicate, the missing and the empty answer are not sent; the garbled one is repaired once.
        assert first == 3 + 2
        rubrics = {
            r.json["messages"][1]["content"].split("Question or task: ")[1].split("\n")[0]: r.json[
                "messages"
            ][1]["content"]
            for r in srv.requests
        }
        # Scored by rule, QA answers are not sent to the judge at all.
        ruled = list(SciData().load(run_dir))
        srv.reset_stats()
        await SciData().gather_verdicts(zip(ruled, ["the reference 0", "wrong", "x"], strict=True), backend)
        assert len(srv.requests) == 1 and "meta question 2" in srv.requests[0].json["messages"][1]["content"]
        await backend.aclose()
    assert JUDGE_RUBRICS["sailor_meta"].rubric in rubrics["meta question 2"]
    assert JUDGE_RUBRICS["sailor_qa"].rubric in rubrics["qa question 0"]
    assert all(r.json["temperature"] == 0.0 for r in srv.requests)
    assert isinstance(verdicts[verdict_key("qa-1", "garbled")], JudgeFailure)
    assert again[verdict_key("qa-0", "the reference 0")].cached

    scorer = SciData().with_verdicts(verdicts)
    items = [
        (qa0, scorer.score(qa0, "the reference 0")),
        (qa1, scorer.score(qa1, "garbled")),
        (meta, scorer.score(meta, "reference 2 summary")),
    ]
    assert [s.correct for _, s in items] == [True, False, True]
    assert items[1][1].parts["judge_error"] and items[1][1].reason.startswith("judge failed")
    assert items[0][1].metric == "sailor_qa/judge" and items[2][1].metric == "sailor_meta"
    assert items[0][1].parts["rule"]["correct"] and items[0][1].parts["decided_by"] == "judge"
    totals = scorer.totals(items)
    assert totals["accuracy"] == pytest.approx(2 / 3) and totals["exact"] == pytest.approx(2 / 3)
    assert (totals["qa"], totals["meta"], totals["judge_errors"]) == (0.5, 1.0, 1.0)
    assert (totals["L0"], totals["L1"], totals["L2"]) == (1.0, 1.0, 0.0) and "L3" not in totals
    assert (totals["qa_rule"], totals["qa_judge"], totals["qa_rule_judge_agreement"]) == (0.5, 0.5, 1.0)


def test_example_task_file_loads_and_its_references_hold() -> None:
    """examples/scidata_tasks.jsonl (written by examples/make_examples.py) is valid, and its QA
    references agree with an independent pandas computation over the example folder."""
    pd = pytest.importorskip("pandas")
    examples = Path(__file__).resolve().parents[2] / "examples"
    tasks = {t.id: t for t in SciData().load(examples / "scidata_tasks.jsonl")}
    assert {t.category for t in tasks.values()} == {"qa", "meta"}
    folder = Path(tasks["station-survey-qa-ph"].files[0].path)
    assert folder == (examples / "data" / "station_survey").resolve()
    frame = pd.read_csv(folder / "raw" / "measurements.csv")
    assert tasks["station-survey-qa-ph"].answer == f"{frame['ph'].mean():.2f}"
    joined = frame.merge(pd.read_json(folder / "meta" / "sites.json"), on="site")
    means = joined.groupby("habitat")["nitrate_mg_l"].mean()
    assert tasks["station-survey-qa-habitat"].answer == f"{means.idxmax()}, {means.max():.2f} mg/L"
    n_seq = (folder / "raw" / "barcodes.fasta").read_text(encoding="ascii").count(">")
    assert tasks["station-survey-qa-fasta"].answer.startswith(f"{n_seq} sequences")
    assert f"{len(frame)} monthly measurements" in tasks["station-survey-meta-map"].answer


def test_example_qa_references_are_scored_decisively_by_rule() -> None:
    """Every QA reference of examples/scidata_tasks.jsonl is one the matcher decides (numbers, units,
    categorical values), and each accepts itself."""
    examples = Path(__file__).resolve().parents[2] / "examples"
    b = SciData()
    qa = [t for t in b.load(examples / "scidata_tasks.jsonl", track="qa")]
    assert qa
    for task in qa:
        s = b.score(task, str(task.answer))
        assert s.correct and s.parts["rule"]["decisive"], (task.id, s.reason)

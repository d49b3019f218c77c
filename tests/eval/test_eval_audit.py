"""The data-blind audit (``--audit data-blind``): the same items with the data withheld, compared item by item.

Expected figures are worked out by hand from what each scripted model can see (the module docstring of
:mod:`datadojo.eval.audit` defines them).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.cli.app import app
from datadojo.eval.audit import compare_runs, withhold_data
from datadojo.eval.harness import EvalConfig, EvalError, run_eval
from datadojo.jsonl import iter_jsonl, read_trajectories
from datadojo.llm import load_backend
from datadojo.sandbox.result import ExecResult
from datadojo.testing.blind import DataReaderModel, question_only_guess
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import DataFile, Task

#: (id, category, question, gold, what the file says). t5's answer is in its question; t6's file
#: contradicts its gold (an annotation error: reading the data gives the wrong answer).
ITEMS = [
    ("t1", "A", "What is the total of the sales column?", "17", "17"),
    ("t2", "A", "What is the mean price?", "5", "5"),
    ("t3", "B", "Is the flag set for the north region?", "yes", "yes"),
    ("t4", "B", "Is the flag set for the south region?", "no", "no"),
    ("t5", "C", "The report says the total is 42. What is the total?", "42", "42"),
    ("t6", "B", "Is the flag set for the east region?", "yes", "no"),
]


def _task_file(root: Path) -> Path:
    lines = []
    for tid, cat, question, gold, in_file in ITEMS:
        (root / f"{tid}.csv").write_text(f"metric,value\nanswer,{in_file}\n", encoding="utf-8")
        lines.append(json.dumps({
            "id": tid, "question": question, "files": [{"path": f"{tid}.csv"}], "answer": gold,
            "category": cat, "description": f"Survey extract; its one row reads answer,{in_file}.",
        }))  # fmt: skip
    path = root / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class _ListingSandbox:
    """``os.listdir('.')`` of a workspace holding ``names``; any other code prints the files' contents."""

    def __init__(self, files: list[DataFile]) -> None:
        self.files = files

    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> ExecResult:
        if "listdir" in code:
            return ExecResult.make(
                f"{sorted(f.visible_name for f in self.files)!r}\n", "ok", isolation="test"
            )
        text = "".join(Path(f.path).read_text(encoding="utf-8") for f in self.files)
        return ExecResult.make(text, "ok", isolation="test")


class _Workspaces:
    """The sandbox factory: records which files each episode's workspace was given."""

    def __init__(self) -> None:
        self.given: list[tuple[str, tuple[str, ...]]] = []
        self.lock = threading.Lock()

    def __call__(self, task: Task):
        @contextlib.asynccontextmanager
        async def session():
            with self.lock:
                self.given.append((task.id, tuple(f.visible_name for f in task.files)))
            yield _ListingSandbox(list(task.files))

        return session()


def _file_value(task: Task) -> str:
    return next(x for i in ITEMS if i[0] == task.id for x in [i[4]])


class _AlternatingGuess:
    """The question-only guess, except that t4's blind guesses alternate yes, no (by arrival order)."""

    def __init__(self) -> None:
        self.t4 = 0
        self.lock = threading.Lock()

    def __call__(self, task: Task) -> str:
        if task.id == "t4":
            with self.lock:
                self.t4 += 1
                return "yes" if self.t4 % 2 else "no"
        return question_only_guess(task)


async def _eval(tmp_path: Path, script, *, out: str = "run", n: int = 2, audit: bool = True, **kw):
    data = _task_file(tmp_path) if not (tmp_path / "tasks.jsonl").exists() else tmp_path / "tasks.jsonl"
    workspaces = _Workspaces()
    with ScriptedLLMServer(script) as server:
        backend = load_backend(f"openai:fake@{server.base_url}?max_retries=0")
        cfg = EvalConfig(
            bench="tasks", data=data, out=tmp_path / out, model="openai:fake", n_trials=n, concurrency=3,
            audit="data-blind" if audit else None, **kw,
        )  # fmt: skip
        try:
            result = await run_eval(cfg, backend=backend, sandboxes=workspaces)
        finally:
            await backend.aclose()
    return result, workspaces, server


async def test_a_reader_needs_the_data_and_the_audit_says_which_items_did_not(tmp_path):
    tasks = [Task(id=i[0], question=i[2], files=[DataFile(path=f"{i[0]}.csv", kind="csv")]) for i in ITEMS]
    reader = DataReaderModel(tasks, gold=_file_value, guess=_AlternatingGuess())
    result, workspaces, _ = await _eval(tmp_path, reader)
    audit = result.summary["audit"]
    # raw episodes read the file: every item right but t6 (its file contradicts the gold)
    # blind: t1, t2 guess 0 (wrong); t3 "Yes" (right); t4 yes/no by turn (1 of 2); t5 reads 42 off the question; t6 "Yes"
    # r = [1, 1, 1, 1, 1, 0], b = [0, 0, 1, 1/2, 1, 1]
    o = audit["overall"]
    assert o["n_tasks"] == 6
    assert o["raw"] == pytest.approx(5 / 6) == pytest.approx(result.summary["metrics"]["pass@1"])
    assert o["blind"] == pytest.approx(3.5 / 6)
    assert o["data_dependent"] == pytest.approx(2.5 / 6)  # r(1-b): 1 + 1 + 0 + 1/2 + 0 + 0
    assert o["both"] == pytest.approx(2.5 / 6) and o["blind_only"] == pytest.approx(1 / 6)
    assert o["neither"] == pytest.approx(0.0)
    assert o["relative_drop"] == pytest.approx((5 / 6 - 3.5 / 6) / (5 / 6))  # 0.3
    assert o["answered_blind"] == 4 and o["answered_blind_share"] == pytest.approx(4 / 6)
    per = audit["per_category"]
    assert per["A"]["raw"] == 1.0 and per["A"]["blind"] == 0.0 and per["A"]["data_dependent"] == 1.0
    assert per["A"]["relative_drop"] == 1.0
    assert per["B"]["raw"] == pytest.approx(2 / 3) and per["B"]["blind"] == pytest.approx(2.5 / 3)
    assert per["B"]["data_dependent"] == pytest.approx(0.5 / 3)
    assert per["B"]["relative_drop"] == pytest.approx(-0.25)  # the blind run did better
    assert per["C"]["data_dependent"] == 0.0 and per["C"]["relative_drop"] == 0.0
    verdicts = {it["id"]: it["verdict"] for it in audit["items"]}
    assert verdicts == {
        "t1": "needs data", "t2": "needs data", "t3": "answered blind", "t4": "answered blind",
        "t5": "answered blind", "t6": "blind only",
    }  # fmt: skip
    t4 = next(it for it in audit["items"] if it["id"] == "t4")
    assert (t4["raw_correct"], t4["raw_trials"], t4["blind_correct"], t4["blind_trials"]) == (2, 2, 1, 2)
    # every raw workspace held its file, every blind one was empty; the model saw them so
    assert sorted(names for _, names in workspaces.given) == [()] * 12 + [
        (f"t{i}.csv",) for i in range(1, 7) for _ in range(2)
    ]
    assert sum(v for (_, sees), v in reader.saw_data.items() if sees) == 12
    # files: the blind run is a run folder of its own; summary.json carries the audit
    run = tmp_path / "run"
    assert json.loads((run / "summary.json").read_text())["audit"]["overall"] == o
    assert json.loads((run / "blind" / "run.json").read_text())["settings"]["data_blind"] is True
    assert "data_blind" not in json.loads((run / "run.json").read_text())["settings"]
    assert len(list(read_trajectories(run / "blind" / "trajectories.jsonl"))) == 12
    blind_rows = [r for _, r in iter_jsonl(run / "blind" / "scores.jsonl")]
    assert sum(r["correct"] for r in blind_rows) == 7  # 3.5 of 6 items × 2 trials


async def test_a_model_that_only_guesses_has_no_data_dependent_score(tmp_path):
    """The same items, a model that never looks at its files: raw and blind agree item by item."""

    def guesser(req: dict) -> str:
        q = next(m["content"] for m in req["messages"] if m["role"] == "user")
        task = next(Task(id=i[0], question=i[2]) for i in ITEMS if i[2] == q)
        return f"<think>guess</think><answer>{question_only_guess(task)}</answer>"

    result, _, _ = await _eval(tmp_path, guesser, n=1)
    o = result.summary["audit"]["overall"]
    # "Yes" is right for t3 and t6, 42 for t5; 0 is wrong for t1, t2 and "Yes" for t4: 3 of 6 either way
    assert o["raw"] == o["blind"] == pytest.approx(0.5)
    assert o["data_dependent"] == 0.0 and o["relative_drop"] == 0.0 and o["answered_blind"] == 3


_ROW = re.compile(r"answer \| (\S+)|answer,(\S+?)\.")


def _profile_reader(req: dict) -> str:
    """Answers at once with the value a profile's sample row (or a description quoting it) shows."""
    m = _ROW.search(req["messages"][0]["content"])
    value = (m.group(1) or m.group(2)) if m else "unknown"
    return f"<think>the prompt shows the row</think><answer>{value}</answer>"


async def test_a_model_that_reads_the_prompts_profile_gets_nothing_blind(tmp_path):
    """The leak to close: profiles show sample rows, and a description may quote the data (DataMind
    synthesis stores the profile as the task's description)."""
    result, _, server = await _eval(tmp_path, _profile_reader, n=1)
    o = result.summary["audit"]["overall"]
    # raw: the value in the prompt is the file's, right for t1-t5 and wrong for t6; blind: nothing to read
    assert o["raw"] == pytest.approx(5 / 6) and o["blind"] == 0.0
    assert o["data_dependent"] == pytest.approx(5 / 6) and o["answered_blind"] == 0
    blind_prompts = [r.json["messages"][0]["content"] for r in server.requests[6:]]
    assert len(blind_prompts) == 6
    for text in blind_prompts:
        assert "Sample rows" not in text and not _ROW.search(text) and "About the data" not in text
        assert re.search(r"- `t\d\.csv` \(csv\)", text)  # the file is still named, as in the raw prompt
    raw_prompts = [r.json["messages"][0]["content"] for r in server.requests[:6]]
    assert all("Sample rows" in t and "About the data" in t for t in raw_prompts)
    # nothing is added and only what was read from the files is taken away: every line of a blind prompt is a
    # line of the raw prompt of the same question, and the raw lines left out are the profile and description
    raw_by_q = {
        r.json["messages"][1]["content"]: r.json["messages"][0]["content"] for r in server.requests[:6]
    }
    for r in server.requests[6:]:
        raw_lines = [ln for ln in raw_by_q[r.json["messages"][1]["content"]].splitlines() if ln.strip()]
        blind_lines = [ln for ln in r.json["messages"][0]["content"].splitlines() if ln.strip()]
        assert [ln for ln in raw_lines if ln in blind_lines] == blind_lines
        gone = [ln for ln in raw_lines if ln not in blind_lines]
        assert gone[0].startswith("  File: t") and gone[-2:] == ["## About the data", gone[-1]]
        assert "Survey extract" in gone[-1] and all(ln.startswith("  ") for ln in gone[:-2])
    # the question itself is unchanged
    assert sorted(r.json["messages"][1]["content"] for r in server.requests[6:]) == sorted(
        r.json["messages"][1]["content"] for r in server.requests[:6]
    )


async def test_audit_resumes_extends_with_limit_and_leaves_the_raw_run_alone(tmp_path):
    tasks = [Task(id=i[0], question=i[2], files=[DataFile(path=f"{i[0]}.csv", kind="csv")]) for i in ITEMS]
    reader = DataReaderModel(tasks, gold=_file_value)
    # a plain run first: no blind folder, no audit, the identity of a run without the feature
    plain, _, _ = await _eval(tmp_path, reader, n=1, audit=False, limit=3)
    run = tmp_path / "run"
    assert "audit" not in plain.summary and not (run / "blind").exists()
    raw_lines = (run / "trajectories.jsonl").read_bytes()
    # the same run with the audit: the raw trials are all there (nothing rerun), the blind ones run
    audited, _, server = await _eval(tmp_path, reader, n=1, limit=3)
    assert audited.rollout.skipped == 3 and audited.rollout.finished == 0
    assert (run / "trajectories.jsonl").read_bytes() == raw_lines
    assert audited.summary["audit"]["overall"]["n_tasks"] == 3
    assert len(server.requests) == 6  # 3 blind episodes of 2 turns
    # an interrupted blind run resumes; a larger --limit extends both runs
    blind_traj = run / "blind" / "trajectories.jsonl"
    lines = blind_traj.read_bytes().splitlines(keepends=True)
    blind_traj.write_bytes(b"".join(lines[:-1]))
    again, _, server = await _eval(tmp_path, reader, n=1, limit=4)
    assert len(server.requests) == 6  # 2 turns each: t4 raw, t4 blind and the lost blind trial
    assert again.summary["audit"]["overall"]["n_tasks"] == 4
    keys = sorted(t.key for t in read_trajectories(blind_traj))
    assert keys == [(f"t{i}", 0) for i in range(1, 5)]


def test_compare_runs_leaves_out_server_failures_and_says_so():
    raw = [
        {"id": "a", "trial": 0, "category": "x", "correct": True},
        {"id": "a", "trial": 1, "category": "x", "correct": False, "excluded": "server_failure"},
        {"id": "b", "trial": 0, "category": "x", "correct": False},
        {"id": "c", "trial": 0, "category": "y", "correct": True, "excluded": "server_failure"},
    ]
    blind = [
        {"id": "a", "trial": 0, "correct": True},
        {"id": "a", "trial": 1, "correct": False},
        {"id": "b", "trial": 0, "correct": False},
        {"id": "c", "trial": 0, "correct": True},
    ]
    audit = compare_runs(raw, blind)
    # a: raw 1/1 (its failed trial left out), blind 1/2; b: 0 and 0; c: no counted raw trial
    assert audit["not_compared"] == ["c"]
    o = audit["overall"]
    assert o["n_tasks"] == 2 and o["raw"] == 0.5 and o["blind"] == 0.25
    assert o["data_dependent"] == 0.25 and o["relative_drop"] == 0.5
    assert compare_runs([raw[2]], [blind[2]])["overall"]["relative_drop"] is None  # raw 0: no ratio
    with pytest.raises(ValueError, match="no task has a scored trial"):
        compare_runs(raw[3:], blind)


def test_withhold_data_keeps_the_question_and_file_names():
    task = Task(
        id="q", question="How many rows?", description="rows: 3",
        files=[DataFile(path="/data/x.csv", kind="csv", name="sales.csv", description="3 rows of sales")],
        extra={"answer_format": "a number"},
    )  # fmt: skip
    blind = withhold_data(task)
    assert blind.question == task.question and blind.extra == task.extra and blind.description is None
    assert [(f.visible_name, f.kind, f.description) for f in blind.files] == [("sales.csv", "csv", None)]


def test_the_audit_refuses_a_remote_executor(tmp_path):
    from datadojo.eval.harness import run_eval_sync

    class _Remote:
        name, remote = "ray", True

    cfg = EvalConfig(bench="tasks", data=_task_file(tmp_path), out=tmp_path / "r", model="openai:m",
                     audit="data-blind")  # fmt: skip
    with pytest.raises(EvalError, match="runs locally"):
        run_eval_sync(cfg, executor=_Remote())


def test_cli_audit_with_the_real_sandbox(tmp_path):
    """End to end (``datadojo eval tasks.jsonl --audit data-blind``): the real sandbox's workspace is empty in
    the blind run, and the tables and the JSON say so."""
    data = _task_file(tmp_path)
    tasks = [
        Task(id=i[0], question=i[2], files=[DataFile(path=f"{i[0]}.csv", kind="csv")]) for i in ITEMS[:3]
    ]
    reader = DataReaderModel(tasks, gold=_file_value)
    out = tmp_path / "cli"
    with ScriptedLLMServer(reader) as server:
        args = ["eval", str(data), "--model", f"openai:fake@{server.base_url}", "-n", "1",
                "--limit", "3", "--out", str(out), "--audit", "data-blind", "-j", "2"]  # fmt: skip
        res = CliRunner().invoke(app, [*args, "--json"])
        assert res.exit_code == 0, res.output
        summary = json.loads(res.stdout.strip().splitlines()[-1])
        table = CliRunner().invoke(app, args, terminal_width=200)  # resumed: nothing reruns, tables printed
    assert table.exit_code == 0, table.output
    o = summary["audit"]["overall"]
    # raw: t1-t3 read their files; blind: only t3's "Yes" is right
    assert (o["raw"], o["blind"], o["data_dependent"], o["answered_blind"]) == (
        1.0,
        pytest.approx(1 / 3),
        pytest.approx(2 / 3),
        1,
    )
    assert reader.saw_data == {("t1", True): 1, ("t2", True): 1, ("t3", True): 1, ("t1", False): 1,
                               ("t2", False): 1, ("t3", False): 1}  # fmt: skip
    blind = list(read_trajectories(out / "blind" / "trajectories.jsonl"))
    assert all(t.turns[0].observation.text.strip() == "[]" for t in blind)  # the real workspace was empty
    assert "data-dependent score" in table.stdout and "66.67%" in table.stdout
    html = (out / "report.html").read_text(encoding="utf-8")
    assert 'id="audit"' in html and 'data-metric="data_dependent"' in html
    assert "Data-blind audit" in (out / "report.md").read_text(encoding="utf-8")
    assert (out / "blind" / "report.html").exists()


def test_a_task_file_given_twice_is_refused(tmp_path):
    data = _task_file(tmp_path)
    res = CliRunner().invoke(app, ["eval", str(data), "--data", str(data), "--out", str(tmp_path / "o"),
                                   "--model", "openai:m"], terminal_width=200)  # fmt: skip
    assert res.exit_code == 2 and "BENCH or as --data, not both" in res.output


def test_the_category_table_shows_bracketed_category_names():
    """DataBench's answer types are ``list[category]`` and ``list[number]``: rich must not read them as markup."""
    from rich.console import Console

    from datadojo.cli.eval import _category_table

    figures = {
        "raw": 1.0,
        "blind": 0.0,
        "data_dependent": 1.0,
        "relative_drop": 1.0,
        "answered_blind": 0,
        "n_tasks": 1,
    }
    per = {c: {"n_tasks": 1, "pass@1": 1.0, "any_of_n": 1.0} for c in ("list[category]", "list[number]")}
    summary = {
        "metrics": {"per_category": per},
        "audit": {"overall": figures, "per_category": dict.fromkeys(per, figures)},
    }
    console = Console(width=200, record=True)
    console.print(_category_table(summary))
    text = console.export_text()
    assert "list[category]" in text and "list[number]" in text


async def test_a_judged_benchmark_is_judged_in_both_runs(tmp_path):
    """scidata's Meta track is scored by an LLM judge: the blind run's answers are judged too (their own
    cache in OUT/blind), with the same judge."""
    from datadojo.bench import get_benchmark
    from datadojo.eval.harness import load_eval_tasks
    from datadojo.testing.judge import DisagreeingJudge

    data = Path(__file__).resolve().parents[2] / "examples" / "scidata_tasks.jsonl"
    tasks = load_eval_tasks(get_benchmark("scidata"), data)
    reader = DataReaderModel(tasks)
    judge = DisagreeingJudge(rule=lambda cand, ref: cand.strip() != ref.strip())  # i.e. right iff identical
    with ScriptedLLMServer(reader) as agent, ScriptedLLMServer(judge) as judge_server:
        backend = load_backend(f"openai:agent@{agent.base_url}?max_retries=0")
        judge_backend = load_backend(f"openai:judge@{judge_server.base_url}?max_retries=0")
        cfg = EvalConfig(bench="scidata", data=data, out=tmp_path / "run", model="openai:agent", n_trials=1,
                         audit="data-blind", report=False)  # fmt: skip
        try:
            result = await run_eval(
                cfg, backend=backend, sandboxes=_Workspaces(), judge_backend=judge_backend
            )
        finally:
            await backend.aclose()
            await judge_backend.aclose()
    audit = result.summary["audit"]
    # raw: the reader sees the dataset folder and answers each reference (QA by rule, Meta by the judge);
    # blind: no question states a number or asks yes/no, so every guess is "0"
    assert (audit["overall"]["raw"], audit["overall"]["blind"], audit["overall"]["data_dependent"]) == (
        1.0,
        0.0,
        1.0,
    )
    assert {c: f["n_tasks"] for c, f in audit["per_category"].items()} == {"meta": 1, "qa": 3}
    assert [(kind, cand == ref) for kind, ref, cand in judge.seen] == [("verdict", True), ("verdict", False)]
    assert (tmp_path / "run" / "judge_cache.jsonl").exists()
    assert (tmp_path / "run" / "blind" / "judge_cache.jsonl").exists()

"""Issue 39: an EnvLunch build asks no question twice, and reports how much of it the reference solver solves.

On a sample every cut table has exactly ``sample_rows`` rows, so ``len(df)`` over two of them reads
"Target value: 30" from two programs: the same question to the agent, two answers in the copies.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from datadojo.env.prompts import GUIDANCE_SECTIONS
from datadojo.jsonl import read_tasks
from datadojo.reward.envlunch import task_info
from datadojo.synth.envlunch import solver_check
from datadojo.synth.envlunch.audit import constant_program
from datadojo.synth.envlunch.build import BuildConfig, build_tasks, load_environments
from datadojo.synth.envlunch.solver import SolveResult
from datadojo.synth.envlunch.solver_check import check_with_solver, failure_reason, solver_sample
from datadojo.synth.envlunch.tasks import _PROMPT_EXTRA, question_text, render_target, visible_key

CAP = 30  # sample_rows: both 100-row tables are cut to exactly 30 rows


@pytest.fixture(scope="module")
def twins_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two unrelated tables of 100 rows with alike columns: their samples have the same row count, and
    small integer columns whose minima, maxima and medians coincide."""
    path = tmp_path_factory.mktemp("twins") / "twins.sqlite"
    con = sqlite3.connect(path)
    for name in ("alpha", "beta"):
        con.execute(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY, grade INTEGER, score REAL, kind TEXT)")
        con.executemany(
            f"INSERT INTO {name} VALUES (?, ?, ?, ?)",
            [(i, i % 5, float(i % 7) * 1.5, "xyz"[i % 3]) for i in range(1, 101)],
        )
    con.commit()
    con.close()
    return path


@pytest.fixture(scope="module")
def twins_build(twins_db: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("tb") / "tasks.jsonl"
    config = BuildConfig(n=40, seed=2, workers=1, sample_rows=CAP, sql_fraction=0.3, solve_sample=0)
    envs = load_environments([twins_db], sample_rows=CAP, seed=2)
    assert {t: d.n_rows for t, d in envs[0].tables.items()} == {"alpha": CAP, "beta": CAP}
    return out, build_tasks(envs, out, config)


def test_no_two_tasks_of_a_sampled_build_ask_the_same_question(twins_build) -> None:
    """Before issue 39 this build held several tasks reading the same question (e.g. "Target value: 30"
    from ``len(alpha)`` and ``len(beta)``)."""
    out, report = twins_build
    tasks = list(read_tasks(out))
    assert len(tasks) == 40 and report.missing == 0
    for a, b in itertools.combinations(tasks, 2):
        assert visible_key(a) != visible_key(b), (a.id, b.id, a.extra["program"], b.extra["program"])


def test_shared_questions_are_told_apart_by_the_tables_read_and_counted(twins_build) -> None:
    out, report = twins_build
    tasks = list(read_tasks(out))
    told = [t for t in tasks if "reads" in t.extra]
    funnel = json.loads(report.funnel.read_text())
    assert told and funnel["told_apart"] == report.told_apart == len(told)
    plain = Counter(
        question_text(t.extra["backend"], [f.visible_name for f in t.files], render_target(t.answer))
        for t in tasks
    )
    for t in tasks:
        target = render_target(t.answer)
        if "reads" not in t.extra:  # a question no other task of the build asks
            assert plain[t.question] == 1
            continue
        # it shares its plain question with another task, and now names what its program reads
        unnamed = question_text(t.extra["backend"], [f.visible_name for f in t.files], target)
        assert plain[unnamed] >= 2
        files = t.extra.get("table_files", {})
        names = [files.get(x, x) for x in sorted(set(t.extra["tables"]))]
        assert t.extra["reads"] == sorted(names)
        for name in names:
            assert f"`{name}`" in t.question
        assert t.question.endswith(target)
    # the draws that would have asked a kept task's question even naming the tables: dropped, counted
    (step,) = funnel["steps"]
    assert step["removed"].get("same_question", 0) == report.rejections["same_question"]
    assert step["in"] == report.draws == step["kept"] + sum(step["removed"].values())
    assert f"{report.rejections['same_question']} draws dropped as same_question" in report.questions_text()


def test_told_apart_tasks_still_score_their_own_program(twins_build) -> None:
    from datadojo.reward.envlunch import score_programs
    from datadojo.reward.programs import InProcessExecutor

    out, _ = twins_build
    infos = [task_info(t, out) for t in read_tasks(out) if "reads" in t.extra]
    records = score_programs([(i, i.program, 1, 0) for i in infos], InProcessExecutor())
    assert records and all(r.solved for r in records)


def test_the_visible_key_covers_every_prompt_section_from_extra() -> None:
    assert {key for key, _ in GUIDANCE_SECTIONS} | {"answer_format"} == set(_PROMPT_EXTRA)


# -- the reference solver's report ------------------------------------------------------------------------


def test_failure_reasons_of_each_outcome() -> None:
    from datadojo.reward.envlunch import ScoreRecord

    def rec(m: list[float], errors: list[str] | None = None) -> ScoreRecord:
        return ScoreRecord("t", 0, "sql", 2, 0.0, m, 0, errors or [])

    assert failure_reason(SolveResult("t", "SELECT 1", [], 3, 0.0), rec([1.0, 1.0])) is None
    assert failure_reason(SolveResult("t", None, [], 0, 0.0), rec([0.0, 0.0])) == "no_candidate"
    assert failure_reason(SolveResult("t", None, [], 400, 0.0), rec([0.0, 0.0])) == "budget_spent"
    assert failure_reason(SolveResult("t", "SELECT 1", [], 9, 0.0), rec([1.0, 0.5])) == "differs_in_copy"
    assert failure_reason(SolveResult("t", "SELECT x", [], 9, 0.0), rec([0.0, 1.0], ["copy 1: no"])) == (
        "error_in_copy"
    )


def test_solver_sample_is_seeded_and_in_build_order() -> None:
    items = list(range(50))
    a = solver_sample(items, 7, seed=3)  # type: ignore[arg-type]
    assert a == solver_sample(items, 7, seed=3) and len(a) == 7 and a == sorted(a) and len(set(a)) == 7
    assert a != solver_sample(items, 7, seed=4)  # type: ignore[arg-type]
    assert solver_sample(items[:5], 7, seed=3) == items[:5]  # type: ignore[arg-type]


def test_solver_report_counts_each_outcome(twins_build, monkeypatch: pytest.MonkeyPatch) -> None:
    """Five tasks, each given a known outcome, scored for real in the copies: 1 of 5 solved, one of each
    failure reason."""
    out, _ = twins_build
    tasks = list(read_tasks(out))
    sql = [t for t in tasks if t.extra["backend"] == "sql"][:2]
    pandas = [t for t in tasks if t.extra["backend"] == "pandas"][:3]
    chosen = sql + pandas
    assert len(chosen) == 5
    infos = {t.id: task_info(t, out) for t in chosen}
    planned = {
        sql[0].id: (infos[sql[0].id].program, 12),  # the hidden program: solved in every copy
        sql[1].id: (constant_program(infos[sql[1].id]), 30),  # o* as constants: differs in a copy
        pandas[0].id: (None, 0),  # nothing to try
        pandas[1].id: (None, 100),  # budget spent
        pandas[2].id: ("import pandas as pd\nresult = pd.read_parquet('missing.parquet')", 4),  # fails
    }

    def fake_solve(infos_, config):
        assert config.max_candidates == 100 and config.time_limit_s is None
        return [
            SolveResult(i.task.id, *planned[i.task.id][:1], [], planned[i.task.id][1], 0.0) for i in infos_
        ]

    monkeypatch.setattr(solver_check, "solve", fake_solve)
    report = check_with_solver(chosen, out, sample=5, seed=0, candidates=100)
    assert (report.tried, report.solved, report.share) == (5, 1, 0.2)
    assert report.by_backend == {"sql": (1, 2), "pandas": (0, 3)}
    assert report.failures == Counter(
        {"differs_in_copy": 1, "no_candidate": 1, "budget_spent": 1, "error_in_copy": 1}
    )
    assert report.examples["differs_in_copy"] == [sql[1].id]
    assert report.examples["error_in_copy"] == [pandas[2].id]
    d = report.to_dict()
    assert d["solved"] == 1 and d["tried"] == 5 and d["by_backend"]["sql"] == {"solved": 1, "tried": 2}
    assert "solved 1/5 tasks in every copy (20%; pandas 0/3, sql 1/2)" in report.text()


def test_a_build_reports_the_solver_share_in_its_funnel(twins_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "tasks.jsonl"
    config = BuildConfig(n=8, seed=2, workers=1, sample_rows=CAP, solve_sample=3, solve_candidates=50)
    report = build_tasks(load_environments([twins_db]), out, config)
    assert report.solver is not None and report.solver.tried == 3 and report.solver.n_tasks == 8
    assert report.solver.solved + sum(report.solver.failures.values()) == 3
    funnel = json.loads(report.funnel.read_text())
    assert funnel["solver"]["tried"] == 3 and funnel["solver"]["solved"] == report.solver.solved
    assert funnel["solver"]["budget"] == "50 candidates per task, no time limit"
    off = build_tasks(
        load_environments([twins_db]), tmp_path / "off.jsonl", config.model_copy(update={"solve_sample": 0})
    )
    assert off.solver is None and "solver" not in json.loads(off.funnel.read_text())


def test_tables_read_counts_a_subquerys_and_a_ctes_tables() -> None:
    """A question that names "the tables the query reads (and no other)" must name the anti-join's child
    too, which is not in the query's FROM list."""
    from datadojo.synth.envlunch.synthesis import tables_read

    con = sqlite3.connect(":memory:")
    con.executescript(
        'CREATE TABLE "Parent" (id INTEGER PRIMARY KEY, name TEXT);'
        "CREATE TABLE child (id INTEGER, pid INTEGER REFERENCES Parent (id));"
        "CREATE TABLE other (x INTEGER);"
    )
    tables = ["Parent", "child", "other"]
    anti = 'SELECT T1."name" FROM "Parent" AS T1 WHERE NOT EXISTS (SELECT 1 FROM "child" AS S WHERE S.pid = T1.id)'
    assert tables_read(con, anti, tables) == ["Parent", "child"]
    cte = (
        "WITH grouped AS (SELECT T1.name AS name, COUNT(*) AS value FROM parent AS T1 JOIN child AS T2 "
        "ON T2.pid = T1.id GROUP BY T1.name) SELECT * FROM grouped WHERE value > (SELECT AVG(value) FROM grouped)"
    )
    assert tables_read(con, cte, tables) == ["Parent", "child"]
    assert tables_read(con, "SELECT COUNT(*) AS value FROM other", tables) == ["other"]
    con.execute("INSERT INTO other VALUES (1)")  # the authorizer is gone afterwards
    assert con.execute("SELECT x FROM other").fetchall() == [(1,)]


def test_a_draw_asking_a_kept_question_is_dropped_and_counted(twins_db: Path, tmp_path: Path) -> None:
    """Replay task 0's job with its question already kept: the draw that made it (the first) is now
    dropped as ``same_question``, once, and the index takes its next draw, which asks something else."""
    from datadojo.synth.envlunch.build import _Job, _run_job_in

    conf = BuildConfig(n=1, seed=2, sample_rows=CAP)
    env = load_environments([twins_db], sample_rows=CAP, seed=2)[0]
    first = _run_job_in(env, conf, tmp_path, "x.copies", _Job(0, "pandas", [0], 0, set(), False))
    ((_, task, program, told),) = first.tasks
    assert (first.draws, first.rejections) == (1, Counter())  # kept at the first draw
    again = _run_job_in(env, conf, tmp_path, "x.copies", _Job(0, "pandas", [0], 0, set(), False, {told}))
    ((_, other, other_program, other_told),) = again.tasks
    assert again.rejections["same_question"] == 1
    assert again.draws == 1 + sum(again.rejections.values())  # every draw kept or counted once
    assert other_program != program and other_told != told and visible_key(other) != visible_key(task)


def test_tell_apart_names_only_the_tasks_that_share_a_question() -> None:
    """Three hand-made tasks: two read "Target value: 30" from different tables, one asks its own."""
    from datadojo.synth.envlunch.build import _tell_apart_shared
    from datadojo.types import DataFile, Task

    files = [
        DataFile(path="x.copies/e/pandas/orig/alpha.parquet", kind="parquet", name="alpha.parquet"),
        DataFile(path="x.copies/e/pandas/orig/beta.parquet", kind="parquet", name="beta.parquet"),
    ]
    table_files = {"alpha": "alpha.parquet", "beta": "beta.parquet"}

    def task(i: int, value: int, tables: list[str]) -> Task:
        answer = {"columns": ["value"], "rows": [[value]]}
        question = question_text("pandas", ["alpha.parquet", "beta.parquet"], render_target(answer))
        extra = {"backend": "pandas", "tables": tables, "table_files": table_files}
        return Task(
            id=f"t{i}", question=question, files=files, answer=answer, answer_kind="envlunch", extra=extra
        )

    tasks = [task(0, 30, ["alpha"]), task(1, 7, ["alpha"]), task(2, 30, ["beta"])]
    out, told = _tell_apart_shared(tasks)
    assert told == 2 and out[1] is tasks[1] and "reads" not in out[1].extra
    assert out[0].extra["reads"] == ["alpha.parquet"] and out[2].extra["reads"] == ["beta.parquet"]
    assert (
        "The unknown program reads `alpha.parquet` (and no other file).\n\nTarget value: 30"
        in out[0].question
    )
    assert (
        "The unknown program reads `beta.parquet` (and no other file).\n\nTarget value: 30" in out[2].question
    )
    assert len({visible_key(t) for t in out}) == 3 and len({visible_key(t) for t in tasks}) == 2

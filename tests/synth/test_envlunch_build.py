"""Building task sets: the §3 filter, reproducibility, task records and files, scoring the reference program
in-process and in the sandbox, and the audit over a few hundred real tasks from Spider."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from datadojo.jsonl import read_tasks
from datadojo.reward.canon import canonical_from_json, is_degenerate
from datadojo.reward.envlunch import score_programs, task_info
from datadojo.reward.programs import InProcessExecutor, Job, SandboxExecutor, prepare_python
from datadojo.synth.envlunch.audit import constant_program, run_audit
from datadojo.synth.envlunch.build import BuildConfig, build_tasks, load_environments
from datadojo.synth.envlunch.synthesis import EnvContext, SynthConfig, synthesize

REPO = Path(__file__).resolve().parents[2]
SHOP = REPO / "examples" / "data" / "shop.sqlite"
SALES = REPO / "examples" / "data" / "sales.csv"


@pytest.fixture(scope="module")
def small_build(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("wb") / "tasks.jsonl"
    envs = load_environments([SHOP, SALES])
    report = build_tasks(envs, out, BuildConfig(n=40, seed=3, workers=1))
    return out, report


def test_retained_trajectories_pass_the_filter() -> None:
    env = load_environments([SHOP])[0]
    ctx = EnvContext(env, SynthConfig(seed=0))
    kept = Counter()
    for i in range(60):
        backend = "sql" if i % 2 else "pandas"
        res = synthesize(ctx, backend, random.Random(i))
        if isinstance(res, str):
            continue
        kept[backend] += 1
        assert not is_degenerate(res.target)
        assert len(res.copy_results) == (2 if backend == "sql" else 3)
        assert all(not is_degenerate(c) for c in res.copy_results)  # non-degenerate in every copy
        assert any(c.rows != res.target.rows for c in res.copy_results)  # changes in at least one
        assert res.target.n_rows <= 30
    assert kept["sql"] > 5 and kept["pandas"] > 5


def test_build_writes_tasks_and_environment_files(small_build) -> None:
    out, report = small_build
    assert len(report.tasks) == 40 and report.missing == 0
    tasks = list(read_tasks(out))
    assert [t.id for t in tasks] == [t.id for t in report.tasks]
    backends = Counter(t.extra["backend"] for t in tasks)
    assert backends["sql"] > 0 and backends["pandas"] > 0
    for t in tasks:
        assert t.answer_kind == "envlunch" and t.difficulty == t.extra["level"]
        assert t.extra["t_max"] == {"sql": 16, "pandas": 48}[t.extra["backend"]] and t.extra["w"] == 0.5
        assert t.extra["program"] not in t.question  # the trajectory is never shown
        for f in t.files:
            assert Path(f.path).is_file(), f.path
        info = task_info(t, out)
        assert all(d.is_dir() for d in info.copy_dirs) and len(info.copy_dirs) == info.task.extra["k"]
        if t.extra["backend"] == "sql":
            assert t.question.count("|") >= 1 or "Target" in t.question
            assert t.extra["db_name"] == "shop.sqlite"
        else:
            assert "Target value:" in t.question
    # sales.csv (one table, no keys) only gives pandas tasks; its copies are Parquet files
    sales = [t for t in tasks if t.extra["env"] == "sales"]
    assert all(t.extra["backend"] == "pandas" for t in sales)


def test_build_writes_its_funnel_to_disk(small_build) -> None:
    """Issue 23: EnvLunch's funnel (draws → kept, rejections by reason) was only in memory outside the recipe."""
    out, report = small_build
    funnel = json.loads((out.parent / "tasks.funnel.json").read_text())
    assert report.funnel == out.parent / "tasks.funnel.json"
    (step,) = funnel["steps"]
    assert step["in"] == report.draws and step["kept"] == funnel["kept"] == 40
    assert step["removed"] == {k: v for k, v in sorted(report.rejections.items()) if v}


def test_build_is_reproducible_and_independent_of_workers(tmp_path: Path) -> None:
    envs = load_environments([SHOP, SALES])
    a = build_tasks(envs, tmp_path / "a.jsonl", BuildConfig(n=16, seed=9, workers=1))
    b = build_tasks(envs, tmp_path / "b.jsonl", BuildConfig(n=16, seed=9, workers=2))
    c = build_tasks(envs, tmp_path / "c.jsonl", BuildConfig(n=16, seed=10, workers=1))
    key = lambda r: [(t.id, t.extra["program"], json.dumps(t.extra["copy_targets"])) for t in r.tasks]  # noqa: E731
    assert key(a) == key(b)
    assert key(a) != key(c)
    assert (tmp_path / "a.copies").is_dir() and not list(tmp_path.glob(".*.tmp"))


def test_reference_programs_score_one_in_every_copy(small_build) -> None:
    out, _ = small_build
    infos = [task_info(t, out) for t in read_tasks(out)]
    records = score_programs([(i, i.program, 2, 0) for i in infos], InProcessExecutor())
    assert all(r.solved for r in records), [(r.task_id, r.errors) for r in records if not r.solved]
    for r, info in zip(records, infos, strict=True):
        assert r.reward == pytest.approx(1 + 0.5 * (1 - 2 / info.t_max))


def test_sandbox_and_in_process_agree(small_build) -> None:
    out, _ = small_build
    infos = [task_info(t, out) for t in read_tasks(out)]
    pick = [next(i for i in infos if i.backend == "sql"), next(i for i in infos if i.backend == "pandas")]
    items = [(i, i.program, 0, 0) for i in pick]
    items += [(i, constant_program(i), 0, 0) for i in pick]
    items.append((pick[0], "DROP TABLE customers", 0, 0))  # refused by the read-only SQL tool
    items.append((pick[1], "import pandas as pd\nresult = pd.read_parquet('nope.parquet')", 0, 0))
    here = score_programs(items, InProcessExecutor())
    there = score_programs(items, SandboxExecutor(concurrency=2))
    assert [r.m for r in here] == [r.m for r in there]
    assert here[0].solved and here[1].solved and not here[2].solved and not here[3].solved
    assert there[4].reward == 0.0 and there[4].errors and there[5].reward == 0.0


def test_python_submission_preparation() -> None:
    code, names = prepare_python("import pandas as pd\ndf = pd.DataFrame({'a': [1]})\ndf['a'].sum()")
    assert code.splitlines()[-1] == "result = df['a'].sum()"
    assert {"pd", "df", "result"} <= set(names)
    with pytest.raises(SyntaxError):
        prepare_python("def (:")
    out = InProcessExecutor().run([Job("pandas", "result = (", (Path("."),))])[0][0]
    assert out.result is None and "SyntaxError" in (out.error or "")


def _spider_subset(databases: Path) -> list:
    names = ["wine_1", "flight_2", "college_3", "hr_1", "csu_1", "inn_1", "student_1", "dorm_1", "activity_1"]
    return load_environments([databases / n / f"{n}.sqlite" for n in names])


@pytest.fixture(scope="module")
def spider_build(tmp_path_factory: pytest.TempPathFactory, shared_data: Callable[..., Path]):
    envs = _spider_subset(shared_data("spider", "database"))
    out = tmp_path_factory.mktemp("spider") / "tasks.jsonl"
    report = build_tasks(envs, out, BuildConfig(n=300, seed=0, workers=2))
    return out, report


def test_audit_over_a_few_hundred_spider_tasks(spider_build) -> None:
    """The constant-printing answer scores < 1 on every retained task, and 1 with the copies off."""
    out, report = spider_build
    assert len(report.tasks) == 300
    infos = [task_info(t, out) for t in read_tasks(out)]
    audit = run_audit(infos, InProcessExecutor())
    assert audit.n == 300
    assert audit.pass_with_copies == 0.0 and audit.leaks() == []
    assert audit.pass_without_copies == 1.0
    assert set(audit.by_backend()) == {"sql", "pandas"}
    # the stored copy results are what the reference program gives in each copy
    first = infos[0]
    assert canonical_from_json(first.task.extra["target"]) == first.target

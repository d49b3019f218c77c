"""``datadojo score tasks``: a user's own task file with answers, scored with the comparison core's matcher.

Before: ``score tasks`` was an unknown benchmark (exit 2) and only the published benchmarks could be
scored from the command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.bench import get_benchmark
from datadojo.bench.base import BenchmarkError
from datadojo.cli.app import app
from datadojo.errors import ExitCode

SALES = Path(__file__).resolve().parents[2] / "examples" / "data" / "sales.csv"

TASKS = [
    {"id": "rows", "question": "How many rows?", "files": [{"path": "sales.csv"}], "answer": 120,
     "answer_kind": "number"},
    {"id": "top", "question": "Which region sells most?", "files": [{"path": "sales.csv"}], "answer": "North"},
    {"id": "share", "question": "Share of returns?", "files": [], "answer": "12.5%"},
    {"id": "regions", "question": "Which regions?", "files": [], "answer": ["North", "South"],
     "answer_kind": "list"},
    {"id": "up", "question": "Did sales rise?", "files": [], "answer": True},
]  # fmt: skip

#: What a model writes: sentences, other case, another order, a boxed answer, one wrong number.
PREDICTIONS = [
    {"id": "rows", "answer": "There are 121 rows in the file."},  # within 3 %
    {"id": "top", "answer": "north"},
    {"id": "share", "answer": "about 20%"},  # wrong
    {"id": "regions", "answer": "South, North"},
    {"id": "up", "answer": "\\boxed{Yes}"},
]


def _write(folder: Path, tasks: list[dict], preds: list[dict] | None = None) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sales.csv").write_bytes(SALES.read_bytes())
    t = folder / "my_tasks.jsonl"
    t.write_text("".join(json.dumps(r) + "\n" for r in tasks))
    p = folder / "preds.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in (preds if preds is not None else PREDICTIONS)))
    return t, p


def test_cli_scores_a_users_task_file(tmp_path: Path) -> None:
    tasks, preds = _write(tmp_path / "mine", TASKS)
    res = CliRunner().invoke(app, ["score", "tasks", "--data", str(tasks), "-p", str(preds), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    verdicts = {i["id"]: i["correct"] for i in report["items"]}
    assert verdicts == {"rows": True, "top": True, "share": False, "regions": True, "up": True}
    assert report["totals"]["accuracy"] == pytest.approx(0.8)
    assert report["rule"]["name"] == "match"

    # a tolerance option, as for every loader: 121 vs 120 is outside 0.1 %
    res = CliRunner().invoke(app, ["score", "tasks", "--data", str(tasks), "-p", str(preds), "--json",
                                   "--option", "rel_tol=0.001"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["totals"]["accuracy"] == pytest.approx(0.6)


def test_a_folder_holding_tasks_jsonl_and_relative_paths(tmp_path: Path) -> None:
    tasks, _ = _write(tmp_path / "mine", TASKS)
    tasks.rename(tasks.with_name("tasks.jsonl"))
    loaded = list(get_benchmark("tasks").load(tmp_path / "mine"))
    assert [t.id for t in loaded] == [r["id"] for r in TASKS]
    assert Path(loaded[0].files[0].path) == (tmp_path / "mine" / "sales.csv").resolve()


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"id": "a", "question": "q?"}, "no reference answer"),
        ({"id": "a", "question": "q?", "answer": "  "}, "no reference answer"),
        ({"id": "a", "question": "q?", "answer": "1", "answer_kind": "numbr"}, "field 'answer_kind': unknown kind 'numbr'"),
        ({"id": "a", "question": "q?", "answer": "x", "answer_kind": "sailor_meta"}, "score scidata"),
        ({"id": "a", "question": "q?", "answer": "1", "files": [{"path": "gone.csv", "kind": "csv"}]},
         "data file not found"),
    ],
)  # fmt: skip
def test_bad_tasks_are_refused_naming_the_record(tmp_path: Path, record: dict, message: str) -> None:
    tasks, _ = _write(tmp_path, [TASKS[0], record])
    with pytest.raises(BenchmarkError) as info:
        list(get_benchmark("tasks").load(tasks))
    assert message in str(info.value) and f"{tasks}:2 (id 'a')" in str(info.value)


def test_every_bad_reference_is_named_on_its_own_line_before_anything_is_scored(tmp_path: Path) -> None:
    """A task file ``rollout`` accepted (it never scores) whose references do not fit their kind. Before:
    ``score tasks`` ended in a 60-line traceback at the first (``reference answer 'Gibraltar' is not a
    number``). Now: exit 2, one line per bad record naming file, line, id, field and why; nothing scored."""
    bad = [
        {"id": "rock", "question": "Which rock?", "answer": "Gibraltar", "answer_kind": "number"},
        {"id": "yn", "question": "Up?", "answer": "perhaps", "answer_kind": "bool"},
        {"id": "rec", "question": "Stats?", "answer": "mean 3", "answer_kind": "record"},
    ]
    answers = [
        {"id": "rock", "answer": "Gibraltar"},
        {"id": "yn", "answer": "yes"},
        {"id": "rec", "answer": "3"},
    ]
    tasks, preds = _write(tmp_path, [TASKS[0], bad[0], TASKS[1], bad[1], bad[2]], PREDICTIONS + answers)
    res = CliRunner().invoke(app, ["score", "tasks", "--data", str(tasks), "-p", str(preds)])
    assert res.exit_code == ExitCode.BAD_INPUT, res.output
    assert "Traceback" not in res.output and "accuracy" not in res.output
    lines = res.stderr.splitlines()
    assert lines[0] == f"error: {tasks}: 3 of 5 task(s) cannot be scored; fix them and rerun:"
    assert lines[1:] == [
        f"  {tasks}:2 (id 'rock'): field 'answer': the reference answer 'Gibraltar' is not a number "
        "(answer_kind 'number')",
        f"  {tasks}:4 (id 'yn'): field 'answer': the reference answer 'perhaps' is not a yes/no value "
        "(answer_kind 'bool')",
        f"  {tasks}:5 (id 'rec'): field 'answer': a record answer must be a dict, got str (answer_kind 'record')",
    ]


def test_cli_bad_task_file_exits_2_in_one_line(tmp_path: Path) -> None:
    tasks, preds = _write(tmp_path, [{"id": "a", "question": "q?"}])
    res = CliRunner().invoke(app, ["score", "tasks", "--data", str(tasks), "-p", str(preds)])
    assert res.exit_code == ExitCode.BAD_INPUT and "Traceback" not in res.output
    assert res.stderr.startswith("error: ") and "no reference answer" in res.stderr
    res = CliRunner().invoke(
        app, ["score", "tasks", "--data", str(tasks), "-p", str(preds), "--option", "tol=1"]
    )
    assert res.exit_code == ExitCode.BAD_INPUT and "unknown option(s) tol" in res.output

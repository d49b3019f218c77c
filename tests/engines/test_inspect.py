"""inspect_ai (pinned): DataDojo tasks run by ``inspect eval`` in DataDojo's sandbox, scored by the registry.

* DataDojo is installed the way a user installs it (a real ``pip install`` of this checkout into a
  folder of its own: its ``inspect_ai`` entry point included), and inspect's own command line runs
  ``inspect eval datadojo/tasks -T path=TASKS`` against the loopback OpenAI-compatible server through
  inspect's ``openai-api`` provider; the replies are scripted per task and turn;
* every sample's score equals the reward ``datadojo eval`` gives the same task for the same replies, part
  by part, to 1e-9 (DataMind's answer/length/format parts: a correct three-turn episode whose state lives
  across cells, a wrong answer, a malformed-then-wrong episode worth DataMind's −0.1);
* ``inspect eval datadojo/benchmark -T name=spider``: the fixtures' Spider dev tasks, replayed from the
  oracle agent's turns (SQL cells in the sandbox), score what the registry gives the oracle episodes under
  Spider's official rule;
* the parity fixture (``datadojo.testing.parity``) through ``inspect eval``: every total is the papers' by
  hand, and the rows join the parity table as the ``inspect`` consumer;
* the ``datadojo`` sandbox environment, as inspect's registry finds it: Python and SQL cells in the
  confined sandbox, file reads and writes confined to it, any other program refused with a message.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _fixtures import FX, MANIFEST
from inspect_ai.log import read_eval_log

from datadojo.integrations.inspect import register
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import DataFile, Task

ROOT = Path(__file__).resolve().parents[2]
SALES = ROOT / "examples" / "data" / "sales.csv"

#: question marker -> the replies of its episode, turn by turn (the trl engine test's three-turn episode)
SCRIPTS: dict[str, list[str]] = {
    "[stateful]": [
        "<think>Count rows and keep state.</think>\n<code>\nimport pandas as pd\nx = len(pd.read_csv('sales.csv'))\n"
        "open('note.txt', 'w').write(str(x * 6))\nprint('saved', x)\n</code>",
        "<think>Read my note back.</think>\n<code>\nprint(open('note.txt').read(), x)\n</code>",
        "<think>Done.</think>\n<answer>1440</answer>",
    ],
    "[wrong]": ["<think>Guess.</think>\n<answer>7</answer>"],
    "[malformed]": ["I think the answer is 7", "<think>Guess.</think>\n<answer>7</answer>"],
}


def _tasks() -> list[Task]:
    return [
        Task(
            id=f"sales-{key.strip('[]')}",
            question=f"{key} How many rows does sales.csv have, times six?",
            files=[DataFile.from_path(SALES)],
            answer=1440,
            answer_kind="number",
        )
        for key in SCRIPTS
    ]


def _reply(request: dict[str, Any]) -> str:
    """The scripted reply: the task by the marker in its first user message, the turn by the replies so far."""
    first = next(m["content"] for m in request["messages"] if m["role"] == "user")
    key = next(k for k in SCRIPTS if k in first)
    turn = sum(1 for m in request["messages"] if m["role"] == "assistant")
    return SCRIPTS[key][turn]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This checkout, pip-installed (no dependencies: the engine's environment has them) into a folder."""
    tmp = tmp_path_factory.mktemp("install")
    source = tmp / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(ROOT / name, source / name)
    target = tmp / "site-packages"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run(
        [*pip, "--disable-pip-version-check", "--target", str(target), str(source)],
        check=True,
        timeout=600,
    )
    return target


def _inspect_env(site: Path, base_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "INSPECT_"))}
    env.update(
        PYTHONPATH=str(site),
        LOOPBACK_BASE_URL=base_url,
        LOOPBACK_API_KEY="loopback",
        INSPECT_LOG_LEVEL="warning",
    )
    return env


def _datadojo_eval(tasks_path: Path, out: Path, base_url: str) -> dict[str, dict[str, float]]:
    """``datadojo eval tasks`` on the same replies: each task's logged reward (scores.jsonl: total, parts)."""
    cmd = [sys.executable, "-m", "datadojo", "eval", "tasks", "--data", str(tasks_path)]
    cmd += ["--model", f"openai:scripted@{base_url}", "-n", "1", "--out", str(out), "--no-report"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines() if line.strip()]
    return {row["id"]: row["rewards"] for row in rows}


def test_inspect_eval_scores_datadojo_tasks_as_datadojo_eval_does(installed: Path, tmp_path: Path) -> None:
    tasks = _tasks()
    tasks_path = tmp_path / "tasks.jsonl"
    tasks_path.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in tasks))
    log, requests = _inspect_eval(installed, tasks_path, tmp_path / "logs", _reply)
    # the environment's sampling (DataMind §5.1), as datadojo eval sends it
    assert {(r.get("temperature"), r.get("top_p")) for r in requests} == {(0.7, 0.95)}
    assert log.eval.task == "datadojo/tasks"  # found through the entry point, under DataDojo's namespace
    scores = {str(s.id): s.scores["datadojo_reward"] for s in log.samples or []}
    assert sorted(scores) == sorted(t.id for t in tasks)
    # the hand values (DataMind §4): right and short -> 1; wrong, well formed -> 0; wrong, malformed -> -0.1
    assert scores["sales-stateful"].value == pytest.approx(1.0, abs=1e-12)
    assert scores["sales-wrong"].value == pytest.approx(0.0, abs=1e-12)
    assert scores["sales-malformed"].value == pytest.approx(-0.1, abs=1e-12)
    assert scores["sales-stateful"].answer == "1440"
    with ScriptedLLMServer(_reply) as srv:
        expected = _datadojo_eval(tasks_path, tmp_path / "eval", srv.base_url)
    for task_id, score in scores.items():
        assert score.value == pytest.approx(expected[task_id]["total"], abs=1e-9), task_id
        for part, value in score.metadata["parts"].items():
            assert value == pytest.approx(expected[task_id][part], abs=1e-9), (task_id, part)


def _inspect_eval(
    site: Path,
    tasks_path: Path | None,
    logs: Path,
    script: Any,
    *task_args: str,
    task: str = "datadojo/tasks",
) -> Any:
    """``inspect eval TASK [-T path=TASKS] -T ...`` against the loopback server; the log read back."""
    with ScriptedLLMServer(script) as srv:
        cmd = [str(Path(sys.executable).with_name("inspect")), "eval", task]
        if tasks_path is not None:
            cmd += ["-T", f"path={tasks_path}"]
        for arg in task_args:
            cmd += ["-T", arg]
        cmd += ["--model", "openai-api/loopback/scripted", "--log-dir", str(logs), "--log-format", "json"]
        cmd += ["--display", "none", "--max-connections", "2"]
        env = _inspect_env(site, srv.base_url)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=logs.parent)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        # every request went through inspect's provider with the dialect's stop strings
        assert srv.requests and all("</answer>" in (r.json.get("stop") or []) for r in srv.requests)
    [log_file] = list(logs.glob("*.json"))
    register()  # the log names the datadojo sandbox: reading it back here needs it registered too
    log = read_eval_log(str(log_file))
    assert log.status == "success", log.error
    return log, [r.json for r in srv.requests]


def test_a_benchmark_through_inspect_eval_scores_as_the_registry_scores_the_oracle(
    installed: Path, tmp_path: Path
) -> None:
    from datadojo.bench import get_benchmark
    from datadojo.jsonl import read_tasks, read_trajectories
    from datadojo.reward.registry import RewardSpec, score_pairs_sync

    tasks = {t.id: t for t in read_tasks(FX / "spider" / "tasks.jsonl")}
    oracle = {t.task_id: t for t in read_trajectories(FX / "spider" / "run" / "trajectories.jsonl")}
    by_question = {tasks[i].question: [turn.raw for turn in traj.turns] for i, traj in oracle.items()}

    def replay(request: dict[str, Any]) -> str:
        first = next(m["content"] for m in request["messages"] if m["role"] == "user")
        turn = sum(1 for m in request["messages"] if m["role"] == "assistant")
        return next(raws for q, raws in by_question.items() if q in first)[turn]

    spider = MANIFEST["spider"]
    args = ("name=spider", f"data={spider}", f"limit={len(oracle)}")
    log, _ = _inspect_eval(installed, None, tmp_path / "logs", replay, *args, task="datadojo/benchmark")
    assert log.eval.task == "datadojo/benchmark"
    scores = {str(s.id): s.scores["datadojo_reward"] for s in log.samples or []}
    assert sorted(scores) == sorted(oracle)
    spec = RewardSpec(benchmark=get_benchmark("spider"))
    for task_id, score in scores.items():
        [expected] = score_pairs_sync([(tasks[task_id], oracle[task_id])], spec)
        assert expected.correct and score.metadata["correct"], task_id  # the gold SQL, executed
        assert score.value == pytest.approx(expected.total, abs=1e-9), task_id
        assert score.metadata["parts"] == pytest.approx(expected.parts, abs=1e-9), task_id


def test_parity_rows_through_inspect_eval(installed: Path, tmp_path: Path) -> None:
    from datadojo.testing.parity import chat_script, parity_row, write_parity_fixture, write_rows

    fixture = write_parity_fixture(tmp_path / "parity")
    log, _ = _inspect_eval(
        installed, fixture.tasks_path, tmp_path / "logs", chat_script(fixture), "max_turns=4"
    )
    scores = {str(s.id): s.scores["datadojo_reward"] for s in log.samples or []}
    assert sorted(scores) == sorted(t.id for t in fixture.tasks)
    rows = {}
    for task_id, score in scores.items():
        assert score.value == pytest.approx(fixture.expected_total(task_id), abs=1e-12), task_id
        rows[f"{task_id}/0"] = parity_row(score.value, score.metadata["parts"])
    write_rows(os.environ.get("DATADOJO_PARITY_DIR") or tmp_path / "table", "inspect", rows)


def test_datadojo_sandbox_as_inspect_finds_it() -> None:
    from inspect_ai.util._sandbox.registry import registry_find_sandboxenv

    from datadojo.integrations.inspect.samples import sample_fields

    register()
    cls = registry_find_sandboxenv("datadojo")
    db = Path(MANIFEST["spider"]) / "database" / "flight_2" / "flight_2.sqlite"
    task = Task(id="box", question="?", files=[DataFile.from_path(SALES), DataFile.from_path(db)])

    async def go() -> None:
        envs = await cls.sample_init("t", None, {**sample_fields(task)["metadata"], "__sample_id__": "box"})
        env = envs["default"]
        try:
            r = await env.exec(["python3", "-c", "import pandas as pd\nprint(len(pd.read_csv('sales.csv')))"])
            assert r.success and r.stdout.strip() == "240"
            r = await env.exec(["python3"], input="print(6 * 7)")
            assert r.success and r.stdout.strip() == "42"
            r = await env.exec(["python3", "-c", "1/0"])
            assert not r.success and "ZeroDivisionError" in r.stderr
            r = await env.exec(["sqlite3", "flight_2.sqlite", "SELECT count(*) FROM airlines"])
            assert r.success and "12" in r.stdout
            r = await env.exec(["bash", "-c", "cat /etc/passwd"])
            assert r.returncode == 127 and "no shell" in r.stderr
            await env.write_file("notes/a.txt", "from inspect")
            r = await env.exec(["python3", "-c", "print(open('notes/a.txt').read())"])
            assert r.stdout.strip() == "from inspect"
            assert (await env.read_file("sales.csv")).startswith(SALES.read_text()[:20])
            with pytest.raises(PermissionError):
                await env.read_file("/etc/passwd")
        finally:
            await cls.sample_cleanup("t", None, envs, False)

    asyncio.run(go())

"""The evaluation harness end to end: loopback model → agent loop → official scorer → figures, and resume."""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable
from math import comb
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from typer.testing import CliRunner

from datadojo.bench.dabench import DABench, gold_response
from datadojo.bench.spider import extract_sql
from datadojo.cli.app import app
from datadojo.eval.harness import EvalConfig, EvalError, default_ks, predicted_answer, run_eval
from datadojo.jsonl import iter_jsonl, read_trajectories
from datadojo.llm import load_backend
from datadojo.sandbox.result import ExecResult
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import Action, Observation, Task, Trajectory, Turn

N_TRIALS = 3
#: Per task: how many of its 3 trials the scripted model gets right, and how it behaves.
#: direct: answers at once; code: runs code, then answers; malformed: wrong trials never close a tag.
PLAN = [(3, "direct"), (2, "code"), (1, "direct"), (0, "direct"), (1, "malformed"), (2, "code")]
TURNS = {"direct": 1, "code": 2, "malformed": 3}  # malformed: 3 invalid turns in a row end the episode


@pytest.fixture
def dabench(shared_data: Callable[..., Path]) -> Path:
    return shared_data("dabench", "da-dev-questions.jsonl").parent


def _tasks(data: Path, n: int) -> list[Task]:
    return list(DABench().load(data))[:n]


class _FakeSandbox:
    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> ExecResult:
        return ExecResult.make("42\n", "ok", isolation="test")


@contextlib.asynccontextmanager
async def _fake_sandboxes(task: Task):
    yield _FakeSandbox()


def _wrong(task: Task) -> str:
    return " ".join(f"@{k}[not-{v}]" for k, v in task.answer.items())


class _Model:
    """Answers task i right in its first PLAN[i][0] episodes (by arrival order) and wrong after that."""

    def __init__(self, tasks: list[Task], plan: list[tuple[int, str]]) -> None:
        self.by_question = {t.question: (t, plan[i]) for i, t in enumerate(tasks)}
        self.seen: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, req: dict) -> str:
        msgs = req["messages"]
        task, (n_right, style) = self.by_question[msgs[1]["content"]]
        assistant = [m["content"] for m in msgs if m["role"] == "assistant"]
        if not assistant:
            with self.lock:
                k = self.seen.get(task.id, 0)
                self.seen[task.id] = k + 1
            right = k < n_right
            if style == "malformed" and not right:
                return "I will just talk without any tags. plan:malformed"
            if style == "code":
                return f"<think>plan:{'right' if right else 'wrong'}</think><code>print(42)</code>"
            return f"<think>t</think><answer>{gold_response(task) if right else _wrong(task)}</answer>"
        first = assistant[0]
        if "plan:malformed" in first:
            return "still no tags"
        right = "plan:right" in first
        return f"<think>done</think><answer>{gold_response(task) if right else _wrong(task)}</answer>"


def _expected(plan: list[tuple[int, str]], n: int, k: int) -> float:
    return sum(1 - comb(n - c, k) / comb(n, k) for c, _ in plan) / len(plan)


async def _run(
    tmp_path: Path, data: Path, plan, *, limit: int | None = None, n: int = N_TRIALS, server=None, **kw
):
    tasks = _tasks(data, len(plan))
    model = _Model(tasks, plan)
    own = server is None
    srv = server or ScriptedLLMServer(model)
    if own:
        srv.start()
    try:
        backend = load_backend(f"openai:fake@{srv.base_url}?max_retries=0")
        kw.setdefault("model", "openai:fake")
        cfg = EvalConfig(
            bench="dabench",
            data=data,
            out=tmp_path / "run",
            n_trials=n,
            limit=limit or len(plan),
            concurrency=4,
            ks=(1, 2, 3),
            **kw,
        )
        try:
            return await run_eval(cfg, backend=backend, sandboxes=_fake_sandboxes), srv
        finally:
            await backend.aclose()
    finally:
        if own:
            srv.stop()


async def test_figures_match_known_outcomes(tmp_path, dabench):
    result, _ = await _run(tmp_path, dabench, PLAN)
    s = result.summary
    m = s["metrics"]
    n_trials = len(PLAN) * N_TRIALS
    assert s["n_tasks"] == len(PLAN) and s["n_trials"] == N_TRIALS and s["missing_trials"] == 0
    assert m["pass@1"] == pytest.approx(sum(c / N_TRIALS for c, _ in PLAN) / len(PLAN))
    assert m["pass@2"] == pytest.approx(_expected(PLAN, N_TRIALS, 2))
    assert m["pass@3"] == pytest.approx(_expected(PLAN, N_TRIALS, 3))
    assert m["any_of_n"] == pytest.approx(sum(c > 0 for c, _ in PLAN) / len(PLAN))
    unanswered = sum(N_TRIALS - c for c, style in PLAN if style == "malformed")
    assert m["success_rate"] == pytest.approx((n_trials - unanswered) / n_trials)
    turns = sum(c * TURNS["direct"] + (N_TRIALS - c) * TURNS["malformed"] if style == "malformed"
                else N_TRIALS * TURNS[style] for c, style in PLAN)  # fmt: skip
    assert m["avg_turns"] == pytest.approx(turns / n_trials)
    assert m["avg_tokens"] > 0
    # DABench's official by-question accuracy, averaged over trials, is pass@1 here (all-or-nothing credit)
    assert s["official"]["accuracy"] == pytest.approx(m["pass@1"])
    assert s["stop_reasons"] == {"answer": n_trials - unanswered, "invalid": unanswered}

    # per-category figures come from the tasks of that category only
    tasks = _tasks(dabench, len(PLAN))
    cat = tasks[0].category
    members = [c for (c, _), t in zip(PLAN, tasks, strict=True) if t.category == cat]
    assert m["per_category"][cat]["pass@1"] == pytest.approx(sum(members) / (N_TRIALS * len(members)))

    # files: summary.json as returned, one scores row per trial with its DataMind reward
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert on_disk["metrics"] == m
    rows = [r for _, r in iter_jsonl(tmp_path / "run" / "scores.jsonl")]
    assert len(rows) == n_trials
    for (c, _style), t in zip(PLAN, tasks, strict=True):
        mine = [r for r in rows if r["id"] == t.id]
        assert sorted(r["trial"] for r in mine) == list(range(N_TRIALS))
        assert sum(r["correct"] for r in mine) == c
        for r in mine:
            if r["correct"]:
                assert (
                    r["rewards"]["total"] == pytest.approx(r["rewards"]["r_length"])
                    and r["rewards"]["total"] > 0
                )
            elif r["stop_reason"] == "invalid":
                assert r["rewards"]["total"] == pytest.approx(-0.1)  # wrong and malformed (DataMind §4)
            else:
                assert r["rewards"]["total"] == 0.0
    assert (tmp_path / "run" / "report.html").exists() and (tmp_path / "run" / "report.md").exists()


async def test_rerun_resumes_and_extends(tmp_path, dabench):
    plan = [(1, "direct"), (1, "code"), (0, "direct")]
    model = _Model(_tasks(dabench, 3), plan)
    with ScriptedLLMServer(model) as server:
        first, _ = await _run(tmp_path, dabench, plan, limit=2, n=2, server=server)
        assert first.summary["n_tasks"] == 2 and first.rollout.finished == 4
        traj_path = tmp_path / "run" / "trajectories.jsonl"
        # an interrupted run: the last trajectory never made it to disk
        lines = traj_path.read_bytes().splitlines(keepends=True)
        traj_path.write_bytes(b"".join(lines[:-1]))
        lost = json.loads(lines[-1])
        before = len(server.requests)
        again, _ = await _run(tmp_path, dabench, plan, limit=2, n=2, server=server)
        assert again.rollout.skipped == 3 and again.rollout.finished == 1
        redone = [r.json["messages"][1]["content"] for r in server.requests[before:]]
        assert set(redone) == {next(t.question for t in _tasks(dabench, 3) if t.id == lost["task_id"])}
        # a larger --limit runs only the new task's trials
        more, _ = await _run(tmp_path, dabench, plan, limit=3, n=2, server=server)
        assert more.rollout.skipped == 4 and more.rollout.finished == 2
    assert more.summary["n_tasks"] == 3 and more.summary["missing_trials"] == 0
    keys = sorted(t.key for t in read_trajectories(traj_path))
    assert keys == sorted((t.id, s) for t in _tasks(dabench, 3) for s in range(2))


async def test_other_settings_in_the_same_folder_are_refused(tmp_path, dabench):
    plan = [(1, "direct")]
    await _run(tmp_path, dabench, plan, n=1)
    from datadojo.errors import ResumeError

    with pytest.raises(ResumeError, match="max_turns: was 10, now 4"):
        await _run(tmp_path, dabench, plan, n=1, max_turns=4)


def test_config_errors_name_the_setting():
    with pytest.raises(EvalError, match="--model"):
        EvalConfig(bench="dabench", data=".", out=".", agent="model")
    with pytest.raises(EvalError, match="n_trials"):
        EvalConfig(bench="dabench", data=".", out=".", model="openai:x", n_trials=0)
    assert default_ks(1) == (1,) and default_ks(3) == (1, 3) and default_ks(12) == (1, 3, 5, 10, 12)


def _traj(turns: list[Turn], answer: str | None) -> Trajectory:
    return Trajectory(
        task_id="t", turns=turns, final_answer=answer, stop_reason="answer" if answer else "max_turns"
    )


def _sql_turn(sql: str, status: str) -> Turn:
    return Turn(raw="", action=Action(kind="sql", text=sql), observation=Observation(text="x", status=status))


def test_predicted_sql_rule():
    sql_task = Task(id="t", question="q", answer="SELECT 1", answer_kind="sql")
    ran = [
        _sql_turn("SELECT a FROM t", "ok"),
        _sql_turn("SELECT b FROM t", "ok"),
        _sql_turn("SELEC c", "error"),
    ]
    # the answer holds SQL: it wins (fenced, or bare SELECT / WITH)
    assert predicted_answer(sql_task, _traj(ran, "```sql\nSELECT z FROM t\n```")) == (
        "```sql\nSELECT z FROM t\n```", "answer")  # fmt: skip
    assert predicted_answer(sql_task, _traj(ran, "  with x as (select 1) select * from x"))[1] == "answer"
    # the answer is a result table: the last SQL action that ran without error
    assert predicted_answer(sql_task, _traj(ran, "a | b\n1 | 2")) == ("SELECT b FROM t", "sql_action")
    # nothing ran: the answer as it is (it will fail to execute and score 0)
    assert predicted_answer(sql_task, _traj([_sql_turn("SELEC", "error")], "five")) == ("five", "answer")
    assert predicted_answer(sql_task, _traj([], None)) == (None, "none")
    # no final answer: nothing was submitted, even if a query ran
    assert predicted_answer(sql_task, _traj(ran, None)) == (None, "none")
    # other benchmarks: the final answer, whatever actions ran
    other = Task(id="t", question="q", answer={"x": "1"}, answer_kind="dabench")
    assert predicted_answer(other, _traj(ran, "@x[1]")) == ("@x[1]", "answer")


_TABLE_TEXT = st.lists(st.from_regex(r"[A-Za-z0-9 |.\-]{0,24}", fullmatch=True), max_size=6).map("\n".join)
_IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True)


@given(answer=_TABLE_TEXT, n_ok=st.integers(1, 4), n_err=st.integers(0, 3))
def test_a_table_answer_scores_the_last_successful_sql(answer, n_ok, n_err):
    assume(not re.match(r"\s*\(?\s*(select|with)\b", answer, re.IGNORECASE))
    sql_task = Task(id="t", question="q", answer="SELECT 1", answer_kind="sql")
    turns = [_sql_turn(f"SELECT {i} FROM t", "ok") for i in range(n_ok)]
    turns += [_sql_turn(f"SELECT broken{i}", "error") for i in range(n_err)]
    assert predicted_answer(sql_task, _traj(turns, answer)) == (f"SELECT {n_ok - 1} FROM t", "sql_action")


@given(col=_IDENT, table=_IDENT, fenced=st.booleans(), prose=_TABLE_TEXT)
def test_sql_in_the_answer_is_what_gets_scored(col, table, fenced, prose):
    query = f"SELECT {col} FROM {table}"
    answer = f"{prose}\n```sql\n{query}\n```" if fenced else query
    sql_task = Task(id="t", question="q", answer="SELECT 1", answer_kind="sql")
    text, source = predicted_answer(sql_task, _traj([_sql_turn("SELECT other FROM t", "ok")], answer))
    assert source == "answer" and extract_sql(text) == query


def test_cli_eval_with_real_sandbox(tmp_path, dabench):
    task = _tasks(dabench, 1)[0]
    csv = task.extra["file_name"]

    def reply(req: dict) -> str:
        if not any(m["role"] == "assistant" for m in req["messages"]):
            return f"<think>count rows</think><code>print(len(open({csv!r}).read().splitlines()) > 1)</code>"
        assert "True" in req["messages"][-1]["content"]  # the observation came from the real file
        return f"<think>ok</think><answer>{gold_response(task)}</answer>"

    with ScriptedLLMServer(reply) as server:
        res = CliRunner().invoke(app, [
            "eval", "dabench", "--data", str(dabench), "--model", f"openai:fake@{server.base_url}",
            "-n", "1", "--limit", "1", "--out", str(tmp_path / "cli"), "--json",
        ])  # fmt: skip
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["metrics"]["pass@1"] == 1.0 and summary["metrics"]["avg_turns"] == 2.0
    assert (tmp_path / "cli" / "report.html").exists()


def test_cli_eval_reports_bad_input():
    res = CliRunner().invoke(app, ["eval", "nosuchbench", "--data", ".", "--out", "x", "--model", "openai:m"])
    assert res.exit_code != 0 and "unknown benchmark" in res.output


class _DownFor:
    """The plan's model, but the server answers HTTP 503 to every request about task ``down``'s question."""

    def __init__(self, model: _Model, question: str) -> None:
        self.model, self.question, self.down = model, question, True

    def __call__(self, req: dict):
        from datadojo.testing.server import Status

        if self.down and req["messages"][1]["content"] == self.question:
            return Status(503)
        return self.model(req)


async def test_server_failures_are_shown_apart_and_left_out_of_pass_at_k_until_rerun(tmp_path, dabench):
    """Issue 25: an llm_error trial is the server's failure, not the agent's. Before: it counted as wrong
    (pass@1 2/3 here, R -0.1, no banner). Now: out of the figures, counted apart, named by a banner; the
    rerun samples it again and the figures then cover every trial."""
    from datadojo.eval.report import server_failure_banner

    plan = [(1, "direct"), (1, "direct"), (0, "direct")]
    tasks = _tasks(dabench, 3)
    script = _DownFor(_Model(tasks, plan), tasks[0].question)
    with ScriptedLLMServer(script) as server:
        first, _ = await _run(tmp_path, dabench, plan, n=1, server=server)
        s = first.summary
        assert s["stop_reasons"].get("llm_error") == 1
        assert s["server_failures"] == {"trials": 1, "tasks": 1, "excluded": True}
        assert s["metrics"]["n_tasks"] == 2 and s["metrics"]["pass@1"] == pytest.approx(0.5)
        rows = {r["id"]: r for _, r in iter_jsonl(tmp_path / "run" / "scores.jsonl")}
        assert rows[tasks[0].id]["excluded"] == "server_failure"
        banner = server_failure_banner(s)
        assert banner and "left out of pass@k" in banner and "rerun" in banner.lower()
        page = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
        md = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
        assert "left out of pass@k" in page and "left out of pass@k" in md
        script.down = False
        again, _ = await _run(tmp_path, dabench, plan, n=1, server=server)
    assert again.rollout.finished == 1 and again.summary["server_failures"]["trials"] == 0
    assert again.summary["metrics"]["n_tasks"] == 3
    assert again.summary["metrics"]["pass@1"] == pytest.approx(2 / 3)
    assert server_failure_banner(again.summary) is None


async def test_a_new_port_or_an_added_replica_resumes_the_same_run(tmp_path, dabench):
    """Issue 25: the model URL is not part of the run's identity (before: `model: was ...@:PORT1, now
    ...@:PORT2` refused the resume); the model name still is."""
    from datadojo.errors import ResumeError

    plan = [(1, "direct"), (0, "direct")]
    await _run(tmp_path, dabench, plan, n=1, model="openai:fake@http://127.0.0.1:8001/v1?max_retries=0")
    again, _ = await _run(
        tmp_path, dabench, plan, n=1, model="openai:fake@http://127.0.0.1:9/v1,http://127.0.0.1:10/v1"
    )
    assert again.rollout.skipped == 2 and again.rollout.finished == 0
    with pytest.raises(ResumeError, match="model: was 'openai:fake', now 'openai:other'"):
        await _run(tmp_path, dabench, plan, n=1, model="openai:other@http://127.0.0.1:8001/v1")

"""verifiers (pinned): DataDojo loaded by its id and evaluated with verifiers' own ``vf-eval``.

``vf-eval datadojo -a '{"tasks": ...}'`` resolves the id the way verifiers does (``import datadojo``, call its
``load_environment``), plays every parity task through DataDojo's sandbox against the loopback model server
and scores it with the environment's rubric — once for the task file (CSV, SQLite, EnvLunch) and once for
the ``dabench`` benchmark, as ``datadojo eval`` reads each. The rewards and parts verifiers saves must be
``datadojo eval``'s for the same replies and the papers' by hand (:mod:`_env_adapters`); they are written
as the parity table's ``verifiers`` rows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from _env_adapters import (
    CUT_MAX_TOKENS,
    MAX_TURNS,
    check_rows,
    cut_script,
    cut_task_file,
    datadojo_eval_rows,
    parity_set,
    subprocess_env,
    write_consumer_rows,
)

from datadojo.testing.parity import chat_script, parity_row
from datadojo.testing.server import ScriptedLLMServer


def _vf_eval(env_args: dict[str, Any], n: int, base_url: str, out: Path) -> list[dict[str, Any]]:
    """``vf-eval`` (verifiers' console script) over ``n`` examples: the result rows it saved."""
    vf_eval = Path(sys.executable).with_name("vf-eval")
    cmd = [str(vf_eval), "datadojo", "-a", json.dumps({**env_args, "max_turns": MAX_TURNS}), "-m", "parity",
           "-b", base_url, "--api-key-var", "OPENAI_API_KEY", "-n", str(n), "-r", "1", "-s", "-o", str(out),
           "--disable-tui"]  # fmt: skip
    out.mkdir(parents=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=subprocess_env(), cwd=out)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-4000:])
    (results,) = out.glob("evals/datadojo--parity/*/results.jsonl")
    return [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines() if line]


def _row(result: dict[str, Any]) -> dict[str, Any]:
    """verifiers' saved reward and metrics as a parity row (the metrics hold the reward's named parts)."""
    return parity_row(result["reward"], result["metrics"])


def test_vf_eval_rewards_equal_datadojo_eval(tmp_path: Path) -> None:
    ps = parity_set(tmp_path / "fixture")
    plain = ps.ids("csv-total", "csv-top-region", "sqlite-orders", "envlunch-sql")
    dabench = ps.ids("dabench-mean")
    with ScriptedLLMServer(chat_script(ps.fixture)) as llm:
        results = _vf_eval({"tasks": str(ps.task_file)}, len(plain), llm.base_url, tmp_path / "vf-tasks")
        results += _vf_eval(
            {"tasks": "dabench", "data": str(ps.fixture.dabench_dir)},
            len(dabench),
            llm.base_url,
            tmp_path / "vf-dab",
        )
        ours = datadojo_eval_rows("tasks", ps.eval_file, llm.base_url, tmp_path / "eval-tasks")
        ours |= datadojo_eval_rows("dabench", ps.fixture.dabench_dir, llm.base_url, tmp_path / "eval-dabench")
        # every model call carried the dialect's stop strings, as the episode asked
        stops = {tuple(r.json.get("stop") or ()) for r in llm.requests}
    theirs = {f"{r['info']['task_id']}/0": _row(r) for r in results}
    assert len(theirs) == len(results)  # one rollout per task
    check_rows(theirs, ours, ps, "verifiers")
    assert all("</code>" in s and "</answer>" in s for s in stops), stops
    write_consumer_rows("verifiers", theirs, tmp_path)


def test_a_reply_cut_by_the_token_limit_is_an_invalid_turn_as_in_eval(tmp_path: Path) -> None:
    """verifiers' finish_reason reaches the episode: a reply cut at max_tokens before its closing tag is an
    invalid turn (reward as eval's), not an answer re-closed as a stop-cut one (reward 1)."""
    ps = parity_set(tmp_path / "fixture")
    tasks = cut_task_file(ps)
    with ScriptedLLMServer(cut_script) as llm:
        (result,) = _vf_eval(
            {"tasks": str(tasks), "max_tokens": CUT_MAX_TOKENS}, 1, llm.base_url, tmp_path / "vf"
        )
        ours = datadojo_eval_rows(
            "tasks", tasks, llm.base_url, tmp_path / "eval", "--max-tokens", str(CUT_MAX_TOKENS)
        )
    (row,) = ours.values()
    assert row["stop_reason"] == "invalid" and result["metrics"]["num_turns"] == 3
    assert abs(result["reward"] - row["total"]) <= 1e-9 and result["reward"] < 1.0, (result["reward"], row)
    assert _row(result)["parts"] == row["parts"]

"""The framework adapters' library side (verifiers, OpenEnv), without the frameworks installed.

What runs inside verifiers and openenv-core is checked in their engine environments
(``tests/engines/test_verifiers.py``, ``tests/engines/test_openenv.py``); here: the tasks and settings an
adapter serves are ``datadojo eval``'s, bad input is one clear error, an episode's reward is the registry's
(hand values of the parity fixture), and a missing framework is one line naming the extra to install.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from datadojo.bench import get_benchmark
from datadojo.cli.app import app
from datadojo.env import DataEnv
from datadojo.integrations.source import AdapterError, episode_reward, load_env_source
from datadojo.testing.parity import write_parity_fixture


@pytest.fixture(scope="module")
def parity(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return write_parity_fixture(tmp_path_factory.mktemp("parity"))


def test_a_task_file_is_served_with_evals_settings_and_its_reward_spec(parity) -> None:  # type: ignore[no-untyped-def]
    source = load_env_source(parity.tasks_path, max_turns=3, isolation="none", max_tokens=64)
    assert source.benchmark == "tasks"
    assert list(source.tasks) == [t.id for t in parity.tasks]
    assert source.config.max_turns == 3 and source.config.dialect == "datamind"
    # `eval --max-tokens 64`: the budget, with the benchmark's temperature and top-p kept
    defaults = get_benchmark("tasks").defaults
    sampling = source.config.sampling
    assert (sampling.max_tokens, sampling.temperature, sampling.top_p) == (
        64,
        defaults.temperature,
        defaults.top_p,
    )
    assert load_env_source(parity.tasks_path).config.sampling.max_tokens is None
    assert source.sandbox.isolation == "none"
    # an EnvLunch task file's copies are resolved against its folder; each answer part by its task's source
    assert source.reward.tasks_path == str(parity.tasks_path) and source.reward.name is None
    assert source.reward.benchmark is None
    with pytest.raises(AdapterError, match="no task 'nope' in tasks"):
        source.task("nope")


def test_bad_sources_are_one_clear_error(tmp_path: Path, parity) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AdapterError, match=r"neither a benchmark .*spider.* nor an existing task file"):
        load_env_source(tmp_path / "missing.jsonl")
    with pytest.raises(AdapterError, match="give data= only with a benchmark name"):
        load_env_source(parity.tasks_path, data=tmp_path)
    line = parity.tasks_path.read_text(encoding="utf-8").splitlines()[0]
    twice = tmp_path / "twice.jsonl"
    twice.write_text(f"{line}\n{line}\n", encoding="utf-8")
    task_id = json.loads(line)["id"]
    with pytest.raises(AdapterError, match=f"task id '{task_id}' appears twice in .*twice.jsonl"):
        load_env_source(twice)
    with pytest.raises(Exception, match="nosuchreward"):
        load_env_source(parity.tasks_path, reward="nosuchreward")


@pytest.mark.parametrize(
    ("task_id", "replies", "total"),
    [
        # by hand (DataMind §4): a short correct answer with its <think> → 1; the wrong entity → 0
        ("csv-total.right", ["<think>Sum.</think>\n<answer>\n43\n</answer>"], 1.0),
        ("csv-total.wrong_entity", ["<think>Sum.</think>\n<answer>\n30\n</answer>"], 0.0),
        # code then the answer: the sandbox ran the code, the answer is right → 1
        (
            "csv-total.code_then_answer",
            [
                "<think>Compute.</think>\n<code>\nimport pandas as pd\nprint(pd.read_csv('sales.csv')['amount'].sum())",
                "<think>Done.</think>\n<answer>\n43\n</answer>",
            ],
            1.0,
        ),
        # EnvLunch Eq. 4 (w = 0.5, t_max = 16): the right program at t = 0 agrees on every copy → 1 + 0.5
        (
            "envlunch-sql.right",
            [
                "<think>SQL.</think>\n<answer>\nSELECT region, SUM(amount) AS total FROM sales GROUP BY region\n</answer>"
            ],
            1.5,
        ),
    ],
)
async def test_episode_reward_is_the_registrys(
    parity, task_id: str, replies: list[str], total: float
) -> None:  # type: ignore[no-untyped-def]
    source = load_env_source(parity.tasks_path, max_turns=4, isolation="none")
    async with (
        DataEnv(source.config, sandbox_config=source.sandbox, pool_size=1, reward=source.reward) as env,
        await env.reset(source.task(task_id)) as episode,
    ):
        for reply in replies:  # a stop-cut reply (no closing </code>) is closed as the server cut it
            result = await episode.step(reply)
        assert result.done and episode.stop_reason == "answer"
        reward = await episode_reward(source, episode)
    assert reward.total == pytest.approx(total, abs=1e-12)
    assert sum(reward.parts.values()) == pytest.approx(reward.total, abs=1e-12)


def test_missing_frameworks_name_the_extra(parity) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("datadojo")
    try:
        import openenv  # noqa: F401

        pytest.skip("openenv-core is installed here")
    except ImportError:
        pass
    result = CliRunner().invoke(app, ["env", "serve", str(parity.tasks_path), "--port", "0"])
    assert result.exit_code == 2, result.output
    assert "pip install 'datadojo[openenv]'" in result.output
    import datadojo

    with pytest.raises(AdapterError, match=r"pip install 'datadojo\[verifiers\]'"):
        datadojo.load_environment(tasks=str(parity.tasks_path))

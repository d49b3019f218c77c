"""The parts of the inspect_ai integration that need no inspect_ai (the rest runs in the engine job,
tests/engines/test_inspect.py, with inspect_ai installed): the command mapping of the sandbox, the task
carried in a sample's metadata, the finish-reason mapping, the sandbox config read back from a log, and
the one-line error naming the extra when inspect_ai is missing."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from datadojo.errors import DataDojoError, MissingExtraError
from datadojo.integrations.inspect.agent import finish_reason, raw_reply
from datadojo.integrations.inspect.samples import TASK_KEY, sample_fields, task_from_metadata
from datadojo.integrations.inspect.sandbox import cell_for_command, sandbox_config_from_dict
from datadojo.sandbox import Limits, SandboxConfig
from datadojo.types import DataFile, Task

SALES = Path(__file__).resolve().parents[2] / "examples" / "data" / "sales.csv"


def test_commands_inspect_sends_map_to_cells_and_others_are_refused() -> None:
    # inspect's python() tool: code on standard input
    assert cell_for_command(["python3"], "print(1)") == ("python", "print(1)", None)
    assert cell_for_command(["/usr/bin/python3", "-"], b"x = 1") == ("python", "x = 1", None)
    assert cell_for_command(["python", "-c", "print(2)"], None) == ("python", "print(2)", None)
    assert cell_for_command(["python3.11", "-c", "1"], None) == ("python", "1", None)
    assert cell_for_command(["sqlite3", "db.sqlite", "SELECT 1"], None) == ("sql", "SELECT 1", "db.sqlite")
    assert cell_for_command(["sqlite3", "db.sqlite"], "SELECT 2") == ("sql", "SELECT 2", "db.sqlite")
    # inspect's bash() tool, a script file, a bare interpreter without code: a message, not a cell
    for cmd, inp in (
        (["bash", "--login", "-c", "ls"], None),
        (["python3", "script.py"], None),
        (["python3"], None),
        (["sqlite3", "db.sqlite"], None),
        ([], None),
    ):
        assert isinstance(cell_for_command(cmd, inp), str), cmd
    assert "no shell" in str(cell_for_command(["bash", "-c", "ls"], None))


def test_the_task_rides_in_the_sample_metadata() -> None:
    task = Task(
        id="t1", question="Rows?", files=[DataFile.from_path(SALES)], answer=[1, 2], answer_kind="list"
    )
    fields = sample_fields(task)
    assert fields["input"] == "Rows?" and fields["id"] == "t1" and fields["target"] == "[1, 2]"
    assert task_from_metadata(fields["metadata"]) == task
    assert sample_fields(task.model_copy(update={"answer": None}))["target"] == ""
    with pytest.raises(DataDojoError, match=r"sample s9: no DataDojo task"):
        task_from_metadata({"__sample_id__": "s9", "other": 1})
    with pytest.raises(DataDojoError, match=TASK_KEY):
        task_from_metadata(None)


def test_finish_reasons() -> None:
    assert finish_reason("max_tokens") == "length" and finish_reason("model_length") == "length"
    assert (
        finish_reason("stop") == "stop"
        and finish_reason("unknown") == "stop"
        and finish_reason(None) == "stop"
    )


def test_the_raw_reply_keeps_the_think_block_inspect_lifts_out() -> None:
    # what inspect's OpenAI-compatible provider makes of "<think>Guess.</think>\n<answer>7</answer>"
    parsed = NS(
        completion="<answer>7</answer>",
        choices=[
            NS(
                message=NS(
                    content=[
                        NS(type="reasoning", reasoning="Guess.", redacted=False),
                        NS(type="text", text="<answer>7</answer>"),
                    ]
                )
            )
        ],
    )
    raw = "<think>Guess.</think>\n<answer>7</answer>"
    response = {"choices": [{"message": {"role": "assistant", "content": raw}}]}
    assert raw_reply(parsed, response) == raw  # the server's own text, when inspect recorded the call
    assert raw_reply(parsed, None) == raw  # rebuilt from the parts otherwise
    plain = NS(completion="<answer>7</answer>", choices=[NS(message=NS(content="<answer>7</answer>"))])
    assert raw_reply(plain, {"choices": []}) == "<answer>7</answer>"


def test_sandbox_config_comes_back_from_its_json_form() -> None:
    config = SandboxConfig(isolation="landlock", mode="persistent", limits=Limits(wall_s=7, memory_mb=512))
    assert sandbox_config_from_dict(config.model_dump(mode="json")) == config
    assert sandbox_config_from_dict({}) == SandboxConfig()


@pytest.mark.skipif(importlib.util.find_spec("inspect_ai") is not None, reason="inspect_ai is installed here")
def test_without_inspect_ai_the_error_names_the_extra() -> None:
    from datadojo.integrations.inspect import inspect_task, register

    task = Task(id="t", question="?", answer=1)
    for call in (lambda: inspect_task([task]), register):
        with pytest.raises(MissingExtraError, match=r"pip install 'datadojo\[inspect\]'"):
            call()


def test_the_benchmark_task_refuses_what_its_reward_cannot_score(tmp_path: Path) -> None:
    """``inspect eval datadojo/benchmark`` on tasks the reward cannot score fails before any sample runs, in
    one line naming them, not at the end of each episode: KramaBench's judge-only answers without a judge,
    DABstep's hidden test split (no public answer)."""
    from datadojo.integrations.inspect.tasks import benchmark_task
    from helpers.dabstep import make_dabstep
    from helpers.kramabench import make_kramabench

    with pytest.raises(ValueError, match=r"legal-hard-3: scored by an LLM judge and the reward has none"):
        benchmark_task("kramabench", str(make_kramabench(tmp_path)))
    with pytest.raises(ValueError, match=r"2 task\(s\) cannot be rewarded: 1: no answer to reward against"):
        benchmark_task("dabstep", str(make_dabstep(tmp_path / "DABstep")), split="test")

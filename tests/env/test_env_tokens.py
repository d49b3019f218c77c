"""Token-exact stepping (:class:`datadojo.env.TokenStepper`): ids in, ids and masks out, checked by hand.

A character-level tokenizer built here offline (one id per character: ``<s>`` 0, ``</s>`` 1, then the
printable ASCII characters from 2 and ``\\n``, ``…`` after them) makes every id computable by hand: the test's
own :func:`_ids` spells the expected sequence from the chat template's text, independently of the tokenizer
library. A second test checks that stepping by hand gives exactly the record and trajectory of
:func:`~datadojo.env.tokens.run_token_episode` (the driver the RL paths use) for the same sampled ids,
on the suite's byte-level BPE toy tokenizer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from datadojo.env import DataEnv, EnvConfig, TokenStepper
from datadojo.env.tokens import EpisodeError, GenOutput, run_token_episode
from datadojo.llm.base import SamplingParams
from datadojo.testing.env import ScriptedRunner, runner_factory
from datadojo.types import Task

pytest.importorskip("transformers")

CHARS = [chr(c) for c in range(32, 127)] + ["\n", "…"]
TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def char_tok() -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(["<s>", "</s>", *CHARS])}
    model = Tokenizer(models.WordLevel(vocab=vocab, unk_token="?"))
    model.pre_tokenizer = pre_tokenizers.Split(Regex("[\\s\\S]"), "isolated")
    model.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=model, bos_token="<s>", eos_token="</s>", unk_token="?")
    tok.chat_template = TEMPLATE
    return tok


def _ids(text: str) -> list[int]:
    """The hand computation: ``<s>`` → 0, ``</s>`` → 1, a character → 2 + its place in :data:`CHARS`."""
    out: list[int] = []
    i = 0
    while i < len(text):
        if text.startswith("<s>", i):
            out.append(0)
            i += 3
        elif text.startswith("</s>", i):
            out.append(1)
            i += 4
        else:
            out.append(2 + CHARS.index(text[i]))
            i += 1
    return out


def _four(code: str, language: str, db: str | None) -> str:
    return "4"


async def test_token_steps_match_a_hand_computation(char_tok: Any, tmp_path: Path) -> None:
    template = tmp_path / "system.md"
    template.write_text("Be brief.", encoding="utf-8")
    cfg = EnvConfig(max_turns=3, profile_chars=0, system_template=str(template))
    env = DataEnv(cfg, sandboxes=runner_factory(outputs=_four))
    episode = await env.reset(Task(id="k", question="2+2?"), model="trainer")
    stepper = TokenStepper(episode, char_tok)

    prompt = "<s>system\nBe brief.</s>\n<s>user\n2+2?</s>\n<s>assistant\n"
    assert stepper.prompt_ids == _ids(prompt)
    assert stepper.sampling()["stop"] == ["</code>", "</answer>", "<interpreter>"]

    # turn 1: the sampler went on past </code>; the ids after the stop string are dropped, not re-tokenized
    reply1 = "<think>add</think><code>print(2+2)</code>"
    gen1 = _ids(reply1 + " junk")
    lp1 = [-0.01 * (i + 1) for i in range(len(gen1))]
    step1 = await stepper.step(gen1, lp1)
    env_text = "</s>\n<s>user\n<interpreter>\n4\n</interpreter></s>\n<s>assistant\n"
    assert not step1.done and step1.observation_ids == _ids(env_text)
    assert step1.result.observation == "<interpreter>\n4\n</interpreter>"
    assert step1.result.turn.raw == reply1 and step1.result.turn.action.text == "print(2+2)"

    # turn 2: the answer, then end of sequence (sampled, so kept up to the stop string only)
    reply2 = "<think>ok</think><answer>4</answer>"
    gen2 = [*_ids(reply2), 1]
    lp2 = [-0.5] * len(gen2)
    step2 = await stepper.step(gen2, lp2, stop_reason="completed")
    assert step2.done and step2.observation_ids == [] and episode.stop_reason == "answer"

    n1, n2 = len(_ids(reply1)), len(_ids(reply2))
    rec = stepper.record
    assert rec.prompt_ids == _ids(prompt)
    assert rec.response_ids == _ids(reply1) + _ids(env_text) + _ids(reply2)
    assert rec.response_mask == [1] * n1 + [0] * len(_ids(env_text)) + [1] * n2
    assert rec.input_ids == _ids(prompt + reply1 + env_text + reply2)
    assert rec.loss_mask == [0] * len(_ids(prompt)) + rec.response_mask
    expected_lps = [0.0] * len(_ids(prompt)) + lp1[:n1] + [0.0] * len(_ids(env_text)) + [-0.5] * n2
    assert rec.rollout_logprobs == expected_lps[1:]  # aligned with the predicted tokens input_ids[1:]
    assert rec.turns == [(0, n1), (n1 + len(_ids(env_text)), n1 + len(_ids(env_text)) + n2)]

    traj = stepper.trajectory()
    assert traj.final_answer == "4" and traj.model == "trainer"
    assert traj.turns[0].tokens.prompt == len(_ids(prompt)) and traj.turns[0].tokens.completion == n1
    assert traj.extra["tokens"]["response_ids"] == rec.response_ids
    await episode.close()

    with pytest.raises(EpisodeError, match="starts on a fresh episode"):
        TokenStepper(episode, char_tok)


async def test_the_context_budget_ends_a_stepped_episode(char_tok: Any, tmp_path: Path) -> None:
    template = tmp_path / "system.md"
    template.write_text("Be brief.", encoding="utf-8")
    cfg = EnvConfig(
        max_turns=3, profile_chars=0, system_template=str(template), sampling=SamplingParams(max_tokens=5)
    )
    prompt = "<s>system\nBe brief.</s>\n<s>user\n2+2?</s>\n<s>assistant\n"
    async with DataEnv(cfg, sandboxes=runner_factory(outputs=_four)) as env:
        # the prompt and 5 reply tokens do not fit: the episode ends before any generation
        async with await env.reset(Task(id="k", question="2+2?")) as episode:
            stepper = TokenStepper(episode, char_tok, max_context=len(_ids(prompt)) + 4)
            assert stepper.done and episode.stop_reason == "context_limit" and stepper.prompt_ids == []
        # room for one turn: the observation turn is not appended, the episode ends with context_limit
        async with await env.reset(Task(id="k", question="2+2?")) as episode:
            stepper = TokenStepper(episode, char_tok, max_context=len(_ids(prompt)) + 30)
            step = await stepper.step(_ids("<code>print(2)</code>"))
            assert step.done and step.observation_ids == [] and episode.stop_reason == "context_limit"
            assert stepper.record.response_mask == [1] * len(_ids("<code>print(2)</code>"))


class _Generator:
    """A sampler stand-in answering scripted replies as char-level ids (a segmentation BPE never
    produces, so a re-tokenization would show), with the tail a server that ignores stop strings adds."""

    def __init__(self, tok: Any, replies: list[str]) -> None:
        self.tok, self.replies = tok, list(replies)
        self.calls: list[tuple[list[int], dict[str, Any]]] = []

    def ids(self, text: str) -> list[int]:
        return [i for ch in text for i in self.tok.encode(ch, add_special_tokens=False)]

    async def __call__(self, prompt_ids: list[int], sampling: dict[str, Any]) -> GenOutput:
        self.calls.append((list(prompt_ids), dict(sampling)))
        ids = self.ids(self.replies.pop(0) + " tail")
        return GenOutput(ids, [-0.25] * len(ids), "completed")


REPLIES = [
    "<think>Start.</think>\n<code>\nx = 40\nprint(x)\n</code>",
    "I will just say it",  # malformed: corrective observation
    "<think>Add.</think>\n<code>\nprint(x + 2)\n</code>",
    "<think>Done.</think>\n<answer>42</answer>",
]


@pytest.mark.parametrize("max_context", [None, 300])
async def test_stepping_by_hand_equals_run_token_episode(toy_tok: Any, max_context: int | None) -> None:
    cfg = EnvConfig(
        max_turns=5, profile_chars=0, sampling=SamplingParams(temperature=1.0, top_p=1.0, max_tokens=40)
    )
    task = Task(id="eq", question="What is x + 2?")
    driven_gen = _Generator(toy_tok, REPLIES)
    driven = await run_token_episode(
        task,
        driven_gen,
        toy_tok,
        ScriptedRunner(),
        cfg,
        sample=2,
        seed=11,
        max_context=max_context,
        model_id="m",
    )

    hand_gen = _Generator(toy_tok, REPLIES)
    env = DataEnv(cfg, sandboxes=runner_factory())
    async with env, await env.reset(task, sample=2, seed=11, model="m") as episode:
        stepper = TokenStepper(episode, toy_tok, max_context=max_context)
        while not stepper.done:
            sampling = stepper.sampling()
            assert sampling == driven_gen.calls[len(hand_gen.calls)][1]  # what the driver sent
            out = await hand_gen(stepper.record.input_ids, sampling)
            await stepper.step(out.token_ids, out.log_probs, stop_reason=out.stop_reason)
        traj = stepper.trajectory()

    assert [c[0] for c in hand_gen.calls] == [
        c[0] for c in driven_gen.calls
    ]  # the same prompts, token for token
    assert stepper.record == driven.episode
    plain = [t.model_dump(exclude={"timings"}) for t in traj.turns]
    assert plain == [t.model_dump(exclude={"timings"}) for t in driven.trajectory.turns]
    assert (traj.stop_reason, traj.error, traj.final_answer, traj.extra) == (
        driven.trajectory.stop_reason,
        driven.trajectory.error,
        driven.trajectory.final_answer,
        driven.trajectory.extra,
    )
    if max_context is None:
        assert traj.stop_reason == "answer" and traj.final_answer == "42" and len(traj.turns) == 4
    else:
        assert traj.stop_reason == "context_limit" and "context window of 300" in traj.error


# --- the bridge's edge cases, each against the hand computation ---------------------------------------------


def _opened(tok: Any) -> Any:
    from datadojo.env.tokens import TokenBridge

    bridge = TokenBridge(tok)
    opening = [{"role": "user", "content": "q"}]
    bridge.commit(opening, bridge.bridge(opening))
    return bridge


def test_finish_reasons_and_stop_strings_cut_on_the_sampled_ids(char_tok: Any) -> None:
    stop = ["</co", "</code>", "<interpreter>", "!"]
    cases = [  # (reply ids, engine stop reason, max_tokens) → (text, finish, matched, kept ids)
        (_ids("<code>print(1"), "length", None, ("<code>print(1", "length", None, _ids("<code>print(1"))),
        (_ids("<code>pr"), "completed", 8, ("<code>pr", "length", None, _ids("<code>pr"))),  # 8 ids = budget
        (_ids("<code>pr"), "completed", 9, ("<code>pr", "stop", None, _ids("<code>pr"))),
        (_ids("<code>pr"), "completed", None, ("<code>pr", "stop", None, _ids("<code>pr"))),
        # a stop string at the very start, and the earliest of two: the ids up to its last character
        (_ids("<interpreter>\n1"), "completed", None, ("", "stop", "<interpreter>", _ids("<interpreter>"))),
        (
            _ids("<code>x\n<interpreter>\n1</co"),
            None,
            None,
            ("<code>x\n", "stop", "<interpreter>", _ids("<code>x\n<interpreter>")),
        ),
        (_ids("!a"), "length", 2, ("", "stop", "!", _ids("!"))),  # a one-token stop string: one id kept
        # two stop strings at the same place: the first listed (the config's own, before the dialect's)
        (_ids("<code>x</code>"), None, None, ("<code>x", "stop", "</co", _ids("<code>x</co"))),
        # a special token sampled before the stop string counts no characters of it
        (
            [0, *_ids("a<interpreter>z")],
            None,
            None,
            ("a", "stop", "<interpreter>", [0, *_ids("a<interpreter>")]),
        ),
        # end of sequence sampled without a stop string: the turn is closed, its text has no special token
        ([*_ids("hmm"), 1], "completed", None, ("hmm", "stop", None, [*_ids("hmm"), 1])),
    ]
    for ids, engine, max_tokens, (text, finish, matched, kept) in cases:
        bridge = _opened(char_tok)
        got = bridge.add_generation(ids, None, stop, engine_stop_reason=engine, max_tokens=max_tokens)
        assert got[:4] == (text, finish, matched, kept), (ids, engine, max_tokens)
        assert bridge.last_closed == (kept[-1:] == [1] and matched is None)
        assert bridge.record.response_ids == kept and bridge.record.response_mask == [1] * len(kept)
        assert not bridge.record.has_logprobs and bridge.record.response_logprobs == [0.0] * len(kept)


def test_a_turn_closed_by_end_of_sequence_gets_no_second_end_marker(char_tok: Any) -> None:
    bridge = _opened(char_tok)
    bridge.add_generation([*_ids("hmm"), 1], [-0.2] * 4, ["</code>"], engine_stop_reason="completed")
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "hmm"},
        {"role": "user", "content": "<interpreter>\nNo action\n</interpreter>"},
    ]
    # the template closes the reply with </s>\n: the model sampled </s> itself, only \n is the environment's
    assert bridge.bridge(messages) == _ids(
        "\n<s>user\n<interpreter>\nNo action\n</interpreter></s>\n<s>assistant\n"
    )


async def test_an_open_block_closed_by_end_of_sequence_gets_its_tag_from_the_environment(
    char_tok: Any, tmp_path: Path
) -> None:
    """A hosted-style generation: the block left open, then end of sequence (no stop string matched). The
    episode closes the tag (as the ReAct loop does); the reply's missing ``</code>`` is the environment's
    (mask 0), and the end marker the model sampled is not repeated."""
    template = tmp_path / "system.md"
    template.write_text("S", encoding="utf-8")
    cfg = EnvConfig(max_turns=3, profile_chars=0, system_template=str(template))
    env = DataEnv(cfg, sandboxes=runner_factory(outputs=_four))
    async with env, await env.reset(Task(id="k", question="q")) as episode:
        stepper = TokenStepper(episode, char_tok)
        step = await stepper.step([*_ids("<code>x"), 1], [-0.3] * 8, stop_reason="completed")
        assert step.result.turn.raw == "<code>x</code>" and step.result.turn.action.kind == "code"
        assert step.observation_ids == _ids(
            "</code>\n<s>user\n<interpreter>\n4\n</interpreter></s>\n<s>assistant\n"
        )
        assert stepper.record.response_mask == [1] * 8 + [0] * len(step.observation_ids)


def test_the_bridge_refuses_rewritten_history_and_templates_it_cannot_follow(char_tok: Any) -> None:
    reply = {"role": "assistant", "content": "<code>x</code>"}
    obs = {"role": "user", "content": "<interpreter>\nok\n</interpreter>"}
    bridge = _opened(char_tok)
    bridge.add_generation(_ids("<code>x</code>"), None, ["</code>"])
    for rewritten in ({"role": "user", "content": "q2"}, {"role": "system", "content": "q"}):
        with pytest.raises(EpisodeError, match="turn 2: message 0 changed after it was sent"):
            bridge.bridge([rewritten, reply, obs])
    for wrong in ([{"role": "user", "content": "q"}, reply], [{"role": "user", "content": "q"}, obs, obs]):
        with pytest.raises(EpisodeError, match="expected the assistant reply then the observation after 1"):
            bridge.bridge(wrong)
    assert bridge.bridge([{"role": "user", "content": "q"}, reply, obs])  # the right shape passes

    counting = char_tok.chat_template  # a template that renders the number of messages first
    try:
        # a template that renders the replies alone: the reply starts the text, nothing is the environment's
        char_tok.chat_template = "{% for m in messages %}{% if m['role'] == 'assistant' %}{{ m['content'] }}{% endif %}{% endfor %}"
        bridge = _opened(char_tok)
        bridge.add_generation(_ids("<code>x</code>"), None, ["</code>"])
        assert bridge.bridge([{"role": "user", "content": "q"}, reply, obs]) == []
        char_tok.chat_template = "{{ messages | length }}" + TEMPLATE
        bridge = _opened(char_tok)
        bridge.add_generation(_ids("<code>x</code>"), None, ["</code>"])
        with pytest.raises(EpisodeError, match="not prefix-stable"):
            bridge.bridge([{"role": "user", "content": "q"}, reply, obs])
        char_tok.chat_template = TEMPLATE.replace("{{ m['content'] }}", "{{ m['content'] | upper }}")
        bridge = _opened(char_tok)
        bridge.add_generation(_ids("<code>x</code>"), None, ["</code>"])
        with pytest.raises(EpisodeError, match="does not render the reply's text verbatim"):
            bridge.bridge([{"role": "user", "content": "q"}, reply, obs])
    finally:
        char_tok.chat_template = counting


async def test_stepper_without_logprobs_an_aborted_generation_and_an_exact_fit(
    char_tok: Any, tmp_path: Path
) -> None:
    template = tmp_path / "system.md"
    template.write_text("S", encoding="utf-8")
    prompt = "<s>system\nS</s>\n<s>user\nq</s>\n<s>assistant\n"
    cfg = EnvConfig(max_turns=3, profile_chars=0, system_template=str(template))
    env = DataEnv(cfg, sandboxes=runner_factory(outputs=_four))
    task = Task(id="k", question="q")
    episode = await env.reset(task)
    # the prompt fills the context exactly and no reply budget is set: it fits (a request of 0 new tokens)
    stepper = TokenStepper(episode, char_tok, max_context=len(_ids(prompt)))
    assert not stepper.done and stepper.prompt_ids == _ids(prompt)
    step = await stepper.step(_ids("<code>print(2+2)</code>"))  # the engine gave no log-probs
    assert step.done and episode.stop_reason == "context_limit"  # the observation no longer fits
    rec = stepper.record
    assert not rec.has_logprobs and rec.response_logprobs == [0.0] * len(_ids("<code>print(2+2)</code>"))
    assert stepper.trajectory().turns[0].timings.llm_s == 0.0
    await episode.close()

    episode = await env.reset(task)
    stepper = TokenStepper(episode, char_tok)
    step = await stepper.step(_ids("<code>pri"), [-0.1] * 9, stop_reason="aborted")
    assert step == type(step)([], True, None)
    assert episode.stop_reason == "llm_error" and episode.error == "the generation was aborted by the engine"
    assert stepper.record.response_ids == [] and episode.turns == []
    await episode.close()
    await env.aclose()

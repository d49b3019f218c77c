"""The ReAct loop: one task, one model, one sandbox → one :class:`~datadojo.types.Trajectory`.

Spec: DataMind §3.1 ("Problem Formalization and Agent Architecture": each round the agent writes a thought
and one action, code or answer; code runs and its output is the observation; the episode ends with an
answer or after T rounds) and SciDataSailor §5.1 / App. B.1 (the same contract with ``<python>``/``<result>``).

What the loop guarantees, whatever the model or the environment does:

* every turn is recorded, including malformed ones (``action.kind == "invalid"``, ``void=True``, with the
  parser's message in ``invalid_reason``) — training needs them (DataMind §4, void-turn masking);
* a malformed turn gets a corrective environment message naming what was wrong;
* the loop never raises for model or environment failures: it ends the trajectory with the matching
  stop reason (``llm_error``, ``env_error``, ``context_limit``, ``invalid``, ``max_turns``, ``answer``);
* the prompt is never truncated silently: a request that would not fit the context window ends the
  episode with ``context_limit``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from datadojo.agent.config import AgentConfig
from datadojo.agent.prompts import episode_prompt
from datadojo.llm.base import ChatBackend, LLMError
from datadojo.protocol import default_language_for_task, get_dialect
from datadojo.sandbox.seeding import trajectory_seed
from datadojo.types import Observation, Provenance, Task, Timings, TokenUsage, Trajectory, Turn, config_hash

__all__ = ["AgentEvent", "CodeRunner", "run_agent"]

FINAL_TURN_NOTE = "This is your last turn: give your final answer now in <{answer}>…</{answer}>."


class _ExecResultLike(Protocol):
    output: str
    status: str
    truncated: bool
    isolation: str

    def to_observation(self) -> Observation: ...


class CodeRunner(Protocol):
    """What the loop needs from a sandbox (:class:`datadojo.sandbox.Sandbox` satisfies it)."""

    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> _ExecResultLike: ...


@dataclass(frozen=True)
class AgentEvent:
    """Something that happened in an episode, for live display (``datadojo ask``) and logging.

    ``kind``: ``prompt`` (data: the opening messages), ``turn`` (data: the finished :class:`Turn`, its index),
    ``end`` (data: the :class:`Trajectory`).
    """

    kind: str
    task_id: str
    sample: int
    data: Any


EventHook = Callable[[AgentEvent], None]


def _sqlite_names(task: Task) -> list[str]:
    return [f.visible_name for f in task.files if f.kind == "sqlite"]


def _seed_sandbox(sandbox: CodeRunner, task_id: str, sample: int, run_seed: int | None) -> int | None:
    """Give the trajectory's sandbox its own reproducible random stream; the seed (None: cannot be seeded).

    Under GRPO the samples of one task run in the same pool: with one seed per sandbox they all drew the
    same "random" rows (issue 38). A runner without ``reseed`` (a user's own) is left as it is.
    """
    reseed = getattr(sandbox, "reseed", None)
    if not callable(reseed):
        return None
    value = trajectory_seed(task_id, sample, run_seed)
    reseed(value)
    return value


async def run_agent(
    task: Task,
    backend: ChatBackend,
    sandbox: CodeRunner,
    config: AgentConfig | None = None,
    *,
    sample: int = 0,
    seed: int | None = None,
    on_event: EventHook | None = None,
) -> Trajectory:
    """Run one episode of ``task`` and return its trajectory (never raises for model/environment failures)."""
    cfg = config or AgentConfig()
    dialect = get_dialect(cfg.dialect)
    language = cfg.language or default_language_for_task(task)
    # Off the event loop: the first prompt of a file profiles it (a pandas read, and pandas' import on the
    # first one of all), which would hold up every other episode of the rollout meanwhile.
    prompt = await asyncio.to_thread(episode_prompt, task, cfg)
    messages: list[dict[str, Any]] = [dict(m) for m in prompt]
    turns: list[Turn] = []
    params = cfg.sampling
    stop_sequences = tuple(dict.fromkeys((*params.stop, *dialect.stop_sequences)))
    dbs = _sqlite_names(task)
    emit = on_event or (lambda _e: None)
    sandbox_seed = _seed_sandbox(sandbox, task.id, sample, seed)
    emit(AgentEvent("prompt", task.id, sample, prompt))

    stop_reason = "max_turns"
    final_answer: str | None = None
    error: str | None = None
    consecutive_invalid = 0

    for index in range(cfg.max_turns):
        if cfg.reserve_final_turn and index == cfg.max_turns - 1 and index > 0:
            note = FINAL_TURN_NOTE.format(answer=dialect.answer)
            messages[-1] = {**messages[-1], "content": messages[-1]["content"] + "\n" + note}
        if not backend.fits(messages, params.max_tokens or 0):
            stop_reason, error = (
                "context_limit",
                (
                    f"the next request ({backend.count_tokens(messages)} prompt tokens + "
                    f"{params.max_tokens or 0} for the reply) exceeds the context window of {backend.context_window}"
                ),
            )
            break
        t0 = time.perf_counter()
        try:
            completions = await backend.chat(
                messages, params=params, n=1, stop=stop_sequences, seed=None if seed is None else seed + index
            )
        except LLMError as exc:
            stop_reason = "context_limit" if exc.context_overflow else "llm_error"
            error = str(exc)
            break
        llm_s = time.perf_counter() - t0
        completion = completions[0]
        raw = completion.text
        if completion.finish_reason == "stop":
            # Generation ended on a stop sequence (or end-of-sequence). Servers drop the matched stop string
            # from the text, so re-append the closing tag it cut. Hosted APIs do not say which stop matched;
            # then a reply that ends inside an open action block is taken as cut by our </code>/</answer>.
            # A reply cut by the token limit (finish_reason "length") is left unclosed: that turn is invalid.
            raw = dialect.complete_turn(raw, completion.stop_sequence)
        parsed = dialect.parse_turn(raw, strict=cfg.strict_parse, default_language=language)
        tokens = TokenUsage(prompt=completion.prompt_tokens, completion=completion.completion_tokens)

        if parsed.kind == "answer":
            turn = parsed.to_turn(timings=Timings(llm_s=llm_s), tokens=tokens)
            turns.append(turn)
            emit(AgentEvent("turn", task.id, sample, (index, turn)))
            stop_reason, final_answer = "answer", dialect.extract_answer(parsed.text)
            break

        if parsed.kind == "invalid":
            consecutive_invalid += 1
            message = parsed.error or "Malformed turn."
            if completion.finish_reason == "length":
                message = (
                    "Your reply was cut off by the token limit before its action closed; write shorter steps. "
                    + message
                )
            obs = Observation(text=message, status="feedback")
            turn = parsed.to_turn(observation=obs, timings=Timings(llm_s=llm_s), tokens=tokens)
            turns.append(turn)
            emit(AgentEvent("turn", task.id, sample, (index, turn)))
            messages.append({"role": "assistant", "content": raw})
            messages.append({"role": "user", "content": dialect.format_observation(message)})
            if consecutive_invalid >= cfg.max_invalid_turns:
                stop_reason = "invalid"
                error = f"{consecutive_invalid} malformed turns in a row; last: {message}"
                break
            continue

        consecutive_invalid = 0
        t1 = time.perf_counter()
        if parsed.kind == "sql" and not dbs:
            result_obs = Observation(
                text="SQL needs a database and this task has none: use Python.", status="feedback"
            )
        else:
            # With several databases, SQL runs against the first one listed (Python can open any of them).
            db = dbs[0] if parsed.kind == "sql" else None
            try:
                result = await sandbox.run(
                    parsed.text, language="sql" if parsed.kind == "sql" else "python", db=db
                )
                result_obs = result.to_observation()
            except Exception as exc:  # the sandbox itself failed: end this trajectory, never the run
                result_obs = Observation(
                    text=f"Environment failure: {type(exc).__name__}: {exc}", status="env_error"
                )
        exec_s = time.perf_counter() - t1
        turn = parsed.to_turn(
            observation=result_obs, timings=Timings(llm_s=llm_s, exec_s=exec_s), tokens=tokens
        )
        turns.append(turn)
        emit(AgentEvent("turn", task.id, sample, (index, turn)))
        if result_obs.status == "env_error":
            stop_reason, error = "env_error", result_obs.text
            break
        messages.append({"role": "assistant", "content": raw})
        messages.append({"role": "user", "content": dialect.format_observation(result_obs.text)})

    settings = cfg.to_dict()
    trajectory = Trajectory(
        task_id=task.id,
        sample=sample,
        dialect=dialect.name,
        prompt=prompt,
        turns=turns,
        final_answer=final_answer,
        stop_reason=stop_reason,  # type: ignore[arg-type]
        error=error,
        model=backend.model_id,
        sampling={**settings["sampling"], "stop": list(stop_sequences)},
        provenance=Provenance(config_hash=config_hash(settings), seed=seed, sandbox_seed=sandbox_seed),
    )
    emit(AgentEvent("end", task.id, sample, trajectory))
    return trajectory

"""One episode of the environment: a task's opening messages, then a model reply in, an observation out.

Spec: DataMind §3.1 ("Problem Formalization and Agent Architecture": each round the agent writes a thought
and one action, code or answer; code runs and its output is the observation; the episode ends with an
answer or after T rounds) and SciDataSailor §5.1 / App. B.1 (the same contract with ``<python>``/``<result>``).

:class:`Episode` is the ReAct loop's turn, written once: every consumer — :func:`datadojo.env.run_agent`
(evaluation, ``rollout``, ``train rl``, synthesis), the token-exact drivers of :mod:`datadojo.env.tokens`
(the verl agent loop, TRL's ``rollout_func``) and the adapters that load DataDojo into other frameworks —
feeds replies to :meth:`Episode.step` and reads what it returns. What it guarantees, whatever the model or
the sandbox does:

* every turn is recorded, including malformed ones (``action.kind == "invalid"``, ``void=True``, with the
  parser's message in ``invalid_reason``) — training needs them (DataMind §4, void-turn masking);
* a malformed turn gets a corrective environment message naming what was wrong; ``max_invalid_turns`` of
  them in a row end the episode with ``invalid``;
* a step never raises for a model or sandbox failure: the episode ends with the matching stop reason
  (``env_error`` here; ``llm_error`` and ``context_limit`` are the driver's, through :meth:`Episode.end`);
* with ``reserve_final_turn`` the observation before the last turn tells the model to answer now.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from datadojo.env.config import AgentConfig
from datadojo.env.prompts import episode_prompt
from datadojo.errors import DataDojoError
from datadojo.protocol import default_language_for_task, get_dialect
from datadojo.reward.registry import RewardResult, RewardSpec, score_pairs
from datadojo.sandbox.seeding import trajectory_seed
from datadojo.types import Observation, Provenance, Task, Timings, TokenUsage, Trajectory, Turn, config_hash

__all__ = [
    "FINAL_TURN_NOTE",
    "AgentEvent",
    "CodeRunner",
    "EnvUsageError",
    "Episode",
    "EventHook",
    "StepResult",
    "stop_strings",
]

FINAL_TURN_NOTE = "This is your last turn: give your final answer now in <{answer}>…</{answer}>."

#: How an episode may end (the :class:`~datadojo.types.Trajectory` stop reasons).
DRIVER_STOP_REASONS = frozenset({"llm_error", "context_limit"})


class EnvUsageError(DataDojoError, ValueError):
    """The environment was driven wrongly (a step after the episode ended, a trajectory asked for before
    it ended, an unknown stop reason): a bug in the caller, named with the task and sample."""


class _ExecResultLike(Protocol):
    output: str
    status: str
    truncated: bool
    isolation: str

    def to_observation(self) -> Observation: ...


class CodeRunner(Protocol):
    """What an episode needs from a sandbox (:class:`datadojo.sandbox.Sandbox` satisfies it)."""

    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> _ExecResultLike: ...


@dataclass(frozen=True)
class AgentEvent:
    """Something that happened in an episode, for live display (``datadojo ask``) and logging.

    ``kind``: ``prompt`` (data: the opening messages), ``turn`` (data: ``(index, Turn)``), ``end`` (data:
    the :class:`Trajectory`).
    """

    kind: str
    task_id: str
    sample: int
    data: Any


EventHook = Callable[[AgentEvent], None]


@dataclass(frozen=True)
class StepResult:
    """What one :meth:`Episode.step` produced.

    ``observation`` is the text the model gets as the next user message (the dialect's observation tags
    around the sandbox output or the corrective message, plus the final-turn note when it applies), ""
    when no message follows (an answer, a sandbox failure); ``done`` says the episode ended (then
    :attr:`Episode.stop_reason` says why); ``turn`` is the recorded turn.
    """

    observation: str
    done: bool
    turn: Turn


def stop_strings(config: AgentConfig) -> tuple[str, ...]:
    """The stop strings a model call must use under ``config``: its ``sampling.stop``, then the dialect's
    (e.g. ``</code>``, ``</answer>``, ``<interpreter>``), each once."""
    return tuple(dict.fromkeys((*config.sampling.stop, *get_dialect(config.dialect).stop_sequences)))


def _sqlite_names(task: Task) -> list[str]:
    return [f.visible_name for f in task.files if f.kind == "sqlite"]


def _seed_sandbox(sandbox: Any, task_id: str, sample: int, run_seed: int | None) -> int | None:
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


class Episode:
    """One trajectory of ``task`` in a sandbox session: the conversation so far and the turns recorded.

    Made by :meth:`datadojo.env.DataEnv.reset` (which opens the sandbox session and closes it with
    :meth:`close`) or by :meth:`start` over a sandbox the caller holds (:func:`datadojo.env.run_agent`).
    The driver asks its model for a reply to :attr:`messages` with the stop strings :attr:`stop` and at
    most :attr:`max_tokens` tokens, passes the reply to :meth:`step`, and repeats until :attr:`done`.
    """

    def __init__(
        self,
        task: Task,
        sandbox: CodeRunner,
        prompt: list[dict[str, Any]],
        config: AgentConfig | None = None,
        *,
        sample: int = 0,
        seed: int | None = None,
        model: str | None = None,
        on_event: EventHook | None = None,
        on_close: Callable[[], Awaitable[Any]] | None = None,
        reward: RewardSpec | None = None,
    ) -> None:
        cfg = config or AgentConfig()
        self.reward_spec = reward
        self.task = task
        self.sample = sample
        self.seed = seed
        self.config = cfg
        self.model = model
        self.sandbox = sandbox
        self.dialect = get_dialect(cfg.dialect)
        self.language = cfg.language or default_language_for_task(task)
        self.prompt = [dict(m) for m in prompt]
        self.messages: list[dict[str, Any]] = [dict(m) for m in prompt]
        self.turns: list[Turn] = []
        self.stop: tuple[str, ...] = stop_strings(cfg)
        self.max_tokens: int | None = cfg.sampling.max_tokens
        self.done = False
        self.stop_reason: str | None = None
        self.final_answer: str | None = None
        self.error: str | None = None
        self._dbs = _sqlite_names(task)
        self._invalid_in_a_row = 0
        self._emit = on_event or (lambda _e: None)
        self._on_close = on_close
        self._closed = False
        self._trajectory: Trajectory | None = None
        self.sandbox_seed = _seed_sandbox(sandbox, task.id, sample, seed)
        self._emit(AgentEvent("prompt", task.id, sample, self.prompt))

    @classmethod
    async def start(
        cls,
        task: Task,
        sandbox: CodeRunner,
        config: AgentConfig | None = None,
        *,
        sample: int = 0,
        seed: int | None = None,
        model: str | None = None,
        on_event: EventHook | None = None,
        on_close: Callable[[], Awaitable[Any]] | None = None,
        reward: RewardSpec | None = None,
    ) -> Episode:
        """An episode of ``task`` in ``sandbox``, its opening messages built from ``config``.

        The prompt is built off the event loop: the first prompt of a file profiles it (a pandas read, and
        pandas' import on the first one of all), which would hold up every other episode meanwhile.
        """
        cfg = config or AgentConfig()
        prompt = await asyncio.to_thread(episode_prompt, task, cfg)
        return cls(
            task, sandbox, prompt, cfg, sample=sample, seed=seed, model=model, on_event=on_event,
            on_close=on_close, reward=reward,
        )  # fmt: skip

    # ------------------------------------------------------------------ the turn

    @property
    def turn_seed(self) -> int | None:
        """The sampling seed of the next request (the run's seed + the turn's index; None: unseeded)."""
        return None if self.seed is None else self.seed + len(self.turns)

    def _where(self) -> str:
        return f"task {self.task.id!r} sample {self.sample}"

    def _record(self, turn: Turn) -> None:
        self.turns.append(turn)
        self._emit(AgentEvent("turn", self.task.id, self.sample, (len(self.turns) - 1, turn)))

    def _finish(self, stop_reason: str, error: str | None = None) -> None:
        self.done, self.stop_reason, self.error = True, stop_reason, error
        self._trajectory = self._build_trajectory()
        self._emit(AgentEvent("end", self.task.id, self.sample, self._trajectory))

    def _append(self, raw: str, text: str) -> None:
        """Append the reply and the observation message (``text`` in the dialect's observation tags)."""
        self.messages.append({"role": "assistant", "content": raw})
        self.messages.append({"role": "user", "content": self.dialect.format_observation(text)})

    def _observe(self, raw: str, text: str) -> str:
        """Append the reply and the observation, apply the turn budget; the observation message's content."""
        self._append(raw, text)
        return self._after_turn()

    def _after_turn(self) -> str:
        """Apply the turn budget and the final-turn note; the content of the last user message."""
        cfg = self.config
        if len(self.turns) >= cfg.max_turns:
            self._finish("max_turns")
        elif cfg.reserve_final_turn and len(self.turns) == cfg.max_turns - 1:
            note = FINAL_TURN_NOTE.format(answer=self.dialect.answer)
            self.messages[-1] = {**self.messages[-1], "content": self.messages[-1]["content"] + "\n" + note}
        return str(self.messages[-1]["content"])

    async def step(
        self,
        reply: str,
        *,
        finish_reason: str | None = "stop",
        stop_sequence: str | None = None,
        tokens: TokenUsage | None = None,
        llm_s: float = 0.0,
    ) -> StepResult:
        """Play the model's ``reply`` (its text as generated, the stop string cut or not).

        ``finish_reason`` is the server's: ``stop`` (a stop string or end of sequence; a closing tag the
        server cut, ``stop_sequence`` when it says which, is re-appended, else inferred from an open action
        block) or ``length`` (cut by the token limit: the reply is left unclosed and that turn is invalid).
        ``tokens`` and ``llm_s`` are recorded with the turn. Raises :class:`EnvUsageError` only when the episode
        has already ended.
        """
        if self.done:
            raise EnvUsageError(f"{self._where()}: step after the episode ended ({self.stop_reason})")
        dialect, cfg = self.dialect, self.config
        raw = reply
        if finish_reason == "stop":
            # Servers drop the matched stop string from the text, so re-append the closing tag it cut. Hosted
            # APIs do not say which stop matched; then a reply that ends inside an open action block is taken
            # as cut by our </code>/</answer>. A reply cut by the token limit is left unclosed: it is invalid.
            raw = dialect.complete_turn(raw, stop_sequence)
        parsed = dialect.parse_turn(raw, strict=cfg.strict_parse, default_language=self.language)
        usage = tokens or TokenUsage()

        if parsed.kind == "answer":
            turn = parsed.to_turn(timings=Timings(llm_s=llm_s), tokens=usage)
            self._record(turn)
            self.final_answer = dialect.extract_answer(parsed.text)
            self._finish("answer")
            return StepResult("", True, turn)

        if parsed.kind == "invalid":
            self._invalid_in_a_row += 1
            message = parsed.error or "Malformed turn."
            if finish_reason == "length":
                message = (
                    "Your reply was cut off by the token limit before its action closed; write shorter steps. "
                    + message
                )
            obs = Observation(text=message, status="feedback")
            turn = parsed.to_turn(observation=obs, timings=Timings(llm_s=llm_s), tokens=usage)
            self._record(turn)
            if self._invalid_in_a_row >= cfg.max_invalid_turns:
                self._append(raw, message)
                self._finish("invalid", f"{self._invalid_in_a_row} malformed turns in a row; last: {message}")
                return StepResult(str(self.messages[-1]["content"]), True, turn)
            observation = self._observe(raw, message)
            return StepResult(observation, self.done, turn)

        self._invalid_in_a_row = 0
        t1 = time.perf_counter()
        result_obs = await self._execute(parsed.kind, parsed.text)
        exec_s = time.perf_counter() - t1
        turn = parsed.to_turn(
            observation=result_obs, timings=Timings(llm_s=llm_s, exec_s=exec_s), tokens=usage
        )
        self._record(turn)
        if result_obs.status == "env_error":
            self._finish("env_error", result_obs.text)
            return StepResult("", True, turn)
        observation = self._observe(raw, result_obs.text)
        return StepResult(observation, self.done, turn)

    async def _execute(self, kind: str, code: str) -> Observation:
        """Run one action in the sandbox; a sandbox failure becomes an ``env_error`` observation."""
        if kind == "sql" and not self._dbs:
            return Observation(
                text="SQL needs a database and this task has none: use Python.", status="feedback"
            )
        # With several databases, SQL runs against the first one listed (Python can open any of them).
        db = self._dbs[0] if kind == "sql" else None
        try:
            result = await self.sandbox.run(code, language="sql" if kind == "sql" else "python", db=db)
            return result.to_observation()
        except Exception as exc:  # the sandbox itself failed: end this trajectory, never the run
            return Observation(text=f"Environment failure: {type(exc).__name__}: {exc}", status="env_error")

    def end(self, stop_reason: str, error: str | None = None) -> None:
        """End the episode for a reason of the driver's: ``llm_error`` (the model call failed) or
        ``context_limit`` (the next request would not fit the model's window)."""
        if self.done:
            raise EnvUsageError(
                f"{self._where()}: end({stop_reason!r}) after the episode ended ({self.stop_reason})"
            )
        if stop_reason not in DRIVER_STOP_REASONS:
            raise EnvUsageError(
                f"{self._where()}: a driver ends an episode with {' or '.join(sorted(DRIVER_STOP_REASONS))}, "
                f"not {stop_reason!r} (the episode decides the others)"
            )
        self._finish(stop_reason, error)

    # ------------------------------------------------------------------ the record

    def _build_trajectory(self) -> Trajectory:
        settings = self.config.to_dict()
        return Trajectory(
            task_id=self.task.id,
            sample=self.sample,
            dialect=self.dialect.name,
            prompt=self.prompt,
            turns=self.turns,
            final_answer=self.final_answer,
            stop_reason=self.stop_reason,  # type: ignore[arg-type]
            error=self.error,
            model=self.model,
            sampling={**settings["sampling"], "stop": list(self.stop)},
            provenance=Provenance(
                config_hash=config_hash(settings), seed=self.seed, sandbox_seed=self.sandbox_seed
            ),
        )

    def trajectory(self) -> Trajectory:
        """The finished episode's :class:`Trajectory` (the same object on every call)."""
        if self._trajectory is None:
            raise EnvUsageError(
                f"{self._where()}: the episode has not ended ({len(self.turns)} turns so far)"
            )
        return self._trajectory

    async def reward(self) -> RewardResult:
        """The finished episode's reward, from the reward registry: ``score_pairs([(task, trajectory)],
        spec)`` with the environment's :class:`~datadojo.reward.registry.RewardSpec` (None: the reward
        chosen for the task). ``total`` is the sum of the named weighted ``parts``. An episode that ended on
        an infrastructure failure (``llm_error``, ``env_error``) is scored like any other; trainers leave
        those out rather than learn from them. Raises :class:`EnvUsageError` before the episode ends."""
        (result,) = await score_pairs([(self.task, self.trajectory())], self.reward_spec)
        return result

    # ------------------------------------------------------------------ the sandbox session

    async def close(self) -> None:
        """Return the sandbox session (to the pool it came from, or end it); idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            await self._on_close()

    async def __aenter__(self) -> Episode:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

"""The oracle agent: a :class:`~datadojo.llm.base.ChatBackend` that submits each task's gold SQL.

Why an oracle that goes through the whole agent loop rather than scoring the gold SQL directly: it is an
end-to-end check of everything between a model and a score — the system prompt, the tag protocol, stop
sequences, SQL execution in the sandbox, trajectory recording, the harness's rule for extracting a
trajectory's predicted SQL, and the benchmark's execution-accuracy scorer. On a benchmark with gold
programs (Spider, BIRD) the oracle must score 100%; anything less is a bug in one of those parts (or a
gold query that does not run, which the report names).

Each episode takes two turns (the agent loop's contract, DataMind §3.1):

1. ``<think>…</think><code>```sql GOLD```</code>`` — the gold SQL runs read-only in the sandbox;
2. ``<think>…</think><answer>OBSERVATION</answer>`` — the answer is the result table the sandbox printed.

The harness then scores the SQL that ran (the last SQL action without an error; see
:func:`datadojo.eval.harness.predicted_answer`), executing it against the gold query on the database.

**Which task a request belongs to.** A chat request carries only messages, so the oracle must recover the
task. The harness *binds* it: its sandbox factory calls :meth:`OracleBackend.bind` inside the asyncio task
that runs the episode, which sets a :class:`contextvars.ContextVar` private to that episode. Without a
binding (``run_agent`` called directly), the task is found by its question, the user message of the
prompt; a question shared by tasks with different gold SQL is then refused as ambiguous.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Iterable, Sequence
from typing import Any

from datadojo.llm.base import (
    ChatBackend,
    Completion,
    LLMError,
    Message,
    SamplingParams,
    apply_stop,
    approx_message_tokens,
    approx_token_count,
)
from datadojo.protocol import Dialect, get_dialect
from datadojo.types import Action, Task

__all__ = ["ORACLE_BENCHMARKS", "OracleBackend", "gold_program"]

#: Benchmarks whose tasks carry a gold program (``answer_kind == "sql"``) the oracle can submit.
ORACLE_BENCHMARKS: tuple[str, ...] = ("spider", "bird", "shop-sql")

_BOUND: contextvars.ContextVar[Task | None] = contextvars.ContextVar("datadojo_oracle_task", default=None)

#: Longest observation the oracle copies into its answer (the answer is not scored for SQL benchmarks).
MAX_ANSWER_CHARS = 4000


def gold_program(task: Task) -> str:
    """The gold SQL of ``task``; ``ValueError`` naming the task when it has none."""
    if task.answer_kind != "sql" or not isinstance(task.answer, str) or not task.answer.strip():
        raise ValueError(
            f"task {task.id!r} has no gold program (answer_kind {task.answer_kind!r}); the oracle agent "
            f"needs benchmarks with gold SQL: {', '.join(ORACLE_BENCHMARKS)}"
        )
    return task.answer.strip()


class OracleBackend(ChatBackend):
    """Replies with the bound task's gold SQL, then answers with the observation (module docstring).

    ``tasks`` are the tasks it may be asked about (each must have gold SQL); ``dialect`` must have a code
    tag that runs SQL (``datamind`` does; ``sailor`` does not). Token counts are the documented
    approximation (:func:`datadojo.llm.base.approx_token_count`).
    """

    def __init__(
        self, tasks: Iterable[Task], *, dialect: str | Dialect = "datamind", model_id: str = "oracle"
    ):
        super().__init__(model_id=model_id, context_window=None)
        self.dialect = get_dialect(dialect)
        if not any("sql" in tag.languages for tag in self.dialect.code_tags):
            raise ValueError(
                f"the oracle agent submits SQL, and dialect {self.dialect.name!r} has no code tag that runs "
                "SQL; use --dialect datamind"
            )
        self._gold: dict[str, str] = {}
        self._by_question: dict[str, list[Task]] = {}
        for task in tasks:
            self._gold[task.id] = gold_program(task)
            self._by_question.setdefault(task.question, []).append(task)
        if not self._gold:
            raise ValueError("the oracle agent needs at least one task")
        names = "|".join(re.escape(n) for n in self.dialect.tag_names)
        self._tag = re.compile(rf"<(/?)({names})>")

    # -- which task ---------------------------------------------------------------------------------

    def bind(self, task: Task) -> None:
        """Make ``task`` the one this episode's requests are about (for the current asyncio task only)."""
        if task.id not in self._gold:
            raise ValueError(f"task {task.id!r} is not one of the oracle's tasks")
        _BOUND.set(task)

    def _task_for(self, messages: Sequence[Message]) -> Task:
        bound = _BOUND.get()
        if bound is not None and bound.id in self._gold:
            return bound
        question = next((m["content"] for m in messages if m["role"] == "user"), None)
        candidates = self._by_question.get(question or "", [])
        if not candidates:
            raise LLMError(
                "oracle: the request matches none of its tasks (no task is bound and no task has this "
                "question); bind the task with OracleBackend.bind(task)",
                retryable=False,
            )
        if len({self._gold[t.id] for t in candidates}) > 1:
            ids = ", ".join(t.id for t in candidates[:5])
            raise LLMError(
                f"oracle: tasks {ids} share this question but not their gold SQL; bind the task with "
                "OracleBackend.bind(task)",
                retryable=False,
            )
        return candidates[0]

    # -- replies ------------------------------------------------------------------------------------

    def _reply(self, task: Task, messages: Sequence[Message]) -> str:
        turns_done = sum(1 for m in messages if m["role"] == "assistant")
        if turns_done == 0:
            thought = f"Run the reference SQL of task {task.id}."
            return self.dialect.format_turn(thought, Action(kind="sql", text=self._gold[task.id]))
        last = messages[-1]["content"] if messages[-1]["role"] == "user" else ""
        try:
            observation = self.dialect.parse_observation(last)
        except ValueError:
            observation = last  # a corrective message rather than an observation: quote it as it is
        if len(observation) > MAX_ANSWER_CHARS:
            observation = observation[:MAX_ANSWER_CHARS] + "\n[… cut by the oracle]"
        # A tag name of the dialect inside the answer would be read as a nested tag: escape its '<'.
        observation = self._tag.sub(r"&lt;\1\2>", observation).strip() or "(no output)"
        return self.dialect.format_turn(
            "The reference query ran; its result is the answer.", Action(kind="answer", text=observation)
        )

    async def _generate(self, messages: list[Message], params: SamplingParams) -> list[Completion]:
        task = self._task_for(messages)
        text, stop = apply_stop(self._reply(task, messages), params.stop)
        prompt_tokens = self.count_tokens(messages)
        completion = Completion(
            text=text,
            finish_reason="stop",
            stop_sequence=stop,
            prompt_tokens=prompt_tokens,
            completion_tokens=approx_token_count(text),
        )
        return [completion] * params.n

    def count_tokens(self, messages: Sequence[Message]) -> int:
        return approx_message_tokens(messages)


async def oracle_episode_worker(
    *, tasks: list[Task], config: Any, sandbox: Any = None, pool_size: int = 8, seed: int | None = None
) -> Any:
    """An :class:`~datadojo.agent.runner.EpisodeWorker` playing the oracle, built where it runs (a Ray
    node): an :class:`OracleBackend` over ``tasks`` bound to each episode's task, and a sandbox pool."""
    from datadojo.agent.runner import EpisodeWorker
    from datadojo.env import default_sandboxes

    oracle = OracleBackend(tasks, dialect=config.dialect)
    pool_factory, close_pool = default_sandboxes(pool_size, sandbox)

    def sandboxes(task: Task) -> Any:
        oracle.bind(task)  # called inside the episode's own asyncio task (see OracleBackend.bind)
        return pool_factory(task)

    return EpisodeWorker(oracle, sandboxes, config, seed=seed, closers=(close_pool,))


def oracle_worker_spec(
    tasks: list[Task], config: Any, *, sandbox: Any = None, pool_size: int = 8, seed: int | None = None
) -> Any:
    """The :class:`~datadojo.executor.WorkerSpec` of :func:`oracle_episode_worker` (tasks travel with it)."""
    from datadojo.executor import WorkerSpec

    return WorkerSpec(
        "datadojo.eval.oracle:oracle_episode_worker",
        {"tasks": list(tasks), "config": config, "sandbox": sandbox, "pool_size": pool_size, "seed": seed},
        label="eval (oracle)",
    )

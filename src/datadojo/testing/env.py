"""Doubles for driving the environment (:mod:`datadojo.env`) without a model server or a sandbox.

* :class:`ScriptedChat` — a :class:`~datadojo.llm.ChatBackend` whose replies are a list: text (finish
  ``stop``), ``(text, finish_reason, stop_sequence)`` as a server reports a cut reply, or an
  :class:`~datadojo.llm.LLMError` to raise. Token counts come from the approximate counter, so a context
  window check is deterministic. Every request is recorded (messages, stop strings, seed).
* :class:`ScriptedRunner` — a code runner (what an episode needs of a sandbox) that answers each cell with
  ``outputs(code, language, db)`` (default: an echo naming the language and database), fails with
  ``RuntimeError("worker vanished")`` on a cell containing ``fail_on``, and records its reseeds.
* :func:`runner_factory` — the :class:`~datadojo.env.DataEnv` ``sandboxes`` factory over fresh runners,
  counting the sessions opened and closed.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from datadojo.llm.base import (
    ChatBackend,
    Completion,
    Message,
    SamplingParams,
    approx_message_tokens,
    approx_token_count,
)
from datadojo.sandbox.result import ExecResult
from datadojo.types import Task

__all__ = ["ScriptedChat", "ScriptedRunner", "echo_output", "runner_factory"]


class ScriptedChat(ChatBackend):
    """Replies from a list (module docstring); ``requests`` holds what each call was sent."""

    def __init__(
        self, replies: Sequence[Any], *, context_window: int | None = None, model_id: str = "scripted"
    ) -> None:
        super().__init__(model_id=model_id, context_window=context_window)
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    async def _generate(self, messages: list[Message], params: SamplingParams) -> list[Completion]:
        self.requests.append(
            {"messages": [dict(m) for m in messages], "stop": list(params.stop), "seed": params.seed}
        )
        if not self.replies:
            raise AssertionError(f"ScriptedChat: no reply left for request {len(self.requests)}")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        text, finish, stop = (reply, "stop", None) if isinstance(reply, str) else reply
        return [
            Completion(
                text=text,
                finish_reason=finish,
                stop_sequence=stop,
                prompt_tokens=self.count_tokens(messages),
                completion_tokens=approx_token_count(text),
            )
        ]

    def count_tokens(self, messages: Sequence[Message]) -> int:
        return approx_message_tokens(messages)


def echo_output(code: str, language: str, db: str | None) -> str:
    """``[python] CODE`` / ``[sql@DB] CODE``: which interpreter ran what."""
    return f"[{language}{'@' + db if db else ''}] {code.strip()}"


class ScriptedRunner:
    """A sandbox double (module docstring). A cell containing ``raise`` reports status ``error``."""

    def __init__(
        self,
        fail_on: str | None = None,
        outputs: Callable[[str, str, str | None], str] = echo_output,
    ) -> None:
        self.fail_on = fail_on
        self.outputs = outputs
        self.seeds: list[int] = []
        self.calls: list[tuple[str, str, str | None]] = []

    def reseed(self, value: int) -> None:
        self.seeds.append(value)

    async def run(self, code: str, *, language: str = "python", db: str | None = None) -> ExecResult:
        self.calls.append((code, language, db))
        if self.fail_on is not None and self.fail_on in code:
            raise RuntimeError("worker vanished")
        status = "error" if "raise" in code else "ok"
        return ExecResult.make(self.outputs(code, language, db), status)


class RunnerSessions:
    """``task -> async context manager`` over a fresh :class:`ScriptedRunner` per session; counts them."""

    def __init__(self, **runner_kwargs: Any) -> None:
        self.runner_kwargs = runner_kwargs
        self.opened: list[ScriptedRunner] = []
        self.closed = 0

    @contextlib.asynccontextmanager
    async def __call__(self, task: Task) -> AsyncIterator[ScriptedRunner]:
        runner = ScriptedRunner(**self.runner_kwargs)
        self.opened.append(runner)
        try:
            yield runner
        finally:
            self.closed += 1


def runner_factory(**runner_kwargs: Any) -> RunnerSessions:
    """A :class:`RunnerSessions` (the ``sandboxes`` argument of :class:`~datadojo.env.DataEnv`)."""
    return RunnerSessions(**runner_kwargs)

"""Scripted models for the data-blind audit (:mod:`datadojo.eval.audit`): one that needs the data, one that
answers from the question alone.

:class:`DataReaderModel` plays what a data-grounded agent does: it first lists its working directory
(```` ```python ```` fence, so it runs under every benchmark's tool language; ``<python>`` in the
sailor dialect), and answers with the gold
answer only when the listing shows every data file of its task; otherwise it falls back to a guess.
:func:`question_only_guess` is such a guess, made from the question text alone the way a model's priors
would: a yes/no question gets "Yes", a question that states a number gets that number, a "How many X"
question over a database gets ``SELECT count(*) FROM X``, anything else 0 — each in the benchmark's answer
format. Neither model knows anything about the data; the reader's "reading" is a lookup of the gold answer,
so what the pair can show is the audit's machinery and the share of a benchmark's items that a trivial
question-only policy gets right, not what a real model would do blind.

Use them as a :class:`~datadojo.testing.server.ScriptedLLMServer` script::

    model = DataReaderModel(tasks)
    with ScriptedLLMServer(model) as server: ...
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from datadojo.types import Task

__all__ = ["LIST_WORKSPACE", "DataReaderModel", "gold_answer", "question_only_guess"]

#: The reader's first move: list the working directory.
LIST_WORKSPACE = "<think>First see which files I have.</think><code>```python\nimport os\nprint(sorted(os.listdir('.')))\n```</code>"
_YES_NO = re.compile(r"^\s*(is|are|was|were|does|do|did|has|have|had|can|could|will|would|should)\b", re.I)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?!\w)(?!\.\d)")  # "is 42." ends a sentence
_HOW_MANY = re.compile(r"\bhow many ([a-z_]+)", re.I)


def _formatted(task: Task, value: str) -> str:
    """``value`` in the answer format of the task's benchmark (DABench ``@name[value]``, TableBench
    ``Final Answer:``, SQL in a fence)."""
    kind = task.answer_kind or ""
    if kind == "dabench" and isinstance(task.answer, dict):
        return " ".join(f"@{name}[{value}]" for name in task.answer)
    if kind == "tablebench":
        return f"Final Answer: {value}"
    if kind == "sql":
        return f"```sql\n{value}\n```"
    return value


def gold_answer(task: Task) -> str:
    """The task's reference answer in its benchmark's answer format."""
    if task.answer_kind == "dabench" and isinstance(task.answer, dict):
        return " ".join(f"@{k}[{v}]" for k, v in task.answer.items())
    return _formatted(task, str(task.answer))


def question_only_guess(task: Task) -> str:
    """A guess from the question text alone (module docstring), in the benchmark's answer format."""
    q = task.question
    if task.answer_kind == "sql":
        m = _HOW_MANY.search(q)
        table = m.group(1).lower().removesuffix("s") if m else "sqlite_master"
        return _formatted(task, f"SELECT count(*) FROM {table}")
    if _YES_NO.match(q):
        return _formatted(task, "Yes")
    m = _NUMBER.search(q)
    return _formatted(task, m.group(0) if m else "0")


class DataReaderModel:
    """A loopback script answering right only when its task's data files are in the workspace.

    ``guess`` (default :func:`question_only_guess`) answers when they are not. Tasks are found by their
    question; tasks that share a question are told apart by the file names the system prompt lists.
    ``saw_data`` counts, per task id, the episodes that found their files (``True``) or not (``False``).
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        *,
        gold: Callable[[Task], str] = gold_answer,
        guess: Callable[[Task], str] = question_only_guess,
    ) -> None:
        self.by_question: dict[str, list[Task]] = {}
        for t in tasks:
            self.by_question.setdefault(t.question, []).append(t)
        self.gold = gold
        self.guess = guess
        self.saw_data: Counter[tuple[str, bool]] = Counter()
        self._lock = threading.Lock()

    def task_of(self, messages: Sequence[dict[str, Any]]) -> Task:
        """The task a request is about (its question, then the file names its system prompt lists)."""
        question = next(str(m["content"]) for m in messages if m["role"] == "user")
        found = self.by_question.get(question)
        if not found:
            raise KeyError(f"no task has the question {question[:80]!r}")
        system = str(messages[0]["content"])
        named = [t for t in found if all(f"`{f.visible_name}`" in system for f in t.files)]
        return (named or found)[0]

    def __call__(self, request: dict[str, Any]) -> str:
        messages = request["messages"]
        task = self.task_of(messages)
        if not any(m["role"] == "assistant" for m in messages):
            if "<python>" in str(messages[0]["content"]):  # the sailor dialect (scidata)
                return LIST_WORKSPACE.replace("<code>```python", "<python>").replace(
                    "```</code>", "</python>"
                )
            return LIST_WORKSPACE
        listing = str(messages[-1]["content"])
        sees = bool(task.files) and all(repr(f.visible_name) in listing for f in task.files)
        with self._lock:
            self.saw_data[(task.id, sees)] += 1
        answer = self.gold(task) if sees else self.guess(task)
        return f"<think>{'read the data' if sees else 'no data: guess'}</think><answer>{answer}</answer>"

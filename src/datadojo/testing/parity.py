"""Reward parity across consumers: the same tasks and scripted replies through every consumer of the
environment must give the same reward, to 1e-9 (issue 37, item 5; ``docs/environment.md``, "Parity").

Why a table and not one test: the consumers live in different environments — ``datadojo eval`` and
``train rl`` in the main suite, TRL's ``rollout_func`` and verl's agent loop in their engine venvs
(``scripts/engine_tests.sh``), verifiers / OpenEnv / inspect in theirs. Each writes
``<consumer>.json`` (:func:`write_rows`) into one folder; ``scripts/parity_table.py DIR`` prints the
consumer × task table and fails when two consumers differ or an expected one (:data:`CONSUMERS`) is missing.

The fixture (:func:`write_parity_fixture`) is written by the test into its own folder: a CSV task with a
number and one with a name, an SQLite task, a DABench-style task scored by DABench's official rule, and an
EnvLunch SQL task with two counterfactual copies; each in four cases (:data:`CASES`) whose scripted replies
are the right answer, the wrong entity's value, a malformed reply (no ``<think>``, wrong answer), and code
then the right answer. The case id is in the question (``[parity:ID]``), so a scripted server — chat
(:func:`chat_script`, for :class:`~datadojo.testing.server.ScriptedLLMServer`) or token level
(:func:`reply_for_prompt`) — finds the episode's replies from the prompt alone.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datadojo.fs import write_json_atomic
from datadojo.reward.canon import canonical_rows
from datadojo.reward.registry import BUILTIN_PARTS
from datadojo.types import DataFile, Task

__all__ = [
    "CASES",
    "CONSUMERS",
    "HAND_TOTALS",
    "HAND_TOTALS_ENVLUNCH",
    "TOLERANCE",
    "ParityFixture",
    "chat_script",
    "parity_row",
    "read_rows",
    "reply_for_prompt",
    "table_problems",
    "write_parity_fixture",
    "write_rows",
]

#: Every consumer that must write a row file; an adapter adds its name here (and writes its file).
CONSUMERS: tuple[str, ...] = ("eval", "train_rl", "trl", "verl", "verifiers", "openenv", "inspect", "harbor")
#: Two consumers agree when every total and part differs by at most this much.
TOLERANCE = 1e-9
#: The scripted reply of each case, in order.
CASES: tuple[str, ...] = ("right", "wrong_entity", "malformed", "code_then_answer")

#: By hand (DataMind §4: R = r_length·r_answer if correct, 0 if wrong but well formed, −0.1 if wrong and
#: malformed; every answer here is far below l_min = 256 tokens, so r_length = 1): the reward of each case.
HAND_TOTALS: dict[str, float] = {
    "right": 1.0,
    "wrong_entity": 0.0,
    "malformed": -0.1,
    "code_then_answer": 1.0,
}
#: EnvLunch Eq. 4, R = (1 + w(1 − t/t_max))·min_k m with w = 0.5, t_max = 16 (SQL): right at t = 0 → 1.5;
#: the partial program matches copy 1 and 2 of copy 2's 3 rows (m = 2/3) → 1.5·2/3 = 1.0 at t = 0 (also when
#: malformed: Eq. 4 has no format term); the code turn makes t = 1 → 1 + 0.5·15/16 = 1.46875.
HAND_TOTALS_ENVLUNCH: dict[str, float] = {
    "right": 1.5,
    "wrong_entity": 1.0,
    "malformed": 1.0,
    "code_then_answer": 1.46875,
}

_MARKER = re.compile(r"\[parity:([A-Za-z0-9_.-]+)\]")

SALES = [("North", 10), ("North", 20), ("South", 5), ("South", 7), ("East", 1)]  # total 43, mean 8.6
ORDERS = [(1, "Ann", 12.5), (2, "Bob", 3.0), (3, "Ann", 7.25), (4, "Bob", 1.0), (5, "Bob", 2.0)]
COPIES = {
    "copy1": [("N", 10), ("N", 20), ("S", 5)],
    "copy2": [("N", 10), ("S", 5), ("S", 7), ("E", 1)],
}
COPY_TARGETS = {"copy1": [("N", 30), ("S", 5)], "copy2": [("N", 10), ("S", 12), ("E", 1)]}
SQL_RIGHT = "SELECT region, SUM(amount) AS total FROM sales GROUP BY region"
SQL_PARTIAL = "SELECT region, SUM(amount) FROM sales WHERE region != 'E' GROUP BY region"


@dataclass(frozen=True)
class _Base:
    """One question: its answers for each case and the code its ``code_then_answer`` case runs first."""

    name: str
    right: str
    wrong: str
    code: str


_BASES = (
    _Base(
        "csv-total",
        "43",
        "30",  # North's total instead of all regions'
        "import pandas as pd\nprint(pd.read_csv('sales.csv')['amount'].sum())",
    ),
    _Base(
        "csv-top-region",
        "North",
        "South",
        "import pandas as pd\nprint(pd.read_csv('sales.csv').groupby('region')['amount'].sum().idxmax())",
    ),
    _Base(
        "sqlite-orders",
        "3",  # Bob's orders
        "2",  # Ann's
        "import sqlite3\ncon = sqlite3.connect('shop.sqlite')\n"
        "print(con.execute(\"SELECT COUNT(*) FROM orders WHERE customer = 'Bob'\").fetchone()[0])",
    ),
    _Base(
        "dabench-mean",
        "@mean_amount[8.60]",
        "@mean_amount[15.00]",  # North's mean
        "import pandas as pd\nprint(round(pd.read_csv('sales.csv')['amount'].mean(), 2))",
    ),
    _Base(
        "envlunch-sql",
        SQL_RIGHT,
        SQL_PARTIAL,  # drops region E, which only copy 2 has: partial agreement there
        "import sqlite3\ncon = sqlite3.connect('shop.sqlite')\n"
        "print(con.execute('SELECT region, SUM(amount) FROM sales GROUP BY region').fetchall())",
    ),
)


def _replies(base: _Base, case: str) -> list[str]:
    answer = f"<think>I have the answer.</think>\n<answer>\n{base.right}\n</answer>"
    if case == "right":
        return [answer]
    if case == "wrong_entity":
        return [f"<think>I have the answer.</think>\n<answer>\n{base.wrong}\n</answer>"]
    if case == "malformed":
        return [f"<answer>\n{base.wrong}\n</answer>"]
    if case == "code_then_answer":
        return [f"<think>Let me compute it.</think>\n<code>\n{base.code}\n</code>", answer]
    raise ValueError(f"unknown parity case {case!r}; known: {', '.join(CASES)}")


@dataclass(frozen=True)
class ParityFixture:
    """The written fixture: ``tasks_path`` (all tasks, EnvLunch copies beside it), ``dabench_dir`` (the
    DABench-style task in DABench's own layout, for ``eval dabench``), the tasks, the replies per task id
    and each task's base question (``kind``)."""

    tasks_path: Path
    dabench_dir: Path
    tasks: tuple[Task, ...]
    replies: Mapping[str, tuple[str, ...]]
    kind: Mapping[str, str]

    def expected_total(self, task_id: str) -> float:
        """The hand-computed reward of ``task_id`` (:data:`HAND_TOTALS`, :data:`HAND_TOTALS_ENVLUNCH`)."""
        case = task_id.rsplit(".", 1)[1]
        return (HAND_TOTALS_ENVLUNCH if self.kind[task_id] == "envlunch-sql" else HAND_TOTALS)[case]

    def replies_for(self, text: str) -> tuple[str, ...]:
        """The replies of the episode whose prompt is ``text`` (its ``[parity:ID]`` marker)."""
        m = _MARKER.search(text)
        if m is None or m.group(1) not in self.replies:
            raise ValueError(f"no parity marker of a known task in the prompt: {text[:200]!r}")
        return self.replies[m.group(1)]


def _question(text: str, task_id: str) -> str:
    return f"{text} [parity:{task_id}]"


def _write_sqlite(path: Path, table: str, columns: str, rows: list[tuple[Any, ...]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as con:
        con.execute(f"CREATE TABLE {table} ({columns})")
        con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    con.close()


def write_parity_fixture(root: str | Path) -> ParityFixture:
    """Write the fixture's data, its ``tasks.jsonl`` and the DABench layout under ``root``."""
    root = Path(root)
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)
    sales = data / "sales.csv"
    sales.write_text("region,amount\n" + "".join(f"{r},{a}\n" for r, a in SALES), encoding="utf-8")
    _write_sqlite(data / "shop.sqlite", "orders", "id INTEGER, customer TEXT, amount REAL", ORDERS)
    for name, rows in COPIES.items():
        _write_sqlite(root / "copies" / name / "shop.sqlite", "sales", "region TEXT, amount INTEGER", rows)
    targets = [canonical_rows(["region", "total"], COPY_TARGETS[c]).to_json() for c in COPIES]
    dabench = root / "dabench"
    (dabench / "da-dev-tables").mkdir(parents=True, exist_ok=True)
    (dabench / "da-dev-tables" / "sales.csv").write_text(sales.read_text(encoding="utf-8"), encoding="utf-8")

    tasks: list[Task] = []
    replies: dict[str, tuple[str, ...]] = {}
    kind: dict[str, str] = {}
    questions, labels = [], []
    for base in _BASES:
        for case in CASES:
            tid = f"{base.name}.{case}"
            replies[tid], kind[tid] = tuple(_replies(base, case)), base.name
            if base.name == "csv-total":
                task = Task(id=tid, question=_question("What is the total amount over all sales?", tid),
                            files=[DataFile.from_path(sales)], answer=43, answer_kind="number")  # fmt: skip
            elif base.name == "csv-top-region":
                task = Task(id=tid, question=_question("Which region has the highest total amount?", tid),
                            files=[DataFile.from_path(sales)], answer="North", answer_kind="text")  # fmt: skip
            elif base.name == "sqlite-orders":
                task = Task(id=tid, question=_question("How many orders did Bob place?", tid),
                            files=[DataFile.from_path(data / "shop.sqlite")], answer=3, answer_kind="number")  # fmt: skip
            elif base.name == "dabench-mean":
                questions.append({
                    "id": tid, "question": _question("What is the mean amount of a sale?", tid),
                    "file_name": "sales.csv", "format": "@mean_amount[mean], rounded to two decimals",
                    "concepts": ["Summary Statistics"], "level": "easy",
                })  # fmt: skip
                labels.append({"id": tid, "common_answers": [["mean_amount", "8.60"]]})
                continue
            else:
                task = Task(
                    id=tid, question=_question("Target value: the total amount of each region.", tid),
                    files=[DataFile.from_path(root / "copies" / "copy1" / "shop.sqlite")],
                    answer=COPY_TARGETS["copy1"], answer_kind="envlunch", source="envlunch",
                    extra={"backend": "sql", "copies": ["copies/copy1", "copies/copy2"], "orig": "copies/copy1",
                           "copy_targets": targets, "target": targets[0], "db_name": "shop.sqlite",
                           "level": 1, "program": SQL_RIGHT},
                )  # fmt: skip
            tasks.append(task)
    lines = "".join(json.dumps(q) + "\n" for q in questions)
    (dabench / "da-dev-questions.jsonl").write_text(lines, encoding="utf-8")
    (dabench / "da-dev-labels.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in labels), encoding="utf-8"
    )
    from datadojo.bench import get_benchmark

    tasks.extend(get_benchmark("dabench").load(dabench))  # as `eval dabench` reads them (source dabench)
    tasks_path = root / "tasks.jsonl"
    tasks_path.write_text("".join(t.model_dump_json() + "\n" for t in tasks), encoding="utf-8")
    return ParityFixture(tasks_path, dabench, tuple(tasks), replies, kind)


def chat_script(fixture: ParityFixture) -> Callable[[dict[str, Any]], str]:
    """A :class:`~datadojo.testing.server.ScriptedLLMServer` script: the episode's next reply, found from
    the marker in its first user message and the number of assistant messages so far."""

    def reply(request: dict[str, Any]) -> str:
        messages = request["messages"]
        first_user = next(m["content"] for m in messages if m["role"] == "user")
        done = sum(m["role"] == "assistant" for m in messages)
        script = fixture.replies_for(first_user)
        if done >= len(script):
            raise ValueError(f"parity script exhausted after {done} replies: {first_user[-80:]!r}")
        return script[done]

    return reply


def reply_for_prompt(
    fixture: ParityFixture, text: str, *, assistant_header: str = "<|im_start|>assistant"
) -> str:
    """The next reply for a token-level server that sees the whole conversation as text: the marker picks
    the episode, the assistant headers already in it (less the one being generated) the turn."""
    done = text.count(assistant_header) - 1
    script = fixture.replies_for(text)
    if not 0 <= done < len(script):
        raise ValueError(f"parity script has no reply {done} for {text[-120:]!r}")
    return script[done]


def parity_row(total: float, numbers: Mapping[str, Any]) -> dict[str, Any]:
    """One table cell from a consumer's flat reward log: the total and the built-in weighted parts in it."""
    parts = {k: float(numbers[k]) for k in BUILTIN_PARTS if k in numbers and numbers[k] is not None}
    return {"total": float(total), "parts": parts}


def write_rows(
    folder: str | Path,
    consumer: str,
    rows: Mapping[str, Mapping[str, Any]],
    *,
    not_covered: Mapping[str, str] | None = None,
) -> Path:
    """Write ``<folder>/<consumer>.json``: ``rows`` keyed ``task_id/sample`` (each :func:`parity_row`) and
    the keys this consumer cannot run, with why (``not_covered``)."""
    path = Path(folder) / f"{consumer}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "consumer": consumer,
        "rows": dict(sorted(rows.items())),
        "not_covered": dict(not_covered or {}),
    }
    write_json_atomic(path, payload)
    return path


def read_rows(folder: str | Path) -> dict[str, dict[str, Any]]:
    """Every ``<consumer>.json`` in ``folder``, by consumer."""
    out = {}
    for path in sorted(Path(folder).glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "rows" not in data:
            raise ValueError(f"{path}: not a parity row file (no 'rows')")
        out[str(data.get("consumer") or path.stem)] = data
    return out


def table_problems(
    files: Mapping[str, Mapping[str, Any]],
    expected: tuple[str, ...] = CONSUMERS,
    tolerance: float = TOLERANCE,
) -> list[str]:
    """Why the table fails: an expected consumer without a file, a row one consumer has and another lacks
    (unless it says why in ``not_covered``), a total or part that differs by more than ``tolerance``."""
    problems = [f"{c}: no {c}.json (the consumer did not run)" for c in expected if c not in files]
    keys = sorted({k for f in files.values() for k in f["rows"]})
    for key in keys:
        have = {c: f["rows"][key] for c, f in files.items() if key in f["rows"]}
        for c, f in files.items():
            if key not in f["rows"] and key not in f.get("not_covered", {}):
                problems.append(f"{key}: {c} has no row")
        if not have:
            continue
        ref_name, ref = next(iter(have.items()))
        for c, row in have.items():
            names = sorted(set(ref["parts"]) | set(row["parts"]))
            diffs = [("total", ref["total"], row["total"])] + [
                (n, ref["parts"].get(n), row["parts"].get(n)) for n in names
            ]
            for what, a, b in diffs:
                if a is None or b is None or abs(a - b) > tolerance:
                    problems.append(f"{key}: {what} {ref_name}={a} {c}={b}")
    return problems

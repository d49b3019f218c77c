"""Spider 2.0-lite, its local SQLite part: enterprise text-to-SQL scored by comparing result tables.

Spider 2.0-lite (Lei et al., 2025; the repository ``xlang-ai/Spider2``, MIT licence) mixes BigQuery,
Snowflake and SQLite questions; the SQLite ones (``instance_id`` starting with ``local``) run on
databases anyone can hold, and are what this benchmark covers.

**Layout** (the repository's ``spider2-lite`` folder): ``spider2-lite.jsonl`` (records with
``instance_id``, ``db``, ``question``, ``external_knowledge``), ``resource/databases/spider2-localdb/
<db>.sqlite`` (the local databases, a separate download the README links), ``resource/documents/<name>``
(the external-knowledge documents), ``evaluation_suite/gold/spider2lite_eval.jsonl`` (per instance:
``condition_cols``, ``ignore_order``), ``evaluation_suite/gold/exec_result/<id>.csv`` or
``<id>_a.csv``, ``<id>_b.csv``, … (the gold result tables) and ``evaluation_suite/gold/sql/<id>.sql`` (gold
SQL, released for some instances). ``path`` is that ``spider2-lite`` folder (or its ``spider2-lite.jsonl``).

**Tasks**: the ``local`` records that have an evaluation entry; ``id`` is the ``instance_id``; the
question is the question, followed by the external-knowledge document's text when the record names one
(the released setting gives agents that document); the one file is the database (``kind`` sqlite);
``answer`` is the reference result, the text of the first gold CSV (``answer_kind`` ``sql_result``: the
harness scores the SQL the agent gave or last ran, as for Spider); ``extra`` holds ``gold_results`` (every
gold CSV path), ``condition_cols``, ``ignore_order`` and ``gold_sql`` (the released gold SQL, else
``None``: most local instances have none); ``category`` is the database.

**Scoring** (rule ``official``, ``evaluation_suite/evaluate.py`` in its SQL mode for ``local``
instances): the predicted SQL (last fenced block, else the text) runs on the database read-only; its
result goes through a CSV round trip as in the official script (pandas writes it, pandas reads it back,
so values are typed as the gold CSVs are); it matches a gold table (:func:`tables_match`) when every gold
column — or every column in ``condition_cols`` — equals **some** predicted column (names ignored, extra
predicted columns allowed): same length, numbers within 1e-2 absolute, other values equal, missing values
equal to missing values, in row order unless ``ignore_order`` (then both columns are sorted first). With
several gold tables (``_a``, ``_b``, …) matching any one is correct (:func:`matches_any_gold`).
``docs/evaluation.md`` ("Spider 2.0-lite, official") lists the deviations.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from datadojo.bench.base import Benchmark, BenchmarkDefaults, BenchmarkError, ItemScore, missing_prediction
from datadojo.bench.base import ScoringRule as _Rule
from datadojo.bench.spider import execute, extract_sql
from datadojo.types import DataFile, Task

__all__ = [
    "TOLERANCE",
    "Spider2Lite",
    "columns_match",
    "gold_result_files",
    "matches_any_gold",
    "result_frame",
    "tables_match",
]

#: Absolute tolerance of the official comparison of two numbers (``math.isclose(a, b, abs_tol=1e-2)``).
TOLERANCE = 1e-2
#: Spider 2.0-lite's local instances run up to a minute here (the official script sets no limit).
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_ROWS = 1_000_000

OFFICIAL = _Rule(
    "official",
    "Spider 2.0-lite evaluate.py (SQL mode, local SQLite): result read back from CSV; every gold column "
    "(or condition_cols) equal to some predicted column, numbers within 1e-2, row order unless "
    "ignore_order; any of several gold tables",
    "rule-spider2-lite-official",
)


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float)


def _missing(x: Any) -> bool:
    import pandas as pd

    return bool(pd.isna(x)) if not isinstance(x, list | tuple | dict) else False


def _order_key(x: Any) -> tuple[bool, str, bool]:
    # the official sort key when the order is ignored: None last, then by text, numbers after text
    return (x is None, str(x), _is_number(x))


def columns_match(gold: Sequence[Any], pred: Sequence[Any], *, ignore_order: bool) -> bool:
    """One gold column against one predicted column, as the official ``vectors_match``.

    With ``ignore_order`` both are sorted by ``(is None, str(x), is a number)`` first. Then: same length,
    and position by position both missing, or both numbers within :data:`TOLERANCE`, or equal.
    """
    g, p = list(gold), list(pred)
    if ignore_order:
        g, p = sorted(g, key=_order_key), sorted(p, key=_order_key)
    if len(g) != len(p):
        return False
    for a, b in zip(g, p, strict=True):
        if _missing(a) and _missing(b):
            continue
        if _is_number(a) and _is_number(b):
            if not math.isclose(float(a), float(b), abs_tol=TOLERANCE):
                return False
        elif a != b:
            return False
    return True


def _columns(frame: Any) -> list[list[Any]]:
    """The frame's columns as lists of Python values, read as the official script reads them: through
    the transposed frame's ``values`` (an all-numeric frame's integers become floats there)."""
    return frame.transpose().values.tolist()


def tables_match(pred: Any, gold: Any, condition_cols: Sequence[int] = (), *, ignore_order: bool) -> bool:
    """The official ``compare_pandas_table`` on two DataFrames: every gold column (only those at
    ``condition_cols`` when given) matches some predicted column (:func:`columns_match`); a predicted
    column may serve several gold columns, and predicted columns no gold column needs are ignored."""
    if condition_cols:
        width = gold.shape[1]
        bad = [i for i in condition_cols if not -width <= int(i) < width]
        if bad:
            raise IndexError(f"condition_cols {list(condition_cols)} name columns the gold table lacks")
        gold = gold.iloc[:, list(condition_cols)]
    pred_cols = _columns(pred)
    return all(any(columns_match(g, p, ignore_order=ignore_order) for p in pred_cols) for g in _columns(gold))


def _per_gold_condition_cols(condition_cols: Any, n_gold: int) -> list[list[int]]:
    """The condition columns of each gold table, normalized as ``compare_multi_pandas_table`` does."""
    if condition_cols in (None, [], [[]], [None]):
        return [[] for _ in range(n_gold)]
    if n_gold == 1:
        flat = condition_cols[0] if all(isinstance(c, list) for c in condition_cols) else condition_cols
        return [list(flat)]
    if not all(isinstance(c, list) for c in condition_cols):
        return [list(condition_cols) for _ in range(n_gold)]
    if len(condition_cols) < n_gold:
        raise IndexError(f"condition_cols has {len(condition_cols)} lists for {n_gold} gold tables")
    return [list(c) for c in condition_cols[:n_gold]]


def matches_any_gold(pred: Any, golds: Sequence[Any], condition_cols: Any, *, ignore_order: bool) -> int:
    """1 when ``pred`` matches one of ``golds`` (:func:`tables_match`), else 0 — the official verdict."""
    per = _per_gold_condition_cols(condition_cols, len(golds))
    return int(
        any(tables_match(pred, g, c, ignore_order=ignore_order) for g, c in zip(golds, per, strict=True))
    )


def result_frame(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Any:
    """A query result as the official script sees it: written to CSV by pandas and read back by pandas.

    Why: the gold tables are CSV files, so the official comparison types both sides by ``read_csv``
    (text ``'1'`` becomes the number 1, ``NULL`` and ``''`` become missing values, trailing spaces stay).
    """
    import pandas as pd

    text = pd.DataFrame.from_records(list(rows), columns=list(columns)).to_csv(index=False)
    return pd.read_csv(io.StringIO(text))


def gold_result_files(folder: Path, instance_id: str) -> list[Path]:
    """The gold CSVs of ``instance_id`` in ``folder``: ``<id>.csv`` and ``<id>_<letter>.csv``, sorted (the
    official file pattern ``^<id>(_[a-z])?\\.csv$``)."""
    pattern = re.compile(rf"^{re.escape(instance_id)}(_[a-z])?\.csv$")
    return sorted(p for p in folder.iterdir() if pattern.match(p.name)) if folder.is_dir() else []


class Spider2Lite(Benchmark):
    name = "spider2-lite"
    description = "Spider 2.0-lite, local SQLite part: enterprise text-to-SQL scored by result tables"
    metric = "EX"
    layout = (
        "the spider2-lite folder of xlang-ai/Spider2 holding spider2-lite.jsonl, "
        "resource/databases/spider2-localdb/<db>.sqlite, evaluation_suite/gold/spider2lite_eval.jsonl and "
        "evaluation_suite/gold/exec_result/<instance_id>.csv"
    )
    rules = (OFFICIAL,)
    defaults = BenchmarkDefaults(
        max_turns=20,
        language="sql",
        answer_format="Give the final SQL query (one SQLite SELECT statement) as the answer.",
    )
    no_source = (
        "the questions and gold results are in the MIT-licensed GitHub repository xlang-ai/Spider2 (clone it "
        "and pass its spider2-lite folder); the local SQLite databases are a separate Google Drive archive "
        "of third-party datasets the README links, with no licence stated, so DataDojo does not fetch them: "
        "unzip them into spider2-lite/resource/databases/spider2-localdb/"
    )

    def __init__(self, *, timeout_s: float = DEFAULT_TIMEOUT_S, max_rows: int = DEFAULT_MAX_ROWS) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.timeout_s = timeout_s
        self.max_rows = max_rows

    def load(self, path: str | Path, *, require_files: bool = True, **options: Any) -> Iterator[Task]:
        """The local instances (module docstring); gold tables are always required (they are the answers)."""
        self._no_options(options)
        given = Path(path)
        if given.is_file():  # spider2-lite.jsonl itself: its folder is the spider2-lite folder
            records, root = self._text_file(given), given.parent
        else:
            root = given
            records = self._text_file(self._require(root / "spider2-lite.jsonl", "spider2-lite.jsonl"))
        rows = list(self.records(records))  # a file that is not the records is named first
        gold_dir = root / "evaluation_suite" / "gold"
        eval_file = self._text_file(
            self._require(gold_dir / "spider2lite_eval.jsonl", "spider2lite_eval.jsonl")
        )
        standards: dict[str, dict[str, Any]] = {}
        for lineno, rec in self.records(eval_file):
            if "instance_id" not in rec:
                raise BenchmarkError(f"{eval_file}:{lineno}: missing field 'instance_id'")
            standards[str(rec["instance_id"])] = rec
        db_dir = root / "resource" / "databases" / "spider2-localdb"
        docs = root / "resource" / "documents"
        seen: set[str] = set()
        for lineno, rec in rows:
            where = f"{records}:{lineno}"
            iid = str(rec.get("instance_id", ""))
            if not iid.startswith("local") or iid not in standards:
                continue
            if iid in seen:
                raise BenchmarkError(f"{where}: duplicate instance_id {iid}")
            seen.add(iid)
            try:
                db, question = str(rec["db"]), str(rec["question"])
            except KeyError as exc:
                raise BenchmarkError(f"{where}: missing field {exc}") from exc
            golds = gold_result_files(gold_dir / "exec_result", iid)
            if not golds:
                raise BenchmarkError(
                    f"{where}: no gold result for {iid} in {gold_dir / 'exec_result'} "
                    f"(expected {iid}.csv or {iid}_a.csv, …)"
                )
            database = db_dir / f"{db}.sqlite"
            if require_files and not database.exists():
                raise self.layout_error(f"{where}: database {db!r} not found: {database}")
            knowledge = rec.get("external_knowledge")
            if knowledge:
                doc = docs / str(knowledge)
                if doc.is_file():
                    question = (
                        f"{question}\n\nExternal knowledge ({knowledge}):\n{doc.read_text(encoding='utf-8')}"
                    )
                elif require_files:
                    raise BenchmarkError(f"{where}: external knowledge {knowledge!r} not found: {doc}")
            sql_file = gold_dir / "sql" / f"{iid}.sql"
            std = standards[iid]
            yield Task(
                id=iid,
                question=question,
                files=[DataFile(path=str(database), kind="sqlite")],
                answer=golds[0].read_text(encoding="utf-8").strip(),
                answer_kind="sql_result",
                source=self.name,
                category=db,
                extra={
                    "db": db,
                    "gold_sql": sql_file.read_text(encoding="utf-8").strip() if sql_file.is_file() else None,
                    "gold_results": [str(p) for p in golds],
                    "condition_cols": std.get("condition_cols") or [],
                    "ignore_order": bool(std.get("ignore_order", False)),
                    "external_knowledge": knowledge,
                },
            )

    def score(self, task: Task, prediction: str | None) -> ItemScore:
        gold_paths = task.extra.get("gold_results") or []
        if not gold_paths:
            raise ValueError(f"{self.name} task {task.id!r}: no gold result tables (extra['gold_results'])")
        if not task.files:
            raise ValueError(f"{self.name} task {task.id!r}: no database file")
        if prediction is None:
            return missing_prediction(self.metric)
        sql = extract_sql(prediction)
        if not sql:
            return ItemScore(0.0, False, sql, "empty SQL", self.metric)
        db = task.files[0].path
        if not Path(db).exists():
            raise ValueError(f"{self.name} task {task.id!r}: database not found: {db}")
        res = execute(db, sql, timeout_s=self.timeout_s, max_rows=self.max_rows)
        if res.error is not None:
            return ItemScore(0.0, False, sql, f"the predicted SQL failed: {res.error}", self.metric)
        import pandas as pd

        if not res.columns:  # nothing to write as a table (the official script cannot read it back either)
            return ItemScore(0.0, False, sql, "the predicted SQL returned no columns", self.metric)
        pred = result_frame(res.columns, res.rows)
        golds = [pd.read_csv(p) for p in gold_paths]
        ignore_order = bool(task.extra.get("ignore_order", False))
        try:
            ok = bool(
                matches_any_gold(pred, golds, task.extra.get("condition_cols"), ignore_order=ignore_order)
            )
        except IndexError as exc:
            return ItemScore(0.0, False, sql, f"cannot compare: {exc}", self.metric, {"gold_error": True})
        order = "in any row order" if ignore_order else "in row order"
        shape = f"{pred.shape[0]}×{pred.shape[1]} result vs {len(golds)} gold table(s)"
        reason = (
            f"every required gold column found among the predicted columns, {order} ({shape})"
            if ok
            else f"a required gold column has no equal predicted column, {order} ({shape})"
        )
        return ItemScore(1.0 if ok else 0.0, ok, sql, reason, self.metric, {"n_gold": len(golds)})

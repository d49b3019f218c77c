"""Spider and BIRD: text-to-SQL over SQLite databases, scored by execution accuracy (EX).

**Spider layout** (Yu et al., 2018): ``dev.json`` (records with ``db_id``, ``question``, gold ``query``),
``tables.json`` and ``database/<db_id>/<db_id>.sqlite``; ``path`` is that folder (``split`` picks another
records file, e.g. ``train_spider``) or the records file itself. Task ids are ``<split>-<i>``, the i-th
record of the file.

**BIRD layout** (Li et al., 2023): ``dev.json`` (``question_id``, ``db_id``, ``question``, ``evidence``,
``SQL``, ``difficulty``) and ``dev_databases/<db_id>/<db_id>.sqlite``. Task ids are
``bird-<question_id>``; the question includes BIRD's external-knowledge ``evidence``; ``category`` is the
difficulty.

Tasks carry the database as their one file (``kind`` sqlite), the gold SQL as ``answer`` (``answer_kind``
``sql``) and ``extra["db_id"]``.

**Scoring**: the prediction may wrap its SQL in a Markdown code fence (the last fence counts). The
predicted and the gold SQL run on the task's database, read-only (:func:`datadojo.sandbox.sql.run_sql`:
``mode=ro``, ``query_only``, an authorizer, one statement). A predicted query that fails, is refused, or
runs past ``timeout_s`` (30 s) scores 0, as does a result with more than ``max_rows`` rows. The two
results are then compared by the benchmark's rule (``docs/evaluation.md``, "Scoring rules"):

* **Spider, rule ``test-suite``** (the default; the execution accuracy the field reports for Spider,
  test-suite-sql-eval's ``exec_eval.eval_exec_match``): both queries get the reference's clean-up
  (``> =`` → ``>=``, ``< =``, ``! =``; ``YEAR(CURDATE())`` → 2020; the ``DISTINCT`` keyword removed
  unless ``keep_distinct``, the reference's default), and the results must be equal as **multisets of
  rows under some permutation of the columns**, in the same row order when the gold query contains
  ``order by`` (:func:`datadojo.compare.tables.denotations_equal`), on the task's database and on every
  other ``.sqlite`` file in its folder (the test-suite's distilled databases, when installed there);
* **Spider, rule ``set``** and **BIRD** (BIRD's ``evaluation.py``): the result rows are compared **as
  sets** (order and duplicates ignored, columns in query order, values compared exactly).

Alongside EX, ``parts["table_match"]`` records DataMind's table comparison of the two results
(:func:`datadojo.compare.tables.compare_tables`: every gold column among the predicted columns,
order-insensitive, numbers within 1e-2), the rule DataMind's BIRD evaluation uses; its share is reported
as ``table_match`` in the totals.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datadojo.bench.base import Benchmark, BenchmarkDefaults, BenchmarkError, ItemScore, missing_prediction
from datadojo.bench.base import ScoringRule as _Rule
from datadojo.bench.download import BenchSource, RemoteFile
from datadojo.compare.tables import compare_tables, denotations_equal
from datadojo.compare.text import extract_sql
from datadojo.sandbox.sql import run_sql
from datadojo.types import DataFile, Task

__all__ = [
    "BIRD",
    "Spider",
    "SqlExecOutcome",
    "clean_sql_like_test_suite",
    "denotation_match",
    "execute",
    "execution_match",
    "extract_sql",
    "order_matters",
    "remove_distinct",
]


#: BIRD's evaluation stops a query after 30 s (``meta_time_out``).
DEFAULT_TIMEOUT_S = 30.0
#: Results longer than this count as a failure rather than exhausting memory.
DEFAULT_MAX_ROWS = 1_000_000


@dataclass(frozen=True)
class SqlExecOutcome:
    """The result of running one query: ``columns``/``rows`` on success, else ``error``."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    error: str | None = None


def execute(
    db_path: str | Path, sql: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, max_rows: int = DEFAULT_MAX_ROWS
) -> SqlExecOutcome:
    """Run ``sql`` read-only on ``db_path`` and return every row (an error when it has more than ``max_rows``)."""
    res = run_sql(str(db_path), sql, row_limit=max_rows, timeout_s=timeout_s)
    if res.error is not None:
        return SqlExecOutcome((), (), res.error)
    if res.truncated:
        return SqlExecOutcome((), (), f"the result has {res.n_rows} rows, more than the limit of {max_rows}")
    return SqlExecOutcome(tuple(res.columns), tuple(tuple(r) for r in res.rows))


def execution_match(pred: SqlExecOutcome, gold: SqlExecOutcome) -> bool:
    """EX under the ``set`` rule (BIRD's ``evaluation.py``): the same set of rows (both must have run)."""
    if pred.error is not None or gold.error is not None:
        return False
    return set(pred.rows) == set(gold.rows)


# SQL tokens as far as removing a keyword needs them: comments, quoted strings and identifiers are
# single tokens (a DISTINCT inside them is not the keyword), words are runs of word characters.
_SQL_TOKEN = re.compile(
    r"--[^\n]*|/\*.*?(?:\*/|$)|'(?:[^']|'')*'?|\"(?:[^\"]|\"\")*\"?|`[^`]*`?|\[[^\]]*\]?|[\w$#]+|\s+|.",
    re.DOTALL,
)
_CUR_YEAR = re.compile(r"YEAR\s*\(\s*CURDATE\s*\(\s*\)\s*\)\s*", re.IGNORECASE)


def remove_distinct(sql: str) -> str:
    """``sql`` without the ``DISTINCT`` keyword anywhere (``COUNT(DISTINCT x)`` too), as the reference does.

    test-suite-sql-eval drops every token whose text is ``distinct`` (any case) and joins the rest, so
    ``SELECT DISTINCT a`` runs as ``SELECT  a`` and ``COUNT(DISTINCT a)`` as ``COUNT( a)``. Strings,
    quoted identifiers and comments are kept whole.
    """
    return "".join(t for t in _SQL_TOKEN.findall(sql) if t.lower() != "distinct")


def clean_sql_like_test_suite(sql: str, *, keep_distinct: bool = False) -> str:
    """The reference's clean-up of a query before running it (module docstring): operators, DISTINCT, year."""
    sql = sql.replace("> =", ">=").replace("< =", "<=").replace("! =", "!=")
    if not keep_distinct:
        sql = remove_distinct(sql)
    return _CUR_YEAR.sub("2020", sql)


def order_matters(gold_sql: str) -> bool:
    """Row order counts when the (cleaned) gold query contains ``order by`` (the reference's literal test)."""
    return "order by" in gold_sql.lower()


def denotation_match(pred: SqlExecOutcome, gold: SqlExecOutcome, *, ordered: bool) -> bool:
    """EX under the ``test-suite`` rule: :func:`~datadojo.compare.tables.denotations_equal` of two results."""
    if pred.error is not None or gold.error is not None:
        return False
    return denotations_equal(gold.rows, pred.rows, order_matters=ordered)


SPIDER_TEST_SUITE = _Rule(
    "test-suite",
    "EX as test-suite-sql-eval's exec_eval computes it: rows as multisets, columns in any order, "
    "row order only when the gold query has ORDER BY; DISTINCT removed from both queries",
    "rule-spider-test-suite",
)
SPIDER_SET = _Rule(
    "set",
    "EX with BIRD's set comparison: set(predicted rows) == set(gold rows), columns in query order",
    "rule-spider-set",
)
BIRD_SET = _Rule(
    "official",
    "EX as BIRD's evaluation.py computes it: set(predicted rows) == set(gold rows)",
    "rule-bird-official",
)


class _SqlBenchmark(Benchmark):
    """Shared scoring of Spider and BIRD (module docstring); loaders differ."""

    metric = "EX"
    defaults = BenchmarkDefaults(
        max_turns=10,
        language="sql",
        answer_format="Give the final SQL query (one SELECT statement) as the answer.",
    )

    def __init__(
        self,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_rows: int = DEFAULT_MAX_ROWS,
        keep_distinct: bool = False,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        #: ``test-suite`` rule only: keep DISTINCT (the reference's ``--keep_distinct``; off by default).
        self.keep_distinct = keep_distinct
        self._gold: OrderedDict[tuple[str, str], SqlExecOutcome] = OrderedDict()

    def _gold_result(self, db: str, sql: str) -> SqlExecOutcome:
        """Gold results are cached (LRU, 256 entries): n trials of one task run the gold query once."""
        key = (db, sql)
        if key in self._gold:
            self._gold.move_to_end(key)
            return self._gold[key]
        out = execute(db, sql, timeout_s=self.timeout_s, max_rows=self.max_rows)
        self._gold[key] = out
        if len(self._gold) > 256:
            self._gold.popitem(last=False)
        return out

    def score(self, task: Task, prediction: str | None) -> ItemScore:
        if not isinstance(task.answer, str) or not task.answer.strip():
            raise ValueError(f"{self.name} task {task.id!r}: no gold SQL")
        if not task.files:
            raise ValueError(f"{self.name} task {task.id!r}: no database file")
        if prediction is None:
            return missing_prediction(self.metric)
        db = task.files[0].path
        if not Path(db).exists():
            raise ValueError(f"{self.name} task {task.id!r}: database not found: {db}")
        sql = extract_sql(prediction)
        test_suite = self.rule.name == SPIDER_TEST_SUITE.name
        gold_sql = (
            clean_sql_like_test_suite(task.answer, keep_distinct=self.keep_distinct)
            if test_suite
            else task.answer
        )
        gold = self._gold_result(db, gold_sql)
        if gold.error is not None:
            return ItemScore(
                0.0, False, sql, f"the gold SQL failed: {gold.error}", self.metric, {"gold_error": True}
            )
        if not sql:
            return ItemScore(0.0, False, sql, "empty SQL", self.metric, {"table_match": False})
        run_sql_text = clean_sql_like_test_suite(sql, keep_distinct=self.keep_distinct) if test_suite else sql
        pred = execute(db, run_sql_text, timeout_s=self.timeout_s, max_rows=self.max_rows)
        if pred.error is not None:
            return ItemScore(
                0.0,
                False,
                sql,
                f"the predicted SQL failed: {pred.error}",
                self.metric,
                {"table_match": False},
            )
        table = compare_tables(list(pred.rows), list(gold.rows)) if gold.rows or pred.rows else None
        table_ok = table.match if table is not None else True
        if test_suite:
            ordered = order_matters(gold_sql)
            ok = denotation_match(pred, gold, ordered=ordered)
            how = "in the same order" if ordered else "as multisets, columns in any order"
            reason = (
                f"same result {how} ({len(gold.rows)} rows)"
                if ok
                else f"different results {how}: {len(pred.rows)}×{len(pred.columns)} vs "
                f"{len(gold.rows)}×{len(gold.columns)} (rows×columns)"
            )
            if ok:
                failure = self._suite_failure(Path(db), gold_sql, run_sql_text, ordered)
                if failure is not None:
                    gold_failed = failure.startswith("the gold SQL")
                    parts = {"gold_error": True} if gold_failed else {"table_match": table_ok}
                    return ItemScore(0.0, False, sql, failure, self.metric, parts)
        else:
            ok = execution_match(pred, gold)
            reason = (
                f"same result set ({len(set(gold.rows))} distinct rows)"
                if ok
                else f"different results: {len(set(pred.rows))} vs {len(set(gold.rows))} distinct rows"
            )
        return ItemScore(1.0 if ok else 0.0, ok, sql, reason, self.metric, {"table_match": table_ok})

    def _suite_failure(self, db: Path, gold_sql: str, pred_sql: str, ordered: bool) -> str | None:
        """Why the prediction fails on another database of ``db``'s folder, or ``None`` when it passes all.

        test-suite-sql-eval runs both queries on every ``.sqlite`` file beside the task's database (its
        distilled test-suite databases) and accepts only when all results agree; the original Spider
        release has one database per folder, so this loop is usually empty.
        """
        others = sorted(p for p in db.parent.glob("*.sqlite") if p.is_file() and p.resolve() != db.resolve())
        for other in others:
            gold = self._gold_result(str(other), gold_sql)
            if gold.error is not None:
                return f"the gold SQL failed on test-suite database {other.name}: {gold.error}"
            pred = execute(other, pred_sql, timeout_s=self.timeout_s, max_rows=self.max_rows)
            if pred.error is not None:
                return f"the predicted SQL failed on test-suite database {other.name}: {pred.error}"
            if not denotation_match(pred, gold, ordered=ordered):
                return f"different results on test-suite database {other.name}"
        return None

    def _records_file(self, path: str | Path, split: str, options: dict[str, Any]) -> Path:
        """``<split>.json`` (``path`` is it or its folder), after refusing unknown loader ``options``."""
        self._no_options(options)
        p = Path(path)
        return self._text_file(self._require(p if p.is_file() else p / f"{split}.json", f"{split}.json"))

    def _database(self, folder: Path, db_id: str, where: str, require_files: bool) -> Path:
        """``folder/<db_id>/<db_id>.sqlite``; a missing one is an error naming ``where`` if files are required."""
        db = folder / db_id / f"{db_id}.sqlite"
        if require_files and not db.exists():
            raise BenchmarkError(f"{where}: database {db_id!r} not found: {db}")
        return db

    def _sql_task(
        self, task_id: str, question: str, db: Path, sql: str, category: str | None, extra: dict[str, Any]
    ) -> Task:
        """A text-to-SQL task over the SQLite database ``db``, answered by the gold query ``sql``."""
        return Task(
            id=task_id,
            question=question,
            files=[DataFile(path=str(db), kind="sqlite")],
            answer=sql,
            answer_kind="sql",
            source=self.name,
            category=category,
            extra=extra,
        )

    def totals(self, items: Sequence[tuple[Task, ItemScore]]) -> dict[str, float]:
        """EX (``accuracy``) plus DataMind's table comparison (``table_match``) and gold failures."""
        out = super().totals(items)
        if items:
            out["table_match"] = sum(bool(s.parts.get("table_match")) for _, s in items) / len(items)
            out["gold_errors"] = float(sum(bool(s.parts.get("gold_error")) for _, s in items))
        return out


def _read_json_list(bench: Benchmark, path: Path) -> list[dict[str, Any]]:
    """The JSON list of records at ``path``; anything else is one line naming ``bench``'s layout."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: JSONDecodeError and UnicodeDecodeError
        raise bench.layout_error(f"{path}: cannot read JSON ({exc})") from exc
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise bench.layout_error(f"{path}: expected a JSON list of records")
    return data


class Spider(_SqlBenchmark):
    name = "spider"
    description = "Spider: cross-database text-to-SQL on SQLite, execution accuracy"
    layout = (
        "a Spider folder holding dev.json (or train_spider.json), tables.json and "
        "database/<db_id>/<db_id>.sqlite, or its dev.json"
    )
    rules = (SPIDER_TEST_SUITE, SPIDER_SET)
    # the official release (Google Drive): one zip holding dev.json, tables.json and database/
    source = BenchSource(
        name="spider",
        base_url="https://drive.usercontent.google.com",
        files=(
            RemoteFile(
                "spider_data.zip",
                url="https://drive.usercontent.google.com/download?id=1403EGqzIDoHMdQF4c9Bkyl7dZLZ5Wt6J"
                "&export=download&confirm=t",
                unpack=True,
                strip_top=True,
            ),
        ),
        homepage="https://yale-lily.github.io/spider",
        licence="CC BY-SA 4.0",
        note="the official release (Google Drive): dev.json, tables.json, database/",
    )

    def load(
        self, path: str | Path, *, require_files: bool = True, split: str = "dev", **options: Any
    ) -> Iterator[Task]:
        """Spider tasks (module docstring); ``split`` names the records file (``dev``, ``train_spider``)."""
        src = self._records_file(path, split, options)
        root = src.parent
        stem = src.stem
        for i, rec in enumerate(_read_json_list(self, src)):
            where = f"{src} record {i}"
            try:
                db_id, question, query = str(rec["db_id"]), str(rec["question"]), str(rec["query"])
            except KeyError as exc:
                raise BenchmarkError(f"{where}: missing field {exc}") from exc
            db = self._database(root / "database", db_id, where, require_files)
            yield self._sql_task(f"{stem}-{i}", question, db, query, db_id, {"db_id": db_id})


class BIRD(_SqlBenchmark):
    name = "bird"
    description = "BIRD: text-to-SQL with external knowledge over large SQLite databases, execution accuracy"
    layout = "a BIRD folder holding dev.json and dev_databases/<db_id>/<db_id>.sqlite, or its dev.json"
    rules = (BIRD_SET,)
    # the dev split: dev.zip holds dev.json and dev_databases.zip, itself unpacked into dev_databases/
    source = BenchSource(
        name="bird",
        base_url="https://bird-bench.oss-cn-beijing.aliyuncs.com",
        files=(RemoteFile("dev.zip", unpack=True, strip_top=True, nested=("dev_databases.zip",)),),
        homepage="https://bird-bench.github.io/",
        licence="CC BY-SA 4.0",
        note="the dev split: dev.json and dev_databases/",
    )

    def load(
        self, path: str | Path, *, require_files: bool = True, split: str = "dev", **options: Any
    ) -> Iterator[Task]:
        """BIRD tasks from ``<split>.json`` and ``<split>_databases/`` (module docstring)."""
        src = self._records_file(path, split, options)
        root = src.parent
        db_root = root / f"{src.stem}_databases"
        seen: set[str] = set()
        for i, rec in enumerate(_read_json_list(self, src)):
            where = f"{src} record {i}"
            try:
                db_id, question, sql = str(rec["db_id"]), str(rec["question"]), str(rec["SQL"])
            except KeyError as exc:
                raise BenchmarkError(f"{where}: missing field {exc}") from exc
            qid = f"bird-{rec.get('question_id', i)}"
            if qid in seen:
                raise BenchmarkError(f"{where}: duplicate question_id {rec.get('question_id')}")
            seen.add(qid)
            db = self._database(db_root, db_id, where, require_files)
            evidence = str(rec.get("evidence") or "").strip()
            yield self._sql_task(
                qid,
                f"{question}\n\nExternal knowledge: {evidence}" if evidence else question,
                db,
                sql,
                rec.get("difficulty"),
                {"db_id": db_id, "evidence": evidence, "question_only": question},
            )

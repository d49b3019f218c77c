"""Spider 2.0-lite (local SQLite) conformance with ``spider2-lite/evaluation_suite/evaluate.py``.

Every expected verdict below was worked out by hand from the official code, not by running DataDojo:

* SQL mode, ``local`` instances: the predicted SQL runs on the database (``pd.read_sql_query``), is
  written to ``temp/<id>.csv`` and read back with ``pd.read_csv``; the gold is ``pd.read_csv`` of
  ``gold/exec_result/<id>.csv`` (one file) or of every ``<id>_[a-z].csv`` (several: any may match);
* ``compare_pandas_table(pred, gold, condition_cols, ignore_order)``: the gold columns (``gold.iloc[:,
  condition_cols]`` when ``condition_cols != []``) and the predicted ones as lists; score 1 iff every
  gold column ``vectors_match``-es some predicted column (column names never read, extra predicted
  columns ignored, one predicted column may serve two gold columns);
* ``vectors_match``: sort both by ``(x is None, str(x), isinstance(x, (int, float)))`` when
  ``ignore_order``; different lengths → False; per position: both ``pd.isna`` → ok; both int/float →
  ``math.isclose(a, b, abs_tol=1e-2)``; else ``a != b`` → False (strings exact: case, spaces).
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from datadojo.bench import get_benchmark
from datadojo.bench.spider2 import matches_any_gold, result_frame, tables_match
from helpers.spider2 import make_spider2_lite


def _csv(text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text))


# (gold CSV, predicted CSV, condition_cols, ignore_order, official verdict, why)
TABLE_CASES: list[tuple[str, str, list[int], bool, bool, str]] = [
    ("a,b\n1,x\n2,y\n", "p,q\n1,x\n2,y\n", [], False, True, "names are never compared"),
    ("a,b\n1,x\n2,y\n", "q,p\nx,1\ny,2\n", [], False, True, "columns in another order"),
    ("a\n1\n2\n", "a,extra\n1,9\n2,9\n", [], False, True, "an extra predicted column is ignored"),
    ("a,b\n1,x\n2,y\n", "a\n1\n2\n", [], False, False, "gold column b is missing"),
    ("a,b\n1,x\n2,y\n", "a\n1\n2\n", [0], False, True, "condition_cols [0]: only column a counts"),
    ("a,b\n1,x\n2,y\n", "b\nx\ny\n", [1], False, True, "condition_cols [1]"),
    ("a\n1\n2\n", "a\n2\n1\n", [], False, False, "row order counts when ignore_order is false"),
    ("a\n1\n2\n", "a\n2\n1\n", [], True, True, "sorted first when ignore_order"),
    (
        "a,b\n1,x\n2,y\n",
        "a,b\n1,y\n2,x\n",
        [],
        True,
        True,
        "columns are sorted one by one: rows may break apart",
    ),
    ("a\n1\n2\n", "a\n1\n2\n2\n", [], True, False, "another row count"),
    ("a\n0.123\n", "a\n0.129\n", [], False, True, "numbers within 1e-2 absolute"),
    ("a\n100.0\n", "a\n100.02\n", [], False, False, "0.02 > 1e-2, even on a large number"),
    ("a\n0.5\n", "a\n50\n", [], False, False, "a fraction is not a percentage"),
    ("a\n3\n", "a\n3.004\n", [], False, True, "int gold, float prediction"),
    ("a\nApple\n", "a\napple\n", [], False, False, "strings are case-sensitive"),
    ("a\nApple\n", 'a\n"Apple "\n', [], False, False, "a trailing space survives read_csv"),
    ("a,b\n,x\n", "a,b\n,x\n", [], False, True, "missing equals missing"),
    ("a,b\n,x\n", "a,b\n0,x\n", [], False, False, "missing is not 0"),
    ("a,b\n1,1\n2,2\n", "c\n1\n2\n", [], False, True, "one predicted column serves both gold columns"),
    ("a\nx\n", "a\n", [], False, False, "an empty result against one row"),
    ("a\n", "b\n", [], False, True, "two empty columns"),
]


@pytest.mark.parametrize(("gold", "pred", "cols", "ignore", "verdict", "why"), TABLE_CASES)
def test_table_verdicts(gold: str, pred: str, cols: list[int], ignore: bool, verdict: bool, why: str) -> None:
    assert tables_match(_csv(pred), _csv(gold), cols, ignore_order=ignore) is verdict, why


def test_any_of_several_gold_tables() -> None:
    golds = [_csv("a\n1\n"), _csv("a\n2\n")]
    assert matches_any_gold(_csv("a\n2\n"), golds, [], ignore_order=False) == 1
    assert matches_any_gold(_csv("a\n3\n"), golds, [], ignore_order=False) == 0
    # condition_cols per gold table (a list of lists), or one flat list for all of them
    golds = [_csv("a,b\n1,x\n"), _csv("a,b\n9,y\n")]
    assert matches_any_gold(_csv("b\ny\n"), golds, [[0], [1]], ignore_order=False) == 1
    assert matches_any_gold(_csv("b\ny\n"), golds, [0], ignore_order=False) == 0
    assert matches_any_gold(_csv("b\nx\n"), golds, [1], ignore_order=False) == 1


def test_the_csv_round_trip_types_the_result_like_the_gold() -> None:
    """Text '1' read back from CSV is the number 1, NULL and '' are missing, as in the gold CSVs."""
    frame = result_frame(["n", "t", "e"], [("1", None, ""), ("2", "x", "y")])
    assert frame["n"].tolist() == [1, 2] and pd.isna(frame["t"][0]) and pd.isna(frame["e"][0])
    assert tables_match(frame, _csv("k\n1\n2\n"), [], ignore_order=False)


@pytest.fixture
def spider2(tmp_path: Path) -> Path:
    return make_spider2_lite(tmp_path / "spider2-lite")


def test_loader_reads_the_local_instances(spider2: Path) -> None:
    tasks = list(get_benchmark("spider2-lite").load(spider2))
    assert [t.id for t in tasks] == ["local001", "local002"]  # bq001 is not local
    one, two = tasks
    assert "Regions are North and South." in one.question and one.extra["gold_sql"].startswith(
        "SELECT region"
    )
    assert one.answer == "region,total\nNorth,12.25\nSouth,5.5" and one.answer_kind == "sql_result"
    assert one.files[0].kind == "sqlite" and one.category == "shop"
    assert two.extra["gold_sql"] is None and [Path(p).name for p in two.extra["gold_results"]] == [
        "local002_a.csv", "local002_b.csv"
    ]  # fmt: skip
    assert two.extra["ignore_order"] is True and one.extra["ignore_order"] is False


# (instance, predicted SQL, official verdict, why)
SQL_CASES = [
    ("local001", "SELECT region, SUM(amount) AS total FROM sales GROUP BY region ORDER BY total DESC", True, "gold SQL"),
    ("local001", "SELECT SUM(amount), region FROM sales GROUP BY region ORDER BY 1 DESC", True, "columns swapped"),
    ("local001", "SELECT region, SUM(amount), COUNT(*) FROM sales GROUP BY region ORDER BY 2 DESC", True,
     "an extra column"),
    ("local001", "SELECT region, SUM(amount) FROM sales GROUP BY region ORDER BY 2", False,
     "ignore_order is false: ascending order is wrong"),
    ("local001", "SELECT region, ROUND(SUM(amount), 1) FROM sales GROUP BY region ORDER BY 2 DESC", False,
     "12.25 to one decimal is 12.2 or 12.3: 0.05 away, more than 1e-2"),
    ("local001", "SELECT region, SUM(amount) + 0.005 FROM sales GROUP BY region ORDER BY 2 DESC", True,
     "0.005 is within 1e-2"),
    ("local001", "SELECT lower(region), SUM(amount) FROM sales GROUP BY region ORDER BY 2 DESC", False,
     "'north' != 'North'"),
    ("local001", "SELECT region FROM sales GROUP BY region ORDER BY SUM(amount) DESC", False, "total missing"),
    ("local002", "SELECT DISTINCT month FROM sales ORDER BY month DESC", True,
     "ignore_order; matches local002_a"),
    ("local002", "SELECT month, COUNT(*) FROM sales GROUP BY month", True, "matches both gold tables"),
    ("local002", "SELECT month FROM sales", False, "3 rows vs 2 in either gold table"),
    ("local002", "SELECT nope FROM sales", False, "an error scores 0"),
    ("local002", "DELETE FROM sales", False, "refused (read-only) and scored 0"),
]  # fmt: skip


@pytest.mark.parametrize(("iid", "sql", "verdict", "why"), SQL_CASES)
def test_sql_verdicts(spider2: Path, iid: str, sql: str, verdict: bool, why: str) -> None:
    bench = get_benchmark("spider2-lite")
    task = next(t for t in bench.load(spider2) if t.id == iid)
    assert bench.score(task, f"```sql\n{sql}\n```").correct is verdict, why


def test_missing_prediction_and_layout_errors(spider2: Path, tmp_path: Path) -> None:
    bench = get_benchmark("spider2-lite")
    task = next(iter(bench.load(spider2)))
    assert bench.score(task, None).reason == "no prediction"
    with pytest.raises(Exception, match=r"spider2-lite.jsonl not found: .*expected the spider2-lite folder"):
        list(bench.load(tmp_path / "nowhere"))
    (spider2 / "resource" / "databases" / "spider2-localdb" / "shop.sqlite").unlink()
    with pytest.raises(Exception, match="database 'shop' not found"):
        list(bench.load(spider2))
    assert len(list(bench.load(spider2, require_files=False))) == 2
    (spider2 / "evaluation_suite" / "gold" / "exec_result" / "local001.csv").unlink()
    with pytest.raises(Exception, match="no gold result for local001"):
        list(bench.load(spider2, require_files=False))


def test_the_rule_is_documented_where_it_links() -> None:
    rule = get_benchmark("spider2-lite").rule
    doc = Path(__file__).resolve().parents[2] / rule.doc.split("#")[0]
    assert f'<a id="{rule.doc.split("#")[1]}"></a>' in doc.read_text(encoding="utf-8")


#: The released gold table of local300 (``gold/exec_result/local300.csv``) and its evaluation standard
#: (``spider2lite_eval.jsonl``: ``condition_cols [1]``, ``ignore_order true``).
LOCAL300 = "month,total_allocation\n2020-01,356618\n2020-02,409593\n2020-03,386903\n2020-04,206550\n"


@pytest.mark.parametrize(
    ("pred", "verdict", "why"),
    [
        (LOCAL300, True, "the gold itself"),
        ("total\n206550\n356618\n386903\n409593\n", True, "only column 1 is required, in any row order"),
        ("m,t\nJan,356618\nFeb,409593\nMar,386903\nApr,206550\n", True, "month (column 0) is not compared"),
        ("t\n356618.004\n409593\n386903\n206550\n", True, "within 1e-2"),
        ("t\n356619\n409593\n386903\n206550\n", False, "one total off by 1"),
        ("t\n356618\n409593\n386903\n", False, "a month missing"),
        ("month\n2020-01\n2020-02\n2020-03\n2020-04\n", False, "the required column is absent"),
    ],
)
def test_a_released_gold_table_under_its_standard(pred: str, verdict: bool, why: str) -> None:
    assert tables_match(_csv(pred), _csv(LOCAL300), [1], ignore_order=True) is verdict, why

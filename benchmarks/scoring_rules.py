"""How much the choice of scoring rule moves verdicts, and what the faithful rules cost, on real data.

Usage::

    python benchmarks/scoring_rules.py [--data ../shared/data] [--spider-limit 200] [--tablebench-limit 300]

**Spider**: every dev record's gold query and mechanical variants of it (ORDER BY dropped or flipped,
the first two selected columns swapped, the first column duplicated, every row doubled with
``UNION ALL``, ``LIMIT`` raised by one) are scored under the ``test-suite`` rule (the default,
test-suite-sql-eval's ``result_eq``) and the ``set`` rule (BIRD's comparison). Printed: how many variants
each rule accepts, the share of verdicts on which they disagree, and the time per item of each rule
(``set`` is the baseline of the ratio; gold results are cached, so this is prediction execution plus
comparison).

**TableBench**: every item's reference written as answers do come (with and without the ``Final
Answer:`` marker, with a trailing period, with a decimal dropped or added, with the sign flipped) is scored
under ``official`` (the script's verdicts, the default) and ``readme``; printed: the share of items on
which the credits agree.

**Matchers** (``--section matchers``, issue 28): real DABench sub-answers and TableBench answers rewritten
the ways models write them, each with the careful grader's verdict, scored by the DataMind matcher, the
scientific matcher and the DataMind consistency pre-check *before* (the code of commit
``_answer_rewrites.BEFORE``, loaded from git) and *after* the comparison core; printed: verdicts right,
false accepts, false rejects and undecided, per rule and per way of writing (``benchmarks/_answer_rewrites.py``).

**Verdicts** (``--section verdicts``, issue 39): the same three rules *before* (the code of commit
``_answer_rewrites.BEFORE_39``, the core included, loaded from git) and *after*, on the adversarial table
``datadojo.testing.answers.ANSWER_PAIRS`` (with each pair's question) and on the real references
rewritten (issue 28's ways plus issue 39's: a label beside the value, a signed change in words, a text
list with a preamble or one item more, a date reformatted); printed: decided right, decided wrong (a
confident error no judge sees) and undecided, with the undecided share.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

from datadojo.bench import get_benchmark
from datadojo.types import Task

REPO = Path(__file__).resolve().parents[1]
_SELECT_TWO = re.compile(r"^\s*SELECT\s+([\w.\"`()*]+)\s*,\s*([\w.\"`()*]+)\s+FROM\s", re.IGNORECASE)
_SELECT_ONE = re.compile(r"^\s*SELECT\s+([\w.\"`()*]+)\s+FROM\s", re.IGNORECASE)


def spider_variants(sql: str) -> list[tuple[str, str]]:
    """``(kind, sql)`` mechanical variants of a gold query (only those that apply to it)."""
    q = sql.strip().rstrip(";")
    out: list[tuple[str, str]] = []
    up = q.upper()
    if " ORDER BY " in up and " LIMIT " not in up:
        out.append(("order dropped", re.sub(r"\s+ORDER\s+BY\s+.*$", "", q, flags=re.IGNORECASE | re.DOTALL)))
        if re.search(r"\bDESC\b", q, re.IGNORECASE):
            out.append(("order flipped", re.sub(r"\bDESC\b", "ASC", q, flags=re.IGNORECASE)))
        else:
            out.append(("order flipped", q + " DESC"))
    m = _SELECT_TWO.match(q)
    if m and "DISTINCT" not in up[:20]:
        a, b = m.group(1), m.group(2)
        out.append(("columns swapped", q[: m.start(1)] + f"{b}, {a}" + q[m.end(2) :]))
    m = _SELECT_ONE.match(q) or _SELECT_TWO.match(q)
    if m and "DISTINCT" not in up[:20]:
        out.append(("column duplicated", q[: m.start(1)] + f"{m.group(1)}, " + q[m.start(1) :]))
    if " ORDER BY " not in up and " LIMIT " not in up and " UNION " not in up:
        out.append(("rows doubled", f"{q} UNION ALL {q}"))
    lim = re.search(r"\bLIMIT\s+(\d+)\s*$", q, re.IGNORECASE)
    if lim:
        out.append(("limit + 1", q[: lim.start(1)] + str(int(lim.group(1)) + 1)))
    return out


def run_spider(data: Path, limit: int) -> None:
    if not (data / "spider" / "dev.json").exists():
        print(f"spider: data absent under {data}")
        return
    suite, as_set = get_benchmark("spider"), get_benchmark("spider").with_rule("set")
    tasks = list(suite.load(data / "spider"))[:limit]
    pairs = [(t, t.answer, "gold") for t in tasks] + [
        (t, v, kind) for t in tasks for kind, v in spider_variants(str(t.answer))
    ]
    for t in tasks:  # warm the gold caches of both rules, untimed
        suite.score(t, str(t.answer))
        as_set.score(t, str(t.answer))
    times: dict[str, float] = {}
    verdicts: dict[str, list[bool]] = {}
    for name, bench in (("set", as_set), ("test-suite", suite)):
        start = time.perf_counter()
        verdicts[name] = [bench.score(t, sql).correct for t, sql, _ in pairs]
        times[name] = time.perf_counter() - start
    kinds = sorted({k for _, _, k in pairs})
    print(f"spider: {len(tasks)} dev records, {len(pairs)} predictions (gold + variants)")
    print(f"  {'variant':<18}{'n':>6}{'test-suite ok':>15}{'set ok':>9}{'disagree':>10}")
    for kind in kinds:
        idx = [i for i, p in enumerate(pairs) if p[2] == kind]
        a = sum(verdicts["test-suite"][i] for i in idx)
        b = sum(verdicts["set"][i] for i in idx)
        d = sum(verdicts["test-suite"][i] != verdicts["set"][i] for i in idx)
        print(f"  {kind:<18}{len(idx):>6}{a:>15}{b:>9}{d / len(idx):>10.1%}")
    mutated = [i for i, p in enumerate(pairs) if p[2] != "gold"]
    dis = sum(verdicts["test-suite"][i] != verdicts["set"][i] for i in mutated) / max(1, len(mutated))
    print(f"  disagreement on mutated predictions: {dis:.1%}")
    per = {k: v / len(pairs) * 1e3 for k, v in times.items()}
    print(
        f"  time per prediction: set {per['set']:.2f} ms (baseline), test-suite {per['test-suite']:.2f} ms, "
        f"ratio {per['test-suite'] / per['set']:.2f}"
    )


def tablebench_variants(answer: str) -> list[str]:
    out = [f"Final Answer: {answer}", answer, f"Final Answer: {answer}."]
    num = re.fullmatch(r"-?\d+\.\d+", answer.strip())
    if num:
        out.append(f"Final Answer: {answer}0")  # an extra decimal
        out.append(f"Final Answer: {answer[:-1]}")  # a decimal dropped
    if re.fullmatch(r"\d+(\.\d+)?", answer.strip()):
        out.append(f"Final Answer: -{answer}")
    return out


def run_tablebench(data: Path, limit: int) -> None:
    src = data / "tablebench"
    if not (src / "TableBench.jsonl").exists():
        print(f"tablebench: data absent under {src}")
        return
    official = get_benchmark("tablebench")
    readme = official.with_rule("readme")
    tasks: list[Task] = list(official.load(src))[:limit]
    agree = total = 0
    score: Callable[[Task, str], tuple[float, float]] = lambda t, p: (  # noqa: E731
        official.score(t, p).score,
        readme.score(t, p).score,
    )
    for t in tasks:
        for pred in tablebench_variants(str(t.answer)):
            a, b = score(t, pred)
            agree += abs(a - b) < 1e-9
            total += 1
    print(
        f"tablebench: {len(tasks)} items, {total} answer variants; official and readme agree on {agree / total:.1%}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=REPO / ".." / "shared" / "data")
    ap.add_argument("--spider-limit", type=int, default=200)
    ap.add_argument("--tablebench-limit", type=int, default=300)
    ap.add_argument(
        "--matchers-limit", type=int, default=400, help="references per benchmark for the matchers"
    )
    ap.add_argument(
        "--section", choices=("all", "spider", "tablebench", "matchers", "verdicts"), default="all"
    )
    args = ap.parse_args()
    if args.section in ("all", "spider"):
        run_spider(args.data, args.spider_limit)
    if args.section in ("all", "tablebench"):
        run_tablebench(args.data, args.tablebench_limit)
    if args.section in ("all", "matchers"):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _answer_rewrites import run_matchers

        run_matchers(args.data, args.matchers_limit)
    if args.section in ("all", "verdicts"):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _answer_rewrites import run_verdicts

        run_verdicts(args.data, args.matchers_limit)


if __name__ == "__main__":
    main()

"""DA-Code: 500 agent data-science coding tasks, scored by table, text, chart and ML-metric comparisons
(Huang et al., EMNLP 2024; github.com/yiyihum/da-code).

**Layout** (the repository's ``da_code/`` folder): ``configs/task/<split>.jsonl`` (``id``, ``type``,
``instruction``, ``hardness``, ``post_process``), ``configs/eval/eval_<split>.jsonl`` (``id``,
``config`` {``task``, ``type``, ``hardness``, ML ``metric``/``upper_bound``/``lower_bound``}, ``func``,
``result``, ``options``), the task files in ``source/<id>/`` and the gold outputs in ``gold/<id>/``.
``path`` is that folder or the repository root holding it. ``--option split=`` picks the config pair
(``all``, the default; ``di``, ``dm``, ``dw``, ``ml``, ``sa``, ``visual``).

**Tasks**: the question is the instruction, the final answer's format (below) goes with it; the files are
the folder ``source/<id>/`` (shown to the agent under its id: README, templates, scripts and data); ``answer`` holds the scorer (``func``), its ``options`` and ``config`` and
the gold read from ``gold/<id>/`` (CSV text, JSON objects, chart data), so scoring needs nothing but the
task; ``category`` is the official task kind (``data insight``, …, ``machine learning``), ``difficulty``
the hardness.

**Answers**: the official agent writes files in its working folder and names them when it terminates;
DataDojo scores the final answer text, so output files travel in it: every expected output file as a
fenced block whose info string names it (```` ```csv result.csv ````; one unnamed block or plain CSV text
is taken when a single file is expected); a SQLite output as one block per table (```` ```csv
<table>.csv ````); a text answer as the JSON object the instruction shows; a chart as a ```` ```json
chart ```` block holding ``data`` (the plotted values) and the chart's ``type``, ``figsize``,
``graph_title``, ``x_label``, ``y_label``, ``legend_title``, ``labels``, ``xtick_labels``,
``ytick_labels`` and ``color``, the summary DA-Code's harness extracts from the figure.

**Scoring** (``da_agent/evaluators``): ``compare_csv``/``compare_sqlite``/``compare_text``/``compare_image``
(:mod:`~datadojo.bench.dacode_compare`) and ``compare_ml``/``compare_competition_ml``
(:mod:`~datadojo.bench.dacode_ml`); several outputs average. Credit is in [0, 1] (partial for table
columns and ML metrics); ``correct`` is full credit. Totals: ``accuracy`` is the mean credit over all
tasks (``average_score``), then per task kind, per hardness, per big type (``EDA``, ``data wrangling``,
``machine learning``) and per result type, as ``evaluate.py`` groups them. Deviations:
``docs/evaluation.md#rule-dacode-official``.
"""

from __future__ import annotations

import io
import json
import re
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from datadojo.bench.base import Benchmark, BenchmarkDefaults, BenchmarkError, ItemScore, missing_prediction
from datadojo.bench.base import ScoringRule as _Rule
from datadojo.bench.dacode_compare import (
    MAX_ROWS,
    compare_chart,
    compare_table,
    compare_tables,
    compare_text,
    text_to_json,
)
from datadojo.bench.dacode_ml import ML_METRICS, TASK_TYPES, compare_competition_ml, compare_ml
from datadojo.bench.download import BenchSource, RemoteFile
from datadojo.types import DataFile, Task

__all__ = ["DACode", "answer_blocks", "gold_response"]

OFFICIAL = _Rule(
    "official",
    "DA-Code da_agent/evaluators: compare_csv / compare_sqlite / compare_text / compare_image (data and "
    "chart keys) / compare_ml / compare_competition_ml; mean credit over all tasks",
    "rule-dacode-official",
)

SPLITS = ("all", "di", "dm", "dw", "ml", "sa", "visual")
FUNCS = (
    "compare_csv",
    "compare_sqlite",
    "compare_text",
    "compare_image",
    "compare_ml",
    "compare_competition_ml",
)
_EDA = {"data insight", "data manipulation", "data visualization", "statistical analysis"}
_PLOT_TYPES = {"line", "pie", "bar", "scatter"}
_BLOCK = re.compile(r"```([^\n`]*)\n(.*?)```", re.DOTALL)
_GITHUB = "https://raw.githubusercontent.com/yiyihum/da-code/main/da_code"
_DRIVE = "https://drive.usercontent.google.com/download?id={}&export=download&confirm=t"


def answer_blocks(prediction: str) -> list[tuple[str, str]]:
    """``(info string, body)`` of every fenced code block in ``prediction``, in order."""
    return [(m.group(1).strip(), m.group(2)) for m in _BLOCK.finditer(prediction)]


def _block_for(blocks: list[tuple[str, str]], name: str, single: bool) -> str | None:
    """The block named ``name`` (its info string holds the file name, or its stem for tables), else the
    only block when one file is expected."""
    stem = Path(name).stem.lower()
    for info, body in blocks:
        words = [w.lower() for w in re.split(r"[\s:=]+", info) if w]
        if name.lower() in words or (stem and stem in words and stem not in ("csv", "json")):
            return body
    if single:
        unnamed = [body for info, body in blocks if info.lower() in ("", "csv", "text", "tsv")]
        if len(unnamed) == 1:
            return unnamed[0]
        if len(blocks) == 1:
            return blocks[0][1]
    return None


def _read_csv(text: str) -> pd.DataFrame:
    """CSV text as the official scorers read files (``pd.read_csv``, at most 10 000 rows)."""
    return pd.read_csv(io.StringIO(text), low_memory=False, nrows=MAX_ROWS)


class DACode(Benchmark):
    name = "dacode"
    description = "DA-Code: data-science coding tasks (wrangling, EDA, ML, charts) with file outputs"
    metric = "average score"
    layout = (
        "DA-Code's da_code/ folder (or the repository root holding it) with configs/task/<split>.jsonl, "
        "configs/eval/eval_<split>.jsonl, source/<id>/ and gold/<id>/"
    )
    rules = (OFFICIAL,)
    defaults = BenchmarkDefaults(
        max_turns=20,
        language="python",
        answer_format="Put the outputs the task asks for in the final answer, as the task's note says.",
        temperature=0.0,
        top_p=0.9,
    )
    source = BenchSource(
        name="dacode",
        base_url=_GITHUB,
        files=(
            RemoteFile("configs/task/all.jsonl", url=f"{_GITHUB}/configs/task/all.jsonl"),
            RemoteFile("configs/eval/eval_all.jsonl", url=f"{_GITHUB}/configs/eval/eval_all.jsonl"),
            RemoteFile("source.zip", url=_DRIVE.format("1ZGi0iNv797OneK_b2l2thJCulP6NUf7v"), unpack=True),
            RemoteFile("gold.zip", url=_DRIVE.format("1WxcrijbCgdHzFSSSt2HVlkJqQrBWQ2IL"), unpack=True),
        ),
        homepage="https://github.com/yiyihum/da-code",
        licence="MIT",
        note="task and eval configs (GitHub), source and gold archives (Google Drive, as the README links)",
    )

    # -- loading --

    def _root(self, path: Path) -> Path:
        for root in (path, path / "da_code"):
            if (root / "configs").is_dir():
                return root
        raise self.layout_error(f"no configs/ folder in {path} (nor in {path / 'da_code'})")

    def _records(self, path: Path) -> list[tuple[int, dict[str, Any]]]:
        return list(self.records(self._text_file(self._require(path, path.name))))

    def load(self, path: str | Path, *, require_files: bool = True, **options: Any) -> Iterator[Task]:
        """DA-Code tasks (module docstring); ``split`` picks the config pair (default ``all``)."""
        split = str(options.pop("split", "all"))
        self._no_options(options)
        if split not in SPLITS:
            raise self.layout_error(f"unknown split {split!r}; splits: {', '.join(SPLITS)}")
        root = self._root(Path(path))
        task_file = root / "configs" / "task" / f"{split}.jsonl"
        eval_file = root / "configs" / "eval" / f"eval_{split}.jsonl"
        evals: dict[str, tuple[int, dict[str, Any]]] = {}
        for lineno, rec in self._records(eval_file):
            evals[str(rec.get("id"))] = (lineno, rec)
        seen: set[str] = set()
        for lineno, rec in self._records(task_file):
            where = f"{task_file}:{lineno}"
            try:
                tid, instruction = str(rec["id"]), str(rec["instruction"])
            except KeyError as exc:
                raise BenchmarkError(f"{where}: missing field {exc}") from exc
            if tid in seen:
                raise BenchmarkError(f"{where}: duplicate task id {tid!r}")
            seen.add(tid)
            if tid not in evals:
                raise BenchmarkError(f"{where}: task {tid!r} has no record in {eval_file}")
            eval_line, ev = evals[tid]
            yield self._task(root, tid, instruction, rec, ev, f"{eval_file}:{eval_line}", require_files)

    def _task(
        self, root: Path, tid: str, instruction: str, rec: dict[str, Any], ev: dict[str, Any], where: str,
        require_files: bool,
    ) -> Task:  # fmt: skip
        func = ev.get("func")
        func = func[0] if isinstance(func, list) and len(func) == 1 else func
        if func not in FUNCS:
            raise BenchmarkError(
                f"{where} (id {tid!r}): field 'func': {func!r} is not one of {', '.join(FUNCS)}"
            )
        config = dict(ev.get("config") or {})
        opts = ev.get("options") or [{}]
        options = dict((opts[0] if isinstance(opts, list) else opts) or {})
        results = ev.get("result")
        results = results if isinstance(results, list) else [results]
        gold_dir = root / "gold" / tid
        gold, outputs = self._gold(func, results, gold_dir, config, options, where, tid)
        source = root / "source" / tid
        if require_files and not source.is_dir():
            raise BenchmarkError(f"{where} (id {tid!r}): task folder {source} not found")
        # the whole folder (README.md, scripts, templates and data the official agent finds in its
        # working folder): many of its files have no data kind of their own
        files = [DataFile(path=str(source), kind="dir")] if source.is_dir() else []
        kind = str(config.get("task", ""))
        return Task(
            id=tid,
            question=instruction,
            files=files,
            answer={"func": func, "options": options, "config": config, "outputs": outputs, "gold": gold},
            answer_kind="dacode",
            source=self.name,
            category="machine learning" if "machine learning" in kind else kind or None,
            difficulty=config.get("hardness") or rec.get("hardness"),
            extra={"answer_format": _answer_note(func, outputs), "type": rec.get("type")},
        )

    def _gold(
        self,
        func: str,
        results: list[Any],
        gold_dir: Path,
        config: dict[str, Any],
        options: dict[str, Any],
        where: str,
        tid: str,
    ) -> tuple[Any, list[str]]:
        """The gold the scorer needs, read from the eval record and ``gold/<id>/``, and the output names."""
        first = results[0] if results and isinstance(results[0], dict) else {}
        if "number" in first:
            golds = first["number"] if isinstance(first["number"], list) else [first["number"]]
            return [g for g in golds if isinstance(g, dict)], []
        names: list[str] = []
        for r in results:
            files = r.get("file", []) if isinstance(r, dict) else []
            names += [str(f) for f in (files if isinstance(files, list) else [files])]
        if not names:
            raise BenchmarkError(f"{where} (id {tid!r}): field 'result' names no file and no answer")

        def read(name: str) -> Path:
            p = gold_dir / Path(name).name
            if not p.exists():
                raise BenchmarkError(f"{where} (id {tid!r}): gold file {p} not found")
            return p

        if func == "compare_image":
            data = np.load(read("result.npy"), allow_pickle=False).tolist()
            info = json.loads(read("plot.json").read_text(encoding="utf-8"))
            image = next((n for n in names if n.endswith((".png", ".jpg"))), "")
            return {"data": data, "info": info}, [image] if image else []
        if func == "compare_text":
            golds = [json.loads(read(n).read_text(encoding="utf-8")) for n in names if n.endswith(".json")]
            return golds, []
        if func == "compare_sqlite":
            tabs = [str(t) for t in (options.get("condition_tabs") or [])]
            return {"tables": _sqlite_tables(read(names[0]), tabs, where, tid)}, [names[0]]
        if func == "compare_ml" and TASK_TYPES.get(str(config.get("type", "")).lower()) == "cluster":
            return {"csv": None}, names[:1]  # clusters have no gold file: the silhouette needs none
        if func in ("compare_ml", "compare_competition_ml"):
            metric = str(config.get("metric", "")).lower().strip().replace(" ", "_")
            if metric not in ML_METRICS:
                raise BenchmarkError(f"{where} (id {tid!r}): unsupported ML metric {metric!r}")
            return {"csv": read(names[0]).read_text(encoding="utf-8")}, names[:1]
        return [{"name": n, "csv": read(n).read_text(encoding="utf-8")} for n in names], names

    # -- scoring --

    def score(self, task: Task, prediction: str | None) -> ItemScore:
        spec = task.answer
        if not isinstance(spec, dict) or spec.get("func") not in FUNCS:
            raise ValueError(f"dacode task {task.id!r}: no scorer and gold to score against")
        func = spec["func"]
        if prediction is None:
            return missing_prediction(func)
        try:
            value, parts, parsed = self._score(spec, prediction)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeError, ValueError) as exc:
            value, parts, parsed = 0.0, {"error": str(exc)}, None
        value = float(value)
        ok = value == 1.0
        reason = f"{func}: {value:.4g}" + (f" ({parts['error']})" if "error" in parts else "")
        return ItemScore(value, ok, parsed, reason, func, {"func": func, **parts})

    def _score(self, spec: dict[str, Any], prediction: str) -> tuple[float, dict[str, Any], str | None]:
        func, options, config = spec["func"], spec.get("options") or {}, spec.get("config") or {}
        gold, outputs = spec["gold"], spec.get("outputs") or []
        blocks = answer_blocks(prediction)
        if func == "compare_text":
            answer = text_to_json(prediction)
            return compare_text(answer, gold, options), {}, json.dumps(answer) if answer is not None else None
        if func == "compare_image":
            body = next((b for info, b in blocks if "chart" in info.lower()), None)
            if body is None:
                body = next((b for info, b in blocks if info.lower().startswith("json")), None)
            chart = text_to_json(body if body is not None else prediction)
            if not isinstance(chart, dict):
                return 0.0, {"error": "no chart summary (a JSON object with data) in the answer"}, None
            value, parts = compare_chart(chart, gold, options.get("keys") or [])
            return value, {"chart": parts}, body
        if func == "compare_sqlite":
            tables = {}
            for name, _ in gold["tables"]:
                body = _block_for(blocks, f"{name}.csv", False) or _block_for(blocks, name, False)
                if body is not None:
                    tables[name] = _read_csv(body)
            gold_tables = [(n, _read_csv(t)) for n, t in gold["tables"]]
            return compare_tables(tables, gold_tables, options), {"tables": sorted(tables)}, None
        single = len(outputs) <= 1
        texts = {n: _block_for(blocks, n, single) for n in outputs}
        if single and outputs and texts[outputs[0]] is None and not blocks:
            texts[outputs[0]] = prediction  # a plain-CSV answer for the one expected file
        missing = [n for n, t in texts.items() if t is None]
        if func in ("compare_ml", "compare_competition_ml"):
            body = texts[outputs[0]]
            if body is None:
                return 0.0, {"error": f"no {outputs[0]} block in the answer"}, None
            gold_df = _read_csv(gold["csv"]) if gold.get("csv") is not None else None
            scorer = compare_ml if func == "compare_ml" else compare_competition_ml
            res = scorer(_read_csv(body), gold_df, config, options)
            return res["score"], {"ml_metric": res["metric"], "errors": res["errors"]}, None
        scores = []
        for g in gold:
            text = texts.get(g["name"])
            if text is None:
                scores.append(0.0)
                continue
            scores.append(
                compare_table(
                    _read_csv(text), _read_csv(g["csv"]), condition_cols=options.get("condition_cols") or [],
                    score_rule=options.get("score_rule", "divide"), ignore_order=bool(options.get("ignore_order")),
                    total_scores=options.get("total_scores", 1),
                )
            )  # fmt: skip
        parts: dict[str, Any] = {"files": dict(zip([g["name"] for g in gold], scores, strict=True))}
        if missing:
            parts["missing"] = missing
        return sum(scores) / len(scores) if scores else 0.0, parts, None

    def totals(self, items: Sequence[tuple[Task, ItemScore]]) -> dict[str, float]:
        """Mean credit over all tasks, then per task kind, hardness, big type and result type."""
        out = super().totals(items)
        groups: dict[str, dict[str, list[float]]] = {}
        for task, s in items:
            config = (task.answer or {}).get("config", {}) if isinstance(task.answer, dict) else {}
            kind = str(task.category)
            rtype = str(config.get("type", ""))
            keys = {
                "task": kind,
                "hardness": str(task.difficulty),
                "big_type": "EDA" if kind in _EDA else kind,
            }
            if rtype:  # pandas' groupby leaves a task without a type out of this grouping, as here
                keys["result_type"] = "plot" if rtype in _PLOT_TYPES else rtype
            for key, value in keys.items():
                groups.setdefault(key, {}).setdefault(value, []).append(s.score)
        for key, per in groups.items():
            for value in sorted(per):
                out[f"{key}:{value}"] = sum(per[value]) / len(per[value])
        return out


def _sqlite_tables(db: Path, tables: list[str], where: str, tid: str) -> list[tuple[str, str]]:
    """The gold database's tables (``tables``, else all in ``sqlite_master`` order) as CSV text, 10 000
    rows at most, as ``compare_sqlite`` exports them."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        names = tables or [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        out = []
        for name in names:
            df = pd.read_sql_query(f'SELECT * FROM "{name}" LIMIT {MAX_ROWS}', conn)
            out.append((name, df.to_csv(index=False)))
        return out
    except sqlite3.Error as exc:
        raise BenchmarkError(f"{where} (id {tid!r}): gold database {db}: {exc}") from exc
    finally:
        conn.close()


def _answer_note(func: str, outputs: list[str]) -> str:
    """What the final answer must carry for this task (the official agent writes files instead)."""
    if func == "compare_text":
        return "the JSON object the task shows, with its placeholders filled in."
    if func == "compare_image":
        return (
            'a ```json chart``` block: {"data": the plotted values (bar heights per group, one list per '
            'line, pie fractions, or scatter [x, y] points), "type": bar|line|pie|scatter, "figsize", '
            '"graph_title", "x_label", "y_label", "legend_title", "labels" (legend), '
            '"xtick_labels", "ytick_labels", "color" (hex)} read from your matplotlib figure.'
        )
    if func == "compare_sqlite":
        return f"every table of {outputs[0]} as a ```csv <table>.csv``` block (header row first)."
    names = ", ".join(outputs)
    return f"the content of {names} as a ```csv {outputs[0]}``` block (header row first)."


def gold_response(task: Task) -> str:
    """A final answer carrying the task's gold in DataDojo's answer format (for oracles and tests)."""
    spec = task.answer
    if not isinstance(spec, dict):
        raise ValueError(f"dacode task {task.id!r} has no gold")
    func, gold = spec["func"], spec["gold"]
    if func == "compare_text":
        return json.dumps(gold[0], ensure_ascii=False)
    if func == "compare_image":
        return "```json chart\n" + json.dumps({"data": gold["data"], **gold["info"]}) + "\n```"
    if func == "compare_sqlite":
        return "\n".join(f"```csv {name}.csv\n{text}```" for name, text in gold["tables"])
    if func in ("compare_ml", "compare_competition_ml"):
        if gold.get("csv") is None:
            raise ValueError(f"dacode task {task.id!r}: a clustering task has no gold file")
        return f"```csv {spec['outputs'][0]}\n{gold['csv']}```"
    return "\n".join(f"```csv {g['name']}\n{g['csv']}```" for g in gold)

"""KramaBench: end-to-end data-science pipelines over six data lakes (Lai et al., 2025; mitdbg/Kramabench).

**Layout** (the official repository): ``workload/<domain>.json`` (a JSON list of tasks: ``id``, ``query``,
``answer``, ``answer_type``, ``data_sources``, optional ``accepted_answers`` and ``subtasks``, each subtask
shaped like a task) and the lakes under ``data/<domain>/input/``, for the six domains ``archeology``,
``astronomy``, ``biomedical``, ``environment``, ``legal``, ``wildfire``. ``path`` is the repository folder
(every workload file present is read), or one ``workload/<domain>.json`` (its lake is then
``../data/<domain>/input``).

**Tasks**: ``id`` is the task id; the question is the ``query``; ``answer`` is ``{"answer": gold,
"accepted": [alternates]}``, ``answer_kind`` the ``answer_type``; ``category`` the domain, ``difficulty``
``easy``/``hard`` from the id. Files (``--option files=``): ``lake`` (default, as the official harness, which
hands the system the whole ``data/<domain>/input`` folder) gives the lake as one folder named ``input``;
``sources`` gives only the task's ``data_sources`` (the harness's ``--use_truth_subset``; folders and
globs expanded; a task whose sources include a file of a kind DataDojo cannot name, such as ``.html``,
gets the lake, and says so in ``extra["files_given"]``).
``--option subtasks=true`` adds every subtask as a task of its own (category ``<domain>/subtask``, its
question prefixed with the main question as the official executor words it), as ``--run_subtasks``
scores them; ``--option domain=legal,wildfire`` keeps some domains.

**Answer**: the final answer is the value itself (``8577.53``, ``["a", "b"]``, ``Lisbon``) or a JSON object
with an ``answer`` field, what the official harness reads (``system_response["answer"]``); JSON is parsed,
anything else is taken as a string.

**Scoring** (``benchmark/evaluator.py``, ``benchmark/metrics.py``, ``evaluate.py``): each answer type has a
headline metric (``answer_type_fixtures.json``; the ones ``aggregate_results`` sums into "Total score"):
``numeric_exact``/``string_exact`` → ``success``, ``numeric_approximate`` → ``rae_score`` (1 / (1 + relative
error)), ``list_exact`` → ``f1``, ``list_approximate`` → ``f1_approximate``, ``string_approximate`` →
``llm_paraphrase`` (an LLM judge). Each is scored against the answer and every accepted answer and the
best kept. The item's credit is that metric's value; ``correct`` is full credit. Totals: ``accuracy`` is the
mean credit over all tasks ("Total score" / 100), plus one figure per domain. The rules are written from
the official code's behaviour; see :func:`success`, :func:`rae_score`, :func:`f1`, :func:`f1_approximate`.

**What needs a judge**: ``llm_paraphrase`` (``string_approximate``), and inside ``f1_approximate`` the
matching of string list items (the official code asks GPT whether each pair is a paraphrase). DataDojo
asks its judge (``--judge SPEC``, the ``datamind`` rubric) once per ``string_approximate`` answer; with
``--option paraphrase=rule`` (no judge) such answers are compared case-insensitively, which can only give
less credit than the official judge. String items of ``list_approximate`` are always compared
case-insensitively (one judge call per item pair is not made): a lower bound of the official F1.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from datadojo.bench.base import BenchmarkDefaults, BenchmarkError, ItemScore, missing_prediction, unique_id
from datadojo.bench.base import ScoringRule as _Rule
from datadojo.bench.judged import JudgedBenchmark, JudgeFailure, verdict_key
from datadojo.types import DataFile, Task

__all__ = [
    "ANSWER_TYPES",
    "DOMAINS",
    "HEADLINE_METRIC",
    "KramaBench",
    "f1",
    "f1_approximate",
    "gold_response",
    "parse_answer",
    "rae_score",
    "success",
]

OFFICIAL = _Rule(
    "official",
    "KramaBench evaluator.py / metrics.py: success, rae_score, f1, f1_approximate, llm_paraphrase per "
    "answer type, best over accepted answers; Total score = mean over all tasks",
    "rule-kramabench-official",
)

DOMAINS: tuple[str, ...] = ("archeology", "astronomy", "biomedical", "environment", "legal", "wildfire")

#: answer_type → the metric ``aggregate_results`` counts in "Total score" (answer_type_fixtures.json)
HEADLINE_METRIC: dict[str, str] = {
    "numeric_exact": "success",
    "string_exact": "success",
    "numeric_approximate": "rae_score",
    "list_exact": "f1",
    "list_approximate": "f1_approximate",
    "string_approximate": "llm_paraphrase",
}
ANSWER_TYPES = tuple(HEADLINE_METRIC)
_FILE_MODES = ("lake", "sources")
_PARAPHRASE_MODES = ("judge", "rule")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*?)\n?```\s*$", re.DOTALL)


# --- the official metrics, rewritten from their behaviour ------------------------------------------------


def _str_to_float(text: str) -> float:
    """The official ``str_to_float``: ``"12%"`` is 0.12, anything else ``float(text)``."""
    if text.endswith("%"):
        return float(text.strip("%")) / 100
    return float(text)


def _to_number(value: Any) -> Any:
    """The official ``try_convert_to_number``: a trailing ``%`` is dropped (not divided), else unchanged."""
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        cleaned = value.strip()
        if cleaned.endswith("%"):
            cleaned = cleaned[:-1].strip()
        try:
            return _str_to_float(cleaned)
        except (ValueError, TypeError):
            return value
    return value


def success(predicted: Any, target: Any) -> float:
    """``success`` (numeric_exact, string_exact): 1.0 or 0.0.

    Numbers (strings that parse count as numbers) are equal when identical or, if either is a float,
    when the relative error is < 1e-6, the absolute difference < 1e-6, or the difference < 1e-4 of the
    larger magnitude (a target of 0 needs |predicted| < 1e-6); two unequal ints are wrong. Strings are
    compared stripped and case-insensitively; a number against a text target is wrong.
    """
    if predicted is None:
        return 0.0
    p, t = _to_number(predicted), _to_number(target)
    if isinstance(p, (int, float)) and isinstance(t, (int, float)):
        if p == t:
            return 1.0
        if isinstance(t, float) or isinstance(p, float):
            if t == 0:
                return float(abs(p) < 1e-6)
            diff = abs(p - t)
            return float(diff / abs(t) < 1e-6 or diff < 1e-6 or diff < max(abs(p), abs(t)) * 1e-4)
        return 0.0
    if isinstance(target, str) and isinstance(predicted, str):
        return float(predicted.strip().lower() == target.strip().lower())
    if isinstance(target, str) and isinstance(predicted, (int, float)):
        return 0.0
    try:
        return float(bool(predicted == target))
    except Exception:  # the official metric turns any failure into 0
        return 0.0


def rae_score(predicted: Any, target: Any) -> float:
    """``rae_score`` (numeric_approximate): 1 / (1 + |p - t| / |t|); 0.0 when either is not a number
    (``"12%"`` reads as 0.12) or the target is 0."""
    try:
        p = _str_to_float(predicted) if isinstance(predicted, str) else predicted
        t = _str_to_float(target) if isinstance(target, str) else target
        rae = abs(p - t) / abs(t)
        return float(1 / (1 + rae))
    except Exception:  # the official metric turns any failure into 0
        return 0.0


def _literal_list(text: str) -> Any:
    """``text`` as JSON, else as a Python literal, else split on commas (the official ``f1`` parse order)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        # the official code calls eval(); a literal parse gives the same value for every literal
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return [item.strip() for item in text.split(",") if item.strip()]


def _f1_of(predicted: Any, target: list[Any], match: Any) -> float:
    if len(target) == 0:
        return float(len(predicted) == 0)
    matched: set[int] = set()
    recalled = 0
    for t in target:
        for j, p in enumerate(predicted):
            if match(p, t):
                matched.add(j)
                recalled += 1
                break
    recall = recalled / len(target)
    precision = len(matched) / len(predicted) if predicted else 0.0
    if precision + recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def _numeric_item(p: Any) -> float | None:
    if isinstance(p, (int, float)):
        return p
    if isinstance(p, str):
        try:
            return _str_to_float(p)
        except (ValueError, TypeError):
            return None
    return None


def _exact_item(p: Any, t: Any) -> bool:
    if isinstance(t, str):
        return t.strip().lower() == str(p).strip().lower()
    if isinstance(t, (int, float)):
        pp = _numeric_item(p)
        return pp is not None and abs(pp - t) / max(abs(t), 1e-12) < 1e-6
    return bool(p == t)


def f1(predicted: Any, target: Any) -> float:
    """``f1`` (list_exact): F1 of the predicted items against the target items.

    Each target item is matched to the first predicted item equal to it (strings: stripped,
    case-insensitive, the predicted item as ``str``; numbers: relative error < 1e-6, ``"12%"`` as 0.12);
    recall counts matched target items, precision the distinct predicted items matched, so a repeated
    target item can match one predicted item twice and a repeated predicted item counts against precision.
    A text prediction is parsed as JSON, a Python literal, or comma-separated items; two strings are
    compared whole. Any failure is 0.0.
    """
    try:
        if isinstance(predicted, list) and isinstance(target, str):
            target = json.loads(target)
        if isinstance(predicted, str) and isinstance(target, list):
            predicted = _literal_list(predicted)
        if isinstance(predicted, str) and isinstance(target, str):
            return float(predicted.strip().lower() == target.strip().lower())
        return _f1_of(predicted, target, _exact_item)
    except Exception:  # the official metric turns any failure into 0
        return 0.0


def _approximate_item(p: Any, t: Any) -> bool:
    if isinstance(t, str):
        # the official code asks an LLM whether p paraphrases t; DataDojo compares them (a lower bound)
        return t.strip().lower() == str(p).strip().lower()
    pp = _numeric_item(p)
    return pp is not None and abs(pp - t) / max(abs(t), 1e-12) <= 0.01


def f1_approximate(predicted: Any, target: Any) -> float:
    """``f1_approximate`` (list_approximate): :func:`f1` with numbers matching within 1 % relative error
    (boundary included). String items: see the module docstring (the official code asks an LLM)."""
    try:
        if isinstance(target, str):
            target = json.loads(target)
        if isinstance(predicted, str):
            try:
                predicted = json.loads(predicted)
            except json.JSONDecodeError:
                predicted = ast.literal_eval(predicted)
        predicted = list(predicted)
        return _f1_of(predicted, list(target), _approximate_item)
    except Exception:  # the official metric turns any failure into 0
        return 0.0


_METRICS = {"success": success, "rae_score": rae_score, "f1": f1, "f1_approximate": f1_approximate}


def parse_answer(prediction: str) -> Any:
    """The answer a final answer carries: JSON (a code fence removed), its ``answer`` field if it is an
    object holding one, else the stripped text."""
    text = prediction.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text
    if isinstance(value, dict) and "answer" in value:
        return value["answer"]
    return value


# --- the benchmark --------------------------------------------------------------------------------------


class KramaBench(JudgedBenchmark):
    name = "kramabench"
    description = "KramaBench: end-to-end data-science pipelines over six real data lakes"
    metric = "total score"
    layout = (
        "the KramaBench repository folder holding workload/<domain>.json and data/<domain>/input/ "
        f"(domains: {', '.join(DOMAINS)}), or one workload/<domain>.json"
    )
    rules = (OFFICIAL,)
    defaults = BenchmarkDefaults(
        max_turns=20,
        language="python",
        answer_format=(
            "Give only the final answer: a number, a string, or a JSON list, as the question asks "
            '(or a JSON object {"answer": ...}).'
        ),
    )
    source = None
    no_source = (
        "the repository has no licence file, and two lakes (wildfire from Kaggle, astronomy TLEs from "
        "space-track.org) need the user's own accounts: clone github.com/mitdbg/Kramabench and pass --data"
    )

    def rubric_for(self, task: Task) -> str:
        return "datamind"

    def wants_verdict(self, task: Task) -> bool:
        return task.answer_kind == "string_approximate" and task.extra.get("paraphrase", "judge") == "judge"

    def judge_reference(self, task: Task) -> str:
        """The gold answer, and the accepted alternates when the task lists any (each is equally valid)."""
        gold = task.answer if isinstance(task.answer, dict) else {"answer": task.answer}
        refs = [gold.get("answer"), *gold.get("accepted", [])]
        texts = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in refs]
        return texts[0] if len(texts) == 1 else " | or equally: ".join(texts)

    # -- loading --

    def _workloads(self, path: Path, domains: list[str] | None) -> list[tuple[str, Path, Path]]:
        """``(domain, workload file, lake folder)`` for each workload to read."""
        if path.is_file():
            domain = path.stem
            return [(domain, self._text_file(path), path.parent.parent / "data" / domain / "input")]
        folder = path / "workload"
        if not folder.is_dir():
            raise self.layout_error(f"no workload/ folder in {path}")
        wanted = domains or list(DOMAINS)
        unknown = sorted(set(wanted) - set(DOMAINS))
        if unknown:
            raise self.layout_error(f"unknown domain(s) {', '.join(unknown)}; domains: {', '.join(DOMAINS)}")
        found = [(d, folder / f"{d}.json", path / "data" / d / "input") for d in wanted]
        present = [w for w in found if w[1].is_file()]
        if domains and len(present) < len(found):
            missing = ", ".join(str(w[1]) for w in found if not w[1].is_file())
            raise self.layout_error(f"workload file(s) not found: {missing}")
        if not present:
            raise self.layout_error(f"none of workload/{{{','.join(DOMAINS)}}}.json found in {path}")
        return [(d, self._text_file(w), lake) for d, w, lake in present]

    def load(self, path: str | Path, *, require_files: bool = True, **options: Any) -> Iterator[Task]:
        """KramaBench tasks (module docstring); options ``domain``, ``files``, ``subtasks``, ``paraphrase``."""
        domain_opt = options.pop("domain", None)
        files_mode = str(options.pop("files", "lake"))
        subtasks = _flag(options.pop("subtasks", False), "subtasks", self)
        paraphrase = str(options.pop("paraphrase", "judge"))
        self._no_options(options)
        if files_mode not in _FILE_MODES:
            raise self.layout_error(
                f"option files must be one of {', '.join(_FILE_MODES)}, got {files_mode!r}"
            )
        if paraphrase not in _PARAPHRASE_MODES:
            raise self.layout_error(
                f"option paraphrase must be one of {', '.join(_PARAPHRASE_MODES)}, got {paraphrase!r}"
            )
        domains = [d.strip() for d in str(domain_opt).split(",") if d.strip()] if domain_opt else None
        seen: dict[str, int] = {}
        for domain, workload, lake in self._workloads(Path(path), domains):
            if require_files and not lake.is_dir():
                raise self.layout_error(f"{workload}: the lake {lake} is not a folder")
            try:
                records = json.loads(workload.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise self.layout_error(f"{workload}: not valid JSON (line {exc.lineno}: {exc.msg})") from exc
            if not isinstance(records, list):
                raise self.layout_error(f"{workload}: expected a JSON list of tasks")
            for i, rec in enumerate(records):
                where = f"{workload} task {i}"
                task = self._task(rec, where, domain, lake, files_mode, paraphrase, require_files, None)
                # the release repeats a few ids (astronomy-easy-4-3 names two subtasks): the repeat gets ~2
                task = task.model_copy(update={"id": unique_id(seen, task.id, where)})
                yield task
                if not subtasks:
                    continue
                for j, sub in enumerate(rec.get("subtasks") or []):
                    sub_task = self._task(
                        sub,
                        f"{where} subtask {j}",
                        domain,
                        lake,
                        files_mode,
                        paraphrase,
                        require_files,
                        task.id,
                        task.question,
                    )
                    yield sub_task.model_copy(
                        update={"id": unique_id(seen, sub_task.id, f"{where} subtask {j}")}
                    )

    def _task(
        self,
        rec: Any,
        where: str,
        domain: str,
        lake: Path,
        files_mode: str,
        paraphrase: str,
        require_files: bool,
        parent: str | None,
        parent_query: str | None = None,
    ) -> Task:
        if not isinstance(rec, dict):
            raise BenchmarkError(f"{where}: expected a JSON object")
        try:
            tid, query, answer_type = str(rec["id"]), str(rec["query"]), str(rec["answer_type"])
            gold = rec["answer"]
        except KeyError as exc:
            raise BenchmarkError(f"{where}: missing field {exc}") from exc
        if answer_type not in HEADLINE_METRIC:
            raise BenchmarkError(
                f"{where} (id {tid!r}): field 'answer_type': unknown {answer_type!r}; "
                f"known: {', '.join(ANSWER_TYPES)}"
            )
        accepted = rec.get("accepted_answers") or []
        if not isinstance(accepted, list):
            raise BenchmarkError(f"{where} (id {tid!r}): field 'accepted_answers' must be a list")
        sources = rec.get("data_sources") or []
        sources = [sources] if isinstance(sources, str) else [str(s) for s in sources]
        whole_lake = [DataFile(path=str(lake), kind="dir", name="input")]
        files = None
        if (
            files_mode == "sources"
            and lake.is_dir()
            and not any(s.strip() in ("", ".", "./") for s in sources)
        ):
            files = _source_files(lake, sources)
        files_given = "sources" if files is not None else "lake"
        difficulty = next((d for d in ("easy", "hard") if f"-{d}-" in f"{tid}-"), None)
        if parent_query is not None:  # the official Executor.run_task's wording for a subtask
            query = (
                f"Your end goal is to answer this overall question: {parent_query}, please answer the "
                f"following question:\n {query} \n\n"
            )
        return Task(
            id=tid,
            question=query,
            files=files if files is not None else whole_lake,
            answer={"answer": gold, "accepted": accepted},
            answer_kind=answer_type,
            source=self.name,
            category=domain if parent is None else f"{domain}/subtask",
            difficulty=difficulty,
            extra={
                "domain": domain,
                "data_sources": sources,
                "parent": parent,
                "paraphrase": paraphrase,
                "files_given": files_given,
            },
        )

    # -- scoring --

    def score(self, task: Task, prediction: str | None) -> ItemScore:
        gold = task.answer
        if not isinstance(gold, dict) or "answer" not in gold:
            raise ValueError(f"kramabench task {task.id!r}: no answer to score against")
        answer_type = str(task.answer_kind)
        metric = HEADLINE_METRIC.get(answer_type)
        if metric is None:
            raise ValueError(f"kramabench task {task.id!r}: unknown answer_type {answer_type!r}")
        if prediction is None:
            return missing_prediction(metric)
        if metric == "llm_paraphrase":
            return self._paraphrase(task, prediction)
        parsed = parse_answer(prediction)
        candidates = [gold["answer"], *gold.get("accepted", [])]
        value = max(_METRICS[metric](parsed, c) for c in candidates)
        ok = value == 1.0
        reason = f"{metric} = {value:.4g}" + ("" if ok else f" (gold {_short(gold['answer'])})")
        return ItemScore(value, ok, _short(parsed), reason, metric, {"metric": metric, "value": value})

    def _paraphrase(self, task: Task, prediction: str) -> ItemScore:
        metric = "llm_paraphrase"
        if not prediction.strip():
            return ItemScore(0.0, False, "", "empty answer", metric, {"metric": metric, "value": 0.0})
        if task.extra.get("paraphrase", "judge") == "rule":
            parsed = parse_answer(prediction)
            candidates = [task.answer["answer"], *task.answer.get("accepted", [])]
            ok = any(str(parsed).strip().lower() == str(c).strip().lower() for c in candidates)
            reason = "rule (no judge): " + ("equal" if ok else "not equal") + " ignoring case"
            return ItemScore(float(ok), ok, _short(parsed), reason, metric, {"metric": metric, "rule": True})
        verdict = self._verdicts.get(verdict_key(task.id, prediction))
        if verdict is None:
            raise BenchmarkError(
                f"kramabench: task {task.id!r} is string_approximate, scored by an LLM judge, and there is no "
                "verdict for this answer: run `datadojo eval kramabench ... --judge SPEC`, or compare "
                "such answers by rule with `--option paraphrase=rule`"
            )
        if isinstance(verdict, JudgeFailure):
            return ItemScore(
                0.0,
                False,
                prediction.strip(),
                f"judge failed: {verdict.message}",
                metric,
                {"judge_error": True},
            )
        return super().score(task, prediction)

    def totals(self, items: Sequence[tuple[Task, ItemScore]]) -> dict[str, float]:
        """Total score over all tasks (``accuracy``), full-credit share, per domain and per answer type."""
        out = super().totals(items)
        main = [(t, s) for t, s in items if not t.extra.get("parent")]
        if len(main) != len(items):
            out["accuracy (main tasks)"] = sum(s.score for _, s in main) / len(main) if main else 0.0
        for key, group in (("domain", lambda t: t.category), ("answer_type", lambda t: t.answer_kind)):
            per: dict[str, list[float]] = {}
            for t, s in items:
                per.setdefault(str(group(t)), []).append(s.score)
            for name in sorted(per):
                out[f"{key}:{name}"] = sum(per[name]) / len(per[name])
        return out


def _source_files(lake: Path, sources: list[str]) -> list[DataFile] | None:
    """The task's ``data_sources`` as data files (``--option files=sources``), or ``None`` when they
    cannot be given one by one and the whole lake stands in (the task records ``files_given``).

    The official harness passes ``data_sources`` to the system as they are (``subset_files``); the
    release writes them as files, folders (``"State MSA Identity Theft Data/"``), globs
    (``"STORM-AI/warmup/v2/Sat_Density/swarma-*2015*.csv"``) or bare names of files deeper in the lake.
    Each is resolved in that order (a bare name: every file of that name in the lake). The whole lake is
    given instead when a source matches nothing, a file has a kind DataDojo cannot name (``.html``, …) or
    two sources share a file name.
    """
    paths: list[Path] = []
    for raw in sources:
        pattern = raw.strip().rstrip("/")
        if any(c in pattern for c in "*?["):
            matched = sorted(lake.glob(pattern))
        elif (lake / pattern).exists():
            matched = [lake / pattern]
        else:
            matched = sorted(p for p in lake.rglob(pattern) if p.is_file()) if "/" not in pattern else []
        if not matched:
            return None
        paths += matched
    unique = list(dict.fromkeys(p.resolve() for p in paths))
    folders = [p for p in unique if p.is_dir()]
    unique = [p for p in unique if not any(f != p and f in p.parents for f in folders)]
    if len({p.name for p in unique}) < len(unique):
        return None
    files = []
    for p in unique:
        if p.is_dir():
            files.append(DataFile(path=str(p), kind="dir"))
            continue
        try:
            files.append(DataFile.from_path(p))
        except ValueError:
            return None
    return files


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _flag(value: Any, name: str, bench: KramaBench) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "1", "yes"):
        return True
    if str(value).lower() in ("false", "0", "no"):
        return False
    raise bench.layout_error(f"option {name} must be true or false, got {value!r}")


def gold_response(task: Task) -> str:
    """A final answer carrying the task's gold answer in the official shape (for oracles and tests)."""
    if not isinstance(task.answer, dict) or "answer" not in task.answer:
        raise ValueError(f"kramabench task {task.id!r} has no answer")
    return json.dumps({"answer": task.answer["answer"]}, ensure_ascii=False)

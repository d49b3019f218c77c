"""The data-blind audit: how much of a benchmark score needs the data (``datadojo eval ... --audit data-blind``).

Why: DSGym (Nie et al., 2026, §2) found that many items of data-analysis benchmarks are answered correctly
with the data files hidden — from the question's wording, from priors, from memorised public datasets —
so a raw accuracy overstates what an agent does *with the data*. The audit runs the same items a second
time with the data withheld and reports, per item and per category, what was still answered correctly.

**What the blind run withholds** (:func:`withhold_data`, :func:`withheld_sandboxes`):

* the files themselves: every episode's sandbox starts with an empty workspace (no file, no database);
* everything the system prompt says about their *contents*: the per-file profiles (columns, types,
  sample rows, statistics; the agent's ``profile_chars`` is 0), a dataset folder's tree, the per-file
  descriptions and the task's ``description`` ("About the data"). DataDojo cannot tell an authored
  description from one derived from the files — DataMind synthesis stores the file's profile, sample
  rows included, as the task description — and a prompt that shows rows lets the model read the data.

**What it keeps**: the question, the instructions (template, tools, answer format, turn budget, the
workflow and feedback sections) and the data files' *names and kinds* in the file list, so the prompt is
the raw run's apart from what was read from the files. The agent is not told that the data is withheld; it
finds the workspace empty when it looks. Predictions are scored against the original tasks with the
benchmark's own rule (a blind SQL query still runs on the real database), so a blind verdict means the same
as a raw one.

**Figures** (:func:`compare_runs`). Per task *i*, with *r_i* the share of its raw trials that are correct and
*b_i* the share of its blind trials (trials the model server failed are left out, as in pass@1):

* ``raw`` = mean *r_i* (the raw run's pass@1); ``blind`` = mean *b_i* (the blind run's pass@1);
* ``data_dependent`` = mean *r_i* (1 − *b_i*): the share of items answered correctly with the data **and
  not** without it — with one trial each exactly that count over the task count; with several, the chance
  that a raw trial is right and a blind trial of the same item is wrong. It splits the raw score:
  ``raw`` = ``data_dependent`` + ``both`` (mean *r_i b_i*, right either way), and ``blind`` = ``both`` +
  ``blind_only`` (mean (1 − *r_i*) *b_i*); with ``neither`` the four add up to 1;
* ``relative_drop`` = (``raw`` − ``blind``) / ``raw``, DSGym's figure (None when ``raw`` is 0; negative
  when the blind run does better);
* ``answered_blind``: the items with at least one correct blind trial (each item's ``verdict``: ``needs
  data``, ``answered blind``, ``blind only`` — right blind, never with the data — or ``unsolved``).

The blind run is an ordinary run folder, ``OUT/blind/`` (its own ``trajectories.jsonl``, ``scores.jsonl``,
``summary.json``, ``run.json`` with ``data_blind: true``, reports), so it resumes and extends with ``--limit``
and ``-n`` like the raw run, which it leaves untouched. The comparison is written into the raw run's
``summary.json`` under ``audit``, which the reports and the ``datadojo eval`` tables show.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Literal

from datadojo.fs import write_json_atomic
from datadojo.jsonl import iter_jsonl
from datadojo.types import DataFile, Task

__all__ = [
    "AUDIT_MODES",
    "BLIND_DIR",
    "VERDICTS",
    "AuditMode",
    "compare_runs",
    "run_data_blind_audit",
    "withheld_sandboxes",
    "withhold_data",
]

AuditMode = Literal["data-blind"]
AUDIT_MODES: tuple[str, ...] = ("data-blind",)
#: The blind run's folder inside the raw run's.
BLIND_DIR = "blind"
#: An item's verdict: right with the data only, right either way, right blind only, right neither way.
VERDICTS: tuple[str, ...] = ("needs data", "answered blind", "blind only", "unsolved")
WITHHELD = (
    "data files (empty workspace); file profiles, folder trees and file/task descriptions in the system "
    "prompt. Kept: question, instructions, answer format, file names and kinds."
)


# --- the blind episode ----------------------------------------------------------------------------------


def withhold_data(task: Task) -> Task:
    """``task`` as a blind episode sees it: its files by name and kind only, no description.

    The file entries stay so that the prompt lists the same names and offers the same tools (SQL for a
    database) as the raw run; their paths are kept for the record but nothing reads them: the prompt's
    profiles are off (``profile_chars`` 0) and :func:`withheld_sandboxes` mounts nothing.
    """
    files = [DataFile(path=f.path, kind=f.kind, name=f.visible_name) for f in task.files]
    return task.model_copy(update={"files": files, "description": None})


def withheld_sandboxes(
    factory: Callable[[Task], AbstractAsyncContextManager[Any]],
) -> Callable[[Task], AbstractAsyncContextManager[Any]]:
    """A sandbox factory that hands ``factory`` each task with no files: every workspace starts empty."""

    def make(task: Task) -> AbstractAsyncContextManager[Any]:
        return factory(task.model_copy(update={"files": []}))

    return make


# --- the comparison -------------------------------------------------------------------------------------


def _per_task(rows: Iterable[Mapping[str, Any]]) -> tuple[dict[str, list[bool]], dict[str, str | None]]:
    """Each task's counted trial verdicts (server failures left out) and its category."""
    trials: dict[str, list[bool]] = {}
    cats: dict[str, str | None] = {}
    for row in rows:
        tid = str(row.get("id"))
        cats.setdefault(tid, row.get("category"))
        trials.setdefault(tid, [])
        if row.get("excluded"):
            continue
        trials[tid].append(bool(row.get("correct")))
    return trials, cats


def _verdict(raw_right: int, blind_right: int) -> str:
    if raw_right and not blind_right:
        return "needs data"
    if raw_right:
        return "answered blind"
    return "blind only" if blind_right else "unsolved"


def _figures(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    n = len(items)
    r = [it["raw_correct"] / it["raw_trials"] for it in items]
    b = [it["blind_correct"] / it["blind_trials"] for it in items]
    raw = sum(r) / n
    blind = sum(b) / n
    answered = sum(1 for it in items if it["blind_correct"])
    return {
        "n_tasks": n,
        "raw": raw,
        "blind": blind,
        "data_dependent": sum(ri * (1 - bi) for ri, bi in zip(r, b, strict=True)) / n,
        "both": sum(ri * bi for ri, bi in zip(r, b, strict=True)) / n,
        "blind_only": sum((1 - ri) * bi for ri, bi in zip(r, b, strict=True)) / n,
        "neither": sum((1 - ri) * (1 - bi) for ri, bi in zip(r, b, strict=True)) / n,
        "relative_drop": (raw - blind) / raw if raw > 0 else None,
        "answered_blind": answered,
        "answered_blind_share": answered / n,
    }


def compare_runs(
    raw_rows: Iterable[Mapping[str, Any]],
    blind_rows: Iterable[Mapping[str, Any]],
    *,
    official: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The audit of a raw run's and a blind run's ``scores.jsonl`` rows (module docstring's figures).

    Tasks are the raw run's; a task without a counted trial on either side (every trial failed on the
    model server, or the blind run has no row for it) is listed under ``not_compared`` and left out.
    ``official`` is the two runs' official totals, shown side by side.
    """
    raw, cats = _per_task(raw_rows)
    blind, _ = _per_task(blind_rows)
    items: list[dict[str, Any]] = []
    not_compared: list[str] = []
    for tid, verdicts in raw.items():
        seen = blind.get(tid) or []
        if not verdicts or not seen:
            not_compared.append(tid)
            continue
        items.append({
            "id": tid, "category": cats.get(tid),
            "raw_correct": sum(verdicts), "raw_trials": len(verdicts),
            "blind_correct": sum(seen), "blind_trials": len(seen),
            "verdict": _verdict(sum(verdicts), sum(seen)),
        })  # fmt: skip
    if not items:
        raise ValueError("data-blind audit: no task has a scored trial in both the raw and the blind run")
    by_cat: dict[str, list[dict[str, Any]]] = {}
    for it in items:
        if it["category"] is not None:
            by_cat.setdefault(str(it["category"]), []).append(it)
    out: dict[str, Any] = {
        "mode": "data-blind",
        "withheld": WITHHELD,
        "overall": _figures(items),
        "per_category": {c: _figures(v) for c, v in sorted(by_cat.items())},
        "items": items,
        "not_compared": not_compared,
    }
    if official is not None:
        raw_off, blind_off = official
        out["official"] = {
            k: {"raw": v, "blind": blind_off.get(k)}
            for k, v in raw_off.items()
            if not k.startswith("concept:")
        }
    return out


def _rows(path: Path) -> list[dict[str, Any]]:
    return [r for _, r in iter_jsonl(path) if isinstance(r, dict)]


# --- the run --------------------------------------------------------------------------------------------


async def run_data_blind_audit(cfg: Any, raw: Any, *, run: Callable[..., Any], **run_kwargs: Any) -> Any:
    """Run ``cfg``'s items again with the data withheld, in ``OUT/blind``, and add the audit to ``raw``.

    ``cfg`` is the raw run's :class:`~datadojo.eval.harness.EvalConfig`, ``raw`` its
    :class:`~datadojo.eval.harness.EvalResult` and ``run`` :func:`~datadojo.eval.harness.run_eval` (passed
    in: the harness calls this module, not the other way round). ``run_kwargs`` (backend, sandboxes, hooks,
    judge) go to the blind run unchanged, so both runs use the same model and sandbox settings. The raw
    run's ``summary.json`` is rewritten with ``audit`` added; nothing else of it changes. Returns ``raw``
    with the audit in its summary and ``blind`` among its paths.
    """
    out = Path(cfg.out)
    blind_cfg = cfg.model_copy(update={"audit": None, "data_blind": True, "out": out / BLIND_DIR})
    blind = await run(blind_cfg, **run_kwargs)
    audit = compare_runs(
        _rows(raw.paths["scores"]),
        _rows(blind.paths["scores"]),
        official=(raw.summary.get("official") or {}, blind.summary.get("official") or {}),
    )
    audit["blind_dir"] = BLIND_DIR
    raw.summary["audit"] = audit
    write_json_atomic(raw.paths["summary"], raw.summary, default=str)
    raw.paths["blind"] = out / BLIND_DIR
    return raw

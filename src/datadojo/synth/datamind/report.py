"""The parts of ``report.html`` read from the run's files rather than the funnel: who and how, and what came out.

A reader of the page must be able to answer, without opening a JSONL file: which teacher and judge made this
run and with which settings; what the synthesized questions look like and why others were rejected; what the
N attempts of a query did, what the verdict was and who chose the kept one; and where the SFT sets and RL
tasks are. Everything is bounded (:data:`SAMPLE_QUERIES`, :data:`SAMPLE_REJECTIONS`, :data:`VIEWER_QUERIES`
queries in the trajectory viewer, observations cut to :data:`OBS_CHARS`) so the page stays small for a
run of 100,000 trajectories. Plain HTML (``<details>``), no script.
"""

from __future__ import annotations

import html
import json
from itertools import islice
from pathlib import Path
from typing import Any

from datadojo.jsonl import iter_jsonl
from datadojo.runs.html import html_table, natural_key
from datadojo.synth.datamind.consistency import read_verdicts, trajectories_by_round
from datadojo.synth.datamind.queries import load_queries
from datadojo.synth.datamind.store import Paths
from datadojo.types import Trajectory

__all__ = [
    "OBS_CHARS",
    "SAMPLE_QUERIES",
    "SAMPLE_REJECTIONS",
    "VIEWER_QUERIES",
    "models_file",
    "read_models",
    "report_sections",
]

SAMPLE_QUERIES = 20
SAMPLE_REJECTIONS = 20
VIEWER_QUERIES = 30
OBS_CHARS = 600


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" … [{len(text) - limit} more characters]"


def _settings(paths: Paths) -> list[tuple[str, str]]:
    path = paths.out / "config.json"
    if not path.exists():
        return []
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [("config.json", "unreadable")]
    return [(k, json.dumps(v) if not isinstance(v, str) else v) for k, v in cfg.items()]


def _attempt(t: Trajectory, best: bool) -> str:
    steps = []
    for i, turn in enumerate(t.turns, 1):
        part = [f"<b>turn {i}</b>"]
        if turn.thought:
            part.append(f"<div>{_e(_cut(turn.thought, OBS_CHARS))}</div>")
        if turn.action.kind in ("code", "sql") and turn.action.text:
            part.append(f"<pre>{_e(_cut(turn.action.text, OBS_CHARS * 2))}</pre>")
        if turn.observation is not None:
            part.append(f'<pre class="muted">{_e(_cut(turn.observation.text, OBS_CHARS))}</pre>')
        steps.append("".join(part))
    answer = t.final_answer if t.final_answer is not None else f"(no final answer: {t.stop_reason})"
    mark = " — kept as best" if best else ""
    return (
        f"<details><summary>sample {t.sample} (round {t.extra.get('round', 0)}), {len(t.turns)} turns: "
        f"{_e(_cut(answer, 200))}{mark}</summary>{''.join(steps)}</details>"
    )


def _viewer(paths: Paths) -> str:
    queries = {q.id: q for q in load_queries(paths)}
    groups = trajectories_by_round(paths)
    verdicts = read_verdicts(paths)
    blocks = []
    in_order = sorted(groups.items(), key=lambda kv: (natural_key(kv[0][0]), kv[0][1]))  # q2 before q10
    for (task_id, round_), trajs in islice(in_order, VIEWER_QUERIES):
        q = queries.get(task_id)
        v = verdicts.get((task_id, round_))
        if v is None:
            state = "not judged yet"
        elif v.consistent:
            state = f"consistent ({v.method}); best: sample {v.best}, chosen by {v.chosen_by or v.method}"
        else:
            state = f"inconsistent ({v.method})"
        critique = (
            f'<p class="muted">{_e(_cut(v.critique, OBS_CHARS))}</p>' if v is not None and v.critique else ""
        )
        attempts = "".join(_attempt(t, v is not None and v.consistent and t.sample == v.best) for t in trajs)
        question = q.question if q is not None else task_id
        blocks.append(
            f"<details><summary>{_e(task_id)} round {round_} [{_e(q.category if q else '')}]: "
            f"{_e(_cut(question, 160))} — {_e(state)}</summary>{critique}{attempts}</details>"
        )
    more = max(0, len(groups) - VIEWER_QUERIES)
    note = f'<p class="muted">{more} more groups in trajectories.jsonl</p>' if more else ""
    return "\n".join(blocks) + note if blocks else '<p class="muted">no trajectories yet</p>'


def _links(paths: Paths) -> str:
    files = sorted(paths.sft.glob("*.jsonl")) if paths.sft.is_dir() else []
    if paths.rl_tasks.exists():
        files.append(paths.rl_tasks)
    if not files:
        return '<p class="muted">not curated yet (run the curate stage)</p>'
    items = []
    for f in files:
        rel = f.relative_to(paths.out).as_posix()
        n = sum(1 for _ in iter_jsonl(f))
        items.append(f'<li><a href="{_e(rel)}">{_e(rel)}</a> — {n} records</li>')
    return "<ul>" + "".join(items) + "</ul>"


def report_sections(paths: Paths, models: dict[str, str]) -> list[str]:
    """HTML blocks: models and settings, sample queries, sample rejections, trajectory viewer, output links."""
    queries = load_queries(paths)
    sample_q = [(q.id, q.category, q.difficulty, q.question) for q in queries[:SAMPLE_QUERIES]]
    rejections = []
    if paths.rejected.exists():
        for _, r in islice(iter_jsonl(paths.rejected), SAMPLE_REJECTIONS):
            rejections.append(
                (r.get("stage"), r.get("reason"), _cut(str(r.get("detail", "")), 200), r.get("key"))
            )
    model_rows = sorted(models.items()) or [("(none recorded)", "")]
    return [
        "<h2>Models and settings</h2>",
        html_table(["role", "model"], model_rows),
        "<details><summary>all settings (config.json of the latest stage run)</summary>"
        + html_table(["setting", "value"], _settings(paths))
        + "</details>",
        "<h2>Output</h2>",
        _links(paths),
        f"<h2>Sample queries (first {SAMPLE_QUERIES})</h2>",
        html_table(["id", "category", "difficulty", "question"], sample_q),
        f"<h2>Sample rejections (first {SAMPLE_REJECTIONS})</h2>",
        html_table(["stage", "reason", "detail", "key"], rejections),
        f"<h2>Trajectories (first {VIEWER_QUERIES} query groups)</h2>",
        _viewer(paths),
    ]


def models_file(paths: Paths) -> Path:
    """``models.json``: the model id of each role (teacher, judge) the stages ran with."""
    return paths.out / "models.json"


def read_models(paths: Paths) -> dict[str, str]:
    """The roles recorded in ``models.json`` (empty when none ran yet or the file is unreadable)."""
    path = models_file(paths)
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

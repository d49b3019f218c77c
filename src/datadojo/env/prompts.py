"""The opening messages of an episode: a system prompt stating the contract, then the question.

Templates are data (``env/prompts/<dialect>.md``) so users can override them (``AgentConfig.system_template``)
without touching code. The contract follows DataMind's ReAct formulation (§3.1: thought, then one action —
code or answer — per turn, execution feedback as the observation, at most T turns) and SciDataSailor's
execution protocol (§5.1, App. B.1: Python as the only tool, ``<python>``/``<result>`` tags, a single final
answer), in our own words.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from importlib import resources
from pathlib import Path
from typing import Any

from datadojo.protocol import Dialect, get_dialect
from datadojo.types import Task

__all__ = [
    "GUIDANCE_SECTIONS",
    "build_prompt",
    "describe_files",
    "episode_prompt",
    "load_template",
    "render_template",
]

log = logging.getLogger(__name__)

_TOOLS_PYTHON = (
    "Python 3 with pandas, numpy and the standard library. Files you write stay in the working directory. "
    "There is no internet access."
)
_TOOLS_SQL = (
    "SQL (SQLite, read-only) against the database: start the code block with a ```sql fence, or write a bare "
    "SELECT; the result comes back as a table."
)


def load_template(dialect: Dialect, path: str | Path | None = None) -> str:
    """The system-prompt template: ``path`` if given, else the dialect's bundled template."""
    if path is not None:
        try:
            return Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read the system prompt template {path}: {exc.strerror}") from exc
    name = f"{dialect.name}.md"
    files = resources.files("datadojo.env") / "prompts"
    if not (files / name).is_file():
        name = "datamind.md"
    return (files / name).read_text(encoding="utf-8")


def render_template(template: str, values: dict[str, Any]) -> str:
    """Replace ``{{name}}`` placeholders; unknown placeholders are an error (a typo must not reach a model)."""
    out = template
    for key, value in values.items():
        out = out.replace("{{" + key + "}}", str(value))
    if "{{" in out and "}}" in out[out.index("{{") :]:
        start = out.index("{{")
        end = out.index("}}", start)
        raise ValueError(f"system prompt template has an unknown placeholder {out[start : end + 2]!r}")
    return out


def describe_files(task: Task, budget_chars: int) -> str:
    """A bullet list of the task's files, each with a profile (columns, types, sample rows) within budget.

    The profile is the metadata text *d* of DataMind §3.1 ("Metadata extraction"), produced by
    :func:`datadojo.corpus.profile_text`. A file that cannot be profiled is still listed, with the reason.
    A dataset folder (``kind = dir``) is described by its header and tree only (names, sizes, kinds),
    :func:`folder_outline`: its per-file profiles carry statistics (ranges, means, top values) that the
    questions about a scientific folder ask for, and the prompt must not give the answer away (``eval
    scidata``; SciDataSailor's agent explores the folder itself). That holds for a folder that is one
    dataset stored as many files (a Parquet dataset, a Zarr store) too, whose profile would otherwise be a
    single file's, with column ranges.
    """
    if not task.files:
        return "(no data files)"
    lines: list[str] = []
    per_file = budget_chars // max(1, len(task.files))
    for f in task.files:
        header = f"- `{f.visible_name}` ({f.kind})" + (f": {f.description}" if f.description else "")
        lines.append(header)
        if per_file <= 0:
            continue
        profile = _cached_profile(f.path, per_file, outline=f.kind == "dir")
        if profile:
            lines.append("\n".join("  " + ln for ln in profile.splitlines()))
    return "\n".join(lines)


def folder_outline(path: str | os.PathLike[str], budget_chars: int) -> str:
    """A dataset folder's header and tree (names, sizes, kinds), without a single file's contents.

    What a prompt may say about a folder the agent is asked questions about: the layout, never the
    statistics (no file is opened, so no range, mean or top value can leak, whatever the folder holds).
    """
    from datadojo.corpus.folder import profile_folder
    from datadojo.corpus.render import render_folder_profile

    folder = profile_folder(path, max_profiled=0)
    folder.warnings = [w for w in folder.warnings if "not profiled" not in w]
    return render_folder_profile(folder, budget_chars)


#: One lock per profile being made: the agent loop builds prompts in worker threads, and episodes that
#: start together on the same file must not all read it (one does; the others wait for its cached text).
#: Dropped once the profile is cached.
_PROFILE_LOCKS: dict[tuple[str, int, int, int, bool], threading.Lock] = {}
_PROFILE_LOCKS_GUARD = threading.Lock()


def _cached_profile(path: str, budget_chars: int, *, outline: bool = False) -> str:
    """The file's profile text (a folder's outline when ``outline``), cached by (path, size, mtime):
    rollouts ask for the same file many times."""
    try:
        st = os.stat(path)
    except OSError as exc:
        log.debug("no profile for %s: %s", path, exc)
        return ""
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns, budget_chars, outline)
    with _PROFILE_LOCKS_GUARD:
        lock = _PROFILE_LOCKS.setdefault(key, threading.Lock())
    with lock:
        text = _profile(*key)
    with _PROFILE_LOCKS_GUARD:  # made and cached now: a later caller needs no lock (nor should it grow)
        _PROFILE_LOCKS.pop(key, None)
    return text


@functools.lru_cache(maxsize=512)
def _profile(path: str, size: int, mtime_ns: int, budget_chars: int, outline: bool) -> str:
    try:
        if outline:
            return folder_outline(path, budget_chars)
        from datadojo.corpus import profile_text

        return profile_text(path, budget_chars=budget_chars)
    except Exception as exc:  # a profile is a courtesy; the agent can still inspect the file itself
        log.debug("no profile for %s: %s", path, exc)
        return ""


#: Optional ``Task.extra`` keys appended to the system prompt as sections, in this order. ``workflow`` is
#: DataMind's procedural knowledge *k* (§3.2, "Knowledge-Augmented Trajectory Sampling"); ``feedback`` holds
#: the earlier attempts and the judge's critique *c* for a reflection round (§3.2, Eq. 3). Appended after the
#: template is rendered so that user templates need no new placeholder to receive them.
GUIDANCE_SECTIONS: tuple[tuple[str, str], ...] = (
    ("workflow", "## Suggested workflow"),
    ("feedback", "## Feedback on earlier attempts"),
)


def _guidance_sections(task: Task) -> str:
    parts = []
    for key, title in GUIDANCE_SECTIONS:
        text = task.extra.get(key) if task.extra else None
        if isinstance(text, str) and text.strip():
            parts.append(f"\n\n{title}\n{text.strip()}")
    return "".join(parts)


def build_prompt(
    task: Task, dialect: Dialect, *, max_turns: int, template: str, profile_chars: int
) -> list[dict]:
    """The system and user messages that open an episode of ``task``."""
    has_db = any(f.kind == "sqlite" for f in task.files)
    sql_ok = has_db and any("sql" in t.languages for t in dialect.code_tags)
    tools = _TOOLS_PYTHON + (" " + _TOOLS_SQL if sql_ok else "")
    code_note = "Python by default; SQL when fenced with ```sql." if sql_ok else "Python."
    answer_format = ""
    fmt = task.extra.get("answer_format") if task.extra else None
    if fmt:
        answer_format = f"\nFormat of the final answer: {fmt}"
    description = f"## About the data\n{task.description}" if task.description else ""
    system = render_template(
        template,
        {
            "files": describe_files(task, profile_chars),
            "description": description,
            "tools": tools,
            "code_note": code_note,
            "max_turns": max_turns,
            "answer_format": answer_format,
        },
    )
    system += _guidance_sections(task)
    system = "\n".join(line.rstrip() for line in system.strip().splitlines())
    while "\n\n\n" in system:
        system = system.replace("\n\n\n", "\n\n")
    return [{"role": "system", "content": system}, {"role": "user", "content": task.question}]


def episode_prompt(task: Task, config: Any) -> list[dict]:
    """The opening messages the agent loop sends for ``task`` under ``config`` (an :class:`AgentConfig`).

    The one builder behind :func:`datadojo.env.run_agent` (evaluation, RL rollouts, synthesis episodes)
    and the synthesis pipelines' SFT prompts, so a trained policy is prompted as it was trained.
    """
    dialect = get_dialect(config.dialect)
    template = load_template(dialect, config.system_template)
    return build_prompt(
        task, dialect, max_turns=config.max_turns, template=template, profile_chars=config.profile_chars
    )

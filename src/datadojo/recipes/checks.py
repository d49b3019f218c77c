"""Everything about a recipe that can be known before its first stage runs (docs/recipes.md, "Checked before
the first stage").

On GPUs a late failure costs hours: a misspelt section that leaves SFT on its defaults, a benchmark name that
fails after synthesis and training, a reply budget that cannot fit the student's context window. So the
whole file is checked at once, and every check *returns* its problems instead of raising the first: ``recipe
plan`` lists them all and still shows the plan, ``recipe run`` refuses to start with the same list.

* **structure** — each ``[stages.X]`` section is typed by a :class:`Section`: the library class whose keys it
  holds (``SFTConfig``, ``RLConfig``, ``DataMindConfig``…) plus the recipe's own keys; an unknown section or
  key, at any nesting level, names the file's section and the closest valid name;
* **values** — each section built as its stage builds it (presets merged), benchmark names against the
  registry, each benchmark's data in its layout (its first task loads);
* **feasibility** — the paths the run reads exist (or what to provide and how), each model's context window
  fits the prompt plus the reply budget of every stage that generates with it, training's ``max_length``
  against the data it will get when that data is already there;
* **servers** — each served model a stage that will run calls answers (the stage commands' one line, exit 3).
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from datadojo.errors import DataDojoError
from datadojo.recipes.config import RecipeConfig
from datadojo.recipes.problems import Problem, closest, unknown_keys, without_keys

__all__ = [
    "Generation",
    "Section",
    "benchmark_problems",
    "config_problems",
    "context_problems",
    "first_task",
    "path_problems",
    "prompt_floor",
    "section_key_problems",
    "section_value_problems",
    "server_problems",
    "student_window",
]


@dataclass(frozen=True)
class Section:
    """The type of one ``[stages.NAME]`` section: ``model`` the library class whose keys it holds, ``own`` the
    recipe's extra keys, ``filled`` the class's fields the recipe sets itself (``model``, ``output_dir``), and
    ``build`` the stage's own construction of its settings (presets merged; raises on a bad value)."""

    name: str
    model: type[BaseModel] | None = None
    own: tuple[str, ...] = ()
    filled: tuple[str, ...] = ()
    build: Callable[[RecipeConfig], Any] | None = None
    what: str = ""  # what the section holds, for the messages ("SFTConfig keys")


def section_key_problems(
    recipe: str, stages: Mapping[str, Any], sections: Sequence[Section]
) -> list[Problem]:
    """Unknown sections and unknown keys (at every level) of the ``[stages]`` table, each naming the
    closest valid name."""
    by_name = {s.name: s for s in sections}
    problems = []
    for name, body in stages.items():
        where = f"[stages.{name}]"
        section = by_name.get(name)
        if section is None:
            problems.append(
                Problem(
                    where,
                    f"no stage {name!r} in the {recipe} recipe{closest(name, by_name)} "
                    f"(its sections: {', '.join(by_name)})",
                )
            )
            continue
        if not isinstance(body, Mapping):
            problems.append(Problem(where, f"expected a table of settings, got {body!r}"))
            continue
        for key in body:
            if key in section.filled:
                problems.append(
                    Problem(f"{where} {key}", "set by the recipe itself (models.student, the run)")
                )
        for key, hint in _unknown_in_section(section, body):
            problems.append(Problem(f"{where} {key}", f"unknown key{hint} ({section.what or 'keys'})"))
    return problems


def _section_keys(section: Section) -> list[str]:
    fields = list(section.model.model_fields) if section.model is not None else []
    return [k for k in (*fields, *section.own) if k not in section.filled]


def _unknown_in_section(section: Section, body: Mapping[str, Any]) -> list[tuple[str, str]]:
    own = {k: v for k, v in body.items() if k not in section.own and k not in section.filled}
    if section.model is None:
        return [(k, closest(k, section.own)) for k in own]
    found = unknown_keys(section.model, own, "")
    return [(k, closest(k, _section_keys(section)) if "." not in k else hint) for k, hint in found]


def section_value_problems(cfg: RecipeConfig, sections: Sequence[Section]) -> list[Problem]:
    """Each section built as its stage builds it, misspelt keys left out (they are reported once, above)."""
    problems = []
    stages = dict(cfg.stages)
    cleaned = {}
    for section in sections:
        body = stages.get(section.name)
        if isinstance(body, Mapping):
            bad = [k for k, _ in _unknown_in_section(section, body)] + [
                k for k in body if k in section.filled
            ]
            cleaned[section.name] = without_keys(dict(body), bad)
    clean_cfg = cfg.model_copy(update={"stages": {**stages, **cleaned}})
    for section in sections:
        if section.build is None:
            continue
        try:
            section.build(clean_cfg)
        except (DataDojoError, ValueError, TypeError) as exc:
            problems.append(Problem(f"[stages.{section.name}]", str(exc)))
    return problems


def _stamp(path: Path) -> tuple[int, int]:
    """What says a file or folder changed, cheaply (its mtime and size): the key of the plan's memos."""
    try:
        st = path.stat()
    except OSError:
        return (0, -1)
    return (st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=64)
def _first_task_at(bench: str, path: str, options: str, stamp: tuple[int, int]) -> Any:
    from datadojo.bench.registry import get_benchmark

    return next(iter(get_benchmark(bench).load(Path(path), **json.loads(options))), None)


def first_task(bench: str, path: Path, options: Mapping[str, Any]) -> Any:
    """The first task of benchmark ``bench`` at ``path`` (raises the loader's error: a wrong layout), loaded
    once per plan however many sweep variants ask (memoized on the data's mtime and size)."""
    return _first_task_at(
        bench, str(path), json.dumps(dict(options), sort_keys=True, default=str), _stamp(path)
    )


# --- benchmarks -----------------------------------------------------------------------------------------


def _provide_benchmark(name: str, path: Path) -> str:
    from datadojo.bench.registry import get_benchmark, source_names

    bench = get_benchmark(name)
    how = (
        f"`datadojo bench download {name}` and point `data` at its folder, or "
        if name in source_names()
        else ""
    )
    layout = f" ({bench.layout})" if bench.layout else ""
    return f"no data at {path}: {how}put the {name} files there{layout}"


def benchmark_problems(cfg: RecipeConfig) -> list[Problem]:
    """Each ``[[benchmarks]]`` entry: a registered name (the closest named otherwise), its data present and in
    the benchmark's layout (the first task loads with the entry's options)."""
    from datadojo.bench.registry import benchmark_names

    names = benchmark_names()
    problems = []
    for i, spec in enumerate(cfg.benchmarks, 1):
        where = f"[[benchmarks]] #{i} ({spec.title})"
        path = cfg.path(spec.data)
        if spec.bench.lower() not in [n.lower() for n in names]:
            problems.append(
                Problem(
                    where,
                    f"unknown benchmark {spec.bench!r}{closest(spec.bench, names)} (one of {', '.join(names)})",
                )
            )
            if not path.exists():
                problems.append(Problem(where, f"no data at {path}"))
            continue
        if not path.exists():
            problems.append(Problem(where, _provide_benchmark(spec.bench, path)))
            continue
        try:
            first = first_task(spec.bench, path, spec.options)
        except (DataDojoError, ValueError, OSError, TypeError) as exc:
            problems.append(Problem(where, f"{path}: {exc}"))
            continue
        if first is None:
            problems.append(Problem(where, f"{path}: no task in it"))
    return problems


# --- context windows ------------------------------------------------------------------------------------


def student_window(path: Path) -> int | None:
    """The context window of a local checkpoint: its ``config.json``'s ``max_position_embeddings`` (what the
    hf backend uses), ``None`` when the folder says nothing."""
    try:
        conf = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    value = conf.get("max_position_embeddings")
    return int(value) if isinstance(value, int) and value > 0 else None


def _served_window(spec: str) -> int | None:
    from datadojo.llm.spec import parse_model_spec

    try:
        return parse_model_spec(spec).options.get("context_window")
    except (DataDojoError, ValueError, AttributeError):
        return None


@functools.lru_cache(maxsize=8)
def _tokenizer(path: str, stamp: tuple[int, int]) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


_FLOORS: dict[tuple[Any, ...], int] = {}  # (checkpoint, agent settings, task) → tokens: once per plan


def prompt_floor(path: Path, agent: Mapping[str, Any], task: Any = None) -> int:
    """Tokens of the first prompt a stage sends, under the student's own tokenizer and chat template: of
    ``task`` (a benchmark's first task: its data profile included) or, without one, of an empty question
    (the system prompt alone): every first turn is at least this long. 0 when the tokenizer cannot be
    loaded here (then only the reply budget is checked). Memoized: a sweep's variants share their prompts."""
    stamp = _stamp(path / "config.json")
    task_key = "" if task is None else f"{task.id}:{task.question}"
    key = (str(path), stamp, json.dumps(dict(agent), sort_keys=True), task_key)
    if key in _FLOORS:
        return _FLOORS[key]
    try:
        from datadojo.env.config import AgentConfig
        from datadojo.env.prompts import episode_prompt
        from datadojo.types import Task

        tok = _tokenizer(str(path), stamp)
        messages = episode_prompt(task or Task(id="plan", question=""), AgentConfig(**agent))
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        floor = len(tok(text, add_special_tokens=False)["input_ids"])
    except Exception:
        floor = 0
    _FLOORS[key] = floor
    return floor


@dataclass(frozen=True)
class Generation:
    """One stage's generation with a model: the setting of its reply budget, that budget (0: the backend
    fits the reply to the room left), the agent settings of its prompt, the model, and a task to build the
    first prompt from (``None``: an empty question)."""

    where: str  # "[stages.rl] max_new_tokens"
    max_new_tokens: int
    agent: Mapping[str, Any]  # AgentConfig keys: dialect, max_turns, language
    window_from: str  # a local checkpoint folder or a served spec
    task: Any = None


def context_problems(cfg: RecipeConfig, generations: Sequence[Generation]) -> list[Problem]:
    """Each generation's first turn (the smallest prompt plus its reply budget) against its model's window:
    the agent loop ends an episode at ``context_limit`` when the prompt plus ``max_tokens`` does not fit,
    so a budget at or over the window makes every episode end with 0 turns."""
    problems = []
    for g in generations:
        local = Path(g.window_from)
        window = student_window(local) if local.is_dir() else _served_window(g.window_from)
        if window is None:
            continue
        floor = 0
        if g.max_new_tokens < window and local.is_dir():
            floor = prompt_floor(local, g.agent, g.task)
        if floor + max(g.max_new_tokens, 1) > window:
            room = window - floor
            what = (
                f"{g.max_new_tokens} reply tokens + a first prompt of at least {floor} tokens exceed"
                if floor
                else f"{g.max_new_tokens} reply tokens alone exceed"
            )
            problems.append(
                Problem(
                    g.where,
                    f"{what} the {window}-token context window of {g.window_from}: every episode would end at "
                    f"context_limit with 0 turns; set it to at most {max(room - 1, 0)} (leave room for the "
                    "turns' observations) or use a model with a longer window",
                )
            )
    return problems


# --- model servers ------------------------------------------------------------------------------------


def server_problems(servers: Mapping[str, str]) -> list[Problem]:
    """Each served model (``openai:`` spec) probed once with the stage commands' own check
    (:meth:`~datadojo.llm.base.ChatBackend.check_reachable`: one ``GET /models`` per replica, no retries);
    the message is theirs: ``cannot reach the model server for …``, exit 3."""
    from datadojo.llm import load_backend
    from datadojo.llm.base import LLMError

    seen: dict[str, str | None] = {}
    roles: dict[str, list[str]] = {}
    for where, spec in servers.items():
        if not spec.startswith("openai:"):
            continue
        roles.setdefault(spec, []).append(where)
        if spec not in seen:

            async def probe(s: str = spec) -> None:
                backend = load_backend(s)
                try:
                    await backend.check_reachable()
                finally:
                    await backend.aclose()

            try:
                asyncio.run(probe())
                seen[spec] = None
            except LLMError as exc:
                seen[spec] = str(exc)
    return [Problem(", ".join(roles[s]), str(e), server=True) for s, e in seen.items() if e is not None]


# --- paths ---------------------------------------------------------------------------------------------


def _student_path(cfg: RecipeConfig) -> Path:
    return cfg.path(cfg.models.student.removeprefix("hf:").split("?")[0])


def path_problems(cfg: RecipeConfig) -> list[Problem]:
    """Every file the run reads from outside, each missing one with what to provide and how (all at once: a
    user fixing paths should not discover them one attempt at a time)."""
    problems = []
    for p in cfg.inputs:
        if not cfg.path(p).exists():
            problems.append(Problem("inputs", f"{cfg.path(p)} does not exist (data files or folders: {p!r})"))
    student = _student_path(cfg)
    if not student.is_dir():
        problems.append(
            Problem(
                "models.student",
                f"no checkpoint folder at {student}: download the base model there (e.g. "
                f"`huggingface-cli download Qwen/Qwen2.5-7B-Instruct --local-dir {student}`) or point "
                "models.student at a local checkpoint folder (config.json, tokenizer, weights)",
            )
        )
    elif not (student / "config.json").is_file():
        problems.append(Problem("models.student", f"{student} holds no config.json: not a checkpoint folder"))
    for name in ("rl_tasks", "downstream"):
        section = cfg.stages.get(name) or {}
        labelled, labels = section.get("labelled"), section.get("labels", 0)
        if labelled and isinstance(labels, int) and labels > 0 and not cfg.path(str(labelled)).is_file():
            problems.append(
                Problem(
                    f"[stages.{name}] labelled",
                    f"{cfg.path(str(labelled))} does not exist: a task file (JSONL, one task with its answer per "
                    "line), read when labels > 0",
                )
            )
    return problems


def loopback_problems(cfg: RecipeConfig) -> list[Problem]:
    """A ``loopback:NAME`` teacher or judge (the small examples' scripted fakes) that reached the library
    unserved: the ``datadojo recipe`` command serves it; a Python caller wraps the run in
    ``datadojo.testing.loopback.serve_loopback`` (the library does not import the test doubles)."""
    problems = []
    for role in ("teacher", "judge"):
        spec = getattr(cfg.models, role)
        if spec and spec.startswith("loopback:"):
            problems.append(
                Problem(
                    f"models.{role}",
                    f"{spec!r} is a scripted loopback model that the `datadojo recipe` command serves; from "
                    "Python, run inside `with datadojo.testing.loopback.serve_loopback(config) as config:`",
                )
            )
    return problems


def config_problems(
    cfg: RecipeConfig, sections: Sequence[Section], generations: Sequence[Generation]
) -> list[Problem]:
    """Everything checked on one configuration before it runs (the module docstring's list, but servers)."""
    problems = section_key_problems(cfg.recipe, cfg.stages, sections)
    problems += section_value_problems(cfg, sections)
    problems += path_problems(cfg)
    problems += loopback_problems(cfg)
    problems += benchmark_problems(cfg)
    problems += context_problems(cfg, generations)
    return problems

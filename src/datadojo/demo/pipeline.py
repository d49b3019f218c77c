"""``datadojo demo``: the product end to end on the bundled example data, with no model and no network.

Why: a newcomer should see DataDojo do its job — data in, verifiable tasks, programs run in the sandbox,
scores, an agent loop, a report — with one command, before serving a model. Every stage is the real code
path, not a mock, and the stages run on the recipe engine like every paper recipe
(:mod:`datadojo.demo.stages` lists them; :func:`datadojo.recipes.engine.run_recipe` runs them, timed, with
progress, each in its folder ``OUT/stages/<stage>/<key>/`` with its manifest); then ``OUT/report.html``
links all of it (:mod:`datadojo.demo.page`) and ``OUT/demo.json`` records it.

**Budgets are counts, not seconds**: the solver gets ``solver_candidates`` compositions per task and no
time limit, so a run's figures depend on the seed alone, never on the machine's speed. The defaults keep
a run under about a minute on 2 cores.

**The output folder** is the demo's: a rerun replaces a previous demo there (its stages run again); a folder
holding anything else is refused rather than mixed with demo files.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from datadojo.demo.config import DemoConfig
from datadojo.demo.examples import DemoError
from datadojo.demo.result import DemoResult, StageResult
from datadojo.demo.stages import DEMO_STAGES, STAGES, demo_stages

__all__ = ["STAGES", "DemoConfig", "DemoProgress", "DemoResult", "StageResult", "next_commands", "run_demo"]

STAGE_TITLES = dict(STAGES)

#: ``progress(stage, done, total)``: called with ``done = 0`` when a stage starts, then as it advances.
DemoProgress = Callable[[str, int, int], None]

#: What the demo writes in its folder (a rerun removes these and nothing else): the engine's run record and
#: stage folders, the generated examples (no checkout), the page and the record of the run; and the stage
#: folders of a demo made before it ran on the recipe engine (``profiles``, ``warmup``, ``text2sql``).
DEMO_OUTPUTS: tuple[str, ...] = (
    "examples",
    "stages",
    "plan.json",
    "report.html",
    "demo.json",
    "profiles",
    "warmup",
    "text2sql",
)


def _machine() -> dict[str, Any]:
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not on every platform
        load = None
    return {"cpus": os.cpu_count(), "load_average": load}


def _prepare_out(out: Path) -> None:
    """Make ``out`` the demo's folder: new, empty, or a previous demo (whose files are replaced). It is then
    a recipe-engine run folder of the demo (``run.json``), so the engine opens it as its own."""
    from datadojo.runs import RunFolder

    if out.exists() and not out.is_dir():
        raise DemoError(f"{out}: exists and is not a folder; pass another --out")
    previous = False
    if out.is_dir() and any(out.iterdir()):
        if not (out / "demo.json").is_file():
            raise DemoError(
                f"{out}: not empty and not a previous demo (no demo.json); pass another --out or empty it"
            )
        previous = True
        for name in DEMO_OUTPUTS:
            p = out / name
            if p.is_dir():
                shutil.rmtree(p)
            elif p.exists():
                p.unlink()
    out.mkdir(parents=True, exist_ok=True)
    if previous or not any(out.iterdir()):
        RunFolder(out, "recipe", {"recipe": DemoConfig.recipe}, adopt=True)


def _rel(path: Path, base: Path) -> str:
    return os.path.relpath(path, base)


def _shown(path: Path) -> str:
    """A path as a user types it: relative to the working directory when below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def next_commands(data: Path, out: Path, text2sql: Path | None = None) -> list[dict[str, str]]:
    """What to try next (``what`` it does, the ``command``): the same jobs with a served model; ``text2sql``
    the demo's text-to-SQL evaluation folder (default: ``out/text2sql``)."""

    def q(path: Path) -> str:
        return shlex.quote(_shown(path))

    model = "openai:MODEL@http://localhost:8000/v1"
    db, csv = q(data / "shop.sqlite"), q(data / "sales.csv")
    return [
        {
            "what": "ask one question about a file; every turn is shown live",
            "command": f'datadojo ask {csv} "Which region sold the most units in Q3 2024?" --model {model}',
        },
        {
            "what": "the shop-sql set with a model: 3 trials per question, pass@k, a report",
            "command": f"datadojo eval shop-sql --data {db} --model {model} -n 3 --out runs/shop-sql",
        },
        {
            "what": "warm-up tasks at the EnvLunch paper's scale (1,600), for training",
            "command": f"datadojo warmup build {db} {csv} --n 1600 --out runs/warmup/tasks.jsonl",
        },
        {
            "what": "rebuild this demo's text-to-SQL report",
            "command": f"datadojo report {q(text2sql or out / 'text2sql')}",
        },
    ]


def _stage_results(result: Any, out: Path) -> list[StageResult]:
    """A :class:`StageResult` per engine stage, from its manifest: links relative to ``out``, seconds as the
    engine timed them."""
    stages = []
    for name in DEMO_STAGES:
        entry = result.entries["base"][name]
        m = entry.manifest
        link = Path(m["link"]) if m.get("link") else None
        figures = dict(m.get("figures") or {})
        if name == "profile":  # the page opens each profile: relative to the demo folder
            figures["files"] = [{**f, "profile": _rel(Path(f["profile"]), out)} for f in figures["files"]]
        stages.append(
            StageResult(
                name,
                STAGE_TITLES[name],
                result.elapsed.get(("base", name), 0.0),
                m["headline"],
                figures,
                _rel(link, out) if link is not None else None,
            )
        )
    return stages


def _files(result: Any, out: Path) -> dict[str, str]:
    """The files the page links, by name (``tasks``, ``solver``, ``scores``…), relative to ``out``."""
    files: dict[str, str] = {}
    for name in DEMO_STAGES[1:]:  # the example data is not the demo's (its folder is in `config`)
        for key, path in (result.entries["base"][name].manifest.get("files") or {}).items():
            files[key] = _rel(Path(path), out)
    return files


def run_demo(config: DemoConfig | None = None, *, progress: DemoProgress | None = None) -> DemoResult:
    """Run every stage (:mod:`datadojo.demo.stages`) on the recipe engine into ``config.out``, then write the
    page; return what each did.

    Writes ``OUT/report.html`` (links to every part), ``OUT/demo.json`` (this result), and each stage's
    folder ``OUT/stages/<stage>/<key>/`` (profiles; warm-up tasks and copies; solver trajectories; the
    scored run folder with its report; the text-to-SQL evaluation run folder), with the engine's
    ``run.json``, ``plan.json`` and ``stages/stages.jsonl``. Raises :class:`DemoError` naming the stage at
    fault.
    """
    from datadojo.demo.page import write_page
    from datadojo.fs import write_json_atomic
    from datadojo.recipes.engine import run_recipe

    config = config or DemoConfig()
    out = Path(config.out)
    hook = progress or (lambda _s, _d, _t: None)
    began = time.perf_counter()
    machine = _machine()
    _prepare_out(out)
    # marks the folder as the demo's from the start, so a rerun after an interruption replaces it
    write_json_atomic(out / "demo.json", {"status": "running", "out": str(out)})
    pages: dict[str, Any] = {}

    def finish(result: Any, _variants: Any) -> dict[str, Path]:
        """The page, as the engine's last step (the recipes' report is written the same way)."""
        hook("report", 0, 1)
        start = time.perf_counter()
        ex_files = result.entries["base"]["examples"].manifest["files"]
        text2sql = result.entries["base"]["text2sql"].manifest
        demo = DemoResult(
            out=out,
            report=out / "report.html",
            stages=_stage_results(result, out),
            seconds=time.perf_counter() - began,
            machine=machine,
            next_commands=next_commands(Path(ex_files["data"]), out, Path(text2sql["files"]["eval"])),
            config={**config.to_dict(json=True), "examples": ex_files["root"]},  # paths as strings
            files=_files(result, out),
        )
        html = write_page(demo)  # shows the stages before it and the time up to it
        demo.stages.append(
            StageResult(
                "report",
                STAGE_TITLES["report"],
                time.perf_counter() - start,
                _shown(html),
                {},
                _rel(html, out),
            )
        )
        pages["demo"] = demo
        hook("report", 1, 1)
        return {"html": html}

    run_recipe(demo_stages(config), config, progress=hook, finish=finish)
    demo: DemoResult = pages["demo"]
    demo.seconds = time.perf_counter() - began
    write_json_atomic(out / "demo.json", demo.to_dict(), default=str)
    return demo

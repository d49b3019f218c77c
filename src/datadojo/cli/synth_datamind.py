"""``datadojo synth datamind``: DataMind's synthesis pipeline (``run``) and each stage alone.

Thin over :mod:`datadojo.synth.datamind`: parse options into a :class:`DataMindConfig`, load the teacher and
judge backends from model specs, draw a progress bar per stage, print the funnel table at the end.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import TaskID
from rich.table import Table

from datadojo.cli._ui import config_option, count_table, error_exit, interrupted, progress_bar
from datadojo.synth.datamind.config import DataMindConfig

__all__ = ["register"]

datamind_app = typer.Typer(
    name="datamind",
    help=(
        "DataMind synthesis (DataMind §3.2): taxonomy queries from each file's profile, easy→hard composition, "
        "N trajectories per query with the category's workflow k, self-consistency judge, reflection, rule "
        "filters and four curated SFT sets. `run` does it all; `queries`, `compose`, `sample`, `judge` and "
        "`curate` run one stage on the same --out folder. Every stage resumes: rerunning a finished stage "
        "sends no request.\n\n"
        "Example: datadojo synth datamind run data/ --teacher openai:deepseek@http://localhost:8000/v1 "
        "--judge openai:gpt-4o-mini@https://api.openai.com/v1 --out runs/dm\n\n"
        "Stage by stage (same --out): queries DATA --teacher T; compose --teacher T; sample --teacher T; "
        "judge --judge J; reflection: sample --round 1 --teacher T, then judge --round 1 --judge J; curate. "
        "Output: queries.jsonl, trajectories.jsonl, verdicts.jsonl, rejected.jsonl, "
        "sft/{con-select,random-select,non-select,non-con}.jsonl, summary.json, report.html."
    ),
    no_args_is_help=True,
)

SPEC_HELP = (
    "Model spec: `openai:MODEL@BASE_URL` (vLLM, SGLang, Ollama, hosted APIs; key from $OPENAI_API_KEY) or "
    "`hf:/path/to/checkpoint`."
)

_INPUTS = typer.Argument(
    None, metavar="FILES_OR_DIRS...", help="Data files and folders (walked recursively)."
)
_CONCURRENCY = config_option(DataMindConfig, "concurrency", "--concurrency")
_STRUCTURED = config_option(DataMindConfig, "structured", "--structured")
_TAXONOMY = config_option(DataMindConfig, "taxonomy", "--taxonomy")
_TAXONOMY_AGAIN = config_option(
    DataMindConfig, "taxonomy", "--taxonomy", extra="Give the one given to `queries`."
)
_WORKFLOW = config_option(DataMindConfig, "use_workflow", "--workflow/--no-workflow")
_MAX_TURNS = config_option(DataMindConfig, "max_turns", "--max-turns")
_NON_CON = config_option(DataMindConfig, "non_con", "--non-con")
_RULE_BEST = config_option(DataMindConfig, "rule_best", "--rule-best/--judge-best")
_PROGRESS = typer.Option(True, "--progress/--no-progress", help="Show progress bars.")
_JSON = typer.Option(False, "--json", help="Print summary.json instead of the funnel table.")
_OUT = typer.Option(..., "--out", "-o", help="Output folder (all stages read and write here).")
_TEACHER = typer.Option(
    ..., "--teacher", help="Teacher model (queries, composition, trajectories). " + SPEC_HELP
)
_JUDGE = typer.Option(
    ..., "--judge", help="Judge model for self-consistency (separate from the teacher). " + SPEC_HELP
)


def _config(**kwargs: Any) -> Any:
    from datadojo.config import ConfigError

    try:
        return DataMindConfig(**{k: v for k, v in kwargs.items() if v is not None})
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _check_inputs(inputs: list[Path] | None, required: bool) -> list[Path]:
    inputs = list(inputs or [])
    if required and not inputs:
        raise typer.BadParameter("give at least one data file or folder", param_hint="FILES_OR_DIRS")
    missing = [str(p) for p in inputs if not p.exists()]
    if missing:
        raise typer.BadParameter(f"no such file or folder: {', '.join(missing)}", param_hint="FILES_OR_DIRS")
    return inputs


class _Bars:
    """One rich progress bar per stage, created when the stage first reports."""

    def __init__(self, enabled: bool) -> None:
        self.progress = progress_bar(
            Console(stderr=True), "[bold]{task.description:<10}", disable=not enabled
        )
        self.tasks: dict[str, TaskID] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(stage, total=total)
        self.progress.update(self.tasks[stage], completed=done, total=total)


def _print_summary(summary: dict[str, Any], as_json: bool) -> None:
    from datadojo.synth.datamind.funnel import USAGE_COLUMNS, funnel_rows, usage_rows

    if as_json:
        sys.stdout.write(json.dumps(summary, ensure_ascii=False, default=str, indent=1) + "\n")
        return
    console = Console()
    t = Table(title=f"DataMind funnel → {summary['out']}")
    t.add_column("step")
    t.add_column("count", justify="right")
    for step, n in funnel_rows(summary):
        t.add_row(step, n)
    console.print(t)
    per_category = summary["queries"]["per_category"]
    if per_category:
        console.print(
            count_table(per_category, "category", "queries", title="queries per category (difficulty 1)")
        )
    rows = usage_rows(summary)
    if rows:
        u = Table(title="LLM requests and tokens per stage and role")
        for i, name in enumerate(USAGE_COLUMNS):
            u.add_column(name, justify="right" if i >= 2 else "left")
        for row in rows:
            u.add_row(*(f"{x:.1f}" if isinstance(x, float) else str(x) for x in row))
        console.print(u)
    console.print(
        f"summary: {Path(summary['out']) / 'summary.json'}   report: {Path(summary['out']) / 'report.html'}"
    )


def _execute(
    inputs: list[Path],
    out: Path,
    config: Any,
    progress: bool,
    as_json: bool,
    body: Callable[[Any], Awaitable[dict[str, Any]] | dict[str, Any]],
    specs: tuple[str | None, ...] = (),
) -> None:
    """Build the run, load backends, run ``body(run, *backends)``, close backends, print the funnel."""
    from datadojo.llm import load_backend
    from datadojo.synth.datamind import DataMindRun

    bars = _Bars(progress)
    try:
        run = DataMindRun(inputs, out, config, progress=bars)
        backends = [load_backend(s) for s in specs if s]
    except OSError as exc:  # a folder that cannot be made or read: the message names it
        raise error_exit(exc) from exc

    async def main() -> dict[str, Any]:
        try:
            for b in backends:  # a down server or wrong URL: exit 3 at the first request, not after retries
                b.check_before_first_request()  # (input errors first: they need no server)
            result = body(run, *backends)
            return await result if asyncio.iscoroutine(result) else result  # type: ignore[return-value]
        finally:
            for b in backends:
                await b.aclose()

    try:
        with bars.progress:
            summary = asyncio.run(main())
    except KeyboardInterrupt:
        raise interrupted(f"what each stage finished is kept in {out}") from None
    except OSError as exc:
        raise error_exit(exc) from exc
    _print_summary(summary, as_json)


@datamind_app.command("run")
def run_cmd(
    inputs: list[Path] = _INPUTS,
    teacher: str = _TEACHER,
    judge: str = _JUDGE,
    out: Path = _OUT,
    n: int = config_option(DataMindConfig, "n_samples", "-n"),
    rounds: int = config_option(DataMindConfig, "rounds", "--rounds"),
    concurrency: int = _CONCURRENCY,
    taxonomy: Path | None = _TAXONOMY,
    workflow: bool = _WORKFLOW,
    compose: bool = typer.Option(True, "--compose/--no-compose", help="Run the easy→hard composition stage."),
    chains_per_file: int = config_option(DataMindConfig, "chains_per_file", "--chains-per-file"),
    max_turns: int = _MAX_TURNS,
    structured: str = _STRUCTURED,
    tokenizer: str = config_option(DataMindConfig, "tokenizer", "--tokenizer"),
    seed: int = config_option(DataMindConfig, "seed", "--seed"),
    non_con: str = _NON_CON,
    rule_best: bool = _RULE_BEST,
    progress: bool = _PROGRESS,
    as_json: bool = _JSON,
) -> None:
    """Run every stage: queries → compose → sample → judge → reflect → filter → curate."""
    from datadojo.synth.datamind import run_pipeline

    cfg = _config(
        n_samples=n, rounds=rounds, concurrency=concurrency, taxonomy=str(taxonomy) if taxonomy else None,
        use_workflow=workflow, chains_per_file=chains_per_file, max_turns=max_turns, structured=structured,
        tokenizer=tokenizer, seed=seed, non_con=non_con, rule_best=rule_best,
    )  # fmt: skip
    _execute(
        _check_inputs(inputs, True), out, cfg, progress, as_json,
        lambda run, t, j: run_pipeline(run, t, j, compose=compose), (teacher, judge),
    )  # fmt: skip


@datamind_app.command("queries")
def queries_cmd(
    inputs: list[Path] = _INPUTS,
    teacher: str = _TEACHER,
    out: Path = _OUT,
    concurrency: int = _CONCURRENCY,
    taxonomy: Path | None = _TAXONOMY,
    per_category: int = config_option(DataMindConfig, "queries_per_category", "--per-category"),
    structured: str = _STRUCTURED,
    progress: bool = _PROGRESS,
    as_json: bool = _JSON,
) -> None:
    """Stage 2: scan the files, then one query request per (file, applicable category)."""
    from datadojo.synth.datamind import stage_queries

    cfg = _config(concurrency=concurrency, taxonomy=str(taxonomy) if taxonomy else None,
                  queries_per_category=per_category, structured=structured)  # fmt: skip
    _execute(_check_inputs(inputs, True), out, cfg, progress, as_json, stage_queries, (teacher,))


@datamind_app.command("compose")
def compose_cmd(
    teacher: str = _TEACHER,
    out: Path = _OUT,
    concurrency: int = _CONCURRENCY,
    taxonomy: Path | None = _TAXONOMY_AGAIN,
    chains_per_file: int = config_option(DataMindConfig, "chains_per_file", "--chains-per-file"),
    max_chain: int = config_option(DataMindConfig, "max_chain", "--max-chain"),
    seed: int = config_option(DataMindConfig, "seed", "--seed"),
    structured: str = _STRUCTURED,
    progress: bool = _PROGRESS,
    as_json: bool = _JSON,
) -> None:
    """Stage 3: compose chains of 2-5 categories from the queries in --out."""
    from datadojo.synth.datamind import stage_compose

    cfg = _config(concurrency=concurrency, taxonomy=str(taxonomy) if taxonomy else None,
                  chains_per_file=chains_per_file, max_chain=max_chain, seed=seed, structured=structured)  # fmt: skip
    _execute([], out, cfg, progress, as_json, stage_compose, (teacher,))


@datamind_app.command("sample")
def sample_cmd(
    teacher: str = _TEACHER,
    out: Path = _OUT,
    n: int = config_option(DataMindConfig, "n_samples", "-n"),
    round_: int = typer.Option(
        0, "--round", help="0: every query; r >= 1: reflection round r (needs verdicts of r-1)."
    ),
    concurrency: int = _CONCURRENCY,
    taxonomy: Path | None = _TAXONOMY_AGAIN,
    workflow: bool = _WORKFLOW,
    max_turns: int = _MAX_TURNS,
    seed: int = config_option(DataMindConfig, "seed", "--seed"),
    progress: bool = _PROGRESS,
    as_json: bool = _JSON,
) -> None:
    """Stage 4 / 6: N trajectories per query through the agent runner."""
    from datadojo.synth.datamind import stage_sample

    cfg = _config(n_samples=n, concurrency=concurrency, taxonomy=str(taxonomy) if taxonomy else None,
                  use_workflow=workflow, max_turns=max_turns, seed=seed, rounds=max(round_, 1))  # fmt: skip
    _execute([], out, cfg, progress, as_json, lambda run, t: stage_sample(run, t, round_=round_), (teacher,))


@datamind_app.command("judge")
def judge_cmd(
    judge: str = _JUDGE,
    out: Path = _OUT,
    n: int = config_option(DataMindConfig, "n_samples", "-n", extra="Give the number sampled."),
    round_: int = typer.Option(0, "--round", help="Which sampling round to judge."),
    tolerance: float = config_option(DataMindConfig, "tolerance", "--tolerance"),
    rule_best: bool = _RULE_BEST,
    concurrency: int = _CONCURRENCY,
    structured: str = _STRUCTURED,
    progress: bool = _PROGRESS,
    as_json: bool = _JSON,
) -> None:
    """Stage 5: self-consistency verdicts (deterministic pre-check, then the judge where needed)."""
    from datadojo.synth.datamind import stage_judge

    cfg = _config(n_samples=n, tolerance=tolerance, concurrency=concurrency, structured=structured,
                  rounds=max(round_, 1), rule_best=rule_best)  # fmt: skip
    _execute([], out, cfg, progress, as_json, lambda run, j: stage_judge(run, j, round_=round_), (judge,))


@datamind_app.command("curate")
def curate_cmd(
    out: Path = _OUT,
    rounds: int = config_option(
        DataMindConfig, "rounds", "--rounds", extra="Give the run's value (for the funnel)."
    ),
    tokenizer: str = config_option(DataMindConfig, "tokenizer", "--tokenizer"),
    max_answer_tokens: int = config_option(DataMindConfig, "max_answer_tokens", "--max-answer-tokens"),
    seed: int = config_option(DataMindConfig, "seed", "--seed"),
    non_con: str = _NON_CON,
    as_json: bool = _JSON,
) -> None:
    """Stages 7-8: rule filters, then sft/{con-select,random-select,non-select,non-con}.jsonl."""
    from datadojo.synth.datamind import stage_curate

    cfg = _config(
        rounds=rounds, tokenizer=tokenizer, max_answer_tokens=max_answer_tokens, seed=seed, non_con=non_con
    )
    _execute([], out, cfg, False, as_json, stage_curate)


def register(synth_app: typer.Typer) -> None:
    """Add the ``datamind`` sub-group to ``datadojo synth``."""
    synth_app.add_typer(datamind_app, name="datamind")

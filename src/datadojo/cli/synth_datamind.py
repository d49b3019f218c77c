"""``datadojo synth datamind``: DataMind's synthesis pipeline (``run``) and each stage alone.

Thin over :mod:`datadojo.synth.datamind`: parse options into a :class:`DataMindConfig`, load the teacher and
judge backends from model specs, draw a progress bar per stage, print the funnel table at the end.
``run`` and ``sample`` take ``--executor ray``: the sampling rounds' episodes run on the cluster's nodes
(each builds the teacher's client from the spec and its own sandboxes); this process writes every file.
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

from datadojo.cli._executor import EXECUTOR_HELP, RAY_ADDRESS_HELP, cli_executor, node_table
from datadojo.cli._options import SettingsGroup, model_option, require_model, settings_options
from datadojo.cli._ui import count_table, error_exit, interrupted, progress_bar
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

_INPUTS = typer.Argument(
    None, metavar="FILES_OR_DIRS...", help="Data files and folders (walked recursively)."
)
_PROGRESS = typer.Option(True, "--progress/--no-progress", help="Show progress bars.")
_JSON = typer.Option(False, "--json", help="Print summary.json instead of the funnel table.")
_OUT = typer.Option(..., "--out", "-o", help="Output folder (all stages read and write here).")
_EXECUTOR = typer.Option(
    "local",
    "--executor",
    help=EXECUTOR_HELP + " Here: the sampling rounds (agent episodes); queries, "
    "composition and judging are requests sent from this process.",
)
_RAY = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP)
_TEACHER = model_option("--teacher", role="Teacher model (queries, composition, trajectories).")
_JUDGE = model_option(
    "--judge", role="Judge model for self-consistency (separate from the teacher).", envvar="DATADOJO_JUDGE"
)

#: Flags kept from before the flags were generated (a short flag, a shorter name, a --yes/--no pair).
_FLAGS: dict[str, tuple[str, ...]] = {
    "n_samples": ("-n", "--samples"),
    "use_workflow": ("--workflow/--no-workflow",),
    "rule_best": ("--rule-best/--judge-best",),
    "queries_per_category": ("--per-category",),
    "concurrency": ("--concurrency", "-j"),
}
_SAME_TAXONOMY = {"taxonomy": "Give the one given to `queries`."}

#: The settings each stage command has flags for (the --config file may set any field; `run` has them all).
_STAGE_FIELDS: dict[str, tuple[str, ...]] = {
    "queries": ("concurrency", "taxonomy", "profile_chars", "queries_per_category", "max_query_chars",
                "near_duplicate", "query_temperature", "query_max_tokens", "structured"),
    "compose": ("concurrency", "taxonomy", "chains_per_file", "min_chain", "max_chain", "query_temperature",
                "query_max_tokens", "seed", "structured"),
    "sample": ("n_samples", "concurrency", "taxonomy", "use_workflow", "detailed_workflow", "max_turns",
               "temperature", "top_p", "max_tokens", "seed"),
    "judge": ("n_samples", "tolerance", "rule_best", "context_chars", "judge_max_tokens", "concurrency",
              "structured"),
    "curate": ("rounds", "tokenizer", "max_answer_tokens", "mixed_script_share", "mixed_script_min_letters",
               "sft_prompt", "non_con", "seed"),
}  # fmt: skip


def _settings(stage: str | None = None, **extra: str) -> Any:
    """The DataMindConfig flags and ``--config`` of one command (``stage``: its fields, else every one)."""
    fields = _STAGE_FIELDS[stage] if stage else None
    return settings_options(SettingsGroup(DataMindConfig, fields=fields, flags=_FLAGS, extra=extra))


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
    remote: Any = None,
) -> None:
    """Build the run, load backends, run ``body(run, *backends)``, close backends, print the funnel.

    ``remote``: the executor of ``--executor ray`` (closed here; its per-node table is printed)."""
    from datadojo.llm import load_backend
    from datadojo.synth.datamind import DataMindRun

    bars = _Bars(progress)
    try:
        run = DataMindRun(inputs, out, config, progress=bars, executor=remote)
        backends = [load_backend(s, concurrency=config.concurrency) for s in specs if s]
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
            if remote is not None:
                await remote.aclose()

    try:
        with bars.progress:
            summary = asyncio.run(main())
    except KeyboardInterrupt:
        raise interrupted(f"what each stage finished is kept in {out}") from None
    except OSError as exc:
        raise error_exit(exc) from exc
    _print_summary(summary, as_json)
    for stage, where in run.sampled.items():
        if where["executor"] != "local" and not as_json:
            Console().print(node_table(where["nodes"], f"Per node ({where['executor']}): {stage}"))


@datamind_app.command("run")
@_settings()
def run_cmd(
    config: DataMindConfig,
    inputs: list[Path] = _INPUTS,
    teacher: str | None = _TEACHER,
    judge: str | None = _JUDGE,
    out: Path = _OUT,
    compose: bool = typer.Option(True, "--compose/--no-compose", help="Run the easy→hard composition stage."),
    progress: bool = _PROGRESS,
    as_json: bool = _JSON,
    executor: str = _EXECUTOR,
    ray_address: str | None = _RAY,
) -> None:
    """Run every stage: queries → compose → sample → judge → reflect → filter → curate."""
    from datadojo.synth.datamind import run_pipeline

    specs = (require_model(teacher, "--teacher"), require_model(judge, "--judge", "DATADOJO_JUDGE"))
    remote = cli_executor(executor, ray_address, config.concurrency)
    # on a remote executor the sampling rounds get the teacher's spec string: the nodes load it themselves
    _execute(
        _check_inputs(inputs, True), out, config, progress, as_json,
        lambda run, t, j: run_pipeline(run, specs[0] if remote else t, j, compose=compose), specs, remote,
    )  # fmt: skip


@datamind_app.command("queries")
@_settings("queries")
def queries_cmd(
    config: DataMindConfig,
    inputs: list[Path] = _INPUTS,
    teacher: str | None = _TEACHER,
    out: Path = _OUT,
    progress: bool = _PROGRESS,
    as_json: bool = _JSON,
) -> None:
    """Stage 2: scan the files, then one query request per (file, applicable category)."""
    from datadojo.synth.datamind import stage_queries

    specs = (require_model(teacher, "--teacher"),)
    _execute(_check_inputs(inputs, True), out, config, progress, as_json, stage_queries, specs)


@datamind_app.command("compose")
@_settings("compose", **_SAME_TAXONOMY)
def compose_cmd(
    config: DataMindConfig,
    teacher: str | None = _TEACHER,
    out: Path = _OUT,
    progress: bool = _PROGRESS,
    as_json: bool = _JSON,
) -> None:
    """Stage 3: compose chains of 2-5 categories from the queries in --out."""
    from datadojo.synth.datamind import stage_compose

    specs = (require_model(teacher, "--teacher"),)
    _execute([], out, config, progress, as_json, stage_compose, specs)


@datamind_app.command("sample")
@_settings("sample", **_SAME_TAXONOMY)
def sample_cmd(
    config: DataMindConfig,
    teacher: str | None = _TEACHER,
    out: Path = _OUT,
    round_: int = typer.Option(
        0, "--round", min=0, help="0: every query; r >= 1: reflection round r (needs verdicts of r-1)."
    ),
    progress: bool = _PROGRESS,
    as_json: bool = _JSON,
    executor: str = _EXECUTOR,
    ray_address: str | None = _RAY,
) -> None:
    """Stage 4 / 6: N trajectories per query through the agent runner (--executor ray: on the cluster)."""
    from datadojo.synth.datamind import stage_sample

    config = config.replace(rounds=max(round_, 1))
    spec = require_model(teacher, "--teacher")
    remote = cli_executor(executor, ray_address, config.concurrency)
    if remote is not None:  # the nodes load the teacher from its spec; none is needed here
        body: Any = lambda run: stage_sample(run, spec, round_=round_)  # noqa: E731
        _execute([], out, config, progress, as_json, body, (), remote)
        return
    _execute(
        [], out, config, progress, as_json, lambda run, t: stage_sample(run, t, round_=round_), (spec,)
    )  # fmt: skip


@datamind_app.command("judge")
@_settings("judge", n_samples="Give the number sampled.")
def judge_cmd(
    config: DataMindConfig,
    judge: str | None = _JUDGE,
    out: Path = _OUT,
    round_: int = typer.Option(0, "--round", min=0, help="Which sampling round to judge."),
    progress: bool = _PROGRESS,
    as_json: bool = _JSON,
) -> None:
    """Stage 5: self-consistency verdicts (deterministic pre-check, then the judge where needed)."""
    from datadojo.synth.datamind import stage_judge

    config = config.replace(rounds=max(round_, 1))
    specs = (require_model(judge, "--judge", "DATADOJO_JUDGE"),)
    _execute(
        [], out, config, progress, as_json, lambda run, j: stage_judge(run, j, round_=round_), specs
    )  # fmt: skip


@datamind_app.command("curate")
@_settings("curate", rounds="Give the run's value (for the funnel).")
def curate_cmd(config: DataMindConfig, out: Path = _OUT, as_json: bool = _JSON) -> None:
    """Stages 7-8: rule filters, then sft/{con-select,random-select,non-select,non-con}.jsonl."""
    from datadojo.synth.datamind import stage_curate

    _execute([], out, config, False, as_json, stage_curate)


def register(synth_app: typer.Typer) -> None:
    """Add the ``datamind`` sub-group to ``datadojo synth``."""
    synth_app.add_typer(datamind_app, name="datamind")

"""``datadojo ask`` and ``datadojo rollout``: run the agent on your files, or on a task file at scale."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.panel import Panel
from rich.progress import TextColumn
from rich.syntax import Syntax
from rich.table import Table

from datadojo.agent import RolloutSummary, run_rollouts
from datadojo.agent.runner import STOP_AFTER_LLM_ERRORS, RolloutStopped
from datadojo.cli._executor import EXECUTOR_HELP, RAY_ADDRESS_HELP, cli_executor, node_table
from datadojo.cli._options import SettingsGroup, model_option, require_model, settings_options
from datadojo.cli._ui import (
    error_exit,
    exit_if_server_down,
    interrupted,
    progress_bar,
    warn_if_cells_can_stat,
)
from datadojo.cli.inputs import check_data_file, load_tasks
from datadojo.config import config_default
from datadojo.env import AgentConfig, AgentEvent, run_agent
from datadojo.executor import ExecutorError
from datadojo.jsonl import JsonlAppender, read_trajectories
from datadojo.sandbox.config import SandboxConfig
from datadojo.types import DataFile, Task, Trajectory, Turn

if TYPE_CHECKING:
    from datadojo.eval.answers import AnswerAccuracy

__all__ = ["register"]

_SAMPLING = config_default(AgentConfig, "sampling")
# The episode's settings, the same in `ask` and `rollout`: AgentConfig at the top of a --config file,
# SandboxConfig in its [sandbox] table; the sampling flags change the file's [sampling] table.
_SETTINGS = settings_options(
    SettingsGroup(AgentConfig, flags={"max_turns": ("--max-turns", "-T")}),
    SettingsGroup(
        SandboxConfig, param="sandbox_config", section="sandbox", fields=("mode", "isolation", "fork_server")
    ),
)
_TEMPERATURE = typer.Option(
    None, "--temperature", help=f"Sampling temperature (default {_SAMPLING.temperature}, DataMind §5.1)."
)
_TOP_P = typer.Option(
    None, "--top-p", help=f"Nucleus sampling top-p (default {_SAMPLING.top_p}, DataMind §5.1)."
)
_MAX_TOKENS = typer.Option(None, "--max-tokens", help="Cap on tokens per reply (default: the server's).")

#: The one --model of the agent commands (eval's too).
_MODEL = model_option("--model", "-m", role="The agent's model.")
MODEL_HELP = _MODEL.help


def _with_sampling(
    config: AgentConfig, temperature: float | None, top_p: float | None, max_tokens: int | None
) -> AgentConfig:
    """``config`` with the sampling flags given applied over its (file's or default) sampling."""
    given = {k: v for k, v in (("temperature", temperature), ("top_p", top_p), ("max_tokens", max_tokens))
             if v is not None}  # fmt: skip
    if not given:
        return config
    try:
        return config.replace(sampling=replace(config.sampling, **given))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc


def _show_turn(console: Console, index: int, turn: Turn, dialect: str) -> None:
    if turn.thought:
        console.print(Panel(turn.thought.strip(), title=f"turn {index + 1} · thought", border_style="cyan"))
    kind = turn.action.kind
    if kind in ("code", "sql"):
        lexer = "python" if kind == "code" else "sql"
        console.print(
            Panel(Syntax(turn.action.text, lexer, word_wrap=True), title=f"{kind}", border_style="blue")
        )
    elif kind == "answer":
        console.print(Panel(turn.action.text.strip(), title="answer", border_style="green"))
    else:
        console.print(Panel(turn.raw.strip() or "(empty reply)", title="malformed turn", border_style="red"))
    if turn.observation is not None:
        style = "yellow" if turn.observation.error or turn.observation.status == "feedback" else "white"
        console.print(
            Panel(
                turn.observation.text.rstrip() or "(no output)",
                title=f"observation · {turn.observation.status}",
                border_style=style,
            )
        )


def reduced_isolation_banner(isolation: dict[str, int]) -> str | None:
    from datadojo.sandbox.result import reduced_isolation_banner as banner

    return banner(isolation)


def _summary_table(summary: RolloutSummary) -> Table:
    table = Table(title="Rollout summary", show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("trajectories written", str(summary.finished))
    table.add_row("skipped (already done)", str(summary.skipped))
    for reason, count in sorted(summary.stop_reasons.items()):
        table.add_row(f"  stop: {reason}", str(count))
    avg = summary.turns / summary.finished if summary.finished else 0.0
    table.add_row("turns (avg per trajectory)", f"{summary.turns} ({avg:.2f})")
    table.add_row("malformed turns", str(summary.invalid_turns))
    table.add_row("tokens (prompt / completion)", f"{summary.prompt_tokens} / {summary.completion_tokens}")
    table.add_row("elapsed", f"{summary.elapsed_s:.1f} s")
    table.add_row("throughput", f"{summary.trajectories_per_s:.2f} traj/s, {summary.turns_per_s:.2f} turns/s")
    levels = ", ".join(f"{k}: {v}" for k, v in summary.isolation.items())
    table.add_row("sandbox isolation (cells)", levels or "n/a")
    if summary.interrupted:
        table.add_row("status", "[red]interrupted — rerun the same command to resume[/red]")
    return table


@_SETTINGS
def ask(
    config: AgentConfig,
    sandbox_config: SandboxConfig,
    args: list[str] = typer.Argument(
        ...,
        metavar="FILE... QUESTION",
        help="One or more data files (or dataset folders), then the question.",
    ),
    model: str | None = _MODEL,
    out: Path | None = typer.Option(None, "--out", "-o", help="Append the trajectory to this JSONL file."),
    as_json: bool = typer.Option(
        False, "--json", help="Print the trajectory as JSON instead of the live view."
    ),
    temperature: float | None = _TEMPERATURE,
    top_p: float | None = _TOP_P,
    max_tokens: int | None = _MAX_TOKENS,
) -> None:
    """Ask a question about data files; watch the agent think, run code and answer.

    Example: datadojo ask examples/data/sales.csv "Which region had the most units?" --model openai:qwen@http://localhost:8000/v1
    """
    if len(args) < 2:
        raise typer.BadParameter(
            "give at least one data file and then the question", param_hint="FILE... QUESTION"
        )
    *paths, question = args
    files: list[DataFile] = []
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise typer.BadParameter(f"{p}: no such file or folder", param_hint="FILE")
        check_data_file(path, "FILE")
        try:
            files.append(DataFile.from_path(path.resolve()))
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="FILE") from exc
    spec = require_model(model)
    cfg = _with_sampling(config, temperature, top_p, max_tokens)
    dialect = cfg.dialect
    task = Task(id=f"ask-{uuid.uuid4().hex[:8]}", question=question, files=files, source="ask")
    console = Console(stderr=as_json)

    def on_event(event: AgentEvent) -> None:
        if as_json:
            return
        if event.kind == "turn":
            index, turn = event.data
            _show_turn(console, index, turn, dialect)

    async def main() -> Trajectory:
        from datadojo.llm import load_backend
        from datadojo.sandbox import Sandbox

        backend = load_backend(spec)
        try:
            await backend.check_reachable()
            async with await Sandbox.create(files, sandbox_config) as sandbox:
                return await run_agent(task, backend, sandbox, cfg, on_event=on_event)
        finally:
            await backend.aclose()

    traj = asyncio.run(main())
    if out is not None:
        with JsonlAppender(out) as w:
            w.write(traj)
    if as_json:
        sys.stdout.write(traj.model_dump_json(indent=2) + "\n")
        return
    if traj.final_answer is not None:
        console.print(f"[bold green]Final answer:[/bold green] {traj.final_answer}")
    else:
        console.print(
            f"[bold red]No answer[/bold red] (stop reason: {traj.stop_reason}"
            + (f": {traj.error}" if traj.error else "")
            + ")"
        )
    if out is not None:
        console.print(f"trajectory appended to {out}")


@_SETTINGS
def rollout(
    config: AgentConfig,
    sandbox_config: SandboxConfig,
    tasks_file: Path = typer.Argument(..., metavar="TASKS.jsonl", help="Tasks, one JSON object per line."),
    model: str | None = _MODEL,
    n: int = typer.Option(1, "-n", "--samples", min=1, help="Trajectories per task."),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder (trajectories.jsonl, summary.json)."),
    concurrency: int = typer.Option(
        8, "--concurrency", "-j", min=1, help="Episodes (and sandboxes) in flight."
    ),
    temperature: float | None = _TEMPERATURE,
    top_p: float | None = _TOP_P,
    max_tokens: int | None = _MAX_TOKENS,
    seed: int | None = typer.Option(None, "--seed", help="Base seed for reproducible sampling."),
    limit: int | None = typer.Option(None, "--limit", help="Only the first N tasks."),
    executor: str = typer.Option("local", "--executor", help=EXECUTOR_HELP),
    ray_address: str | None = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    stop_after: int = typer.Option(
        STOP_AFTER_LLM_ERRORS,
        "--stop-after-llm-errors",
        min=0,
        help="Stop (exit 3) after this many episodes in a row failed on the model server; 0: never.",
    ),
) -> None:
    """Run the agent on every task of a JSONL file, n samples each, concurrently; resumable.

    Trajectories are appended to OUT/trajectories.jsonl as they finish. Rerunning the same command skips
    (task, sample) pairs already there, so an interrupted run resumes where it stopped. With
    `--executor ray` every node of the cluster runs --concurrency episodes with its own sandbox pool and
    model client; data files must be at the same path on every node (shared storage).
    """
    tasks = load_tasks(tasks_file, "TASKS.jsonl")  # before anything is written
    warn_if_cells_can_stat([tasks_file], sandbox_config.isolation)
    spec = require_model(model)
    cfg = _with_sampling(config, temperature, top_p, max_tokens)
    if limit is not None:
        tasks = tasks[:limit]
    out.mkdir(parents=True, exist_ok=True)
    traj_path = out / "trajectories.jsonl"
    remote = cli_executor(executor, ray_address, concurrency)
    summary, answers = _run_rollouts(
        tasks, spec, out, cfg, sandbox_config, n, concurrency, seed, remote, stop_after
    )
    console = Console(stderr=True)
    console.print(_summary_table(summary))
    if answers is not None:
        console.print(_accuracy_line(answers, tasks_file))
    banner = reduced_isolation_banner(dict(summary.isolation))
    if banner:
        console.print(f"[bold red]{banner}[/bold red]")
    exit_if_server_down(summary, spec)
    if remote is not None:
        console.print(node_table(summary.nodes, f"Per node ({summary.executor})"))
    console.print(f"trajectories: {traj_path}")


def _accuracy_line(answers: AnswerAccuracy, tasks_file: Path) -> str:
    """The rollout's accuracy against its tasks' answers, the rule and the undecided share, in one line."""
    line = (
        f"[bold]accuracy {answers.accuracy:.1%}[/bold] ({answers.correct} of {answers.trajectories} "
        f"trajectories of {answers.tasks} task(s) with answers; rule `match` as in `datadojo score tasks`: "
        f"numbers within 3 %, normalized text); undecided {answers.undecided_share:.1%} of the "
        f"{answers.answered} answered (the matcher guessed; a judge would settle them)"
    )
    if answers.unscorable:
        line += (
            f"; {len(answers.unscorable)} task(s) not scored: their answer does not fit the matcher "
            f"(`datadojo score tasks --data {tasks_file} -p PREDICTIONS` names them)"
        )
    return line


def _run_rollouts(
    tasks: list[Task],
    spec: str,
    out: Path,
    cfg: AgentConfig,
    sandbox_config: SandboxConfig,
    n: int,
    concurrency: int,
    seed: int | None,
    remote: Any,
    stop_after: int,
) -> tuple[RolloutSummary, AnswerAccuracy | None]:
    """:func:`~datadojo.agent.run_rollouts` here (one sandbox pool, one backend) or on ``remote``, with a
    progress bar; writes OUT/summary.json (after Ctrl-C and a stopped run too: what finished); Ctrl-C and
    file errors end the command with one line. With the summary goes the accuracy of every trajectory in
    OUT (resumed ones too) against the tasks' answers, ``None`` when no task carries one."""
    console = Console(stderr=True)
    total = len(tasks) * n
    traj_path = out / "trajectories.jsonl"
    summary = RolloutSummary(path=str(traj_path))  # filled in place: still there after Ctrl-C

    def write_summary(answers: AnswerAccuracy | None = None) -> None:
        record: dict[str, Any] = {**summary.to_dict(), "model": spec, "config": cfg.to_dict()}
        if answers is not None:
            record["answers"] = answers.to_dict()
        tmp = out / ".summary.json.tmp"
        tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        tmp.replace(out / "summary.json")

    async def main() -> RolloutSummary:
        from datadojo.llm import load_backend
        from datadojo.sandbox import SandboxPool

        if remote is None:
            backend: Any = load_backend(spec, concurrency=concurrency)
            pool: Any = SandboxPool(sandbox_config, size=concurrency)
            # The pool warms while the server is probed (and then while the first requests are out,
            # datadojo.env.deferred); a failed warm-up is each episode's to report, as without this.
            warming = asyncio.ensure_future(pool.start())
            warming.add_done_callback(lambda t: t.cancelled() or t.exception())
            try:  # a down server or wrong URL: one line and exit 3 now, not after every task's retries
                await backend.check_reachable()
            except BaseException:
                await pool.close()
                await backend.aclose()
                raise
            sandboxes: Any = lambda task: pool.session(task.files)  # noqa: E731
        else:
            backend, pool, sandboxes = spec, None, None
        with progress_bar(console, "[bold]rollout", TextColumn("{task.fields[rate]}")) as progress:
            bar = progress.add_task("rollout", total=total, rate="")

            def on_trajectory(traj: Trajectory, s: RolloutSummary) -> None:
                progress.update(
                    bar,
                    completed=s.finished + s.skipped,
                    rate=f"{s.trajectories_per_s:.2f} traj/s · {s.turns_per_s:.1f} turns/s · "
                    f"errors {s.errors}",
                )

            try:
                await run_rollouts(
                    tasks,
                    backend,
                    traj_path,
                    n_samples=n,
                    config=cfg,
                    concurrency=concurrency,
                    sandboxes=sandboxes,
                    sandbox_config=sandbox_config,
                    seed=seed,
                    on_trajectory=on_trajectory,
                    executor=remote,
                    stop_after_llm_errors=stop_after,
                    summary=summary,
                )
                progress.update(bar, completed=summary.finished + summary.skipped)
                return summary
            finally:
                if remote is None:
                    await pool.close()
                    await backend.aclose()
                else:
                    await remote.aclose()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        summary.interrupted = True
        write_summary()
        raise interrupted(f"{summary.finished} trajectories finished and are kept in {traj_path}") from None
    except RolloutStopped as exc:  # the server went away mid-run: one line, exit 3, the summary so far
        write_summary()
        raise error_exit(exc) from None
    except ExecutorError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    except OSError as exc:  # e.g. no space left on the output disk: the message names the file
        console.print(
            f"[red]error[/red]: {exc}\ntrajectories written so far are kept; fix the cause and rerun to resume."
        )
        raise typer.Exit(1) from None
    answers = None
    if traj_path.exists() and any(task.answer is not None for task in tasks):
        # Imported only here: the scorers import the benchmark registry (pandas, numpy, every benchmark),
        # half a second a run without answers need not pay before it exits.
        from datadojo.eval.answers import answer_accuracy

        answers = answer_accuracy(tasks, read_trajectories(traj_path))
    write_summary(answers)
    return summary, answers


def register(app: typer.Typer) -> None:
    app.command("ask")(ask)
    app.command("rollout")(rollout)

"""``datadojo synth sailor``: explore dataset folders with SciDataSailor's MCTS and synthesize verified data.

Thin layer over :func:`datadojo.synth.sailor.run_sailor`: parse arguments, show progress and a summary table.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

import typer
from rich.console import Console
from rich.table import Table

from datadojo.cli._executor import EXECUTOR_HELP, RAY_ADDRESS_HELP, cli_executor, node_table
from datadojo.cli._options import SettingsGroup, model_option, require_model, settings_options
from datadojo.cli._ui import config_option, error_exit, interrupted, progress_bar
from datadojo.sandbox.config import SandboxConfig
from datadojo.synth.sailor.config import SailorConfig

__all__ = ["register"]

#: summary.json counts shown per level in the closing table (nodes created, probes run, QC outcome, tasks)
_TABLE_KEYS = ("units", "nodes", "probes_run", "trajectories", "kept", "qa", "meta")

console = Console()

_HELP = """Explore scientific dataset folders with SciDataSailor's tree search (arXiv 2607.28098 §4) and write verified exploration trajectories (SFT) and QA / meta tasks (benchmark).

For every FOLDER × seed (8 exploration intents, L0–L3; replace them with --seeds) a tree of Python probes is grown in a read-only sandbox: DF-FPU selection (the pre-execution judge's ρ gives unvisited probes their first-play value ρ+Δ−δ, the post-execution judge calibrates Q̂), strategy→tool expansion (catalog, τ_pre, dedup by tool identity) and entropy-adaptive branching. The best paths get a final answer, are checked (execution validity, step-level verifier) and turned into QA pairs; a seed's verified answers are merged into its meta reference.

Writes DIR/tree.jsonl, trajectories.jsonl, sft.jsonl, qc.jsonl, qa.jsonl, meta.jsonl, rl_tasks.jsonl, summary.json, report.html. A run that keeps no trajectory exits 5 (--allow-empty: 0). Rerun the same command to resume: finished (folder, seed) units are skipped. See docs/sailor.md.

Example: datadojo synth sailor data/co2-ppm data/penguins --model openai:qwen@http://localhost:8000/v1 --out runs/sailor, then datadojo eval scidata --data runs/sailor/qa.jsonl ..."""

#: Flags kept from before the flags were generated.
_FLAGS: dict[str, tuple[str, ...]] = {"lam": ("--lambda",), "exec_timeout_s": ("--exec-timeout",)}


@settings_options(SettingsGroup(SailorConfig, flags=_FLAGS))
def sailor(
    config: SailorConfig,
    folders: list[Path] = typer.Argument(..., metavar="FOLDER...", help="Dataset folders to explore."),
    model: str | None = model_option(
        "--model", "-m", role="Policy model (vLLM and SGLang also return token log-probabilities)."
    ),
    judge: str | None = model_option(
        "--judge",
        role="Judge/verifier model (pre-/post-execution judges, step verifier); default: --model.",
        envvar="DATADOJO_JUDGE",
    ),
    out: Path = typer.Option(..., "--out", "-o", help="Output folder (created; reused to resume)."),
    seeds_file: Path | None = typer.Option(
        None, "--seeds", help="Seed file (JSON) replacing the bundled 8 intents."
    ),
    only: list[str] = typer.Option([], "--only", help="Only these seed ids or levels (L0..L3); repeatable."),
    concurrency: int = typer.Option(
        2, "--concurrency", "-j", min=1, help="(folder, seed) units explored at once."
    ),
    structured: Literal["auto", "json_schema", "json_object", "off"] = typer.Option(
        "auto", "--structured", help="How the models are asked for JSON (the response_format mode)."
    ),
    isolation: str = config_option(SandboxConfig, "isolation", "--isolation"),
    allow_empty: bool = typer.Option(
        False,
        "--allow-empty",
        help="Exit 0 even when no trajectory was kept (default: exit 5, NOTHING_KEPT).",
    ),
    executor: str = typer.Option(
        "local",
        "--executor",
        help=EXECUTOR_HELP + " Here: each (folder, seed) unit's search runs on a node (its own clients and "
        "sandbox; folders at the same path on every node), --concurrency units per node.",
    ),
    ray_address: str | None = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
) -> None:
    """Explore dataset folders with MCTS and synthesize verified trajectories, QA and meta tasks."""
    from datadojo.synth.sailor import load_seeds
    from datadojo.synth.sailor.env import default_sandbox_config
    from datadojo.synth.sailor.seeds import SeedError

    spec = require_model(model)
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        raise typer.BadParameter(f"not a folder: {', '.join(missing)}", param_hint="FOLDER")
    try:
        seeds = load_seeds(seeds_file, only=only or None)
    except SeedError as exc:
        raise typer.BadParameter(str(exc), param_hint="--seeds/--only") from exc
    try:
        sandbox_config = default_sandbox_config(config.exec_timeout_s, isolation)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--isolation") from exc
    remote = cli_executor(executor, ray_address, concurrency)
    run = _explore(folders, seeds, spec, judge, out, config, sandbox_config, concurrency, structured, remote)
    if remote is not None:
        console.print(node_table(run.nodes, f"Per node ({run.executor})"))
    _show(run, out, allow_empty)


def _explore(
    folders: list[Path],
    seeds: list[Any],
    spec: str,
    judge: str | None,
    out: Path,
    config: SailorConfig,
    sandbox_config: Any,
    concurrency: int,
    structured: str,
    remote: Any = None,
) -> Any:
    """Run :func:`~datadojo.synth.sailor.run_sailor` with a progress bar; errors end the command (one line).

    ``remote`` (``--executor ray``): the nodes load the models from their specs; none is loaded here."""
    from datadojo.jsonl import JsonlError
    from datadojo.llm.base import LLMError
    from datadojo.llm.spec import load_backend
    from datadojo.sandbox.session import SandboxError
    from datadojo.synth.sailor import run_sailor

    async def go() -> object:
        policy: Any = spec if remote else load_backend(spec, concurrency=concurrency)
        judge_backend: Any = (
            (judge if remote else load_backend(judge, concurrency=concurrency)) if judge else policy
        )
        # A down server or wrong URL: one line and exit 3 at the first request, not after every request's
        # retries; an empty folder or bad seed first (exit 2: they need no server).
        for backend in {id(b): b for b in (policy, judge_backend) if not isinstance(b, str)}.values():
            backend.check_before_first_request()
        total = len(folders) * len(seeds)
        with progress_bar(console) as progress:
            bar = progress.add_task("exploring (folder × seed)", total=total)

            def on_unit(record: dict) -> None:
                progress.advance(bar)
                progress.console.print(
                    f"  {record['unit']}: {record['probes_run']} probes, kept {record['kept']}/"
                    f"{record['trajectories']}, {record['qa']} QA"
                )

            try:
                run = await run_sailor(
                    folders,
                    seeds,
                    policy=policy,
                    judge=judge_backend,
                    out=out,
                    config=config,
                    sandbox_config=sandbox_config,
                    concurrency=concurrency,
                    mode=structured,  # type: ignore[arg-type]
                    on_unit=on_unit,
                    executor=remote,
                )
                progress.update(bar, completed=total)
            finally:
                if not isinstance(policy, str):
                    await policy.aclose()
                if judge_backend is not policy and not isinstance(judge_backend, str):
                    await judge_backend.aclose()
                if remote is not None:
                    await remote.aclose()
        return run

    try:
        return asyncio.run(go())
    except KeyboardInterrupt:
        raise interrupted(f"finished units are kept in {out}") from None
    except (LLMError, SandboxError, OSError) as exc:  # exit 3 (model server), 4 (sandbox), 2 (a file)
        typer.echo(f"finished units are kept in {out}; rerun the same command to resume", err=True)
        raise error_exit(exc) from None
    except JsonlError as exc:  # a damaged output file met on resume: say which line, write nothing more
        console.print(f"[red]error:[/red] {exc}")
        console.print(
            f"the run folder {out} holds a damaged line (edited by hand, or another program wrote there); "
            "fix or delete that line, or write to a new --out"
        )
        raise typer.Exit(2) from None


def _show(run: Any, out: Path, allow_empty: bool) -> None:
    """The closing table per level; a run that kept nothing says why and exits 5 (unless allowed)."""
    s = run.summary
    table = Table(title=f"synth sailor → {out}", title_justify="left")
    table.add_column("level")
    for col in ("units", "nodes", "probes", "trajectories", "kept", "QA", "meta"):
        table.add_column(col, justify="right")
    for level, row in s["per_level"].items():
        if row["units"]:
            table.add_row(level, *(str(row[k]) for k in _TABLE_KEYS))
    table.add_row("all", *(str(s[k]) for k in _TABLE_KEYS))
    console.print(table)
    if s["removed"]:
        console.print("removed by QC: " + ", ".join(f"{k} {v}" for k, v in s["removed"].items()))
    console.print(
        f"{run.units_done} unit(s) explored, {run.units_skipped} already done; {s['requests']} LLM requests; "
        f"report: {out / 'report.html'}"
    )
    if not s["kept"]:
        from datadojo.errors import ExitCode
        from datadojo.synth.sailor.report import removal_reasons

        top = removal_reasons(out)[:3]
        reasons = "; ".join(f"{why} ({n})" for why, n in top) or "no reason recorded"
        console.print(
            f"[yellow]warning:[/yellow] 0 trajectories kept of {s['trajectories']}; top reasons: {reasons}. "
            f"See {out / 'report.html'}."
        )
        if not allow_empty:
            raise typer.Exit(int(ExitCode.NOTHING_KEPT))


def register(synth_app: typer.Typer) -> None:
    """Add ``sailor`` to ``datadojo synth``."""
    synth_app.command("sailor", help=_HELP)(sailor)

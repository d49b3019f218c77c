"""``datadojo corpus``: scan, filter and profile data files (``scan``, ``show``, ``overlap``).

Thin over :mod:`datadojo.corpus`: ``scan`` runs :func:`~datadojo.corpus.scan_corpus` with a progress bar
and prints accepted files per format and rejections per reason; ``show`` prints the profile text *d* of a
file or folder (or its JSON); ``overlap`` prints the header-overlap contamination ratio (DataMind App. H).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from datadojo.cli._executor import EXECUTOR_HELP, RAY_ADDRESS_HELP, cli_executor, node_table, on_executor
from datadojo.cli._options import SettingsGroup, settings_options
from datadojo.cli._ui import config_option, count_table
from datadojo.config import config_default, config_help
from datadojo.corpus.config import FilterConfig, OverlapConfig, ScanConfig

__all__ = ["register"]

corpus_app = typer.Typer(
    name="corpus",
    help="Load, filter and profile data files and dataset folders (DataMind §3.1 file collection).",
    no_args_is_help=True,
)


def _bound(value: str | None, name: str) -> int | None:
    if value is None or value.lower() in ("none", "off", ""):
        return None
    try:
        n = int(value)
    except ValueError as exc:
        raise typer.BadParameter(
            f"expected a whole number or 'none', got {value!r}", param_hint=name
        ) from exc
    if n < 0:
        raise typer.BadParameter("must be >= 0", param_hint=name)
    return n


#: The row bounds: flags of their own, as they also take 'none' (no bound); the other FilterConfig fields are
#: generated, and all of them can be set in the [filters] table of --config.
_BOUNDS = ("min_rows", "max_rows", "sqlite_min_rows", "sqlite_max_rows")


def _bound_option(name: str) -> Any:
    value = config_default(FilterConfig, name)
    text = config_help(FilterConfig, name, default=False).rstrip(".")
    shown = "none" if value is None else value
    return typer.Option(
        None, f"--{name.replace('_', '-')}", help=f"{text}; 'none' for no bound (default {shown}).",
        rich_help_panel="Settings (filters table of --config)",
    )  # fmt: skip


@corpus_app.command("scan")
@settings_options(
    SettingsGroup(ScanConfig, param="scan"),
    SettingsGroup(
        FilterConfig, param="filters", section="filters", exclude=_BOUNDS,
        flags={"dedupe": ("--dedupe/--no-dedupe",)},
    ),
)  # fmt: skip
def scan_cmd(
    scan: ScanConfig,
    filters: FilterConfig,
    paths: list[Path] = typer.Argument(..., help="Folders (walked recursively) and files to scan."),
    out: Path = typer.Option(
        Path("corpus.jsonl"), "--out", "-o", help="JSONL output, appended and resumable."
    ),
    min_rows: str | None = _bound_option("min_rows"),
    max_rows: str | None = _bound_option("max_rows"),
    sqlite_min_rows: str | None = _bound_option("sqlite_min_rows"),
    sqlite_max_rows: str | None = _bound_option("sqlite_max_rows"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON instead of tables."),
    executor: str = typer.Option("local", "--executor", help=EXECUTOR_HELP),
    ray_address: str | None = typer.Option(None, "--ray-address", help=RAY_ADDRESS_HELP),
    workers: int = typer.Option(
        1,
        "--workers",
        "-w",
        min=1,
        help="Worker processes of this machine that read and profile files (reading is CPU-bound: "
        "up to one per core helps; --executor local only).",
    ),
) -> None:
    """Filter and profile every file under PATHS into a corpus JSONL (one record per file).

    With `--workers N` the files are read and profiled by N processes of this machine; the records and
    OUT are those of a one-process scan (duplicates are still decided here, in file order).

    With `--executor ray` the files are read and profiled on the cluster's nodes (one worker per CPU),
    which must see them at the same paths; the records and OUT are those of a local scan.
    """
    from datadojo.config import ConfigError
    from datadojo.corpus import scan_corpus
    from datadojo.jsonl import JsonlError

    missing = [str(p) for p in paths if not p.exists() and not p.is_symlink()]
    if missing:
        raise typer.BadParameter(f"no such file or folder: {', '.join(missing)}", param_hint="PATHS")
    given = dict(zip(_BOUNDS, (min_rows, max_rows, sqlite_min_rows, sqlite_max_rows), strict=True))
    try:
        bounds = {n: _bound(v, f"--{n.replace('_', '-')}") for n, v in given.items() if v is not None}
        config = scan.replace(filters=filters.replace(**bounds))
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc
    console = Console(stderr=True)
    remote = cli_executor(executor, ray_address, 2)
    if workers > 1:
        if remote is not None:
            raise typer.BadParameter("--workers is for --executor local (Ray has one worker per CPU)")
        from datadojo.executor import ProcessExecutor

        remote = ProcessExecutor(workers)
    bar = Progress(
        TextColumn("[bold]scanning"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[current]}", style="dim"),
        TimeElapsedColumn(),
        console=console,
        disable=not progress,
        transient=False,
    )
    task_id = bar.add_task("scan", total=None, current="")
    try:
        with on_executor(remote, console), bar:
            summary = scan_corpus(
                paths,
                out,
                config,
                on_total=lambda n: bar.update(task_id, total=n),
                on_file=lambda p, _r: bar.update(task_id, advance=1, current=p.name[:40]),
                executor=remote,
            )
    except JsonlError as exc:
        console.print(f"[red]cannot resume from {out}: {exc}[/red]")
        raise typer.Exit(1) from exc
    nodes = [n.to_dict() for n in remote.node_stats()] if remote is not None else []
    if as_json:
        typer.echo(
            json.dumps(
                {
                    **summary.model_dump(),
                    "files_per_second": round(summary.files_per_second, 2),
                    **({"nodes": nodes} if nodes else {}),
                }
            )
        )
        return
    out_console = Console()
    out_console.print(
        count_table(
            summary.accepted_by_kind,
            "accepted per format",
            "files",
            title=f"Corpus scan → {out}",
            total=("total accepted", summary.accepted),
        )
    )
    out_console.print(
        count_table(
            summary.rejected_by_reason,
            "rejections per reason",
            "files",
            total=("total rejected", summary.rejected),
        )
    )
    if summary.unreadable:
        out_console.print(
            f"{summary.unreadable} unreadable file(s), corrupt or truncated (counted apart from the rejections):",
            markup=False,
            highlight=False,
        )
        for name, why in summary.unreadable_files.items():
            out_console.print(f"  {name}: {why}", markup=False, highlight=False)
    if nodes:
        out_console.print(node_table(nodes, "Per node (ray)"))
    out_console.print(
        f"{summary.seen} files found, {summary.processed} scanned, {summary.skipped} already in {out} "
        f"({summary.seconds:.1f} s, {summary.files_per_second:.1f} files/s)"
    )


@corpus_app.command("show")
def show_cmd(
    path: Path = typer.Argument(..., help="A data file or a dataset folder."),
    budget: int = typer.Option(4000, "--budget", "-b", min=50, help="Most characters of profile text."),
    as_json: bool = typer.Option(False, "--json", help="Print the full profile as JSON."),
) -> None:
    """Print the profile (metadata text d) of a file or folder; exit status 1 if a file cannot be read.

    A Zarr store or a Parquet dataset (a folder holding one dataset) is shown as one file. A corrupt file
    prints its profile (kind `unreadable`, the reason in `error`) and exits 1.
    """
    from datadojo.corpus import profile_file, profile_folder, render_file_profile, render_folder_profile

    if not path.exists() and not path.is_symlink():
        raise typer.BadParameter(f"no such file or folder: {path}", param_hint="PATH")
    from datadojo.cli.inputs import check_data_file

    check_data_file(path, "PATH")
    from datadojo.corpus.sniff import store_kind

    if path.is_dir() and store_kind(path) is None:
        folder = profile_folder(path)
        typer.echo(folder.model_dump_json(indent=2) if as_json else render_folder_profile(folder, budget))
        return
    fp = profile_file(path)
    typer.echo(fp.model_dump_json(indent=2) if as_json else render_file_profile(fp, budget))
    if fp.error and fp.kind not in ("readme", "metadata", "fasta", "genbank", "image", "text"):
        raise typer.Exit(1)


@corpus_app.command("overlap")
def overlap_cmd(
    train: list[Path] = typer.Option(..., "--train", help="Training corpus: corpus.jsonl, folders or files."),
    bench: list[Path] = typer.Option(..., "--bench", help="Benchmark: corpus.jsonl, folders or files."),
    unit: str = config_option(OverlapConfig, "unit"),
    match: str = config_option(OverlapConfig, "match"),
    threshold: float = config_option(OverlapConfig, "threshold"),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Header-overlap ratio between a training corpus and a benchmark (DataMind Appendix H)."""
    from datadojo.config import ConfigError
    from datadojo.corpus import collect_headers, header_overlap

    try:
        cfg = OverlapConfig(unit=unit, match=match, threshold=threshold)  # type: ignore[arg-type]
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from exc
    report = header_overlap(collect_headers(train), collect_headers(bench), cfg)
    if as_json:
        typer.echo(report.model_dump_json())
        return
    typer.echo(
        f"header overlap: {report.percent()} ({report.n_overlapping} of {report.n_bench} benchmark "
        f"{'tables' if report.unit == 'table' else 'column names'}; {report.n_train} training "
        f"{'tables' if report.unit == 'table' else 'names'}; match={report.match})"
    )
    for b, t, score in report.matches[:20]:
        typer.echo(f"  {b}  ~  {t}" + (f"  ({score:.2f})" if score < 1 else ""))


def register(app: typer.Typer) -> None:
    """Add the ``corpus`` command group to the ``datadojo`` app."""
    app.add_typer(corpus_app, name="corpus")

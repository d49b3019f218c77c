"""``datadojo score``: score a predictions file against a benchmark's scoring rule, no agent involved."""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from datadojo.bench import benchmark_names, get_benchmark
from datadojo.bench.base import RULES_DOC
from datadojo.cli._ui import error_exit
from datadojo.cli.inputs import check_input_file
from datadojo.eval.report import official_value
from datadojo.eval.scoring import ScoreReport, read_predictions, score_predictions

__all__ = ["register"]

_PREDICTIONS_HELP = (
    'JSONL predictions: records {"id": ..., "answer": "..."} (optional "sample" for repeated trials), '
    "or trajectories (task_id + final_answer), e.g. the output of `datadojo rollout`."
)


def rules_help() -> str:
    """Every benchmark's scoring rules, the default first, with the docs anchor listing their deviations."""
    lines = []
    for name in benchmark_names():
        bench = get_benchmark(name)
        for i, rule in enumerate(bench.rules or (bench.rule,)):
            default = " (default)" if i == 0 else ""
            lines.append(escape(f"{name} `{rule.name}`{default}: {rule.title} → {rule.doc}"))
    return "\n\n".join(lines)


def _parse_options(options: list[str]) -> dict[str, Any]:
    """``-o key=value`` pairs as loader keyword arguments (``true``/``false`` and integers are converted)."""
    out: dict[str, Any] = {}
    for opt in options:
        key, sep, value = opt.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected KEY=VALUE, got {opt!r}", param_hint="--option")
        low = value.strip().lower()
        parsed: Any = value
        if low in ("true", "false"):
            parsed = low == "true"
        elif low.lstrip("-").isdigit():
            parsed = int(low)
        out[key.strip().replace("-", "_")] = parsed
    return out


def _cut(value: Any, width: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _fmt(v: float | None, pct: bool = True) -> str:
    if v is None:
        return "n/a"
    return f"{v:.2%}" if pct else f"{v:.2f}"


def _print_report(console: Console, report: ScoreReport, wrong_only: bool) -> None:
    table = Table(title=f"{report.benchmark}: per-item results", show_lines=False)
    for col, kw in (("id", {}), ("trial", {"justify": "right"}), ("ok", {}), ("score", {"justify": "right"}),
                    ("answer", {}), ("gold", {}), ("why", {})):  # fmt: skip
        table.add_column(col, overflow="fold", **kw)
    shown = 0
    for item in report.items:
        if wrong_only and item.score.correct:
            continue
        shown += 1
        answer = item.prediction.answer if item.prediction is not None else None
        table.add_row(
            item.task.id,
            str(item.trial),
            "[green]✓[/green]" if item.score.correct else "[red]✗[/red]",
            f"{item.score.score:.3f}",
            _cut(answer if answer is not None else "—", 40),
            _cut(item.task.answer, 40),
            _cut(item.score.reason, 60),
        )
    if shown:
        console.print(table)
    rule = report.rule
    title = f"{report.benchmark}: totals under rule `{rule.name}`" if rule else f"{report.benchmark}: totals"
    totals = Table(title=title, show_header=True)
    totals.add_column("figure")
    totals.add_column("value", justify="right")
    if rule is not None:
        totals.add_row("scoring rule", f"{rule.name}: {rule.title}")
        totals.add_row("deviations from the benchmark's code", rule.doc)
    totals.add_row("tasks", str(report.n_tasks))
    totals.add_row("trials per task", str(report.n_trials))
    for key, value in report.totals.items():
        totals.add_row(key, official_value(key, value))
    s = report.summary
    totals.add_row("pass@1 (mean over trials)", _fmt(s.pass_at_1))
    for k, v in sorted(s.pass_at_k.items()):
        if k != 1:
            totals.add_row(f"pass@{k} (unbiased)", _fmt(v))
    if report.n_trials > 1:
        totals.add_row(f"any of {report.n_trials}", _fmt(s.any_of_n))
    if s.avg_turns is not None:
        totals.add_row("avg turns", _fmt(s.avg_turns, pct=False))
        totals.add_row("success rate (answered)", _fmt(s.success_rate))
    if s.avg_tokens is not None:
        totals.add_row("avg tokens", _fmt(s.avg_tokens, pct=False))
    totals.add_row("tasks without a prediction", str(len(report.missing_ids)))
    console.print(totals)
    if report.unknown_ids:
        sample = ", ".join(report.unknown_ids[:5]) + (" …" if len(report.unknown_ids) > 5 else "")
        console.print(
            f"[yellow]{len(report.unknown_ids)} prediction id(s) match no task and were ignored: {sample}[/yellow]"
        )


def register(app: typer.Typer) -> None:
    @app.command("score")
    def score(
        bench: str = typer.Argument(..., help=f"Benchmark: {', '.join(benchmark_names())}."),
        data: Path = typer.Option(..., "--data", help="The benchmark's files in their official layout."),
        predictions: Path = typer.Option(..., "--predictions", "-p", help=_PREDICTIONS_HELP),
        as_json: bool = typer.Option(False, "--json", help="Print the whole report as JSON on stdout."),
        wrong_only: bool = typer.Option(False, "--wrong-only", help="List only items not fully correct."),
        option: list[str] = typer.Option(
            [],
            "--option",
            help="Loader option KEY=VALUE, e.g. `--option lite=true` (DataBench), `--option split=dev`.",
        ),
        rule: str | None = typer.Option(
            None,
            "--rule",
            help="Scoring rule (default: the benchmark's first). Spider: `test-suite` or `set`; "
            "TableBench: `official` or `readme`. The list below names every rule.",
        ),
    ) -> None:
        """Score PREDICTIONS against BENCH with a named scoring rule; print per-item results and totals.

        Every total is reported with the rule that produced it. Rules, the default first, and the
        section of RULES_DOC that lists where each departs from the benchmark's own evaluation code:

        RULES
        """
        try:
            benchmark = get_benchmark(bench)
        except KeyError as exc:
            raise typer.BadParameter(str(exc.args[0]), param_hint="BENCH") from exc
        if rule is not None:
            try:
                benchmark = benchmark.with_rule(rule)
            except ValueError as exc:
                raise typer.BadParameter(str(exc), param_hint="--rule") from exc
        options = _parse_options(option)
        try:
            try:
                tasks = list(benchmark.load(data, require_files=False, **options))
            except TypeError as exc:  # an option this loader does not take
                raise typer.BadParameter(str(exc), param_hint="--option") from exc
            check_input_file(predictions, "predictions JSONL", "--predictions")
            preds = read_predictions(predictions)
            report = score_predictions(benchmark, tasks, preds)
        except OSError as exc:
            raise error_exit(exc) from exc
        if as_json:
            sys.stdout.write(json.dumps(report.to_dict(), ensure_ascii=False, default=str) + "\n")
            return
        _print_report(Console(), report, wrong_only)

    if score.__doc__:
        doc = inspect.cleandoc(score.__doc__)
        score.__doc__ = doc.replace("RULES_DOC", RULES_DOC).replace("RULES", rules_help())

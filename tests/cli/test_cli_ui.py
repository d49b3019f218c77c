"""The shared look of the commands: progress bar columns and count tables."""

from __future__ import annotations

import io

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

from datadojo.cli._ui import count_table, progress_bar


def _render(table: object) -> str:
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(table)
    return out.getvalue()


def test_progress_bar_columns_in_order() -> None:
    rate = TextColumn("{task.fields[rate]}")
    bar = progress_bar(Console(), "[bold]eval", rate, disable=True)
    kinds = [type(c) for c in bar.columns]
    assert kinds == [TextColumn, BarColumn, MofNCompleteColumn, TimeElapsedColumn, TextColumn]
    assert bar.columns[0].text_format == "[bold]eval" and bar.columns[-1] is rate
    assert bar.disable and not progress_bar(Console()).disable
    assert progress_bar(Console()).columns[0].text_format == "[bold]{task.description}"


def test_count_table_rows_and_total() -> None:
    text = _render(
        count_table({"csv": 3, "xlsx": 1}, "accepted per format", "files", title="Scan", total=("total", 5))
    )
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    assert lines[0] == "Scan"
    cells = [ln.replace("┃", "│").split("│")[1:3] for ln in lines if ln[0] in "│┃"]
    assert [(k.strip(), n.strip()) for k, n in cells] == [
        ("accepted per format", "files"),
        ("csv", "3"),
        ("xlsx", "1"),
        ("total", "5"),
    ]
    plain = _render(count_table({}, "reason", "files"))
    assert "total" not in plain and "reason" in plain

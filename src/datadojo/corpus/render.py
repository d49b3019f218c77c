"""Render a profile as prompt text within a character budget, degrading gracefully.

The metadata text *d* (DataMind §3.2, Step 1) goes into prompts, so it has to fit: a 3-column CSV and a
BIRD database with 60 tables, or a 900-column export, all get a description of at most ``budget_chars``.
Rendering tries successively coarser levels and returns the first that fits:

0. every column with its statistics and top values, 3 sample rows, the SQLite DDL;
1. fewer top values and sample rows;
2. short column statistics, 1 sample row;
3. one line per column, no samples, no DDL (keys stay in the table header);
4. one line per table: ``name (rows × cols): col type, col type → ref.table.col, …``;
5. table names with their shapes only.

Very wide tables show their first columns and name the rest; at the coarse levels tables are added until
the budget is reached and the rest are named. Only if even that does not fit is the text cut, marked
with ``…``. :func:`profile_text` is the one call the agent prompt needs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datadojo.corpus.folder import FolderProfile, profile_folder
from datadojo.corpus.profile import ColumnProfile, FileProfile, TableProfile, profile_file
from datadojo.corpus.tables import ReadOptions

__all__ = ["human_bytes", "profile_text", "render_file_profile", "render_folder_profile"]

_KIND_LABEL = {
    "csv": "CSV",
    "xlsx": "Excel workbook",
    "sqlite": "SQLite database",
    "parquet": "Parquet",
    "json": "JSON",
    "fasta": "FASTA",
    "genbank": "GenBank",
    "netcdf": "netCDF",
    "hdf5": "HDF5",
    "npy": "NumPy array",
    "npz": "NumPy archive",
    "fits": "FITS",
    "zarr": "Zarr store",
    "parquet_dataset": "Parquet dataset",
    "unreadable": "unreadable file",
    "image": "image",
    "readme": "documentation",
    "metadata": "metadata",
    "text": "text",
    "archive": "archive",
}


_CUT = "\0cut"  # marks a compact rendering that had to leave tables out


@dataclass(frozen=True)
class _Level:
    max_columns: int
    sample_rows: int
    top_k: int
    stats: str  # "full" | "short" | "none"
    ddl: bool
    compact: bool = False
    names_only: bool = False


_LEVELS = (
    _Level(60, 3, 5, "full", True),
    _Level(40, 2, 3, "full", True),
    _Level(30, 1, 2, "short", True),
    _Level(25, 0, 0, "short", False),
    _Level(40, 0, 0, "none", False, compact=True),
    _Level(0, 0, 0, "none", False, compact=True, names_only=True),
)


def human_bytes(n: int) -> str:
    """``1536`` → ``"1.5 KB"``."""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:.4e}"
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10_000 else str(v)
    return str(v)


def _rows(t: TableProfile) -> str:
    return f"{'≥' if t.n_rows_is_lower_bound else ''}{t.n_rows:,} rows"


def _type_label(c: ColumnProfile) -> str:
    label = c.type
    if c.declared_type and c.declared_type.lower() not in (c.type, ""):
        label += f"/{c.declared_type}"
    return label


def _column_line(c: ColumnProfile, level: _Level) -> str:
    head = f"  - {c.name}: {_type_label(c)}, {c.role}"
    if c.primary_key:
        head += ", primary key"
    if c.foreign_key:
        head += f", → {c.foreign_key}"
    bits: list[str] = []
    if level.stats == "full":
        bits.append(f"{c.n_distinct:,} distinct" + (" (unique)" if c.unique and c.n_distinct > 1 else ""))
    if c.min is not None and c.max is not None:
        rng = f"{_num(c.min)} … {_num(c.max)}"
        if level.stats == "full" and c.mean is not None and c.type == "float":
            rng += f", mean {_num(c.mean)}"
        bits.append(rng)
    elif c.top and level.top_k:
        bits.append("top " + ", ".join(f"{v or '∅'} ({n})" for v, n in c.top[: level.top_k]))
    elif level.stats == "short" and c.n_distinct:
        bits.append(f"{c.n_distinct:,} distinct")
    if c.n_missing:
        bits.append(
            f"{c.missing_ratio:.0%} missing" if c.missing_ratio >= 0.005 else f"{c.n_missing} missing"
        )
    return head + (" · " + " · ".join(bits) if bits else "")


def _more_columns(t: TableProfile, shown: int) -> str:
    rest = [c.name for c in t.columns[shown:]]
    names = ", ".join(rest)
    if len(names) > 300:
        names = names[:299] + "…"
    return f"  … and {len(rest)} more columns: {names}"


def _table_header(t: TableProfile) -> str:
    what = "Sheet" if t.source_sheet else "Table"
    bits = [_rows(t), f"{t.n_columns} columns"]
    if t.header_rows > 1:
        bits.append(f"{t.header_rows} header rows joined")
    if t.primary_key:
        bits.append(f"primary key ({', '.join(t.primary_key)})")
    if t.foreign_keys:
        bits.append("foreign keys " + "; ".join(t.foreign_keys))
    if t.n_rows_profiled and (t.n_rows_profiled < t.n_rows or t.n_rows_is_lower_bound):
        bits.append(f"statistics over the first {t.n_rows_profiled:,} rows")
    return f"{what} {t.name} ({', '.join(bits)})"


def _table_block(t: TableProfile, level: _Level) -> list[str]:
    lines = [_table_header(t)]
    cols = t.columns[: level.max_columns]
    lines.extend(_column_line(c, level) for c in cols)
    if len(t.columns) > len(cols):
        lines.append(_more_columns(t, len(cols)))
    if level.sample_rows and t.sample_rows:
        width = min(len(cols), 12)
        lines.append("  Sample rows:")
        lines.append(
            "    " + " | ".join(c.name for c in t.columns[:width]) + (" | …" if t.n_columns > width else "")
        )
        for row in t.sample_rows[: level.sample_rows]:
            lines.append("    " + " | ".join(row[:width]) + (" | …" if len(row) > width else ""))
    return lines


def _compact_line(t: TableProfile, level: _Level) -> str:
    parts = []
    for c in t.columns[: level.max_columns]:
        text = f"{c.name} {c.declared_type or c.type}"
        if c.primary_key:
            text += " PK"
        if c.foreign_key:
            text += f" → {c.foreign_key}"
        parts.append(text)
    more = f", … {t.n_columns - level.max_columns} more" if t.n_columns > level.max_columns else ""
    return f"{t.name} ({_rows(t)} × {t.n_columns} cols): {', '.join(parts)}{more}"


def _file_header(fp: FileProfile) -> str:
    label = _KIND_LABEL.get(fp.kind, fp.kind)
    bits = [label, human_bytes(fp.size_bytes)]
    if fp.encoding and fp.encoding not in ("utf-8", "utf-8-sig"):
        bits.append(f"encoding {fp.encoding}")
    if fp.delimiter and fp.delimiter != ",":
        bits.append("tab-separated" if fp.delimiter == "\t" else f"delimiter {fp.delimiter!r}")
    if fp.tables and len(fp.tables) > 1:
        bits.append(f"{len(fp.tables)} {'sheets' if fp.kind == 'xlsx' else 'tables'}")
    return f"File: {fp.name} ({', '.join(bits)})"


def _summary_lines(summary: dict[str, Any]) -> list[str]:
    lines = []
    for key, value in summary.items():
        if key == "first_lines" and isinstance(value, list):
            lines.append("  first lines:")
            lines.extend(f"    {str(v)[:160]}" for v in value)
            continue
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            text = ", ".join(value)
        elif isinstance(value, dict | list):
            text = json.dumps(value, ensure_ascii=False, default=str)
        else:
            text = str(value)
        if len(text) > 300:
            text = text[:299] + "…"
        lines.append(f"  {key.replace('_', ' ')}: {text}")
    return lines


def _render_level(fp: FileProfile, level: _Level, budget: int) -> str:
    lines = [_file_header(fp)]
    if fp.error:
        what = "cannot be read" if fp.kind == "unreadable" else "cannot be read as a table"
        lines.append(f"  {what}: {fp.error}")
    if fp.summary:
        lines.extend(_summary_lines(fp.summary))
    if not fp.tables:
        return "\n".join(lines)
    if level.ddl and any(t.ddl for t in fp.tables):
        lines.append("Schema:")
        lines.extend(t.ddl for t in fp.tables if t.ddl)
    if not level.compact:
        for t in fp.tables:
            lines.extend(_table_block(t, level))
        if fp.warnings and level.stats == "full":
            lines.append("Notes: " + "; ".join(fp.warnings[:3]))
        return "\n".join(lines)
    if level.names_only:
        shapes = ", ".join(
            f"{t.name} {'≥' if t.n_rows_is_lower_bound else ''}{t.n_rows}×{t.n_columns}" for t in fp.tables
        )
        lines.append(f"Tables (rows×columns): {shapes}")
        return "\n".join(lines)
    used = sum(len(x) + 1 for x in lines)
    for i, t in enumerate(fp.tables):
        line = _compact_line(t, level)
        rest = fp.tables[i:]
        if used + len(line) + 1 > budget:
            names = ", ".join(r.name for r in rest)
            note = f"… and {len(rest)} more tables: {names}"
            room = max(budget - used - 1, 40)
            lines.append(note if len(note) <= room else note[: room - 1] + "…")
            return "\n".join(lines) + _CUT
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def _fit(text: str, budget: int) -> str:
    return text if len(text) <= budget else text[: max(budget - 1, 0)] + "…"


def render_file_profile(fp: FileProfile, budget_chars: int = 4000) -> str:
    """The profile as text of at most ``budget_chars`` characters: the most detailed level that fits
    (levels in the module docstring), cut with ``…`` only when even table names do not fit."""
    if budget_chars <= 0:
        raise ValueError(f"budget_chars must be positive, got {budget_chars}")
    if isinstance(fp.summary.get("variables"), list) and not fp.tables:
        from datadojo.corpus.render_arrays import render_arrays

        return _fit(render_arrays(fp, _file_header(fp), budget_chars), budget_chars)
    fallback = None
    for level in _LEVELS:
        text = _render_level(fp, level, budget_chars)
        if text.endswith(_CUT):  # fits only because tables were left out: a coarser level may list them all
            fallback = fallback or text[: -len(_CUT)]
            continue
        if len(text) <= budget_chars:
            return text
    if fallback is not None and len(fallback) <= budget_chars:
        return fallback
    return _fit(text, budget_chars)


def _tree_lines(folder: FolderProfile, per_dir: int) -> list[str]:
    lines = []
    shown_in: dict[str, int] = {}
    hidden_in: dict[str, list[str]] = {}
    for e in folder.entries:
        parent = e.path.rsplit("/", 1)[0] if "/" in e.path else ""
        indent = "  " * (e.depth + 1)
        if e.is_dir:
            link = " (link, not followed)" if e.is_symlink else ""
            lines.append(f"{indent}{e.path.rsplit('/', 1)[-1]}/  {human_bytes(e.size)}{link}")
            continue
        n = shown_in.get(parent, 0)
        if n < per_dir:
            lines.append(f"{indent}{e.path.rsplit('/', 1)[-1]}  {human_bytes(e.size)}  {e.kind}")
            shown_in[parent] = n + 1
        else:
            hidden_in.setdefault(parent, []).append(e.kind)
            if len(hidden_in[parent]) == 1:
                lines.append(f"\0{parent}")
    out = []
    for line in lines:
        if line.startswith("\0"):
            parent = line[1:]
            kinds = hidden_in[parent]
            counts: dict[str, int] = {}
            for k in kinds:
                counts[k] = counts.get(k, 0) + 1
            depth = parent.count("/") + 1 if parent else 0
            detail = ", ".join(f"{k} {n}" for k, n in sorted(counts.items(), key=lambda kv: -kv[1]))
            out.append(f"{'  ' * (depth + 1)}… {len(kinds)} more files ({detail})")
        else:
            out.append(line)
    return out


def _water(needs: list[int], budget: int) -> list[int]:
    """Max-min fair split of ``budget`` over ``needs`` (water filling): nobody gets more than it needs,
    and what the small ones leave goes to the others."""
    out = [0] * len(needs)
    left = budget
    todo = sorted(range(len(needs)), key=lambda i: needs[i])
    while todo:
        fair = max(left // len(todo), 0)
        i = todo[0]
        if needs[i] > fair:
            for j in todo:
                out[j] = fair
            break
        out[i] = needs[i]
        left -= needs[i]
        todo.pop(0)
    return out


def _file_shares(files: list[FileProfile], budget: int) -> list[int]:
    """Each file's budget within a folder profile, budgeted as a whole (issue 29).

    First every file gets its *core*: for an array file every variable's core line (name, dims, dtype,
    units, long name), for another file up to 300 characters; then what is left is split fairly over
    the details each file still lacks, so a README of 200 characters leaves its share to the netCDF file
    beside it. When even the cores do not fit, the budget is split fairly over the cores.
    """
    from datadojo.corpus.render_arrays import core_text

    overhead = [len(fp.path) + 13 for fp in files]
    full = [len(render_file_profile(fp, max(budget, 80))) + o for fp, o in zip(files, overhead, strict=True)]
    core = []
    for fp, o, f in zip(files, overhead, full, strict=True):
        if isinstance(fp.summary.get("variables"), list) and not fp.tables:
            core.append(min(f, len(core_text(fp, _file_header(fp))) + o))
        else:
            core.append(min(f, 300 + o))
    if sum(core) > budget:
        return [max(sh, 120) for sh in _water(core, budget)]
    extra = _water([f - c for f, c in zip(full, core, strict=True)], budget - sum(core))
    return [c + e for c, e in zip(core, extra, strict=True)]


def render_folder_profile(folder: FolderProfile, budget_chars: int = 8000) -> str:
    """A folder profile as text: header, kinds, the tree (≤ 40 % of the budget), then file profiles."""
    if budget_chars <= 0:
        raise ValueError(f"budget_chars must be positive, got {budget_chars}")
    head = [
        f"Folder: {folder.name} ({folder.n_files} files in {folder.n_dirs} folders, {human_bytes(folder.total_bytes)})",
        "Kinds: " + (", ".join(f"{k} {n}" for k, n in folder.kinds.items()) or "none"),
    ]
    head.extend(f"Note: {w}" for w in folder.warnings)
    tree_budget = int(budget_chars * 0.4)
    tree: list[str] = []
    for per_dir in (25, 10, 4, 1, 0):
        tree = _tree_lines(folder, per_dir)
        if sum(len(x) + 1 for x in tree) <= tree_budget:
            break
    tree_text = _fit("\n".join(["Tree:", *tree]), tree_budget)
    text = "\n".join(head) + "\n" + tree_text
    remaining = budget_chars - len(text) - 1
    if folder.files and remaining > 120:
        n = len(folder.files)
        shares = _file_shares(folder.files, remaining)
        parts = []
        used = 0
        for i, fp in enumerate(folder.files):
            block = f"### {fp.path}\n" + render_file_profile(fp, max(shares[i] - len(fp.path) - 5, 80))
            if used + len(block) + 1 > remaining:
                parts.append(f"… {n - i} more file profiles omitted for the budget")
                break
            parts.append(block)
            used += len(block) + 1
        text += "\nFiles:\n" + "\n".join(parts)
    return _fit(text, budget_chars)


def profile_text(path: str | Path, budget_chars: int = 4000, *, options: ReadOptions | None = None) -> str:
    """The metadata text *d* of a data file or dataset folder, at most ``budget_chars`` characters.

    This is the call for prompts (DataMind §3.2 Step 1; the agent's system prompt)::

        from datadojo.corpus import profile_text
        d = profile_text("shop.sqlite", budget_chars=3000)

    A file that cannot be read still yields a short text naming the problem, so a prompt never fails on
    a bad data file.
    """
    from datadojo.corpus.sniff import store_kind

    p = Path(path)
    if p.is_dir() and store_kind(p) is None:  # a Zarr store or Parquet dataset is one file's profile
        return render_folder_profile(profile_folder(p, options=options), budget_chars)
    return render_file_profile(profile_file(p, options=options), budget_chars)

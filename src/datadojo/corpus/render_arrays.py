"""Render an array-format summary (:mod:`datadojo.corpus.arrays`) as text, budgeted as a whole.

Why a budget for the whole text rather than a cut per line: a cut per line (the old 300 characters of a
``variables:`` line) drops whole variables — ``tas`` in K, all of ``pr`` — from the agent's prompt while
most of the budget is unused. Here the order of importance decides what goes first:

1. every variable with its dims or shape, dtype, units and long name, with all of its attributes beneath;
2. the same with only the attributes that carry meaning (standard_name, cell_methods, fill values,
   scale/offset, range, chunking, compression, compound fields…);
3. one core line per variable for *all* variables, then those meaningful details, variable by variable,
   while the budget lasts (the rest named: ``corpus show --json`` has them all);
4. core lines until the budget is spent, then ``… N more variables: names``.

The first that fits is returned.
"""

from __future__ import annotations

import json
from typing import Any

from datadojo.corpus.profile import FileProfile

__all__ = ["KEY_ATTRS", "core_line", "core_text", "detail_line", "render_arrays"]

#: Attributes shown at the "meaningful details" levels (all attributes at the most detailed level).
KEY_ATTRS = (
    "standard_name",
    "cell_methods",
    "_FillValue",
    "missing_value",
    "scale_factor",
    "add_offset",
    "valid_range",
    "valid_min",
    "valid_max",
    "calendar",
    "axis",
    "positive",
    "NX_class",
    "type",
    "BSCALE",
    "BZERO",
    "CTYPE1",
    "CTYPE2",
)
_GLOBAL_KEYS = ("title", "Conventions", "institution", "source", "history", "NX_class", "TELESCOP", "OBJECT")


def _num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.5g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}" if abs(v) >= 10_000 else str(v)
    return str(v)


def _value(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_num(x) for x in v) + "]"
    if isinstance(v, dict):
        return json.dumps(v, ensure_ascii=False, default=str)
    return _num(v)


def core_line(var: dict[str, Any]) -> str:
    """``  - tas(time, lat, lon) float32 [K] "Near-Surface Air Temperature"``: what a variable is."""
    name = var["name"]
    shape = var.get("shape") or []
    if var.get("dims"):
        where = f"{name}({', '.join(var['dims'])})"
    else:
        where = f"{name} [{'×'.join(_num(n) for n in shape)}]" if shape else f"{name} (scalar)"
    text = f"  - {where} {var.get('dtype', '')}"
    if "units" in var:
        text += f" [{var['units']}]"
    if "long_name" in var:
        text += f' "{var["long_name"]}"'
    if var.get("coordinate"):
        text += " (coordinate)"
    return text


def _range_text(r: dict[str, Any]) -> str:
    if "min" not in r:
        return f"no valid values in the first {_num(r.get('sampled', 0))}" if "sampled" in r else ""
    text = f"range {_num(r['min'])} … {_num(r['max'])}"
    extra = []
    if "dates" in r:
        extra.append(f"{r['dates'][0]} … {r['dates'][1]}")
    if r.get("mean") is not None:
        extra.append(f"mean {_num(r['mean'])}")
    if "sampled" in r and r.get("sampled", 0) < r.get("of", 0):
        extra.append(f"first {_num(r['sampled'])} of {_num(r['of'])} values")
    if r.get("missing"):
        extra.append(f"{_num(r['missing'])} missing")
    if r.get("from"):
        extra.append(str(r["from"]))
    return text + (f" ({', '.join(extra)})" if extra else "")


def detail_line(var: dict[str, Any], *, all_attrs: bool) -> str:
    """The details of one variable on one line (``""`` when it has none at that level)."""
    bits: list[str] = []
    attrs = var.get("attrs", {})
    for k, v in attrs.items():
        if all_attrs or k in KEY_ATTRS:
            bits.append(f"{k} {_value(v)}")
    if "fill_value" in var:
        bits.append(f"fill {_value(var['fill_value'])}")
    if var.get("range"):
        rt = _range_text(var["range"])
        if rt:
            bits.append(rt)
    if var.get("fields"):
        fields = var["fields"] if all_attrs else var["fields"][:20]
        more = len(var["fields"]) - len(fields)
        bits.append(
            "fields "
            + ", ".join(
                f"{f['name']} {f.get('dtype', '')}" + (f" [{f['units']}]" if "units" in f else "")
                for f in fields
            )
            + (f", … {more} more" if more else "")
        )
    if var.get("chunks"):
        bits.append("chunks " + "×".join(_num(c) for c in var["chunks"]))
    if var.get("compression"):
        bits.append(str(var["compression"]))
    if var.get("unlimited_axes"):
        bits.append("unlimited axes " + ", ".join(map(str, var["unlimited_axes"])))
    for k in ("order", "note"):
        if var.get(k):
            bits.append(str(var[k]))
    return "      " + " · ".join(bits) if bits else ""


def _head(s: dict[str, Any], level: int) -> list[str]:
    lines = []
    if s.get("format"):
        lines.append(f"  format: {s['format']}")
    dims = s.get("dimensions") or {}
    if dims:
        unl = set(s.get("unlimited", []))
        lines.append(
            "  dimensions: "
            + ", ".join(f"{k}={_num(n)}" + (" (unlimited)" if k in unl else "") for k, n in dims.items())
        )
    if s.get("partitions"):
        lines.append(
            "  partitions: "
            + "; ".join(f"{k} = {', '.join(map(str, v))}" for k, v in s["partitions"].items())
        )
    attrs = s.get("attributes") or {}
    if attrs and level < 3:
        keys = list(attrs) if level == 0 else [k for k in attrs if k in _GLOBAL_KEYS or level == 1][:8]
        if s.get("format", "").startswith(("Parquet", "NumPy")):
            keys = list(attrs)
        if keys:
            lines.append("  attributes: " + " · ".join(f"{k} {_value(attrs[k])}" for k in keys))
    for note in s.get("notes", []):
        lines.append(f"  note: {note}")
    if s.get("note"):
        lines.append(f"  note: {s['note']}")
    return lines


def _groups(s: dict[str, Any], level: int) -> list[str]:
    groups = s.get("groups") or []
    if not groups or level >= 3:
        return []
    parts = []
    for g in groups:
        attrs = g.get("attrs", {})
        shown = {k: v for k, v in attrs.items() if level == 0 or k in KEY_ATTRS or k in ("units",)}
        if shown and level < 2:
            parts.append(f"{g['name']} (" + ", ".join(f"{k} {_value(v)}" for k, v in shown.items()) + ")")
        else:
            parts.append(g["name"])
    return ["  groups: " + "; ".join(parts)]


def _label(s: dict[str, Any]) -> str:
    fmt = str(s.get("format", ""))
    noun = "columns" if fmt.startswith("Parquet") else "HDUs" if fmt == "FITS" else "variables"
    n = len(s["variables"]) + int(s.get("variables_not_described", 0))
    return f"  {noun} ({n}):"


def _tail(s: dict[str, Any]) -> list[str]:
    n = s.get("variables_not_described")
    return [f"  … {n} more variables not described (limit per file)"] if n else []


def _size(lines: list[str]) -> int:
    return sum(len(x) + 1 for x in lines) - 1 if lines else 0


def core_text(fp: FileProfile, header: str) -> str:
    """The profile with every variable's core line and no details: what a folder profile grants first."""
    top = [header] + ([f"  cannot be read: {fp.error}"] if fp.error else [])
    s = fp.summary
    return "\n".join([*top, *_head(s, 3), _label(s), *(core_line(v) for v in s["variables"]), *_tail(s)])


def render_arrays(fp: FileProfile, header: str, budget: int) -> str:
    """The text of an array-format profile within ``budget`` characters (levels in the module docstring)."""
    s = fp.summary
    top = [header]
    if fp.error:
        top.append(f"  cannot be read: {fp.error}")
    variables: list[dict[str, Any]] = s["variables"]
    for level, all_attrs in ((0, True), (1, False)):
        lines = [*top, *_head(s, level), *_groups(s, level), _label(s)]
        for v in variables:
            lines.append(core_line(v))
            d = detail_line(v, all_attrs=all_attrs)
            if d:
                lines.append(d)
        lines.extend(_tail(s))
        if _size(lines) <= budget:
            return "\n".join(lines)
    lines = [*top, *_head(s, 2), *_groups(s, 2), _label(s), *(core_line(v) for v in variables), *_tail(s)]
    if _size(lines) <= budget:
        details = [(v["name"], detail_line(v, all_attrs=False)) for v in variables]
        details = [(n, d) for n, d in details if d]
        if details:
            lines.append("  details:")
            left = budget - _size(lines)
            for i, (name, d) in enumerate(details):
                entry = f"    {name}: {d.strip()}"
                rest = len(details) - i
                note = f"    … details of {rest} more in `corpus show --json`"
                if len(entry) + 1 + (len(note) + 1 if rest > 1 else 0) > left:
                    if len(note) + 1 <= left:
                        lines.append(note)
                    break
                lines.append(entry)
                left -= len(entry) + 1
            if lines[-1] == "  details:":
                lines.pop()
        return "\n".join(lines)
    lines = [*top, *_head(s, 3), _label(s)]
    for i, v in enumerate(variables):
        line = core_line(v)
        reserve = 0 if i == len(variables) - 1 else 60  # room for the "… N more" line
        if _size([*lines, line]) + reserve > budget:
            rest = variables[i:]
            note = f"  … {len(rest)} more: " + ", ".join(r["name"] for r in rest)
            room = budget - _size(lines) - 1
            lines.append(note if len(note) <= room else note[: max(room - 1, 0)] + "…")
            break
        lines.append(line)
    return "\n".join(lines)

"""Training curves as a self-contained SVG (``<run>/curves.svg``), drawn without matplotlib.

One small panel per metric (γ, SFT loss, policy loss, reward, entropy, …) in a grid, each a polyline over
the step axis with its minimum and maximum labelled. SVG needs no plotting dependency, opens in any browser,
and diffs as text. Missing values (a metric not logged at some step) leave gaps rather than zeros.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from datadojo.tmpfiles import temp_sibling

__all__ = ["DEFAULT_RL_KEYS", "DEFAULT_SFT_KEYS", "render_svg", "write_curves"]

DEFAULT_RL_KEYS: tuple[str, ...] = (
    "gamma",
    "sft_loss",
    "policy_loss",
    "reward_mean",
    "entropy",
    "frac_groups_filtered",
    "void_rate",
    "clip_frac",
)
DEFAULT_SFT_KEYS: tuple[str, ...] = ("sft_loss", "lr", "grad_norm", "tokens_per_s")

_W, _H = 300, 170  # one panel
_PAD_L, _PAD_R, _PAD_T, _PAD_B = 52, 12, 26, 28
_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e4 or abs(v) < 1e-3:
        return f"{v:.2e}"
    return f"{v:.4g}"


def _series(records: Sequence[dict[str, Any]], key: str) -> list[tuple[float, float] | None]:
    out: list[tuple[float, float] | None] = []
    for r in records:
        v, s = r.get(key), r.get("step")
        if (
            isinstance(v, bool)
            or not isinstance(v, int | float)
            or not isinstance(s, int | float)
            or not math.isfinite(v)
        ):
            out.append(None)
        else:
            out.append((float(s), float(v)))
    return out


def _panel(key: str, points: list[tuple[float, float] | None], x0: int, y0: int, color: str) -> list[str]:
    parts = [
        f'<g transform="translate({x0},{y0})">',
        f'<rect x="0" y="0" width="{_W}" height="{_H}" fill="#fff" stroke="#ddd"/>',
        f'<text x="{_W / 2}" y="16" text-anchor="middle" font-size="12" font-weight="bold">{escape(key)}</text>',
    ]
    present = [p for p in points if p is not None]
    if not present:
        parts.append(
            f'<text x="{_W / 2}" y="{_H / 2}" text-anchor="middle" font-size="11" fill="#999">no data</text>'
        )
        parts.append("</g>")
        return parts
    xs, ys = [p[0] for p in present], [p[1] for p in present]
    xmin, xmax, ymin, ymax = min(xs), max(xs), min(ys), max(ys)
    if xmax == xmin:
        xmax = xmin + 1
    if ymax == ymin:
        ymin, ymax = ymin - 0.5, ymax + 0.5
    pw, ph = _W - _PAD_L - _PAD_R, _H - _PAD_T - _PAD_B

    def sx(x: float) -> float:
        return _PAD_L + (x - xmin) / (xmax - xmin) * pw

    def sy(y: float) -> float:
        return _PAD_T + (1 - (y - ymin) / (ymax - ymin)) * ph

    parts += [
        f'<line x1="{_PAD_L}" y1="{_PAD_T + ph}" x2="{_PAD_L + pw}" y2="{_PAD_T + ph}" stroke="#888"/>',
        f'<line x1="{_PAD_L}" y1="{_PAD_T}" x2="{_PAD_L}" y2="{_PAD_T + ph}" stroke="#888"/>',
        f'<text x="{_PAD_L - 4}" y="{_PAD_T + 4}" text-anchor="end" font-size="10">{_fmt(ymax)}</text>',
        f'<text x="{_PAD_L - 4}" y="{_PAD_T + ph}" text-anchor="end" font-size="10">{_fmt(ymin)}</text>',
        f'<text x="{_PAD_L}" y="{_H - 8}" font-size="10">{_fmt(xmin)}</text>',
        f'<text x="{_PAD_L + pw}" y="{_H - 8}" text-anchor="end" font-size="10">step {_fmt(xmax)}</text>',
    ]
    run: list[str] = []
    segments: list[list[str]] = []
    for p in points:
        if p is None:
            if run:
                segments.append(run)
            run = []
            continue
        run.append(f"{sx(p[0]):.1f},{sy(p[1]):.1f}")
    if run:
        segments.append(run)
    for seg in segments:
        if len(seg) == 1:
            x, y = seg[0].split(",")
            parts.append(f'<circle cx="{x}" cy="{y}" r="2" fill="{color}"/>')
        else:
            parts.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{" ".join(seg)}"/>'
            )
    parts.append("</g>")
    return parts


def render_svg(
    records: Sequence[dict[str, Any]], keys: Sequence[str], *, title: str = "", columns: int = 2
) -> str:
    """An SVG document with one panel per key of ``keys`` over the records' ``step``."""
    if columns < 1:
        raise ValueError(f"columns must be >= 1, got {columns}")
    records = sorted((r for r in records if isinstance(r.get("step"), int | float)), key=lambda r: r["step"])
    rows = max(1, math.ceil(len(keys) / columns))
    top = 30 if title else 0
    width, height = columns * (_W + 10) + 10, rows * (_H + 10) + 10 + top
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
        f'<rect width="{width}" height="{height}" fill="#fafafa"/>',
    ]
    if title:
        parts.append(
            f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>'
        )
    for i, key in enumerate(keys):
        r, c = divmod(i, columns)
        parts += _panel(
            key,
            _series(records, key),
            10 + c * (_W + 10),
            top + 10 + r * (_H + 10),
            _COLORS[i % len(_COLORS)],
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def write_curves(
    records: Sequence[dict[str, Any]], path: str | Path, keys: Sequence[str], *, title: str = ""
) -> Path:
    """Write :func:`render_svg` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    tmp.write_text(render_svg(records, keys, title=title), encoding="utf-8")
    os.replace(tmp, path)
    return path

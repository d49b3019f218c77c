"""Small SVG chart blocks for reports: a line chart and a grouped bar chart, as inline SVG strings.

Reports are self-contained HTML with no plotting dependency at run time (as :mod:`datadojo.train.plots`
and the eval report's bars), so the charts are drawn here from a few primitives. Both charts place every
point through one :class:`Axis` each way, which the tests use to check that ticks and known points sit at
the right coordinates.

* :func:`line_chart_svg` — series of ``(x, y)`` points (the papers' curves: EnvLunch Fig. 1's score over the
  label budget, DataMind Figs. 6–7's reward and entropy over training steps). The x-axis is logarithmic
  when the positive x values span at least two decades (label budgets 8…2048); a 0 on a log axis (EnvLunch:
  "0 denotes evaluation without downstream fine-tuning") sits at the left edge with its own tick. A series
  may carry a band (Fig. 1's "shaded bands span the corresponding min–max" over seeds), drawn under its line.
* :func:`bar_chart_svg` — horizontal bars (label, value): the eval report's per-category scores, the funnels.
* :func:`histogram_svg` — counts of small integers (turns per trial).
* :func:`grouped_bar_chart_svg` — one group per category (a benchmark), one bar per series (a variant),
  each bar labelled with its value (DataMind Fig. 4's curation strategies, SciDataSailor's ablations).
"""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from datadojo.runs.html import escape as _e

__all__ = [
    "COLORS",
    "LAYOUT",
    "Axis",
    "bar_chart_svg",
    "grouped_bar_chart_svg",
    "histogram_svg",
    "line_chart_svg",
    "nice_ticks",
    "wrap_label",
    "x_axis_for",
]

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")

#: Plot area margins (px) of both charts: left, right (the legend lives there), top, bottom.
LAYOUT = {"left": 60, "right": 170, "top": 34, "bottom": 46}

#: On a log x-axis with a 0, the fraction of the plot width between the 0 tick and the smallest positive x.
ZERO_GAP = 0.1

Point = tuple[float, float | None]
#: One x of a band: ``(x, lo, hi)``.
BandPoint = tuple[float, float, float]


#: Characters per line of a wrapped label (bar labels, legend names); a label is never cut short.
LABEL_LINE_CHARS = 30
#: Width in pixels of one character at the charts' 11–12 px fonts (a generous estimate for widening).
CHAR_PX = 7.0
#: Pixels between the lines of a wrapped label.
LINE_PX = 13


def wrap_label(label: str, width: int = LABEL_LINE_CHARS) -> list[str]:
    """``label`` on lines of at most ``width`` characters, broken at spaces (a longer word on its own
    lines): category and arm names are shown whole, never cut to ``name…`` (their full text also goes in
    the ``<title>`` tooltip)."""
    return textwrap.wrap(label, width, break_on_hyphens=False) or [label]


def _label_text(lines: Sequence[str], x: float, y: float, attrs: str) -> str:
    """A ``<text>`` at ``y``; a wrapped label as one ``<tspan>`` per line, each :data:`LINE_PX` below."""
    if len(lines) == 1:
        return f'<text x="{x:.1f}" y="{y:.1f}" {attrs}>{_e(lines[0])}</text>'
    spans = "".join(
        f'<tspan x="{x:.1f}" dy="{0 if i == 0 else LINE_PX}">{_e(line)}</tspan>'
        for i, line in enumerate(lines)
    )
    return f'<text x="{x:.1f}" y="{y:.1f}" {attrs}>{spans}</text>'


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if float(v).is_integer() and abs(v) < 1e6:
        return str(int(v))
    if abs(v) >= 1e4 or abs(v) < 1e-3:
        return f"{v:.1e}"
    return f"{v:.3g}"


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering ``[lo, hi]`` (steps of 1, 2 or 5 × 10^k)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [0.0]
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, n - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t <= hi + step * 1e-9:
        if t >= lo - step * 1e-9:
            ticks.append(round(t, 12))
        t += step
    return ticks


@dataclass(frozen=True)
class Axis:
    """Maps data values to pixels on ``[p0, p1]`` (``p1 < p0`` for a y-axis drawn upwards).

    ``log``: positions by ``log10`` of the value between ``lo`` and ``hi`` (both positive); a 0 is then
    placed at ``p0`` and the positive range starts :data:`ZERO_GAP` of the way along (``zero``).
    """

    lo: float
    hi: float
    p0: float
    p1: float
    log: bool = False
    zero: bool = False

    def pos(self, v: float) -> float:
        span = self.p1 - self.p0
        if self.log:
            if v <= 0:
                return self.p0
            start = self.p0 + (ZERO_GAP * span if self.zero else 0.0)
            a, b = math.log10(self.lo), math.log10(self.hi)
            frac = 0.5 if b == a else (math.log10(v) - a) / (b - a)
            return start + frac * (self.p1 - start)
        frac = 0.5 if self.hi == self.lo else (v - self.lo) / (self.hi - self.lo)
        return self.p0 + frac * span


def x_axis_for(
    xs: Sequence[float], p0: float, p1: float, *, log: bool | None = None
) -> tuple[Axis, list[float]]:
    """The x-axis of these values and its ticks: log when the positive values span ≥ 2 decades (``log``
    forces it either way: training steps are linear), ticks at the values themselves when there are at most
    12 of them (label budgets), round ticks otherwise (steps)."""
    values = sorted(set(float(x) for x in xs))
    if not values:
        return Axis(0.0, 1.0, p0, p1), [0.0, 1.0]
    pos = [x for x in values if x > 0]
    if log is None:
        log = bool(pos) and min(values) >= 0 and max(pos) / min(pos) >= 100
    if log and pos and min(values) >= 0:
        axis = Axis(min(pos), max(pos), p0, p1, log=True, zero=0.0 in values)
        ticks = values if len(values) <= 12 else [0.0] * (0.0 in values) + _decades(min(pos), max(pos))
        return axis, ticks
    lo, hi = values[0], values[-1]
    ticks = values if len(values) <= 12 else nice_ticks(lo, hi, 6)
    return Axis(lo, hi, p0, p1), ticks


def _decades(lo: float, hi: float) -> list[float]:
    return [10.0**k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]


def _frame(width: int, height: int, title: str) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}">',
        f'<text x="0" y="16" font-size="13" font-weight="bold">{_e(title)}</text>',
    ]


#: Characters per line of a legend name: the legend's column (:data:`LAYOUT` right) holds 22 at 11 px.
LEGEND_LINE_CHARS = 22


def _legend(names: Sequence[str], x: float, y: float, *, line: bool) -> list[str]:
    """The series names, each whole (wrapped to :data:`LEGEND_LINE_CHARS` per line) with its full text
    as a tooltip."""
    out = [f'<g class="legend" transform="translate({x:.1f},{y:.1f})">']
    yy = 0
    for i, name in enumerate(names):
        color = COLORS[i % len(COLORS)]
        mark = (
            f'<line x1="0" y1="{yy + 6}" x2="16" y2="{yy + 6}" stroke="{color}" stroke-width="2"/>'
            if line
            else f'<rect x="2" y="{yy}" width="12" height="12" fill="{color}"/>'
        )
        lines = wrap_label(name, LEGEND_LINE_CHARS)
        out.append(
            f'<g class="series-name"><title>{_e(name)}</title>{mark}'
            + _label_text(lines, 22, yy + 10, 'font-size="11"')
            + "</g>"
        )
        yy += 18 + LINE_PX * (len(lines) - 1)
    out.append("</g>")
    return out


def _y_axis(
    lo: float, hi: float, top: float, bottom: float, left: float, right: float, percent: bool, label: str
) -> tuple[Axis, list[str]]:
    axis = Axis(lo, hi, bottom, top)
    parts = [f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#6b7385"/>']
    for t in nice_ticks(lo, hi, 5):
        y = axis.pos(t)
        shown = f"{t * 100:.0f}" if percent else _fmt(t)
        parts.append(
            f'<g class="ytick"><line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#eef0f4"/>'
            f'<text x="{left - 5}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{shown}</text></g>'
        )
    if label:
        parts.append(
            f'<text x="12" y="{(top + bottom) / 2:.1f}" font-size="11" text-anchor="middle" '
            f'transform="rotate(-90 12 {(top + bottom) / 2:.1f})">{_e(label)}</text>'
        )
    return axis, parts


def _y_range(values: Sequence[float], percent: bool) -> tuple[float, float]:
    if percent:
        return 0.0, max(1.0, max(values, default=1.0))
    if not values:
        return 0.0, 1.0
    lo, hi = min(values), max(values)
    if lo == hi:
        lo, hi = lo - (abs(lo) or 1.0) * 0.1, hi + (abs(hi) or 1.0) * 0.1
    ticks = nice_ticks(lo, hi, 5)
    return min(lo, ticks[0]), max(hi, ticks[-1])


def line_chart_svg(
    series: Mapping[str, Sequence[Point]],
    *,
    title: str,
    x_label: str = "",
    y_label: str = "",
    percent: bool = True,
    x_log: bool | None = None,
    width: int = 620,
    height: int = 320,
    bands: Mapping[str, Sequence[BandPoint]] | None = None,
) -> str:
    """One polyline per series (a missing y leaves a gap), a dot with its value at each point, and a legend
    naming the series. ``percent``: y in ``[0, 1]`` shown as 0–100; else an axis fitted to the values.
    ``x_log``: ``None`` decides by the span (:func:`x_axis_for`). ``bands``: per series, ``(x, lo, hi)``
    drawn as a translucent area under the line (a lone x as a vertical bar); its ``data-band`` attribute
    lists ``x:lo:hi`` so a reader (and the tests) can check what was drawn."""
    left, top = LAYOUT["left"], LAYOUT["top"]
    right, bottom = width - LAYOUT["right"], height - LAYOUT["bottom"]
    bands = bands or {}
    xs = [x for pts in series.values() for x, _ in pts]
    ys = [y for pts in series.values() for _, y in pts if y is not None and math.isfinite(y)]
    ys += [v for pts in bands.values() for _, lo, hi in pts for v in (lo, hi) if math.isfinite(v)]
    xaxis, xticks = x_axis_for(xs, left, right, log=x_log)
    lo, hi = _y_range(ys, percent)
    yaxis, parts = _y_axis(lo, hi, top, bottom, left, right, percent, y_label)
    parts = _frame(width, height, title) + parts
    parts.append(f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#6b7385"/>')
    for t in xticks:
        x = xaxis.pos(t)
        parts.append(
            f'<g class="xtick"><line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 4}" '
            f'stroke="#6b7385"/><text x="{x:.1f}" y="{bottom + 16}" font-size="11" '
            f'text-anchor="middle">{_fmt(t)}</text></g>'
        )
    if x_label:
        scale = " (log scale)" if xaxis.log else ""
        parts.append(
            f'<text x="{(left + right) / 2:.1f}" y="{height - 8}" font-size="11" '
            f'text-anchor="middle">{_e(x_label + scale)}</text>'
        )
    if not ys:
        parts.append(f'<text x="{left + 10}" y="{top + 20}" font-size="12" fill="#6b7385">no data</text>')
    for i, (name, pts) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        runs: list[list[str]] = [[]]
        dots = []
        for x, y in sorted(pts, key=lambda p: p[0]):
            if y is None or not math.isfinite(y):
                runs.append([])
                continue
            px, py = xaxis.pos(x), yaxis.pos(y)
            runs[-1].append(f"{px:.1f},{py:.1f}")
            shown = f"{y * 100:.1f}%" if percent else _fmt(y)
            dots.append(
                f'<circle class="point" cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{color}" '
                f'data-series="{_e(name)}" data-x="{_fmt(x)}" data-y="{y!r}">'
                f"<title>{_e(name)} @ {_fmt(x)}: {_e(shown)}</title></circle>"
            )
        parts.append(f'<g class="series" data-series="{_e(name)}">')
        parts += _band(name, bands.get(name, ()), xaxis, yaxis, color)
        parts += [
            f'<polyline points="{" ".join(r)}" fill="none" stroke="{color}" stroke-width="2"/>'
            for r in runs
            if len(r) > 1
        ]
        parts += dots
        parts.append("</g>")
    parts += _legend(list(series), right + 14, top, line=True)
    parts.append("</svg>")
    return "".join(parts)


def _band(name: str, pts: Sequence[BandPoint], xaxis: Axis, yaxis: Axis, color: str) -> list[str]:
    pts = sorted((p for p in pts if math.isfinite(p[1]) and math.isfinite(p[2])), key=lambda p: p[0])
    if not pts:
        return []
    data = " ".join(f"{_fmt(x)}:{lo!r}:{hi!r}" for x, lo, hi in pts)
    attrs = f'class="band" data-series="{_e(name)}" data-band="{data}" fill="{color}" fill-opacity="0.18"'
    if len(pts) == 1:
        x, lo, hi = pts[0]
        px = xaxis.pos(x)
        return [
            f'<line {attrs} x1="{px:.1f}" y1="{yaxis.pos(lo):.1f}" x2="{px:.1f}" y2="{yaxis.pos(hi):.1f}" '
            f'stroke="{color}" stroke-opacity="0.35" stroke-width="6"/>'
        ]
    upper = [f"{xaxis.pos(x):.1f},{yaxis.pos(hi):.1f}" for x, _, hi in pts]
    lower = [f"{xaxis.pos(x):.1f},{yaxis.pos(lo):.1f}" for x, lo, _ in reversed(pts)]
    return [f'<polygon {attrs} stroke="none" points="{" ".join(upper + lower)}"/>']


def grouped_bar_chart_svg(
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    *,
    title: str,
    y_label: str = "",
    percent: bool = True,
    width: int | None = None,
    height: int = 320,
) -> str:
    """One group of bars per ``groups`` entry (a benchmark), one bar per series (a variant) with its value
    written above it; ``series[name][j]`` is the value in group ``j`` (``None``: no bar, shown as –)."""
    n = max(1, len(series))
    slot = max(14, min(40, 320 // n))
    group_w = slot * n + 24
    width = width or max(420, LAYOUT["left"] + LAYOUT["right"] + group_w * max(1, len(groups)))
    left, top = LAYOUT["left"], LAYOUT["top"]
    # a group's name wraps within its slot (shown whole); the chart grows by the extra lines
    per_line = max(6, int(((width - LAYOUT["left"] - LAYOUT["right"]) / max(1, len(groups)) - 4) / 6.2))
    group_lines = [wrap_label(g, per_line) for g in groups]
    height += LINE_PX * (max((len(lines) for lines in group_lines), default=1) - 1)
    right, bottom = width - LAYOUT["right"], height - LAYOUT["bottom"]
    vals = [v for vs in series.values() for v in vs if v is not None and math.isfinite(v)]
    lo, hi = _y_range([0.0, *vals], percent)
    yaxis, parts = _y_axis(min(lo, 0.0), hi, top, bottom, left, right, percent, y_label)
    parts = _frame(width, height, title) + parts
    parts.append(f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#6b7385"/>')
    gw = (right - left) / max(1, len(groups))
    bar = min(slot, (gw - 12) / n)
    base = yaxis.pos(0.0)
    for j, g in enumerate(groups):
        gx = left + j * gw + (gw - bar * n) / 2
        parts.append(
            f"<g><title>{_e(g)}</title>"
            + _label_text(
                group_lines[j],
                left + (j + 0.5) * gw,
                bottom + 16,
                'class="group" font-size="11" text-anchor="middle"',
            )
            + "</g>"
        )
        for i, (name, vs) in enumerate(series.items()):
            v = vs[j] if j < len(vs) else None
            x = gx + i * bar
            if v is None or not math.isfinite(v):
                parts.append(
                    f'<text x="{x + bar / 2:.1f}" y="{base - 4:.1f}" font-size="10" '
                    f'text-anchor="middle">–</text>'
                )
                continue
            y = yaxis.pos(v)
            shown = f"{v * 100:.1f}" if percent else _fmt(v)
            parts.append(
                f'<g class="bar" data-series="{_e(name)}" data-group="{_e(g)}" data-y="{v!r}">'
                f"<title>{_e(name)} · {_e(g)}: {shown}</title>"
                f'<rect x="{x + 1:.1f}" y="{min(y, base):.1f}" width="{max(bar - 2, 1):.1f}" '
                f'height="{abs(base - y):.1f}" fill="{COLORS[i % len(COLORS)]}"/>'
                f'<text class="value" x="{x + bar / 2:.1f}" y="{min(y, base) - 3:.1f}" font-size="10" '
                f'text-anchor="middle">{shown}</text></g>'
            )
    parts += _legend(list(series), right + 14, top, line=False)
    parts.append("</svg>")
    return "".join(parts)


def bar_chart_svg(
    items: Sequence[tuple[str, float]],
    *,
    title: str,
    max_value: float = 1.0,
    percent: bool = True,
    width: int = 520,
) -> str:
    """A horizontal bar chart (label, value) as inline SVG; values are clipped to ``[0, max_value]``.

    Labels are shown whole: the label column widens to the longest line (up to
    :data:`LABEL_LINE_CHARS` characters) and a longer label wraps onto more lines, its row growing with
    it; the chart is then wider than ``width`` by what the labels need beyond the default column."""
    row_h, top = 20, 28
    wrapped = [wrap_label(label) for label, _ in items]
    longest = max((len(line) for lines in wrapped for line in lines), default=0)
    label_w = max(170, math.ceil(longest * CHAR_PX) + 12)
    bar_w = width - 170 - 70
    width = label_w + bar_w + 70
    heights = [row_h + LINE_PX * (len(lines) - 1) for lines in wrapped]
    height = top + (sum(heights) if items else row_h) + 8
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}">',
        f'<text x="0" y="16" font-size="13" font-weight="bold">{_e(title)}</text>',
    ]
    if not items:
        parts.append(f'<text x="0" y="{top + 14}" font-size="12" fill="#6b7385">no data</text>')
    y = top
    for (label, value), lines, h in zip(items, wrapped, heights, strict=True):
        frac = 0.0 if max_value <= 0 else min(max(value / max_value, 0.0), 1.0)
        shown = f"{value * 100:.1f}%" if percent else f"{value:g}"
        y += h
        y_bar = y - row_h  # the bar beside the label's last line
        parts.append(
            f"<g><title>{_e(label)}: {_e(shown)}</title>"
            + _label_text(lines, label_w - 6, y - h + 14, 'font-size="12" text-anchor="end"')
            + f'<rect x="{label_w}" y="{y_bar + 3}" width="{bar_w}" height="{row_h - 6}" fill="#eef0f4"/>'
            f'<rect x="{label_w}" y="{y_bar + 3}" width="{frac * bar_w:.1f}" height="{row_h - 6}" fill="#3b6fd8"/>'
            f'<text x="{label_w + bar_w + 6}" y="{y_bar + 14}" font-size="12">{_e(shown)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def histogram_svg(values: Sequence[int], *, title: str, width: int = 420, height: int = 200) -> str:
    """A histogram of small non-negative integers (e.g. turns per trial) as inline SVG, one bar per value."""
    counts = Counter(int(v) for v in values)
    lo, hi = (min(counts), max(counts)) if counts else (0, 0)
    bins = list(range(lo, hi + 1))
    top, bottom, left = 28, 24, 30
    plot_h = height - top - bottom
    slot = min((width - left - 10) / max(1, len(bins)), 48.0)
    peak = max(counts.values(), default=1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}">',
        f'<text x="0" y="16" font-size="13" font-weight="bold">{_e(title)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 10}" y2="{top + plot_h}" stroke="#6b7385"/>',
        f'<text x="{left - 4}" y="{top + 10}" font-size="11" text-anchor="end">{peak}</text>',
    ]
    if not counts:
        parts.append(f'<text x="{left}" y="{top + 20}" font-size="12" fill="#6b7385">no data</text>')
    for i, b in enumerate(bins):
        c = counts.get(b, 0)
        h = plot_h * c / peak if peak else 0
        x = left + i * slot
        parts.append(
            f"<g><title>{b}: {c}</title>"
            f'<rect x="{x + 2:.1f}" y="{top + plot_h - h:.1f}" width="{max(slot - 4, 1):.1f}" height="{h:.1f}" '
            f'fill="#3b6fd8"/>'
            f'<text x="{x + slot / 2:.1f}" y="{height - 8}" font-size="11" text-anchor="middle">{b}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)

"""The report's SVG blocks: valid SVG (parsed by xml.etree), ticks and known points at the coordinates the
layout gives by hand, a 0 budget at the left edge of a log axis, legends naming every series."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from datadojo.runs.charts import bar_chart_svg, grouped_bar_chart_svg, line_chart_svg, nice_ticks, x_axis_for

NS = "{http://www.w3.org/2000/svg}"


def _tree(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    return root


def _xticks(root: ET.Element) -> dict[str, float]:
    out = {}
    for g in root.iter(f"{NS}g"):
        if g.get("class") == "xtick":
            t = g.find(f"{NS}text")
            out[t.text] = float(t.get("x"))
    return out


def _legend(root: ET.Element) -> list[str]:
    g = next(g for g in root.iter(f"{NS}g") if g.get("class") == "legend")
    return [_shown(t) for t in g.iter(f"{NS}text")]


def _shown(text: ET.Element) -> str:
    """A label as a reader sees it: its lines (``<tspan>``) joined by a space."""
    return " ".join(s.strip() for s in text.itertext() if s.strip())


def test_label_budget_curve_is_log_x_with_zero_at_the_left_edge() -> None:
    series = {
        "warm-up on": [(0, 0.25), (8, 0.4), (64, 0.5), (2048, 0.75)],
        "warm-up off": [(0, 0.25), (8, 0.3), (64, 0.45), (2048, 0.7)],
    }
    root = _tree(line_chart_svg(series, title="shop-sql", x_label="labelled examples"))
    # layout by hand: width 620 → plot x from 60 to 450; 0 at 60; positives from 60 + 0.1·390 = 99 to 450;
    # 64 = 8·8 and 2048 = 8·256 → log fraction 3/8 → 99 + 0.375·351 = 230.625; y: 274 (0) … 34 (1) → 0.5 ↦ 154
    ticks = _xticks(root)
    assert ticks == {"0": 60.0, "8": 99.0, "64": 230.6, "2048": 450.0}
    pts = {
        (c.get("data-series"), c.get("data-x")): (float(c.get("cx")), float(c.get("cy")))
        for c in root.iter(f"{NS}circle")
    }
    assert pts[("warm-up on", "64")] == (230.6, 154.0)
    assert pts[("warm-up off", "0")] == (60.0, 274.0 - 0.25 * 240)
    assert _legend(root) == ["warm-up on", "warm-up off"]
    assert "(log scale)" in ET.tostring(root, encoding="unicode")
    assert len([p for p in root.iter(f"{NS}polyline")]) == 2


def test_a_narrow_range_is_linear_and_a_missing_value_leaves_a_gap() -> None:
    axis, ticks = x_axis_for([0.0, 0.5, 1.0], 60, 450)
    assert not axis.log and ticks == [0.0, 0.5, 1.0] and axis.pos(0.5) == 255.0
    svg = line_chart_svg({"γ=cosine": [(1, 0.9), (2, None), (3, 0.5), (4, 0.3)]}, title="γ", percent=False)
    root = _tree(svg)
    # the gap splits the line: one polyline of the two points after it, the lone first point is a dot
    assert len(list(root.iter(f"{NS}polyline"))) == 1 and len(list(root.iter(f"{NS}circle"))) == 3


def test_many_steps_get_round_ticks_on_a_linear_axis() -> None:
    axis, ticks = x_axis_for(list(range(1, 101)), 0, 100, log=False)
    assert not axis.log and ticks == [20.0, 40.0, 60.0, 80.0, 100.0]
    assert x_axis_for(list(range(1, 101)), 0, 100)[0].log  # two decades: log unless told
    assert nice_ticks(0, 1, 5) == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_grouped_bars_one_group_per_benchmark_values_labelled() -> None:
    svg = grouped_bar_chart_svg(
        ["DABench", "BIRD"],
        {"con-select": [0.5, 0.25], "non-con": [0.125, None]},
        title="curation strategies",
        width=620,
    )
    root = _tree(svg)
    bars = {
        (g.get("data-series"), g.get("data-group")): g for g in root.iter(f"{NS}g") if g.get("class") == "bar"
    }
    assert set(bars) == {("con-select", "DABench"), ("con-select", "BIRD"), ("non-con", "DABench")}
    rect = bars[("con-select", "DABench")].find(f"{NS}rect")
    # y: 0 ↦ 274, 1 ↦ 34: a bar of 0.5 rises from 274 to 154
    assert float(rect.get("y")) == 154.0 and float(rect.get("height")) == 120.0
    labels = [t.text for g in bars.values() for t in g.iter(f"{NS}text") if t.get("class") == "value"]
    assert sorted(labels) == ["12.5", "25.0", "50.0"]
    groups = [t.text for t in root.iter(f"{NS}text") if t.get("class") == "group"]
    assert groups == ["DABench", "BIRD"] and _legend(root) == ["con-select", "non-con"]


def test_a_band_is_drawn_under_its_line_from_min_to_max() -> None:
    # two x (linear, 60 … 450), y in percent: 274 (0) … 34 (1) → 0.4 ↦ 178, 0.6 ↦ 130, 0.5 ↦ 154, 0.7 ↦ 106
    svg = line_chart_svg(
        {"rl on": [(8, 0.5), (16, 0.6)], "rl off": [(8, 0.3)]},
        title="band",
        bands={"rl on": [(8, 0.4, 0.6), (16, 0.5, 0.7)], "rl off": [(8, 0.2, 0.4)]},
    )
    root = _tree(svg)
    (poly,) = root.iter(f"{NS}polygon")
    assert poly.get("data-series") == "rl on" and poly.get("data-band") == "8:0.4:0.6 16:0.5:0.7"
    # upper edge left to right, then the lower edge back
    assert poly.get("points") == "60.0,130.0 450.0,106.0 450.0,154.0 60.0,178.0"
    (lone,) = [e for e in root.iter(f"{NS}line") if e.get("class") == "band"]  # a single x: a vertical bar
    assert (lone.get("x1"), lone.get("y1"), lone.get("y2")) == ("60.0", str(274 - 0.2 * 240), "178.0")
    # drawn before the line of its series, so the line sits on top
    group = next(
        g for g in root.iter(f"{NS}g") if g.get("class") == "series" and g.get("data-series") == "rl on"
    )
    assert [c.tag for c in group][:2] == [f"{NS}polygon", f"{NS}polyline"]


# DA-Code / DAEval-style category names as users see them (longer than the old 26- and 22-character cuts)
LONG = "Correlation Analysis and Statistical Hypothesis Testing"
ARM = "con-select · max_new_tokens=8192 · seed 3"


def test_bar_labels_are_shown_whole_with_the_full_label_as_a_tooltip() -> None:
    root = _tree(bar_chart_svg([(LONG, 0.5), ("Summary Statistics", 1.0)], title="pass@1 by category"))
    groups = [g for g in root.iter(f"{NS}g")]
    labels = [_shown(g.find(f"{NS}text")) for g in groups]
    assert labels == [LONG, "Summary Statistics"]  # whole, not "Correlation Analysis and S…"
    assert [g.find(f"{NS}title").text for g in groups] == [f"{LONG}: 50.0%", "Summary Statistics: 100.0%"]
    # every line fits left of the bars: 7 px a character, right-aligned at the label column's edge
    track = float(next(r for r in root.iter(f"{NS}rect") if r.get("fill") == "#eef0f4").get("x"))
    first = groups[0].find(f"{NS}text")
    lines = [s.text for s in first.iter(f"{NS}tspan")]
    assert len(lines) > 1 and all(len(line) * 7 <= track for line in lines)
    # rows do not overlap: the second label starts below the first label's last line
    assert float(groups[1].find(f"{NS}text").get("y")) > float(first.get("y")) + 13 * (len(lines) - 1)


def test_legend_and_group_names_are_shown_whole() -> None:
    svg = grouped_bar_chart_svg([LONG, "shop-sql"], {ARM: [0.4, 0.5], "random": [0.3, 0.2]}, title="t")
    root = _tree(svg)
    assert _legend(root) == [ARM, "random"]
    groups = [_shown(t) for t in root.iter(f"{NS}text") if t.get("class") == "group"]
    assert groups == [LONG, "shop-sql"]

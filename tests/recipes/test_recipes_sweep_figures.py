"""The papers' studies as sweeps, end to end on CPU (loopback teacher, toy student), one test per figure kind:

* EnvLunch Fig. 1 — a 2-key sweep (label budget × warm-up on/off): curves over the budget, one series per arm,
  with the curve-level gain and matching budget beside them; the downstream fine-tuning of both arms sees
  the same labelled examples in the same order and differs only in the checkpoint it starts from;
* DataMind Fig. 4 / Figs. 6–7 — a γ-schedule sweep: grouped bars of the checkpoint that differs (+ RL), and
  the RL runs' per-step γ, reward and entropy read from the trainers' own ``metrics.jsonl``.

Every chart is parsed with ``xml.etree`` and its points are checked against the stage results."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("torch")

from recipe_fakes import EXAMPLES, judge, teacher, write_recipe

from datadojo.jsonl import iter_jsonl, read_tasks, write_jsonl_atomic
from datadojo.recipes import load_recipe, parse_sweeps, run
from datadojo.recipes.curves import curve_gain, matching_budget
from datadojo.testing.server import ScriptedLLMServer
from datadojo.types import DataFile, Task

NS = "{http://www.w3.org/2000/svg}"


def _svgs(html: str) -> list[ET.Element]:
    """Every inline chart of a report page, parsed (a malformed one raises here)."""
    return [ET.fromstring(m) for m in re.findall(r"<svg .*?</svg>", html, flags=re.S)]


def _title(svg: ET.Element) -> str:
    return svg.get("aria-label") or ""


def _legend(svg: ET.Element) -> list[str]:
    g = next(g for g in svg.iter(f"{NS}g") if g.get("class") == "legend")
    return [t.text or "" for t in g.iter(f"{NS}text")]


def _points(svg: ET.Element) -> dict[tuple[str, str], float]:
    return {(c.get("data-series"), c.get("data-x")): float(c.get("data-y")) for c in svg.iter(f"{NS}circle")}


def _labelled(path: Path, n: int) -> Path:
    """A labelled downstream task file (questions over the shop database, with answers)."""
    db = DataFile(path=str(EXAMPLES / "data" / "shop.sqlite"), kind="sqlite")
    tasks = [
        Task(id=f"lab-{i}", question=f"How many orders have id above {i}?", files=[db], answer=str(10 - i))
        for i in range(n)
    ]
    write_jsonl_atomic(path, tasks)
    return path


def test_envlunch_label_efficiency_curves_with_warmup_on_and_off(tmp_path: Path, toy_ckpt: Path) -> None:
    labelled = _labelled(tmp_path / "labelled.jsonl", 3)
    study = '[study]\narm = "stages.rl.enabled"\nmethod = true\nbaseline = false\n'
    path = write_recipe(
        "envlunch", tmp_path, toy_ckpt, extra=f'{study}[stages.downstream]\nlabelled = "{labelled}"\n'
    )
    sweeps = parse_sweeps(["stages.downstream.labels=0,2", "stages.rl.enabled=true,false"])
    result = run(load_recipe(path), sweeps=sweeps)
    arms = {
        "labels=2, enabled=True": "on",
        "labels=2, enabled=False": "off",
        "labels=0, enabled=True": "on0",
        "labels=0, enabled=False": "off0",
    }
    assert set(result.entries) == set(arms)
    m = {arms[v]: {k: e.manifest for k, e in es.items()} for v, es in result.entries.items()}
    # shared stages computed once: warm-up tasks, curation and SFT are one cache entry for all four variants
    for stage in ("synthesis", "curation", "sft", "eval_base", "eval_sft"):
        assert len({result.entries[v][stage].key for v in arms}) == 1
    runs = [i for i in result.items if i.stage == "sft" and i.status == "run"]
    assert len(runs) == 1
    # the two arms fine-tune on the same first 2 labelled examples, in the same order, from different weights
    on, off = m["on"]["downstream"], m["off"]["downstream"]
    assert on["task_ids"] == off["task_ids"] == ["lab-0", "lab-1"]
    assert [t.id for t in read_tasks(on["tasks"])] == [t.id for t in read_tasks(off["tasks"])]
    assert on["from"] == m["on"]["rl"]["model_dir"] and off["from"] == m["off"]["sft"]["model_dir"]
    assert on["from"] != off["from"] and on["steps"] == off["steps"] == 1
    assert m["on"]["eval_downstream"]["model_dir"] == on["model_dir"]
    # budget 0 is the checkpoint without downstream fine-tuning: its eval is the RL (or SFT) one, taken over
    assert m["on0"]["downstream"] == {"skipped": True, "model_dir": m["on"]["rl"]["model_dir"], "labels": 0}
    assert m["on0"]["eval_downstream"]["results"] == m["on0"]["eval_rl"]["results"]
    assert m["off0"]["eval_downstream"]["model_dir"] == m["off"]["sft"]["model_dir"]

    report = json.loads((result.out / "report.json").read_text())
    (fig,) = report["figures"]
    assert fig["kind"] == "curves" and fig["x"] == "stages.downstream.labels"
    series = fig["series"]["shop-sql"]
    score = {a: m[a]["eval_downstream"]["results"]["shop-sql"]["metrics"]["pass@1"] for a in arms.values()}
    assert series == {
        "rl on": [[0.0, score["on0"]], [2.0, score["on"]]],
        "rl off": [[0.0, score["off0"]], [2.0, score["off"]]],
    }
    # EnvLunch §4 from the curves: one positive budget → Δ = on(2) − off(2); match 1× or never (>1×)
    gain = fig["gain"]["shop-sql"]
    assert gain["curve_level_gain"] == pytest.approx(score["on"] - score["off"])
    want = "1×" if score["off"] >= score["on"] else "never (>1×)"
    assert gain["matching_budget_text"] == want == str(matching_budget({2: score["on"]}, {2: score["off"]}))
    assert curve_gain({2: score["on"]}, {2: score["off"]}) == pytest.approx(gain["curve_level_gain"])

    html = (result.out / "report.html").read_text()
    (chart,) = [s for s in _svgs(html) if "over labels" in _title(s)]
    assert _legend(chart) == ["rl on", "rl off"]
    assert _points(chart) == {
        ("rl on", "0"): score["on0"],
        ("rl on", "2"): score["on"],
        ("rl off", "0"): score["off0"],
        ("rl off", "2"): score["off"],
    }
    ticks = {
        t.find(f"{NS}text").text: float(t.find(f"{NS}text").get("x"))
        for t in chart.iter(f"{NS}g")
        if t.get("class") == "xtick"
    }
    assert ticks == {"0": 60.0, "2": 450.0}  # the 0 budget at the left edge, labelled
    assert "Δ (points)" in html and f"{100 * gain['curve_level_gain']:+.1f}" in html and want in html
    assert "| labels=2, enabled=False | + labels |" in (result.out / "report.md").read_text()


def test_datamind_gamma_schedule_sweep_bars_and_training_dynamics(tmp_path: Path, toy_ckpt: Path) -> None:
    with ScriptedLLMServer(teacher) as ts, ScriptedLLMServer(judge) as js:
        path = write_recipe(
            "datamind",
            tmp_path,
            toy_ckpt,
            teacher=f"openai:teacher@{ts.base_url}",
            judge=f"openai:judge@{js.base_url}",
        )
        text = path.read_text()
        path.write_text(text.replace("total_steps = 1\n", "total_steps = 2\ngamma_value = 0.2\n", 1))
        result = run(load_recipe(path), sweeps=parse_sweeps(["stages.rl.gamma_mode=cosine,fixed"]))
    variants = ["gamma_mode=cosine", "gamma_mode=fixed"]
    assert list(result.entries) == variants
    # synthesis, curation and SFT are shared; the two RL runs differ
    assert len({result.entries[v]["sft"].key for v in variants}) == 1
    assert len({result.entries[v]["rl"].key for v in variants}) == 2
    report = json.loads((result.out / "report.json").read_text())
    kinds = [f["kind"] for f in report["figures"]]
    assert kinds == ["bars", "dynamics"]
    bars, dyn = report["figures"]
    # bars only for the checkpoint the sweep changed (+ RL): a group per benchmark and the average
    assert bars["checkpoint"] == "eval_rl" and bars["groups"] == ["shop-sql", "average"]
    for v in variants:
        p = result.entries[v]["eval_rl"].manifest["results"]["shop-sql"]["metrics"]["pass@1"]
        assert bars["series"][v] == [p, p]
    # the per-step curves are the trainers' own logs: γ fixed at 0.2, cosine from 0.9
    logs = {
        v: [r for _, r in iter_jsonl(result.entries[v]["rl"].path / "run" / "metrics.jsonl")]
        for v in variants
    }
    assert {"gamma", "accuracy", "reward_mean"} <= set(dyn["series"])  # entropy only where it is logged
    for key, per_variant in dyn["series"].items():
        for v in variants:
            want = [[float(r["step"]), r[key]] for r in logs[v] if isinstance(r.get(key), float | int)]
            assert per_variant[v] == want
    assert [g for _, g in dyn["series"]["gamma"]["gamma_mode=fixed"]] == [0.2, 0.2]
    assert dyn["series"]["gamma"]["gamma_mode=cosine"][0][1] == pytest.approx(0.9)

    html = (result.out / "report.html").read_text()
    svgs = _svgs(html)
    (bar_chart,) = [s for s in svgs if _title(s).startswith("+ RL: pass@1")]
    assert _legend(bar_chart) == variants
    shown = {
        (g.get("data-series"), g.get("data-group")): next(
            t.text for t in g.iter(f"{NS}text") if t.get("class") == "value"
        )
        for g in bar_chart.iter(f"{NS}g")
        if g.get("class") == "bar"
    }
    assert shown == {
        (v, grp): f"{100 * bars['series'][v][0]:.1f}" for v in variants for grp in bars["groups"]
    }
    (gamma_chart,) = [s for s in svgs if _title(s).startswith("γ (SFT weight)")]
    assert _legend(gamma_chart) == variants
    assert _points(gamma_chart)[("gamma_mode=fixed", "2")] == 0.2
    assert len(list(gamma_chart.iter(f"{NS}polyline"))) == 2  # one line per variant over its 2 steps

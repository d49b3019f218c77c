"""The uncertainty-reduction probe of EnvLunch §6 ("Uncertainty Reduction in a Controlled Environment").

Paper: "The model queries a constructed sales table whose three columns each admit one of four encodings,
yielding 64 possible environments. All environments share the same prompt and final answer and differ only
in their hidden encodings [...] the model is asked for the total amount of the completed orders of one
product in one target town, given the column documentation and the first rows of a table covering 20
towns. The records of the target town write the town, status and product columns in one of four ways each
(e.g., the town as Marlborough, MLB, Mrlbr or Mboro). The documentation warns that some records use legacy
codes without naming them [...] and the model never works in the version that matches the documentation
[...] we execute each model action across all 64 hidden tables and discard those whose output differs from
the model's observation [...] uncertainty as log2 of their number, decreasing from 6 to 0 bits [...] Six
domains contribute 25 tasks each."

Here:

* :func:`make_probe_tasks` writes 6 × 25 tasks (``answer_kind="number"``; the table as ``sales.csv``,
  the documentation in ``Task.description``, the first five rows — never the target town's — in the
  question). Each task's world (i, j, k) ≠ (0, 0, 0), encoding 0 being the documented one. Every world is
  regenerated from the task's ``extra["probe"]`` (seed, domain, town, product), so nothing but the true
  world's file is stored.
* :func:`uncertainty_curves` replays a trajectory's code actions in all 64 worlds (a fresh namespace per
  world, each action compiled as the sandbox compiles a cell, a failed action's bindings rolled back as in
  chunked mode) and keeps the worlds whose output equals the recorded observation. Outputs are compared
  after the sandbox's truncation, with trailing spaces stripped; for a failed action only the final error
  line is compared. An action whose replay in the *true* world does not reproduce the observation (e.g.
  printed a timing) cannot be trusted and filters nothing; it is counted in ``unmatched``.

By default the replay runs in the sandbox (the actions are model-written code), as one cell per trajectory
under a policy that additionally allows ``exec``/``compile`` (the replay loop needs them; isolation still
applies); ``in_process=True`` runs the same cell here, for tests.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from datadojo.synth.envlunch.environment import stable_int
from datadojo.synth.envlunch.perturb import write_atomic_bytes
from datadojo.types import DataFile, Task, Trajectory

__all__ = [
    "DOMAINS",
    "TOWNS",
    "WORLDS",
    "ProbeCurve",
    "make_probe_tasks",
    "probe_frame",
    "uncertainty_curves",
]

TOWNS = (
    "Marlborough",
    "Ashbourne",
    "Kingsbridge",
    "Wetherby",
    "Helmsley",
    "Ludlow",
    "Tewkesbury",
    "Ambleside",
    "Bakewell",
    "Cirencester",
    "Dorchester",
    "Evesham",
    "Faversham",
    "Glastonbury",
    "Harrogate",
    "Ilfracombe",
    "Keswick",
    "Lavenham",
    "Malmesbury",
    "Northallerton",
)
STATUSES = ("completed", "pending", "cancelled")
STATUS_ENCODINGS = {
    "completed": ("completed", "C", "COMPL", "done"),
    "pending": ("pending", "P", "PEND", "open"),
    "cancelled": ("cancelled", "X", "CANC", "void"),
}
DOMAINS: dict[str, tuple[str, ...]] = {
    "coffee": ("Espresso Beans", "Decaf Blend", "Cold Brew", "Oat Latte", "Mocha Syrup", "Chai Mix"),
    "books": ("Field Guide", "Road Atlas", "Cook Book", "Sky Chart", "Poetry Reader", "Town History"),
    "hardware": ("Claw Hammer", "Wood Screws", "Tape Measure", "Paint Roller", "Hand Saw", "Spirit Level"),
    "pharmacy": (
        "Cough Syrup",
        "Hand Cream",
        "Sun Lotion",
        "Eye Drops",
        "Throat Lozenges",
        "Vitamin Tablets",
    ),
    "cycling": ("Inner Tube", "Brake Pads", "Chain Oil", "Bell Set", "Rear Light", "Saddle Cover"),
    "garden": ("Seed Tray", "Rose Feed", "Hose Reel", "Plant Pots", "Bird Feeder", "Garden Twine"),
}
WORLDS: tuple[tuple[int, int, int], ...] = tuple(itertools.product(range(4), range(4), range(4)))
TASKS_PER_DOMAIN = 25


def _town_encodings(town: str) -> tuple[str, str, str, str]:
    consonants = [c for c in town[1:].lower() if c not in "aeiou"]
    code = (town[0] + "".join(consonants[:2])).upper()
    skeleton = town[0] + "".join(consonants[:4])
    short = town[0] + town[-4:].lower()
    return (town, code, skeleton, short)


def _product_encodings(product: str, index: int) -> tuple[str, str, str, str]:
    initials = "".join(w[0] for w in product.split()).upper()
    return (product, product.upper().replace(" ", "_"), f"{initials}-{index + 1:02d}", product.lower())


def probe_frame(meta: dict[str, Any], world: tuple[int, int, int]) -> pd.DataFrame:
    """The sales table of one hidden world (same rows and amounts in every world; only the target town's
    town, status and product strings differ)."""
    rng = random.Random(stable_int("probe", meta["seed"]))
    products = DOMAINS[meta["domain"]]
    target = meta["town"]
    ti, si, pi = world
    rows = []
    order_id = 1000
    for town in TOWNS:
        n = 24 if town == target else rng.randint(10, 16)
        for _ in range(n):
            p_idx = rng.randrange(len(products))
            status = rng.choices(STATUSES, weights=(6, 2, 2))[0]
            qty = rng.randint(1, 12)
            price = round(rng.uniform(2.0, 40.0), 2)
            day = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            if town == target:
                town_s = _town_encodings(town)[ti]
                status_s = STATUS_ENCODINGS[status][si]
                product_s = _product_encodings(products[p_idx], p_idx)[pi]
            else:
                town_s, status_s, product_s = town, status, products[p_idx]
            order_id += 1
            rows.append((order_id, day, town_s, product_s, status_s, qty, price, round(qty * price, 2)))
    order = list(range(len(rows)))
    rng.shuffle(order)
    # the first rows the agent is shown are never the target town's
    first = [i for i in order if not _is_target(rows[i][2], target)][:5]
    order = first + [i for i in order if i not in set(first)]
    cols = ["order_id", "date", "town", "product", "status", "quantity", "unit_price", "amount"]
    return pd.DataFrame([rows[i] for i in order], columns=cols)


def _is_target(value: str, town: str) -> bool:
    return value in _town_encodings(town)


def _answer(meta: dict[str, Any]) -> float:
    frame = probe_frame(meta, (0, 0, 0))
    sel = frame[
        (frame["town"] == meta["town"])
        & (frame["status"] == "completed")
        & (frame["product"] == meta["product"])
    ]
    return round(float(sel["amount"].sum()), 2)


DOCUMENTATION = (
    "Columns of sales.csv: order_id (integer, unique), date (YYYY-MM-DD), town (the town's full name), "
    "product (the product's full name), status (one of 'completed', 'pending', 'cancelled'), quantity "
    "(units), unit_price, amount (= quantity × unit_price). Note: some records were imported from a legacy "
    "system and may use legacy codes."
)


def make_probe_tasks(out: str | Path, *, seed: int = 0, per_domain: int = TASKS_PER_DOMAIN) -> list[Task]:
    """Write the §6 probe tasks (6 domains × ``per_domain``) to ``out`` and their tables beside it."""
    from datadojo.jsonl import write_jsonl_atomic

    out = Path(out)
    root = out.with_name(out.name.split(".")[0] + ".probe")
    tasks = []
    for domain in DOMAINS:
        for n in range(per_domain):
            rng = random.Random(stable_int(seed, "probe-task", domain, n))
            products = DOMAINS[domain]
            meta = {
                "seed": stable_int(seed, domain, n),
                "domain": domain,
                "town": rng.choice(TOWNS),
                "product": rng.choice(products),
            }
            world = rng.choice([w for w in WORLDS if w != (0, 0, 0)])
            meta["world"] = list(world)
            frame = probe_frame(meta, world)
            task_id = f"envlunch-probe-{domain}-{n:02d}"
            rel = f"{root.name}/{task_id}/sales.csv"
            write_atomic_bytes(out.parent / rel, frame.to_csv(index=False).encode())
            head = frame.head(5).to_string(index=False)
            question = (
                f"What is the total amount of the completed orders of {meta['product']} in {meta['town']}? "
                f"Answer with a number.\n\nFirst rows of sales.csv:\n{head}"
            )
            tasks.append(
                Task(
                    id=task_id,
                    question=question,
                    files=[DataFile(path=rel, kind="csv")],
                    description=DOCUMENTATION,
                    answer=_answer(meta),
                    answer_kind="number",
                    source="envlunch-probe",
                    category=domain,
                    extra={"probe": meta},
                )
            )
    write_jsonl_atomic(out, tasks)
    return tasks


_REPLAY = r"""
import contextlib as _c, io as _io, json as _j, os as _o
from datadojo.sandbox.cells import compile_cell as _cc, truncate_observation as _tr
def _envlunch_replay(root, worlds, actions, limit):
    out = {}
    for w in worlds:
        _o.chdir(_o.path.join(root, w))
        ns = {"__name__": "__main__"}
        res = []
        for code in actions:
            buf = _io.StringIO()
            keep = dict(ns)
            ok = True
            try:
                with _c.redirect_stdout(buf), _c.redirect_stderr(buf):
                    exec(_cc(code), ns)
            except BaseException as e:
                ok = False
                ns.clear()
                ns.update(keep)
                buf.write(type(e).__name__ + ": " + str(e))
            text, _ = _tr(buf.getvalue(), limit)
            res.append([ok, text])
        out[w] = res
    _o.chdir(root)
    return out
"""


@dataclass
class ProbeCurve:
    """Remaining uncertainty (bits) after each code action of one trajectory."""

    task_id: str
    sample: int
    bits: list[float]
    unmatched: int = 0
    consistent: list[list[str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "sample": self.sample,
            "bits": self.bits,
            "unmatched": self.unmatched,
        }


def _norm(ok: bool, text: str) -> tuple[bool, str]:
    lines = [ln.rstrip() for ln in text.strip().splitlines()]
    if not ok:
        return (False, lines[-1] if lines else "")
    return (True, "\n".join(lines))


def _world_name(w: tuple[int, int, int]) -> str:
    return f"w{w[0]}{w[1]}{w[2]}"


def uncertainty_curves(
    tasks: dict[str, Task], trajectories: Sequence[Trajectory], *, in_process: bool = False, limit: int = 2048
) -> list[ProbeCurve]:
    """log2(#worlds consistent with the observations) after each code action, per trajectory (§6)."""
    curves = []
    for traj in trajectories:
        task = tasks.get(traj.task_id)
        if task is None or "probe" not in task.extra:
            raise ValueError(f"trajectory for {traj.task_id!r}: not a probe task in the task file")
        meta = task.extra["probe"]
        true_world = _world_name(tuple(meta["world"]))  # type: ignore[arg-type]
        turns = [t for t in traj.turns if t.action.kind == "code" and t.observation is not None]
        actions = [t.action.text for t in turns]
        with tempfile.TemporaryDirectory(prefix="envlunch-probe-") as tmp:
            for w in WORLDS:
                d = Path(tmp) / _world_name(w)
                d.mkdir()
                probe_frame(meta, w).to_csv(d / "sales.csv", index=False)
            outputs = _replay(tmp, [_world_name(w) for w in WORLDS], actions, limit, in_process=in_process)
        alive = {_world_name(w) for w in WORLDS}
        bits, unmatched, history = [], 0, []
        for i, turn in enumerate(turns):
            assert turn.observation is not None
            seen = _norm(turn.observation.status == "ok", turn.observation.text)
            if _norm(*outputs[true_world][i]) != seen:
                unmatched += 1  # the replay cannot reproduce this observation: it filters nothing
            else:
                alive = {w for w in alive if _norm(*outputs[w][i]) == seen}
            bits.append(math.log2(len(alive)))
            history.append(sorted(alive))
        curves.append(ProbeCurve(traj.task_id, traj.sample, bits, unmatched, history))
    return curves


def _replay(
    root: str, worlds: list[str], actions: list[str], limit: int, *, in_process: bool
) -> dict[str, Any]:
    """Per world, per action: ``[ok, output]`` of replaying the actions there."""
    if not actions:
        return {w: [] for w in worlds}
    if in_process:
        ns: dict[str, Any] = {}
        cwd = os.getcwd()
        try:
            exec(compile(_REPLAY, "<envlunch-probe>", "exec"), ns)
            return ns["_envlunch_replay"](root, worlds, actions, limit)
        finally:
            os.chdir(cwd)
    return _replay_sandbox(root, worlds, actions, limit)


def _replay_sandbox(root: str, worlds: list[str], actions: list[str], limit: int) -> dict[str, Any]:
    from datadojo.sandbox import Limits, SandboxConfig, run_cells
    from datadojo.sandbox.policy import PolicyConfig

    policy = PolicyConfig()
    policy = policy.replace(blocked_calls=policy.blocked_calls - {"exec", "compile"})
    config = SandboxConfig(
        policy=policy,
        limits=Limits(
            max_observation_chars=8_000_000, max_output_bytes=16_000_000, wall_s=600.0, cpu_s=600.0
        ),
    )
    files = [DataFile(path=str(Path(root) / w), kind="dir", name=w) for w in worlds]
    cell = (
        _REPLAY + "\nimport os as _os2\n_root = _os2.getcwd()\n"
        f"print('<<probe>>' + _j.dumps(_envlunch_replay(_root, {worlds!r}, {actions!r}, {limit})))\n"
    )
    res = run_cells([cell], files=files, config=config)[0]
    marker = [ln for ln in res.output.splitlines() if ln.startswith("<<probe>>")]
    if res.status != "ok" or not marker:
        raise RuntimeError(f"probe replay failed in the sandbox ({res.status}): {res.output[-500:]}")
    return json.loads(marker[-1][len("<<probe>>") :])
